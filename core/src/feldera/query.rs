//! Classification of ad-hoc query answers and transaction answers.
//!
//! Owns the row syntax of `GET .../query?format=json` (NDJSON, or one JSON array) and the
//! trailing `{"error": ...}` line Feldera writes when a query fails after streaming began.
//! Parses faithfully and never judges: an empty answer is zero rows, and whether zero rows
//! proves anything is the caller's decision (it never does by itself).

use super::response::{
    body_prefix, failure, is_success, truncate, FelderaError, Reply, MESSAGE_CHARS,
};
use serde_json::{Map, Value};

/// Answer to an ad-hoc query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryOutcome {
    /// Every row, in answer order (possibly none). Keys are spelled as Feldera spelled them:
    /// map them onto the schema with `contract::normalise_row`.
    Rows(Vec<Map<String, Value>>),
    /// The answer ended with `{"error": ...}`: the query failed while streaming and the rows
    /// before the error are not the whole answer.
    Interrupted(FelderaError),
    Transient(FelderaError),
    /// 400 `AdHocQueryError` (e.g. the table is not queryable), unreadable rows, ...
    Fatal(FelderaError),
}

/// Classifies an ad-hoc query answer.
///
/// The last line is taken as an error only when it is an object with the single key
/// `error`; queries must therefore never select one lone column named `error` (alias it).
pub fn classify_query(reply: Reply<'_>) -> QueryOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => return QueryOutcome::Transient(FelderaError::transport(error)),
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        return match failure(status, body).transient_or_fatal() {
            Ok(e) => QueryOutcome::Transient(e),
            Err(e) => QueryOutcome::Fatal(e),
        };
    }
    let mut rows = match parse_rows(body) {
        Ok(rows) => rows,
        Err(what) => return QueryOutcome::Fatal(FelderaError::unexpected(status, &what, body)),
    };
    if let Some(message) = rows.last().and_then(error_line) {
        rows.clear();
        return QueryOutcome::Interrupted(FelderaError {
            status: Some(status),
            message,
            error_code: None,
            parse_errors: None,
            hint: None,
        });
    }
    QueryOutcome::Rows(rows)
}

/// The message of a `{"error": ...}` line.
fn error_line(row: &Map<String, Value>) -> Option<String> {
    if row.len() != 1 {
        return None;
    }
    let message = match row.get("error")? {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    Some(truncate(&message, MESSAGE_CHARS))
}

/// Rows from NDJSON or from one JSON array; blank lines are ignored.
fn parse_rows(body: &[u8]) -> Result<Vec<Map<String, Value>>, String> {
    let start = body.iter().position(|b| !b.is_ascii_whitespace());
    let Some(start) = start else {
        return Ok(Vec::new());
    };
    if body.get(start) == Some(&b'[') {
        let values: Vec<Value> = serde_json::from_slice(body)
            .map_err(|e| format!("query answer is not a JSON array of rows ({e})"))?;
        return values
            .into_iter()
            .enumerate()
            .map(|(i, value)| into_row(value, || format!("element {i}")))
            .collect();
    }
    let mut rows = Vec::new();
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|e| {
            format!(
                "query answer line {} is not JSON ({e}): {}",
                i + 1,
                body_prefix(line)
            )
        })?;
        rows.push(into_row(value, || format!("line {}", i + 1))?);
    }
    Ok(rows)
}

fn into_row(value: Value, at: impl Fn() -> String) -> Result<Map<String, Value>, String> {
    match value {
        Value::Object(row) => Ok(row),
        other => Err(format!(
            "query answer {} is {}, not a row object",
            at(),
            body_prefix(other.to_string().as_bytes())
        )),
    }
}

/// The longest line a streamed answer may hold: a row of key columns is far shorter, so a
/// longer one is a wrong answer, not a reason to hold more memory.
pub const MAX_STREAMED_LINE: usize = 8 << 20;

/// Why a streamed answer cannot be read on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// An `{"error": ...}` line: the query failed while streaming; the rows before it are
    /// not the whole answer.
    Interrupted(FelderaError),
    /// A line that is not a JSON row object, an over-long line, or a JSON array (a streamed
    /// answer must be line-delimited, which is what `format=json` is).
    Unreadable(String),
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Interrupted(e) => write!(f, "the query failed while streaming: {e}"),
            StreamError::Unreadable(what) => f.write_str(what),
        }
    }
}

/// Reads a streamed `format=json` answer (NDJSON) piece by piece: each piece gives the rows
/// of the lines it completes; the bytes of an unfinished line wait for the next piece.
/// Memory is one line and the rows of one piece.
#[derive(Debug, Default)]
pub struct RowStream {
    partial: Vec<u8>,
    /// Lines read so far (for error messages).
    lines: usize,
    /// The first non-blank byte was seen (and was not `[`).
    started: bool,
}

impl RowStream {
    /// The rows of the lines `bytes` completes, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Map<String, Value>>, StreamError> {
        let mut rows = Vec::new();
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            let (line, after) = rest.split_at(end);
            rest = &after[1..];
            if self.partial.is_empty() {
                self.line(line, &mut rows)?;
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole, &mut rows)?;
            }
        }
        if self.partial.len() + rest.len() > MAX_STREAMED_LINE {
            return Err(StreamError::Unreadable(format!(
                "query answer line {} is longer than {MAX_STREAMED_LINE} bytes: {}",
                self.lines + 1,
                body_prefix(&self.partial)
            )));
        }
        self.partial.extend_from_slice(rest);
        Ok(rows)
    }

    /// The answer ended: the rows of a last line without its newline.
    pub fn finish(&mut self) -> Result<Vec<Map<String, Value>>, StreamError> {
        let mut rows = Vec::new();
        let last = std::mem::take(&mut self.partial);
        self.line(&last, &mut rows)?;
        Ok(rows)
    }

    fn line(&mut self, line: &[u8], rows: &mut Vec<Map<String, Value>>) -> Result<(), StreamError> {
        self.lines += 1;
        let Some(start) = line.iter().position(|b| !b.is_ascii_whitespace()) else {
            return Ok(());
        };
        if !self.started && line[start] == b'[' {
            return Err(StreamError::Unreadable(format!(
                "query answer is a JSON array ({}); expected one JSON row object per line (format=json)",
                body_prefix(line)
            )));
        }
        self.started = true;
        let value: Value = serde_json::from_slice(line).map_err(|e| {
            StreamError::Unreadable(format!(
                "query answer line {} is not JSON ({e}): {}",
                self.lines,
                body_prefix(line)
            ))
        })?;
        let row =
            into_row(value, || format!("line {}", self.lines)).map_err(StreamError::Unreadable)?;
        if let Some(message) = error_line(&row) {
            return Err(StreamError::Interrupted(FelderaError {
                status: Some(200),
                message,
                error_code: None,
                parse_errors: None,
                hint: None,
            }));
        }
        rows.push(row);
        Ok(())
    }
}

/// Answer to `POST .../start_transaction`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartTransactionOutcome {
    Started {
        transaction_id: u64,
    },
    /// 409: a transaction is already open (Feldera allows one at a time).
    AlreadyOpen(FelderaError),
    Transient(FelderaError),
    Fatal(FelderaError),
}

pub fn classify_start_transaction(reply: Reply<'_>) -> StartTransactionOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => {
            return StartTransactionOutcome::Transient(FelderaError::transport(error))
        }
        Reply::Answered { status, body } => (status, body),
    };
    if status == 409 {
        return StartTransactionOutcome::AlreadyOpen(super::response::error_from(status, body));
    }
    if !is_success(status) {
        return match failure(status, body).transient_or_fatal() {
            Ok(e) => StartTransactionOutcome::Transient(e),
            Err(e) => StartTransactionOutcome::Fatal(e),
        };
    }
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("transaction_id").and_then(Value::as_u64));
    match id {
        Some(transaction_id) => StartTransactionOutcome::Started { transaction_id },
        None => StartTransactionOutcome::Fatal(FelderaError::unexpected(
            status,
            "start_transaction succeeded without {\"transaction_id\": n}",
            body,
        )),
    }
}

/// Answer to `POST .../commit_transaction`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// 200 with a JSON string: Feldera *started* committing. The transaction's inputs
    /// become visible in a later step; whether they are processed is known only from the
    /// completion tokens of the requests sent inside it.
    CommitStarted,
    /// 400 `NoTransactionInProgress`: nothing to commit (no transaction was started, or an
    /// earlier commit already went through, e.g. one whose answer was lost).
    NoTransaction(FelderaError),
    Transient(FelderaError),
    Fatal(FelderaError),
}

pub fn classify_commit_transaction(reply: Reply<'_>) -> CommitOutcome {
    let (status, body) = match reply {
        Reply::Failed { error } => return CommitOutcome::Transient(FelderaError::transport(error)),
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        let error = match failure(status, body).transient_or_fatal() {
            Ok(e) => return CommitOutcome::Transient(e),
            Err(e) => e,
        };
        return if status == 400 && error.error_code.as_deref() == Some("NoTransactionInProgress") {
            CommitOutcome::NoTransaction(error)
        } else {
            CommitOutcome::Fatal(error)
        };
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::String(_)) => CommitOutcome::CommitStarted,
        _ => CommitOutcome::Fatal(FelderaError::unexpected(
            status,
            "commit_transaction succeeded without the JSON string Feldera answers \
             (\"Transaction commit initiated\")",
            body,
        )),
    }
}

/// What a completion answer says about a token ingested inside a Feldera transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransactionTokenOutcome {
    /// In progress, and its records are not in the circuit yet (`"step": null`): they are
    /// still in the table's input queue.
    Queued,
    /// In progress, with a step: its records are in the circuit, inside the transaction.
    InCircuit,
    Complete,
    /// 410 `PipelineRestarted`.
    Restarted(FelderaError),
    Transient(FelderaError),
    Fatal(FelderaError),
}

/// Classifies a `completion_status` answer for a token of a Feldera transaction: besides
/// complete or not, whether the step is known (Feldera labels a token with a step once
/// its records were taken from the input queue into the circuit).
pub fn classify_transaction_token(reply: Reply<'_>) -> TransactionTokenOutcome {
    use super::response::{classify_completion, CompletionOutcome};
    let body = match reply {
        Reply::Answered { body, .. } => body,
        Reply::Failed { .. } => &[],
    };
    match classify_completion(reply) {
        CompletionOutcome::Complete { .. } => TransactionTokenOutcome::Complete,
        CompletionOutcome::InProgress => {
            let step = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("step").and_then(Value::as_u64));
            match step {
                Some(_) => TransactionTokenOutcome::InCircuit,
                None => TransactionTokenOutcome::Queued,
            }
        }
        CompletionOutcome::Restarted(e) => TransactionTokenOutcome::Restarted(e),
        CompletionOutcome::Transient(e) => TransactionTokenOutcome::Transient(e),
        CompletionOutcome::Fatal(e) => TransactionTokenOutcome::Fatal(e),
    }
}

#[cfg(test)]
mod transaction_tests {
    use super::*;

    fn answered(status: u16, body: &str) -> Reply<'_> {
        Reply::Answered {
            status,
            body: body.as_bytes(),
        }
    }

    #[test]
    fn commit_answers_say_started_or_no_transaction() {
        assert_eq!(
            classify_commit_transaction(answered(200, r#""Transaction commit initiated""#)),
            CommitOutcome::CommitStarted
        );
        let none = r#"{"message":"This operation requires an active transaction, but none is currently in progress","error_code":"NoTransactionInProgress","details":null}"#;
        assert!(matches!(
            classify_commit_transaction(answered(400, none)),
            CommitOutcome::NoTransaction(_)
        ));
        assert!(matches!(
            classify_commit_transaction(answered(503, "")),
            CommitOutcome::Transient(_)
        ));
    }

    #[test]
    fn a_transaction_token_is_queued_in_the_circuit_or_complete() {
        assert_eq!(
            classify_transaction_token(answered(200, r#"{"status":"inprogress","step":null}"#)),
            TransactionTokenOutcome::Queued
        );
        assert_eq!(
            classify_transaction_token(answered(200, r#"{"status":"inprogress"}"#)),
            TransactionTokenOutcome::Queued
        );
        assert_eq!(
            classify_transaction_token(answered(200, r#"{"status":"inprogress","step":7}"#)),
            TransactionTokenOutcome::InCircuit
        );
        assert_eq!(
            classify_transaction_token(answered(200, r#"{"status":"complete","step":7}"#)),
            TransactionTokenOutcome::Complete
        );
        let restarted =
            r#"{"message":"restarted","error_code":"PipelineRestarted","details":null}"#;
        assert!(matches!(
            classify_transaction_token(answered(410, restarted)),
            TransactionTokenOutcome::Restarted(_)
        ));
        assert!(matches!(
            classify_transaction_token(Reply::Failed { error: "reset" }),
            TransactionTokenOutcome::Transient(_)
        ));
    }
}
