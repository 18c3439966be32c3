//! Streaming an ad-hoc query's answer, and what the double counts about queries.
//!
//! Feldera streams an answer as the engine produces it (`crates/adapters/src/adhoc/executor.rs`,
//! `stream_json_query`: each record batch becomes NDJSON and is yielded on its own), so a
//! client that stops reading holds the query back rather than making the pipeline buffer
//! its answer. The double does the same: a scan (`scan`) runs on a blocking thread and hands
//! the answer to the HTTP body in pieces (a batch of `PIECE_ROWS` lines, or `PIECE_BYTES`)
//! through a channel of `CHANNEL_PIECES`; the body takes a piece only when the server is ready to write it, which
//! it is only when the client reads. So the double holds at most `CHANNEL_PIECES` pieces,
//! the finished one waiting to enter the channel and the one being filled, and hyper's
//! write buffer (about 400 KiB) on top; everything else waits in the scan.
//!
//! `QueryStats` counts queries per table and in total, the rows their scans visited, the
//! answer bytes produced and how many of them wait in the double's channels (now, and the
//! most ever): what tests and benchmarks read to see what a client's queries cost.
//!
//! Owns: the answer's framing (NDJSON, or one JSON array when configured; Feldera's final
//! `{"error": ...}` line), its pieces, the body, the counters, and logging the request when
//! its answer ended. Never plans or scans a query itself.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body::{Body, Frame};
use serde_json::{json, Value as Json};
use tokio::sync::mpsc;

use super::log::{LogNote, LogTicket};
use super::query::Plan;
use super::scan::Scan;
use super::shared::Shared;

/// An answer is handed to the HTTP body in pieces of at most this many rows: Feldera's
/// scan makes record batches of 256 rows (`crates/adapters/src/adhoc/table.rs`,
/// `MAX_BATCH_SIZE`), and each batch becomes one chunk of the answer.
pub const PIECE_ROWS: usize = 256;
/// ... and of about this many bytes at most (a piece ends with the line that reaches it).
pub const PIECE_BYTES: usize = 256 * 1024;
/// Finished pieces waiting for the body to take them.
pub const CHANNEL_PIECES: usize = 1;

/// Queries the double answered, and what they cost it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Every ad-hoc query request for the pipeline, refused ones included.
    pub queries: u64,
    /// By the schema name of the relation a query named (refused queries included, when
    /// the relation exists).
    pub by_table: BTreeMap<String, TableQueries>,
    /// Rows visited by every scan.
    pub rows_scanned: u64,
    /// Answer bytes produced (handed to the channel).
    pub answer_bytes: u64,
    /// Answers still streaming.
    pub open_answers: u64,
    /// Answer bytes produced and not yet taken by the HTTP server, now: the pieces in the
    /// channels and those waiting to enter them (a piece the body just took may still count
    /// for an instant, so one answer may show one piece more).
    pub unsent_bytes: u64,
    /// The most `unsent_bytes` ever was.
    pub max_unsent_bytes: u64,
}

/// Queries of one relation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableQueries {
    pub queries: u64,
    pub rows_scanned: u64,
}

impl QueryStats {
    /// A query request arrived; `table` is the relation it named, if any.
    pub fn count_query(&mut self, table: Option<&str>) {
        self.queries += 1;
        if let Some(table) = table {
            self.by_table.entry(table.to_owned()).or_default().queries += 1;
        }
    }

    /// Queries that named `table`.
    pub fn queries_of(&self, table: &str) -> u64 {
        self.by_table.get(table).map_or(0, |t| t.queries)
    }

    /// Rows the scans of `table` visited.
    pub fn rows_scanned_of(&self, table: &str) -> u64 {
        self.by_table.get(table).map_or(0, |t| t.rows_scanned)
    }

    fn scanned(&mut self, table: &str, rows: u64) {
        self.rows_scanned += rows;
        self.by_table
            .entry(table.to_owned())
            .or_default()
            .rows_scanned += rows;
    }

    fn produced(&mut self, bytes: usize) {
        self.answer_bytes += bytes as u64;
        self.unsent_bytes += bytes as u64;
        self.max_unsent_bytes = self.max_unsent_bytes.max(self.unsent_bytes);
    }

    fn taken(&mut self, bytes: usize) {
        self.unsent_bytes = self.unsent_bytes.saturating_sub(bytes as u64);
    }

    pub fn to_json(&self) -> Json {
        let tables: serde_json::Map<String, Json> = self
            .by_table
            .iter()
            .map(|(name, t)| {
                (
                    name.clone(),
                    json!({"queries": t.queries, "rows_scanned": t.rows_scanned}),
                )
            })
            .collect();
        json!({
            "queries": self.queries,
            "tables": tables,
            "rows_scanned": self.rows_scanned,
            "answer_bytes": self.answer_bytes,
            "open_answers": self.open_answers,
            "unsent_bytes": self.unsent_bytes,
            "max_unsent_bytes": self.max_unsent_bytes,
        })
    }
}

/// How an answer is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// One JSON array instead of NDJSON.
    pub array: bool,
    /// End with an injected `{"error": ...}` line after the rows.
    pub midstream_error: bool,
}

/// Starts scanning `plan` on a blocking thread; the returned body streams its answer. The
/// request is logged (from `ticket`) when the answer ended or the client went away.
pub fn stream(
    shared: Arc<Shared>,
    plan: Plan,
    framing: Framing,
    per_row: Duration,
    ticket: Option<LogTicket>,
) -> AnswerBody {
    let (tx, rx) = mpsc::channel(CHANNEL_PIECES);
    let answered = Arc::new(AtomicU64::new(0));
    let table = plan.table.clone();
    shared.queries().open_answers += 1;
    let producer = Producer {
        shared: shared.clone(),
        table: table.clone(),
        tx,
        reported: 0,
        answered: answered.clone(),
    };
    tokio::task::spawn_blocking(move || producer.run(Scan::new(plan, per_row), framing));
    AnswerBody {
        rx,
        shared,
        end: Some(AnswerEnd {
            ticket,
            table,
            answered,
        }),
    }
}

/// The scan's side of the channel.
struct Producer {
    shared: Arc<Shared>,
    table: String,
    tx: mpsc::Sender<Bytes>,
    /// Rows scanned already added to the stats.
    reported: u64,
    answered: Arc<AtomicU64>,
}

impl Producer {
    fn run(mut self, mut scan: Scan, framing: Framing) {
        let mut piece = String::new();
        let mut lines = 0;
        let mut first = true;
        if framing.array {
            piece.push('[');
        }
        let tx = self.tx.clone();
        let cancelled = move || tx.is_closed();
        loop {
            let line = match scan.next_line(&cancelled) {
                Some(Ok(line)) => line,
                Some(Err(e)) => {
                    push(&mut piece, &mut first, framing, &error_line(&e));
                    break;
                }
                None if framing.midstream_error => {
                    let e = "injected failure after streaming started";
                    push(&mut piece, &mut first, framing, &error_line(e));
                    break;
                }
                None => break,
            };
            push(&mut piece, &mut first, framing, &line);
            lines += 1;
            if piece.len() >= PIECE_BYTES || lines >= PIECE_ROWS {
                self.report(&scan);
                if !self.send(std::mem::take(&mut piece)) {
                    return;
                }
                lines = 0;
            }
        }
        if framing.array {
            piece.push(']');
        }
        self.report(&scan);
        if !piece.is_empty() {
            self.send(piece);
        }
    }

    fn report(&mut self, scan: &Scan) {
        let delta = scan.scanned() - self.reported;
        self.reported = scan.scanned();
        self.answered.store(scan.answered(), Ordering::Relaxed);
        self.shared.queries().scanned(&self.table, delta);
    }

    /// Hands a piece to the body, waiting while the channel is full; false when the reader
    /// went away.
    fn send(&self, piece: String) -> bool {
        let len = piece.len();
        self.shared.queries().produced(len);
        if self.tx.blocking_send(Bytes::from(piece)).is_err() {
            self.shared.queries().taken(len);
            return false;
        }
        true
    }
}

fn push(piece: &mut String, first: &mut bool, framing: Framing, line: &str) {
    if framing.array {
        if !*first {
            piece.push(',');
        }
        piece.push_str(line);
    } else {
        piece.push_str(line);
        piece.push('\n');
    }
    *first = false;
}

/// Feldera's line for an error after streaming started.
fn error_line(message: &str) -> String {
    json!({ "error": message }).to_string()
}

/// What the body reports when the answer ended.
struct AnswerEnd {
    ticket: Option<LogTicket>,
    table: String,
    answered: Arc<AtomicU64>,
}

/// The answer's HTTP body: takes pieces from the scan only when polled.
pub struct AnswerBody {
    rx: mpsc::Receiver<Bytes>,
    shared: Arc<Shared>,
    end: Option<AnswerEnd>,
}

impl AnswerBody {
    /// Once: the answer is no longer open, and its request goes to the log.
    fn finish(&mut self) {
        let Some(end) = self.end.take() else {
            return;
        };
        {
            let mut stats = self.shared.queries();
            stats.open_answers = stats.open_answers.saturating_sub(1);
        }
        if let Some(ticket) = end.ticket {
            let note = LogNote {
                table: Some(end.table),
                rows: Some(end.answered.load(Ordering::Relaxed)),
                ..LogNote::default()
            };
            ticket.record(&self.shared, 200, note, Instant::now());
        }
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(piece)) => {
                self.shared.queries().taken(piece.len());
                Poll::Ready(Some(Ok(Frame::data(piece))))
            }
            Poll::Ready(None) => {
                self.finish();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for AnswerBody {
    /// The client went away (or the server stopped) before the end: the scan stops at its
    /// next send, and pieces it left in the channel are no longer held.
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(piece) = self.rx.try_recv() {
            self.shared.queries().taken(piece.len());
        }
        self.finish();
    }
}
