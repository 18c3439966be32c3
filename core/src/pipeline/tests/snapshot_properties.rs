//! Random initial snapshots through the scripted harness: table sizes and their spread over
//! heap blocks, worker counts, batch sizes, rows Feldera already holds, the order of
//! Feldera's answers, and the crash points. After every input: nothing is streamed and the
//! flush position never moves before the state file says `complete`, and when it says so
//! Feldera holds exactly PostgreSQL's keys (every copied key delivered, no ghost). A crash
//! leaves the state `pending`; a restart from it (after PostgreSQL lost some rows) converges
//! to exactly PostgreSQL's keys again.
use super::*;
use crate::Lsn;
use proptest::prelude::*;
use serde_json::Value;

/// Where the slot stands (the fake PostgreSQL creates every slot at this position).
const CONSISTENT_POINT: Lsn = Lsn(0x1000);

#[derive(Clone, Copy, Debug)]
enum Crash {
    AfterSlot,
    MidCopy(u64),
    BeforeComplete,
    /// Reached only when leftovers are retracted.
    AfterQuery(u64),
    /// Reached only when a leftover delete batch is durable.
    MidDelete(u64),
}

impl Crash {
    fn config(self) -> [(&'static str, String); 2] {
        let (point, after) = match self {
            Crash::AfterSlot => ("snapshot_after_slot", 1),
            Crash::MidCopy(n) => ("snapshot_mid_copy", n),
            Crash::BeforeComplete => ("snapshot_before_complete", 1),
            Crash::AfterQuery(n) => ("retract_after_query", n),
            Crash::MidDelete(n) => ("retract_mid_delete", n),
        };
        [
            ("CRASH_AT", point.to_owned()),
            ("CRASH_AFTER_BATCHES", after.to_string()),
        ]
    }
}

/// How the harness answers next, drawn from a seeded generator: mostly as Feldera would,
/// sometimes a completion poll answered `inprogress`, rarely Feldera unavailable (the
/// session ends and the next one starts over; at most `failures` times, since every new
/// session copies everything again), sometimes time passing.
struct Moves {
    seed: u64,
    failures: u32,
}

#[derive(Clone, Copy, Debug)]
enum Move {
    Step,
    NotYet,
    Unavailable,
    Tick(u64),
}

impl Moves {
    fn new(seed: u64) -> Moves {
        Moves { seed, failures: 2 }
    }

    fn next(&mut self) -> Move {
        // xorshift64
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        match self.seed % 100 {
            0 if self.failures > 0 => {
                self.failures -= 1;
                Move::Unavailable
            }
            1..=10 => Move::NotYet,
            11..=30 => Move::Tick(1 + (self.seed >> 8) % 300),
            _ => Move::Step,
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    users: u32,
    user_blocks: u64,
    items: u32,
    workers: usize,
    max_rows: u64,
    /// Keys Feldera's users table holds before the start, none of them in PostgreSQL.
    ghosts: std::collections::BTreeSet<u32>,
    slot_present: bool,
    crash: Option<Crash>,
    /// Users deleted from PostgreSQL between a crash and the restart (every n-th row).
    deleted_every: usize,
    page_rows: u32,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            0..2_500u32,
            prop_oneof![Just(1u64), Just(300), Just(3_000), Just(9_000)],
        ),
        (0..300u32, 1..6usize, 1..1_500u64),
        proptest::collection::btree_set(10_000..10_100u32, 0..12),
        any::<bool>(),
        prop_oneof![
            2 => Just(None),
            1 => Just(Some(Crash::AfterSlot)),
            2 => (1..8u64).prop_map(|n| Some(Crash::MidCopy(n))),
            1 => Just(Some(Crash::BeforeComplete)),
            1 => (1..3u64).prop_map(|n| Some(Crash::AfterQuery(n))),
            1 => (1..3u64).prop_map(|n| Some(Crash::MidDelete(n))),
        ],
        (
            2..20usize,
            prop_oneof![Just(7u32), Just(64), Just(10_000)],
            1..u64::MAX,
        ),
    )
        .prop_map(
            |(
                (users, user_blocks),
                (items, workers, max_rows),
                ghosts,
                slot_present,
                crash,
                (deleted_every, page_rows, seed),
            )| Case {
                users,
                user_blocks,
                items,
                workers,
                max_rows,
                ghosts,
                slot_present,
                crash,
                deleted_every,
                page_rows,
                seed,
            },
        )
}

fn user_rows(count: u32) -> Vec<Vec<Option<String>>> {
    (1..=count)
        .map(|i| vec![Some(i.to_string()), Some(format!("n{i}")), None])
        .collect()
}

fn item_rows(count: u32) -> Vec<Vec<Option<String>>> {
    (0..count)
        .map(|i| vec![Some(format!("sku{i}")), Some(i.to_string())])
        .collect()
}

fn database(case: &Case) -> FakePg {
    let mut pg = pg();
    pg.slot_confirmed = case.slot_present.then_some(CONSISTENT_POINT);
    pg.tables = vec![
        users(ReplicaIdentity::Default).with_rows(user_rows(case.users), case.user_blocks),
        items().with_rows(item_rows(case.items), 1),
    ];
    pg
}

fn config(case: &Case, crash: Option<Crash>) -> Vec<(&'static str, String)> {
    let mut pairs = vec![
        (TABLES.0, TABLES.1.to_owned()),
        ("SNAPSHOT_MODE", "initial".to_owned()),
        ("SNAPSHOT_WORKERS", case.workers.to_string()),
        ("BATCH_MAX_ROWS", case.max_rows.to_string()),
        ("RETRACT_PAGE_ROWS", case.page_rows.to_string()),
    ];
    if let Some(crash) = crash {
        pairs.extend(crash.config());
    }
    pairs
}

fn script(pairs: &[(&'static str, String)], pg: FakePg, state: Option<Vec<u8>>) -> Script {
    let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Script::with_state(&borrowed, pg, SCHEMA, state)
}

fn phase(s: &Script) -> Option<&'static str> {
    let text = String::from_utf8_lossy(s.state_file.as_deref()?).into_owned();
    if text.contains("\"phase\": \"complete\"") {
        Some("complete")
    } else if text.contains("\"phase\": \"pending\"") {
        Some("pending")
    } else {
        Some("other")
    }
}

/// PostgreSQL's keys of both tables, as Feldera's model lists them (sorted).
fn expected_keys(pg: &FakePg) -> (Vec<Value>, Vec<Value>) {
    let mut users: Vec<i64> = pg.tables[0]
        .rows
        .iter()
        .map(|r| r[0].as_deref().unwrap().parse().unwrap())
        .collect();
    users.sort_unstable();
    let mut items: Vec<String> = pg.tables[1]
        .rows
        .iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    items.sort();
    (
        users.into_iter().map(Value::from).collect(),
        items.into_iter().map(Value::from).collect(),
    )
}

/// The invariants that hold after every input.
fn check(s: &Script, pg: &FakePg) -> Result<(), TestCaseError> {
    let complete = phase(s) == Some("complete");
    let status = s.pipeline().health();
    if !complete {
        prop_assert!(
            !status.streaming,
            "streaming before the state file says complete"
        );
        prop_assert!(
            s.confirmed <= CONSISTENT_POINT,
            "PostgreSQL heard flush {} before the state file says complete",
            s.confirmed
        );
        prop_assert!(
            status.flush <= CONSISTENT_POINT,
            "the flush position moved to {} before the state file says complete",
            status.flush
        );
    } else {
        let (users, items) = expected_keys(pg);
        prop_assert_eq!(s.feldera.keys("users"), users, "users when complete");
        prop_assert_eq!(s.feldera.keys("lineitems"), items, "items when complete");
        let text = String::from_utf8_lossy(s.state_file.as_deref().unwrap_or_default());
        prop_assert!(
            text.contains("\"consistent_point\": \"0/1000\""),
            "{}",
            text
        );
    }
    Ok(())
}

/// Drives `s` until it streams or exits, answering as `moves` says, checking the
/// invariants after every input.
fn drive(s: &mut Script, pg: &FakePg, moves: &mut Moves) -> Result<(), TestCaseError> {
    check(s, pg)?;
    for _ in 0..50_000 {
        if s.exit().is_some() || s.pipeline().health().streaming {
            return Ok(());
        }
        match moves.next() {
            _ if s.waiting_requests() == 0 => s.advance(10),
            Move::Tick(ms) => s.advance(ms),
            Move::NotYet if s.pending_bodies()[0].is_empty() && s.waiting_query().is_none() => {
                s.in_progress()
            }
            Move::Unavailable => s.answer(
                503,
                r#"{"message":"down","error_code":"PipelineUnavailable","details":{}}"#,
            ),
            Move::Step | Move::NotYet => {
                s.step();
            }
        }
        check(s, pg)?;
        s.take_trace();
    }
    Err(TestCaseError::fail(format!(
        "never finished: {:?}",
        s.pipeline().health()
    )))
}

fn ghost_rows(ghosts: &std::collections::BTreeSet<u32>) -> String {
    ghosts
        .iter()
        .map(|g| format!("{{\"insert\":{{\"id\":{g},\"name\":\"ghost\"}}}}\n"))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_snapshots_deliver_every_key_and_move_nothing_before_complete(case in case()) {
        let pg = database(&case);
        let mut s = script(&config(&case, case.crash), pg.clone(), None);
        s.feldera.apply("users", &ghost_rows(&case.ghosts));
        let mut moves = Moves::new(case.seed);
        drive(&mut s, &pg, &mut moves)?;
        let Some(crash) = case.crash else {
            prop_assert_eq!(s.exit(), None);
            prop_assert_eq!(phase(&s), Some("complete"));
            return Ok(());
        };
        let crashed = s.exit().map(|e| e.0);
        let copied = s.feldera.rows("users") + s.feldera.rows("lineitems");
        let total = (case.users + case.items) as usize;
        if crashed.is_none() {
            // The crash point was never reached that often: fewer durable batches than its
            // count (each holds at most BATCH_MAX_ROWS rows), or no leftovers to retract.
            prop_assert_eq!(phase(&s), Some("complete"));
            match crash {
                Crash::MidCopy(n) => prop_assert!(
                    total as u64 <= (n - 1) * case.max_rows,
                    "{} rows copied and snapshot_mid_copy #{} never reached", total, n
                ),
                Crash::AfterQuery(_) | Crash::MidDelete(_) => {}
                Crash::AfterSlot | Crash::BeforeComplete => {
                    prop_assert!(false, "{:?} is reached by every snapshot", crash)
                }
            }
            return Ok(());
        }
        prop_assert_eq!(crashed, Some(70), "{:?}", s.exit());
        prop_assert_eq!(phase(&s), Some("pending"), "a crash leaves the state pending");
        prop_assert!(!s.pipeline().health().streaming);
        if matches!(crash, Crash::AfterSlot) {
            prop_assert_eq!(copied, case.ghosts.len(), "nothing copied before the slot");
        }

        // PostgreSQL loses some users while slotline is down; the restart copies again and
        // retracts what Feldera holds that PostgreSQL lacks.
        let mut after = pg.clone();
        after.slot_confirmed = Some(CONSISTENT_POINT);
        let every = case.deleted_every;
        after.tables[0].rows = after.tables[0]
            .rows
            .iter()
            .enumerate()
            .filter(|(i, _)| i % every != 0)
            .map(|(_, r)| r.clone())
            .collect();
        let mut again = script(&config(&case, None), after.clone(), s.state_file.clone());
        again.feldera = s.feldera.clone();
        drive(&mut again, &after, &mut moves)?;
        prop_assert_eq!(again.exit(), None);
        prop_assert_eq!(phase(&again), Some("complete"));
    }
}
