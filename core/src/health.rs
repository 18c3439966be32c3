//! The pipeline's health as the shells publish it: a snapshot of positions, phase, counters
//! and the slot's last sample, taken after any input (`io::Driver::health`), for the
//! progress line, the metrics endpoint and the readiness check.
//!
//! Plain data and the two judgements the shells need (`lag_bytes`, `readiness`); it owns no
//! state and decides nothing for the pipeline.

use crate::catalog::slot::SlotHealth;
use crate::time::{Mono, PgTime};
use crate::Lsn;
use std::fmt;

/// The phase a pipeline is in, by name (`pipeline` holds the phases themselves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PhaseName {
    Starting,
    Snapshotting,
    Streaming,
    Retracting,
    Stopping,
    BackingOff,
    Exited,
}

impl PhaseName {
    /// Every phase, in the order of the lifecycle (the `slotline_phase` gauge lists them).
    pub const ALL: [PhaseName; 7] = [
        PhaseName::Starting,
        PhaseName::Snapshotting,
        PhaseName::Streaming,
        PhaseName::Retracting,
        PhaseName::Stopping,
        PhaseName::BackingOff,
        PhaseName::Exited,
    ];

    /// The name logs, the progress line and metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseName::Starting => "starting",
            PhaseName::Snapshotting => "snapshotting",
            PhaseName::Streaming => "streaming",
            PhaseName::Retracting => "retracting",
            PhaseName::Stopping => "stopping",
            PhaseName::BackingOff => "backing off",
            PhaseName::Exited => "exited",
        }
    }
}

impl fmt::Display for PhaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A snapshot of the pipeline for logs, metrics and health checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    pub phase: PhaseName,
    pub sessions: u32,
    pub streaming: bool,
    pub flush: Lsn,
    /// What Feldera completed (processed): the flush itself unless acknowledgements wait
    /// for checkpoints (`FELDERA_DURABILITY`).
    pub complete: Lsn,
    pub received: Lsn,
    pub buffered_rows: u64,
    /// The oldest batch sent and not yet durable.
    pub batch_in_flight: Option<u64>,
    /// How many batches are sent (or cut) and not yet durable.
    pub batches_in_flight: u64,
    /// Batches that became durable (stream, snapshot and retraction batches).
    pub batches_durable: u64,
    /// What reached Feldera (the pipeline's meter).
    pub sent: Counts,
    /// Reconnection attempts since the last durable progress (0: not backing off).
    pub backoff_attempt: u32,
    /// When backing off: when the next session starts.
    pub reconnect_at: Option<Mono>,
    /// The latest sample of the slot and the server's WAL (`None`: not sampled yet, or
    /// `SLOT_CHECK_INTERVAL_MS=0`).
    pub slot: Option<SlotHealth>,
    /// The retained WAL passed a limit (see `catalog::slot::wal_warning`).
    pub slot_wal_warning: bool,
    /// The last durable progress (or the last moment nothing was pending).
    pub last_progress: Mono,
    /// When the no-progress deadline ends the run if work is still pending then.
    pub progress_deadline: Mono,
    /// Something waits to become durable (the no-progress deadline runs).
    pub pending_work: bool,
    /// Feldera checkpoints and restarts this run saw.
    pub checkpoints: CheckpointCounts,
    /// The source commit time of the oldest change read and not acknowledged (`None`:
    /// caught up): `slotline_replication_lag_seconds` (`lag::lag_seconds`).
    pub oldest_unacknowledged: Option<PgTime>,
    /// From the source commit of a streamed batch's newest change to the batch durable:
    /// `slotline_commit_to_durable_seconds` (clocks of two hosts: a skew shows here).
    pub commit_to_durable: WaitHistogram,
}

impl Health {
    /// Bytes from the durable position to the server's current WAL (as last sampled).
    pub fn lag_bytes(&self) -> Option<u64> {
        let current = self.slot.as_ref()?.current_wal;
        (!self.flush.is_zero()).then(|| current.saturating_distance_from(self.flush))
    }

    /// Ready to serve: streaming, and durable progress within the no-progress deadline.
    /// `Err` says why not.
    pub fn readiness(&self, now: Mono) -> Result<(), String> {
        if !self.streaming {
            return Err(format!("not streaming (phase {})", self.phase));
        }
        if self.pending_work && now >= self.progress_deadline {
            return Err(format!(
                "no durable progress for {} s",
                now.since(self.last_progress) / 1_000_000
            ));
        }
        Ok(())
    }
}

/// Upper bounds of the wait buckets, in microseconds (1 ms to 2 min).
pub const WAIT_BUCKETS_US: [u64; 16] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
];

/// A histogram of waits: per-bucket counts (not cumulative), their sum and count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitHistogram {
    /// `counts[i]`: waits `<= WAIT_BUCKETS_US[i]` and above the previous bound; the last
    /// entry counts the waits above every bound.
    pub counts: [u64; WAIT_BUCKETS_US.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl WaitHistogram {
    pub fn observe(&mut self, wait_us: u64) {
        let bucket = WAIT_BUCKETS_US
            .iter()
            .position(|bound| wait_us <= *bound)
            .unwrap_or(WAIT_BUCKETS_US.len());
        self.counts[bucket] += 1;
        self.sum_us = self.sum_us.saturating_add(wait_us);
        self.count += 1;
    }

    /// Cumulative counts per upper bound (in seconds), as Prometheus histograms are
    /// exposed; the `+Inf` bucket is `count`.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        WAIT_BUCKETS_US
            .iter()
            .zip(self.counts)
            .map(|(bound, count)| {
                total += count;
                (*bound as f64 / 1e6, total)
            })
            .collect()
    }
}

/// Counts of what reached Feldera.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Rows in ingress requests Feldera accepted (HTTP 200 with a token).
    pub rows_sent: u64,
    /// Of those, rows sent by the initial snapshot's copy.
    pub snapshot_rows_sent: u64,
    /// Ingress requests Feldera accepted.
    pub ingress_requests: u64,
    /// From a token's acceptance to Feldera saying it is complete.
    pub completion_wait: WaitHistogram,
}

/// Checkpoint and restart counters, for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointCounts {
    pub requested: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// New incarnations of the pipeline this run noticed.
    pub incarnation_changes: u64,
    /// When the newest checkpoint that moved (or could have moved) the flush succeeded.
    pub last_saved: Option<Mono>,
}
