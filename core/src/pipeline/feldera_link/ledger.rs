//! The requests out to Feldera that outlive the session that sent them, and whom each
//! answer is for.
//!
//! Feldera queues a request's records as its body arrives, so a request keeps writing for
//! as long as it uploads, whether or not its sender still waits for it. Ending a session
//! forgets its batches but cannot stop its requests: the shell runs each to its end (an
//! answer, a failure, or its timeout, after which its connection is closed) and reports that
//! end like any other. Once the pipeline itself answered, nothing more of it arrives; an end
//! without that answer is the quarantine's case (`quarantine`). Until then a later session
//! must not write to the same table: its replay could arrive before the old request's last
//! records, which would then overwrite newer values (or undo a delete) for good. So a
//! sink's lane posts only when no request of an earlier session to its table is still out
//! ([`Ledger::blocks`]), and the pipeline lets the sinks post again when such a request
//! ends. The wait is bounded by the old request's timeout (`feldera::FORWARDED_TIMEOUT_MS`),
//! which the shell enforces.
//!
//! Reading a table has the same hazard: a retraction that reads a table's keys (or counts
//! its rows) while such a request still uploads would miss the rows that land afterwards,
//! delete too little, and acknowledge a TRUNCATE whose table is not empty. So a query of a
//! table's data waits the same way: it is parked here and sent when the last such request
//! to its table ends.
//!
//! Feldera's transaction requests have the same hazard, pipeline-wide: a `commit_transaction`
//! of an ended session that Feldera handles late would commit the transaction the next
//! session adopted, half of its source transaction visible at once; a late
//! `start_transaction` would open one nobody commits. So those requests are in the ledger
//! too, and a session starts or settles no transaction while one of an earlier session is
//! still out ([`Ledger::control_blocks`]); each ends within its own timeout.
//!
//! Owns: the request-id → owner map, the parked queries and the notes said once per session.
//! Never decides what an answer means for a batch (see `sink`).

use crate::feldera::HttpRequest;
use crate::io::HttpId;
use std::collections::BTreeMap;

/// Who reads an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The current phase (a sink's ingress request, the stream's transaction requests).
    Phase,
    /// The session's keeper (Feldera's incarnation, checkpoints).
    Keeper,
    /// The transaction gate (`gate`).
    Gate,
    /// The quarantine's `/stats` probe (`quarantine`).
    Probe,
}

/// One request out, as the ledger keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Request {
    session: u32,
    owner: Owner,
    /// An ingress request: the table's URL segment (`Name::url_segment`), which identifies
    /// its endpoint.
    segment: Option<String>,
    /// A `start_transaction` or `commit_transaction`.
    control: bool,
}

/// How a request ended, as far as the ledger tells (`Ledger::ended`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) owner: Owner,
    pub(crate) session: u32,
    /// An earlier session's request (the current one is newer).
    pub(crate) earlier: bool,
    /// The table an ingress request wrote to.
    pub(crate) segment: Option<String>,
    pub(crate) control: bool,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    session: u32,
    requests: BTreeMap<HttpId, Request>,
    /// Tables whose wait was already logged in this session.
    noted: Vec<String>,
    /// Queries of this session waiting for a table's earlier requests to end.
    parked: Vec<(String, HttpId, HttpRequest)>,
    /// Whether this session already said that it waits for earlier transaction requests.
    control_noted: bool,
}

impl Ledger {
    /// A new session starts: requests sent from now on are its own.
    pub(crate) fn start_session(&mut self, session: u32) {
        self.session = session;
        self.noted.clear();
        self.control_noted = false;
        // Parked queries of the ended session were never sent; nobody waits for them.
        self.parked.clear();
    }

    /// A request of `owner` handed to the shell (or held to be handed later).
    pub(crate) fn started(&mut self, id: HttpId, owner: Owner) {
        self.insert(id, owner, None, false);
    }

    /// An ingress request to `segment` handed to the shell.
    pub(crate) fn started_write(&mut self, id: HttpId, segment: &str) {
        self.insert(id, Owner::Phase, Some(segment.to_owned()), false);
    }

    /// A `start_transaction` or `commit_transaction` of `owner` handed to the shell.
    pub(crate) fn started_control(&mut self, id: HttpId, owner: Owner) {
        self.insert(id, owner, None, true);
    }

    fn insert(&mut self, id: HttpId, owner: Owner, segment: Option<String>, control: bool) {
        let request = Request {
            session: self.session,
            owner,
            segment,
            control,
        };
        self.requests.insert(id, request);
    }

    /// The request `id` ended (answered or failed): who it was for, `None` for a request
    /// the ledger never kept (the phase's own questions).
    pub(crate) fn ended(&mut self, id: HttpId) -> Option<Ended> {
        let request = self.requests.remove(&id)?;
        Some(Ended {
            owner: request.owner,
            session: request.session,
            earlier: request.session < self.session,
            segment: request.segment,
            control: request.control,
        })
    }

    /// A request that was never sent after all (it waited behind the gate when its session
    /// ended).
    pub(crate) fn forget(&mut self, id: HttpId) {
        self.requests.remove(&id);
    }

    /// How many ingress requests of earlier sessions to `segment` are still out: while any
    /// is, the current session must not write to that table.
    pub(crate) fn earlier_writes(&self, segment: &str) -> usize {
        self.requests
            .values()
            .filter(|r| r.segment.as_deref() == Some(segment) && r.session < self.session)
            .count()
    }

    /// How many transaction requests of earlier sessions are still out: while any is, this
    /// session must not start or settle a Feldera transaction.
    pub(crate) fn control_blocks(&self) -> usize {
        self.requests
            .values()
            .filter(|r| r.control && r.session < self.session)
            .count()
    }

    /// Whether this session has not yet said that it waits for earlier transaction requests
    /// (true once).
    pub(crate) fn first_control_wait(&mut self) -> bool {
        !std::mem::replace(&mut self.control_noted, true)
    }

    /// Whether this session has not yet said that it waits for `segment` (true once).
    pub(crate) fn first_wait(&mut self, segment: &str) -> bool {
        if self.noted.iter().any(|s| s == segment) {
            return false;
        }
        self.noted.push(segment.to_owned());
        true
    }

    /// Parks a query of `segment`'s data until no earlier request to it is out.
    pub(crate) fn park(&mut self, segment: &str, id: HttpId, request: HttpRequest) {
        self.parked.push((segment.to_owned(), id, request));
    }

    /// Forgets a parked query (never sent); false when none was parked under `id`.
    pub(crate) fn unpark(&mut self, id: HttpId) -> bool {
        let parked = self.parked.len();
        self.parked.retain(|(_, waiting, _)| *waiting != id);
        self.parked.len() != parked
    }

    /// The tables that have queries parked, each once.
    pub(crate) fn parked_segments(&self) -> Vec<String> {
        let mut segments: Vec<String> = self.parked.iter().map(|(s, _, _)| s.clone()).collect();
        segments.sort();
        segments.dedup();
        segments
    }

    /// The queries parked for `segment`, taken out.
    pub(crate) fn take_parked(&mut self, segment: &str) -> Vec<(HttpId, HttpRequest)> {
        let (go, stay) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|(s, _, _)| s == segment);
        self.parked = stay;
        go.into_iter()
            .map(|(_, id, request)| (id, request))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_of_earlier_sessions_block_a_table_until_they_end() {
        let mut ledger = Ledger::default();
        ledger.start_session(1);
        ledger.started_write(HttpId(1), "users");
        ledger.started_write(HttpId(2), "items");
        assert_eq!(
            ledger.earlier_writes("users"),
            0,
            "a session's own requests never block it"
        );
        ledger.start_session(2);
        assert_eq!(
            (
                ledger.earlier_writes("users"),
                ledger.earlier_writes("items")
            ),
            (1, 1)
        );
        ledger.started_write(HttpId(3), "users");
        let own = ledger.ended(HttpId(3)).expect("kept");
        assert!(!own.earlier, "the current session's own");
        let old = ledger.ended(HttpId(1)).expect("kept");
        assert!(old.earlier);
        assert_eq!(old.segment.as_deref(), Some("users"));
        assert_eq!(ledger.earlier_writes("users"), 0);
        assert_eq!(ledger.earlier_writes("items"), 1);
        assert_eq!(ledger.ended(HttpId(1)), None, "ends once");
    }

    #[test]
    fn transaction_requests_of_earlier_sessions_block_until_they_end() {
        let mut ledger = Ledger::default();
        ledger.start_session(1);
        ledger.started_control(HttpId(1), Owner::Phase);
        ledger.started_control(HttpId(2), Owner::Gate);
        assert_eq!(ledger.control_blocks(), 0, "a session's own never block it");
        let own = ledger.ended(HttpId(2)).expect("kept");
        assert!(own.control && !own.earlier && own.owner == Owner::Gate);
        ledger.start_session(2);
        assert_eq!(ledger.control_blocks(), 1);
        assert!(ledger.first_control_wait() && !ledger.first_control_wait());
        ledger.started_control(HttpId(3), Owner::Phase);
        assert!(!ledger.ended(HttpId(3)).expect("kept").earlier);
        assert_eq!(ledger.control_blocks(), 1);
        assert!(ledger.ended(HttpId(1)).expect("kept").earlier);
        assert_eq!(ledger.control_blocks(), 0);
        assert_eq!(ledger.ended(HttpId(1)), None, "ends once");
    }

    #[test]
    fn every_kept_request_names_its_owner_and_the_phase_s_own_questions_are_not_kept() {
        let mut ledger = Ledger::default();
        ledger.start_session(1);
        ledger.started(HttpId(1), Owner::Keeper);
        ledger.started(HttpId(2), Owner::Probe);
        assert_eq!(
            ledger.ended(HttpId(1)).map(|e| e.owner),
            Some(Owner::Keeper)
        );
        assert_eq!(ledger.ended(HttpId(2)).map(|e| e.owner), Some(Owner::Probe));
        assert_eq!(ledger.ended(HttpId(3)), None);
        ledger.started(HttpId(4), Owner::Keeper);
        ledger.forget(HttpId(4));
        assert_eq!(ledger.ended(HttpId(4)), None, "forgotten: never sent");
    }

    #[test]
    fn a_wait_is_noted_once_per_table_and_session() {
        let mut ledger = Ledger::default();
        ledger.start_session(2);
        assert!(ledger.first_wait("users"));
        assert!(!ledger.first_wait("users"));
        ledger.start_session(3);
        assert!(ledger.first_wait("users"));
    }

    #[test]
    fn parked_queries_leave_for_their_table_only_and_are_forgotten_with_the_session() {
        let mut ledger = Ledger::default();
        let endpoint = crate::feldera::FelderaEndpoint::new("http://f:8080", "p", None)
            .expect("a valid endpoint");
        ledger.park("users", HttpId(1), endpoint.stats(1));
        ledger.park("items", HttpId(2), endpoint.stats(1));
        ledger.park("users", HttpId(3), endpoint.stats(1));
        let ids: Vec<HttpId> = ledger
            .take_parked("users")
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, [HttpId(1), HttpId(3)]);
        assert!(ledger.unpark(HttpId(2)) && !ledger.unpark(HttpId(2)));
        ledger.park("items", HttpId(4), endpoint.stats(1));
        ledger.start_session(2);
        assert!(ledger.take_parked("items").is_empty());
    }
}
