//! The fake Feldera of the pipeline target: it holds every request the pipeline made until
//! the fuzz input answers it, with any class of answer, in any order, and records what
//! became durable: the body of an ingress request whose token an answer called
//! `complete`, and, as in Feldera, of every earlier request on the same table (in accepted
//! mode: whose ingress was answered with a token). Transactions are started and committed
//! with any class of answer too.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;

use crate::feldera::HttpRequest;
use crate::io::HttpId;

pub(super) const BASE_URL: &str = "http://feldera:8080";
const PIPELINE_URL: &str = "http://feldera:8080/v0/pipelines/p";

/// The pipeline GET answer of a compiled, running pipeline with both tables.
const PIPELINE: &str = r#"{"name":"p","program_status":"Success","deployment_status":"Running","program_info":{"schema":{"inputs":[
{"name":"users","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},"fields":[
 {"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
 {"name":"name","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}]},
{"name":"items","case_sensitive":false,"primary_key":["sku"],"materialized":false,"properties":{},"fields":[
 {"name":"sku","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":false,"precision":-1}},
 {"name":"qty","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}]}
],"outputs":[]}}}"#;

/// Status 0 stands for a transport failure (no answer).
pub(super) const PIPELINE_ANSWERS: [(u16, &str); 6] = [
    (200, PIPELINE),
    (
        200,
        r#"{"name":"p","program_status":"Pending","program_info":null}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        404,
        r#"{"message":"unknown pipeline","error_code":"UnknownPipelineName","details":{}}"#,
    ),
    (200, "<html>proxy</html>"),
    (0, "connection refused"),
];

/// Index 0 and 1 answer with a fresh token (200 and 202).
pub(super) const INGRESS_ANSWERS: [(u16, &str); 12] = [
    (200, ""),
    (202, ""),
    (
        400,
        r#"{"message":"Errors parsing input data (1 errors)","error_code":"ParseErrors","details":{"num_errors":1,"errors":[{"description":"bad value","event_number":1}]}}"#,
    ),
    (
        404,
        r#"{"message":"unknown input table","error_code":"UnknownInputTable","details":{}}"#,
    ),
    (
        410,
        r#"{"message":"pipeline is terminating","error_code":"Terminating","details":{}}"#,
    ),
    (
        429,
        r#"{"message":"too many requests","error_code":"TooManyRequests","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (200, "not json"),
    (0, "connection reset by peer"),
    (200, r#"{"token":""}"#),
    (408, ""),
];

/// Index 0 answers with a transaction id.
pub(super) const START_ANSWERS: [(u16, &str); 6] = [
    (200, r#"{"transaction_id":1}"#),
    (
        409,
        r#"{"message":"Cannot perform this operation while there is a transaction in progress","error_code":"TransactionInProgress","details":null}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (200, r#""not an object""#),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (0, "connection reset by peer"),
];

pub(super) const COMMIT_ANSWERS: [(u16, &str); 5] = [
    (200, r#""Transaction commit initiated""#),
    (
        400,
        r#"{"message":"This operation requires an active transaction, but none is currently in progress","error_code":"NoTransactionInProgress","details":null}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (0, "timed out"),
];

pub(super) const COMPLETION_ANSWERS: [(u16, &str); 9] = [
    (200, r#"{"status":"complete","step":1}"#),
    (200, r#"{"status":"inprogress","step":null}"#),
    (
        410,
        r#"{"message":"pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
    ),
    (
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    ),
    (
        500,
        r#"{"message":"internal error","error_code":"Internal","details":{}}"#,
    ),
    (
        404,
        r#"{"message":"unknown pipeline","error_code":"UnknownPipelineName","details":{}}"#,
    ),
    (200, r#"{"status":"done"}"#),
    (0, "timed out"),
    (502, ""),
];

#[derive(Debug)]
enum Waiting {
    Pipeline,
    /// Table, body.
    Ingress(String, Bytes),
    Completion(String),
    StartTransaction,
    CommitTransaction,
    Other,
}

/// An answer for the harness to feed.
#[derive(Debug)]
pub(super) enum Answer {
    Done { status: u16, body: String },
    Failed(&'static str),
}

#[derive(Debug, Default)]
pub(super) struct FakeFeldera {
    waiting: Vec<(HttpId, Waiting)>,
    accepted_mode: bool,
    /// Acceptance order, table and body of every accepted request.
    bodies_by_token: BTreeMap<String, (u32, String, Bytes)>,
    /// Tokens whose bodies are durable.
    completed: HashSet<String>,
    tokens: u32,
    durable_bodies: HashSet<Bytes>,
    /// Every durable body, one after the other.
    durable_text: String,
    pub(super) durable_batches: u32,
    /// `commit_transaction` calls answered 200.
    pub(super) commits: u32,
}

/// Which answer a class byte picks: half of all values give the good answer, an eighth
/// the second one (in progress, 202, not compiled), the rest any.
fn index(class: u8, len: usize) -> usize {
    match class {
        0..=0x7f => 0,
        0x80..=0x9f => 1,
        _ => usize::from(class) % len,
    }
}

impl FakeFeldera {
    pub(super) fn new(accepted_mode: bool) -> FakeFeldera {
        FakeFeldera {
            accepted_mode,
            ..FakeFeldera::default()
        }
    }

    /// A request arrives. Asking for the completion of a token Feldera never gave out is a
    /// pipeline bug, reported as an error.
    pub(super) fn request(&mut self, id: HttpId, request: HttpRequest) -> Result<(), String> {
        let path = request.url.strip_prefix(PIPELINE_URL).unwrap_or("?");
        let waiting = if path.is_empty() {
            Waiting::Pipeline
        } else if let Some(rest) = path.strip_prefix("/ingress/") {
            let table = rest.split('?').next().unwrap_or_default().to_owned();
            Waiting::Ingress(table, request.body)
        } else if path == "/start_transaction" {
            Waiting::StartTransaction
        } else if path == "/commit_transaction" {
            Waiting::CommitTransaction
        } else if let Some(token) = path.strip_prefix("/completion_status?token=") {
            if !self.bodies_by_token.contains_key(token) {
                return Err(format!(
                    "{id} asks for the completion of token {token:?}, which Feldera never gave out"
                ));
            }
            Waiting::Completion(token.to_owned())
        } else {
            Waiting::Other
        };
        self.waiting.push((id, waiting));
        Ok(())
    }

    /// Answers one waiting request (see `Event::Answer`).
    pub(super) fn answer(&mut self, pick: u8, class: u8) -> Option<(HttpId, Answer)> {
        if self.waiting.is_empty() {
            return None;
        }
        let (id, waiting) = self.waiting.remove(usize::from(pick) % self.waiting.len());
        let (status, body) = match &waiting {
            Waiting::Pipeline | Waiting::Other => {
                PIPELINE_ANSWERS[index(class, PIPELINE_ANSWERS.len())]
            }
            Waiting::StartTransaction => START_ANSWERS[index(class, START_ANSWERS.len())],
            Waiting::CommitTransaction => {
                let i = index(class, COMMIT_ANSWERS.len());
                self.commits += u32::from(i == 0);
                COMMIT_ANSWERS[i]
            }
            Waiting::Ingress(table, body) => {
                let i = index(class, INGRESS_ANSWERS.len());
                if i < 2 {
                    self.tokens += 1;
                    let token = format!("t{}", self.tokens);
                    self.bodies_by_token
                        .insert(token.clone(), (self.tokens, table.clone(), body.clone()));
                    if self.accepted_mode {
                        self.durable(body.clone());
                    }
                    let status = INGRESS_ANSWERS[i].0;
                    let body = format!("{{\"token\":\"{token}\"}}");
                    return Some((id, Answer::Done { status, body }));
                }
                INGRESS_ANSWERS[i]
            }
            Waiting::Completion(token) => {
                let i = index(class, COMPLETION_ANSWERS.len());
                if i == 0 {
                    // A token complete means every earlier one on its table is.
                    if let Some((order, table, _)) = self.bodies_by_token.get(token).cloned() {
                        let mut covered: Vec<(u32, String, Bytes)> = self
                            .bodies_by_token
                            .iter()
                            .filter(|(k, (o, t, _))| {
                                *t == table && *o <= order && !self.completed.contains(*k)
                            })
                            .map(|(k, (o, _, b))| (*o, k.clone(), b.clone()))
                            .collect();
                        covered.sort_by_key(|(o, _, _)| *o);
                        for (_, key, body) in covered {
                            self.completed.insert(key);
                            self.durable(body);
                        }
                    }
                }
                COMPLETION_ANSWERS[i]
            }
        };
        let answer = if status == 0 {
            Answer::Failed(body)
        } else {
            Answer::Done {
                status,
                body: body.to_owned(),
            }
        };
        Some((id, answer))
    }

    fn durable(&mut self, body: Bytes) {
        self.durable_batches += 1;
        if let Ok(text) = std::str::from_utf8(&body) {
            if !self.durable_bodies.contains(&body) {
                self.durable_text.push_str(text);
                self.durable_bodies.insert(body);
            }
        }
    }

    /// Whether a durable body contains `marker`.
    pub(super) fn holds(&self, marker: &str) -> bool {
        self.durable_text.contains(marker)
    }
}
