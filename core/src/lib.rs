//! slotline-core: the sans-io heart of slotline, a PostgreSQL → Feldera change-data-capture
//! connector.
//!
//! Everything here is a pure function or a state machine driven by inputs. The core never
//! reads a clock, the environment, a socket or a file, and never sleeps or spawns: time and
//! randomness arrive as inputs, and every side effect leaves as a command for a shell to
//! execute. That is what lets every acknowledgement, batching, retry and crash decision be
//! tested without a database. The design is written down in the repository's `docs/`
//! (`docs/README.md` lists the documents; `docs/architecture.md` describes this crate).
//!
//! # The drive loop
//!
//! [`pipeline::Pipeline`] implements [`io::Driver`]. A shell builds it, then repeats: drain
//! every command in order and execute it, ask for the next deadline, wait for the first
//! input or the deadline, and feed that back with the time. Because the core does no I/O,
//! the loop can run right here, with the "I/O" done by closures:
//!
//! ```
//! use slotline_core::config::Config;
//! use slotline_core::io::{Command, Driver, Input};
//! use slotline_core::pipeline::Pipeline;
//! use slotline_core::time::{Mono, Now, PgTime};
//! use slotline_core::timer::Deadline;
//!
//! /// The loop both shells run (`slotline_shell::run`), with its I/O passed in.
//! fn drive(
//!     core: &mut impl Driver,
//!     mut execute: impl FnMut(Command),
//!     mut wait: impl FnMut(Option<Deadline>) -> Input,
//!     mut now: impl FnMut() -> Now,
//! ) -> i32 {
//!     loop {
//!         while let Some(command) = core.poll_command() {
//!             if let Command::Exit { code, .. } = command {
//!                 return code;
//!             }
//!             execute(command);
//!         }
//!         let input = wait(core.poll_timeout());
//!         core.handle(now(), input);
//!     }
//! }
//!
//! let config = Config::from_pairs([
//!     ("PG_URL", "postgres://slotline@db.example:5432/app?sslmode=disable"),
//!     ("PG_PUBLICATION", "shop_pub"),
//!     ("TABLES", "users"),
//!     ("FELDERA_PIPELINE", "shop"),
//!     ("SNAPSHOT_MODE", "never"),
//! ])
//! .expect("a valid configuration");
//! let start = Now { mono: Mono(0), wall: PgTime(0) };
//! let mut pipeline = Pipeline::new(config, 7, start).expect("the configuration is usable");
//!
//! // Whatever the world does is an input; here the operator asks to stop at once.
//! let mut executed = Vec::new();
//! let code = drive(&mut pipeline, |c| executed.push(c), |_| Input::Shutdown, || start);
//!
//! // The first session asked for a connection before anything else, and a stop before
//! // streaming began exits 0.
//! assert!(matches!(executed[0], Command::PgConnect { .. }));
//! assert_eq!(code, slotline_core::io::exit::OK);
//! ```
//!
//! # Invariants, and where each is enforced
//!
//! - **The flush position never passes a commit whose rows are not all durable.** Each commit
//!   records the highest batch it needs; only the contiguous prefix of durable batches
//!   releases commits (`AckTracker::release`, behind [`ack::AckTracker::on_commit`] and
//!   [`ack::AckTracker::on_batch_durable`]). Checked by the property test
//!   `ack::tests::flush_is_monotonic_and_never_ahead_of_durable_commits`, by the random
//!   scenarios of `pipeline/tests/properties.rs`, and after every step by the `pipeline`
//!   fuzz target (`fuzzing::pipeline`).
//! - **The flush position never decreases, and is a commit's `end_lsn`, an idle keepalive's end of
//!   WAL or the slot's own position.** [`ack::AckTracker`] only moves it forward; the streaming
//!   phase hands it `end_lsn` (`pipeline/streaming/sending.rs`, `on_commit`). Asserted by the
//!   `pipeline` fuzz target.
//! - **A batch is durable only when Feldera says `complete`** (or, in the unsafe accepted
//!   mode, on HTTP 200): `pipeline/sink.rs` and `Streaming::on_sink_outcome`.
//! - **The received position is an XLogData's start, never its end of WAL, never zero:**
//!   [`ack::AckTracker::on_wal_data`].
//! - **An idle keepalive is acknowledged only with nothing open, pending, buffered or in
//!   flight:** [`ack::AckTracker::on_keepalive`], with the caller's half of the condition in
//!   `Streaming::on_keepalive`.
//! - **What is not durable is replayed, never lost:** ending a session forgets it
//!   ([`ack::AckTracker::reset_session`], from `Pipeline::end_session`), and the next session
//!   starts from the slot.
//! - **Memory is bounded by the thresholds, not by transaction size:** the outbox cuts at
//!   rows, bytes or linger ([`outbox::Outbox`]); one batch is in flight and reading pauses
//!   while it is full (`Streaming::blocked`, `Snapshotting::blocked`); frame lengths are
//!   capped before any allocation ([`wire::framing::MAX_FRAME_LEN`]).
//! - **Nothing follows `Exit`:** the command queue latches (`pipeline/queue.rs`, `Queue::push`),
//!   [`io::Driver::handle`] ignores later inputs, and `poll_timeout` returns `None`. Asserted
//!   by the `pipeline` fuzz target.
//! - **Commands are drained before the next input, and time never goes backwards:**
//!   debug assertions in `Pipeline`'s [`io::Driver::handle`]; the scripted harness
//!   (`testing/script.rs`) and the `pipeline` fuzz target fail on either.
//! - **A deadline exists whenever work is pending:** `Pipeline::refresh_timers` re-derives
//!   every timer after each input and arms `NoProgress` while work is pending. Asserted by
//!   the `pipeline` fuzz target.
//! - **Every failure is decided by one table, and every decision is traced:**
//!   `pipeline/policy.rs` (`decide`, `RULES`, `OVERRIDES`).
//! - **Every startup check runs before anything is created:** the order of
//!   `pipeline/starting/conversation.rs` and `answers.rs`, the verdicts in [`catalog::checks`];
//!   shown by the decision traces `refused_start_creates_no_slot_*`.
//! - **A state file that exists and cannot be read is never taken as absent:**
//!   [`snapshot::plan::plan_startup`] refuses it; [`snapshot::state::StateFile::parse`] is
//!   strict.
//! - **A snapshot is recorded complete only after every copied row is durable and the
//!   retracted tables' counts agree:** `Snapshotting::maybe_finish` and `finish`.
//! - **Decoders are total:** any bytes give a value or an [`error::DecodeError`], never a
//!   panic or an allocation sized by an untrusted length (`wire`, `pgoutput`, `value`,
//!   `copy`, `feldera`). Proven by the fuzz targets, whose seeds replay under `cargo test`.
//! - **A tuple matches its relation's shape:** [`pgoutput::RelationCache::check`].
//! - **Values are read under pinned session settings:**
//!   [`wire::frontend::PINNED_SESSION_SETTINGS`] sent at startup,
//!   [`catalog::checks::pinned_settings`] checks what the server reports.
//! - **No server-side timeout ends a session that waits by design:**
//!   [`wire::frontend::DISABLED_SERVER_TIMEOUTS`] sent at startup, and
//!   [`wire::frontend::DISABLE_TRANSACTION_TIMEOUT`] before a 17+ connection is ready (`conn`).
#![forbid(unsafe_code)]

pub mod ack;
pub mod backfill;
pub mod backoff;
pub mod catalog;
pub mod completion;
pub mod config;
pub mod conn;
pub mod contract;
pub mod convert;
pub mod copy;
pub mod crash;
pub mod error;
pub mod feldera;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod health;
pub mod io;
pub mod lag;
pub mod lsn;
pub mod ops;
pub mod outbox;
pub mod pgoutput;
pub mod pipeline;
pub mod progress;
pub mod report;
pub mod retract;
pub mod schema;
pub mod snapshot;
pub mod standby;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod time;
pub mod timer;
pub mod value;
pub mod wire;

pub use error::{DecodeError, DecodeErrorKind};
pub use lsn::Lsn;
