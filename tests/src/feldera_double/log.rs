//! The request log: one record per `/v0` request (method, path, endpoint kind, table,
//! status, error code, rows in the body, start and finish times relative to the double's
//! start) and per-kind counts, for test oracles and timing assertions.
//!
//! Owns: records and counts. Never classifies requests by itself beyond the path shape,
//! never logs `/control` calls (they are the test talking to itself).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

use super::shared::Shared;

/// Records kept; older ones are dropped (counts keep counting).
const MAX_RECORDS: usize = 100_000;

/// What a handler tells the log about its request, carried in response extensions.
#[derive(Debug, Clone, Default)]
pub struct LogNote {
    pub table: Option<String>,
    pub rows: Option<u64>,
    pub error_code: Option<String>,
    /// The request's `Authorization` header (filled in by the logging middleware).
    pub authorization: Option<String>,
}

/// A request's place in the log, taken at its arrival: a handler whose answer streams
/// (an ad-hoc query) logs its request with it once the answer ended, and marks its response
/// `LogDeferred` so the middleware does not log it when the headers go out.
#[derive(Debug, Clone)]
pub struct LogTicket {
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub started: Instant,
}

/// In a response's extensions: its request is logged later, from its `LogTicket`.
#[derive(Debug, Clone, Copy)]
pub struct LogDeferred;

impl LogTicket {
    /// Logs the request as finished at `finished` (the `Authorization` header comes from
    /// the ticket).
    pub fn record(self, shared: &Shared, status: u16, note: LogNote, finished: Instant) {
        let note = LogNote {
            authorization: self.authorization,
            ..note
        };
        shared.log().record(
            self.seq,
            &self.method,
            &self.path,
            status,
            note,
            self.started,
            finished,
        );
    }
}

/// One logged request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// 1-based arrival order.
    pub seq: u64,
    pub method: String,
    /// Path and query as received (still percent-encoded).
    pub path: String,
    /// `pipeline`, `ingress`, `completion_status`, `query`, `start_transaction`,
    /// `commit_transaction`, `stats`, `checkpoint`, `checkpoint_status` or `other`.
    pub endpoint: String,
    /// The table segment of an ingress path, percent-decoded; the relation a query read.
    pub table: Option<String>,
    pub status: u16,
    pub error_code: Option<String>,
    /// Events in an ingress body, rows in a query answer.
    pub rows: Option<u64>,
    /// The `Authorization` header as received (the double accepts any), so a test can tell
    /// that an API key was sent; never part of `to_json`, which `/control` serves.
    pub authorization: Option<String>,
    /// Since the double started.
    pub started: Duration,
    /// When the answer ended: for a query, when the last of its streamed answer was handed
    /// to the server (or the client went away).
    pub finished: Duration,
}

impl RequestRecord {
    pub fn to_json(&self) -> Json {
        json!({
            "seq": self.seq,
            "method": self.method,
            "path": self.path,
            "endpoint": self.endpoint,
            "table": self.table,
            "status": self.status,
            "error_code": self.error_code,
            "rows": self.rows,
            "started_us": self.started.as_micros() as u64,
            "finished_us": self.finished.as_micros() as u64,
        })
    }
}

/// The log itself.
#[derive(Debug)]
pub struct RequestLog {
    origin: Instant,
    next_seq: u64,
    records: VecDeque<RequestRecord>,
    counts: BTreeMap<String, u64>,
}

impl RequestLog {
    pub fn new(origin: Instant) -> RequestLog {
        RequestLog {
            origin,
            next_seq: 1,
            records: VecDeque::new(),
            counts: BTreeMap::new(),
        }
    }

    /// Numbers a request at arrival.
    pub fn arrival(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Records a finished request. `status` and `note` come from the response.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        seq: u64,
        method: &str,
        path: &str,
        status: u16,
        note: LogNote,
        started: Instant,
        finished: Instant,
    ) {
        let endpoint = endpoint_kind(path).to_string();
        *self.counts.entry(endpoint.clone()).or_insert(0) += 1;
        if self.records.len() >= MAX_RECORDS {
            self.records.pop_front();
        }
        self.records.push_back(RequestRecord {
            seq,
            method: method.to_string(),
            path: path.to_string(),
            endpoint,
            table: note.table,
            status,
            error_code: note.error_code,
            rows: note.rows,
            authorization: note.authorization,
            started: started.saturating_duration_since(self.origin),
            finished: finished.saturating_duration_since(self.origin),
        });
    }

    /// Records in finishing order.
    pub fn records(&self) -> Vec<RequestRecord> {
        self.records.iter().cloned().collect()
    }

    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.clone()
    }

    pub fn clear(&mut self) {
        self.records.clear();
        self.counts.clear();
    }

    pub fn to_json(&self) -> Json {
        json!({
            "counts": self.counts,
            "requests": self.records.iter().map(RequestRecord::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Classifies `/v0/pipelines/{p}[/...]` paths by their shape.
pub fn endpoint_kind(path: &str) -> &'static str {
    let path = path.split('?').next().unwrap_or(path);
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["v0", "pipelines", _] => "pipeline",
        ["v0", "pipelines", _, "ingress", _] => "ingress",
        ["v0", "pipelines", _, "completion_status"] => "completion_status",
        ["v0", "pipelines", _, "query"] => "query",
        ["v0", "pipelines", _, "start_transaction"] => "start_transaction",
        ["v0", "pipelines", _, "commit_transaction"] => "commit_transaction",
        ["v0", "pipelines", _, "stats"] => "stats",
        ["v0", "pipelines", _, "checkpoint"] => "checkpoint",
        ["v0", "pipelines", _, "checkpoint_status"] => "checkpoint_status",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_classified_by_shape() {
        assert_eq!(endpoint_kind("/v0/pipelines/p"), "pipeline");
        assert_eq!(
            endpoint_kind("/v0/pipelines/p/ingress/%22T%22?format=json"),
            "ingress"
        );
        assert_eq!(
            endpoint_kind("/v0/pipelines/p/completion_status?token=x"),
            "completion_status"
        );
        assert_eq!(endpoint_kind("/v0/pipelines/p/ingress"), "other");
        assert_eq!(endpoint_kind("/v0/pipelines/p/stats"), "stats");
        assert_eq!(endpoint_kind("/v0/pipelines/p/checkpoint"), "checkpoint");
        assert_eq!(
            endpoint_kind("/v0/pipelines/p/checkpoint_status?incarnation_uuid=x"),
            "checkpoint_status"
        );
    }
}
