//! The Starting phase: one session's replication connection runs the startup conversation
//! while Feldera is asked for the pipeline's schema, fault tolerance and incarnation, and
//! the shell reads the state file. Once the slot is known, the startup plan
//! (`snapshot::plan`) decides: stream from the slot, create it and stream, or snapshot
//! (record `pending`, drop the old slot, create one exporting a snapshot; without a slot or
//! `complete` file to replace, record `pending` only once the slot exists: docs/snapshot.md,
//! "Before anything is created") and hand over to the Snapshotting phase.
//!
//! - `phase`: the phase's state, the session's start and the decision about the slot;
//! - `feldera`: the Feldera side of a start (schema, fault tolerance, incarnation);
//! - `conversation`: the startup conversation's questions and state, `answers` what each
//!   answer means, `survey` the same conversation as `slotline check` runs it.
//!
//! Owns the replication connection until the stream opens or the snapshot begins, then
//! hands it over (with any events that arrived in the same read). Never reads the stream.

mod answers;
pub(crate) mod conversation;
mod feldera;
mod online;
mod phase;
mod survey;

pub(crate) use phase::Starting;
