//! `slotline ddl`: the Feldera tables for the routed PostgreSQL tables, as slotline would
//! map them. `command` reads the catalog over one control connection; `tables` plans each
//! table's columns and key (pure); `render` writes them as Feldera SQL or as the schema
//! JSON Feldera would describe them with.

mod command;
pub mod render;
pub mod tables;

pub use command::Ddl;
