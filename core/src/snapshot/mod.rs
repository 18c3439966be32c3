//! The initial snapshot. Decisions that need no connection: the state file that records
//! whether a copy finished (`state`), the startup plan that decides from that file and the
//! slot whether a start streams, copies again or refuses (`plan`), which ranges the workers
//! copy (`ranges`), the statements they send (`sql`) and the progress report (`progress`).
//!
//! Never reads or writes a file, never asks PostgreSQL or Feldera anything and never reads a
//! clock: the shell reads the file, the pipeline's Snapshotting phase asks the questions,
//! and both hand the answers in.

pub mod plan;
pub mod progress;
pub mod ranges;
pub mod sql;
pub mod state;

pub use plan::{plan_startup, Action, Configured, Leftovers, Plan, StateRead};
pub use state::{
    rfc3339_utc, state_path, RoutePhase, SlotNameError, SnapshotPhase, StateError, StateFile,
    StateRoute, WrittenUnder, FORMAT_VERSION,
};
