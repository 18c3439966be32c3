//! The outbox: changes converted to Feldera JSON on arrival, buffered per route, and cut into
//! batches by size and age.
//!
//! Memory is bounded by the thresholds, not by transaction size: each route holds one
//! encoded NDJSON buffer (the future request body), so a row costs its JSON bytes and
//! nothing else. A batch is cut at `max_rows` rows, at `max_bytes` bytes, or `linger` after
//! the **oldest** buffered event: an absolute deadline that a steady trickle cannot
//! postpone. With linger 0 the batch is cut at every commit (one request per transaction).
//!
//! The outbox never decides what a row means (see `convert`) nor when a batch is durable
//! (see `ack`); it only holds bytes and says when they should go.

use crate::ack::BatchSeq;
use crate::time::Mono;

/// Where batches are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub max_rows: u64,
    pub max_bytes: u64,
    pub linger_us: u64,
}

/// Why a batch was cut, for traces and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutReason {
    Rows,
    Bytes,
    Linger,
    /// Linger 0: every commit is its own batch.
    Commit,
    /// Nothing was in flight when a source commit ended what arrived: the batch goes at once
    /// (the linger only coalesces what arrives while earlier batches are in flight).
    Idle,
    /// A graceful stop (or another caller need) flushes whatever is there.
    Drain,
}

impl CutReason {
    pub fn name(self) -> &'static str {
        match self {
            CutReason::Rows => "rows",
            CutReason::Bytes => "bytes",
            CutReason::Linger => "linger",
            CutReason::Commit => "commit",
            CutReason::Idle => "idle",
            CutReason::Drain => "drain",
        }
    }
}

/// One route's share of a batch: the request body for one Feldera table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteBody {
    pub route: usize,
    pub rows: u64,
    pub body: Vec<u8>,
}

/// A cut batch, ready to post: one body per route that has rows, in route order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub seq: BatchSeq,
    pub parts: Vec<RouteBody>,
    pub reason: CutReason,
}

impl Batch {
    pub fn rows(&self) -> u64 {
        self.parts.iter().map(|p| p.rows).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.body.len() as u64).sum()
    }
}

/// A position inside a route buffer, to roll back a partly written line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineMark {
    route: usize,
    len: usize,
}

/// Room made in a body before each line. A line longer than this still fits (the buffer
/// grows as usual), only past the planned capacity.
const LINE_ROOM: usize = 64 * 1024;

/// Makes room for the next line of `body`, a batch cut once it holds `limit` bytes: doubling
/// as usual while far below the limit, then exactly up to the limit plus one line's room.
/// Plain doubling would reserve twice the limit for the line that crosses it (8 MiB for a
/// 4 MiB batch): memory the allocator keeps for every batch in flight.
fn reserve_line(body: &mut Vec<u8>, limit: usize) {
    if body.capacity() - body.len() >= LINE_ROOM {
        return;
    }
    let planned = limit.saturating_add(LINE_ROOM);
    let doubled = body.capacity().saturating_mul(2).max(LINE_ROOM);
    let target = doubled.min(planned).max(body.len() + LINE_ROOM);
    body.reserve_exact(target - body.len());
}

#[derive(Debug)]
pub struct Outbox {
    thresholds: Thresholds,
    bodies: Vec<Vec<u8>>,
    /// Each route's body length at its last cut: a fresh body reserves that much at once
    /// instead of doubling its way there, copying itself each time.
    last_len: Vec<usize>,
    rows_per_route: Vec<u64>,
    rows: u64,
    bytes: u64,
    oldest: Option<Mono>,
    /// The sequence number the next cut batch will carry.
    next_seq: BatchSeq,
    /// Each route's body length and rows when the current source transaction began (zero
    /// once a cut took the body): what lies beyond belongs to that transaction alone.
    transaction_marks: Vec<(usize, u64)>,
}

impl Outbox {
    pub fn new(routes: usize, thresholds: Thresholds) -> Outbox {
        Outbox {
            thresholds,
            bodies: vec![Vec::new(); routes],
            last_len: vec![0; routes],
            rows_per_route: vec![0; routes],
            rows: 0,
            bytes: 0,
            oldest: None,
            next_seq: 1,
            transaction_marks: vec![(0, 0); routes],
        }
    }

    /// An empty outbox whose first batch follows `last_cut` (batch numbers keep growing
    /// across sessions: the ack tracker voids the old session's numbers).
    pub fn after(routes: usize, thresholds: Thresholds, last_cut: BatchSeq) -> Outbox {
        Outbox {
            next_seq: last_cut + 1,
            ..Outbox::new(routes, thresholds)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The batch that buffered rows will belong to (the ack tracker's `last_batch` for a
    /// commit whose rows are buffered now).
    pub fn open_seq(&self) -> BatchSeq {
        self.next_seq
    }

    /// The last batch cut so far (0 before the first): what a commit with no buffered rows
    /// depends on.
    pub fn last_cut_seq(&self) -> BatchSeq {
        self.next_seq - 1
    }

    /// The batch a commit seen now depends on.
    pub fn seq_for_commit(&self) -> BatchSeq {
        if self.is_empty() {
            self.last_cut_seq()
        } else {
            self.open_seq()
        }
    }

    /// Starts writing a line into `route`'s buffer; pass the mark to `finish_line` once
    /// the line is complete, or to `abandon_line` when conversion failed half way.
    pub fn start_line(&mut self, route: usize) -> (LineMark, &mut Vec<u8>) {
        let limit = usize::try_from(self.thresholds.max_bytes).unwrap_or(usize::MAX);
        let body = &mut self.bodies[route];
        if body.capacity() == 0 {
            let planned = limit.saturating_add(LINE_ROOM);
            body.reserve_exact(self.last_len[route].saturating_add(LINE_ROOM).min(planned));
        }
        reserve_line(body, limit);
        (
            LineMark {
                route,
                len: body.len(),
            },
            body,
        )
    }

    /// Accounts for `lines` complete lines written since `mark` (each ends in a newline).
    pub fn finish_lines(&mut self, mark: LineMark, lines: u64, now: Mono) {
        let written = self.bodies[mark.route].len() - mark.len;
        debug_assert!(written > 0 && self.bodies[mark.route].ends_with(b"\n"));
        self.rows_per_route[mark.route] += lines;
        self.rows += lines;
        self.bytes += written as u64;
        self.oldest.get_or_insert(now);
    }

    /// Drops whatever was written since `mark`.
    pub fn abandon_line(&mut self, mark: LineMark) {
        self.bodies[mark.route].truncate(mark.len);
    }

    /// When the linger expires, if anything is buffered (never with linger 0, which cuts
    /// at commits only).
    pub fn linger_deadline(&self) -> Option<Mono> {
        if self.thresholds.linger_us == 0 {
            return None;
        }
        self.oldest
            .map(|oldest| oldest.plus_us(self.thresholds.linger_us))
    }

    /// Whether a batch should be cut now, and why. `at_commit` is true right after a
    /// commit was read (linger 0 cuts there).
    pub fn due(&self, now: Mono, at_commit: bool) -> Option<CutReason> {
        if self.is_empty() {
            return None;
        }
        if self.rows >= self.thresholds.max_rows {
            Some(CutReason::Rows)
        } else if self.bytes >= self.thresholds.max_bytes {
            Some(CutReason::Bytes)
        } else if at_commit && self.thresholds.linger_us == 0 {
            Some(CutReason::Commit)
        } else if self
            .linger_deadline()
            .is_some_and(|deadline| now >= deadline)
        {
            Some(CutReason::Linger)
        } else {
            None
        }
    }

    /// Cuts everything buffered into a batch (None when empty). Buffers are handed over, not
    /// copied; the next rows start fresh ones.
    pub fn cut(&mut self, reason: CutReason) -> Option<Batch> {
        if self.is_empty() {
            return None;
        }
        let parts = self
            .bodies
            .iter_mut()
            .zip(self.rows_per_route.iter_mut())
            .enumerate()
            .filter(|(_, (_, rows))| **rows > 0)
            .map(|(route, (body, rows))| {
                self.last_len[route] = body.len();
                RouteBody {
                    route,
                    rows: std::mem::take(rows),
                    body: std::mem::take(body),
                }
            })
            .collect();
        self.transaction_marks.iter_mut().for_each(|m| *m = (0, 0));
        let seq = self.next_seq;
        self.next_seq += 1;
        self.rows = 0;
        self.bytes = 0;
        self.oldest = None;
        Some(Batch { seq, parts, reason })
    }

    /// A source transaction begins: rows buffered from now on are its own, until a cut
    /// takes them.
    pub fn mark_transaction_start(&mut self) {
        for (mark, (body, rows)) in self
            .transaction_marks
            .iter_mut()
            .zip(self.bodies.iter().zip(&self.rows_per_route))
        {
            *mark = (body.len(), *rows);
        }
    }

    /// Drops the lines of `route` that the current source transaction buffered (a TRUNCATE
    /// of its table in that transaction: PostgreSQL discarded those changes too). Lines of
    /// earlier, committed transactions stay: a commit already counts on the batch that will
    /// carry them, and the retraction that follows deletes them from Feldera once they are
    /// durable. Other routes keep theirs.
    pub fn discard_transaction_rows(&mut self, route: usize) {
        let (Some(body), Some(&(len, rows))) = (
            self.bodies.get_mut(route),
            self.transaction_marks.get(route),
        ) else {
            return;
        };
        debug_assert!(len <= body.len() && rows <= self.rows_per_route[route]);
        self.bytes -= (body.len() - len) as u64;
        body.truncate(len);
        self.rows -= self.rows_per_route[route] - rows;
        self.rows_per_route[route] = rows;
        if self.rows == 0 {
            self.oldest = None;
        }
    }

    /// Forgets everything buffered (a session ended: it will be replayed). Sequence numbers
    /// keep counting so a late answer about an old batch can never match a new one.
    pub fn clear(&mut self) {
        for body in &mut self.bodies {
            body.clear();
        }
        self.rows_per_route.iter_mut().for_each(|r| *r = 0);
        self.transaction_marks.iter_mut().for_each(|m| *m = (0, 0));
        self.rows = 0;
        self.bytes = 0;
        self.oldest = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox(max_rows: u64, max_bytes: u64, linger_ms: u64) -> Outbox {
        Outbox::new(
            2,
            Thresholds {
                max_rows,
                max_bytes,
                linger_us: linger_ms * 1000,
            },
        )
    }

    fn push(o: &mut Outbox, route: usize, line: &str, now_ms: u64) {
        let (mark, buf) = o.start_line(route);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        o.finish_lines(mark, 1, Mono(now_ms * 1000));
    }

    #[test]
    fn linger_counts_from_the_oldest_event_not_the_newest() {
        let mut o = outbox(100, 1 << 20, 50);
        push(&mut o, 0, r#"{"insert":{"id":1}}"#, 0);
        for t in [10, 20, 30, 40, 49] {
            push(&mut o, 0, r#"{"insert":{"id":2}}"#, t);
            assert_eq!(o.due(Mono(t * 1000), false), None);
        }
        assert_eq!(o.linger_deadline(), Some(Mono(50_000)));
        assert_eq!(o.due(Mono(50_000), false), Some(CutReason::Linger));
    }

    #[test]
    fn row_and_byte_thresholds_cut_batches() {
        let mut o = outbox(3, 1 << 20, 1000);
        for i in 0..3 {
            push(&mut o, 0, "{}", i);
        }
        assert_eq!(o.due(Mono(3000), false), Some(CutReason::Rows));
        let mut o = outbox(1000, 1024, 1000);
        push(&mut o, 1, &"x".repeat(1100), 0);
        assert_eq!(o.due(Mono(0), false), Some(CutReason::Bytes));
    }

    #[test]
    fn linger_zero_cuts_at_commit_only() {
        let mut o = outbox(100, 1 << 20, 0);
        push(&mut o, 0, "{}", 0);
        assert_eq!(o.due(Mono(5_000_000), false), None, "never mid-transaction");
        assert_eq!(o.due(Mono(0), true), Some(CutReason::Commit));
    }

    #[test]
    fn cut_hands_over_route_bodies_in_route_order_and_numbers_batches() {
        let mut o = outbox(100, 1 << 20, 50);
        push(&mut o, 1, "b1", 0);
        push(&mut o, 0, "a1", 1);
        push(&mut o, 1, "b2", 2);
        assert_eq!(o.seq_for_commit(), 1);
        let batch = o.cut(CutReason::Drain).unwrap();
        assert_eq!(batch.seq, 1);
        assert_eq!(batch.rows(), 3);
        assert_eq!(
            batch.parts.iter().map(|p| p.route).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(batch.parts[1].body, b"b1\nb2\n");
        assert!(o.is_empty() && o.linger_deadline().is_none());
        assert_eq!(
            o.seq_for_commit(),
            1,
            "an empty outbox depends on the last cut batch"
        );
        push(&mut o, 0, "a2", 3);
        assert_eq!(o.cut(CutReason::Drain).unwrap().seq, 2);
        assert!(o.cut(CutReason::Drain).is_none());
    }

    #[test]
    fn discarding_a_transactions_rows_keeps_other_routes_and_the_batch_numbers() {
        let mut o = outbox(100, 1 << 20, 50);
        o.mark_transaction_start();
        push(&mut o, 0, "{\"insert\":{\"id\":1}}", 0);
        push(&mut o, 1, "{\"insert\":{\"sku\":\"a\"}}", 1);
        o.discard_transaction_rows(0);
        assert_eq!(o.rows(), 1);
        let batch = o.cut(CutReason::Drain).unwrap();
        assert_eq!(
            (batch.seq, batch.parts.len(), batch.parts[0].route),
            (1, 1, 1)
        );
        push(&mut o, 0, "{\"insert\":{\"id\":2}}", 2);
        o.discard_transaction_rows(0);
        assert!(
            o.is_empty(),
            "a cut moved the mark to the start of the new body"
        );
        assert_eq!(o.linger_deadline(), None, "nothing buffered, no deadline");
    }

    #[test]
    fn discarding_a_transactions_rows_keeps_the_rows_of_earlier_commits() {
        let mut o = outbox(100, 1 << 20, 50);
        o.mark_transaction_start();
        push(&mut o, 0, "{\"insert\":{\"id\":1}}", 0);
        // committed; the next transaction begins with id 1 still buffered
        o.mark_transaction_start();
        push(&mut o, 0, "{\"insert\":{\"id\":2}}", 1);
        push(&mut o, 0, "{\"insert\":{\"id\":3}}", 1);
        o.discard_transaction_rows(0);
        assert_eq!((o.rows(), o.open_seq()), (1, 1));
        assert!(o.linger_deadline().is_some(), "the kept row still lingers");
        let batch = o.cut(CutReason::Drain).unwrap();
        assert_eq!(batch.parts[0].body, b"{\"insert\":{\"id\":1}}\n");
        assert_eq!(batch.bytes(), batch.parts[0].body.len() as u64);
    }

    #[test]
    fn a_body_cut_by_bytes_reserves_the_limit_plus_one_line_not_double() {
        let limit = 1 << 20;
        let mut o = outbox(u64::MAX, limit, 1000);
        let line = "x".repeat(99);
        while o.due(Mono(0), false).is_none() {
            push(&mut o, 0, &line, 0);
        }
        let batch = o.cut(CutReason::Bytes).unwrap();
        let body = &batch.parts[0].body;
        assert!(body.len() as u64 >= limit);
        assert!(
            body.capacity() <= limit as usize + LINE_ROOM,
            "capacity {} for a {limit}-byte limit",
            body.capacity()
        );
        let mut o = outbox(u64::MAX, 1024, 1000);
        let long = "y".repeat(3 * LINE_ROOM);
        push(&mut o, 0, &long, 0);
        assert_eq!(
            o.cut(CutReason::Bytes).unwrap().parts[0].body.len(),
            long.len() + 1
        );
    }

    #[test]
    fn the_next_body_of_a_route_reserves_what_its_last_batch_held() {
        let limit = 1 << 20;
        let mut o = outbox(u64::MAX, limit, 1000);
        let line = "x".repeat(99);
        for _ in 0..3000 {
            push(&mut o, 0, &line, 0);
        }
        let first = o.cut(CutReason::Rows).unwrap();
        let held = first.parts[0].body.len();
        push(&mut o, 0, &line, 0);
        push(&mut o, 1, &line, 0);
        let second = o.cut(CutReason::Rows).unwrap();
        let (route0, route1) = (&second.parts[0].body, &second.parts[1].body);
        assert!(
            route0.capacity() >= held + LINE_ROOM
                && route0.capacity() <= limit as usize + LINE_ROOM,
            "route 0 reserved {} after a {held}-byte batch",
            route0.capacity()
        );
        assert!(
            route1.capacity() < held,
            "route 1 never held much, reserved {}",
            route1.capacity()
        );
        // Still capped by the limit, whatever the last batch held.
        let mut o = outbox(u64::MAX, 1024, 1000);
        push(&mut o, 0, &"y".repeat(3 * LINE_ROOM), 0);
        o.cut(CutReason::Bytes).unwrap();
        push(&mut o, 0, "z", 0);
        let body = &o.cut(CutReason::Bytes).unwrap().parts[0].body;
        assert!(
            body.capacity() <= 1024 + LINE_ROOM,
            "capacity {}",
            body.capacity()
        );
    }

    #[test]
    fn abandoned_line_leaves_no_trace() {
        let mut o = outbox(100, 1 << 20, 50);
        push(&mut o, 0, "keep", 0);
        let (mark, buf) = o.start_line(0);
        buf.extend_from_slice(b"{\"insert\":{\"half");
        o.abandon_line(mark);
        let batch = o.cut(CutReason::Drain).unwrap();
        assert_eq!(batch.parts[0].body, b"keep\n");
        assert_eq!(batch.rows(), 1);
    }

    #[test]
    fn clear_keeps_sequence_numbers_moving() {
        let mut o = outbox(100, 1 << 20, 50);
        push(&mut o, 0, "x", 0);
        o.cut(CutReason::Drain);
        push(&mut o, 0, "y", 1);
        o.clear();
        assert!(o.is_empty());
        push(&mut o, 0, "z", 2);
        assert_eq!(o.cut(CutReason::Drain).unwrap().seq, 2);
    }
}
