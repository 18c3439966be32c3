//! How this run acknowledges, and what it knows of the Feldera pipeline across sessions
//! (see `docs/contract.md`, "Feldera restarts"): the pipeline's fault tolerance
//! (`runtime_config.fault_tolerance`), its incarnation as the last session saw it, and the
//! durability this run acknowledges with (`FELDERA_DURABILITY`, `auto` resolved). The
//! session's watch over the pipeline is the keeper (`keeper`).

use crate::config::{AckMode, Config, FelderaDurability};
use crate::feldera::FaultTolerance;
use crate::health::CheckpointCounts;

/// How acknowledgements wait for Feldera.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// The flush follows completion tokens: a restart loses what the pipeline held since
    /// its last checkpoint (all of it without fault tolerance).
    Completion,
    /// The flush follows successful checkpoints.
    Checkpoint,
}

impl Durability {
    /// `FELDERA_DURABILITY` for a pipeline with this fault tolerance: `auto` checkpoints
    /// exactly when a restart resumes from a checkpoint (and acknowledgements wait for
    /// completion at all).
    pub(crate) fn resolve(config: &Config, fault_tolerance: FaultTolerance) -> Durability {
        match config.feldera_durability {
            FelderaDurability::Checkpoint => Durability::Checkpoint,
            FelderaDurability::Completion => Durability::Completion,
            FelderaDurability::Auto
                if fault_tolerance.survives_restart() && config.ack_mode != AckMode::Accepted =>
            {
                Durability::Checkpoint
            }
            FelderaDurability::Auto => Durability::Completion,
        }
    }
}

/// What `FELDERA_DURABILITY` means for a pipeline with this fault tolerance, in one line
/// for `check` and `status`: whether it deserves a warning, and the words.
pub(crate) fn verdict(config: &Config, fault_tolerance: FaultTolerance) -> (bool, String) {
    let durability = Durability::resolve(config, fault_tolerance);
    let model = fault_tolerance.name();
    let copy_again = match (config.feldera_restart, config.snapshot_mode) {
        (crate::config::FelderaRestart::Exit, _) => "slotline then exits 1 (FELDERA_RESTART=exit)",
        (_, crate::config::SnapshotMode::Never) => {
            "and SNAPSHOT_MODE=never cannot copy the tables again: they stay empty until re-seeded"
        }
        _ => "slotline then copies every table again (FELDERA_RESTART=resnapshot)",
    };
    match (fault_tolerance.survives_restart(), durability) {
        (true, Durability::Checkpoint) => (
            false,
            format!(
                "fault tolerance {model}: acknowledging what a Feldera checkpoint holds, so a restart loses nothing the slot passed"
            ),
        ),
        (true, Durability::Completion) => (
            true,
            format!(
                "fault tolerance {model}, but FELDERA_DURABILITY=completion: a Feldera restart loses what completed after \
                 its last checkpoint, and the slot is already past it; use FELDERA_DURABILITY=auto"
            ),
        ),
        (false, Durability::Completion) => (
            false,
            format!(
                "fault tolerance none: acknowledging on completion; a Feldera restart empties the pipeline's tables, {copy_again}"
            ),
        ),
        (false, Durability::Checkpoint) => (
            true,
            format!(
                "fault tolerance none, but FELDERA_DURABILITY=checkpoint: checkpoints need storage, and a restart still \
                 empties the tables ({copy_again})"
            ),
        ),
    }
}

/// What the run knows about the Feldera pipeline; outlives sessions.
#[derive(Debug, Default)]
pub(crate) struct FelderaFacts {
    /// `None` until a session read the pipeline.
    pub(crate) fault_tolerance: Option<FaultTolerance>,
    /// The incarnation the last session started with (`GET .../stats`).
    pub(crate) incarnation: Option<String>,
    /// The pipeline's `id` as the last session read it (`GET /v0/pipelines/{p}`).
    pub(crate) pipeline_id: Option<String>,
    /// The pipeline as the last session's plan found it: what a copy is recorded as
    /// written under, and what the next session's plan compares with.
    pub(crate) under: Option<crate::snapshot::WrittenUnder>,
    pub(crate) durability: Option<Durability>,
    /// A phase wants a checkpoint as soon as possible (the end of a copy, a stop).
    pub(crate) checkpoint_wanted: bool,
    pub(crate) counts: CheckpointCounts,
    /// The last `deployment_status` a session start warned about (`None` while running), so
    /// a status that lasts across reconnects is logged once.
    pub(crate) status_warned: Option<String>,
}

impl FelderaFacts {
    pub(crate) fn checkpointing(&self) -> bool {
        self.durability == Some(Durability::Checkpoint)
    }

    /// Whether a restart of the pipeline keeps what it completed (up to its last
    /// checkpoint): unknown counts as not.
    pub(crate) fn keeps_state(&self) -> bool {
        self.fault_tolerance
            .is_some_and(FaultTolerance::survives_restart)
    }
}
