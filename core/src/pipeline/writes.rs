//! The ingress requests still out, across sessions: which table each writes to and which
//! session sent it.
//!
//! Feldera queues a request's records as its body arrives, so a request keeps writing for
//! as long as it uploads, whether or not its sender still waits for it. Ending a session
//! forgets its batches but cannot stop its requests: the shell runs each to its end (an
//! answer, a failure, or its timeout, after which its connection is closed) and reports that
//! end like any other. Once the pipeline itself answered, nothing more of it arrives; an end
//! without that answer is the lingering case below. Until then a later session must not
//! write to the same table: its replay could arrive before the old request's last records,
//! which would then overwrite newer values (or undo a delete) for good. So a sink's lane
//! posts only when no request of an earlier session to its table is still out
//! ([`Writes::blocks`]), and the pipeline lets the sinks post again when such a request
//! ends. The wait is bounded by the old request's timeout (`sink::INGRESS_TIMEOUT_MS`),
//! which the shell enforces.
//!
//! Reading a table has the same hazard: a retraction that reads a table's keys (or counts
//! its rows) while such a request still uploads would miss the rows that land afterwards,
//! delete too little, and acknowledge a TRUNCATE whose table is not empty. So a query of a
//! table's data waits the same way ([`Queue::push_table_query`]): it is parked here and sent
//! when the last such request to its table ends.
//!
//! Feldera's transaction requests have the same hazard, pipeline-wide: a `commit_transaction`
//! of an ended session that Feldera handles late would commit the transaction the next
//! session adopted, half of its source transaction visible at once; a late
//! `start_transaction` would open one nobody commits. So those requests are in the ledger
//! too ([`Queue::push_txn_control`]), and a session starts or settles no transaction while one
//! of an earlier session is still out ([`Writes::control_blocks`]); each ends within its own
//! timeout.
//!
//! A request's end is not always the end of its records. Feldera's endpoint reads a body
//! only while the pipeline runs: a request that arrives while it is paused waits unread, and
//! when the manager gives up on it (503 after its 30 s proxy timeout), or slotline does (a
//! timeout, a broken connection), the pipeline still holds what was sent and applies it at
//! the resume, however late (`transport/http/input.rs`, `complete_request`; measured on
//! Feldera's own server, docs/feldera.md, "Against Feldera's own server"). So a request that
//! ended without the pipeline's own answer (no answer, or a 5xx) leaves its table
//! *lingering*, whichever session sent it: nothing more is written to or read from that table
//! until `GET /stats` shows the pipeline `Running`, asked after that request ended, and then
//! [`LINGER_SETTLE_MS`] more (the resumed endpoint reads what it holds at once). A restarted
//! pipeline answers `Running` too: the old process's connections died with it.
//!
//! Owns: the ledger, the parked queries and the lingering tables with their probe. Never
//! decides what a request means for a batch (see `sink`).

use super::queue::Queue;
use crate::feldera::{FelderaEndpoint, HttpRequest, Reply};
use crate::io::{Command, HttpId, Level, Topic};
use crate::time::Mono;
use std::collections::BTreeMap;

/// After `Running` is seen, how long a lingering table still waits: the resumed endpoint
/// reads the bytes it holds and queues their records at once; this covers the scheduling.
pub(crate) const LINGER_SETTLE_MS: u64 = 1_000;
/// How often `/stats` is asked while the pipeline does not run (or does not answer).
pub(crate) const LINGER_PROBE_MS: u64 = 500;
/// Timeout of one `/stats` probe.
const LINGER_PROBE_TIMEOUT_MS: u64 = 10_000;

/// The probe that frees lingering tables.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Nothing asked; ask at `at` (`None`: at once).
    #[default]
    Idle,
    Waiting(Mono),
    /// `/stats` asked; it covers the tables that began lingering before `generation`.
    Asked {
        id: HttpId,
        generation: u64,
    },
    /// `Running` seen: the tables that began lingering before `generation` go at `until`.
    Settling {
        until: Mono,
        generation: u64,
    },
}

/// One ingress request out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Write {
    /// The table's URL segment (`Name::url_segment`), which identifies its endpoint.
    pub(crate) segment: String,
    pub(crate) session: u32,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    session: u32,
    out: BTreeMap<HttpId, Write>,
    /// Tables whose wait was already logged in this session.
    noted: Vec<String>,
    /// Queries of this session waiting for a table's earlier requests to end.
    parked: Vec<(String, HttpId, HttpRequest)>,
    /// `start_transaction` and `commit_transaction` requests out, and their sessions.
    control: BTreeMap<HttpId, u32>,
    /// Whether this session already said that it waits for earlier transaction requests.
    control_noted: bool,
    /// Tables a request without the pipeline's answer may still write to, each with the
    /// generation at which it began lingering.
    lingering: BTreeMap<String, u64>,
    next_generation: u64,
    probe: Probe,
}

impl Writes {
    /// A new session starts: requests sent from now on are its own.
    pub(crate) fn start_session(&mut self, session: u32) {
        self.session = session;
        self.noted.clear();
        self.control_noted = false;
        // Parked queries of the ended session were never sent; nobody waits for them.
        self.parked.clear();
    }

    /// The queries parked for `segment`, once no earlier request to it is out.
    pub(crate) fn release(&mut self, segment: &str) -> Vec<(HttpId, HttpRequest)> {
        if self.blocks(segment) > 0 {
            return Vec::new();
        }
        let (go, stay) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|(s, _, _)| s == segment);
        self.parked = stay;
        go.into_iter()
            .map(|(_, id, request)| (id, request))
            .collect()
    }

    /// An ingress request to `segment` was handed to the shell.
    pub(crate) fn started(&mut self, id: HttpId, segment: &str) {
        self.out.insert(
            id,
            Write {
                segment: segment.to_owned(),
                session: self.session,
            },
        );
    }

    /// The request `id` ended (answered or failed): `Some` when it was an ingress request of
    /// an earlier session, which may free a table. `answered`: the pipeline itself answered
    /// (a status below 500); otherwise its body may still be applied later and its table
    /// lingers (see the module docs): the second value names it when it began to.
    pub(crate) fn ended(&mut self, id: HttpId, answered: bool) -> (Option<Write>, Option<String>) {
        let Some(write) = self.out.remove(&id) else {
            return (None, None);
        };
        let lingered = (!answered && !self.lingering.contains_key(&write.segment))
            .then(|| write.segment.clone());
        if !answered {
            self.lingering
                .insert(write.segment.clone(), self.next_generation);
            self.next_generation += 1;
        }
        ((write.session < self.session).then_some(write), lingered)
    }

    /// Whether a request without the pipeline's answer may still write to `segment`.
    pub(crate) fn lingers(&self, segment: &str) -> bool {
        self.lingering.contains_key(segment)
    }

    /// When the probe wants the core back (`TimerKind::Lingering`).
    pub(crate) fn linger_deadline(&self) -> Option<Mono> {
        if self.lingering.is_empty() {
            return None;
        }
        match self.probe {
            Probe::Idle => Some(Mono(0)),
            Probe::Waiting(at) => Some(at),
            Probe::Settling { until, .. } => Some(until),
            Probe::Asked { .. } => None,
        }
    }

    /// Whether `id` is the probe's `/stats` request.
    pub(crate) fn probe_owns(&self, id: HttpId) -> bool {
        matches!(self.probe, Probe::Asked { id: asked, .. } if asked == id)
    }

    /// The request `id` ended: true when it was a transaction request of an earlier session
    /// (its end may let this session start or settle a transaction). A request of this
    /// session is forgotten and false returned: its owner handles the answer.
    pub(crate) fn control_ended(&mut self, id: HttpId) -> bool {
        self.control
            .remove(&id)
            .is_some_and(|session| session < self.session)
    }

    /// How many transaction requests of earlier sessions are still out: while any is, this
    /// session must not start or settle a Feldera transaction.
    pub(crate) fn control_blocks(&self) -> usize {
        self.control
            .values()
            .filter(|&&session| session < self.session)
            .count()
    }

    /// Whether this session has not yet said that it waits for earlier transaction requests
    /// (true once).
    pub(crate) fn first_control_wait(&mut self) -> bool {
        !std::mem::replace(&mut self.control_noted, true)
    }

    /// A request that was never sent after all (it waited behind `settle`'s gate when its
    /// session ended).
    pub(crate) fn forget(&mut self, id: HttpId) {
        self.out.remove(&id);
    }

    /// How many requests of earlier sessions to `segment` are still out, plus one while it
    /// lingers: while any is, the current session must not write to that table.
    pub(crate) fn blocks(&self, segment: &str) -> usize {
        self.out
            .values()
            .filter(|w| w.segment == segment && w.session < self.session)
            .count()
            + usize::from(self.lingers(segment))
    }

    /// Why a write to or read of `segment` waits (when `blocks` says it does), for the
    /// session's one line about it; `action` is what waits ("writing to it again").
    pub(crate) fn wait_reason(&self, segment: &str, action: &str) -> String {
        let earlier = self.blocks(segment) - usize::from(self.lingers(segment));
        let mut why = Vec::new();
        if earlier > 0 {
            why.push(format!(
                "{earlier} ingress request(s) of an ended session end (Feldera queues a request's records as they arrive; \
                 each ends within its {} s timeout)",
                super::sink::INGRESS_TIMEOUT_MS / 1000
            ));
        }
        if self.lingers(segment) {
            why.push(
                "Feldera is seen running (a request that ended without its answer may still write to it)".to_owned(),
            );
        }
        format!(
            "{segment}: waiting until {} before {action}",
            why.join(" and ")
        )
    }

    /// Whether this session has not yet said that it waits for `segment` (true once).
    pub(crate) fn first_wait(&mut self, segment: &str) -> bool {
        if self.noted.iter().any(|s| s == segment) {
            return false;
        }
        self.noted.push(segment.to_owned());
        true
    }
}

impl Queue {
    /// Sends a query of the data of the table at `segment`, or parks it while an ingress
    /// request of an earlier session to that table is still out (see the module docs).
    pub(crate) fn push_table_query(
        &mut self,
        endpoint: &FelderaEndpoint,
        id: HttpId,
        request: HttpRequest,
        segment: &str,
    ) {
        if self.writes.blocks(segment) == 0 {
            return self.push_table_request(endpoint, id, request);
        }
        if self.writes.first_wait(segment) {
            let line = self.writes.wait_reason(segment, "reading it");
            self.note(Level::Info, Topic::Batch, line);
        }
        self.writes.parked.push((segment.to_owned(), id, request));
    }

    /// Sends a `start_transaction` or `commit_transaction` and keeps it in the ledger until
    /// it ends (see the module docs).
    pub(crate) fn push_txn_control(&mut self, id: HttpId, request: HttpRequest) {
        self.writes.control.insert(id, self.writes.session);
        self.push(Command::Http { id, request });
    }

    /// Whether this session may start or settle a Feldera transaction now: false (and said
    /// once per session) while a transaction request of an earlier session is still out.
    pub(crate) fn may_start_transaction(&mut self) -> bool {
        let earlier = self.writes.control_blocks();
        if earlier == 0 {
            return true;
        }
        if self.writes.first_control_wait() {
            self.note(
                Level::Info,
                Topic::Batch,
                format!(
                    "waiting until {earlier} Feldera transaction request(s) of an ended session end before starting or settling a transaction \
                     (a late commit would commit this session's; each ends within its timeout)"
                ),
            );
        }
        false
    }

    /// Stops a streamed answer (`Command::HttpCancel`), or, when its request was never
    /// sent (parked here, or waiting behind the transaction gate), forgets the request.
    pub(crate) fn cancel_http(&mut self, id: HttpId) {
        let parked = self.writes.parked.len();
        self.writes.parked.retain(|(_, waiting, _)| *waiting != id);
        if self.writes.parked.len() != parked || self.unwait(id) {
            return;
        }
        self.push(Command::HttpCancel { id });
    }

    /// The last earlier request to `segment` ended: its parked queries go out.
    pub(crate) fn release_queries(&mut self, endpoint: &FelderaEndpoint, segment: &str) {
        for (id, request) in self.writes.release(segment) {
            self.push_table_request(endpoint, id, request);
        }
    }

    /// An ingress request to `segment` ended without the pipeline's answer (`how`): said
    /// once per table while it lingers.
    pub(crate) fn note_lingering(&mut self, segment: &str, how: &str) {
        self.note(
            Level::Info,
            Topic::Batch,
            format!(
                "{segment}: an ingress request ended without Feldera's answer ({how}); the pipeline may still apply its body when it next runs \
                 (a paused pipeline reads it at the resume), so nothing more goes to that table until Feldera is seen running"
            ),
        );
    }

    /// The probe's timer: asks `/stats` when due, or frees the tables whose settling is
    /// over. Returns the tables freed.
    pub(crate) fn on_linger_timer(&mut self, endpoint: &FelderaEndpoint) -> Vec<String> {
        let now = self.now.mono;
        match self.writes.probe {
            _ if self.writes.lingering.is_empty() => {
                self.writes.probe = Probe::Idle;
                Vec::new()
            }
            Probe::Idle => self.ask_stats(endpoint),
            Probe::Waiting(at) if now >= at => self.ask_stats(endpoint),
            Probe::Settling { until, generation } if now >= until => {
                self.writes.probe = Probe::Idle;
                let freed: Vec<String> = self
                    .writes
                    .lingering
                    .iter()
                    .filter(|(_, g)| **g < generation)
                    .map(|(segment, _)| segment.clone())
                    .collect();
                for segment in &freed {
                    self.writes.lingering.remove(segment);
                    self.note(
                        Level::Info,
                        Topic::Batch,
                        format!("{segment}: Feldera runs and has read what it held; writing to it again"),
                    );
                }
                freed
            }
            Probe::Waiting(_) | Probe::Asked { .. } | Probe::Settling { .. } => Vec::new(),
        }
    }

    fn ask_stats(&mut self, endpoint: &FelderaEndpoint) -> Vec<String> {
        let id = self.http(endpoint.stats(LINGER_PROBE_TIMEOUT_MS));
        self.writes.probe = Probe::Asked {
            id,
            generation: self.writes.next_generation,
        };
        Vec::new()
    }

    /// The probe's `/stats` answer: `Running` starts the settling; anything else (paused,
    /// no answer) asks again a little later.
    pub(crate) fn on_linger_reply(&mut self, reply: Reply<'_>) {
        let Probe::Asked { generation, .. } = self.writes.probe else {
            return;
        };
        let now = self.now.mono;
        let state = crate::feldera::pipeline_state(reply);
        self.writes.probe = if state.as_deref() == Some("Running") {
            Probe::Settling {
                until: now.plus_ms(LINGER_SETTLE_MS),
                generation,
            }
        } else {
            Probe::Waiting(now.plus_ms(LINGER_PROBE_MS))
        };
        if state.as_deref() != Some("Running") {
            self.note(
                Level::Debug,
                Topic::Batch,
                format!(
                    "Feldera's pipeline state is {}; tables with a lingering request keep waiting",
                    state
                        .as_deref()
                        .unwrap_or("unknown (no usable /stats answer)")
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_of_earlier_sessions_block_a_table_until_they_end() {
        let mut writes = Writes::default();
        writes.start_session(1);
        writes.started(HttpId(1), "users");
        writes.started(HttpId(2), "items");
        assert_eq!(
            writes.blocks("users"),
            0,
            "a session's own requests never block it"
        );
        writes.start_session(2);
        assert_eq!((writes.blocks("users"), writes.blocks("items")), (1, 1));
        writes.started(HttpId(3), "users");
        assert_eq!(
            writes.ended(HttpId(3), true),
            (None, None),
            "the current session's own"
        );
        assert_eq!(
            writes.ended(HttpId(1), true).0.map(|w| w.segment),
            Some("users".to_owned())
        );
        assert_eq!(writes.blocks("users"), 0);
        assert_eq!(writes.blocks("items"), 1);
        assert_eq!(writes.ended(HttpId(1), true), (None, None), "ends once");
    }

    #[test]
    fn a_request_without_the_pipeline_s_answer_leaves_its_table_lingering_in_any_session() {
        let mut writes = Writes::default();
        writes.start_session(1);
        writes.started(HttpId(1), "users");
        writes.started(HttpId(2), "items");
        writes.started(HttpId(3), "orders");
        assert_eq!(writes.linger_deadline(), None);
        // The current session's own request, given up by the manager (503) or the shell.
        assert_eq!(
            writes.ended(HttpId(1), false),
            (None, Some("users".to_owned()))
        );
        assert_eq!(writes.blocks("users"), 1, "blocks its own session too");
        assert_eq!(
            writes.ended(HttpId(2), true),
            (None, None),
            "answered: gone"
        );
        assert_eq!(writes.blocks("items"), 0);
        writes.start_session(2);
        assert_eq!(writes.blocks("users"), 1, "and every later one");
        let (earlier, lingered) = writes.ended(HttpId(3), false);
        assert_eq!(earlier.map(|w| w.segment), Some("orders".to_owned()));
        assert_eq!(lingered, Some("orders".to_owned()));
        assert_eq!(writes.blocks("orders"), 1);
        assert_eq!(
            writes.linger_deadline(),
            Some(Mono(0)),
            "the probe asks at once"
        );
    }

    #[test]
    fn transaction_requests_of_earlier_sessions_block_until_they_end() {
        let mut writes = Writes::default();
        writes.start_session(1);
        writes.control.insert(HttpId(1), 1);
        writes.control.insert(HttpId(2), 1);
        assert_eq!(writes.control_blocks(), 0, "a session's own never block it");
        assert!(!writes.control_ended(HttpId(2)), "its owner handles it");
        writes.start_session(2);
        assert_eq!(writes.control_blocks(), 1);
        assert!(writes.first_control_wait() && !writes.first_control_wait());
        writes.control.insert(HttpId(3), 2);
        assert!(!writes.control_ended(HttpId(3)));
        assert_eq!(writes.control_blocks(), 1);
        assert!(writes.control_ended(HttpId(1)));
        assert_eq!(writes.control_blocks(), 0);
        assert!(!writes.control_ended(HttpId(1)), "ends once");
    }

    #[test]
    fn a_wait_is_noted_once_per_table_and_session() {
        let mut writes = Writes::default();
        writes.start_session(2);
        assert!(writes.first_wait("users"));
        assert!(!writes.first_wait("users"));
        writes.start_session(3);
        assert!(writes.first_wait("users"));
    }
}
