//! The failure policy: what the pipeline does when something goes wrong, decided in one
//! table.
//!
//! Raw answers are classified next to their protocol (`feldera::response`, `conn`,
//! `catalog::checks`); what reaches this module is a [`Failure`]: a [`FailureKind`] and the
//! operator's message. [`decide`] looks the kind up in [`RULES`] and then applies the
//! [`OVERRIDES`], which depend on the pipeline's situation (a graceful stop in progress, no
//! durable progress for too long). Every decision is written to the trace as a `policy` line
//! naming the rule, so a decision trace shows why a session ended or the process exited.
//!
//! The two reactions are deliberately few. Ending the session forgets everything that is not
//! durable (it will be replayed from the slot, which never moved past it) and reconnects
//! after a backoff; exiting leaves the slot where it is for the operator.

use crate::io::exit;
use std::fmt;

/// What kind of failure happened, as classified where it was observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum FailureKind {
    /// A PostgreSQL connection broke, was refused or reset, or the server ended the stream.
    PgUnreachable,
    /// PostgreSQL refused who we are: wrong password, unknown role or database, no privilege,
    /// an authentication method slotline lacks.
    PgRefused,
    /// Bytes or messages that break the PostgreSQL protocol.
    PgProtocol,
    /// The slot is still held by another process (often the previous connection of a crashed
    /// connector, not yet noticed dead by the server).
    SlotBusy,
    /// Startup found the setup cannot work (publication, tables, replica identity, schema
    /// mapping, a server error for a catalog question).
    SetupRefused,
    /// A connection setting that cannot even be encoded (e.g. a NUL byte in the user name).
    ConfigInvalid,
    /// Feldera did not answer, or answered with a status that says "try again".
    FelderaUnavailable,
    /// Feldera restarted (or is shutting down): what it accepted may be lost.
    FelderaRestarted,
    /// The pipeline has no compiled program yet.
    FelderaNotReady,
    /// Feldera refused a request or the data in it.
    FelderaRefused,
    /// Feldera's answer cannot be read (a schema slotline cannot parse).
    FelderaUnreadable,
    /// A batch was not complete within `FELDERA_COMPLETION_TIMEOUT_MS`.
    CompletionTimeout,
    /// A change slotline cannot deliver faithfully (unsupported value, unrouted table,
    /// uncovered key).
    DataRefused,
    /// After a retraction's deletes were durable, Feldera's count is not what it must be.
    Unverified,
    /// No durable progress within `NO_PROGRESS_TIMEOUT_SECS`.
    NoProgress,
    /// The slot was invalidated while this process ran (its WAL is gone): re-snapshot,
    /// never silently recreate it.
    SlotLost,
    /// A change names a relation this session's catalog cannot place (a partition attached
    /// after the catalog was read): the next session reads the catalog again and replays it.
    CatalogChanged,
}

/// Something that went wrong: its kind and the operator's message (free of secrets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) kind: FailureKind,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

/// What the pipeline does about a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Close the session's connections, forget everything not durable (the slot replays it)
    /// and start a new session after a backoff.
    EndSession,
    /// Exit the process with this code.
    Exit(i32),
}

impl fmt::Display for Reaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reaction::EndSession => {
                f.write_str("end the session; replay from the slot after a backoff")
            }
            Reaction::Exit(code) => write!(f, "exit {code}"),
        }
    }
}

/// One row of the policy table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    pub(crate) kind: FailureKind,
    pub(crate) name: &'static str,
    pub(crate) reaction: Reaction,
}

const fn rule(kind: FailureKind, name: &'static str, reaction: Reaction) -> Rule {
    Rule {
        kind,
        name,
        reaction,
    }
}

use FailureKind as K;
use Reaction::{EndSession, Exit};

/// The reaction to each kind of failure. Transient conditions end the session (nothing
/// unacknowledged is lost: the slot replays it); conditions no retry can fix exit, leaving
/// the slot where it is.
pub(crate) const RULES: [Rule; 17] = [
    rule(K::PgUnreachable, "pg-unreachable", EndSession),
    rule(K::PgRefused, "pg-refused", Exit(exit::FATAL)),
    rule(K::PgProtocol, "pg-protocol", Exit(exit::FATAL)),
    rule(K::SlotBusy, "slot-busy", EndSession),
    rule(K::SetupRefused, "setup-refused", Exit(exit::FATAL)),
    rule(K::ConfigInvalid, "config-invalid", Exit(exit::FATAL)),
    rule(K::FelderaUnavailable, "feldera-unavailable", EndSession),
    rule(K::FelderaRestarted, "feldera-restarted", EndSession),
    rule(K::FelderaNotReady, "feldera-not-ready", EndSession),
    rule(K::FelderaRefused, "feldera-refused", Exit(exit::FATAL)),
    rule(
        K::FelderaUnreadable,
        "feldera-unreadable",
        Exit(exit::FATAL),
    ),
    rule(K::CompletionTimeout, "completion-timeout", EndSession),
    rule(K::DataRefused, "data-refused", Exit(exit::FATAL)),
    rule(K::Unverified, "retraction-unverified", Exit(exit::FATAL)),
    rule(K::NoProgress, "no-progress", Exit(exit::NO_PROGRESS)),
    rule(K::SlotLost, "slot-lost", Exit(exit::FATAL)),
    rule(K::CatalogChanged, "catalog-changed", EndSession),
];

/// What the pipeline is doing when the failure happens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Situation {
    /// A graceful stop is in progress.
    pub(crate) stopping: bool,
    /// `NO_PROGRESS_TIMEOUT_SECS` has passed without durable progress.
    pub(crate) progress_expired: bool,
    /// The failure is a server that did not answer, and this run never heard from it:
    /// PostgreSQL unreachable before any PostgreSQL connection of the run received a byte,
    /// or Feldera unavailable before any Feldera request of the run got an answer.
    pub(crate) never_reached: bool,
}

/// A rule that replaces `EndSession` in some situations, checked in order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Override {
    pub(crate) name: &'static str,
    pub(crate) applies: fn(Situation) -> bool,
    pub(crate) reaction: Reaction,
}

/// A session that would end is not restarted when the operator asked to stop (the stop
/// finishes with what is durable), nor when a server this run never reached does not answer
/// (a first start with a wrong host or port fails at once, as `pg_recvlogical` does; a run
/// retries only what has worked), nor when there has been no durable progress for too long
/// (giving up is what draws attention to the WAL the slot pins).
pub(crate) const OVERRIDES: [Override; 3] = [
    Override {
        name: "stop-requested",
        applies: |s| s.stopping,
        reaction: Exit(exit::OK),
    },
    Override {
        name: "never-reached",
        applies: |s| s.never_reached,
        reaction: Exit(exit::NO_PROGRESS),
    },
    Override {
        name: "no-progress-at-session-end",
        applies: |s| s.progress_expired,
        reaction: Exit(exit::NO_PROGRESS),
    },
];

/// The outcome of [`decide`]: the rule that applied and what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) rule: &'static str,
    pub(crate) reaction: Reaction,
    /// The base rule ends the session: its connections close and what is not durable is
    /// forgotten before the reaction (which an override may have turned into an exit).
    pub(crate) ends_session: bool,
}

/// Looks `kind` up in [`RULES`], then lets the first matching [`OVERRIDES`] row replace an
/// `EndSession`.
pub(crate) fn decide(kind: FailureKind, situation: Situation) -> Decision {
    let base = RULES.iter().find(|r| r.kind == kind).map_or(
        Decision {
            rule: "unlisted",
            reaction: Exit(exit::FATAL),
            ends_session: false,
        },
        |r| Decision {
            rule: r.name,
            reaction: r.reaction,
            ends_session: r.reaction == EndSession,
        },
    );
    if !base.ends_session {
        return base;
    }
    OVERRIDES
        .iter()
        .find(|o| (o.applies)(situation))
        .map_or(base, |o| Decision {
            rule: o.name,
            reaction: o.reaction,
            ends_session: true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_KINDS: [FailureKind; 17] = [
        K::PgUnreachable,
        K::PgRefused,
        K::PgProtocol,
        K::SlotBusy,
        K::SetupRefused,
        K::ConfigInvalid,
        K::FelderaUnavailable,
        K::FelderaRestarted,
        K::FelderaNotReady,
        K::FelderaRefused,
        K::FelderaUnreadable,
        K::CompletionTimeout,
        K::DataRefused,
        K::Unverified,
        K::NoProgress,
        K::SlotLost,
        K::CatalogChanged,
    ];

    #[test]
    fn every_kind_has_exactly_one_rule_with_a_unique_name() {
        for kind in ALL_KINDS {
            assert_eq!(
                RULES.iter().filter(|r| r.kind == kind).count(),
                1,
                "{kind:?}"
            );
        }
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.extend(OVERRIDES.iter().map(|o| o.name));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "rule names must be unique");
    }

    #[test]
    fn transient_failures_end_the_session_and_permanent_ones_exit_1() {
        let calm = Situation::default();
        for kind in [
            K::PgUnreachable,
            K::SlotBusy,
            K::FelderaUnavailable,
            K::FelderaRestarted,
            K::FelderaNotReady,
            K::CompletionTimeout,
            K::CatalogChanged,
        ] {
            assert_eq!(decide(kind, calm).reaction, EndSession, "{kind:?}");
        }
        for kind in [
            K::PgRefused,
            K::PgProtocol,
            K::SetupRefused,
            K::FelderaRefused,
            K::DataRefused,
            K::Unverified,
            K::SlotLost,
        ] {
            assert_eq!(decide(kind, calm).reaction, Exit(1), "{kind:?}");
        }
        assert_eq!(decide(K::NoProgress, calm).reaction, Exit(69));
    }

    #[test]
    fn a_stop_in_progress_turns_an_ended_session_into_exit_0_but_not_a_fatal_error() {
        let stopping = Situation {
            stopping: true,
            progress_expired: true,
            never_reached: true,
        };
        let decision = decide(K::FelderaUnavailable, stopping);
        assert_eq!(
            (decision.rule, decision.reaction),
            ("stop-requested", Exit(0))
        );
        assert_eq!(decide(K::DataRefused, stopping).reaction, Exit(1));
        assert_eq!(
            decide(K::SlotLost, stopping).reaction,
            Exit(1),
            "a lost slot is reported even during a stop"
        );
    }

    #[test]
    fn an_ended_session_without_progress_for_too_long_exits_69() {
        let expired = Situation {
            progress_expired: true,
            ..Situation::default()
        };
        let decision = decide(K::PgUnreachable, expired);
        assert_eq!(
            (decision.rule, decision.reaction),
            ("no-progress-at-session-end", Exit(69))
        );
    }

    #[test]
    fn a_server_never_reached_exits_69_at_once_instead_of_retrying() {
        let first = Situation {
            never_reached: true,
            ..Situation::default()
        };
        for kind in [K::PgUnreachable, K::FelderaUnavailable] {
            let decision = decide(kind, first);
            assert_eq!(
                (decision.rule, decision.reaction, decision.ends_session),
                ("never-reached", Exit(69), true),
                "{kind:?}"
            );
        }
        assert_eq!(
            decide(K::PgRefused, first).reaction,
            Exit(1),
            "a refusal keeps its own exit"
        );
    }
}
