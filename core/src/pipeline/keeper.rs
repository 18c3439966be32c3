//! How slotline learns that the Feldera pipeline restarted, and when a checkpoint holds
//! what it completed (see `docs/contract.md`, "Feldera restarts"). What the run knows of
//! the pipeline across sessions is `durability::FelderaFacts`, in `Run`.
//!
//! - **The keeper** (`Keeper`, one per session while a slot exists): asks `GET .../stats`
//!   every `WATCH_INTERVAL_MS`, so that a restart is noticed within seconds even when the
//!   stream is idle (a new incarnation ends the session; the next session's start decides
//!   between replaying from the slot and copying again); and, with checkpoints, requests
//!   one (`POST .../checkpoint`) whenever something Feldera completed is not yet
//!   acknowledged and the last request is `FELDERA_CHECKPOINT_INTERVAL_SECS` old, then asks
//!   `GET .../checkpoint_status?incarnation_uuid=U` until it succeeded or failed. Only a
//!   success moves the flush (`AckTracker::on_checkpoint_saved`), and only to what was
//!   complete when the *previous* checkpoint of the session was requested: Feldera writes
//!   one checkpoint at a time and answers every request that arrives while one is being
//!   written with that one's result, whose state may predate the request
//!   (docs/feldera.md, "Checkpoints and incarnations"); the checkpoint answering a
//!   request made after the previous one ended can only have started after it, so it
//!   holds everything complete when the previous one was requested. A success that credits
//!   nothing yet (the session's first), or after which nothing new completed, is followed
//!   by the next request at once.
//!
//! A checkpoint that fails, is refused for a while, or does not succeed within
//! `FELDERA_COMPLETION_TIMEOUT_MS` acknowledges nothing: it is logged with its reason and
//! requested again after the interval. A pipeline that cannot checkpoint at all exits 1.

use super::cx::Cx;
use super::feldera_link::Owner;
use super::policy::{Failure, FailureKind};
use super::run::Run;
use crate::ack::CheckpointMark;
use crate::feldera::{
    classify_checkpoint, classify_checkpoint_status, classify_stats, CheckpointOutcome,
    CheckpointStatusOutcome, Reply, StatsOutcome, QUESTION_TIMEOUT_MS,
};
use crate::io::{HttpId, Level, Topic};
use crate::time::Mono;
use crate::timer::{TimerKind, TimerTable};

/// How often a session asks Feldera for its incarnation.
pub(crate) const WATCH_INTERVAL_MS: u64 = 2_000;
/// How often a requested checkpoint's status is asked.
pub(crate) const CHECKPOINT_POLL_MS: u64 = 250;

/// What the keeper's news means for the phase.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum News {
    Nothing,
    /// A checkpoint succeeded: the flush may have moved.
    Saved,
    /// A checkpoint did not succeed; the next is requested after the interval.
    NotSaved,
}

#[derive(Debug)]
enum Watch {
    Waiting { until: Mono },
    Asking(HttpId),
}

#[derive(Debug)]
enum Checkpoint {
    /// No checkpoint under way; the next may be requested from `next_at` (earlier when a
    /// phase wants one, unless the last one did not succeed).
    Idle { next_at: Mono, after_failure: bool },
    /// `POST .../checkpoint` is out.
    Requesting {
        http: HttpId,
        mark: CheckpointMark,
        since: Mono,
    },
    /// Requested as `seq`: asking its status (`asking`) or waiting until `poll_at`.
    Waiting {
        seq: u64,
        incarnation: Option<String>,
        mark: CheckpointMark,
        since: Mono,
        asking: Option<HttpId>,
        poll_at: Mono,
        /// Its status was asked at least once (a timeout needs one answer to go by).
        asked: bool,
    },
}

/// One session's watch over the pipeline (see the module docs).
#[derive(Debug)]
pub(crate) struct Keeper {
    watch: Watch,
    checkpoint: Checkpoint,
    /// What was complete when this session's last checkpoint whose attempt ended (success
    /// or failure) was requested: the next checkpoint that succeeds holds it.
    prior: Option<CheckpointMark>,
}

impl Keeper {
    pub(crate) fn start(now: Mono) -> Keeper {
        Keeper {
            watch: Watch::Waiting {
                until: now.plus_ms(WATCH_INTERVAL_MS),
            },
            checkpoint: Checkpoint::Idle {
                next_at: now,
                after_failure: false,
            },
            prior: None,
        }
    }

    pub(crate) fn owns(&self, id: HttpId) -> bool {
        matches!(self.watch, Watch::Asking(http) if http == id)
            || match &self.checkpoint {
                Checkpoint::Requesting { http, .. } => *http == id,
                Checkpoint::Waiting { asking, .. } => *asking == Some(id),
                Checkpoint::Idle { .. } => false,
            }
    }

    /// Deadlines: the next watch, and the next checkpoint request or status question.
    pub(crate) fn arm(&self, timers: &mut TimerTable, run: &Run, now: Mono) {
        if let Watch::Waiting { until } = self.watch {
            timers.set(TimerKind::FelderaWatch, until);
        }
        match &self.checkpoint {
            Checkpoint::Idle {
                next_at,
                after_failure,
            } if Keeper::checkpoint_due(run) => {
                let at = match run.feldera.checkpoint_wanted && !after_failure {
                    true => now.min(*next_at),
                    false => *next_at,
                };
                timers.set(TimerKind::Checkpoint, at);
            }
            Checkpoint::Waiting {
                asking: None,
                poll_at,
                ..
            } => timers.set(TimerKind::Checkpoint, *poll_at),
            _ => {}
        }
    }

    /// Whether a checkpoint should be requested when the interval allows: something
    /// Feldera completed waits for one.
    pub(crate) fn checkpoint_due(run: &Run) -> bool {
        let ack = &run.ack;
        run.feldera.checkpointing()
            && ack.unsaved()
            && (ack.complete() > ack.flush() || run.feldera.checkpoint_wanted)
    }

    pub(crate) fn on_timer(&mut self, cx: &mut Cx<'_>, kind: TimerKind) -> Result<News, Failure> {
        let now = cx.now();
        match kind {
            TimerKind::FelderaWatch => {
                if matches!(self.watch, Watch::Waiting { until } if now >= until) {
                    let request = cx.env.endpoint.stats(QUESTION_TIMEOUT_MS);
                    let http = cx.link.ask_for_keeper(cx.queue, request);
                    self.watch = Watch::Asking(http);
                }
                Ok(News::Nothing)
            }
            TimerKind::Checkpoint => self.checkpoint_step(cx),
            _ => Ok(News::Nothing),
        }
    }

    /// Requests a checkpoint, or asks about the one requested, when it is time.
    fn checkpoint_step(&mut self, cx: &mut Cx<'_>) -> Result<News, Failure> {
        let now = cx.now();
        match &mut self.checkpoint {
            Checkpoint::Idle {
                next_at,
                after_failure,
            } => {
                let early = cx.run.feldera.checkpoint_wanted && !*after_failure;
                if (now < *next_at && !early) || !Keeper::checkpoint_due(cx.run) {
                    return Ok(News::Nothing);
                }
                // Feldera delays a checkpoint while a transaction is open: one an ended session
                // left open, which this session may never write to, would delay it for ever. So the
                // request waits behind the transaction gate like table writes
                // (`feldera_link::gate`), which commits such a transaction first. The mark is taken
                // now: the checkpoint begins later and holds at least this much.
                let request = cx.env.endpoint.checkpoint(QUESTION_TIMEOUT_MS);
                let http = cx.link.send_table_request(cx.queue, Owner::Keeper, request);
                let mark = cx.run.ack.checkpoint_mark();
                cx.run.feldera.checkpoint_wanted = false;
                cx.run.feldera.counts.requested += 1;
                cx.queue.note(
                    Level::Debug,
                    Topic::Ack,
                    format!(
                        "checkpoint requested while everything up to {} is complete (flush {})",
                        mark.complete,
                        cx.run.ack.flush()
                    ),
                );
                self.checkpoint = Checkpoint::Requesting {
                    http,
                    mark,
                    since: now,
                };
                Ok(News::Nothing)
            }
            Checkpoint::Waiting {
                seq,
                incarnation,
                since,
                asking,
                poll_at,
                asked,
                ..
            } => {
                if asking.is_some() || now < *poll_at {
                    return Ok(News::Nothing);
                }
                if *asked && now.since(*since) / 1_000 >= cx.env.config.completion_timeout_ms {
                    let seq = *seq;
                    return Ok(self.not_saved(
                        cx,
                        format!(
                            "checkpoint #{seq} did not succeed within {} ms (FELDERA_COMPLETION_TIMEOUT_MS)",
                            cx.env.config.completion_timeout_ms
                        ),
                    ));
                }
                let request = cx
                    .env
                    .endpoint
                    .checkpoint_status(incarnation.as_deref(), QUESTION_TIMEOUT_MS);
                let http = cx.link.ask_for_keeper(cx.queue, request);
                *asking = Some(http);
                *asked = true;
                Ok(News::Nothing)
            }
            Checkpoint::Requesting { .. } => Ok(News::Nothing),
        }
    }

    /// Nothing acknowledged; the next checkpoint after the interval.
    fn not_saved(&mut self, cx: &mut Cx<'_>, reason: String) -> News {
        cx.run.feldera.counts.failed += 1;
        let interval = cx.env.config.feldera_checkpoint_interval_secs;
        cx.queue.log(
            Level::Warn,
            format!(
                "{reason}; nothing acknowledged for it (the slot keeps its WAL); the next checkpoint in {interval} s"
            ),
        );
        self.checkpoint = Checkpoint::Idle {
            next_at: cx.now().plus_ms(interval * 1_000),
            after_failure: true,
        };
        News::NotSaved
    }

    pub(crate) fn on_http(
        &mut self,
        cx: &mut Cx<'_>,
        id: HttpId,
        reply: Reply<'_>,
    ) -> Result<News, Failure> {
        if matches!(self.watch, Watch::Asking(http) if http == id) {
            self.watch = Watch::Waiting {
                until: cx.now().plus_ms(WATCH_INTERVAL_MS),
            };
            return self.on_stats(cx, reply).map(|()| News::Nothing);
        }
        match std::mem::replace(
            &mut self.checkpoint,
            Checkpoint::Idle {
                next_at: cx.now(),
                after_failure: false,
            },
        ) {
            Checkpoint::Requesting { http, mark, since } if http == id => {
                self.on_requested(cx, mark, since, reply)
            }
            Checkpoint::Waiting {
                seq,
                incarnation,
                mark,
                since,
                asking: Some(http),
                ..
            } if http == id => {
                self.checkpoint = Checkpoint::Waiting {
                    seq,
                    incarnation,
                    mark,
                    since,
                    asking: None,
                    poll_at: cx.now().plus_ms(CHECKPOINT_POLL_MS),
                    asked: true,
                };
                self.on_status(cx, reply)
            }
            other => {
                self.checkpoint = other;
                Ok(News::Nothing)
            }
        }
    }

    /// The incarnation now: a new one ends the session.
    fn on_stats(&mut self, cx: &mut Cx<'_>, reply: Reply<'_>) -> Result<(), Failure> {
        match classify_stats(reply) {
            StatsOutcome::Incarnation(now) => match &cx.run.feldera.incarnation {
                Some(known) if *known != now.uuid => Err(restarted(cx, known, &now.uuid)),
                _ => Ok(()),
            },
            StatsOutcome::Transient(e) | StatsOutcome::Fatal(e) => {
                cx.queue
                    .log(Level::Debug, format!("Feldera's stats unavailable: {e}"));
                Ok(())
            }
        }
    }

    fn on_requested(
        &mut self,
        cx: &mut Cx<'_>,
        mark: CheckpointMark,
        since: Mono,
        reply: Reply<'_>,
    ) -> Result<News, Failure> {
        match classify_checkpoint(reply) {
            CheckpointOutcome::Requested { seq, incarnation } => {
                if let (Some(known), Some(now)) = (&cx.run.feldera.incarnation, &incarnation) {
                    if known != now {
                        return Err(restarted(cx, known, now));
                    }
                }
                self.checkpoint = Checkpoint::Waiting {
                    seq,
                    incarnation: incarnation.or_else(|| cx.run.feldera.incarnation.clone()),
                    mark,
                    since,
                    asking: None,
                    poll_at: cx.now().plus_ms(CHECKPOINT_POLL_MS),
                    asked: false,
                };
                Ok(News::Nothing)
            }
            CheckpointOutcome::Unsupported(e) => Err(cannot_checkpoint(cx, &e)),
            CheckpointOutcome::Transient(e) => {
                Ok(self.not_saved(cx, format!("the checkpoint request failed: {e}")))
            }
            CheckpointOutcome::Fatal(e) => Err(Failure::new(
                FailureKind::FelderaRefused,
                format!("Feldera refused the checkpoint request: {e}"),
            )),
        }
    }

    fn on_status(&mut self, cx: &mut Cx<'_>, reply: Reply<'_>) -> Result<News, Failure> {
        let Checkpoint::Waiting { seq, mark, .. } = &self.checkpoint else {
            return Ok(News::Nothing);
        };
        let (seq, mark) = (*seq, *mark);
        match classify_checkpoint_status(reply) {
            CheckpointStatusOutcome::Status { success, .. }
                if success.is_some_and(|s| s >= seq) =>
            {
                // Feldera folds a request that arrives while a checkpoint is being written
                // into that one, whose state may predate the request. The checkpoint that
                // answers this request started after the previous one of this session
                // ended, so it holds what was complete when that previous one was
                // requested: credit that mark, and keep this one for the next success.
                let credited = self.prior.replace(mark);
                let before = cx.run.ack.flush();
                if let Some(prior) = credited {
                    cx.run.ack.on_checkpoint_saved(prior);
                }
                let after = cx.run.ack.flush();
                let counts = &mut cx.run.feldera.counts;
                counts.succeeded += 1;
                counts.last_saved = Some(cx.queue.now.mono);
                let line = match credited {
                    Some(prior) => format!(
                        "checkpoint #{seq} succeeded; it began after the previous one ended, so it holds what was complete \
                         when that one was requested ({}): {}",
                        prior.complete,
                        moved(before, after)
                    ),
                    None => format!(
                        "checkpoint #{seq} succeeded; the session's first vouches for nothing (Feldera may have been \
                         writing it already): flush stays {after}"
                    ),
                };
                cx.queue.note(Level::Debug, Topic::Ack, line);
                // Follow at once when this success credited nothing yet, or when nothing
                // completed since its request (a quiet stream's tail); otherwise after
                // the interval.
                let nothing_since = cx.run.ack.checkpoint_mark().writes == mark.writes;
                let at_once = credited.is_none() || nothing_since;
                let interval = cx.env.config.feldera_checkpoint_interval_secs;
                self.checkpoint = Checkpoint::Idle {
                    next_at: match at_once {
                        true => cx.now(),
                        false => cx.now().plus_ms(interval * 1_000),
                    },
                    after_failure: false,
                };
                Ok(News::Saved)
            }
            CheckpointStatusOutcome::Status {
                failure: Some(failed),
                ..
            } if failed.seq >= seq => {
                if failed.unsupported() {
                    return Err(cannot_checkpoint(cx, &failed.error));
                }
                // Its attempt ended: the next checkpoint starts after this request.
                self.prior = Some(mark);
                Ok(self.not_saved(cx, format!("checkpoint #{seq} failed: {}", failed.error)))
            }
            // Delayed (a transaction, bootstrapping, replaying) or being written.
            CheckpointStatusOutcome::Status { .. } => Ok(News::Nothing),
            CheckpointStatusOutcome::Restarted(e) => Err(Failure::new(
                FailureKind::FelderaRestarted,
                format!("Feldera pipeline restarted since checkpoint #{seq} was requested: {e}"),
            )),
            CheckpointStatusOutcome::Transient(e) => {
                cx.queue.log(
                    Level::Debug,
                    format!("checkpoint #{seq} status unavailable: {e}"),
                );
                Ok(News::Nothing)
            }
            CheckpointStatusOutcome::Fatal(e) => Err(Failure::new(
                FailureKind::FelderaRefused,
                format!("Feldera refused the checkpoint status request: {e}"),
            )),
        }
    }
}

/// The pipeline cannot checkpoint at all: with `FELDERA_DURABILITY=checkpoint` nothing
/// could ever be acknowledged.
fn cannot_checkpoint(cx: &Cx<'_>, reason: &dyn std::fmt::Display) -> Failure {
    Failure::new(
        FailureKind::FelderaRefused,
        format!(
            "Feldera pipeline {} cannot checkpoint: {reason}. FELDERA_DURABILITY=checkpoint acknowledges only what a checkpoint holds: \
             give the pipeline storage and fault tolerance, so that it checkpoints and a restart resumes from its checkpoints \
             (Feldera's community edition refuses every checkpoint: \"Suspend is an enterprise feature\"), or set \
             FELDERA_DURABILITY=completion (a Feldera restart then loses what it held)",
            cx.env.config.feldera_pipeline
        ),
    )
}

/// How the flush moved, for the trace.
fn moved(before: crate::Lsn, after: crate::Lsn) -> String {
    match before == after {
        true => format!("flush stays {after}"),
        false => format!("flush {before} -> {after}"),
    }
}

/// A new incarnation: the session ends; the next session's start decides what it means.
fn restarted(cx: &Cx<'_>, known: &str, now: &str) -> Failure {
    let keeps = if cx.run.feldera.keeps_state() {
        "it resumes from its last checkpoint"
    } else {
        "without fault tolerance its tables are empty"
    };
    Failure::new(
        FailureKind::FelderaRestarted,
        format!(
            "Feldera pipeline {} restarted (incarnation {known} -> {now}; {keeps})",
            cx.env.config.feldera_pipeline
        ),
    )
}
