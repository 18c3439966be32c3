//! The pipeline's link to Feldera, the twin of `PgLink`: every request whose answer is not
//! simply the current phase's goes through it, and every answer passes it first.
//!
//! Feldera's rules outlive a session: a request keeps delivering records after its sender
//! ended (`ledger`), a request that ended without the pipeline's answer may be applied
//! later (`quarantine`), and a transaction left open swallows what is written next (`gate`).
//! The link keeps all three, so a phase only asks to write, read or commit, and the
//! pipeline routes an answer with one question: [`FelderaLink::deliver`] says whom it is
//! for, after doing the link's own part (freeing a table, moving the gate on).
//!
//! Owns: the request-id → owner map, the parked queries, the quarantine, the gate and the
//! endpoint they use. Never decides what an answer means for a batch or a checkpoint.

mod gate;
mod ledger;
mod quarantine;

use crate::feldera::{
    FelderaEndpoint, HttpRequest, Reply, FORWARDED_TIMEOUT_MS, QUESTION_TIMEOUT_MS,
};
use crate::io::{Command, HttpId, Level, Topic};
use crate::pipeline::policy::Failure;
use crate::pipeline::queue::Queue;
use gate::Gate;
use ledger::{Ended, Ledger};
use quarantine::{Due, Freed, Quarantine};

pub(crate) use ledger::Owner;

/// Whom an answer is for, once the link did its own part ([`FelderaLink::deliver`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// The current phase (an answer of an ended session finds no owner there).
    Phase,
    /// The session's keeper, when it still asks.
    Keeper,
    /// The link handled it: nothing for anyone else.
    Handled,
    /// A request of an ended session ended and nothing of it holds its tables (or the
    /// transaction) back any more: the phase's sinks may post again.
    Freed,
    /// The gate could not settle a transaction left open: the session cannot go on.
    Failed(Failure),
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct FelderaLink {
    endpoint: FelderaEndpoint,
    ledger: Ledger,
    quarantine: Quarantine,
    gate: Gate,
}

impl FelderaLink {
    pub(crate) fn new(endpoint: FelderaEndpoint) -> FelderaLink {
        FelderaLink {
            endpoint,
            ledger: Ledger::default(),
            quarantine: Quarantine::default(),
            gate: Gate::default(),
        }
    }

    /// The pipeline's API, for building requests.
    pub(crate) fn endpoint(&self) -> &FelderaEndpoint {
        &self.endpoint
    }

    /// Session `session` starts: requests sent from now on are its own; with Feldera
    /// transactions on, one may be open that it must settle before table data moves.
    pub(crate) fn start_session(&mut self, session: u32, transactions: bool) {
        self.gate.start_session(&mut self.ledger, transactions);
        self.ledger.start_session(session);
    }

    // ---- sending ----

    /// Sends one of the keeper's questions.
    pub(crate) fn ask_for_keeper(&mut self, queue: &mut Queue, request: HttpRequest) -> HttpId {
        let id = queue.http_id();
        self.ledger.started(id, Owner::Keeper);
        queue.push(Command::Http { id, request });
        id
    }

    /// Sends a request of `owner` that reads or writes table data (a checkpoint included):
    /// behind the gate.
    pub(crate) fn send_table_request(
        &mut self,
        queue: &mut Queue,
        owner: Owner,
        request: HttpRequest,
    ) -> HttpId {
        let id = queue.http_id();
        if owner != Owner::Phase {
            self.ledger.started(id, owner);
        }
        self.gate
            .send(queue, &mut self.ledger, &self.endpoint, id, request);
        id
    }

    /// Whether the current session may write to `segment` now: false (and said once per
    /// session and table) while an earlier request may still deliver records to it.
    pub(crate) fn may_write(&mut self, queue: &mut Queue, segment: &str) -> bool {
        if self.blocks(segment) == 0 {
            return true;
        }
        if self.ledger.first_wait(segment) {
            let line = self.wait_reason(segment, "writing to it again");
            queue.note(Level::Info, Topic::Batch, line);
        }
        false
    }

    /// Posts an ingress request to `segment` (only when [`FelderaLink::may_write`] said so).
    pub(crate) fn post_ingress(
        &mut self,
        queue: &mut Queue,
        segment: &str,
        request: impl FnOnce(&FelderaEndpoint) -> HttpRequest,
    ) -> HttpId {
        let id = queue.http_id();
        self.ledger.started_write(id, segment);
        let request = request(&self.endpoint);
        self.gate
            .send(queue, &mut self.ledger, &self.endpoint, id, request);
        id
    }

    /// Sends a query of the data of the table at `segment`, or parks it while a request
    /// that may still deliver records to that table is out (`ledger`, `quarantine`).
    pub(crate) fn query_table(
        &mut self,
        queue: &mut Queue,
        segment: &str,
        request: HttpRequest,
    ) -> HttpId {
        let id = queue.http_id();
        if self.blocks(segment) == 0 {
            self.gate
                .send(queue, &mut self.ledger, &self.endpoint, id, request);
            return id;
        }
        if self.ledger.first_wait(segment) {
            let line = self.wait_reason(segment, "reading it");
            queue.note(Level::Info, Topic::Batch, line);
        }
        self.ledger.park(segment, id, request);
        id
    }

    /// Sends the stream's own `start_transaction` or `commit_transaction`, kept in the
    /// ledger until it ends. The stream owns the session's transaction from its first such
    /// request (`gate`): the gate settles nothing from then on.
    pub(crate) fn send_txn_control(
        &mut self,
        queue: &mut Queue,
        request: impl FnOnce(&FelderaEndpoint) -> HttpRequest,
    ) -> HttpId {
        self.gate.own_transaction();
        let id = queue.http_id();
        self.ledger.started_control(id, Owner::Phase);
        let request = request(&self.endpoint);
        queue.push(Command::Http { id, request });
        id
    }

    /// Whether the stream may start a Feldera transaction now: not while the gate settles
    /// one, nor while a transaction request of an ended session is out (`gate`).
    pub(crate) fn may_start_transaction(&mut self, queue: &mut Queue) -> bool {
        !self.gate.settling() && gate::may_start_transaction(queue, &mut self.ledger)
    }

    /// The stream started or adopted a Feldera transaction (`gate`).
    pub(crate) fn own_transaction(&mut self) {
        self.gate.own_transaction();
    }

    /// Stops a streamed answer (`Command::HttpCancel`), or, when its request was never sent
    /// (parked, or waiting behind the gate), forgets the request.
    pub(crate) fn cancel(&mut self, queue: &mut Queue, id: HttpId) {
        if self.ledger.unpark(id) || self.gate.unwait(id) {
            self.ledger.forget(id);
            return;
        }
        queue.push(Command::HttpCancel { id });
    }

    // ---- answers ----

    /// A request ended (`how`; `answered`: the pipeline itself answered, a status below
    /// 500): the link's part of the end, and whom `reply` is for.
    pub(crate) fn deliver(
        &mut self,
        queue: &mut Queue,
        id: HttpId,
        answered: bool,
        how: &str,
        reply: Reply<'_>,
    ) -> Delivery {
        let Some(ended) = self.ledger.ended(id) else {
            return Delivery::Phase;
        };
        if ended.control && ended.earlier {
            return self.earlier_control_ended(queue);
        }
        match ended.owner {
            Owner::Keeper => return Delivery::Keeper,
            Owner::Gate if self.gate.owns(id) => {
                return match self
                    .gate
                    .on_reply(queue, &mut self.ledger, &self.endpoint, reply)
                {
                    Ok(false) => Delivery::Handled,
                    // Settled: the requests that waited went out, and a stream waiting to
                    // start its transaction may now.
                    Ok(true) => Delivery::Freed,
                    Err(failure) => Delivery::Failed(failure),
                };
            }
            Owner::Probe if self.quarantine.probe_owns(id) => {
                return self.on_probe_reply(queue, reply);
            }
            Owner::Phase | Owner::Gate | Owner::Probe => {}
        }
        self.write_ended(queue, ended, answered, how)
    }

    /// An ingress request ended: without the pipeline's answer its table is quarantined; of
    /// an ended session, its table may be free again.
    fn write_ended(
        &mut self,
        queue: &mut Queue,
        ended: Ended,
        answered: bool,
        how: &str,
    ) -> Delivery {
        let Some(segment) = ended.segment else {
            return Delivery::Phase;
        };
        if !answered && self.quarantine.hold(&segment) {
            note_quarantined(queue, &segment, how);
        }
        if !ended.earlier {
            return Delivery::Phase;
        }
        let left = self.blocks(&segment);
        queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "an ingress request of session {} to {segment} ended ({how}); {left} more of an ended session to it still out",
                ended.session
            ),
        );
        if left > 0 {
            return Delivery::Handled;
        }
        self.release_queries(queue, &segment);
        Delivery::Freed
    }

    /// A Feldera transaction request of an ended session ended: once none is out, this
    /// session may start or settle a transaction.
    fn earlier_control_ended(&mut self, queue: &mut Queue) -> Delivery {
        let left = self.ledger.control_blocks();
        queue.note(
            Level::Debug,
            Topic::Batch,
            format!(
                "a Feldera transaction request of an ended session ended; {left} more still out"
            ),
        );
        if left > 0 {
            return Delivery::Handled;
        }
        self.gate.resume(queue, &mut self.ledger, &self.endpoint);
        Delivery::Freed
    }

    /// The last request holding `segment` back ended: its parked queries go out.
    fn release_queries(&mut self, queue: &mut Queue, segment: &str) {
        if self.blocks(segment) > 0 {
            return;
        }
        for (id, request) in self.ledger.take_parked(segment) {
            self.gate
                .send(queue, &mut self.ledger, &self.endpoint, id, request);
        }
    }

    // ---- the quarantine ----

    /// When the quarantine's probe wants the core back (`TimerKind::Quarantine`).
    pub(crate) fn quarantine_deadline(&self) -> Option<crate::time::Mono> {
        self.quarantine.deadline()
    }

    /// The quarantine's timer: asks `/stats` when due, or frees the tables whose settling
    /// is over; true when a table was freed (the phase's sinks may post again).
    pub(crate) fn on_quarantine_timer(&mut self, queue: &mut Queue) -> bool {
        match self.quarantine.on_timer(queue.now.mono) {
            Due::Nothing => false,
            Due::Ask => {
                let id = queue.http_id();
                self.ledger.started(id, Owner::Probe);
                queue.push(Command::Http {
                    id,
                    request: self.endpoint.stats(QUESTION_TIMEOUT_MS),
                });
                self.quarantine.asked(id);
                false
            }
            Due::Freed(freed) => self.release_freed(queue, freed),
        }
    }

    /// A start's `/stats` answer: the tables whose ingress endpoints do not run are
    /// quarantined, since a process before this one may have left a body there
    /// (`quarantine`).
    pub(crate) fn seed_quarantine(&mut self, queue: &mut Queue, reply: Reply<'_>) {
        let Some(stats) = crate::feldera::ingress_stats::ingress_stats(reply) else {
            return;
        };
        let seeded = self.quarantine.seed(&stats);
        let state = if stats.running {
            "running"
        } else {
            "not running"
        };
        for segment in &seeded.tables {
            queue.note(
                Level::Info,
                Topic::Batch,
                format!(
                    "{segment}: Feldera's ingress endpoint for it does not read now (pipeline {state}, or the endpoint paused or full), \
                     and may hold a body an earlier process sent; nothing goes to that table until Feldera shows it read everything"
                ),
            );
        }
        if seeded.every_table {
            queue.note(
                Level::Info,
                Topic::Batch,
                "Feldera's pipeline does not run and its /stats lists no ingress endpoints: it may hold a body an earlier process \
                 sent to any table, so nothing is written until it is seen running"
                    .to_owned(),
            );
        }
    }

    /// Tables the quarantine let go: their parked queries go out; true when any went (the
    /// phase's sinks may post again).
    fn release_freed(&mut self, queue: &mut Queue, freed: Freed) -> bool {
        for segment in &freed.tables {
            queue.note(
                Level::Info,
                Topic::Batch,
                format!(
                    "{segment}: Feldera has read everything it held for it; writing to it again"
                ),
            );
        }
        if freed.every_table {
            queue.note(
                Level::Info,
                Topic::Batch,
                "Feldera runs again and has read what it held; writing to every table again"
                    .to_owned(),
            );
            for segment in self.ledger.parked_segments() {
                self.release_queries(queue, &segment);
            }
        }
        for segment in &freed.tables {
            self.release_queries(queue, segment);
        }
        !freed.is_empty()
    }

    /// The probe's `/stats` answer: frees the tables Feldera shows holding nothing (or
    /// starts the settling, without endpoint evidence); the rest wait for the next look.
    fn on_probe_reply(&mut self, queue: &mut Queue, reply: Reply<'_>) -> Delivery {
        let stats = crate::feldera::ingress_stats::ingress_stats(reply);
        let Some(freed) = self.quarantine.on_answer(queue.now.mono, stats.as_ref()) else {
            return Delivery::Handled;
        };
        if !stats.as_ref().is_some_and(|s| s.running) {
            queue.note(
                Level::Debug,
                Topic::Batch,
                format!(
                    "Feldera's pipeline state is {}; tables with a lingering request keep waiting",
                    crate::feldera::pipeline_state(reply)
                        .as_deref()
                        .unwrap_or("unknown (no usable /stats answer)")
                ),
            );
        }
        match self.release_freed(queue, freed) {
            true => Delivery::Freed,
            false => Delivery::Handled,
        }
    }

    // ---- what holds a table back ----

    /// How many requests of earlier sessions to `segment` are still out, plus one while it
    /// is quarantined: while any is, the current session must not write to or read that
    /// table.
    fn blocks(&self, segment: &str) -> usize {
        self.ledger.earlier_writes(segment) + usize::from(self.quarantine.holds(segment))
    }

    /// Why a write to or read of `segment` waits, for the session's one line about it;
    /// `action` is what waits ("writing to it again").
    fn wait_reason(&self, segment: &str, action: &str) -> String {
        let earlier = self.ledger.earlier_writes(segment);
        let mut why = Vec::new();
        if earlier > 0 {
            why.push(format!(
                "{earlier} ingress request(s) of an ended session end (Feldera queues a request's records as they arrive; \
                 each ends within its {} s timeout)",
                FORWARDED_TIMEOUT_MS / 1000
            ));
        }
        if self.quarantine.holds(segment) {
            why.push(
                "Feldera shows it has read everything it held for it (a request that ended without its answer, or one of an earlier process, may still write to it)".to_owned(),
            );
        }
        format!(
            "{segment}: waiting until {} before {action}",
            why.join(" and ")
        )
    }
}

/// An ingress request to `segment` ended without the pipeline's answer (`how`): said once
/// per table while it is quarantined.
fn note_quarantined(queue: &mut Queue, segment: &str, how: &str) {
    queue.note(
        Level::Info,
        Topic::Batch,
        format!(
            "{segment}: an ingress request ended without Feldera's answer ({how}); the pipeline may still apply its body when it next runs \
             (a paused pipeline reads it at the resume), so nothing more goes to that table until Feldera shows it has read everything it held for it"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Command;
    use crate::schema::Name;
    use crate::time::{Mono, Now, PgTime};

    fn link() -> (FelderaLink, Queue) {
        let endpoint = FelderaEndpoint::new("http://feldera:8080", "p", None).expect("valid");
        let queue = Queue::new(Now {
            mono: Mono(0),
            wall: PgTime(0),
        });
        (FelderaLink::new(endpoint), queue)
    }

    /// The requests the queue holds, by id, and its log lines.
    fn drain(queue: &mut Queue) -> (Vec<HttpId>, Vec<String>) {
        let (mut sent, mut lines) = (Vec::new(), Vec::new());
        while let Some(command) = queue.pop() {
            match command {
                Command::Http { id, .. } => sent.push(id),
                Command::Log { message, .. } => lines.push(message),
                _ => {}
            }
        }
        (sent, lines)
    }

    fn answered(link: &mut FelderaLink, queue: &mut Queue, id: HttpId, status: u16) -> Delivery {
        let reply = Reply::Answered {
            status,
            body: b"{}",
        };
        let how = format!("answered {status}");
        link.deliver(queue, id, status < 500, &how, reply)
    }

    fn ingress(link: &mut FelderaLink, queue: &mut Queue, table: &str) -> HttpId {
        let name = Name::unquoted(table);
        link.post_ingress(queue, &name.url_segment(), |endpoint| {
            endpoint.ingress(
                &name,
                bytes::Bytes::from_static(b"{}\n"),
                FORWARDED_TIMEOUT_MS,
            )
        })
    }

    #[test]
    fn one_lookup_says_whom_an_answer_is_for() {
        let (mut link, mut queue) = link();
        link.start_session(1, false);
        let keeper = link.ask_for_keeper(&mut queue, link.endpoint().stats(1));
        let own = queue.http(link.endpoint().stats(1));
        let write = ingress(&mut link, &mut queue, "users");
        drain(&mut queue);
        assert_eq!(
            answered(&mut link, &mut queue, keeper, 200),
            Delivery::Keeper
        );
        assert_eq!(answered(&mut link, &mut queue, own, 200), Delivery::Phase);
        assert_eq!(answered(&mut link, &mut queue, write, 200), Delivery::Phase);
        assert_eq!(
            answered(&mut link, &mut queue, keeper, 200),
            Delivery::Phase,
            "an answer is delivered once; a second finds only the phase, which owns nothing"
        );
    }

    #[test]
    fn an_ended_session_s_write_holds_its_table_and_its_end_releases_the_parked_query() {
        let (mut link, mut queue) = link();
        link.start_session(1, false);
        let first = ingress(&mut link, &mut queue, "users");
        let second = ingress(&mut link, &mut queue, "users");
        link.start_session(2, false);
        drain(&mut queue);
        assert!(!link.may_write(&mut queue, "users"));
        assert!(
            !link.may_write(&mut queue, "users"),
            "said once per session"
        );
        let query = link.query_table(&mut queue, "users", link.endpoint().query("SELECT 1", 1));
        let (sent, lines) = drain(&mut queue);
        assert!(sent.is_empty(), "the query waits: {lines:?}");
        assert_eq!(lines.len(), 1, "one line per table and session: {lines:?}");
        assert_eq!(
            answered(&mut link, &mut queue, first, 200),
            Delivery::Handled
        );
        assert!(
            drain(&mut queue).0.is_empty(),
            "one request of session 1 is still out"
        );
        assert_eq!(
            answered(&mut link, &mut queue, second, 200),
            Delivery::Freed
        );
        assert_eq!(drain(&mut queue).0, [query], "the parked query goes out");
        assert!(link.may_write(&mut queue, "users"));
    }

    #[test]
    fn a_write_without_the_pipeline_s_answer_quarantines_its_table_until_running_is_seen() {
        let (mut link, mut queue) = link();
        link.start_session(1, false);
        let write = ingress(&mut link, &mut queue, "users");
        drain(&mut queue);
        assert_eq!(answered(&mut link, &mut queue, write, 503), Delivery::Phase);
        let (_, lines) = drain(&mut queue);
        assert!(lines[0].contains("users: an ingress request ended without Feldera's answer"));
        assert!(
            !link.may_write(&mut queue, "users"),
            "its own session waits too"
        );
        assert_eq!(link.quarantine_deadline(), Some(Mono(0)));
        assert!(!link.on_quarantine_timer(&mut queue));
        let (probe, _) = drain(&mut queue);
        let running = br#"{"global_metrics":{"state":"Running"}}"#;
        let reply = Reply::Answered {
            status: 200,
            body: running,
        };
        assert_eq!(
            link.deliver(&mut queue, probe[0], true, "answered 200", reply),
            Delivery::Handled
        );
        let settled = link.quarantine_deadline().expect("the settling runs");
        queue.now.mono = settled;
        assert!(link.on_quarantine_timer(&mut queue), "the table is free");
        assert!(link.may_write(&mut queue, "users"));
    }

    #[test]
    fn a_transaction_request_of_an_ended_session_holds_the_gate_until_it_ends() {
        let (mut link, mut queue) = link();
        link.start_session(1, true);
        let commit = link.send_txn_control(&mut queue, |e| e.commit_transaction(1));
        link.start_session(2, true);
        drain(&mut queue);
        // A table request waits behind the gate, which may not settle while `commit` is out.
        let write = ingress(&mut link, &mut queue, "users");
        let (sent, lines) = drain(&mut queue);
        assert!(sent.is_empty(), "{lines:?}");
        assert!(!link.may_start_transaction(&mut queue));
        assert_eq!(
            answered(&mut link, &mut queue, commit, 200),
            Delivery::Freed
        );
        let (sent, _) = drain(&mut queue);
        assert_eq!(sent.len(), 1, "the gate asks start_transaction now");
        let started = br#"{"transaction_id":7}"#;
        let reply = Reply::Answered {
            status: 200,
            body: started,
        };
        assert_eq!(
            link.deliver(&mut queue, sent[0], true, "answered 200", reply),
            Delivery::Handled
        );
        let (commit, _) = drain(&mut queue);
        let body = br#""Transaction commit initiated""#;
        let reply = Reply::Answered { status: 200, body };
        assert_eq!(
            link.deliver(&mut queue, commit[0], true, "answered 200", reply),
            Delivery::Freed
        );
        assert_eq!(drain(&mut queue).0, [write], "settled: the write goes out");
    }

    /// Answers `id` with `status` and `body`.
    fn answered_with(
        link: &mut FelderaLink,
        queue: &mut Queue,
        id: HttpId,
        status: u16,
        body: &[u8],
    ) -> Delivery {
        let reply = Reply::Answered { status, body };
        link.deliver(queue, id, true, &format!("answered {status}"), reply)
    }

    #[test]
    fn a_session_has_one_owner_of_the_pipeline_s_transaction() {
        let (mut link, mut queue) = link();
        link.start_session(1, true);
        // A table request makes the gate settle: the stream starts none meanwhile.
        let query = link.query_table(&mut queue, "users", link.endpoint().query("SELECT 1", 1));
        let (sent, _) = drain(&mut queue);
        assert_eq!(sent.len(), 1, "the gate asks start_transaction");
        assert!(!link.may_start_transaction(&mut queue), "the gate settles");
        let started = br#"{"transaction_id":7}"#;
        assert_eq!(
            answered_with(&mut link, &mut queue, sent[0], 200, started),
            Delivery::Handled
        );
        let (commit, _) = drain(&mut queue);
        assert!(!link.may_start_transaction(&mut queue), "the gate commits");
        let body = br#""Transaction commit initiated""#;
        assert_eq!(
            answered_with(&mut link, &mut queue, commit[0], 200, body),
            Delivery::Freed,
            "settled: a stream waiting to start is woken"
        );
        assert_eq!(drain(&mut queue).0, [query]);
        assert!(link.may_start_transaction(&mut queue));
        // The next session: the stream asks for its transaction first. A table request
        // made while that is out goes straight out: the gate settles (commits) nothing the
        // stream is starting.
        link.start_session(2, true);
        let start = link.send_txn_control(&mut queue, |e| e.start_transaction(1));
        let write = ingress(&mut link, &mut queue, "users");
        assert_eq!(drain(&mut queue).0, [start, write]);
        assert_eq!(
            answered_with(&mut link, &mut queue, start, 200, started),
            Delivery::Phase
        );
        let again = link.query_table(&mut queue, "users", link.endpoint().query("SELECT 1", 1));
        assert_eq!(
            drain(&mut queue).0,
            [again],
            "no start_transaction of the gate"
        );
    }
}
