//! pgoutput (logical replication protocol 1): message parser and relation cache.
