//! What an operator asks of slotline besides running it, each a machine of its own driven
//! through the same `io::Driver` loop as the pipeline:
//!
//! - `slotline check` (`check`): would this setup work? The startup conversation runs as a
//!   survey, then the questions only a check asks; nothing is created.
//! - `slotline status` (`status`): where is the slot, how far behind, is Feldera running?
//! - `slotline drop-slot` (`drop_slot`): retire a connector (the slot, then the state file).
//! - `slotline ddl` (`ddl`): the Feldera tables for the routed PostgreSQL tables.
//!
//! They use the pipeline's parts (its environment, links, command queue and startup
//! conversation) and the catalog's questions and verdicts (`catalog`), and write their
//! findings as a `report::Report`. The running pipeline never uses this module.

mod check;
mod control;
pub mod ddl;
mod drop_slot;
mod status;

pub use check::Check;
pub use ddl::Ddl;
pub use drop_slot::DropSlot;
pub use status::Status;
