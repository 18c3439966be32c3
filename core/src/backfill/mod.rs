//! The online copy's building blocks (docs/online-copy.md): a table copied in primary-key
//! ordered chunks, each read in its own short transaction while the stream runs, and
//! reconciled with the stream at watermarks in the WAL.
//!
//! - [`chunk`]: reading one table's chunks on a connection of their own, from the
//!   connection's events to each chunk and what judges it.
//! - [`key`]: a row's primary key as a chunk's COPY row and a streamed change both give it.
//! - [`keyset`]: the SQL of one chunk: its transaction and snapshot, the keyset COPY of the
//!   next rows in primary-key order, and the watermarks around it.
//! - [`xid`]: a chunk's MVCC snapshot (`pg_current_snapshot()`) and which streamed
//!   transactions it saw.
//! - [`table_copy`]: one table's copy as the stream sees it: each streamed message's part in
//!   judging the chunk that waits, and where its rows are emitted.
//! - [`window`]: the reconciliation rule: which of a chunk's rows may be emitted at its high
//!   watermark, and when a chunk must be read again.
//!
//! Pure functions and data: no pipeline state, no I/O. The pipeline does not use them yet
//! (docs/online-copy.md, "Status").

pub mod chunk;
pub mod key;
pub mod keyset;
pub mod table_copy;
pub mod window;
pub mod xid;
