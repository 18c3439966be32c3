//! The hand-written seeds of the pipeline target, built from events, and what each must
//! reach. The committed files in `fuzz/seeds/pipeline/` must equal these bytes; when they
//! do not, the test writes the current ones to a temporary directory and names it.

use super::feldera::{COMPLETION_ANSWERS, INGRESS_ANSWERS};
use super::input::{encode, Event, Setup};
use super::pg::START;
use super::{run_pipeline, PipelineRun};
use std::path::PathBuf;

use Event::*;

/// Answers the oldest waiting request well (the schema, a token, `complete`).
const GOOD: Event = Answer { pick: 0, class: 0 };
/// Ingress 202 with a token; completion `inprogress`.
const SECOND: Event = Answer {
    pick: 0,
    class: 0x80,
};

/// Answers the second of two waiting requests (the newest) well.
const LATEST: Event = Answer {
    pick: 0xff,
    class: 0,
};

/// The class byte that picks answer `index` of a table of `len` answers.
fn class(index: usize, len: usize) -> Event {
    let class = (0xa0..=0xff)
        .find(|c| usize::from(*c) % len == index)
        .unwrap_or(0);
    Answer { pick: 0, class }
}

fn ingress_503() -> Event {
    class(7, INGRESS_ANSWERS.len())
}

fn completion_410_restarted() -> Event {
    class(2, COMPLETION_ANSWERS.len())
}

/// Streaming from the first session: the schema, then the slot's keepalive.
fn stream() -> Vec<Event> {
    vec![GOOD, Deliver(0)]
}

/// A checkpoint requested when due, answered 200, and its status asked: success.
fn checkpoint() -> Vec<Event> {
    vec![TickAtDeadline(0), GOOD, TickAtDeadline(0), GOOD]
}

/// A transaction delivered whole.
fn tx(changes: &[u8]) -> [Event; 2] {
    [Tx(changes.to_vec()), Deliver(0)]
}

/// A snapshot run (`SNAPSHOT_MODE=initial`): the state file it finds (`input::StateFile`
/// by index), rows before the run, three workers or one, heap spread, stale rows in Feldera.
fn snapshot_setup(state: u8, rows: u8, workers: bool, spread: u8, stale: bool) -> Setup {
    Setup {
        snapshot: true,
        state,
        rows,
        workers,
        spread,
        stale,
        ..Setup::default()
    }
}

/// `setup` with publication `choice` (`Setup::publication`: the bits of
/// `CRASH_AFTER_BATCHES`, without a crash point): 1 filters users (`((id % 3) <> 0)`) and
/// lists only items' key, 2 lists only users' key and filters items (`(sku <> 's1'::text)`),
/// 3 does both to both.
fn published(choice: u8, setup: Setup) -> Setup {
    Setup {
        crash: 0,
        crash_after: choice,
        ..setup
    }
}

/// The copy goes on: a chunk of one connection's bytes, two requests answered well, time to
/// the next deadline; `n` times.
fn copy_rounds(n: usize, chunk: u8) -> Vec<Event> {
    (0..n)
        .flat_map(|_| [Deliver(chunk), GOOD, GOOD, TickAtDeadline(0)])
        .collect()
}

/// The run of `hand-restart-paused-body` (see there): a body held unread while Feldera is
/// paused outlives the process that sent it, and lands after the new process's at the
/// resume.
pub(super) fn restart_paused_body() -> (Setup, Vec<Event>) {
    let setup = Setup {
        window: 1,
        ..Setup::default()
    };
    let events = [
        stream(),
        tx(&[0]).into(),
        vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
        vec![FelderaPause(0)],
        tx(&[2]).into(),
        vec![TickAtDeadline(0), ProcessRestart(0), LATEST, Deliver(0)],
        tx(&[2]).into(),
        vec![TickAtDeadline(0), TickAtDeadline(0), TickAtDeadline(0)],
        vec![FelderaPause(1), TickAtDeadline(0), TickAtDeadline(0)],
        vec![TickAtDeadline(0), LATEST, LATEST, TickAtDeadline(0), LATEST],
        vec![TickAtDeadline(0), LATEST, LATEST],
    ]
    .concat();
    (setup, events)
}

struct Seed {
    name: &'static str,
    setup: Setup,
    events: Vec<Event>,
    reached: fn(&PipelineRun) -> bool,
}

fn seeds() -> Vec<Seed> {
    vec![
        Seed {
            // Two batches, the second split over both tables; then an idle keepalive.
            name: "hand-stream-complete",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0, 0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD],
                tx(&[1, 0, 0x12]).into(),
                vec![GOOD, GOOD, GOOD, GOOD],
                vec![Keepalive(0x21), Deliver(0), TickAtDeadline(0)],
            ]
            .concat(),
            reached: |run| {
                run.streams == 1
                    && run.durable_batches >= 3
                    && run.reported_flush > START
                    && run.exit.is_none()
            },
        },
        Seed {
            // Accepted, then the connection breaks: the next session replays the commit.
            name: "hand-reconnect-replay",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0, 0, 0]).into(),
                vec![GOOD, Disconnect(0), TickAtDeadline(0)],
                vec![GOOD, GOOD, Deliver(0), GOOD, GOOD],
            ]
            .concat(),
            reached: |run| run.streams == 2 && run.reported_flush > START,
        },
        Seed {
            // A stop sends what is buffered, waits for it, and confirms the final position.
            name: "hand-stop",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0, 1]).into(),
                vec![Shutdown, GOOD, GOOD, GOOD, GOOD],
            ]
            .concat(),
            reached: |run| run.exit == Some(0) && run.reported_flush > START,
        },
        Seed {
            // Accepted mode, one request per transaction, bytes in small chunks.
            name: "hand-accepted-chunks",
            setup: Setup {
                accepted: true,
                linger: 1,
                max_rows: 5,
                ..Setup::default()
            },
            events: [
                stream(),
                vec![Tx(vec![0, 1, 8]), Tx(vec![2])],
                vec![Deliver(7); 90],
                vec![
                    GOOD,
                    GOOD,
                    GOOD,
                    TickAtDeadline(3),
                    Keepalive(5),
                    Deliver(1),
                ],
            ]
            .concat(),
            reached: |run| run.durable_batches >= 3 && run.reported_flush > START,
        },
        Seed {
            // Batches cut by size (BATCH_MAX_BYTES=1024) while one is in flight: reading
            // pauses until the batch is durable.
            name: "hand-bytes-backpressure",
            setup: Setup {
                small_batches: true,
                max_rows: 7,
                linger: 4,
                ..Setup::default()
            },
            events: [
                stream(),
                vec![Tx(vec![0, 1, 0, 1, 0]); 30],
                vec![Deliver(0), Deliver(0), GOOD, GOOD, GOOD, GOOD],
                vec![Deliver(0), GOOD, GOOD, GOOD, GOOD, TickAtDeadline(0)],
                vec![GOOD, GOOD, GOOD, GOOD],
            ]
            .concat(),
            reached: |run| {
                run.durable_batches >= 4 && run.pauses >= 1 && run.reported_flush > START
            },
        },
        Seed {
            // A transient ingress failure, a polled completion, a restarted pipeline, and
            // finally a damaged pgoutput message.
            name: "hand-faults",
            setup: Setup {
                max_rows: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0]).into(),
                // The 503 leaves users quarantined: the probe's first look (at once), the
                // backoff and its second look a second later (the table's counters still)
                // each need their tick before the replay goes out.
                vec![
                    ingress_503(),
                    TickAtDeadline(0),
                    TickAtDeadline(0),
                    TickAtDeadline(0),
                    GOOD,
                    Deliver(0),
                ],
                vec![GOOD, SECOND, TickAtDeadline(0), completion_410_restarted()],
                vec![TickAtDeadline(0), GOOD, Deliver(0), GOOD, GOOD],
                vec![Corrupt {
                    kind: 2,
                    tag: 0,
                    body: b"junk".to_vec(),
                }],
                vec![Deliver(0)],
            ]
            .concat(),
            reached: |run| run.streams == 3 && run.exit == Some(1) && run.reported_flush > START,
        },
        Seed {
            name: "hand-crash-after-ack",
            setup: Setup {
                crash: 4,
                ..Setup::default()
            },
            events: [stream(), tx(&[0, 0, 0]).into(), vec![GOOD, GOOD]].concat(),
            reached: |run| run.exit == Some(70),
        },
        Seed {
            // A new slot, startup answers in small chunks, the schema before PostgreSQL is
            // through.
            name: "hand-slow-startup",
            setup: Setup {
                slow_pg: true,
                create_slot: true,
                ..Setup::default()
            },
            events: [
                vec![Deliver(5); 10],
                vec![GOOD],
                vec![Deliver(0); 12],
                tx(&[0, 0, 0]).into(),
                vec![GOOD, GOOD],
            ]
            .concat(),
            reached: |run| run.streams == 1 && run.reported_flush > START,
        },
        Seed {
            // A completion that never comes: exit 69 after NO_PROGRESS_TIMEOUT_SECS.
            name: "hand-no-progress",
            setup: Setup {
                no_progress: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0, 0, 0]).into(),
                vec![GOOD, SECOND, Tick(50), Tick(50)],
            ]
            .concat(),
            reached: |run| run.exit == Some(69),
        },
        Seed {
            // The slot is still held, then a connection is refused: two backoffs.
            name: "hand-busy-refused",
            setup: Setup {
                slot_busy: true,
                ..Setup::default()
            },
            events: [
                vec![
                    GOOD,
                    RefuseConnects(1),
                    TickAtDeadline(0),
                    TickAtDeadline(0),
                ],
                vec![GOOD, GOOD, Deliver(0)],
                tx(&[0, 0, 0]).into(),
                vec![GOOD, GOOD],
            ]
            .concat(),
            reached: |run| run.streams == 1 && run.reported_flush > START,
        },
        Seed {
            // The server ends the stream, then terminates the next session with an error.
            name: "hand-server-ends",
            setup: Setup::default(),
            events: [
                stream(),
                vec![
                    ServerEnds(0),
                    Deliver(0),
                    TickAtDeadline(0),
                    GOOD,
                    Deliver(0),
                ],
                vec![
                    ServerEnds(1),
                    Deliver(0),
                    TickAtDeadline(0),
                    GOOD,
                    Deliver(0),
                ],
                tx(&[0, 0, 0]).into(),
                vec![GOOD, GOOD],
            ]
            .concat(),
            reached: |run| run.streams == 3 && run.reported_flush > START,
        },
        Seed {
            // Four batches in flight, one transaction each; answers out of order.
            name: "hand-window-four",
            setup: Setup {
                window: 1,
                linger: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0]).into(),
                tx(&[0, 0x10]).into(),
                tx(&[1]).into(),
                tx(&[0]).into(),
                vec![Answer { pick: 2, class: 0 }, GOOD, GOOD, SECOND],
                vec![Answer { pick: 3, class: 0 }, GOOD, GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, TickAtDeadline(0)],
                vec![GOOD, GOOD, GOOD, GOOD],
            ]
            .concat(),
            reached: |run| run.durable_batches >= 3 && run.reported_flush > START,
        },
        Seed {
            // FELDERA_TRANSACTIONS=large: a five-row transaction in batches of two goes into
            // a Feldera transaction (start, three batches, settle, commit, await).
            name: "hand-transaction-large",
            setup: Setup {
                transactions: 1,
                max_rows: 2,
                linger: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0, 0, 0, 0, 0]).into(),
                vec![GOOD; 12],
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| {
                run.commits == 1 && run.durable_batches >= 3 && run.reported_flush > START
            },
        },
        Seed {
            // The last status update is lost with the connection: the acknowledged commit
            // comes again and must not move anything backwards.
            name: "hand-lost-status",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0, 0, 0]).into(),
                vec![
                    GOOD,
                    GOOD,
                    Disconnect(2),
                    TickAtDeadline(0),
                    GOOD,
                    Deliver(0),
                ],
                tx(&[0, 0, 0]).into(),
                vec![GOOD, GOOD, GOOD, GOOD, Keepalive(1), Deliver(0)],
            ]
            .concat(),
            reached: |run| {
                run.streams == 2 && run.reported_flush > START && run.status_updates >= 3
            },
        },
        Seed {
            // A session ends while Feldera still reads its request (user 1 inserted); the
            // next session replays it with a rename. The old request's record lands only
            // after the replay was posted, completed and acknowledged unless the next
            // session waits for it: it must never leave the older name in Feldera.
            name: "hand-late-upload",
            setup: Setup {
                window: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0]).into(),
                vec![TickAtDeadline(0)],
                tx(&[2]).into(),
                vec![Disconnect(0), TickAtDeadline(0), LATEST, Deliver(0)],
                vec![TickAtDeadline(0), LATEST, TickAtDeadline(0), LATEST],
                vec![Upload { pick: 0, n: 3 }, GOOD, TickAtDeadline(0)],
                vec![LATEST, LATEST, TickAtDeadline(0), LATEST, LATEST],
            ]
            .concat(),
            reached: |run| run.streams == 2 && run.converged && run.reported_flush > START,
        },
        Seed {
            // The process dies with a body Feldera holds unread while paused: user 1 is
            // inserted and acknowledged, Feldera pauses, the rename's body waits unread (its
            // answer would be the manager's 503), and the process is killed. The new one
            // starts while Feldera is paused, streams the rename again and a second rename
            // after it; at the resume Feldera reads the dead process's body after the new
            // one's (reversed order). Only the start's quarantine of users (its endpoint
            // does not read) keeps the new process from writing before that: without it
            // Feldera ends with the first rename while the slot covers the second.
            name: "hand-restart-paused-body",
            setup: restart_paused_body().0,
            events: restart_paused_body().1,
            reached: |run| {
                run.process_restarts == 1
                    && run.feldera_pauses == 1
                    && run.orphans_landed == 1
                    && run.converged
                    && run.reported_flush > START
            },
        },
        Seed {
            // Feldera restarts and loses a batch it had accepted but not completed; the next
            // batch on the same table completes in the new incarnation. Its token vouches
            // for nothing of the old one: the lost batch is never acknowledged, the old
            // token answers 410 and the next session sends it again.
            name: "hand-feldera-restart",
            setup: Setup {
                window: 1,
                linger: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0]).into(),
                vec![GOOD, TickAtDeadline(0), SECOND, FelderaRestart(1)],
                tx(&[0x10]).into(),
                vec![GOOD, TickAtDeadline(0), GOOD, TickAtDeadline(0), GOOD],
                vec![TickAtDeadline(0), GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| run.streams == 2 && run.restarts == 1 && run.converged,
        },
        Seed {
            // A run finds a Feldera transaction left open: with FELDERA_TRANSACTIONS=large the
            // session commits it before its first batch (one row: no transaction of its
            // own), or nothing it sends would complete.
            name: "hand-transaction-left-open",
            setup: Setup {
                transactions: 3,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| run.commits >= 1 && run.converged && run.reported_flush > START,
        },
        Seed {
            // A TRUNCATE of users between two inserts in one transaction: the row before it
            // never counts, Feldera's keys are read in one streamed scan and deleted, the count
            // says zero, and the row after it survives.
            name: "hand-truncate-between-rows",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0, 1, 0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD],
                tx(&[0, 7, 0]).into(),
                vec![GOOD, GOOD, GOOD, GOOD, TickAtDeadline(0), GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| run.queries >= 2 && run.converged && run.reported_flush > START,
        },
        Seed {
            // Rows of one commit still linger in the outbox (200 ms, 100 rows) when a
            // transaction that is only a TRUNCATE of their table arrives: they are sent and
            // made durable first, and the flush passes both commits.
            name: "hand-truncate-after-lingering-rows",
            setup: Setup {
                linger: 4,
                max_rows: 5,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0, 0]).into(),
                tx(&[7]).into(),
                vec![GOOD, GOOD, GOOD, GOOD, TickAtDeadline(0), GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| run.queries >= 2 && run.converged && run.reported_flush > START,
        },
        Seed {
            // Three commits acknowledged; the server is restored from a backup two commits
            // back, without the slot. The next session creates it below the flush the
            // pipeline reported, and must report only the new slot's positions.
            name: "hand-slot-restored-below-flush",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD],
                tx(&[0x10]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD],
                tx(&[1]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
                vec![SlotGone(3), TickAtDeadline(0), GOOD, Deliver(0)],
                tx(&[0x11]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
            ]
            .concat(),
            reached: |run| {
                run.slots_created == 1 && run.slot_below_flush && run.streams == 2 && run.converged
            },
        },
        Seed {
            // The slot is dropped (its walsender terminated) with a commit not yet
            // confirmed, and a rename is committed while no slot exists: both are outside
            // the promise. The next session creates the slot at the WAL's end and streams
            // what follows.
            name: "hand-slot-dropped",
            setup: Setup::default(),
            events: [
                stream(),
                tx(&[0, 0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
                tx(&[2]).into(),
                vec![
                    SlotGone(0),
                    Tx(vec![0x12]),
                    TickAtDeadline(0),
                    GOOD,
                    Deliver(0),
                ],
                tx(&[0, 1]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
            ]
            .concat(),
            reached: |run| run.slots_created == 1 && run.streams == 2 && run.converged,
        },
        Seed {
            // A large transaction's rows are in a Feldera transaction when the slot is
            // dropped (FELDERA_TRANSACTIONS=large, one row per batch). The next session
            // creates the slot and its first table request is a TRUNCATE's key query: the
            // open transaction must be committed first, or the query misses its rows and
            // the deletes join it and never complete.
            name: "hand-truncate-with-transaction-open",
            setup: Setup {
                transactions: 1,
                max_rows: 1,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
                tx(&[0, 0, 0]).into(),
                vec![GOOD, GOOD, GOOD, GOOD, GOOD, GOOD, TickAtDeadline(0)],
                vec![SlotGone(0), TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD, Deliver(0)],
                tx(&[7]).into(),
                vec![GOOD, GOOD, GOOD, GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| {
                run.slots_created == 1 && run.queries >= 2 && run.commits >= 1 && run.converged
            },
        },
        Seed {
            // Fault tolerance: two checkpoints acknowledge the first transaction (the
            // session's first credits nothing); the second completes but no checkpoint holds
            // it when Feldera restarts from the last one, and the slot replays it.
            name: "hand-checkpoint-resume",
            setup: Setup {
                fault_tolerance: true,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0, 1]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD, GOOD],
                checkpoint(),
                checkpoint(),
                tx(&[0x11]).into(),
                vec![TickAtDeadline(0), GOOD, TickAtDeadline(0), GOOD],
                vec![FelderaRestart(1)],
            ]
            .concat(),
            reached: |run| {
                run.checkpoints >= 2
                    && run.resumed == 1
                    && run.restarts == 1
                    && run.reported_flush > START
                    && run.streams >= 2
                    && run.converged
            },
        },
        Seed {
            // Feldera starts a checkpoint on its own before the transaction completes; the
            // pipeline's request joins it, and its success (the state from before the
            // transaction) must not acknowledge the transaction: only the next one does.
            name: "hand-checkpoint-joined",
            setup: Setup {
                fault_tolerance: true,
                ..Setup::default()
            },
            events: [
                stream(),
                tx(&[0, 1]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, FelderaRestart(2)],
                vec![TickAtDeadline(0), GOOD, GOOD],
                checkpoint(),
                checkpoint(),
                vec![Keepalive(0x21), Deliver(0), TickAtDeadline(0)],
            ]
            .concat(),
            reached: |run| {
                run.checkpoints >= 2
                    && run.checkpoints_joined >= 1
                    && run.reported_flush > START
                    && run.restarts == 0
                    && run.converged
            },
        },
        Seed {
            // A fresh start: no state file, no slot, rows in both tables. Feldera's tables
            // are counted (empty), the slot exports a snapshot, three workers copy ranges of
            // a table spread over 7,000 blocks in chunks of 9 bytes, a commit after the
            // consistent point is streamed once the copy is complete.
            name: "hand-snapshot-fresh",
            setup: Setup {
                create_slot: true,
                ..snapshot_setup(0, 3, true, 1, false)
            },
            events: [
                vec![GOOD, GOOD, GOOD, Tx(vec![0, 1, 0x14])],
                copy_rounds(40, 9),
                tx(&[2]).into(),
                vec![GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| {
                run.exports == 1
                    && run.completes == 1
                    && run.streams == 1
                    && run.reported_flush > START
                    && run.converged
            },
        },
        Seed {
            // An interrupted copy (state pending) with the slot still there and Feldera
            // holding half the rows, a stale value and two keys PostgreSQL never had: the
            // slot is dropped and created again, the leftovers are read in pages, checked
            // under the snapshot and deleted, the copy counted.
            name: "hand-snapshot-leftovers",
            setup: snapshot_setup(1, 2, false, 2, true),
            events: [vec![GOOD], copy_rounds(30, 0)].concat(),
            reached: |run| {
                run.exports == 1 && run.queries >= 4 && run.completes == 1 && run.converged
            },
        },
        Seed {
            // A complete copy and its slot: streaming. The slot is dropped with a commit
            // not yet confirmed, and a delete is committed while none exists: the next
            // session finds the state complete and no slot, copies again and retracts what
            // the new snapshot lacks, so Feldera ends equal to PostgreSQL.
            name: "hand-snapshot-slot-dropped",
            setup: snapshot_setup(2, 1, false, 0, false),
            events: [
                stream(),
                tx(&[0, 2]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
                tx(&[0x12]).into(),
                vec![SlotGone(0), Tx(vec![4]), TickAtDeadline(0), GOOD],
                copy_rounds(20, 0),
            ]
            .concat(),
            reached: |run| {
                run.exports == 1 && run.completes == 1 && run.streams == 2 && run.converged
            },
        },
        Seed {
            // Feldera without fault tolerance restarts and comes back empty after a commit
            // was acknowledged: the keeper sees the new incarnation, the next session's plan
            // copies every table again (FELDERA_RESTART=resnapshot).
            name: "hand-snapshot-feldera-restarted-empty",
            setup: snapshot_setup(2, 2, false, 0, false),
            events: [
                stream(),
                tx(&[0, 1]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
                vec![
                    FelderaRestart(1),
                    TickAtDeadline(0),
                    TickAtDeadline(0),
                    GOOD,
                ],
                copy_rounds(20, 0),
            ]
            .concat(),
            reached: |run| {
                run.restarts == 1 && run.exports == 1 && run.completes == 1 && run.converged
            },
        },
        Seed {
            // With fault tolerance a fresh copy is recorded complete only once a Feldera
            // checkpoint holds it.
            name: "hand-snapshot-checkpointed",
            setup: Setup {
                create_slot: true,
                fault_tolerance: true,
                ..snapshot_setup(0, 2, false, 0, false)
            },
            events: [vec![GOOD, GOOD, GOOD], copy_rounds(30, 0)].concat(),
            reached: |run| run.checkpoints >= 1 && run.completes == 1 && run.converged,
        },
        Seed {
            // A worker's connection breaks in the middle of a COPY, and the next connect is
            // refused: the session ends with the state pending, the next one drops the slot,
            // exports a new snapshot and copies again.
            name: "hand-snapshot-worker-breaks",
            setup: Setup {
                create_slot: true,
                ..snapshot_setup(0, 3, true, 1, false)
            },
            events: [
                vec![GOOD, GOOD, GOOD],
                vec![Deliver(5); 6],
                vec![Disconnect(1), RefuseConnects(1), TickAtDeadline(0)],
                vec![TickAtDeadline(0), TickAtDeadline(0), GOOD],
                copy_rounds(40, 7),
            ]
            .concat(),
            reached: |run| run.exports == 2 && run.completes == 1 && run.converged,
        },
        Seed {
            // A complete copy of users alone, items added since (Feldera's items holds a
            // stale value and a key PostgreSQL never had): a transaction is committed
            // before the start, then only items is copied under a temporary slot's
            // snapshot, its stale rows retracted, and the stream delivers users from the
            // slot's own position while skipping the items changes the copy holds; a
            // transaction after the copy changes both tables.
            name: "hand-snapshot-route-added",
            setup: snapshot_setup(2, 2, false, 0, true),
            events: [
                vec![Tx(vec![0, 1, 0x14]), GOOD, GOOD, GOOD],
                copy_rounds(30, 0),
                tx(&[2, 0x11, 6]).into(),
                vec![GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| {
                run.exports == 1
                    && run.completes == 1
                    && run.queries >= 1
                    && run.streams == 1
                    && run.reported_flush > START
                    && run.converged
            },
        },
        Seed {
            // Streaming after a complete copy, the slot is dropped; the next session must
            // copy again, and the disk refuses its write of `pending`: the run exits 1
            // before it drops or creates anything.
            name: "hand-snapshot-state-write-fails",
            setup: snapshot_setup(2, 1, false, 0, false),
            events: [
                stream(),
                tx(&[0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0)],
                vec![SlotGone(0), RefuseConnects(4), TickAtDeadline(0), GOOD],
                copy_rounds(5, 0),
            ]
            .concat(),
            reached: |run| {
                run.streams == 1
                    && run.state_failures == 1
                    && run.exports == 0
                    && run.exit == Some(1)
            },
        },
        Seed {
            // Users filtered by id, items published by key alone, streaming: users 3 and 6
            // are outside the filter. A key change publishes an INSERT (3 -> 4), an UPDATE
            // (1 -> 5) and a DELETE (2 -> 6); a rename and a delete of user 6 publish
            // nothing; a TRUNCATE retracts only the published users; items carry no
            // quantity.
            name: "hand-publication-stream",
            setup: published(1, Setup::default()),
            events: [
                stream(),
                tx(&[0, 0, 0, 1, 0x11]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD],
                tx(&[0x23, 0x03, 0x13, 0x12, 2]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD],
                tx(&[0x14, 0x21, 0x16]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD],
                tx(&[4, 7, 0, 0]).into(),
                vec![TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD, GOOD, GOOD],
                vec![TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| {
                run.streams == 1 && run.queries >= 2 && run.reported_flush > START && run.converged
            },
        },
        Seed {
            // A fresh copy of a publication that lists only users' key and filters items
            // (s1 left out), on three workers in ranges and chunks; then a commit streamed.
            name: "hand-publication-snapshot-fresh",
            setup: published(
                2,
                Setup {
                    create_slot: true,
                    ..snapshot_setup(0, 3, true, 1, false)
                },
            ),
            events: [
                vec![GOOD, GOOD, GOOD, Tx(vec![0, 0x11, 0x12])],
                copy_rounds(40, 9),
                tx(&[2, 0x21, 0x16]).into(),
                vec![GOOD, GOOD, TickAtDeadline(0), GOOD],
            ]
            .concat(),
            reached: |run| {
                run.exports == 1
                    && run.completes == 1
                    && run.streams == 1
                    && run.reported_flush > START
                    && run.converged
            },
        },
        Seed {
            // An interrupted copy left rows of both tables in Feldera with every column,
            // user 3 among them, which the filter leaves out although PostgreSQL holds it,
            // and stale rows: the copy again reads keys alone inside the filters, and the
            // leftover question (with the filter) retracts user 3 as well.
            name: "hand-publication-snapshot-leftovers",
            setup: published(3, snapshot_setup(1, 3, false, 2, true)),
            events: [vec![GOOD], copy_rounds(30, 0)].concat(),
            reached: |run| {
                run.exports == 1 && run.queries >= 4 && run.completes == 1 && run.converged
            },
        },
        Seed {
            // Items added since the state file's copy of users, Feldera's items empty: the
            // start counts it and copies it online, one row a chunk. Item s0 is overwritten
            // after the first chunk read it and before its watermark: the stream carries the
            // newer value before the watermark, whose answer reaches the copier before the
            // stream does, and the chunk must leave s0 to it. Then the chunks go on beside
            // changes of keys they read later.
            name: "hand-online-copy-window",
            setup: online_setup(false),
            events: [
                vec![GOOD, GOOD, GOOD, Tx(vec![0x01])],
                // The stream's first byte, the chunk's answer (its watermark is written), one
                // byte more, the watermark's answer, then the stream up to the watermark.
                vec![Deliver(1), Deliver(0), Deliver(1), Deliver(0), Deliver(0)],
                vec![GOOD, GOOD, TickAtDeadline(0), GOOD, GOOD],
                tx(&[0x21, 0x36]).into(),
                copy_rounds(6, 0),
            ]
            .concat(),
            reached: |run| {
                run.online_chunks >= 4
                    && run.window_changes >= 1
                    && run.first_chunk_late == Some(false)
                    && run.online_completes == 1
                    && run.exports == 0
                    && run.streams == 1
                    && run.converged
            },
        },
        Seed {
            // The online copy, one row a chunk: the first chunk (s0) is durable and recorded
            // (`copied_through`), the second read, when the process is killed. The new one
            // reads the state file and goes on after s0 without counting Feldera's items
            // (it holds the first chunk); s1 changes inside the window of its chunk there.
            name: "hand-online-copy-resumed",
            setup: online_setup(false),
            events: [
                vec![GOOD, GOOD, GOOD],
                vec![Deliver(0), Deliver(0), Deliver(0), Deliver(0)],
                vec![GOOD, GOOD, TickAtDeadline(0), GOOD, GOOD, Deliver(0)],
                vec![ProcessRestart(0), GOOD, GOOD, Tx(vec![0x11])],
                copy_rounds(8, 0),
            ]
            .concat(),
            reached: |run| {
                run.process_restarts == 1
                    && run.resumed_reads >= 1
                    && run.window_changes >= 1
                    && run.online_completes == 1
                    && run.exports == 0
                    && run.converged
            },
        },
        Seed {
            // Two rows a chunk: the first chunk (s0, s1) is read, s1 is deleted and s0
            // overwritten, and the stream delivers those and the chunk's watermark before
            // the watermark's answer reaches the copier: the chunk is judged where the
            // stream stands (late), leaving both keys to the stream.
            name: "hand-online-copy-late",
            setup: online_setup(true),
            events: [
                vec![GOOD, GOOD, GOOD, Tx(vec![0x16, 0x01])],
                vec![Deliver(0), Deliver(0), Deliver(0), Deliver(0), Deliver(0)],
                copy_rounds(6, 0),
            ]
            .concat(),
            reached: |run| {
                run.first_chunk_late == Some(true)
                    && run.window_changes >= 1
                    && run.online_completes == 1
                    && run.converged
            },
        },
        Seed {
            // The online copy of a publication that filters items (s1 left out) and lists
            // only users' key: the chunks read inside the filter; s1 is inserted and s2
            // overwritten while the copy goes on.
            name: "hand-online-copy-filtered",
            setup: published(2, online_setup(false)),
            events: [
                vec![GOOD, GOOD, GOOD, Tx(vec![0x21])],
                vec![Deliver(0), Deliver(0), Deliver(0), Deliver(0)],
                tx(&[0x11, 0x21]).into(),
                copy_rounds(6, 0),
            ]
            .concat(),
            reached: |run| run.online_chunks >= 3 && run.online_completes == 1 && run.converged,
        },
    ]
}

/// A state file that copied users alone, items added since and empty in Feldera
/// (`CompleteWithoutItemsEmpty`), four skus and seven users before the run: items is copied
/// online, one row a chunk (two with `two`).
fn online_setup(two: bool) -> Setup {
    snapshot_setup(2, 3, false, if two { 3 } else { 1 }, true)
}

fn seed_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/pipeline")
}

#[test]
fn hand_written_pipeline_seeds_reach_what_they_are_named_for() {
    for seed in seeds() {
        let run = run_pipeline(&encode(&seed.setup, &seed.events));
        assert!((seed.reached)(&run), "{}: {run:?}", seed.name);
    }
}

#[test]
fn hand_written_pipeline_seeds_are_committed() {
    let fresh = std::env::temp_dir().join("slotline-pipeline-seeds");
    let mut stale = Vec::new();
    for seed in seeds() {
        let bytes = encode(&seed.setup, &seed.events);
        let committed = std::fs::read(seed_dir().join(seed.name)).unwrap_or_default();
        if committed != bytes {
            std::fs::create_dir_all(&fresh).expect("create a temporary directory");
            std::fs::write(fresh.join(seed.name), &bytes).expect("write a seed");
            stale.push(seed.name);
        }
    }
    assert!(
        stale.is_empty(),
        "seeds {stale:?} are stale or missing: the current bytes are in {}; copy them into {}",
        fresh.display(),
        seed_dir().display()
    );
}
