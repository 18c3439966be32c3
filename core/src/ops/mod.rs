//! What an operator asks of slotline besides running it: `slotline check` (would this
//! setup work?), `slotline status` (where is the slot, how far behind, is Feldera running?),
//! `slotline drop-slot` (retire a connector) and `slotline ddl` (the Feldera tables for the
//! routed PostgreSQL tables), and the slot-health rules the running
//! pipeline shares with them (an invalidated slot, retained WAL nearing a limit).
//!
//! Pure: the questions, their parsers, the verdicts and the report. The machines that ask
//! the questions over the wire live with the pipeline (`pipeline::ops`), which owns the
//! connections.

pub mod ddl;
mod ddl_render;
