//! The client conversation machine: startup, authentication, simple queries, COPY and
//! CopyBoth streaming over one PostgreSQL connection, without doing any I/O itself.
