#![no_main]
// The harness lives in slotline-core (feature "fuzzing") so `cargo test` replays the corpus.
libfuzzer_sys::fuzz_target!(|data: &[u8]| slotline_core::fuzzing::pipeline(data));
