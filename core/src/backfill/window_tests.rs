//! The reconciliation rule against a model of PostgreSQL's MVCC and WAL: transactions whose
//! commit record and visibility may be apart (a synchronous standby's wait), chunk reads
//! under snapshots racing them, and a Feldera that applies the stream in WAL order with each
//! chunk's emission at its high watermark. Whatever the interleaving, a chunk emitted leaves
//! Feldera equal to the table once every transaction is visible, and a chunk is read again
//! only when a transaction it cannot judge exists.
//!
//! The chunk's question (`keyset::committed_but_running_query`) is asked after its rows,
//! possibly after other transactions committed, and answers the transactions its snapshot
//! listed as running whose commit record is written by then, visible or not: what the server
//! answers when the copier's role sees every backend's wait ([`Answer::WithWaits`]). A role
//! that does not see them gets only those that are visible ([`Answer::XactStatusOnly`]),
//! and the model shows what that costs (the gap docs/online-copy.md names).

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const KEYS: u8 = 8;

/// One transaction's writes: key → value (`None`: delete).
type Writes = BTreeMap<u8, Option<u8>>;

#[derive(Clone, Debug)]
enum Step {
    /// A transaction starts (takes the next xid) with these writes.
    Begin(Writes),
    /// A transaction starts that truncates the table.
    BeginTruncate,
    /// An open transaction (`pick` among them) writes its commit record; `visible` says whether it also becomes visible at once.
    Commit { pick: usize, visible: bool },
    /// A committed transaction not yet visible becomes visible.
    Reveal { pick: usize },
    /// An open transaction aborts.
    Abort { pick: usize },
    /// The copier reads the next chunk (snapshot, rows) ...
    Read,
    /// ... asks which transactions its snapshot listed as running have committed since (if
    /// not asked yet) ...
    Ask,
    /// ... and writes its high watermark (asking first if it has not).
    High,
}

/// What the chunk's question answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// The transactions of the snapshot's list whose commit record is written, visible or
    /// not (`pg_xact_status` or a backend waiting on `SyncRep`, seen by a role that sees
    /// every backend's wait).
    WithWaits,
    /// Only those that are visible (`pg_xact_status` alone: a role that does not see the
    /// waiting backend's wait).
    XactStatusOnly,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum TxState {
    Open,
    Committed { visible: bool },
    Aborted,
}

#[derive(Clone, Debug)]
struct Tx {
    xid: u64,
    writes: Writes,
    truncate: bool,
    state: TxState,
}

/// What the WAL holds, in order.
#[derive(Clone, Debug)]
enum Record {
    Commit(usize),
    High(usize),
}

struct Db {
    txs: Vec<Tx>,
    wal: Vec<Record>,
    /// Commit order of committed transactions (their index in `txs`).
    committed: Vec<usize>,
    next_xid: u64,
}

impl Db {
    fn new(first_xid: u64) -> Db {
        Db {
            txs: Vec::new(),
            wal: Vec::new(),
            committed: Vec::new(),
            next_xid: first_xid,
        }
    }

    fn nth(&self, pick: usize, wanted: impl Fn(&TxState) -> bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.txs.len())
            .filter(|&i| wanted(&self.txs[i].state))
            .collect();
        (!candidates.is_empty()).then(|| candidates[pick % candidates.len()])
    }

    fn snapshot(&self) -> TxSnapshot {
        let xmax = self.next_xid;
        let xip: BTreeSet<u64> = self
            .txs
            .iter()
            .filter(|t| {
                matches!(
                    t.state,
                    TxState::Open | TxState::Committed { visible: false }
                )
            })
            .map(|t| t.xid)
            .collect();
        let xmin = xip.iter().next().copied().unwrap_or(xmax);
        TxSnapshot { xmin, xmax, xip }
    }

    /// The rows of keys in `range` under a snapshot that sees the visible transactions.
    fn read(&self, range: std::ops::Range<u8>) -> Vec<(u8, u8)> {
        let mut table: BTreeMap<u8, u8> = BTreeMap::new();
        for &i in &self.committed {
            if self.txs[i].state == (TxState::Committed { visible: true }) {
                apply(&mut table, &self.txs[i].writes);
            }
        }
        table
            .into_iter()
            .filter(|(k, _)| range.contains(k))
            .collect()
    }

    /// The chunk's question, asked now about the transactions `snapshot` listed as running.
    fn ask(&self, snapshot: &TxSnapshot, answer: Answer) -> BTreeSet<u64> {
        self.txs
            .iter()
            .filter(|t| snapshot.xip.contains(&t.xid))
            .filter(|t| match (answer, &t.state) {
                (Answer::WithWaits, TxState::Committed { .. }) => true,
                (Answer::XactStatusOnly, TxState::Committed { visible }) => *visible,
                _ => false,
            })
            .map(|t| t.xid)
            .collect()
    }

    fn final_table(&self) -> BTreeMap<u8, u8> {
        let mut table = BTreeMap::new();
        for &i in &self.committed {
            apply(&mut table, &self.txs[i].writes);
        }
        table
    }
}

fn apply(table: &mut BTreeMap<u8, u8>, writes: &Writes) {
    for (&k, &v) in writes {
        match v {
            Some(v) => table.insert(k, v),
            None => table.remove(&k),
        };
    }
}

/// A chunk read, and the transactions committed before the copy began that its question
/// named.
type Read = (ChunkRead<u8, u8>, BTreeSet<u64>);

/// How the run ended for one chunk.
#[derive(Debug)]
enum Outcome {
    Emitted,
    Retried,
}

struct Run {
    feldera: BTreeMap<u8, u8>,
    /// The table once every committed transaction is visible.
    table: BTreeMap<u8, u8>,
    outcomes: Vec<Outcome>,
    /// For each retried chunk: whether a transaction committed before the copy began was
    /// running for its snapshot (what justifies a retry).
    justified: Vec<bool>,
}

/// Plays `pre` (before the copy of the table begins: Feldera does not hold these
/// transactions, as for a table just added) then `steps`, with two chunks, keys `0..4` and
/// `4..8`, each read at the first `Read` after the previous chunk's `High`, its question
/// answered as `answer` says.
fn play(pre: &[Step], steps: &[Step], first_xid: u64, answer: Answer) -> Run {
    let mut db = Db::new(first_xid);
    let mut pre_commits = BTreeSet::new();
    for step in pre {
        if let Some(i) = do_tx_step(&mut db, step) {
            pre_commits.insert(i);
        }
    }
    let pre_xids: BTreeSet<u64> = pre_commits.iter().map(|&i| db.txs[i].xid).collect();
    let begin_at = db.wal.len();
    let ranges = [0..4u8, 4..KEYS];
    let mut reads: Vec<Read> = Vec::new();
    // The chunk being read, and whether its question was asked.
    let mut reading: Option<(usize, bool)> = None;
    // Asks the chunk's question, once.
    let ask = |db: &Db, read: &mut Read, asked: &mut bool| {
        if !*asked {
            *asked = true;
            read.0.committed_in_progress = db.ask(&read.0.snapshot, answer);
            read.1 = read
                .0
                .committed_in_progress
                .intersection(&pre_xids)
                .copied()
                .collect();
        }
    };
    for step in steps {
        match step {
            Step::Read if reading.is_none() && reads.len() < ranges.len() => {
                let chunk = reads.len();
                reads.push((
                    ChunkRead {
                        rows: db.read(ranges[chunk].clone()),
                        snapshot: db.snapshot(),
                        committed_in_progress: BTreeSet::new(),
                    },
                    BTreeSet::new(),
                ));
                reading = Some((chunk, false));
            }
            Step::Ask => {
                if let Some((chunk, asked)) = reading.as_mut() {
                    ask(&db, &mut reads[*chunk], asked);
                }
            }
            Step::High => {
                if let Some((chunk, mut asked)) = reading.take() {
                    ask(&db, &mut reads[chunk], &mut asked);
                    db.wal.push(Record::High(chunk));
                }
            }
            step => {
                do_tx_step(&mut db, step);
            }
        }
    }
    if let Some((chunk, mut asked)) = reading.take() {
        ask(&db, &mut reads[chunk], &mut asked);
        db.wal.push(Record::High(chunk));
    }

    // The stream, from where the copy began: Feldera applies each commit, the copy judges
    // each chunk at its high watermark.
    let mut feldera = BTreeMap::new();
    let mut retained: Retained<u8> = Retained::new();
    let mut outcomes = Vec::new();
    let mut justified = Vec::new();
    let mut end = 0u64;
    let mut reads: Vec<Option<Read>> = reads.into_iter().map(Some).collect();
    for record in &db.wal[begin_at..] {
        end += 10;
        match *record {
            Record::Commit(i) => {
                let tx = &db.txs[i];
                apply(&mut feldera, &tx.writes);
                let touches: Vec<Touch<u8>> = match tx.truncate {
                    true => vec![Touch::Truncate],
                    false => tx.writes.keys().map(|&k| Touch::Key(k)).collect(),
                };
                retained.on_commit(tx.xid as u32, Lsn(end), touches);
            }
            Record::High(chunk) => {
                let (read, pre_running) = reads[chunk].take().expect("one high per chunk");
                match retained.close_by_snapshot(read) {
                    Verdict::Emit { rows, .. } => {
                        for (k, v) in rows {
                            feldera.insert(k, v);
                        }
                        outcomes.push(Outcome::Emitted);
                    }
                    Verdict::Retry { .. } => {
                        outcomes.push(Outcome::Retried);
                        justified.push(!pre_running.is_empty());
                    }
                }
            }
        }
    }
    Run {
        feldera,
        table: db.final_table(),
        outcomes,
        justified,
    }
}

/// Runs one transaction step; returns the transaction's index if it committed.
fn do_tx_step(db: &mut Db, step: &Step) -> Option<usize> {
    match step {
        Step::Begin(writes) => {
            db.txs.push(Tx {
                xid: db.next_xid,
                writes: writes.clone(),
                truncate: false,
                state: TxState::Open,
            });
            db.next_xid += 1;
            None
        }
        Step::BeginTruncate => {
            db.txs.push(Tx {
                xid: db.next_xid,
                writes: (0..KEYS).map(|k| (k, None)).collect(),
                truncate: true,
                state: TxState::Open,
            });
            db.next_xid += 1;
            None
        }
        Step::Commit { pick, visible } => {
            let i = db.nth(*pick, |s| *s == TxState::Open)?;
            db.txs[i].state = TxState::Committed { visible: *visible };
            db.committed.push(i);
            db.wal.push(Record::Commit(i));
            Some(i)
        }
        Step::Reveal { pick } => {
            let i = db.nth(*pick, |s| *s == TxState::Committed { visible: false })?;
            db.txs[i].state = TxState::Committed { visible: true };
            None
        }
        Step::Abort { pick } => {
            let i = db.nth(*pick, |s| *s == TxState::Open)?;
            db.txs[i].state = TxState::Aborted;
            None
        }
        Step::Read | Step::Ask | Step::High => None,
    }
}

/// The table in the key ranges of the chunks that were emitted, and what Feldera holds
/// there.
fn judged(run: &Run) -> (BTreeMap<u8, u8>, BTreeMap<u8, u8>) {
    let ranges = [0..4u8, 4..KEYS];
    let emitted: Vec<&std::ops::Range<u8>> = run
        .outcomes
        .iter()
        .zip(ranges.iter())
        .filter(|(o, _)| matches!(o, Outcome::Emitted))
        .map(|(_, r)| r)
        .collect();
    let within = |m: &BTreeMap<u8, u8>| {
        m.iter()
            .filter(|(k, _)| emitted.iter().any(|r| r.contains(k)))
            .map(|(k, v)| (*k, *v))
            .collect::<BTreeMap<u8, u8>>()
    };
    (within(&run.table), within(&run.feldera))
}

fn writes() -> impl Strategy<Value = Writes> {
    proptest::collection::btree_map(0..KEYS, proptest::option::weighted(0.8, 0..4u8), 1..4)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => writes().prop_map(Step::Begin),
        1 => Just(Step::BeginTruncate),
        3 => (any::<usize>(), proptest::bool::weighted(0.7))
            .prop_map(|(pick, visible)| Step::Commit { pick, visible }),
        2 => any::<usize>().prop_map(|pick| Step::Reveal { pick }),
        1 => any::<usize>().prop_map(|pick| Step::Abort { pick }),
        1 => Just(Step::Read),
        1 => Just(Step::Ask),
        1 => Just(Step::High),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn an_emitted_chunk_never_leaves_feldera_unequal_and_a_retry_has_a_reason(
        pre in proptest::collection::vec(step(), 0..12),
        steps in proptest::collection::vec(step(), 0..40),
        first_xid in prop_oneof![Just(700u64), Just((1u64 << 32) - 3)],
    ) {
        let run = play(&pre, &steps, first_xid, Answer::WithWaits);
        let (want, got) = judged(&run);
        prop_assert_eq!(want, got, "outcomes {:?}", run.outcomes);
        for justified in &run.justified {
            prop_assert!(*justified, "a retry without a transaction older than the copy running");
        }
    }
}

/// The gap, in the model: a commit written before the copy began and still waiting (not
/// visible) when the chunks are read. A question that sees the wait names it and the chunks
/// are read again; one that does not (a role without the privileges to see the waiting
/// backend's wait) lets the first chunk emit the key's older value over the newer one the
/// table holds, which the stream delivered before the copy began.
#[test]
fn a_commit_older_than_the_copy_still_waiting_is_a_retry_only_when_its_wait_is_seen() {
    let pre = [
        Step::Begin([(1, Some(0))].into()),
        Step::Commit {
            pick: 0,
            visible: true,
        },
        Step::Begin([(1, Some(9))].into()),
        Step::Commit {
            pick: 0,
            visible: false,
        },
    ];
    let steps = [Step::Read, Step::High, Step::Read, Step::High];
    let seen = play(&pre, &steps, 700, Answer::WithWaits);
    assert!(
        matches!(seen.outcomes[..], [Outcome::Retried, Outcome::Retried]),
        "{:?}",
        seen.outcomes
    );
    assert_eq!(seen.justified, [true, true]);

    let blind = play(&pre, &steps, 700, Answer::XactStatusOnly);
    assert!(
        matches!(blind.outcomes[..], [Outcome::Emitted, Outcome::Emitted]),
        "{:?}",
        blind.outcomes
    );
    let (table, feldera) = judged(&blind);
    assert_eq!(table.get(&1), Some(&9));
    assert_eq!(feldera.get(&1), Some(&0), "the chunk's older value, stale");
}

/// docs/online-copy-facts.md §3, reproduced: a transaction's commit record is in the WAL
/// before the chunk is read (it waits for a synchronous standby), but the chunk's snapshot
/// does not see it.
fn commit_before_the_read_not_yet_visible() -> (Retained<u8>, ChunkRead<u8, &'static str>) {
    let mut retained = Retained::new();
    // 748 updated key 1 to 'new'; its commit is streamed first.
    retained.on_commit(748, Lsn(0x1945450), [Touch::Key(1u8)]);
    let read = ChunkRead {
        rows: vec![(1, "a"), (2, "b")],
        snapshot: TxSnapshot::parse("748:749:748").unwrap(),
        committed_in_progress: [748].into(),
    };
    (retained, read)
}

#[test]
fn a_commit_streamed_before_the_read_but_not_visible_to_it_drops_its_key() {
    let (mut retained, read) = commit_before_the_read_not_yet_visible();
    assert_eq!(
        retained.close_by_snapshot(read),
        Verdict::Emit {
            rows: vec![(2, "b")],
            dropped: 1
        }
    );
    assert_eq!(retained.len(), 1, "still not seen by any snapshot: kept");
}

#[test]
fn a_position_window_alone_would_emit_the_stale_row() {
    // Low watermark after the commit (0x19454C0), high after the read (0x1945500): by
    // positions alone the commit is before the window and the chunk's 'a' is emitted over
    // Feldera's 'new'. This is why a primary's chunk is judged by its snapshot.
    let (mut retained, read) = commit_before_the_read_not_yet_visible();
    assert_eq!(
        retained.close_by_positions(read.rows, Lsn(0x19454C0), Lsn(0x1945500)),
        Verdict::Emit {
            rows: vec![(1, "a"), (2, "b")],
            dropped: 0
        }
    );
}

#[test]
fn a_transaction_seen_by_the_snapshot_keeps_its_rows_and_is_forgotten() {
    let mut retained = Retained::new();
    retained.on_commit(800, Lsn(100), [Touch::Key(1u8), Touch::Key(3)]);
    retained.on_commit(801, Lsn(110), Vec::<Touch<u8>>::new());
    let verdict = retained.close_by_snapshot(ChunkRead {
        rows: vec![(1, 10), (3, 30)],
        snapshot: TxSnapshot::parse("802:802:").unwrap(),
        committed_in_progress: BTreeSet::new(),
    });
    assert_eq!(
        verdict,
        Verdict::Emit {
            rows: vec![(1, 10), (3, 30)],
            dropped: 0
        }
    );
    assert!(retained.is_empty());
}

#[test]
fn a_committed_transaction_older_than_the_record_is_a_retry_until_it_is_seen() {
    // 790 committed before the copy began and is still running for the snapshot: its keys
    // are unknown, so nothing of the chunk is emitted.
    let mut retained: Retained<u8> = Retained::new();
    retained.on_commit(800, Lsn(100), [Touch::Key(2u8)]);
    let first = retained.close_by_snapshot(ChunkRead {
        rows: vec![(1, 1), (2, 2)],
        snapshot: TxSnapshot::parse("790:801:790").unwrap(),
        committed_in_progress: [790].into(),
    });
    assert_eq!(first, Verdict::Retry { xids: vec![790] });
    // Read again once 790 is visible: emitted, and 800 (seen by both) is not in the way.
    let again = retained.close_by_snapshot(ChunkRead {
        rows: vec![(1, 5), (2, 2)],
        snapshot: TxSnapshot::parse("801:801:").unwrap(),
        committed_in_progress: BTreeSet::new(),
    });
    assert_eq!(
        again,
        Verdict::Emit {
            rows: vec![(1, 5), (2, 2)],
            dropped: 0
        }
    );
}

#[test]
fn a_transaction_the_stream_read_that_touched_another_table_is_no_reason_to_retry() {
    let mut retained: Retained<u8> = Retained::new();
    // 805 changed only another table; it is committed but still running for the snapshot.
    retained.on_commit(805, Lsn(100), Vec::<Touch<u8>>::new());
    let verdict = retained.close_by_snapshot(ChunkRead {
        rows: vec![(1, 1)],
        snapshot: TxSnapshot::parse("805:806:805").unwrap(),
        committed_in_progress: [805].into(),
    });
    assert_eq!(
        verdict,
        Verdict::Emit {
            rows: vec![(1, 1)],
            dropped: 0
        }
    );
    // Still running for that snapshot: remembered for the next chunk.
    let next = retained.close_by_snapshot(ChunkRead {
        rows: vec![(4, 4)],
        snapshot: TxSnapshot::parse("805:807:805").unwrap(),
        committed_in_progress: [805].into(),
    });
    assert!(matches!(next, Verdict::Emit { .. }), "{next:?}");
}

#[test]
fn on_a_standby_commits_ending_between_the_replay_positions_are_dropped() {
    let mut retained = Retained::new();
    retained.on_commit(1, Lsn(100), [Touch::Key(1u8)]); // replayed before the read began: in it
    retained.on_commit(2, Lsn(150), [Touch::Key(2u8)]); // between: maybe in it
    retained.on_commit(3, Lsn(200), [Touch::Key(3u8)]); // ends exactly at the position after: maybe
    let verdict = retained.close_by_positions(
        vec![(1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')],
        Lsn(100),
        Lsn(200),
    );
    assert_eq!(
        verdict,
        Verdict::Emit {
            rows: vec![(1, 'a'), (4, 'd')],
            dropped: 2
        }
    );
    assert!(retained.is_empty());
}

#[test]
fn a_truncate_the_chunk_did_not_see_drops_every_row_and_an_unknown_key_retries() {
    let mut retained = Retained::new();
    retained.on_commit(900, Lsn(100), [Touch::Truncate]);
    let read = |snapshot: &str| ChunkRead {
        rows: vec![(1u8, 'a'), (2, 'b')],
        snapshot: TxSnapshot::parse(snapshot).unwrap(),
        committed_in_progress: BTreeSet::new(),
    };
    assert_eq!(
        retained.close_by_snapshot(read("900:901:900")),
        Verdict::Emit {
            rows: vec![],
            dropped: 2
        }
    );
    // Seen by the next chunk: no longer in the way.
    assert!(matches!(
        retained.close_by_snapshot(read("901:901:")),
        Verdict::Emit { dropped: 0, .. }
    ));

    retained.on_commit(905, Lsn(200), [Touch::UnknownKey, Touch::Key(1)]);
    assert_eq!(
        retained.close_by_snapshot(read("905:906:905")),
        Verdict::Retry { xids: vec![905] }
    );
    assert!(matches!(
        retained.close_by_snapshot(read("906:906:")),
        Verdict::Emit { dropped: 0, .. }
    ));

    // On a standby, by position: the same two answers for commits between the reads.
    retained.on_commit(1, Lsn(300), [Touch::Truncate]);
    assert_eq!(
        retained.close_by_positions(vec![(1, 'a')], Lsn(250), Lsn(350)),
        Verdict::Emit {
            rows: vec![],
            dropped: 1
        }
    );
    retained.on_commit(2, Lsn(400), [Touch::UnknownKey]);
    assert_eq!(
        retained.close_by_positions(vec![(1, 'a')], Lsn(350), Lsn(450)),
        Verdict::Retry { xids: vec![2] }
    );
}

/// A transaction that writes only unpublished tables leaves nothing in the stream. One
/// assigned its xid before the copy began (below the first chunk's `xmax`) and committed
/// during a read may be a commit older than the record, so the chunk is read again; one
/// assigned after cannot be (its commit would be in the record if it published anything),
/// so it does not stand in the way: a database busy with other tables does not keep a
/// chunk from being judged.
#[test]
fn a_transaction_outside_the_publication_costs_a_retry_only_if_it_began_before_the_copy() {
    let mut retained: Retained<u8> = Retained::new();
    // The first chunk: 800 (older than the copy) committed during the read, unseen.
    let first = ChunkRead {
        rows: vec![(1, "a")],
        snapshot: TxSnapshot::parse("800:805:800").unwrap(),
        committed_in_progress: [800].into(),
    };
    assert_eq!(
        retained.close_by_snapshot(first),
        Verdict::Retry { xids: vec![800] }
    );
    // Read again: 810 and 811 (assigned after the first snapshot) committed during the
    // read and wrote only unpublished tables; the stream carried nothing of them.
    let again = ChunkRead {
        rows: vec![(1, "a")],
        snapshot: TxSnapshot::parse("810:812:810,811").unwrap(),
        committed_in_progress: [810, 811].into(),
    };
    assert_eq!(
        retained.close_by_snapshot(again),
        Verdict::Emit {
            rows: vec![(1, "a")],
            dropped: 0
        }
    );
}
