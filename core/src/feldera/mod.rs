//! Feldera HTTP API: request builders and response classification.
