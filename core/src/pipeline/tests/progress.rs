//! The progress line: a summary every `PROGRESS_INTERVAL_SECS` while something happens,
//! nothing while the stream is idle.
use super::*;
use crate::Lsn;

/// The trace's progress lines only.
fn progress_lines(trace: &str) -> Vec<&str> {
    trace.lines().filter(|l| l.contains("progress ")).collect()
}

#[test]
fn progress_line_sums_up_each_busy_interval_and_idle_intervals_stay_quiet() {
    let mut s = streaming(&[("PROGRESS_INTERVAL_SECS", "1"), ("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2", "3"]);
    // Feldera takes 40 ms to complete the first batch.
    s.accept();
    s.advance(40);
    s.complete();
    insert_tx(&mut s, 701, 0x2200, &["4"]);
    // Accepted at once; the adaptive poll asks about it after about the latency it saw.
    s.accept();
    s.advance(40);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2200));
    s.advance(960);
    // Idle: keepalives move the server's WAL end and the acknowledged position, but no
    // row, transaction or batch: no line for the next three intervals.
    for (i, wal_end) in [0x3000u64, 0x4000, 0x5000].iter().enumerate() {
        s.keepalive(Lsn(*wal_end), false);
        s.advance(1000 - 10 * i as u64);
    }
    let trace = s.take_trace();
    assert_eq!(progress_lines(&trace).len(), 1, "{trace}");
    rule!(
        "Every PROGRESS_INTERVAL_SECS the progress line sums up the interval (rows and transactions read, batches durable, the flushed position, the lag to what the walsender decoded when the server's position is not sampled, completion wait percentiles) only when something happened; idle intervals, even with keepalives moving the position, log nothing.",
        trace
    );
}

#[test]
fn progress_line_shows_the_lag_while_feldera_withholds_completion() {
    let mut s = streaming(&[("PROGRESS_INTERVAL_SECS", "2"), ("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.advance(100);
    s.in_progress();
    s.keepalive(Lsn(0x9000), false);
    s.advance(2000);
    let trace = s.take_trace();
    let lines = progress_lines(&trace);
    assert_eq!(lines.len(), 1, "{trace}");
    rule!(
        "While a batch waits for completion the progress line counts what was read, no batch durable, and the lag from the flushed position (the slot's) to what the walsender decoded (the scripts do not sample the server's position).",
        lines.join("\n")
    );
}
