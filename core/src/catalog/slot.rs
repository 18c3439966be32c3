//! The slot's health as the server reports it, and what slotline makes of it: whether the
//! slot was invalidated (its WAL is gone), and whether the WAL it retains is nearing the
//! server's limit or the operator's budget. Shared by `slotline status`, `slotline check`
//! and the monitor that samples the slot while slotline runs.
//!
//! The question depends on the server's version: `conflicting` exists from 16,
//! `invalidation_reason` and `failover` from 17. The answer always has one row, with the
//! slot's columns NULL when the slot does not exist, so the server's WAL position is known
//! either way.

use crate::catalog::questions::{quote_literal, CatalogError, Row};
use crate::Lsn;
use std::fmt;

/// The oldest server slotline supports (`server_version_num`): `CREATE_REPLICATION_SLOT`
/// with the `(SNAPSHOT 'nothing')` option list arrived in 15.
pub const MIN_SERVER_VERSION: u32 = 150_000;

/// The first version with failover slots (`CREATE_REPLICATION_SLOT ... (FAILOVER true)`).
pub const FAILOVER_SERVER_VERSION: u32 = 170_000;

/// The share of `max_slot_wal_keep_size` the retained WAL may reach before a warning.
pub const WAL_WARN_PERCENT: u64 = 80;

/// The slot and the server's WAL as one sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotHealth {
    /// The server's current WAL position (on a standby, the last received).
    pub current_wal: Lsn,
    /// `max_slot_wal_keep_size` in bytes; `None` when unlimited (-1).
    pub max_keep_bytes: Option<u64>,
    /// `None` when the slot does not exist.
    pub slot: Option<SlotState>,
    /// What the server's settings say about failover and a standby source.
    pub availability: Availability,
}

/// The server's settings that decide what a failover or a standby source puts at risk
/// (`server::judge_high_availability`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Availability {
    /// `synchronized_standby_slots` (17 and newer; `None` before): the physical slots of
    /// the standbys a failover slot's changes wait for.
    pub synchronized_standby_slots: Option<String>,
    /// The server is a standby (`pg_is_in_recovery()`).
    pub in_recovery: bool,
    /// `hot_standby_feedback` is on.
    pub hot_standby_feedback: bool,
}

/// What `pg_replication_slots` says about the slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotState {
    pub active: bool,
    pub active_pid: Option<u32>,
    pub confirmed_flush: Option<Lsn>,
    pub restart_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
    /// Bytes that can still be written before the slot is in danger (NULL: unlimited).
    pub safe_wal_size: Option<i64>,
    /// 16+: invalidated by a conflict with recovery (on a standby).
    pub conflicting: Option<bool>,
    /// 17+: why the slot was invalidated (`wal_removed`, `rows_removed`, ...).
    pub invalidation_reason: Option<String>,
    /// 17+: the slot is synchronized to standbys.
    pub failover: Option<bool>,
}

impl SlotHealth {
    /// Bytes from the slot's confirmed position to the server's WAL: what a restart replays
    /// at most, and how far slotline trails.
    pub fn lag_bytes(&self) -> Option<u64> {
        let confirmed = self.slot.as_ref()?.confirmed_flush?;
        Some(self.current_wal.saturating_distance_from(confirmed))
    }

    /// Bytes of WAL the slot keeps on the server's disk (from its `restart_lsn`).
    pub fn retained_bytes(&self) -> Option<u64> {
        let restart = self.slot.as_ref()?.restart_lsn?;
        Some(self.current_wal.saturating_distance_from(restart))
    }
}

/// The question, for a server of version `server_version` (`server_version_num`).
pub fn slot_health_query(slot: &str, server_version: u32) -> Option<String> {
    let newer = |version: u32, column: &str| {
        if server_version >= version {
            format!("s.{column}")
        } else {
            "NULL".to_owned()
        }
    };
    Some(format!(
        "SELECT w.lsn, w.keep_mb, s.slot_name, s.active, s.active_pid, s.confirmed_flush_lsn, \
           s.restart_lsn, s.wal_status, s.safe_wal_size, {}, {}, {}, w.sync_slots, w.standby, w.feedback \
         FROM (SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_receive_lsn() \
                 ELSE pg_catalog.pg_current_wal_lsn() END AS lsn, \
               (SELECT setting FROM pg_catalog.pg_settings WHERE name = 'max_slot_wal_keep_size') AS keep_mb, \
               pg_catalog.current_setting('synchronized_standby_slots', true) AS sync_slots, \
               pg_catalog.pg_is_in_recovery() AS standby, \
               pg_catalog.current_setting('hot_standby_feedback') AS feedback) AS w \
         LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = {}",
        newer(160_000, "conflicting"),
        newer(170_000, "invalidation_reason"),
        newer(170_000, "failover"),
        quote_literal(slot)?
    ))
}

fn bad(problem: impl Into<String>) -> CatalogError {
    CatalogError {
        question: "slot health",
        problem: problem.into(),
    }
}

fn lsn(text: &str) -> Result<Lsn, CatalogError> {
    text.parse()
        .map_err(|e: crate::lsn::ParseLsnError| bad(e.to_string()))
}

fn flag(text: &str) -> Result<bool, CatalogError> {
    match text {
        "t" => Ok(true),
        "f" => Ok(false),
        other => Err(bad(format!("expected t or f, got {other:?}"))),
    }
}

pub fn parse_slot_health(rows: &[Row<'_>]) -> Result<SlotHealth, CatalogError> {
    let [row] = rows else {
        return Err(bad(format!("{} rows, expected 1", rows.len())));
    };
    if row.len() != 15 {
        return Err(bad(format!("{} columns, expected 15", row.len())));
    }
    let at = |i: usize| row[i];
    let current_wal = at(0).map(lsn).transpose()?.unwrap_or(Lsn::ZERO);
    let max_keep_bytes = match at(1) {
        None => None,
        Some(text) => {
            let mb: i64 = text
                .parse()
                .map_err(|_| bad(format!("max_slot_wal_keep_size {text:?}")))?;
            u64::try_from(mb).ok().map(|mb| mb.saturating_mul(1 << 20))
        }
    };
    let slot = match at(2) {
        None => None,
        Some(_) => Some(SlotState {
            active: at(3).map(flag).transpose()?.unwrap_or(false),
            active_pid: at(4)
                .map(|p| p.parse().map_err(|_| bad("active_pid is not a number")))
                .transpose()?,
            confirmed_flush: at(5).map(lsn).transpose()?,
            restart_lsn: at(6).map(lsn).transpose()?,
            wal_status: at(7).map(str::to_owned),
            safe_wal_size: at(8)
                .map(|s| s.parse().map_err(|_| bad("safe_wal_size is not a number")))
                .transpose()?,
            conflicting: at(9).map(flag).transpose()?,
            invalidation_reason: at(10).map(str::to_owned),
            failover: at(11).map(flag).transpose()?,
        }),
    };
    let availability = Availability {
        synchronized_standby_slots: at(12).map(str::to_owned),
        in_recovery: at(13).map(flag).transpose()?.unwrap_or(false),
        hot_standby_feedback: at(14) == Some("on"),
    };
    Ok(SlotHealth {
        current_wal,
        max_keep_bytes,
        slot,
        availability,
    })
}

/// Why the slot can no longer be streamed from, when it was invalidated: `wal_status =
/// 'lost'`, a conflict with recovery (16+) or any invalidation reason (17+).
pub fn invalidation(slot: &SlotState) -> Option<String> {
    let mut why = Vec::new();
    if slot.wal_status.as_deref() == Some("lost") {
        why.push("wal_status = lost".to_owned());
    }
    if let Some(reason) = &slot.invalidation_reason {
        why.push(format!("invalidation_reason = {reason}"));
    }
    if slot.conflicting == Some(true) {
        why.push("conflicting = true".to_owned());
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// What an operator must do about an invalidated slot (the words every path uses).
pub fn lost_action(slot: &str) -> String {
    format!(
        "the WAL it needed is gone and changes since its last confirmed position cannot be streamed. \
         Re-snapshot: restart with SNAPSHOT_MODE=initial (it drops the invalidated slot and copies every \
         table again, retracting rows the copy does not carry), or drop it (slotline drop-slot --yes, or \
         SELECT pg_drop_replication_slot('{slot}')) and re-seed Feldera yourself. slotline never recreates \
         it silently"
    )
}

/// The WAL limits an operator gave: the server's `max_slot_wal_keep_size` (read from the
/// server) and `SLOT_WAL_WARN_BYTES`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalBudget {
    pub warn_bytes: Option<u64>,
}

/// Why the retained WAL deserves a warning: past `WAL_WARN_PERCENT` of
/// `max_slot_wal_keep_size`, past `SLOT_WAL_WARN_BYTES`, or the slot already `unreserved`.
pub fn wal_warning(health: &SlotHealth, budget: WalBudget) -> Option<String> {
    let slot = health.slot.as_ref()?;
    let retained = health.retained_bytes()?;
    let mut why = Vec::new();
    if let Some(keep) = health.max_keep_bytes.filter(|k| *k > 0) {
        if retained.saturating_mul(100) >= keep.saturating_mul(WAL_WARN_PERCENT) {
            why.push(format!(
                "{}% of max_slot_wal_keep_size ({})",
                retained.saturating_mul(100) / keep,
                bytes_name(keep)
            ));
        }
    }
    if let Some(limit) = budget.warn_bytes.filter(|l| retained >= *l) {
        why.push(format!("over SLOT_WAL_WARN_BYTES ({})", bytes_name(limit)));
    }
    if slot.wal_status.as_deref() == Some("unreserved") {
        why.push("wal_status = unreserved: the next checkpoint may invalidate it".to_owned());
    }
    (!why.is_empty()).then(|| {
        format!(
            "the slot retains {} of WAL: {}",
            bytes_name(retained),
            why.join("; ")
        )
    })
}

/// `1536` as `1.5 KiB`, for messages.
/// `512 bytes`, or `3145728 bytes (3.0 MiB)`: the exact count, with its readable size once
/// that says something else.
pub fn bytes_exact(bytes: u64) -> String {
    match bytes_name(bytes) {
        name if bytes < 1024 => name,
        name => format!("{bytes} bytes ({name})"),
    }
}

pub fn bytes_name(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

impl fmt::Display for SlotState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        let position = |v: Option<Lsn>| v.map_or_else(|| "none".into(), |l| l.to_string());
        match self.active_pid {
            Some(pid) if self.active => {
                write!(f, "active (PostgreSQL backend pid {pid} streams it)")?
            }
            _ => f.write_str("inactive")?,
        }
        write!(
            f,
            ", confirmed_flush_lsn {}, restart_lsn {}, wal_status {}",
            position(self.confirmed_flush),
            position(self.restart_lsn),
            text(&self.wal_status)
        )?;
        match self.safe_wal_size {
            Some(size) => write!(f, ", safe_wal_size {size}")?,
            None => f.write_str(", safe_wal_size unlimited")?,
        }
        if let Some(failover) = self.failover {
            write!(f, ", failover {failover}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "slot_tests.rs"]
mod tests;
