//! The fake Feldera's answers: what a request gets when the script says so, and the
//! tables, tokens, transactions and checkpoints behind them.

use super::script::Script;
use crate::feldera::HttpRequest;
use crate::io::{HttpId, Input};
use bytes::Bytes;
use serde_json::Value;
use std::collections::VecDeque;

impl Script {
    pub(super) fn on_http(&mut self, request_id: HttpId, request: HttpRequest) {
        let id = request_id;
        let at = self.at();
        if let Some(error) = self.feldera_down.clone() {
            let shown = self.shown(id);
            self.note(format!(
                "{at} -> {shown} {} {}",
                request.method, request.url
            ));
            self.note(format!("{at} <- {shown} failed: {error}"));
            self.replies.push_back(Input::HttpFailed { id, error });
            return;
        }
        let path = request
            .url
            .trim_start_matches("http://feldera:8080/v0/pipelines/p");
        if let Some(names) = &self.pipelines_instead {
            let listing = request.url.starts_with("http://feldera:8080/v0/pipelines?");
            let (what, status, body) = if listing {
                let list: Vec<String> = names
                    .iter()
                    .map(|n| format!(r#"{{"name":"{n}","deployment_status":"Running"}}"#))
                    .collect();
                let path = request.url.trim_start_matches("http://feldera:8080");
                (path.to_owned(), 200, format!("[{}]", list.join(",")))
            } else if path.is_empty() || path == "/stats" {
                let body = r#"{"message":"Unknown pipeline name 'p'","error_code":"UnknownPipelineName","details":{"pipeline_name":"p"}}"#;
                let what = if path.is_empty() { "pipeline" } else { "stats" };
                (what.to_owned(), 404, body.to_owned())
            } else {
                panic!("no pipeline p to ask {}", request.url);
            };
            let shown = self.shown(id);
            self.note(format!("{at} -> {shown} GET {what}"));
            self.note(format!("{at} <- {shown} {status}"));
            self.replies.push_back(Input::HttpDone {
                id,
                status,
                body: Bytes::from(body),
            });
            return;
        }
        if path == "/stats" {
            let body = self.stats_body();
            if !self.watch_visible {
                self.unseen_ids.insert(id);
            } else {
                let shown = self.shown(id);
                self.note(format!("{at} -> {shown} GET stats"));
                let incarnation = self.incarnation;
                let state = &self.pipeline_state;
                self.note(format!(
                    "{at} <- {shown} 200 {state} incarnation-{incarnation}"
                ));
            }
            self.replies.push_back(Input::HttpDone {
                id,
                status: 200,
                body: Bytes::from(body),
            });
            return;
        }
        let id_shown = self.shown(id);
        let id = &id_shown;
        if path.is_empty() {
            self.note(format!("{at} -> {id} GET pipeline"));
            let body = Bytes::from(self.pipeline_body());
            self.replies.push_back(Input::HttpDone {
                id: request_id,
                status: 200,
                body,
            });
            return;
        }
        let line = if let Some(rest) = path.strip_prefix("/ingress/") {
            let table = rest.split('?').next().unwrap_or("");
            let rows = request.body.iter().filter(|b| **b == b'\n').count();
            format!("{at} -> {id} POST ingress {table} rows={rows}")
        } else if let Some(rest) = path.strip_prefix("/completion_status?token=") {
            format!(
                "{at} -> {id} GET completion_status {}",
                self.token_name(rest)
            )
        } else if path.starts_with("/query?sql=") {
            format!("{at} -> {id} GET query {}", query_sql(&request.url))
        } else {
            format!("{at} -> {id} {} {path}", request.method)
        };
        self.note(line);
        self.http.push_back((request_id, request));
    }

    /// The bodies of the requests waiting for an answer, oldest first (ingress bodies are
    /// the NDJSON events).
    pub fn pending_bodies(&self) -> Vec<String> {
        self.http
            .iter()
            .map(|(_, r)| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }

    /// Delivers replication bytes `chunk` bytes at a time (0: each message batch at once).
    pub fn set_chunking(&mut self, chunk: usize) {
        self.chunk = chunk;
    }

    /// Cuts streamed answers into pieces of `bytes` bytes (0: each answer in one piece),
    /// boundaries falling anywhere, inside a line too.
    pub fn set_pieces(&mut self, bytes: usize) {
        self.piece = bytes;
    }

    /// A streamed answer fails with `error` (as a transport failure: a timeout, a reset)
    /// when the pipeline reads on after `after` pieces.
    pub fn fail_streams_after(&mut self, after: usize, error: &str) {
        self.stream_failure = Some((after, error.to_owned()));
    }

    /// The NDJSON lines Feldera has completed so far (in completion order).
    pub fn completed_lines(&self) -> Vec<String> {
        self.completed_bodies
            .iter()
            .flat_map(|b| b.lines().map(str::to_owned))
            .collect()
    }

    /// Answers the oldest waiting request with `status` and `body`.
    pub fn answer(&mut self, status: u16, body: &str) {
        let (id, request) = self
            .http
            .pop_front()
            .expect("a request waits for an answer");
        self.track_durability(&request, status, body);
        let body_shown = match body
            .split('"')
            .nth(3)
            .filter(|_| body.starts_with("{\"token\""))
        {
            Some(token) => body.replacen(token, self.token_name(token), 1),
            None => body.to_owned(),
        };
        let lines: Vec<&str> = body_shown.trim_end().lines().collect();
        let shown = match lines.as_slice() {
            [first, .., last] if lines.len() > 4 => {
                format!("{} lines: {first} | ... | {last}", lines.len())
            }
            _ => lines.join(" | "),
        };
        let id_shown = self.shown(id);
        if request.streamed && (200..300).contains(&status) && !body.is_empty() {
            // Streamed: the first piece now, each next one when the pipeline reads on.
            let bytes = body.as_bytes();
            let size = if self.piece == 0 {
                bytes.len()
            } else {
                self.piece
            };
            let mut pieces: VecDeque<Bytes> =
                bytes.chunks(size).map(Bytes::copy_from_slice).collect();
            let first = pieces.pop_front().unwrap_or_default();
            self.note(format!(
                "{} <- {id_shown} {status} streamed, {} piece(s): {shown}",
                self.at(),
                pieces.len() + 1
            ));
            self.streams.insert(id, pieces);
            self.pieces_delivered.insert(id, 1);
            self.feed(Input::HttpChunk { id, bytes: first });
            return;
        }
        self.note(format!("{} <- {id_shown} {status} {shown}", self.at()));
        self.feed(Input::HttpDone {
            id,
            status,
            body: Bytes::from(body.to_owned()),
        });
    }

    fn track_durability(&mut self, request: &HttpRequest, status: u16, body: &str) {
        if status != 200 {
            return;
        }
        if let Some(rest) = request.url.split("/ingress/").nth(1) {
            let table = rest.split('?').next().unwrap_or("").to_owned();
            if let Some(token) = body.split('"').nth(3) {
                let text = String::from_utf8_lossy(&request.body).into_owned();
                let order = self.bodies_by_token.len() as u32 + self.completed_bodies.len() as u32;
                self.bodies_by_token
                    .insert(token.to_owned(), (order, table, text));
            }
        } else if body.contains("\"complete\"") {
            // On one table a token complete means every earlier one is, as in Feldera.
            let Some(token) = request.url.split("token=").nth(1) else {
                return;
            };
            let Some((order, table, _)) = self.bodies_by_token.get(token).cloned() else {
                return;
            };
            let mut covered: Vec<(u32, String)> = self
                .bodies_by_token
                .iter()
                .filter(|(_, (o, t, _))| *t == table && *o <= order)
                .map(|(k, (o, _, _))| (*o, k.clone()))
                .collect();
            covered.sort();
            for (_, key) in covered {
                if let Some((_, table, text)) = self.bodies_by_token.remove(&key) {
                    self.feldera.apply(&table, &text);
                    self.completed_bodies.push(text);
                }
            }
        }
    }

    /// The oldest waiting request fails without an answer.
    pub fn fail(&mut self, error: &str) {
        let (id, _) = self
            .http
            .pop_front()
            .expect("a request waits for an answer");
        let id_shown = self.shown(id);
        self.note(format!("{} <- {id_shown} failed: {error}", self.at()));
        self.feed(Input::HttpFailed {
            id,
            error: error.to_owned(),
        });
    }

    /// Ingress answers 200 with a fresh token, encoded as Feldera encodes its own (this
    /// incarnation, the table's endpoint, the count); traces show it as `t<count>`.
    pub fn accept(&mut self) {
        use base64::Engine as _;
        self.tokens += 1;
        let table = self
            .http
            .front()
            .and_then(|(_, r)| r.url.split("/ingress/").nth(1))
            .map(|rest| rest.split('?').next().unwrap_or("").to_owned())
            .unwrap_or_default();
        let endpoint = match self.endpoints.iter().position(|t| *t == table) {
            Some(endpoint) => endpoint,
            None => {
                self.endpoints.push(table);
                self.endpoints.len() - 1
            }
        };
        let origin = format!(
            "{{\"u\":\"incarnation-{}\",\"e\":{endpoint},\"c\":{}}}",
            self.incarnation, self.tokens
        );
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(origin);
        self.token_names
            .insert(token.clone(), format!("t{}", self.tokens));
        if self.transaction_open {
            self.tokens_in_transaction.insert(token.clone());
        }
        self.answer(200, &format!("{{\"token\":\"{token}\"}}"));
    }

    /// The name traces show for `token`.
    fn token_name<'a>(&'a self, token: &'a str) -> &'a str {
        self.token_names.get(token).map_or(token, String::as_str)
    }

    /// Whether `token` was issued by an earlier incarnation of Feldera.
    fn token_is_stale(&self, token: &str) -> bool {
        crate::feldera::token::token_origin(token)
            .is_some_and(|o| o.incarnation != format!("incarnation-{}", self.incarnation))
    }

    /// Feldera restarts without fault tolerance: its tables come back empty, what it had
    /// accepted and not completed is lost, its endpoints are numbered afresh, and tokens of
    /// the earlier incarnation answer 410 from now on (`step`).
    pub fn restart_feldera(&mut self) {
        self.new_incarnation("empty");
    }

    /// The pipeline is deleted and created again under its name: another `id`, and a new
    /// process with empty tables whatever its fault tolerance.
    pub fn recreate_feldera_pipeline(&mut self) {
        self.pipeline_generation += 1;
        self.new_incarnation("as a new pipeline of the same name, empty");
    }

    fn new_incarnation(&mut self, how: &str) {
        self.incarnation += 1;
        if self.line_began.is_some() {
            self.line_began = Some(self.incarnation);
        }
        self.note(format!(
            "{} -- Feldera restarts {how} (incarnation {})",
            self.at(),
            self.incarnation
        ));
        self.endpoints.clear();
        self.bodies_by_token.clear();
        self.transaction_open = false;
        self.tokens_in_transaction.clear();
        self.feldera.empty_all();
    }

    /// Feldera restarts with fault tolerance: like `restart_feldera`, but its tables come
    /// back as the last successful checkpoint held them (empty without one).
    pub fn restart_feldera_from_checkpoint(&mut self) {
        let saved = self
            .checkpoint_succeeded
            .and_then(|n| self.checkpoints.get(n as usize - 1).cloned());
        let how = match self.checkpoint_succeeded {
            Some(n) => format!("from checkpoint #{n}"),
            None => "empty (no checkpoint succeeded)".to_owned(),
        };
        let line = self.line_began;
        self.new_incarnation(&how);
        if let Some(tables) = saved {
            self.feldera = tables;
            self.line_began = line;
        }
        self.checkpoints.clear();
        self.checkpoint_succeeded = None;
    }

    pub fn complete(&mut self) {
        self.answer(200, r#"{"status":"complete","step":1}"#);
    }

    pub fn in_progress(&mut self) {
        self.answer(200, r#"{"status":"inprogress","step":null}"#);
    }

    /// Completion: in progress, but the token's records are in the circuit (a step is
    /// known), as inside a Feldera transaction before its commit finished.
    pub fn in_circuit(&mut self) {
        self.answer(200, r#"{"status":"inprogress","step":3}"#);
    }

    /// Moves the `index`-th waiting request (oldest first) to the front: the next answer
    /// goes to it.
    pub fn bring_forward(&mut self, index: usize) {
        let request = self
            .http
            .remove(index)
            .expect("that many requests wait for an answer");
        self.http.push_front(request);
    }

    /// One line per waiting request, oldest first: its id, method and path.
    pub fn waiting(&self) -> Vec<String> {
        self.http
            .iter()
            .map(|(id, r)| {
                let path = r
                    .url
                    .trim_start_matches("http://feldera:8080/v0/pipelines/p")
                    .split('?')
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let token = r
                    .url
                    .split("token=")
                    .nth(1)
                    .map(|t| format!(" {}", self.token_name(t)))
                    .unwrap_or_default();
                format!("{} {} {path}{token}", self.shown(*id), r.method)
            })
            .collect()
    }

    /// Accepts and completes every waiting request until none waits (or the pipeline
    /// exited: nobody answers it then).
    pub fn settle(&mut self) {
        while self.exit.is_none() && self.step() {}
    }

    /// Answers the oldest waiting request as Feldera would (ingress accepted, completion
    /// complete, queries from the table model); false when none waits.
    pub fn step(&mut self) -> bool {
        let Some((_, request)) = self.http.front() else {
            return false;
        };
        if request.url.contains("/ingress/") {
            self.accept();
        } else if request.url.ends_with("/start_transaction") {
            if self.transaction_open {
                self.answer(
                    409,
                    r#"{"message":"Cannot perform this operation while there is a transaction in progress","error_code":"TransactionInProgress","details":null}"#,
                );
            } else {
                self.transaction_open = true;
                self.answer(200, r#"{"transaction_id":1}"#);
            }
        } else if request.url.ends_with("/commit_transaction") {
            if self.transaction_open {
                self.transaction_open = false;
                self.tokens_in_transaction.clear();
                self.answer(200, r#""Transaction commit initiated""#);
            } else {
                self.answer(
                    400,
                    r#"{"message":"This operation requires an active transaction, but none is currently in progress","error_code":"NoTransactionInProgress","details":null}"#,
                );
            }
        } else if request.url.ends_with("/checkpoint") {
            // Feldera accepts the request either way; a pipeline that cannot checkpoint
            // reports it as the failure of that sequence number.
            self.checkpoints.push(self.feldera.clone());
            let body = format!(
                "{{\"checkpoint_sequence_number\":{},\"incarnation_uuid\":\"incarnation-{}\"}}",
                self.checkpoints.len(),
                self.incarnation
            );
            self.answer(200, &body);
        } else if request.url.contains("/checkpoint_status") {
            let current = format!("incarnation-{}", self.incarnation);
            let asked = request.url.split("incarnation_uuid=").nth(1);
            if asked.is_some_and(|u| u != current) {
                self.answer(
                    400,
                    r#"{"message":"the pipeline restarted since the checkpoint was requested","error_code":"IncarnationUuidMismatch","details":null}"#,
                );
            } else if self.fault_tolerance.is_none() {
                let body = format!(
                    "{{\"success\":null,\"failure\":{{\"sequence_number\":{},\"error\":\"The pipeline does not support checkpointing because storage is not configured\",\"failed_at\":\"2026-12-02T00:00:00Z\"}}}}",
                    self.checkpoints.len()
                );
                self.answer(200, &body);
            } else if self.transaction_open {
                // Feldera delays a checkpoint while a transaction is open: none requested
                // since the last success is taken before the commit.
                let success = self
                    .checkpoint_succeeded
                    .map_or_else(|| "null".to_owned(), |n| n.to_string());
                self.answer(200, &format!("{{\"success\":{success},\"failure\":null}}"));
            } else {
                // Every checkpoint requested so far succeeds now.
                let done = self.checkpoints.len() as u64;
                self.checkpoint_succeeded = (done > 0).then_some(done);
                let success = self
                    .checkpoint_succeeded
                    .map_or_else(|| "null".to_owned(), |n| n.to_string());
                self.answer(200, &format!("{{\"success\":{success},\"failure\":null}}"));
            }
        } else if request.url.contains("/query?") {
            let sql = query_sql(&request.url);
            let answer = self
                .feldera
                .query(&sql)
                .unwrap_or_else(|| panic!("the fake Feldera does not model {sql}"));
            self.answer(200, &answer);
        } else if request
            .url
            .split("token=")
            .nth(1)
            .is_some_and(|t| self.tokens_in_transaction.contains(t))
        {
            // Applied to the circuit, not complete before the commit.
            self.in_circuit();
        } else if request
            .url
            .split("token=")
            .nth(1)
            .is_some_and(|t| self.token_is_stale(t))
        {
            self.answer(
                410,
                r#"{"message":"the pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
            );
        } else {
            self.complete();
        }
        true
    }

    /// The SQL of the oldest waiting request, when it is an ad-hoc query.
    pub fn waiting_query(&self) -> Option<String> {
        self.http
            .front()
            .filter(|(_, r)| r.url.contains("/query?"))
            .map(|(_, r)| query_sql(&r.url))
    }

    /// The timeout the oldest waiting request was sent with (the shell enforces it).
    pub fn waiting_timeout_ms(&self) -> Option<u64> {
        self.http.front().map(|(_, r)| r.timeout_ms)
    }

    pub fn waiting_requests(&self) -> usize {
        self.http.len()
    }
}

/// The decoded `sql` parameter of a query URL.
fn query_sql(url: &str) -> String {
    let encoded = url
        .split("sql=")
        .nth(1)
        .and_then(|rest| rest.split('&').next())
        .unwrap_or("");
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8_lossy()
        .into_owned()
}

/// A fake Feldera with every keyed input table of `schema` (single-column keys).
pub(super) fn fake_feldera_for(schema: &str) -> super::fake_feldera::FakeFeldera {
    let mut feldera = super::fake_feldera::FakeFeldera::default();
    let Ok(Value::Object(schema)) = serde_json::from_str::<Value>(schema) else {
        return feldera;
    };
    for input in schema
        .get("inputs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = input.get("name").and_then(Value::as_str);
        let key = input
            .get("primary_key")
            .and_then(Value::as_array)
            .and_then(|k| k.first())
            .and_then(Value::as_str);
        if let (Some(name), Some(key)) = (name, key) {
            feldera.table(&name.to_lowercase(), &key.to_lowercase());
        }
    }
    feldera
}
