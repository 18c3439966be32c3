//! Random scenarios (transactions, Feldera outcomes, ticks, keepalives, disconnects) with
//! the invariants checked after every step, and byte-by-byte delivery giving the same trace.
use super::*;
use crate::io::Driver;
use crate::Lsn;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Tx(usize),
    Accept,
    Complete,
    InProgress,
    Unavailable,
    Restarted,
    Tick(u64),
    Keepalive,
    Disconnect,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1..5usize).prop_map(Step::Tx),
        4 => Just(Step::Accept),
        4 => Just(Step::Complete),
        1 => Just(Step::InProgress),
        1 => Just(Step::Unavailable),
        1 => Just(Step::Restarted),
        3 => (1..400u64).prop_map(Step::Tick),
        1 => Just(Step::Keepalive),
        1 => Just(Step::Disconnect),
    ]
}

struct World {
    s: Script,
    /// Every committed transaction: its end position and the ids of its rows.
    committed: Vec<(Lsn, Vec<u64>)>,
    next_xid: u32,
    next_end: u64,
    replayed_session: u32,
}

impl World {
    fn tx(&mut self, rows: usize) {
        let xid = self.next_xid;
        self.next_xid += 1;
        let end = self.next_end;
        self.next_end += 0x200;
        let ids: Vec<u64> = (0..rows).map(|i| u64::from(xid) * 100 + i as u64).collect();
        self.send(end, xid, &ids);
        self.committed.push((Lsn(end), ids));
    }

    fn send(&mut self, end: u64, xid: u32, ids: &[u64]) {
        let texts: Vec<String> = ids.iter().map(u64::to_string).collect();
        let mut messages = vec![begin(end - 0x8, xid)];
        for (i, id) in texts.iter().enumerate() {
            messages.push(insert(
                end - 0xF0 + 8 * i as u64,
                16384,
                &[Some(id), None, None],
            ));
        }
        messages.push(commit(end - 0x8, end));
        self.s.wal(&format!("tx {xid}"), &messages);
    }

    /// A new session replays, from the slot's position, every transaction not confirmed.
    fn replay_if_reconnected(&mut self) {
        let status = self.s.pipeline().health();
        if status.streaming && status.sessions > self.replayed_session {
            self.replayed_session = status.sessions;
            self.s.wal(
                "Relation users",
                &[relation(&users(ReplicaIdentity::Default))],
            );
            let confirmed = self.s.confirmed;
            let pending: Vec<(Lsn, Vec<u64>)> = self
                .committed
                .iter()
                .filter(|(end, _)| *end > confirmed)
                .cloned()
                .collect();
            for (end, ids) in pending {
                self.send(end.0, 1, &ids);
            }
        }
    }

    fn answer(&mut self, step: &Step) {
        if self.s.waiting_requests() == 0 {
            return;
        }
        let is_ingress = self.s.pending_bodies()[0].contains('{');
        match (step, is_ingress) {
            (Step::Accept, true) | (Step::Complete, true) => self.s.accept(),
            (Step::Complete, false) | (Step::Accept, false) => self.s.complete(),
            (Step::InProgress, false) => self.s.in_progress(),
            (Step::InProgress, true) => self.s.accept(),
            (Step::Unavailable, _) => self.s.answer(
                503,
                r#"{"message":"down","error_code":"PipelineUnavailable","details":{}}"#,
            ),
            (Step::Restarted, false) => self.s.answer(
                410,
                r#"{"message":"restarted","error_code":"PipelineRestarted","details":{}}"#,
            ),
            (Step::Restarted, true) => self.s.fail("connection reset"),
            _ => {}
        }
    }

    fn check(&mut self, before: Lsn) -> Result<(), TestCaseError> {
        let s = &self.s;
        prop_assert!(
            s.confirmed >= before,
            "flush went backwards: {} -> {}",
            before,
            s.confirmed
        );
        let durable = s.completed_lines().join("\n");
        for (end, ids) in &self.committed {
            if *end <= s.confirmed {
                for id in ids {
                    prop_assert!(
                        durable.contains(&format!("\"id\":{id},")),
                        "flush {} passed commit {} whose row {} is not durable",
                        s.confirmed,
                        end,
                        id
                    );
                }
            }
        }
        let exited = s.exit().is_some();
        let pipeline = s.pipeline();
        if exited {
            prop_assert!(pipeline.poll_timeout().is_none(), "a deadline after Exit");
        } else if pipeline.has_pending_work() && s.waiting_requests() == 0 {
            prop_assert!(
                pipeline.poll_timeout().is_some(),
                "work pending and no deadline"
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_scenarios_keep_the_ack_invariants(
        steps in proptest::collection::vec(step(), 1..60),
        linger in prop_oneof![Just("0"), Just("30")],
        max_rows in 1..6u64,
    ) {
        let max_rows = max_rows.to_string();
        let s = streaming(&[("BATCH_LINGER_MS", linger), ("BATCH_MAX_ROWS", &max_rows), ("NO_PROGRESS_TIMEOUT_SECS", "3")]);
        let mut world = World { s, committed: Vec::new(), next_xid: 700, next_end: 0x2000, replayed_session: 1 };
        for step in steps {
            let before = world.s.confirmed;
            if world.s.exit().is_some() {
                break;
            }
            match &step {
                Step::Tx(rows) => world.tx(*rows),
                Step::Tick(ms) => world.s.advance(*ms),
                Step::Keepalive => {
                    // Past the last commit, before anything the next transaction writes.
                    let at = Lsn(world.next_end - 0x180);
                    world.s.keepalive(at, false);
                }
                Step::Disconnect => world.s.disconnect(),
                other => world.answer(other),
            }
            world.replay_if_reconnected();
            world.check(before)?;
        }
        let trace = world.s.take_trace();
        if let Some(exit_line) = trace.lines().position(|l| l.contains(" exit ")) {
            let after: Vec<&str> = trace.lines().skip(exit_line + 1).filter(|l| l.contains(" -> ")).collect();
            prop_assert!(after.is_empty(), "commands after Exit: {after:?}");
        }
    }
}

fn scenario(chunk: usize) -> String {
    let mut s = streaming(&[("BATCH_LINGER_MS", "30"), ("BATCH_MAX_ROWS", "3")]);
    s.set_chunking(chunk);
    insert_tx(&mut s, 700, 0x2100, &["1", "2", "3", "4"]);
    s.keepalive(Lsn(0x2100), true);
    s.accept();
    s.in_progress();
    s.advance(5);
    s.complete();
    insert_tx(&mut s, 701, 0x2200, &["5"]);
    s.advance(40);
    s.settle();
    s.keepalive(Lsn(0x3000), false);
    s.disconnect();
    s.advance(100);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 702, 0x3100, &["6"]);
    s.advance(40);
    s.settle();
    s.shutdown();
    s.take_trace()
}

/// The decisions of a trace: every line but the `next` lines, which show the timer table
/// between inputs and so depend on how many inputs the bytes arrived in.
fn decisions(trace: &str) -> String {
    trace
        .lines()
        .filter(|l| !l.trim_start().starts_with("next "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_same_scenario_fed_byte_by_byte_gives_the_same_trace() {
    let whole = decisions(&scenario(0));
    assert!(whole.contains("exit 0"), "{whole}");
    assert!(
        whole.lines().filter(|l| l.contains("POST ingress")).count() >= 3,
        "{whole}"
    );
    assert_eq!(decisions(&scenario(1)), whole);
    assert_eq!(decisions(&scenario(7)), whole);
}
