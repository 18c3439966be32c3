//! The initial snapshot's decisions that need no connection: the state file that records
//! whether a copy finished (`state`), and the startup plan that decides, from that file and
//! the slot as found, whether a start streams, copies again or refuses (`plan`).
//!
//! Owns the state file's format and the startup rules. Never reads or writes a file, never
//! asks PostgreSQL or Feldera anything and never reads a clock: the shell reads the file and
//! the pipeline asks the questions, then both hand the answers in.

pub mod plan;
pub mod state;

pub use plan::{plan_startup, Action, Configured, Leftovers, Plan, StateRead};
pub use state::{
    rfc3339_utc, state_path, SlotNameError, SnapshotPhase, StateError, StateFile, StateRoute,
    FORMAT_VERSION,
};
