//! Test infrastructure shared by slotline's integration tests, benchmarks and demo: a
//! throwaway PostgreSQL cluster and a faithful double of Feldera's HTTP API.

pub mod driver;
pub mod e2e;
pub mod feldera_double;
pub mod pg;
