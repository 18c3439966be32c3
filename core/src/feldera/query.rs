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
