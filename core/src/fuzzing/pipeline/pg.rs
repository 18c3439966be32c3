//! The fake PostgreSQL of the pipeline target: two published tables, a WAL of committed
//! transactions, one logical slot, and a connection table.
//!
//! It reads what the pipeline writes as a server would (startup message, simple queries,
//! CopyData status updates) and answers startup and catalog questions so that sessions
//! reach streaming. The slot is modelled as PostgreSQL keeps it: its confirmed position is
//! the highest flush a status update reported, and `START_REPLICATION` sends every
//! transaction that ends after it, each in its own session with its Relation messages sent
//! again. Server bytes wait in a per-connection queue until the harness delivers them, so
//! they reach the pipeline in whatever chunks the fuzz input chooses, and never while the
//! pipeline has paused reading.
//! What each transaction changes, and every key's history, is the `workload`'s; what of it
//! the publication publishes (`pg_publication_tables`, Relation messages and tuples, which
//! changes reach the stream, what the copy reads) is the `publication`'s.
//!
//! With the snapshot phase (`SNAPSHOT_MODE=initial`) the tables hold rows before the run,
//! the slot is dropped and created with an exported snapshot as PostgreSQL does, and the
//! copying connections import that snapshot and read it (`export`). Their COPY rows wait
//! for the fuzz input's deliveries like the stream, so they arrive in chunks of any size,
//! interleaved between workers.
//!
//! A route copied online has a connection of its own (`online`): its chunks are read as of
//! the committed state when the query arrives, and each chunk's watermark is a logical
//! message appended to the WAL when it is asked for, which the stream then carries in
//! order; its answers wait for deliveries like the stream's bytes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::catalog::{column_rows, result_set, text_row};
use super::export::{self, Export, WorkerTx};
use super::publication::Publication;
use super::workload::Workload;
use crate::io::ConnId;
use crate::pgoutput::encode;
use crate::time::PgTime;
use crate::wire::backend::{
    Authentication, BackendKeyData, BackendMessage, CopyResponse, TransactionStatus,
};
use crate::wire::testing::{
    decode_status_update, encode_backend, frame, pg_error, replication_frame,
};
use crate::wire::{PrimaryKeepalive, ReplicationMessage, XLogData};
use crate::Lsn;

mod online;

pub(super) const USERS: u32 = 16384;
pub(super) const ITEMS: u32 = 16390;
/// Where the WAL (and an existing slot) stands when a run starts.
pub(super) const START: Lsn = Lsn(0x10_0000);
/// Distance between consecutive WAL records of a transaction, and between transactions.
const RECORD: u64 = 0x30;
/// The session settings the server reports at startup (what the pipeline pinned).
const REPORTED: [(&str, &str); 4] = [
    ("DateStyle", "ISO, MDY"),
    ("TimeZone", "UTC"),
    ("IntervalStyle", "postgres"),
    ("client_encoding", "UTF8"),
];

/// What a stream frame means to the model once the pipeline has all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Plain,
    Begin,
    /// A commit: the pipeline may now acknowledge this end position.
    Commit(Lsn),
    /// A keepalive between transactions: the pipeline may acknowledge it when idle.
    Idle(Lsn),
    /// An online copy's watermark message at this position, in the stream.
    Watermark(Lsn),
    /// The end of the answer to the watermark at this position, on the copier's connection.
    WatermarkAnswer(Lsn),
}

/// A WAL message of a transaction, in stream order.
#[derive(Debug)]
enum Piece {
    Message {
        at: Lsn,
        /// The relations a change names (their Relation messages go first, once per session).
        relations: Vec<u32>,
        payload: Vec<u8>,
        mark: Mark,
    },
    /// A keepalive sent while the walsender is inside the transaction.
    Keepalive(Lsn),
}

/// One committed transaction of the fake database.
#[derive(Debug)]
pub(super) struct Tx {
    pub(super) end: Lsn,
    /// Where its commit record lies (Begin's final LSN): an exported snapshot holds the
    /// transaction exactly when this is before the slot's consistent point.
    pub(super) commit: Lsn,
    /// One text per change that Feldera must hold once this commit is acknowledged, with
    /// the table it belongs to.
    pub(super) markers: Vec<(&'static str, String)>,
    /// Those of `markers` that are a TRUNCATE's deletes (of every key its tables held when
    /// the transaction began).
    pub(super) retracted: Vec<(&'static str, String)>,
    pieces: Vec<Piece>,
}

#[derive(Debug, Default)]
struct Conn {
    /// From the startup message: `None` until it arrives.
    replication: Option<bool>,
    inbox: Vec<u8>,
    /// Server bytes not yet delivered; the first `auto` go without a fuzz event.
    out: Vec<u8>,
    auto: usize,
    /// Frame ends (counted from the connection's first byte) and what each frame means.
    marks: VecDeque<(usize, Mark)>,
    delivered: usize,
    streaming: bool,
    paused: bool,
    /// The server closes the connection once `out` is delivered.
    eof_after: bool,
    /// A Begin reached the pipeline and its Commit has not.
    open_tx: bool,
    relations_sent: Vec<u32>,
    /// The slot's position before this connection's last status update.
    before_last_status: Option<Option<Lsn>>,
    /// The slot's life (`FakePg::life`) this connection streams from.
    life: u32,
    /// A copying connection's transaction, while one is open.
    tx: Option<WorkerTx>,
    /// It began a snapshot transaction: a copying connection, whose COPY rows wait for
    /// deliveries.
    copying: bool,
}

impl Conn {
    fn push(&mut self, bytes: &[u8], mark: Mark) {
        self.out.extend_from_slice(bytes);
        self.marks
            .push_back((self.delivered + self.out.len(), mark));
    }
}

/// The fake server. See the module docs.
#[derive(Debug)]
pub(super) struct FakePg {
    conns: BTreeMap<ConnId, Conn>,
    /// Every transaction the slot still has to deliver or has delivered, in commit order.
    pub(super) wal: Vec<Tx>,
    /// The server's WAL insert position.
    head: Lsn,
    /// The slot's confirmed position; `None` while it does not exist.
    confirmed: Option<Lsn>,
    /// The confirmed position of the slot that was dropped (or lost with a restore), once
    /// none exists; what the WAL holds after it never reached a slot.
    dropped_at: Option<Lsn>,
    /// Counts the slot's lives: a drop, a restore and a creation each begin a new one.
    pub(super) life: u32,
    /// Where the current slot was created (where the run's first slot stood).
    pub(super) life_start: Lsn,
    /// The positions a session of the current slot has been told (commit ends, idle
    /// keepalives, the slot's own position): its flush must be one of them.
    pub(super) life_told: BTreeSet<Lsn>,
    /// Positions the pipeline has been told it may acknowledge: commit ends and idle
    /// keepalives it received, the slot's positions it read, and zero.
    pub(super) told: BTreeSet<Lsn>,
    /// Positions the pipeline may acknowledge without being idle: commit ends and the
    /// slot's positions it read.
    pub(super) busy_positions: BTreeSet<Lsn>,
    /// Keepalives the pipeline has read between transactions, each with whether a
    /// transaction was open in the stream when it arrived; the harness takes them after
    /// every delivery to judge whether the pipeline could have been idle.
    pub(super) keepalives_read: Vec<(Lsn, bool)>,
    busy_answers: u32,
    refusals: u32,
    slow: bool,
    wal_sender_timeout: &'static str,
    /// What the transactions change, and each key's history.
    pub(super) workload: Workload,
    next_xid: u32,
    pub(super) streams_started: u32,
    /// `CREATE_REPLICATION_SLOT`s answered.
    pub(super) slots_created: u32,
    /// A slot was created below the highest position an earlier slot confirmed.
    pub(super) created_below: bool,
    highest_confirmed: Lsn,
    /// `SNAPSHOT_MODE=initial`: every slot must be created exporting a snapshot.
    snapshot_mode: bool,
    /// Every snapshot a slot exported, in order.
    pub(super) exports: Vec<Export>,
    /// The slot's life whose creation exported the last snapshot.
    pub(super) export_life: Option<u32>,
    /// The connection holding the temporary slot `slotline_p_add`, while one exists.
    temporary_holder: Option<ConnId>,
    /// Heap blocks between rows (see `export`).
    blocks_per_row: u64,
    /// Which connection with bytes waiting the next delivery serves.
    deliver_turn: usize,
    /// The online copy's connection, chunks and watermarks (`online`).
    pub(super) online: online::Online,
    /// The slot positions `START_REPLICATION` streamed from.
    pub(super) stream_starts: BTreeSet<Lsn>,
}

impl FakePg {
    pub(super) fn new(
        slot_exists: bool,
        slot_busy: bool,
        slow: bool,
        wal_sender_timeout: &'static str,
    ) -> FakePg {
        FakePg {
            conns: BTreeMap::new(),
            wal: Vec::new(),
            head: START,
            confirmed: slot_exists.then_some(START),
            dropped_at: None,
            life: 0,
            life_start: START,
            life_told: BTreeSet::from([START]),
            told: BTreeSet::from([Lsn::ZERO]),
            busy_positions: BTreeSet::from([Lsn::ZERO]),
            keepalives_read: Vec::new(),
            busy_answers: u32::from(slot_busy),
            refusals: 0,
            slow,
            wal_sender_timeout,
            workload: Workload::default(),
            next_xid: 700,
            streams_started: 0,
            slots_created: 0,
            created_below: false,
            highest_confirmed: START,
            snapshot_mode: false,
            exports: Vec::new(),
            export_life: None,
            temporary_holder: None,
            blocks_per_row: 0,
            deliver_turn: 0,
            online: online::Online::default(),
            stream_starts: BTreeSet::new(),
        }
    }

    /// The snapshot phase: `users` users and `skus` items exist before the run (committed
    /// at the run's starting position, before any slot's stream), rows lie
    /// `blocks_per_row` heap blocks apart, and every slot is created exporting a snapshot.
    pub(super) fn with_snapshot(&mut self, users: u64, skus: usize, blocks_per_row: u64) {
        self.snapshot_mode = true;
        self.blocks_per_row = blocks_per_row;
        self.workload.seed(users, skus, START);
    }

    /// What the publication publishes (see `publication`); set before any row exists.
    pub(super) fn publish(&mut self, publication: Publication) {
        self.workload.publication = publication;
    }

    /// A connection attempt: false when it will be refused (the harness then closes it).
    pub(super) fn open(&mut self, id: ConnId) -> bool {
        self.conns.insert(id, Conn::default());
        let refused = self.refusals > 0;
        self.refusals = self.refusals.saturating_sub(1);
        !refused
    }

    pub(super) fn refuse(&mut self, attempts: u32) {
        self.refusals += attempts;
    }

    /// The slot answers "active" to the next startup once more: the server has not yet
    /// noticed that the walsender holding it ended (a killed process).
    pub(super) fn hold_slot(&mut self) {
        self.busy_answers += 1;
    }

    /// The server turns healthy: no more refused connections, the slot is free.
    pub(super) fn heal(&mut self) {
        self.refusals = 0;
        self.busy_answers = 0;
    }

    /// Either side ended the connection: the server forgets it, and a snapshot it exported
    /// can no longer be imported.
    pub(super) fn close(&mut self, id: ConnId) {
        self.conns.remove(&id);
        self.release_exports(id);
        // A temporary slot ends with its connection.
        if self.temporary_holder == Some(id) {
            self.temporary_holder = None;
        }
    }

    /// A snapshot lives only while the connection that exported it runs no other command.
    fn release_exports(&mut self, id: ConnId) {
        for export in self.exports.iter_mut().filter(|e| e.holder == id) {
            export.valid = false;
        }
    }

    pub(super) fn set_paused(&mut self, id: ConnId, paused: bool) {
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.paused = paused;
        }
    }

    /// The connection of the pipeline's session: the newest open one that is not known to
    /// be a plain (control) connection.
    pub(super) fn session(&self) -> Option<ConnId> {
        self.conns
            .iter()
            .rev()
            .find(|(_, c)| c.replication != Some(false))
            .map(|(id, _)| *id)
    }

    fn streaming_session(&mut self) -> Option<&mut Conn> {
        let id = self.session()?;
        self.conns.get_mut(&id).filter(|c| c.streaming)
    }

    /// Whether the pipeline has read a Begin on `id` and not yet its Commit.
    pub(super) fn open_tx(&self, id: ConnId) -> bool {
        self.conns.get(&id).is_some_and(|c| c.open_tx)
    }

    /// Server bytes that go without a fuzz event (startup and catalog answers), if any.
    pub(super) fn take_auto(&mut self) -> Option<(ConnId, Vec<u8>)> {
        let id = self
            .conns
            .iter()
            .find(|(_, c)| c.auto > 0 && !c.paused)
            .map(|(id, _)| *id)?;
        let n = self.conns.get(&id).map_or(0, |c| c.auto);
        self.take(id, n).map(|(bytes, _)| (id, bytes))
    }

    /// Up to `max` bytes (0: all) of a connection whose reading is not paused: the
    /// session's or a copying one's, in turn among those with bytes waiting; with `true`
    /// when the server closes the connection after them.
    pub(super) fn deliver(&mut self, max: usize) -> Option<(ConnId, Vec<u8>, bool)> {
        let copying = self
            .conns
            .iter()
            .filter(|(_, c)| c.copying)
            .map(|(id, _)| *id);
        let candidates: Vec<ConnId> = self
            .session()
            .into_iter()
            .chain(copying)
            .filter(|id| {
                self.conns
                    .get(id)
                    .is_some_and(|c| !c.paused && !c.out.is_empty())
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let id = candidates[self.deliver_turn % candidates.len()];
        self.deliver_turn = self.deliver_turn.wrapping_add(1);
        let conn = self.conns.get(&id)?;
        let n = if max == 0 { conn.out.len() } else { max };
        let (bytes, eof) = self.take(id, n)?;
        Some((id, bytes, eof))
    }

    fn take(&mut self, id: ConnId, n: usize) -> Option<(Vec<u8>, bool)> {
        let life = self.life;
        let conn = self.conns.get_mut(&id)?;
        let n = n.min(conn.out.len());
        let bytes: Vec<u8> = conn.out.drain(..n).collect();
        conn.delivered += n;
        conn.auto = conn.auto.saturating_sub(n);
        while let Some(&(end, mark)) = conn.marks.front() {
            if end > conn.delivered {
                break;
            }
            conn.marks.pop_front();
            match mark {
                Mark::Plain => {}
                Mark::Begin => conn.open_tx = true,
                Mark::Commit(end_lsn) => {
                    conn.open_tx = false;
                    self.told.insert(end_lsn);
                    self.busy_positions.insert(end_lsn);
                    if conn.life == life {
                        self.life_told.insert(end_lsn);
                    }
                }
                Mark::Idle(at) => {
                    self.told.insert(at);
                    if conn.life == life {
                        self.life_told.insert(at);
                    }
                    self.keepalives_read.push((at, conn.open_tx));
                }
                Mark::Watermark(at) => self.online.on_watermark_read(at, conn.life == life),
                Mark::WatermarkAnswer(at) => self.online.on_watermark_answered(at),
            }
        }
        let eof = conn.eof_after && conn.out.is_empty();
        Some((bytes, eof))
    }

    /// Breaks a connection (see `Event::Disconnect`) and returns it.
    pub(super) fn disconnect(&mut self, flags: u8) -> Option<ConnId> {
        let id = if flags & 1 != 0 {
            let plain: Vec<ConnId> = self
                .conns
                .iter()
                .rev()
                .filter(|(_, c)| c.replication == Some(false))
                .map(|(id, _)| *id)
                .collect();
            *plain.get(usize::from(flags >> 4) % plain.len().max(1))?
        } else {
            self.session()?
        };
        let conn = self.conns.remove(&id)?;
        self.release_exports(id);
        if flags & 2 != 0 {
            if let Some(before) = conn.before_last_status {
                self.confirmed = before;
            }
        }
        if flags & 4 != 0 && conn.replication == Some(true) {
            self.busy_answers += 1;
        }
        Some(id)
    }

    /// Bytes the pipeline wrote on `id`; returns the flush positions of the status
    /// updates among them.
    pub(super) fn write(&mut self, id: ConnId, bytes: &[u8]) -> Vec<Lsn> {
        let Some(conn) = self.conns.get_mut(&id) else {
            return Vec::new();
        };
        conn.inbox.extend_from_slice(bytes);
        let mut flushes = Vec::new();
        while let Some((tag, body)) = self.next_message(id) {
            match tag {
                None => self.on_startup(id, &body),
                Some(b'Q') => {
                    let sql = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body))
                        .into_owned();
                    self.on_query(id, &sql);
                }
                Some(b'd') => flushes.extend(self.on_copy_data(id, &body)),
                _ => {}
            }
        }
        flushes
    }

    /// Splits the next whole frontend message off the connection's inbox (the first one is
    /// the untagged startup message).
    fn next_message(&mut self, id: ConnId) -> Option<(Option<u8>, Vec<u8>)> {
        let conn = self.conns.get_mut(&id)?;
        let tagged = conn.replication.is_some();
        let header = if tagged { 5 } else { 4 };
        let len_at = usize::from(tagged);
        let declared = conn.inbox.get(len_at..len_at + 4)?;
        let len = u32::from_be_bytes(declared.try_into().ok()?) as usize;
        let total = len_at + len;
        if total < header || conn.inbox.len() < total {
            return None;
        }
        let message: Vec<u8> = conn.inbox.drain(..total).collect();
        let tag = tagged.then(|| message[0]);
        Some((tag, message[header..].to_vec()))
    }

    fn on_startup(&mut self, id: ConnId, body: &[u8]) {
        let params: Vec<&[u8]> = body.get(4..).unwrap_or(&[]).split(|b| *b == 0).collect();
        let replication = params
            .chunks(2)
            .any(|pair| pair == [&b"replication"[..], b"database"]);
        let key = BackendMessage::BackendKeyData(BackendKeyData {
            process_id: 4000 + id.0 as i32,
            secret_key: Bytes::from_static(&[1, 2, 3, 4]),
        });
        let answer: Vec<BackendMessage> = [BackendMessage::Authentication(Authentication::Ok)]
            .into_iter()
            .chain(
                REPORTED
                    .iter()
                    .map(|(name, value)| BackendMessage::ParameterStatus {
                        name: (*name).to_owned(),
                        value: (*value).to_owned(),
                    }),
            )
            .chain([key, BackendMessage::ReadyForQuery(TransactionStatus::Idle)])
            .collect();
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.replication = Some(replication);
        }
        self.answer(id, &answer);
    }

    /// Queues server messages on `id`; they go without a fuzz event unless PostgreSQL is
    /// slow and this is the session's or a copying connection.
    fn answer(&mut self, id: ConnId, messages: &[BackendMessage]) {
        let slow = self.slow;
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        for message in messages {
            conn.push(&encode_backend(message), Mark::Plain);
        }
        if !slow || (conn.replication == Some(false) && !conn.copying) {
            conn.auto = conn.out.len();
        }
    }

    /// A statement on a copying connection (see `export`). A COPY's answer always waits for
    /// deliveries.
    fn on_worker_query(&mut self, id: ConnId, sql: &str) {
        let tx = self.conns.get(&id).and_then(|c| c.tx);
        let users = self.workload.next_ordinal("users");
        let items = self.workload.next_ordinal("items");
        let next_ordinal = |table: &str| if table == "users" { users } else { items };
        let reply = export::answer(
            sql,
            tx,
            &self.exports,
            self.blocks_per_row,
            next_ordinal,
            &self.workload.publication,
        );
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.tx = reply.tx;
        conn.copying = true;
        if !reply.copy {
            return self.answer(id, &reply.messages);
        }
        for message in &reply.messages {
            conn.push(&encode_backend(message), Mark::Plain);
        }
    }

    fn on_query(&mut self, id: ConnId, sql: &str) {
        let replication = self.conns.get(&id).and_then(|c| c.replication) == Some(true);
        if !replication && self.on_online_query(id, sql) {
            return;
        }
        let worker = self
            .conns
            .get(&id)
            .is_some_and(|c| c.replication == Some(false) && (c.copying || c.tx.is_some()));
        if worker || (!replication && sql.starts_with("BEGIN ISOLATION LEVEL")) {
            return self.on_worker_query(id, sql);
        }
        self.release_exports(id);
        let rows = if sql.starts_with("START_REPLICATION") {
            return self.start_replication(id);
        } else if sql == "IDENTIFY_SYSTEM" {
            vec![text_row(&[
                "7000000000000000001",
                "1",
                &self.head.to_string(),
                "app",
            ])]
        } else if sql == "SHOW wal_sender_timeout" {
            vec![text_row(&[self.wal_sender_timeout])]
        } else if sql.contains("pg_catalog.pg_publication ORDER BY") {
            vec![text_row(&["pub", "f", "t", "t", "t", "t", "f"])]
        } else if sql.contains("pg_publication_tables") {
            self.workload.publication.catalog_rows()
        } else if sql.contains("::regclass") {
            column_rows(sql)
        } else if sql.contains("pg_replication_slots") {
            self.slot_rows(replication)
        } else if sql.starts_with("DROP_REPLICATION_SLOT") && sql.contains("_add") {
            return self.drop_temporary_slot(id);
        } else if sql.starts_with("DROP_REPLICATION_SLOT") {
            return self.drop_slot(id);
        } else if sql.starts_with("CREATE_REPLICATION_SLOT") && sql.contains(" TEMPORARY ") {
            return self.create_temporary_slot(id, sql);
        } else if sql.starts_with("CREATE_REPLICATION_SLOT") {
            if self.confirmed.is_some() {
                return self.refuse_query(
                    id,
                    "42710",
                    "replication slot \"slotline_p\" already exists",
                );
            }
            let at = self.head;
            let exported = sql.contains("(SNAPSHOT 'export')");
            assert!(
                exported || !self.snapshot_mode,
                "SNAPSHOT_MODE=initial created a slot without exporting a snapshot: {sql}"
            );
            let snapshot = if exported {
                // The snapshot holds every commit up to the consistent point, so a copy of
                // it leaves nothing to the operator: no key is outside the promise once the
                // copy is complete.
                let name = format!("00000003-{:08X}-1", self.exports.len() + 1);
                self.exports.push(Export {
                    name: name.clone(),
                    holder: id,
                    valid: true,
                    point: at,
                    rows: self.workload.tables(),
                    temporary: false,
                });
                self.workload.lost.clear();
                self.dropped_at = None;
                self.export_life = Some(self.life + 1);
                Some(name)
            } else {
                // With SNAPSHOT 'nothing' the slot starts at the server's WAL end:
                // transactions committed before it (and those the dropped slot had not
                // confirmed) are not part of its stream, and their rows are outside the
                // promise.
                self.workload.lose(self.dropped_at.take(), at, at);
                None
            };
            self.wal.clear();
            self.confirmed = Some(at);
            self.life += 1;
            self.slots_created += 1;
            self.created_below |= at < self.highest_confirmed;
            self.life_start = at;
            self.life_told = BTreeSet::from([at]);
            self.online.new_life();
            self.told.insert(at);
            self.busy_positions.insert(at);
            let head = at.to_string();
            vec![vec![
                Some("slotline_p".to_owned()),
                Some(head),
                snapshot,
                Some("pgoutput".to_owned()),
            ]]
        } else {
            Vec::new()
        };
        self.answer(id, &result_set(rows));
    }

    fn slot_rows(&mut self, replication: bool) -> Vec<Vec<Option<String>>> {
        let Some(confirmed) = self.confirmed else {
            return Vec::new();
        };
        self.told.insert(confirmed);
        self.busy_positions.insert(confirmed);
        self.life_told.insert(confirmed);
        let busy = replication && self.busy_answers > 0;
        if busy {
            self.busy_answers -= 1;
        }
        let text = |s: &str| Some(s.to_owned());
        vec![vec![
            text("slotline_p"),
            text("pgoutput"),
            text("logical"),
            text("app"),
            busy.then(|| "4242".to_owned()),
            Some(confirmed.to_string()),
            text("reserved"),
        ]]
    }

    /// `CREATE_REPLICATION_SLOT <slot>_add TEMPORARY ... (SNAPSHOT 'export')`: a snapshot of
    /// every commit so far, for routes added since the slot's own copy. The slot streamed
    /// from, its position and its WAL stay as they are; the temporary slot lives as long as
    /// this connection (`drop_temporary_slot`, or the connection's end).
    fn create_temporary_slot(&mut self, id: ConnId, sql: &str) {
        assert!(
            sql.contains("(SNAPSHOT 'export')"),
            "a temporary slot is only ever created to export a snapshot: {sql}"
        );
        if self.temporary_holder.is_some() {
            return self.refuse_query(
                id,
                "42710",
                "replication slot \"slotline_p_add\" already exists",
            );
        }
        let name = format!("00000003-{:08X}-2", self.exports.len() + 1);
        self.exports.push(Export {
            name: name.clone(),
            holder: id,
            valid: true,
            point: self.head,
            rows: self.workload.tables(),
            temporary: true,
        });
        self.temporary_holder = Some(id);
        let rows = vec![vec![
            Some("slotline_p_add".to_owned()),
            Some(self.head.to_string()),
            Some(name),
            Some("pgoutput".to_owned()),
        ]];
        self.answer(id, &result_set(rows));
    }

    /// `DROP_REPLICATION_SLOT <slot>_add`: only its own connection holds it.
    fn drop_temporary_slot(&mut self, id: ConnId) {
        if self.temporary_holder != Some(id) {
            return self.refuse_query(
                id,
                "42704",
                "replication slot \"slotline_p_add\" does not exist",
            );
        }
        self.temporary_holder = None;
        self.answer(
            id,
            &[
                BackendMessage::CommandComplete {
                    tag: "DROP_REPLICATION_SLOT".to_owned(),
                },
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ],
        );
    }

    /// `DROP_REPLICATION_SLOT` (without `WAIT`): refused while another connection streams
    /// from the slot; the WAL after its confirmed position never reaches a slot.
    fn drop_slot(&mut self, id: ConnId) {
        let held = self
            .conns
            .iter()
            .any(|(other, c)| *other != id && c.streaming);
        let Some(confirmed) = self.confirmed else {
            return self.refuse_query(
                id,
                "42704",
                "replication slot \"slotline_p\" does not exist",
            );
        };
        if held {
            return self.refuse_query(id, "55006", "replication slot \"slotline_p\" is active");
        }
        self.confirmed = None;
        self.dropped_at = Some(confirmed);
        self.life += 1;
        self.answer(
            id,
            &[
                BackendMessage::CommandComplete {
                    tag: "DROP_REPLICATION_SLOT".to_owned(),
                },
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ],
        );
    }

    /// CopyBoth, a keepalive at the slot's position, then every transaction that ends after
    /// it, as a walsender does.
    fn start_replication(&mut self, id: ConnId) {
        let held_elsewhere = self
            .conns
            .iter()
            .any(|(other, c)| *other != id && c.streaming);
        let Some(confirmed) = self.confirmed else {
            return self.refuse_query(
                id,
                "42704",
                "replication slot \"slotline_p\" does not exist",
            );
        };
        if held_elsewhere {
            return self.refuse_query(id, "55006", "replication slot \"slotline_p\" is active");
        }
        self.answer(
            id,
            &[BackendMessage::CopyBothResponse(CopyResponse {
                format: 0,
                column_formats: Vec::new(),
            })],
        );
        self.streams_started += 1;
        self.stream_starts.insert(confirmed);
        let (head, life) = (self.head, self.life);
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.streaming = true;
        conn.life = life;
        conn.push(&keepalive(confirmed, false), Mark::Idle(confirmed));
        for tx in self.wal.iter().filter(|tx| tx.end > confirmed) {
            send(conn, tx, head, &self.workload.publication);
        }
    }

    /// An ErrorResponse to the query on `id`.
    fn refuse_query(&mut self, id: ConnId, code: &str, message: &str) {
        let error = pg_error("ERROR", code, message);
        self.answer(
            id,
            &[
                BackendMessage::ErrorResponse(Box::new(error)),
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ],
        );
    }

    /// The life of the slot `id` streams from, if it streams.
    pub(super) fn conn_life(&self, id: ConnId) -> Option<u32> {
        self.conns.get(&id).filter(|c| c.streaming).map(|c| c.life)
    }

    /// The slot goes (see `Event::SlotGone`); returns the connections the server ended.
    /// Dropped: a walsender streaming from it is terminated first, and the WAL after its
    /// confirmed position never reaches a slot. Restored: the server restarts from a
    /// backup taken `1 + (arg >> 1) % 4` transactions back (or where the slot began),
    /// which holds no slot; every connection ends, and the changes after that point are
    /// gone from PostgreSQL.
    pub(super) fn slot_gone(&mut self, arg: u8) -> Vec<ConnId> {
        let restore = arg & 1 != 0;
        if self.confirmed.is_none() && !restore {
            return Vec::new();
        }
        // The walsender that created the slot and holds its exported snapshot holds the
        // slot too.
        let holders: Vec<ConnId> = self
            .exports
            .iter()
            .filter(|e| e.valid)
            .map(|e| e.holder)
            .collect();
        let ended: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(id, c)| restore || c.streaming || holders.contains(id))
            .map(|(id, _)| *id)
            .collect();
        for id in &ended {
            self.conns.remove(id);
            self.release_exports(*id);
        }
        self.life += 1;
        let dropped = self.confirmed.take().or(self.dropped_at);
        if !restore {
            self.dropped_at = dropped;
            return ended;
        }
        let back = 1 + usize::from(arg >> 1) % 4;
        let at = match self.wal.len().checked_sub(back + 1) {
            Some(i) => self.wal[i].end,
            None => self.life_start,
        };
        self.dropped_at = dropped.map(|d| d.min(at));
        self.workload.restore(at);
        self.wal.retain(|tx| tx.end <= at);
        self.head = at;
        ended
    }

    fn on_copy_data(&mut self, id: ConnId, body: &[u8]) -> Option<Lsn> {
        let streaming = self.conns.get(&id).is_some_and(|c| c.streaming);
        if !streaming {
            return None;
        }
        let Some(update) = decode_status_update(body) else {
            panic!("the pipeline sent CopyData that is not a standby status update: {body:02x?}");
        };
        let before = self.confirmed;
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.before_last_status = Some(before);
        }
        self.confirmed = before.map(|c| c.max(update.flush));
        self.highest_confirmed = self.highest_confirmed.max(self.confirmed.unwrap_or(START));
        Some(update.flush)
    }

    /// The server's WAL insert position.
    pub(super) fn head(&self) -> Lsn {
        self.head
    }

    /// The slot's confirmed position, `None` while it does not exist.
    pub(super) fn confirmed(&self) -> Option<Lsn> {
        self.confirmed
    }

    /// PostgreSQL commits a transaction at `commit_time` (see `Event::Tx`; the time decides
    /// whether the pipeline sees it as fresh or as catching up); a streaming session gets it at
    /// the end of its queue. While no slot exists it is committed all the same: the slot
    /// created next starts after it, and its rows are outside the promise
    /// (`Workload::lose`).
    pub(super) fn commit(&mut self, changes: &[u8], commit_time: PgTime) {
        let xid = self.next_xid;
        self.next_xid += 1;
        let start = Lsn(self.head.0 + RECORD);
        let commit = Lsn(start.0 + RECORD * (changes.len() as u64 + 1));
        let end = Lsn(commit.0 + RECORD);
        let mut pieces = vec![Piece::Message {
            at: start,
            relations: Vec::new(),
            payload: encode::begin(commit, commit_time, xid),
            mark: Mark::Begin,
        }];
        let mut markers: Vec<(&'static str, String)> = Vec::new();
        let mut retracted: Vec<(&'static str, String)> = Vec::new();
        self.workload.begin();
        for (i, byte) in changes.iter().enumerate() {
            let at = Lsn(start.0 + RECORD * (i as u64 + 1));
            let written = self.workload.change(*byte, end);
            // A change the publication does not publish sends nothing, not even its
            // Relation message; its WAL record still takes its place.
            if !written.payload.is_empty() {
                pieces.push(Piece::Message {
                    at,
                    relations: written.relations,
                    payload: written.payload,
                    mark: Mark::Plain,
                });
            }
            // The rows this transaction wrote to a table before truncating it may never
            // leave slotline; the TRUNCATE's own markers stand for what must be gone.
            markers.retain(|(table, _)| !written.truncated.contains(table));
            if !written.truncated.is_empty() {
                retracted.extend(written.markers.iter().cloned());
            }
            markers.extend(written.markers);
            if byte & 8 != 0 {
                pieces.push(Piece::Keepalive(at));
            }
        }
        pieces.push(Piece::Message {
            // A walsender sends a commit at the position after it (its end).
            at: end,
            relations: Vec::new(),
            payload: encode::commit(commit, end, commit_time),
            mark: Mark::Commit(end),
        });
        let before = self.head;
        self.head = end;
        self.online
            .on_commit(&self.workload.changed_between(Some(before), end));
        let tx = Tx {
            end,
            commit,
            markers,
            retracted,
            pieces,
        };
        let publication = self.workload.publication;
        if let Some(conn) = self.streaming_session() {
            send(conn, &tx, end, &publication);
        }
        self.wal.push(tx);
    }

    /// WAL for unpublished tables moves the head on; a streaming session hears a keepalive.
    pub(super) fn keepalive(&mut self, advance: u64, reply: bool) {
        self.head = Lsn(self.head.0 + advance);
        let head = self.head;
        if let Some(conn) = self.streaming_session() {
            conn.push(&keepalive(head, reply), Mark::Idle(head));
        }
    }

    /// A frame no healthy stream carries, on a streaming session (see `Event::Corrupt`).
    /// None of them can carry a position the pipeline could acknowledge.
    pub(super) fn corrupt(&mut self, kind: u8, tag: u8, body: &[u8]) {
        const UNEXPECTED: [u8; 10] = [b'Z', b'T', b'C', b'N', b'E', b'S', b'A', b'K', b'1', 0xff];
        const NOT_PGOUTPUT: [u8; 6] = [0, b'S', b'c', b'x', b'Z', 0xff];
        let head = self.head;
        let Some(conn) = self.streaming_session() else {
            return;
        };
        let bytes = match kind % 4 {
            0 => frame(UNEXPECTED[usize::from(tag) % UNEXPECTED.len()], body),
            1 => {
                let tag = if matches!(tag, b'w' | b'k') {
                    tag ^ 0x80
                } else {
                    tag
                };
                frame(b'd', &[&[tag], body].concat())
            }
            2 => {
                let payload =
                    [&[NOT_PGOUTPUT[usize::from(tag) % NOT_PGOUTPUT.len()]], body].concat();
                xlog(head, head, &payload)
            }
            _ => {
                let declared: u32 = if tag & 1 == 0 { 2 } else { 0xffff_fff0 };
                [&[b'd'][..], &declared.to_be_bytes(), body].concat()
            }
        };
        conn.push(&bytes, Mark::Plain);
    }

    /// The server ends the session's stream: CopyDone, or an error and EOF.
    pub(super) fn server_ends(&mut self, error: bool) {
        let Some(conn) = self.streaming_session() else {
            return;
        };
        if error {
            let fatal = pg_error(
                "FATAL",
                "57P01",
                "terminating connection due to administrator command",
            );
            conn.push(
                &encode_backend(&BackendMessage::ErrorResponse(Box::new(fatal))),
                Mark::Plain,
            );
            conn.eof_after = true;
        } else {
            conn.push(&encode_backend(&BackendMessage::CopyDone), Mark::Plain);
        }
    }
}

/// Queues a transaction's frames on a streaming connection; a relation's message lists the
/// columns `publication` publishes.
fn send(conn: &mut Conn, tx: &Tx, head: Lsn, publication: &Publication) {
    for piece in &tx.pieces {
        match piece {
            Piece::Message {
                at,
                relations,
                payload,
                mark,
            } => {
                for &oid in relations {
                    if conn.relations_sent.contains(&oid) {
                        continue;
                    }
                    conn.relations_sent.push(oid);
                    // Relation messages arrive with a zero position.
                    conn.push(
                        &xlog(
                            Lsn::ZERO,
                            head,
                            &encode::relation(&publication.relation(oid)),
                        ),
                        Mark::Plain,
                    );
                }
                conn.push(&xlog(*at, head, payload), *mark);
            }
            Piece::Keepalive(at) => conn.push(&keepalive(*at, false), Mark::Plain),
        }
    }
}

fn xlog(at: Lsn, head: Lsn, payload: &[u8]) -> Vec<u8> {
    replication_frame(&ReplicationMessage::XLogData(XLogData {
        wal_start: at,
        wal_end: head.max(at),
        server_time: PgTime(0),
        data: Bytes::copy_from_slice(payload),
    }))
}

fn keepalive(at: Lsn, reply_requested: bool) -> Vec<u8> {
    replication_frame(&ReplicationMessage::Keepalive(PrimaryKeepalive {
        wal_end: at,
        server_time: PgTime(0),
        reply_requested,
    }))
}
