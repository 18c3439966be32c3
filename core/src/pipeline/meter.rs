//! The pipeline's meter: counts what crosses the boundary to Feldera, for the metrics.
//!
//! It watches commands as the shell takes them and inputs as they arrive (the pipeline
//! hands it both), so no phase has to count for it: ingress requests and their rows once
//! Feldera accepts them (by the phase that sent them), and for each accepted token the wait
//! until Feldera says it is complete. It decides nothing; what it holds is bounded.

use crate::feldera::{
    classify_completion, classify_ingress, CompletionOutcome, IngressOutcome, Reply,
};
use crate::health::Counts;
use crate::io::{Command, HttpId, Input};
use crate::time::Mono;
use std::collections::BTreeMap;

/// How many requests and tokens the meter follows at once; past that the oldest are
/// forgotten (a wait that is forgotten is simply not measured).
const FOLLOWED: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct Meter {
    counts: Counts,
    /// Ingress requests waiting for an answer: rows, and whether the snapshot sent them.
    ingress: BTreeMap<HttpId, (u64, bool)>,
    /// Completion polls waiting for an answer: the token asked about.
    polls: BTreeMap<HttpId, String>,
    /// Accepted tokens not yet complete: when they were accepted.
    accepted: BTreeMap<String, Mono>,
}

fn bounded<K: Ord + Clone, V>(map: &mut BTreeMap<K, V>) {
    while map.len() > FOLLOWED {
        let Some(first) = map.keys().next().cloned() else {
            return;
        };
        map.remove(&first);
    }
}

impl Meter {
    pub(crate) fn counts(&self) -> &Counts {
        &self.counts
    }

    /// A command the shell is about to execute; `snapshot`: the initial copy sent it.
    pub(crate) fn on_command(&mut self, command: &Command, snapshot: bool) {
        let Command::Http { id, request } = command else {
            return;
        };
        if request.url.contains("/ingress/") {
            // One NDJSON line per row, each ended by a newline (slotline writes no empty
            // line); found by SIMD search: bodies are MBs.
            let body = &request.body[..];
            let newlines = memchr::memchr_iter(b'\n', body).count();
            let unterminated = !body.is_empty() && !body.ends_with(b"\n");
            let rows = (newlines + usize::from(unterminated)) as u64;
            self.ingress.insert(*id, (rows, snapshot));
            bounded(&mut self.ingress);
        } else if let Some(token) = request.url.split("completion_status?token=").nth(1) {
            let token = token.split('&').next().unwrap_or("");
            let token = percent_encoding::percent_decode_str(token)
                .decode_utf8_lossy()
                .into_owned();
            self.polls.insert(*id, token);
            bounded(&mut self.polls);
        }
    }

    /// An input that arrived at `now`.
    pub(crate) fn on_input(&mut self, input: &Input, now: Mono) {
        let (id, reply) = match input {
            Input::HttpDone { id, status, body } => (
                *id,
                Reply::Answered {
                    status: *status,
                    body,
                },
            ),
            Input::HttpFailed { id, error } => (*id, Reply::Failed { error }),
            _ => return,
        };
        if let Some((rows, snapshot)) = self.ingress.remove(&id) {
            if let IngressOutcome::Accepted { token } = classify_ingress(reply) {
                self.counts.rows_sent += rows;
                self.counts.ingress_requests += 1;
                if snapshot {
                    self.counts.snapshot_rows_sent += rows;
                }
                self.accepted.insert(token, now);
                bounded(&mut self.accepted);
            }
        } else if let Some(token) = self.polls.remove(&id) {
            if let CompletionOutcome::Complete { .. } = classify_completion(reply) {
                if let Some(at) = self.accepted.remove(&token) {
                    self.counts.completion_wait.observe(now.since(at));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feldera::FelderaEndpoint;
    use bytes::Bytes;

    fn endpoint() -> FelderaEndpoint {
        FelderaEndpoint::new("http://feldera:8080", "p", None).unwrap()
    }

    fn done(id: u64, body: &str) -> Input {
        Input::HttpDone {
            id: HttpId(id),
            status: 200,
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn accepted_rows_are_counted_and_each_tokens_wait_is_observed() {
        let mut meter = Meter::default();
        let table = crate::schema::Name::unquoted("t");
        let ingress = endpoint().ingress(
            &table,
            Bytes::from_static(b"{\"insert\":{}}\n{\"insert\":{}}\n"),
            1000,
        );
        meter.on_command(
            &Command::Http {
                id: HttpId(1),
                request: ingress.clone(),
            },
            false,
        );
        meter.on_input(&done(1, r#"{"token":"a/b+c"}"#), Mono(1_000));
        // A refused request counts nothing.
        meter.on_command(
            &Command::Http {
                id: HttpId(2),
                request: ingress,
            },
            true,
        );
        meter.on_input(
            &Input::HttpDone {
                id: HttpId(2),
                status: 400,
                body: Bytes::from_static(b"{}"),
            },
            Mono(2_000),
        );
        let poll = endpoint().completion_status("a/b+c", 1000);
        meter.on_command(
            &Command::Http {
                id: HttpId(3),
                request: poll.clone(),
            },
            false,
        );
        meter.on_input(
            &done(3, r#"{"status":"inprogress","step":null}"#),
            Mono(20_000),
        );
        meter.on_command(
            &Command::Http {
                id: HttpId(4),
                request: poll,
            },
            false,
        );
        meter.on_input(&done(4, r#"{"status":"complete","step":3}"#), Mono(301_000));
        let counts = meter.counts();
        assert_eq!(
            (
                counts.rows_sent,
                counts.ingress_requests,
                counts.snapshot_rows_sent
            ),
            (2, 1, 0)
        );
        assert_eq!(counts.completion_wait.count, 1);
        assert_eq!(counts.completion_wait.sum_us, 300_000);
        let cumulative = counts.completion_wait.cumulative();
        assert_eq!(cumulative[6], (0.1, 0));
        assert_eq!(cumulative[7], (0.25, 0));
        assert_eq!(cumulative[8], (0.5, 1));
    }

    #[test]
    fn the_snapshots_rows_are_counted_apart_too() {
        let mut meter = Meter::default();
        let table = crate::schema::Name::unquoted("t");
        let ingress = endpoint().ingress(&table, Bytes::from_static(b"{\"insert\":{}}\n"), 1000);
        meter.on_command(
            &Command::Http {
                id: HttpId(9),
                request: ingress,
            },
            true,
        );
        meter.on_input(&done(9, r#"{"token":"t"}"#), Mono(0));
        assert_eq!(meter.counts().snapshot_rows_sent, 1);
        assert_eq!(meter.counts().rows_sent, 1);
    }

    #[test]
    fn what_the_meter_follows_is_bounded() {
        let mut meter = Meter::default();
        let poll = endpoint().completion_status("x", 1000);
        for id in 0..(FOLLOWED as u64 + 10) {
            meter.on_command(
                &Command::Http {
                    id: HttpId(id),
                    request: poll.clone(),
                },
                false,
            );
        }
        assert_eq!(meter.polls.len(), FOLLOWED);
    }
}
