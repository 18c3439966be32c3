//! Startup: what slotline checks and creates before it streams, in an order where every
//! refusal happens before anything is created.

pub mod catalog;
pub mod checks;
pub mod types;
