//! The Snapshotting phase: the initial copy of every routed table, as of the slot's
//! consistent point, then the hand-over to streaming from that point.
//!
//! The replication connection created the slot with an exported snapshot and stays idle:
//! the snapshot lives only while it does. Worker connections import it (`SET TRANSACTION
//! SNAPSHOT`), the first one measures the tables, and the copy is cut into ranges
//! (`snapshot::ranges`) that the workers take in turn. Every COPY row goes through the same
//! value plans as streaming into the outbox; batches are awaited to `complete` like
//! streaming batches. When every row is durable (and, where Feldera may hold rows the copy
//! does not carry, those are retracted and the counts verified), the state file says
//! `complete` and `START_REPLICATION` begins at the consistent point: a row committed before
//! it was copied, one committed after it is streamed, and there is no third window.
//!
//! Memory is bounded by the outbox thresholds and the sink window: when both are full,
//! every worker stops reading until a batch is durable.
//!
//! Owns the replication connection (idle), the workers, the outbox and sink of the copy,
//! and the progress report. The crash points `snapshot_after_slot`, `snapshot_mid_copy`
//! and `snapshot_before_complete` sit here.
//!
//! - `phase`: the phase's state, the copy's batches and its end;
//! - `workers`: the worker connections, their snapshot import and the ranges they copy;
//! - `leftovers`: removing what Feldera holds that the copy does not carry.

mod leftovers;
mod phase;
mod workers;

pub(crate) use phase::Snapshotting;
