//! `slotline-blocking` as a child process (checks shared with `slotline`).

#[macro_use]
mod binary_checks;

binary_tests!(env!("CARGO_BIN_EXE_slotline-blocking"), "slotline-blocking");
