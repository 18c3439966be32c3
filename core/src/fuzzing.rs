//! Harness functions for the cargo-fuzz targets. They live here so that ordinary builds and
//! `cargo test` compile them and replay the committed corpora.
