//! Replays the committed fuzz seed corpus (`fuzz/seeds/<target>/*`) through the harness
//! functions, so every `cargo test` checks the real captures, the hand-written seeds and
//! every input the fuzzer ever crashed on (kept as `regression-*` seeds) without nightly.
//!
//! A harness panics when a decoder breaks its contract; a seed that panics fails the test
//! with the seed's path.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use slotline_core::fuzzing;

fn seeds(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    paths.sort();
    paths
}

/// Runs every seed of `target`; fails naming each seed that panicked.
fn replay(target: &str, harness: fn(&[u8]), at_least: usize) {
    let paths = seeds(target);
    assert!(
        paths.len() >= at_least,
        "{target}: {} seeds, expected at least {at_least}",
        paths.len()
    );
    let failed: Vec<String> = paths
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("read seed");
            catch_unwind(AssertUnwindSafe(|| harness(&data))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target}: seeds that panic: {failed:#?}");
}

#[test]
fn framed_stream_seeds_replay_cleanly() {
    replay("framed_stream", fuzzing::framed_stream, 10);
}

#[test]
fn pgoutput_seeds_replay_cleanly() {
    replay("pgoutput", fuzzing::pgoutput, 10);
}

#[test]
fn copy_row_seeds_replay_cleanly() {
    replay("copy_row", fuzzing::copy_row, 10);
}

#[test]
fn value_text_seeds_replay_cleanly() {
    replay("value_text", fuzzing::value_text, 50);
}

#[test]
fn feldera_responses_seeds_replay_cleanly() {
    replay("feldera_responses", fuzzing::feldera_responses, 5);
}

#[test]
fn conn_machine_seeds_replay_cleanly() {
    replay("conn_machine", fuzzing::conn_machine, 5);
}

#[test]
fn pipeline_seeds_replay_cleanly() {
    replay("pipeline", fuzzing::pipeline, 10);
}

/// The hand-written pipeline seeds drive the whole machine past startup: every one streams,
/// and together they acknowledge, reconnect, stop, crash and give up.
#[test]
fn pipeline_seeds_reach_streaming_and_acknowledgements() {
    let runs: Vec<(String, fuzzing::PipelineRun)> = seeds("pipeline")
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("hand-"))
        })
        .map(|path| {
            let data = std::fs::read(path).expect("read seed");
            (path.display().to_string(), fuzzing::run_pipeline(&data))
        })
        .collect();
    for (path, run) in &runs {
        assert!(run.streams >= 1, "{path} never streams: {run:?}");
    }
    let acknowledged = runs.iter().filter(|(_, r)| r.status_updates > 0).count();
    assert!(
        acknowledged >= 8,
        "only {acknowledged} seeds report a flush: {runs:#?}"
    );
    assert!(
        runs.iter().any(|(_, r)| r.streams >= 3),
        "no seed reconnects twice"
    );
    for code in [0, 1, 69, 70] {
        assert!(
            runs.iter().any(|(_, r)| r.exit == Some(code)),
            "no seed exits {code}"
        );
    }
}

/// The framed-stream seeds are real streams: the harness must get all the way to pgoutput
/// on them, not bounce off at the framing layer. A capture seed frames without error.
#[test]
fn capture_seeds_are_whole_streams() {
    for path in seeds("framed_stream").iter().filter(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("capture-"))
    }) {
        let data = std::fs::read(path).expect("read seed");
        let mut framer = slotline_core::wire::Framer::new();
        framer.push(&data[1..]);
        let mut xlog = 0;
        while let Some(frame) = framer.next_frame().expect("a capture seed frames cleanly") {
            xlog += usize::from(frame.tag == b'd' && frame.body.first() == Some(&b'w'));
        }
        assert_eq!(framer.buffered_len(), 0, "{}", path.display());
        assert!(xlog > 0, "{} has no XLogData", path.display());
    }
}

/// The hand-written value seeds for catalog types (40-59) reach the decoders through their
/// natural column types and decode what PostgreSQL printed; one is a refusal by design.
#[test]
fn catalog_type_value_seeds_decode_their_values() {
    use slotline_core::value::fuzz::outcome;
    let mut checked = 0;
    for path in seeds("value_text") {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(number) = name.get(..2).and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if !(40..60).contains(&number) {
            continue;
        }
        let data = std::fs::read(&path).expect("read seed");
        let result = outcome(&data).unwrap_or_else(|| panic!("{name}: no plan"));
        match (name, result) {
            ("51-addr-not-null-member", Err(e)) => {
                assert!(
                    e.contains("member street: NULL cannot be sent"),
                    "{name}: {e}"
                )
            }
            (_, Err(e)) => panic!("{name} is refused: {e}"),
            (_, Ok(json)) => assert!(!json.is_empty(), "{name}"),
        }
        checked += 1;
    }
    assert_eq!(checked, 20, "seeds 40-59");
}
