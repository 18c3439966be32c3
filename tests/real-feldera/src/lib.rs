//! Feldera's own pipeline server, built from a Feldera source tree (`./run <dir>`), with a
//! hand-written circuit for slotline's end-to-end schema, and a stand-in for the part of
//! Feldera's pipeline manager slotline talks to. See `docs/feldera.md`, "Against Feldera's
//! own server".

pub mod circuit;

pub use circuit::SCHEMA_JSON;
