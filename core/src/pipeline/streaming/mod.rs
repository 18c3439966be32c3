//! The Streaming phase: XLogData and keepalives from the replication connection, converted
//! on arrival into the outbox, cut into batches, sent through the sink, and acknowledged to
//! PostgreSQL once durable. The ordered steps of a batch are where the streaming crash
//! points sit (`before_send`, `after_send`, `after_complete`, `after_ack`).
//!
//! Backpressure: events wait in a backlog (and reading is paused) while no batch can be sent
//! (the sink's window of `MAX_IN_FLIGHT_BATCHES` is full, or a Feldera transaction is being
//! started or committed) and the outbox is already due (rows, bytes, or a commit with
//! `BATCH_LINGER_MS=0`), so memory stays bounded by the window times the thresholds whatever
//! the transaction size. While draining (graceful stop) nothing more is read.
//!
//! With `FELDERA_TRANSACTIONS`, a batch that ends inside a source transaction (with `all`,
//! every batch; and the first batch of every session, so that a transaction an earlier run
//! left open is adopted) goes into a Feldera transaction, which the batch ending at a source
//! commit closes (`feldera_txn`). A transaction starts only once every earlier batch is
//! durable. A graceful stop inside a source transaction sends nothing that ends inside it and
//! leaves an open Feldera transaction open: the next start continues it. A TRUNCATE commits
//! the open one first: the retraction reads Feldera's keys, which only committed data shows.
//! See `docs/pipelining.md`.
//!
//! - `phase`: the phase's state, the stream's messages into the outbox, timers and draining;
//! - `sending`: cutting batches, sending them (inside Feldera transactions when on), and
//!   acknowledging once durable;
//! - `placing`: which route each Relation, row and TRUNCATE belongs to (partitions included,
//!   and what happens to a change the session's catalog cannot place);
//! - `skipping`: what the stream skips (routes copied apart, removed routes);
//! - `bound`: the state file's bound on the WAL Feldera may hold, written before a batch
//!   past it is sent;
//! - `copier`: routes copied online in chunks beside the stream (docs/online-copy.md),
//!   whose chunks the phase emits as transactions at their watermarks.
//!
//! Owns the replication connection, the relation cache, the outbox and the sink for one
//! session. The positions live in the run's ack tracker, which alone decides how far the
//! flush position may move; this phase reports it.

mod bound;
mod copier;
mod online;
mod phase;
mod placing;
mod sending;
mod skipping;

pub(crate) use copier::OnlineCopy;
pub(crate) use phase::Streaming;
pub(crate) use skipping::Skips;
