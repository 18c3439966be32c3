//! The scripted world decision traces run in: a fake PostgreSQL that speaks the real wire
//! protocol (startup, catalog answers, CopyBoth), a fake Feldera that answers when the
//! script says so, a virtual clock, and a trace of every command the pipeline emits.
//!
//! Traces print relative times, counter ids and decoded frontend messages (never `Debug`
//! of internal structs), so a snapshot explains a rule to someone who has not read the code.
//! Decision lines (`ack`, `policy`, `batch`) appear whatever their level; other log lines
//! from `info` up.
//!
//! The harness keeps the drive contract strictly: the fake servers' answers are queued and
//! fed only once the pipeline's commands are drained, and it asserts that no command is left
//! before any input and that time never goes backwards.
//!
//! - `script`: the harness itself (`Script`: the drive loop, the virtual clock, the trace);
//! - `fake_pg`: the fake PostgreSQL's tables and answers; `wal`: pgoutput payload builders;
//! - `feldera`: the fake Feldera's answers, over `fake_feldera`'s tables.
//!
//! Test code only (`cfg(test)` or the `testing` feature); never in a shell's build.

mod fake_feldera;
mod fake_pg;
mod feldera;
mod script;
pub mod wal;

pub use fake_pg::{FakePartition, FakePg, FakeSlotHealth, FakeTable};
pub use script::{Operation, Script};
