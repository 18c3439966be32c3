//! The fuzz input of the pipeline target: a four-byte setup (five when bit 2 of the fourth
//! byte asks for the snapshot phase), then events, each an opcode byte followed by its
//! argument bytes (an opcode is taken modulo 14, but for the bytes 0xe2 to 0xf9, which
//! no committed seed used while they meant that: `PROCESS_OPCODES`). Without a crash point, bits 3-4 of the third byte (otherwise
//! `CRASH_AFTER_BATCHES`) choose the publication's row filters and column lists
//! (`Setup::publication`). Every byte string decodes (missing bytes read as zero), and
//! `encode` writes the same layout, so the hand-written seeds are built from events rather
//! than typed as hex.

use super::publication::Publication;

/// Reads bytes, zero past the end.
#[derive(Debug)]
pub(super) struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data, at: 0 }
    }

    pub(super) fn more(&self) -> bool {
        self.at < self.data.len()
    }

    fn byte(&mut self) -> u8 {
        let byte = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        byte
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// The configuration and the fake servers' starting state, each field an index into the
/// tables below (out-of-range indices wrap), packed into four bytes, and a fifth with the
/// snapshot's setting when `snapshot` is set (bit 2 of the fourth byte, the jitter seed's
/// high bit until then, which no committed seed set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// `FELDERA_ACK_MODE=accepted` instead of `completed`.
    pub accepted: bool,
    /// The slot does not exist yet: the first session creates it.
    pub create_slot: bool,
    /// PostgreSQL's startup and catalog answers wait for `Deliver` events like the stream.
    pub slow_pg: bool,
    /// The first startup finds the slot still held by another process.
    pub slot_busy: bool,
    pub wal_sender_timeout: u8,
    pub shutdown_confirm: u8,
    pub max_rows: u8,
    pub linger: u8,
    pub no_progress: u8,
    pub crash: u8,
    /// `CRASH_AFTER_BATCHES` with a crash point; without one (`crash` 0), which publication
    /// the fake PostgreSQL has (`publication`).
    pub crash_after: u8,
    pub completion_timeout: u8,
    /// `BATCH_MAX_BYTES` at its floor (1024), so batches are also cut by size.
    pub small_batches: bool,
    /// `MAX_IN_FLIGHT_BATCHES`.
    pub window: u8,
    /// `FELDERA_TRANSACTIONS`; the last value also finds a Feldera transaction open.
    pub transactions: u8,
    /// Seed of the backoff jitter (0 to 3); bit 0 also picks the checkpoint interval.
    pub seed: u8,
    /// The Feldera pipeline has fault tolerance `at_least_once`: with `FELDERA_DURABILITY=auto`
    /// (and completed acknowledgements) the flush follows Feldera's checkpoints, and a
    /// restart resumes from the last one.
    pub fault_tolerance: bool,
    /// `SNAPSHOT_MODE=initial` instead of `never`: PostgreSQL's tables hold rows before the
    /// run, and the fifth byte sets the rest of the snapshot fields below.
    pub snapshot: bool,
    /// The state file the run finds (`STATE_FILES`).
    pub state: u8,
    /// How many rows the tables hold before the run (`PRE_EXISTING`).
    pub rows: u8,
    /// `SNAPSHOT_WORKERS` 3 instead of 1; with bit 1 of `spread`, the online copy's chunk
    /// size (`Setup::chunk_rows`).
    pub workers: bool,
    /// How far apart rows lie in the heap (`BLOCKS_PER_ROW`): how many ranges a copy cuts.
    /// Bit 0 with `CompleteWithoutItems` empties Feldera's items (`StateFile`); bit 1 and
    /// `workers` pick the online copy's chunk size.
    pub spread: u8,
    /// Feldera holds rows the copy must replace: stale values and keys PostgreSQL never had
    /// (only where the run begins with a copy to make, see `StateFile`).
    pub stale: bool,
}

/// The state file a snapshot run finds (`Setup::state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateFile {
    Absent,
    /// A copy that never finished: Feldera holds part of it.
    Pending,
    /// A finished copy at the run's starting position, for Feldera's current incarnation:
    /// Feldera holds the rows.
    Complete,
    /// A finished copy written to an earlier incarnation of the Feldera pipeline: without
    /// fault tolerance its tables came back empty; with it, they resumed holding the rows.
    CompleteEarlierIncarnation,
    /// A finished copy of `users` alone: `items` was added to the routes since, and its
    /// Feldera table holds stale rows its own copy must replace (`Complete` with `stale`,
    /// which `Complete` alone ignores, and an even `spread`: docs/snapshot.md, "Adding and
    /// removing tables"). The start counts them and copies items under a temporary slot's
    /// exported snapshot.
    CompleteWithoutItems,
    /// `CompleteWithoutItems` with Feldera's items empty (`Complete` with `stale` and an odd
    /// `spread`, which no committed seed had): the start counts it empty and copies items
    /// online, in chunks beside the stream (docs/online-copy.md).
    CompleteWithoutItemsEmpty,
}

const STATE_FILES: [StateFile; 4] = [
    StateFile::Absent,
    StateFile::Pending,
    StateFile::Complete,
    StateFile::CompleteEarlierIncarnation,
];
/// Users and skus that exist before the run (users 1..=n, skus `s0..`).
const PRE_EXISTING: [(u64, usize); 4] = [(0, 0), (2, 1), (4, 3), (7, 4)];
/// Heap blocks between consecutive rows (users by id, items by sku number): 0 keeps every
/// table in one range; the others cut ranges of a table (at least 1024 blocks each).
const BLOCKS_PER_ROW: [u64; 4] = [0, 1024, 300, 2500];
/// `COPY_CHUNK_ROWS` of a snapshot run, by bit 1 of `spread` and `workers`
/// (`Setup::chunk_rows`): only an online copy reads chunks, so the other runs ignore it.
const COPY_CHUNK_ROWS: [&str; 4] = ["1", "3", "2", "10000"];

const WAL_SENDER_TIMEOUT: [&str; 4] = ["60s", "1s", "0", "5s"];
const SHUTDOWN_CONFIRM_MS: [&str; 4] = ["5000", "0", "300", "1000"];
const BATCH_MAX_ROWS: [&str; 8] = ["3", "1", "2", "5", "8", "100", "4", "5000"];
const BATCH_LINGER_MS: [&str; 8] = ["10", "0", "1", "50", "200", "0", "30", "5"];
const NO_PROGRESS_TIMEOUT_SECS: [&str; 4] = ["300", "2", "10", "60"];
/// Indices 5 to 7 (no committed seed used them while they meant no crash) are the snapshot's
/// points; a run without the snapshot phase never reaches them.
const CRASH_AT: [Option<&str>; 8] = [
    None,
    Some("before_send"),
    Some("after_send"),
    Some("after_complete"),
    Some("after_ack"),
    Some("snapshot_after_slot"),
    Some("snapshot_mid_copy"),
    Some("snapshot_before_complete"),
];
const COMPLETION_TIMEOUT_MS: [&str; 4] = ["60000", "100", "1000", "5000"];
const MAX_IN_FLIGHT_BATCHES: [&str; 4] = ["1", "4", "2", "8"];
/// Index 3 is `large` with a transaction left open in Feldera before the run.
const FELDERA_TRANSACTIONS: [&str; 4] = ["off", "large", "all", "large"];
/// `FELDERA_CHECKPOINT_INTERVAL_SECS`, by bit 0 of the jitter seed.
const CHECKPOINT_INTERVAL_SECS: [&str; 2] = ["1", "5"];

fn pick<T: Copy>(table: &[T], index: u8) -> T {
    table[usize::from(index) % table.len()]
}

impl Setup {
    pub(super) fn read(input: &mut Cursor<'_>) -> Setup {
        let [a, b, c, d] = [input.byte(), input.byte(), input.byte(), input.byte()];
        let snapshot = d & 4 != 0;
        let e = if snapshot { input.byte() } else { 0 };
        Setup {
            accepted: a & 1 != 0,
            create_slot: a & 2 != 0,
            slow_pg: a & 4 != 0,
            slot_busy: a & 8 != 0,
            wal_sender_timeout: (a >> 4) & 3,
            shutdown_confirm: a >> 6,
            max_rows: b & 7,
            linger: (b >> 3) & 7,
            no_progress: b >> 6,
            crash: c & 7,
            crash_after: (c >> 3) & 3,
            completion_timeout: (c >> 5) & 3,
            small_batches: c & 0x80 != 0,
            seed: d & 3,
            snapshot,
            fault_tolerance: d & 8 != 0,
            window: (d >> 4) & 3,
            transactions: d >> 6,
            state: e & 3,
            rows: (e >> 2) & 3,
            workers: e & 0x10 != 0,
            spread: (e >> 5) & 3,
            stale: e & 0x80 != 0,
        }
    }

    #[cfg(test)]
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(
            u8::from(self.accepted)
                | u8::from(self.create_slot) << 1
                | u8::from(self.slow_pg) << 2
                | u8::from(self.slot_busy) << 3
                | (self.wal_sender_timeout & 3) << 4
                | (self.shutdown_confirm & 3) << 6,
        );
        out.push((self.max_rows & 7) | (self.linger & 7) << 3 | (self.no_progress & 3) << 6);
        out.push(
            (self.crash & 7)
                | (self.crash_after & 3) << 3
                | (self.completion_timeout & 3) << 5
                | u8::from(self.small_batches) << 7,
        );
        out.push(
            (self.seed & 3)
                | u8::from(self.snapshot) << 2
                | u8::from(self.fault_tolerance) << 3
                | (self.window & 3) << 4
                | (self.transactions & 3) << 6,
        );
        if self.snapshot {
            out.push(
                (self.state & 3)
                    | (self.rows & 3) << 2
                    | u8::from(self.workers) << 4
                    | (self.spread & 3) << 5
                    | u8::from(self.stale) << 7,
            );
        }
    }

    /// The state file the run finds (always absent without the snapshot phase).
    pub(super) fn state_file(&self) -> StateFile {
        match self.snapshot {
            true => match pick(&STATE_FILES, self.state) {
                StateFile::Complete if self.stale && self.spread & 1 != 0 => {
                    StateFile::CompleteWithoutItemsEmpty
                }
                StateFile::Complete if self.stale => StateFile::CompleteWithoutItems,
                file => file,
            },
            false => StateFile::Absent,
        }
    }

    /// Users `1..=n` and skus `s0..s{m-1}` exist before the run (none without the snapshot
    /// phase).
    pub(super) fn pre_existing(&self) -> (u64, usize) {
        match self.snapshot {
            true => pick(&PRE_EXISTING, self.rows),
            false => (0, 0),
        }
    }

    pub(super) fn blocks_per_row(&self) -> u64 {
        pick(&BLOCKS_PER_ROW, self.spread)
    }

    /// Rows per chunk of an online copy: 1 or 3 with `spread` 1 (and 0), 2 or 10,000 with
    /// 3 (and 2), by `workers`; the items table holds at most four rows, so the smaller
    /// ones read it in several chunks.
    pub(super) fn chunk_rows(&self) -> &'static str {
        pick(&COPY_CHUNK_ROWS, (self.spread & 2) | u8::from(self.workers))
    }

    pub(super) fn wal_sender_timeout(&self) -> &'static str {
        pick(&WAL_SENDER_TIMEOUT, self.wal_sender_timeout)
    }

    /// Feldera has a transaction open when the run starts (a run before stopped inside it).
    pub(super) fn transaction_open(&self) -> bool {
        self.transactions & 3 == 3
    }

    pub(super) fn no_progress_secs(&self) -> u64 {
        pick(&NO_PROGRESS_TIMEOUT_SECS, self.no_progress)
            .parse()
            .unwrap_or(u64::MAX)
    }

    pub(super) fn crash_configured(&self) -> bool {
        pick(&CRASH_AT, self.crash).is_some()
    }

    /// What the publication publishes (`Publication::choice`: 0 everything, 1 users
    /// filtered and items' key alone, 2 users' key alone and items filtered, 3 both to both).
    /// Read from the bits of `CRASH_AFTER_BATCHES` (bits 3-4 of the third byte) when no crash
    /// point is configured: unused then, so an older input decodes to "every row, every
    /// column" unless it set them without a crash point (no committed seed does since
    /// `regression-healthy-world-answers-before-the-next-deadline` had them cleared, which
    /// changes nothing of its run). A run with a crash point publishes everything.
    pub(super) fn publication(&self) -> Publication {
        match self.crash_configured() {
            true => Publication::default(),
            false => Publication::choice(self.crash_after),
        }
    }

    /// The configuration variables this setup stands for (on top of the fixed ones).
    pub(super) fn variables(&self) -> Vec<(&'static str, String)> {
        let mode = if self.accepted {
            "accepted"
        } else {
            "completed"
        };
        let snapshot_mode = if self.snapshot { "initial" } else { "never" };
        let mut pairs = vec![
            ("SNAPSHOT_MODE", snapshot_mode.to_owned()),
            ("FELDERA_ACK_MODE", mode.to_owned()),
            (
                "BATCH_MAX_ROWS",
                pick(&BATCH_MAX_ROWS, self.max_rows).to_owned(),
            ),
            (
                "BATCH_LINGER_MS",
                pick(&BATCH_LINGER_MS, self.linger).to_owned(),
            ),
            (
                "NO_PROGRESS_TIMEOUT_SECS",
                pick(&NO_PROGRESS_TIMEOUT_SECS, self.no_progress).to_owned(),
            ),
            (
                "FELDERA_COMPLETION_TIMEOUT_MS",
                pick(&COMPLETION_TIMEOUT_MS, self.completion_timeout).to_owned(),
            ),
            (
                "SHUTDOWN_CONFIRM_MS",
                pick(&SHUTDOWN_CONFIRM_MS, self.shutdown_confirm).to_owned(),
            ),
            (
                "MAX_IN_FLIGHT_BATCHES",
                pick(&MAX_IN_FLIGHT_BATCHES, self.window).to_owned(),
            ),
            (
                "FELDERA_TRANSACTIONS",
                pick(&FELDERA_TRANSACTIONS, self.transactions).to_owned(),
            ),
        ];
        if self.small_batches {
            pairs.push(("BATCH_MAX_BYTES", "1024".to_owned()));
        }
        if self.snapshot {
            let workers = if self.workers { "3" } else { "1" };
            pairs.push(("SNAPSHOT_WORKERS", workers.to_owned()));
            pairs.push(("COPY_CHUNK_ROWS", self.chunk_rows().to_owned()));
        }
        if self.fault_tolerance {
            pairs.push((
                "FELDERA_CHECKPOINT_INTERVAL_SECS",
                pick(&CHECKPOINT_INTERVAL_SECS, self.seed).to_owned(),
            ));
        }
        if let Some(point) = pick(&CRASH_AT, self.crash) {
            pairs.push(("CRASH_AT", point.to_owned()));
            pairs.push(("CRASH_AFTER_BATCHES", (1 + self.crash_after).to_string()));
        }
        pairs
    }
}

/// One step of the world. Arguments are kept as the raw bytes the input carried; the
/// harness gives them meaning (see each variant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// PostgreSQL commits a transaction with one change per byte (at most five): bits 0-2
    /// the kind (see `workload::Change`; 7 is a TRUNCATE), bit 3 a keepalive inside the
    /// transaction right after this change, bits 4-7 which existing row an update or delete
    /// picks, or which tables a TRUNCATE empties.
    Tx(Vec<u8>),
    /// Up to this many bytes of one connection arrive (0: all that wait): the session's, or a
    /// snapshot worker's, each in turn among those with bytes waiting.
    Deliver(u8),
    /// The server's WAL moves on by `8 * (arg >> 1)` bytes (unpublished tables) and a
    /// keepalive reports it; bit 0 asks for a reply.
    Keepalive(u8),
    /// A frame no healthy stream contains: `kind` picks the damage, `tag` a tag byte,
    /// `body` (at most 31 bytes) its contents.
    Corrupt { kind: u8, tag: u8, body: Vec<u8> },
    /// One waiting HTTP request (`pick` modulo how many wait) gets an answer of `class`.
    Answer { pick: u8, class: u8 },
    /// Time moves to the next deadline plus this many milliseconds, and a tick comes.
    TickAtDeadline(u8),
    /// Time moves on by `arg * arg` milliseconds (0 too), and a tick comes.
    Tick(u8),
    /// A connection breaks: bit 0 a plain connection (a snapshot worker, or the stop's
    /// control connection: the `arg >> 4`-th newest, wrapping) instead of the session's,
    /// bit 1 the server never read the last status update, bit 2 the slot stays held a
    /// little while, bit 3 a clean end of stream instead of an error.
    Disconnect(u8),
    /// SIGTERM.
    Shutdown,
    /// The server ends the stream: CopyDone, or with bit 0 an ErrorResponse and EOF.
    ServerEnds(u8),
    /// The next `arg % 4` connection attempts are refused; with bit 2, the next state-file
    /// read or write fails as well.
    RefuseConnects(u8),
    /// One ingress request Feldera is reading (`pick` modulo how many) queues its next
    /// `1 + n % 4` records.
    Upload { pick: u8, n: u8 },
    /// Feldera restarts: with bit 0 the tables keep only what a completion vouched for
    /// (with fault tolerance: what the last successful checkpoint held), otherwise
    /// everything (with fault tolerance: a suspend that checkpointed everything first).
    /// With fault tolerance and bit 1, Feldera instead starts a checkpoint on its own (its
    /// `checkpoint_interval_secs`), if none is being written.
    FelderaRestart(u8),
    /// The slot goes: dropped (its walsender terminated first), or with bit 0 the server
    /// is restored from a backup `1 + (arg >> 1) % 4` transactions back, which holds no
    /// slot (every connection ends). The next session creates the slot again.
    SlotGone(u8),
    /// The slotline process is killed (SIGKILL) and started again with the same
    /// configuration: the old one gets nothing more and its commands are gone, its
    /// connections are dead (with bit 0 the server notices only a little later: the slot
    /// answers "active" once more), the state file is as last written, Feldera keeps every
    /// request of it (answered to nobody). Also after an `Exit`. Opcode bytes 0xe2, 0xe4, ...
    /// 0xf8 (even), then one argument byte.
    ProcessRestart(u8),
    /// Feldera's pipeline is paused, or, when paused, resumed: every body it holds is then
    /// read at once, in arrival order rotated by `arg >> 1`, reversed with bit 0. Opcode
    /// bytes 0xe3, 0xe5, ... 0xf9 (odd), then one argument byte.
    FelderaPause(u8),
}

/// Events per opcode: the opcode byte is taken modulo this.
const OPCODES: u8 = 14;
/// The opcode bytes of `ProcessRestart` (even) and `FelderaPause` (odd): no committed seed
/// held one of them when they were taken from `byte % OPCODES`.
const PROCESS_OPCODES: std::ops::RangeInclusive<u8> = 0xe2..=0xf9;
/// Most changes in one transaction, and most body bytes of a corrupt frame.
pub(super) const MAX_CHANGES: usize = 5;
const MAX_CORRUPT_BODY: u8 = 31;

impl Event {
    pub(super) fn read(input: &mut Cursor<'_>) -> Event {
        let opcode = input.byte();
        if PROCESS_OPCODES.contains(&opcode) {
            return match opcode % 2 {
                0 => Event::ProcessRestart(input.byte()),
                _ => Event::FelderaPause(input.byte()),
            };
        }
        match opcode % OPCODES {
            0 => {
                let n = usize::from(input.byte()) % (MAX_CHANGES + 1);
                Event::Tx(input.bytes(n))
            }
            1 => Event::Deliver(input.byte()),
            2 => Event::Keepalive(input.byte()),
            3 => {
                let (kind, tag) = (input.byte(), input.byte());
                let n = input.byte() % (MAX_CORRUPT_BODY + 1);
                Event::Corrupt {
                    kind,
                    tag,
                    body: input.bytes(usize::from(n)),
                }
            }
            4 => Event::Answer {
                pick: input.byte(),
                class: input.byte(),
            },
            5 => Event::TickAtDeadline(input.byte()),
            6 => Event::Tick(input.byte()),
            7 => Event::Disconnect(input.byte()),
            8 => Event::Shutdown,
            9 => Event::ServerEnds(input.byte()),
            10 => Event::RefuseConnects(input.byte()),
            11 => Event::Upload {
                pick: input.byte(),
                n: input.byte(),
            },
            12 => Event::FelderaRestart(input.byte()),
            _ => Event::SlotGone(input.byte()),
        }
    }

    #[cfg(test)]
    /// Writes the event so that `read` gives it back (a transaction of more than
    /// `MAX_CHANGES` changes, or a longer corrupt body, is cut).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (opcode, args): (u8, Vec<u8>) = match self {
            Event::Tx(changes) => {
                let kept = &changes[..changes.len().min(MAX_CHANGES)];
                let mut args = vec![kept.len() as u8];
                args.extend_from_slice(kept);
                (0, args)
            }
            Event::Deliver(n) => (1, vec![*n]),
            Event::Keepalive(arg) => (2, vec![*arg]),
            Event::Corrupt { kind, tag, body } => {
                let kept = &body[..body.len().min(usize::from(MAX_CORRUPT_BODY))];
                let mut args = vec![*kind, *tag, kept.len() as u8];
                args.extend_from_slice(kept);
                (3, args)
            }
            Event::Answer { pick, class } => (4, vec![*pick, *class]),
            Event::TickAtDeadline(ms) => (5, vec![*ms]),
            Event::Tick(arg) => (6, vec![*arg]),
            Event::Disconnect(flags) => (7, vec![*flags]),
            Event::Shutdown => (8, Vec::new()),
            Event::ServerEnds(arg) => (9, vec![*arg]),
            Event::RefuseConnects(n) => (10, vec![*n]),
            Event::Upload { pick, n } => (11, vec![*pick, *n]),
            Event::FelderaRestart(flags) => (12, vec![*flags]),
            Event::SlotGone(arg) => (13, vec![*arg]),
            Event::ProcessRestart(flags) => (*PROCESS_OPCODES.start(), vec![*flags]),
            Event::FelderaPause(arg) => (PROCESS_OPCODES.start() + 1, vec![*arg]),
        };
        out.push(opcode);
        out.extend(args);
    }
}

/// A whole input: the setup, then the events.
#[cfg(test)]
pub fn encode(setup: &Setup, events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    setup.encode(&mut out);
    for event in events {
        event.encode(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_and_events_read_back_what_encode_wrote() {
        let setup = Setup {
            accepted: true,
            slow_pg: true,
            wal_sender_timeout: 2,
            shutdown_confirm: 3,
            max_rows: 5,
            linger: 1,
            no_progress: 2,
            crash: 3,
            crash_after: 1,
            completion_timeout: 2,
            small_batches: true,
            window: 3,
            transactions: 2,
            seed: 3,
            fault_tolerance: true,
            snapshot: true,
            state: 3,
            rows: 2,
            workers: true,
            spread: 1,
            stale: true,
            ..Setup::default()
        };
        let events = vec![
            Event::Tx(vec![0, 9, 0x42]),
            Event::Tx(Vec::new()),
            Event::Deliver(0),
            Event::Keepalive(5),
            Event::Corrupt {
                kind: 2,
                tag: 3,
                body: b"xyz".to_vec(),
            },
            Event::Answer {
                pick: 1,
                class: 200,
            },
            Event::TickAtDeadline(4),
            Event::Tick(9),
            Event::Disconnect(6),
            Event::Shutdown,
            Event::ServerEnds(1),
            Event::RefuseConnects(2),
            Event::Upload { pick: 3, n: 1 },
            Event::FelderaRestart(1),
            Event::SlotGone(3),
            Event::ProcessRestart(1),
            Event::FelderaPause(2),
        ];
        let bytes = encode(&setup, &events);
        let mut input = Cursor::new(&bytes);
        assert_eq!(Setup::read(&mut input), setup);
        let mut read = Vec::new();
        while input.more() {
            read.push(Event::read(&mut input));
        }
        assert_eq!(read, events);
    }

    #[test]
    fn the_process_opcodes_take_only_bytes_that_meant_nothing_else_to_committed_seeds() {
        let mut input = Cursor::new(&[0xe1, 5, 0xe2, 7, 0xf9, 3, 0xfa, 1]);
        assert_eq!(Event::read(&mut input), Event::Deliver(5), "0xe1 % 14 is 1");
        assert_eq!(Event::read(&mut input), Event::ProcessRestart(7));
        assert_eq!(Event::read(&mut input), Event::FelderaPause(3));
        assert_eq!(
            Event::read(&mut input),
            Event::FelderaRestart(1),
            "0xfa % 14 is 12"
        );
        assert!(!input.more());
    }

    #[test]
    fn short_input_reads_zeros() {
        let mut input = Cursor::new(&[0x03]);
        let setup = Setup::read(&mut input);
        assert!(setup.accepted && setup.create_slot && !setup.slow_pg);
        assert_eq!(setup.seed, 0);
        assert!(!input.more());
        assert_eq!(Event::read(&mut input), Event::Tx(Vec::new()));
    }

    #[test]
    fn without_the_snapshot_bit_the_setup_is_four_bytes() {
        let mut input = Cursor::new(&[0, 0, 0, 0x03, 0x01, 0x05]);
        let setup = Setup::read(&mut input);
        assert!(!setup.snapshot && setup.state == 0 && setup.seed == 3);
        assert_eq!(Event::read(&mut input), Event::Deliver(5));
        let mut input = Cursor::new(&[0, 0, 0, 0x04, 0x13, 0x01, 0x05]);
        let setup = Setup::read(&mut input);
        assert!(setup.snapshot && setup.workers && !setup.stale);
        assert_eq!(setup.state_file(), StateFile::CompleteEarlierIncarnation);
        assert_eq!(Event::read(&mut input), Event::Deliver(5));
    }

    #[test]
    fn an_odd_spread_empties_feldera_s_items_for_an_added_route_and_picks_the_chunk_size() {
        let setup = |spread, workers| Setup {
            snapshot: true,
            state: 2,
            stale: true,
            spread,
            workers,
            ..Setup::default()
        };
        assert_eq!(setup(0, true).state_file(), StateFile::CompleteWithoutItems);
        assert_eq!(
            setup(2, false).state_file(),
            StateFile::CompleteWithoutItems
        );
        for (spread, workers, rows) in [(1, false, "1"), (1, true, "3"), (3, false, "2")] {
            let setup = setup(spread, workers);
            assert_eq!(setup.state_file(), StateFile::CompleteWithoutItemsEmpty);
            let pairs = setup.variables();
            assert!(
                pairs.contains(&("COPY_CHUNK_ROWS", rows.to_owned())),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn every_setup_is_a_valid_configuration() {
        for a in [0u8, 0xff] {
            for b in 0..=255u8 {
                let setup = Setup::read(&mut Cursor::new(&[a, b, b, b, b]));
                let mut pairs = setup.variables();
                pairs.extend(
                    super::super::FIXED
                        .iter()
                        .map(|(k, v)| (*k, (*v).to_owned())),
                );
                if let Err(e) = crate::config::Config::from_pairs(pairs) {
                    panic!("{setup:?}: {e}");
                }
            }
        }
    }
}
