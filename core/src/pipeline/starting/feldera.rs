//! The Feldera side of a start: the pipeline's schema, fault tolerance and incarnation, and
//! what they mean for this run (the durability it acknowledges with, whether the pipeline
//! restarted since the last session).

use super::phase::Starting;
use crate::feldera::QUESTION_TIMEOUT_MS;
use crate::feldera::{
    classify_pipeline, classify_pipeline_list, classify_stats, describe_pipelines, is_not_found,
    lifecycle, redact_userinfo, FaultTolerance, PipelineOutcome, Reply, StatsOutcome, PIPELINE_FIX,
    SCHEMA_FIX,
};
use crate::io::{ConnId, HttpId, Level};
use crate::pipeline::cx::Cx;
use crate::pipeline::durability::Durability;
use crate::pipeline::handover::Next;
use crate::pipeline::policy::{Failure, FailureKind};
use crate::report::with_fix;
use crate::schema::PipelineInfo;

impl Starting {
    pub(crate) fn on_pg_tls_ready(
        &mut self,
        cx: &mut Cx<'_>,
        conn: ConnId,
        certificate: Option<&[u8]>,
    ) {
        if conn == self.repl.id {
            self.repl.on_tls_ready(cx.queue, certificate);
        }
    }

    pub(crate) fn on_http(&mut self, cx: &mut Cx<'_>, id: HttpId, reply: Reply<'_>) -> Next {
        if self.counts(id) {
            return match self.on_count(cx, id, reply) {
                Some(Err(failure)) => Next::Fail(failure),
                _ => Next::Stay,
            };
        }
        if let Some((_, refusal)) = self.not_found.take_if(|(asked, _)| *asked == id) {
            let pipeline = &cx.env.config.feldera_pipeline;
            let listed = classify_pipeline_list(reply);
            let refusal = format!("{refusal}; {}", describe_pipelines(pipeline, &listed));
            return Next::Fail(Failure::new(
                FailureKind::FelderaRefused,
                with_fix(&refusal, PIPELINE_FIX),
            ));
        }
        if self.stats_request == Some(id) {
            self.stats_request = None;
            return self.on_stats(cx, reply);
        }
        if self.schema_request != Some(id) {
            return Next::Stay;
        }
        self.schema_request = None;
        let pipeline = &cx.env.config.feldera_pipeline;
        let failure = match classify_pipeline(reply) {
            PipelineOutcome::Ready(info) => {
                cx.run.feldera.pipeline_id.clone_from(&info.id);
                self.know_pipeline(cx, info.fault_tolerance);
                warn_unless_running(cx, &info);
                if let Err(error) =
                    self.conversation
                        .on_schema(cx.queue, &mut self.repl, info.schema)
                {
                    return Next::Fail(error.into());
                }
                return match self.decide(cx) {
                    Ok(()) => Next::Stay,
                    Err(failure) => Next::Fail(failure),
                };
            }
            PipelineOutcome::NotCompiled { program_status } => Failure::new(
                FailureKind::FelderaNotReady,
                format!(
                    "Feldera pipeline {pipeline} has no compiled program yet (program_status {})",
                    program_status.as_deref().unwrap_or("unknown")
                ),
            ),
            PipelineOutcome::BadSchema(e) => Failure::new(
                FailureKind::FelderaUnreadable,
                with_fix(&format!("cannot read Feldera's schema: {e}"), SCHEMA_FIX),
            ),
            PipelineOutcome::Transient(e) => Failure::new(
                FailureKind::FelderaUnavailable,
                format!("Feldera unavailable: {e}"),
            ),
            PipelineOutcome::Fatal(e) if is_not_found(&e) => {
                return self
                    .ask_pipelines(cx, format!("Feldera refused the pipeline request: {e}"));
            }
            PipelineOutcome::Fatal(e) => Failure::new(
                FailureKind::FelderaRefused,
                with_fix(
                    &format!("Feldera refused the pipeline request: {e}"),
                    PIPELINE_FIX,
                ),
            ),
        };
        Next::Fail(failure)
    }

    /// The pipeline (or its stats) answered 404: before refusing, ask Feldera which
    /// pipelines it has, so that the refusal names them (`on_http` refuses when the list,
    /// or its failure, arrives). Asked once, for whichever 404 came first.
    fn ask_pipelines(&mut self, cx: &mut Cx<'_>, refusal: String) -> Next {
        if self.not_found.is_none() {
            let id = cx
                .queue
                .http(cx.env.endpoint.list_pipelines(QUESTION_TIMEOUT_MS));
            self.not_found = Some((id, refusal));
        }
        Next::Stay
    }

    /// The pipeline's fault tolerance: how this run acknowledges (`FELDERA_DURABILITY`).
    /// Decided between sessions, so the ack tracker holds nothing pending.
    fn know_pipeline(&mut self, cx: &mut Cx<'_>, fault_tolerance: FaultTolerance) {
        let durability = Durability::resolve(&cx.env.config, fault_tolerance);
        let facts = &mut cx.run.feldera;
        let changed =
            facts.fault_tolerance != Some(fault_tolerance) || facts.durability != Some(durability);
        facts.fault_tolerance = Some(fault_tolerance);
        facts.durability = Some(durability);
        cx.run
            .ack
            .set_checkpointing(durability == Durability::Checkpoint);
        self.describe = changed;
    }

    /// The startup line about Feldera: its fault tolerance and incarnation, and what that
    /// means for acknowledgements and restarts.
    pub(super) fn describe_feldera(&self, cx: &mut Cx<'_>, incarnation: &str) {
        let config = &cx.env.config;
        let (Some(fault_tolerance), Some(durability)) =
            (cx.run.feldera.fault_tolerance, cx.run.feldera.durability)
        else {
            return;
        };
        let pipeline = &config.feldera_pipeline;
        let setting = match config.feldera_durability {
            crate::config::FelderaDurability::Auto => "auto",
            crate::config::FelderaDurability::Checkpoint => "checkpoint",
            crate::config::FelderaDurability::Completion => "completion",
        };
        let head = format!(
            "Feldera pipeline {pipeline}: fault tolerance {}, incarnation {incarnation}; FELDERA_DURABILITY={setting}",
            fault_tolerance.name()
        );
        let (level, line) = match durability {
            Durability::Checkpoint => (
                Level::Info,
                format!(
                    "{head}: acknowledging what a Feldera checkpoint holds (one every {} s at most while something waits for it)",
                    config.feldera_checkpoint_interval_secs
                ),
            ),
            Durability::Completion if fault_tolerance.survives_restart() => (
                Level::Warn,
                format!(
                    "{head}: acknowledging on completion, so a Feldera restart loses what completed after its last \
                     checkpoint, and the slot is already past it (FELDERA_DURABILITY=auto would acknowledge on checkpoints)"
                ),
            ),
            Durability::Completion => (
                Level::Info,
                format!(
                    "{head}: acknowledging on completion; a restart empties the pipeline's tables, and slotline then {}",
                    match config.feldera_restart {
                        crate::config::FelderaRestart::Resnapshot => {
                            "copies every table again (FELDERA_RESTART=resnapshot)"
                        }
                        crate::config::FelderaRestart::Exit => "exits 1 (FELDERA_RESTART=exit)",
                    }
                ),
            ),
        };
        cx.queue.log(level, line);
    }

    /// The pipeline's incarnation (`GET .../stats`).
    fn on_stats(&mut self, cx: &mut Cx<'_>, reply: Reply<'_>) -> Next {
        let pipeline = &cx.env.config.feldera_pipeline;
        let failure = match classify_stats(reply) {
            StatsOutcome::Incarnation(incarnation) => {
                self.incarnation = Some(incarnation);
                cx.link.seed_quarantine(cx.queue, reply);
                return match self.decide(cx) {
                    Ok(()) => Next::Stay,
                    Err(failure) => Next::Fail(failure),
                };
            }
            StatsOutcome::Transient(e) => Failure::new(
                FailureKind::FelderaUnavailable,
                format!("Feldera unavailable: {e}"),
            ),
            StatsOutcome::Fatal(e) if is_not_found(&e) => {
                return self.ask_pipelines(
                    cx,
                    format!(
                        "cannot read Feldera pipeline {pipeline}'s incarnation (GET .../stats): {e}"
                    ),
                );
            }
            StatsOutcome::Fatal(e) => Failure::new(
                FailureKind::FelderaRefused,
                with_fix(
                    &format!(
                        "cannot read Feldera pipeline {pipeline}'s incarnation (GET .../stats): {e}"
                    ),
                    PIPELINE_FIX,
                ),
            ),
        };
        Next::Fail(failure)
    }
}

/// A pipeline that is not running answers ingress with 503 and the session ends and
/// retries; this says once per status why, and what the operator must do (the same advice
/// as `slotline check`).
fn warn_unless_running(cx: &mut Cx<'_>, info: &PipelineInfo) {
    let status = info.deployment_status.as_deref().unwrap_or("unknown");
    let desired = info.deployment_desired_status.as_deref();
    let config = &cx.env.config;
    let url = redact_userinfo(&config.feldera_url);
    let pipeline = &config.feldera_pipeline;
    let Some(advice) = lifecycle::advice(status, desired, &url, pipeline) else {
        cx.run.feldera.status_warned = None;
        return;
    };
    if cx.run.feldera.status_warned.as_deref() == Some(status) {
        return;
    }
    cx.run.feldera.status_warned = Some(status.to_owned());
    cx.queue.log(
        Level::Warn,
        format!(
            "Feldera pipeline {pipeline} is {status}, not Running: its ingress may refuse or hold input \
             until it runs (slotline retries with backoff until NO_PROGRESS_TIMEOUT_SECS); {advice}"
        ),
    );
}
