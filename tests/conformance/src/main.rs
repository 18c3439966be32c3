//! slotline against Feldera's own code (one pinned release, see README.md):
//!
//! - `schemas`: every program schema of the corpus is read by Feldera's deserializer
//!   (`feldera_types::program_schema::ProgramSchema`, what the pipeline manager uses for
//!   `program_info`) and by slotline's; both must agree on every relation, column, type,
//!   nullability, DEFAULT and key, and slotline may set aside only relations that use a type
//!   it does not model.
//! - `values`: every value of the type-coverage workload, as PostgreSQL prints it, is
//!   encoded by slotline's value plans into the JSON it sends, and read back by Feldera's
//!   deserializers for the column's type under the JSON input format's `SqlSerdeConfig`; the
//!   result must be what PostgreSQL holds.
//! - `catalog_values`: values of the types slotline reads from the catalog (domains, arrays
//!   of enums, network types and ranges, composites into ROW columns, citext), read back
//!   the same way, composites by a struct deserializer made as the compiler makes one.
//! - `lines`: whole `insert` lines slotline writes are read by a record deserializer made
//!   the way Feldera's compiler makes it (names, DEFAULTs, VARIANT nulls).
//! - `requests`: the parameters of slotline's ingress and ad-hoc query URLs, read into
//!   Feldera's parser configuration and query arguments as its server reads them.
//!
//! Prints one line per check and `N passed, M failed`; exits 1 on any failure.

mod catalog_values;
mod lines;
mod requests;
mod schemas;
mod values;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut outcomes = schemas::run();
    outcomes.extend(values::run());
    outcomes.extend(catalog_values::run());
    outcomes.extend(lines::run());
    outcomes.extend(requests::run());
    let failed: Vec<&(String, Result<(), String>)> =
        outcomes.iter().filter(|(_, r)| r.is_err()).collect();
    for (name, result) in &outcomes {
        match result {
            Ok(()) => println!("ok    {name}"),
            Err(e) => println!("FAIL  {name}: {e}"),
        }
    }
    println!(
        "{} passed, {} failed",
        outcomes.len() - failed.len(),
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
