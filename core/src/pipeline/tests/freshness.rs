//! When a commit's batch is sent (docs/pipelining.md, "When a batch is sent"): at once when
//! nothing is in flight, coalesced behind batches in flight, grown while more of the stream
//! is already read; and how fresh each durable batch was.
use super::*;
use crate::time::PgTime;
use crate::Lsn;

/// The end of transaction `k` (1-based).
fn end(k: u64) -> u64 {
    0x2000 + 0x100 * k
}

/// Transaction `k`, inserting user `k`, committed at the source at `commit_time`.
fn tx(k: u64, commit_time: PgTime) -> Vec<(Lsn, Vec<u8>)> {
    vec![
        begin_at(end(k) - 0x8, 700 + k as u32, commit_time),
        insert(
            end(k) - 0xF0,
            16384,
            &[Some(&k.to_string()), Some("n"), None],
        ),
        commit(end(k) - 0x8, end(k)),
    ]
}

fn wall(s: &Script) -> PgTime {
    s.now().wall
}

/// The cut lines of a trace: `#n cut (reason): rows`.
fn cuts(trace: &str) -> Vec<String> {
    trace
        .lines()
        .filter_map(|l| l.trim().strip_prefix("batch  "))
        .filter(|l| l.contains(" cut "))
        .map(|l| l.split(", ").next().unwrap_or(l).to_owned())
        .collect()
}

#[test]
fn a_trickle_sends_every_commit_at_once_and_never_waits_for_the_linger() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "50")]);
    for k in 1..=4 {
        let at = wall(&s);
        s.wal(&format!("tx {k}: insert users {k}"), &tx(k, at));
        // Feldera answers within 2 ms; the next commit comes 50 ms later.
        s.advance(2);
        s.settle();
        assert_eq!(
            s.confirmed,
            Lsn(end(k)),
            "tx {k} acknowledged before the next"
        );
        s.advance(48);
    }
    let trace = s.take_trace();
    assert_eq!(
        cuts(&trace),
        [
            "#1 cut (idle): 1 rows",
            "#2 cut (idle): 1 rows",
            "#3 cut (idle): 1 rows",
            "#4 cut (idle): 1 rows"
        ],
        "{trace}"
    );
    assert!(
        !trace.contains("Linger"),
        "no linger timer is armed: {trace}"
    );
    let fresh = s.pipeline().health().commit_to_durable;
    assert_eq!(fresh.count, 4);
    assert_eq!(
        fresh.sum_us,
        4 * 2_000,
        "each durable 2 ms after its commit"
    );
    rule!(
        "A trickle (one commit every 50 ms, Feldera answering within 2 ms): nothing is in flight when a commit is read, so its batch goes at once (cut reason idle) and no linger timer is armed; each batch is durable 2 ms after its source commit (slotline_commit_to_durable_seconds).",
        trace
    );
}

#[test]
fn a_burst_read_at_once_goes_in_one_batch_and_the_next_coalesces_behind_it() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "50")]);
    let at = wall(&s);
    let first: Vec<_> = (1..=20).flat_map(|k| tx(k, at)).collect();
    s.wal("tx 1..20 in one read", &first);
    // While #1 is in flight, ten more commits arrive one read at a time.
    for k in 21..=30 {
        s.advance(1);
        let at = wall(&s);
        s.wal(&format!("tx {k}"), &tx(k, at));
    }
    let read = s.take_trace();
    assert_eq!(cuts(&read), ["#1 cut (idle): 20 rows"], "{read}");
    // #1 becomes durable: the pipe is empty, the ten go at once (no linger wait).
    s.settle();
    assert_eq!(s.confirmed, Lsn(end(30)));
    let durable = s.take_trace();
    assert_eq!(cuts(&durable), ["#2 cut (idle): 10 rows"], "{durable}");
    rule!(
        "A burst: twenty commits in one read are read to the end before anything is cut, then go in one batch (idle); ten more arriving while it is in flight linger behind it and go together the moment it is durable, before their linger deadline.",
        format!("== the reads\n{read}== #1 durable\n{durable}")
    );
}

#[test]
fn under_saturation_batches_grow_with_the_time_feldera_takes() {
    // One batch in flight at a time; a commit every 5 ms; Feldera answers a batch's
    // request and its completion question 20 ms after it was sent.
    let mut s = streaming(&[("BATCH_LINGER_MS", "50"), ("MAX_IN_FLIGHT_BATCHES", "1")]);
    let mut in_flight_ms = 0;
    for k in 1..=24 {
        let at = wall(&s);
        s.wal(&format!("tx {k}"), &tx(k, at));
        s.advance(5);
        in_flight_ms += 5;
        if in_flight_ms >= 20 {
            assert!(
                s.step() && s.step(),
                "the batch's POST and its completion question"
            );
            in_flight_ms = 0;
        }
    }
    s.settle();
    assert_eq!(s.confirmed, Lsn(end(24)));
    let trace = s.take_trace();
    let cuts = cuts(&trace);
    // The first commit goes alone; every later batch carries what arrived while the one
    // before was in flight: four commits per 20 ms round trip.
    assert_eq!(
        cuts[..2],
        ["#1 cut (idle): 1 rows", "#2 cut (idle): 3 rows"],
        "{trace}"
    );
    assert!(
        cuts[2..cuts.len() - 1]
            .iter()
            .all(|c| c.ends_with("(idle): 4 rows")),
        "{cuts:?}"
    );
    assert!(!trace.contains("cut (linger)"), "{trace}");
    let fresh = s.pipeline().health().commit_to_durable;
    assert_eq!(fresh.count, cuts.len() as u64, "every batch measured once");
    rule!(
        "Saturation (a commit every 5 ms, Feldera taking 20 ms, one batch in flight): the first commit goes alone; each later batch carries the commits that arrived while the previous one was in flight and goes the moment it is durable, so there is one request per Feldera round trip whatever the commit rate, and the linger never fires.",
        cuts.join("\n")
    );
}

#[test]
fn catching_up_on_old_commits_coalesces_by_the_linger_not_read_by_read() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "50")]);
    // The stream is behind: these transactions committed 10 s before they are read, and
    // they arrive a few at a time with nothing in flight.
    let old = PgTime(wall(&s).0 - 10_000_000);
    for read in 0..5u64 {
        let batch: Vec<_> = (1..=4).flat_map(|i| tx(read * 4 + i, old)).collect();
        s.wal(
            &format!("tx {}..{} (committed 10 s ago)", read * 4 + 1, read * 4 + 4),
            &batch,
        );
        s.advance(5);
    }
    let reads = s.take_trace();
    assert!(
        cuts(&reads).is_empty(),
        "nothing sent read by read: {reads}"
    );
    s.advance(30);
    s.settle();
    let lingered = s.take_trace();
    assert_eq!(cuts(&lingered), ["#1 cut (linger): 20 rows"], "{lingered}");
    // Caught up again: a fresh commit with nothing in flight goes at once.
    let at = wall(&s);
    s.wal("tx 21 (fresh)", &tx(21, at));
    let fresh = s.take_trace();
    assert_eq!(cuts(&fresh), ["#2 cut (idle): 1 rows"], "{fresh}");
    rule!(
        "Catching up (the buffered changes committed longer than BATCH_LINGER_MS ago): nothing is sent for being idle, the reads coalesce into one batch at the linger deadline, as throughput wants; once a fresh commit arrives with nothing in flight, it goes at once again.",
        format!("== old commits, five reads\n{reads}== the linger\n{lingered}== a fresh commit\n{fresh}")
    );
}
