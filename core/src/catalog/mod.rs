//! The catalog: every question slotline asks PostgreSQL about its own setup, and what it
//! makes of the answers. Each question is SQL text (or a replication command) with a strict
//! parser over the answer's rows; each verdict is a pure function over parsed answers.
//!
//! - `questions`: the publication, its tables and their shape, partitions, the slot, the
//!   replication commands (and the quoting every question uses);
//! - `types`: the column types that are not builtin (domains, enums, composites, arrays);
//! - `server`: the server's version and the settings, privileges and room `check` asks
//!   about, with the fix for each problem;
//! - `slot`: the slot's health (invalidated, retained WAL against the limits);
//! - `published`: what the publication publishes of each routed table (its column list, its
//!   row filter), which the copy reads exactly;
//! - `checks`: the verdicts that refuse a start before anything is created.
//!
//! Never here: a connection, a phase, a log line. The starting phase and `slotline check`
//! ask these questions over the wire and act on the verdicts.

pub mod checks;
pub mod published;
pub mod questions;
pub mod server;
pub mod slot;
pub mod types;
