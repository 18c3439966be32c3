//! The pipeline: slotline's whole life as one state machine, driven by inputs (see `io` for
//! the drive contract). `lifecycle` holds the phases and every transition between them,
//! `routing` hands each input to its owner; each phase's own work lives in its module and
//! reports what should happen next as a `Next` (`handover`).
//!
//! ```text
//!                 ┌──(plan: snapshot)──► Snapshotting ──(copy durable, state complete)──┐
//!                 │                                                                      ▼
//!     new ──► Starting ──────────────(plan: stream)─────────────────────────────────► Streaming
//!                │  ▲                                              (TRUNCATE) ┌────────┤ ▲
//!                │  │                                                         ▼        │ │ (verified empty)
//!                │  │                                                     Retracting ──┼─┘
//!                │  ▲                                                                    │
//!   failure ─────┤  │ backoff elapsed                                                    │ SIGTERM
//!  (policy: end  ▼  │                                                                    ▼
//!  the session) BackingOff ◄───────────────── failure ───────────────────────────── Stopping
//!                                                                     (drained, confirmed: exit 0;
//!                                                                      a failure while stopping exits 0)
//!     any phase ──(policy: exit, crash point, stop before streaming)──► Exited
//! ```
//!
//! - **Starting** (`starting`): one replication connection asks its questions (settings,
//!   publication, tables, Feldera's schema, the slot), the state file is read, and the
//!   startup plan decides: stream from the slot, or snapshot first.
//! - **Snapshotting** (`snapshotting`): workers copy every routed table under the slot's
//!   exported snapshot; once every row is durable the state file says `complete` and
//!   replication starts at the consistent point.
//! - **Streaming** (`streaming`): changes are converted into the outbox, cut into batches,
//!   sent through the sink and acknowledged once durable.
//! - **Retracting** (`retracting`): a TRUNCATE holds the stream while every key the
//!   truncated Feldera tables hold is deleted and the tables are verified empty; then the
//!   stream goes on with the rest of the transaction.
//! - **Stopping** (`stopping`): no more reading; what is buffered is sent, the final position
//!   reported and confirmed on a second connection.
//! - **BackingOff**: the session ended; the next starts when the backoff elapses.
//! - **Exited**: an `Exit` command was emitted; nothing else ever is.
//!
//! What outlives a phase: the configuration (`env`), the run's progress (`run`: the ack
//! tracker, backoff, no-progress deadline, crash injector), the command queue (`queue`) and
//! the links to PostgreSQL (`pg_link`, one per connection) and to Feldera (`feldera_link`:
//! the requests that outlive their session, the quarantine, the transaction gate). A phase
//! borrows them for one input as a `Cx` (`cx`). Failures go through one table (`policy`),
//! which decides whether a session ends or the process exits. Beside the phases run the
//! slot monitor (`monitor`: samples the slot while one exists, fails the run when it is
//! invalidated), the keeper (`keeper`: Feldera's restarts and checkpoints) and the meter
//! (`meter`: counts what reaches Feldera); `Pipeline::health` publishes them with the
//! phase's own figures.
//!
//! The operator's one-shot commands (`check`, `status`, `drop-slot`, `ddl`) are machines of
//! their own over the same parts, in `ops`.

mod cx;
pub(crate) mod durability;
pub(crate) mod env;
mod feldera_link;
mod feldera_txn;
mod handover;
mod keeper;
mod lifecycle;
mod meter;
mod monitor;
pub(crate) mod pg_link;
pub(crate) mod policy;
pub(crate) mod queue;
mod replans;
mod retracting;
mod retraction;
mod routing;
mod run;
mod sink;
mod snapshotting;
pub(crate) mod starting;
mod stopping;
mod streaming;

pub use lifecycle::Pipeline;

#[cfg(test)]
mod tests;
