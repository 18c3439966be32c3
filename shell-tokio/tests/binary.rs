//! `slotline` as a child process (checks shared with `slotline-blocking`, whose package
//! holds them).

#[path = "../../shell-blocking/tests/binary_checks/mod.rs"]
#[macro_use]
mod binary_checks;

binary_tests!(env!("CARGO_BIN_EXE_slotline"), "slotline");
