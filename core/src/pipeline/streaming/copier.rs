//! The online copy inside the Streaming phase (docs/online-copy.md): routes copied in
//! primary-key chunks on a connection of their own while the stream runs. The copier owns
//! that connection, the chunk reader and the table's record of the stream
//! (`backfill::table_copy`); the phase feeds it every stream message, puts each chunk it
//! judged into the outbox as a transaction committed at the chunk's high watermark, and
//! tells it when the acknowledgement has passed a chunk, which is when the route's copy
//! progress (and, after its last chunk, its completion) may be recorded.
//!
//! One route is copied at a time; the next chunk is read while the one before waits for
//! its watermark (`DEPTH`), so at most two chunks' rows wait in memory.

use crate::backfill::chunk::{ReadError, Reader, Source};
use crate::backfill::key::RowKey;
use crate::backfill::table_copy::{Emission, TableCopy};
use crate::conn::Event;
use crate::io::{Level, Topic};
use crate::pgoutput::{Message, Relation};
pub(crate) use crate::pipeline::handover::OnlineCopy;
use crate::pipeline::pg_link::PgLink;
use crate::pipeline::queue::Queue;
use crate::Lsn;
use bytes::Bytes;
use std::collections::VecDeque;

/// The route being copied.
#[derive(Debug)]
struct Current {
    route: usize,
    relation: Relation,
    /// When this session's copy of the route began.
    started: crate::time::Mono,
    reader: Reader,
    table: TableCopy,
    /// Rows emitted, and left to the stream, by this session's copy of the route.
    emitted: u64,
    dropped: u64,
    rereads: u64,
}

/// A chunk put into the outbox, until the acknowledgement passes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Emitted {
    pub(crate) route: usize,
    /// Where its transaction is acknowledged.
    pub(crate) at: Lsn,
    pub(crate) end_key: Option<Vec<String>>,
    pub(crate) last: bool,
}

/// What the copier asks of the phase.
#[derive(Debug)]
pub(crate) enum CopyStep {
    /// Put these COPY lines of `route` into the stream here, as a transaction at `at`.
    Emit {
        route: usize,
        /// The table as the chunk's COPY read it.
        relation: Relation,
        rows: Vec<(RowKey, Bytes)>,
        emitted: Emitted,
    },
}

/// The copier's connection failed, or its answers cannot be read: the session ends.
#[derive(Debug)]
pub(crate) struct CopyFailure(pub(crate) String);

#[derive(Debug)]
pub(crate) struct Copier {
    pub(crate) link: PgLink,
    ready: bool,
    source: Source,
    /// Names this session's watermarks.
    run: String,
    queue: VecDeque<OnlineCopy>,
    current: Option<Current>,
    /// Chunks emitted and not yet passed by the acknowledgement, oldest first.
    emitted: VecDeque<Emitted>,
    /// The furthest position of the stream read or acknowledged so far: a chunk's
    /// transaction is placed past it.
    seen: Lsn,
    /// A chunk must be read again from this key (`Some(None)`: from the start) once the
    /// read under way ended (its chunk is dropped).
    rewind_to: Option<Option<Vec<String>>>,
    /// A chunk read again waits until then (`None`: none waits); the wait doubles with each
    /// read again in a row, from `RETRY_FIRST_US` to `RETRY_MAX_US`.
    retry_at: Option<crate::time::Mono>,
    rereads_in_a_row: u32,
    /// The first question of the connection (`PROBE`) is under way, and its answer.
    probing: bool,
    probe: Vec<String>,
}

/// Chunks read ahead of their watermarks: the next chunk is read while the one before waits
/// for the stream, so reading and the watermark's trip overlap. At most this many chunks'
/// rows wait in memory.
const DEPTH: usize = 2;

/// The wait before a chunk is read again, first and at most: what stood in its way (a
/// transaction not yet visible) usually ends within milliseconds; one waiting for a
/// synchronous standby may not, and is not asked about more often than once a second.
const RETRY_FIRST_US: u64 = 20_000;
const RETRY_MAX_US: u64 = 1_000_000;

/// Whether the copier's role sees every backend's wait (`keyset::reads_every_wait_query`),
/// and whether commits may wait for a synchronous standby at all.
const PROBE: &str = "SELECT pg_has_role('pg_read_all_stats', 'USAGE')::text, \
     current_setting('synchronous_standby_names')";

impl Copier {
    pub(crate) fn new(
        link: PgLink,
        source: Source,
        run: String,
        copies: Vec<OnlineCopy>,
    ) -> Copier {
        Copier {
            link,
            ready: false,
            source,
            run,
            queue: copies.into(),
            current: None,
            emitted: VecDeque::new(),
            seen: Lsn::ZERO,
            rewind_to: None,
            retry_at: None,
            rereads_in_a_row: 0,
            probing: false,
            probe: Vec::new(),
        }
    }

    /// The stream has been read (or acknowledged) up to `lsn`.
    pub(crate) fn note_position(&mut self, lsn: Lsn) {
        self.seen = self.seen.max(lsn);
    }

    pub(crate) fn owns(&self, conn: crate::io::ConnId) -> bool {
        self.link.id == conn
    }

    /// Every route was copied and every chunk passed by the acknowledgement.
    pub(crate) fn done(&self) -> bool {
        self.current.is_none() && self.queue.is_empty() && self.emitted.is_empty()
    }

    /// The probe's answer: a warning when a commit waiting for a synchronous standby could
    /// go unseen (docs/online-copy.md, "Reconciling a chunk with the stream").
    fn on_probe_event(&mut self, queue: &mut Queue, event: &Event) -> Result<(), CopyFailure> {
        match event {
            Event::DataRow(row) => {
                self.probe = row
                    .columns
                    .iter()
                    .map(|c| {
                        c.as_ref()
                            .map(|c| String::from_utf8_lossy(c).into_owned())
                            .unwrap_or_default()
                    })
                    .collect();
            }
            Event::QueryError(e) => {
                return Err(CopyFailure(format!(
                    "the online copy's first question failed: {e}"
                )))
            }
            Event::Failed(error) => {
                return Err(CopyFailure(format!(
                    "the online copy's connection failed: {error}"
                )))
            }
            Event::QueryDone { .. } => {
                self.probing = false;
                if let [sees, standbys] = self.probe.as_slice() {
                    if sees != "true" && !standbys.trim().is_empty() {
                        queue.log(
                            Level::Warn,
                            format!(
                                "synchronous_standby_names is {standbys:?} and the online copy's role cannot see other roles' waits in pg_stat_activity: \
                                 a commit streamed before a chunk and still waiting for a standby when the chunk is read would go unseen, and the chunk's older row win. \
                                 GRANT pg_read_all_stats (or pg_monitor) to the role slotline connects as"
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Starts the next route's copy with the relations the session already announced of it
    /// (the stream announces a relation once per session).
    pub(crate) fn start_next<'r>(
        &mut self,
        queue: &mut Queue,
        announced: impl Fn(usize) -> Vec<&'r Relation>,
    ) {
        if self.current.is_some() {
            return;
        }
        let Some(copy) = self.queue.pop_front() else {
            return;
        };
        let mut table = TableCopy::new(copy.key.clone());
        for relation in announced(copy.route) {
            table.on_relation(relation);
        }
        queue.log(
            Level::Info,
            format!(
                "copying {}.{} online in chunks of {} rows{}",
                copy.spec.heap.schema,
                copy.spec.heap.table,
                copy.spec.limit,
                match &copy.after {
                    Some(after) => format!(", after key ({})", after.join(", ")),
                    None => String::new(),
                }
            ),
        );
        let run = format!("{}/{}", self.run, copy.route);
        self.current = Some(Current {
            route: copy.route,
            relation: copy.spec.relation.clone(),
            started: queue.now.mono,
            reader: Reader::new(copy.spec, self.source, run, copy.after),
            table,
            emitted: 0,
            dropped: 0,
            rereads: 0,
        });
    }

    /// When a chunk read again may be read.
    pub(crate) fn retry_at(&self) -> Option<crate::time::Mono> {
        self.retry_at.filter(|_| self.current.is_some())
    }

    /// The copy's progress, for the periodic progress line: rows and chunks read of the
    /// route being copied (this session), their rate, and the routes still to copy.
    pub(crate) fn describe(&self, now: crate::time::Mono) -> Option<String> {
        let current = self.current.as_ref()?;
        let secs = now.since(current.started) as f64 / 1e6;
        let rate = if secs > 0.0 {
            format!(", {:.0} rows/s", current.reader.rows_read as f64 / secs)
        } else {
            String::new()
        };
        Some(format!(
            "copying {}.{} online: {} rows read in {} chunk(s) ({} emitted, {} left to the stream, {} read again) in {:.0} s{rate}; {} route(s) after it",
            current.relation.namespace,
            current.relation.name,
            current.reader.rows_read,
            current.reader.chunks_read,
            current.emitted,
            current.dropped,
            current.rereads,
            secs,
            self.queue.len()
        ))
    }

    /// Sends the reader's next query when one is due and nothing waits for the stream.
    pub(crate) fn read_more(&mut self, queue: &mut Queue) -> Result<(), CopyFailure> {
        if !self.ready {
            return Ok(());
        }
        if let Some(at) = self.retry_at {
            if queue.now.mono < at {
                return Ok(());
            }
            self.retry_at = None;
        }
        let Some(current) = self.current.as_mut() else {
            return Ok(());
        };
        if let Some(after) = self.rewind_to.take() {
            if current.reader.reading() {
                self.rewind_to = Some(after);
                return Ok(());
            }
            current.reader.rewind(after);
        }
        if current.table.waiting() >= DEPTH || current.reader.finished() && current.reader.idle() {
            return Ok(());
        }
        match current.reader.next_query() {
            Ok(Some(sql)) => self.link.query(queue, &sql).map_err(CopyFailure),
            Ok(None) => Ok(()),
            Err(e) => Err(CopyFailure(e.to_string())),
        }
    }

    /// Events of the copier's connection. `read_at`: where the stream stands, `between`:
    /// outside a transaction (a chunk whose watermark the stream already passed is judged
    /// there, or at the next such point).
    pub(crate) fn on_events(
        &mut self,
        queue: &mut Queue,
        events: Vec<Event>,
        read_at: Lsn,
        between: bool,
    ) -> Result<Vec<CopyStep>, CopyFailure> {
        let mut steps = Vec::new();
        for event in events {
            if self.probing {
                self.on_probe_event(queue, &event)?;
                if !self.probing {
                    self.ready = true;
                }
                continue;
            }
            match &event {
                Event::Ready => {
                    // First: can this role see a commit waiting for a synchronous standby?
                    self.probing = true;
                    self.link.query(queue, PROBE).map_err(CopyFailure)?;
                    continue;
                }
                Event::Failed(error) => {
                    return Err(CopyFailure(format!(
                        "the online copy's connection failed: {error}"
                    )))
                }
                Event::Notice(notice) => queue.log(Level::Info, format!("PostgreSQL: {notice}")),
                _ => {}
            }
            let Some(current) = self.current.as_mut() else {
                continue;
            };
            match current.reader.on_event(&event) {
                Ok(Some(chunk)) => {
                    if self.rewind_to.is_some() {
                        // Read ahead of a chunk that is read again: read again after it.
                        queue.note(
                            Level::Debug,
                            Topic::Snapshot,
                            format!(
                                "chunk {} of route {} is dropped: a chunk before it is read again",
                                chunk.number, current.route
                            ),
                        );
                        continue;
                    }
                    queue.note(
                        Level::Debug,
                        Topic::Snapshot,
                        format!(
                            "chunk {} of route {} read: {} rows{}",
                            chunk.number,
                            current.route,
                            chunk.rows.len(),
                            if chunk.last { " (the last)" } else { "" }
                        ),
                    );
                    let emission = current.table.on_chunk(chunk, read_at);
                    steps.extend(self.on_emission(queue, emission));
                    if between {
                        steps.extend(self.between(queue));
                    }
                }
                Ok(None) => {}
                Err(ReadError::Server(e)) => {
                    queue.log(
                        Level::Warn,
                        format!("a chunk read failed and is read again: {e}"),
                    );
                }
                Err(e) => return Err(CopyFailure(format!("the online copy: {e}"))),
            }
        }
        self.read_more(queue)?;
        Ok(steps)
    }

    /// The stream stands between two transactions: every waiting chunk whose watermark it
    /// already passed (the chunk's answer came after the stream read it) is judged here,
    /// oldest first.
    pub(crate) fn between(&mut self, queue: &mut Queue) -> Vec<CopyStep> {
        let mut steps = Vec::new();
        loop {
            let Some(current) = self.current.as_mut() else {
                return steps;
            };
            if !current.table.passed(self.seen) {
                return steps;
            }
            queue.note(
                Level::Debug,
                Topic::Snapshot,
                "the stream passed the chunk's watermark before its answer came: it is judged where the stream stands",
            );
            let emission = current.table.judge_now(self.seen);
            match self.on_emission(queue, emission) {
                Some(step) => steps.push(step),
                None => return steps,
            }
        }
    }

    /// A stream message (the phase has placed it: `route` is its route, when it has one),
    /// read at `wal_start`.
    pub(crate) fn on_message(
        &mut self,
        queue: &mut Queue,
        message: &Message<'_>,
        route: Option<usize>,
        wal_start: Lsn,
    ) -> Vec<CopyStep> {
        self.note_position(wal_start);
        match message {
            Message::Commit(commit) => self.note_position(commit.end_lsn),
            Message::Logical(logical) => self.note_position(logical.lsn),
            _ => {}
        }
        let Some(current) = self.current.as_mut() else {
            return Vec::new();
        };
        let emission = match message {
            Message::Begin(begin) => current.table.on_begin(begin.xid, begin.final_lsn),
            Message::Commit(commit) => current.table.on_commit(commit.end_lsn),
            Message::Logical(logical) => current.table.on_message(logical),
            Message::Insert(_) | Message::Update(_) | Message::Delete(_)
                if route == Some(current.route) =>
            {
                current.table.on_change(message);
                None
            }
            Message::Relation(relation) if route == Some(current.route) => {
                current.table.on_relation(relation);
                None
            }
            _ => None,
        };
        let mut steps: Vec<CopyStep> = self.on_emission(queue, emission).into_iter().collect();
        if matches!(message, Message::Commit(_)) {
            steps.extend(self.between(queue));
        }
        steps
    }

    /// A TRUNCATE of the route being copied, inside the open transaction.
    pub(crate) fn on_truncate(&mut self, route: usize) {
        if let Some(current) = self.current.as_mut().filter(|c| c.route == route) {
            current.table.on_truncate();
        }
    }

    fn on_emission(&mut self, queue: &mut Queue, emission: Option<Emission>) -> Option<CopyStep> {
        let current = self.current.as_mut()?;
        match emission? {
            Emission::Rows {
                number,
                rows,
                dropped,
                at,
                end_key,
                last,
            } => {
                // The chunk's transaction is acknowledged one byte past the furthest
                // position read or acknowledged (the watermark's record start, when the
                // chunk's answer came before the stream reached it): past every commit and
                // keepalive before it and before every one after it (those end on record
                // boundaries further on), so the acknowledgement passes it only once its
                // rows are durable.
                self.rereads_in_a_row = 0;
                let at = Lsn(at.max(self.seen).0.saturating_add(1));
                self.seen = at;
                current.emitted += rows.len() as u64;
                current.dropped += dropped as u64;
                queue.note(
                    Level::Debug,
                    Topic::Snapshot,
                    format!(
                        "chunk {number} of route {} is emitted at {at}: {} rows, {dropped} left to the stream",
                        current.route,
                        rows.len()
                    ),
                );
                let emitted = Emitted {
                    route: current.route,
                    at,
                    end_key,
                    last,
                };
                let route = current.route;
                let relation = current.relation.clone();
                if last {
                    queue.log(
                        Level::Info,
                        format!(
                            "route {route}'s online copy read its last chunk: {} rows emitted, {} left to the stream, {} chunk(s) read again",
                            current.emitted, current.dropped, current.rereads
                        ),
                    );
                    self.current = None;
                }
                self.emitted.push_back(emitted.clone());
                Some(CopyStep::Emit {
                    route,
                    relation,
                    rows,
                    emitted,
                })
            }
            Emission::Reread {
                number,
                after,
                xids,
            } => {
                current.rereads += 1;
                queue.note(
                    Level::Debug,
                    Topic::Snapshot,
                    format!(
                        "chunk {number} of route {} is read again: transactions {xids:?} stood in its way",
                        current.route
                    ),
                );
                // The chunks read ahead of it are read again after it.
                current.table.discard_waiting();
                if current.reader.reading() {
                    self.rewind_to = Some(after);
                } else {
                    current.reader.rewind(after);
                }
                let wait = RETRY_FIRST_US
                    .saturating_mul(1 << self.rereads_in_a_row.min(10))
                    .min(RETRY_MAX_US);
                self.rereads_in_a_row += 1;
                self.retry_at = Some(crate::time::Mono(queue.now.mono.0 + wait));
                None
            }
        }
    }

    /// The acknowledgement reached `flush`: the chunks it passed, oldest first.
    pub(crate) fn passed(&mut self, flush: Lsn) -> Vec<Emitted> {
        let mut passed = Vec::new();
        while self.emitted.front().is_some_and(|e| e.at <= flush) {
            passed.extend(self.emitted.pop_front());
        }
        passed
    }

    pub(crate) fn close(&mut self, queue: &mut Queue) {
        self.link.close(queue);
    }
}
