//! The idle rule as the streaming session applies it: random transactions that arrive in
//! two parts (Begin and rows, later the Commit), batches answered in any order, and
//! keepalives at any moment, inside a transaction too. After every keepalive the world
//! judges from what it sent and what Feldera completed whether the pipeline was idle (no
//! transaction open, every committed row complete in Feldera, so nothing buffered or in
//! flight): a keepalive moves the flush to its position exactly then.
use super::*;
use crate::Lsn;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// A transaction starts and sends this many rows; its Commit comes with `Commit`.
    Begin(usize),
    Commit,
    Answer,
    InProgress,
    Tick(u64),
    Keepalive,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1..5usize).prop_map(Step::Begin),
        3 => Just(Step::Commit),
        5 => Just(Step::Answer),
        1 => Just(Step::InProgress),
        2 => (1..200u64).prop_map(Step::Tick),
        3 => Just(Step::Keepalive),
    ]
}

/// Each transaction takes this much WAL; its commit ends at the top of its range.
const TX_SPAN: u64 = 0x200;

struct World {
    s: Script,
    /// The transaction whose Begin was sent and whose Commit was not: its end and rows.
    open: Option<(u64, Vec<String>)>,
    /// Rows of every committed transaction.
    committed: Vec<String>,
    next_xid: u32,
    next_end: u64,
}

impl World {
    fn begin(&mut self, rows: usize) {
        if self.open.is_some() {
            return;
        }
        let (xid, end) = (self.next_xid, self.next_end);
        self.next_xid += 1;
        self.next_end += TX_SPAN;
        let ids: Vec<String> = (0..rows)
            .map(|i| format!("{}", xid * 10 + i as u32))
            .collect();
        let mut messages = vec![begin(end - 0x8, xid)];
        for (i, id) in ids.iter().enumerate() {
            messages.push(insert(
                end - 0xF0 + 8 * i as u64,
                16384,
                &[Some(id), Some("n"), None],
            ));
        }
        self.s.wal(&format!("tx {xid} begins"), &messages);
        self.open = Some((end, ids));
    }

    fn commit(&mut self) {
        if let Some((end, ids)) = self.open.take() {
            self.s.wal("commit", &[commit(end - 0x8, end)]);
            self.committed.extend(ids);
        }
    }

    fn answer(&mut self, in_progress: bool) {
        if self.s.waiting_requests() == 0 {
            return;
        }
        let ingress = self.s.pending_bodies()[0].contains('{');
        match (ingress, in_progress) {
            (true, _) => self.s.accept(),
            (false, false) => self.s.complete(),
            (false, true) => self.s.in_progress(),
        }
    }

    /// A keepalive at the server's WAL end: inside the open transaction (past its rows),
    /// or between the last commit and the next transaction.
    fn keepalive_at(&self) -> Lsn {
        match &self.open {
            Some((end, _)) => Lsn(end - 0x80),
            None => Lsn(self.next_end - TX_SPAN + 0x80),
        }
    }

    /// What the world knows: nothing open, and Feldera completed every committed row.
    fn idle(&self) -> bool {
        let complete = self.s.completed_lines().join("\n");
        self.open.is_none()
            && self
                .committed
                .iter()
                .all(|id| complete.contains(&format!("\"id\":{id},")))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn a_keepalive_moves_the_flush_exactly_when_nothing_is_open_buffered_or_in_flight(
        steps in proptest::collection::vec(step(), 1..50),
        linger in prop_oneof![Just("0"), Just("30")],
        max_rows in 1..4u64,
    ) {
        let max_rows = max_rows.to_string();
        let s = streaming(&[("BATCH_LINGER_MS", linger), ("BATCH_MAX_ROWS", &max_rows)]);
        let mut world = World { s, open: None, committed: Vec::new(), next_xid: 700, next_end: 0x2000 };
        for step in steps {
            prop_assert!(world.s.exit().is_none(), "the session ended: {:?}", world.s.exit());
            match step {
                Step::Begin(rows) => world.begin(rows),
                Step::Commit => world.commit(),
                Step::Answer => world.answer(false),
                Step::InProgress => world.answer(true),
                Step::Tick(ms) => world.s.advance(ms),
                Step::Keepalive => {
                    let at = world.keepalive_at();
                    let idle = world.idle();
                    let before = world.s.confirmed;
                    world.s.keepalive(at, false);
                    let moved = world.s.confirmed == at && before < at;
                    prop_assert!(
                        moved == (idle && before < at),
                        "keepalive at {} with the world {}: the flush went {} -> {}",
                        at,
                        if idle { "idle" } else { "busy" },
                        before,
                        world.s.confirmed
                    );
                }
            }
        }
    }
}
