//! Real captures: a workload that produces every pgoutput message kind and every
//! mapped type, streamed from PostgreSQL through the core's own `Connection` over TCP and
//! committed as raw bytes (`tests/fixtures/pg15-stream.bin`, SQL beside it).
//!
//! - `offline`: decodes the committed fixture without a server: snapshots of every message
//!   and of every row's JSON, the facts the workload was built to show, and chunking.
//! - `live`: re-captures against a throwaway cluster and compares structure with the
//!   fixture (rewrites it with `SLOTLINE_REGENERATE_CAPTURES=1`), and checks that COPY gives
//!   the same JSON as the stream under hostile database defaults.
//! - `seeds`: derives the fuzz seed corpus from the capture.

mod decode;
mod final_rows;
mod live;
mod offline;
mod seeds;
