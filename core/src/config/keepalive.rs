//! TCP keepalive of the PostgreSQL connections: libpq's `keepalives`, `keepalives_idle`,
//! `keepalives_interval`, `keepalives_count` and `tcp_user_timeout` parameters of `PG_URL`
//! (libpq has no variables for them), and slotline's defaults
//! (docs/guide/configuration.md, "TLS, Unix sockets, the password file, timeouts"; why:
//! docs/guide/operating.md, "Connections behind a NAT or a load balancer").
//!
//! The defaults differ from libpq's (keepalive on with the system's timings, two hours of
//! silence before the first probe on Linux): a replication connection behind a NAT or a
//! load balancer that forgets idle flows after a few minutes would die silently, and the
//! server would keep the slot active until its own keepalive gave up.

use super::input::ConfigError;

/// TCP keepalive of a PostgreSQL connection, as the configuration decided it
/// (docs/guide/operating.md, "Connections behind a NAT or a load balancer"): the shell
/// turns `SO_KEEPALIVE` on with these timings right after connecting, and the startup
/// message sends them to the server ([`TcpKeepalive::server_settings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpKeepalive {
    /// Seconds without traffic before the first probe (`TCP_KEEPIDLE`).
    pub idle_secs: u32,
    /// Seconds between unanswered probes (`TCP_KEEPINTVL`).
    pub interval_secs: u32,
    /// Unanswered probes before the connection is dropped (`TCP_KEEPCNT`).
    pub count: u32,
    /// How long sent data may stay unacknowledged before the connection is dropped
    /// (`TCP_USER_TIMEOUT`, Linux only); `None` keeps the system's default.
    pub user_timeout_ms: Option<u32>,
}

impl TcpKeepalive {
    /// The same keepalive as the server's settings, sent in the startup message so the
    /// server probes its side too; a `None` user timeout is not sent (the server keeps its
    /// own). Every supported server has them (`tcp_user_timeout` since PostgreSQL 12).
    pub fn server_settings(&self) -> Vec<(&'static str, String)> {
        let mut settings = vec![
            ("tcp_keepalives_idle", self.idle_secs.to_string()),
            ("tcp_keepalives_interval", self.interval_secs.to_string()),
            ("tcp_keepalives_count", self.count.to_string()),
        ];
        if let Some(ms) = self.user_timeout_ms {
            settings.push(("tcp_user_timeout", ms.to_string()));
        }
        settings
    }
}

/// Seconds without traffic before the first probe: well below the idle timeouts of common
/// NATs and load balancers (AWS NLB 350 s, Azure's 240 s), so a probe keeps the flow alive.
pub const DEFAULT_IDLE_SECS: u32 = 60;
/// Seconds between unanswered probes.
pub const DEFAULT_INTERVAL_SECS: u32 = 10;
/// Unanswered probes before the connection is dropped: a dead peer is noticed 60 s after
/// the first unanswered probe, two minutes after the last traffic.
pub const DEFAULT_COUNT: u32 = 6;

/// The keepalive of a connection nobody configured: [`DEFAULT_IDLE_SECS`],
/// [`DEFAULT_INTERVAL_SECS`], [`DEFAULT_COUNT`], and a user timeout on the same schedule.
pub const DEFAULT_KEEPALIVE: TcpKeepalive = TcpKeepalive {
    idle_secs: DEFAULT_IDLE_SECS,
    interval_secs: DEFAULT_INTERVAL_SECS,
    count: DEFAULT_COUNT,
    user_timeout_ms: Some(schedule_ms(
        DEFAULT_IDLE_SECS,
        DEFAULT_INTERVAL_SECS,
        DEFAULT_COUNT,
    )),
};

/// The largest `TCP_KEEPIDLE` and `TCP_KEEPINTVL` Linux accepts (seconds).
const MAX_SECS: u32 = 32_767;
/// The largest `TCP_KEEPCNT` Linux accepts.
const MAX_COUNT: u32 = 127;

/// The parameters as written in `PG_URL`.
#[derive(Debug, Default)]
pub(super) struct KeepaliveParts {
    pub(super) keepalives: Option<String>,
    pub(super) idle: Option<String>,
    pub(super) interval: Option<String>,
    pub(super) count: Option<String>,
    pub(super) user_timeout: Option<String>,
}

/// When keepalive alone would drop a dead connection: the idle time plus every probe's
/// interval. Keepalive never probes while sent data waits for an acknowledgement, so the
/// user timeout covers that case on the same schedule.
const fn schedule_ms(idle_secs: u32, interval_secs: u32, count: u32) -> u32 {
    // At most 32767 + 32767 * 127 seconds: about 4.2 million, under u32::MAX / 1000.
    (idle_secs + interval_secs * count) * 1000
}

/// An integer as libpq reads one: surrounding white space allowed, nothing else.
fn integer(raw: &str) -> Option<i64> {
    raw.trim().parse().ok()
}

fn name(key: &str) -> String {
    format!("{key} in PG_URL")
}

fn in_range(
    key: &str,
    raw: &Option<String>,
    default: u32,
    max: u32,
    what: &str,
) -> Result<u32, ConfigError> {
    let Some(raw) = raw.as_deref() else {
        return Ok(default);
    };
    integer(raw)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| (1..=max).contains(v))
        .ok_or_else(|| {
            ConfigError::new(
                &name(key),
                Some(raw),
                format!("{what} from 1 to {max} (default {default})"),
            )
        })
}

impl KeepaliveParts {
    /// The keepalive every TCP connection gets; `None` when `keepalives=0` turns it off.
    /// Every parameter is checked, used or not.
    pub(super) fn resolve(&self) -> Result<Option<TcpKeepalive>, ConfigError> {
        let on = match self.keepalives.as_deref() {
            None => true,
            Some(raw) => integer(raw).map(|v| v != 0).ok_or_else(|| {
                ConfigError::new(
                    &name("keepalives"),
                    Some(raw),
                    "an integer: 0 turns TCP keepalive off, any other value keeps it on (the default)",
                )
            })?,
        };
        let idle_secs = in_range(
            "keepalives_idle",
            &self.idle,
            DEFAULT_IDLE_SECS,
            MAX_SECS,
            "whole seconds",
        )?;
        let interval_secs = in_range(
            "keepalives_interval",
            &self.interval,
            DEFAULT_INTERVAL_SECS,
            MAX_SECS,
            "whole seconds",
        )?;
        let count = in_range(
            "keepalives_count",
            &self.count,
            DEFAULT_COUNT,
            MAX_COUNT,
            "a number of probes",
        )?;
        let user_timeout_ms = match self.user_timeout.as_deref() {
            None => Some(schedule_ms(idle_secs, interval_secs, count)),
            Some(raw) => user_timeout_ms(raw)?,
        };
        Ok(on.then_some(TcpKeepalive {
            idle_secs,
            interval_secs,
            count,
            user_timeout_ms,
        }))
    }
}

/// `tcp_user_timeout` as libpq reads it: zero or negative keeps the system's default.
fn user_timeout_ms(raw: &str) -> Result<Option<u32>, ConfigError> {
    match integer(raw) {
        Some(ms) if ms <= 0 => Ok(None),
        Some(ms) if ms <= i64::from(i32::MAX) => Ok(u32::try_from(ms).ok()),
        _ => Err(ConfigError::new(
            &name("tcp_user_timeout"),
            Some(raw),
            "milliseconds up to 2147483647; 0 keeps the system's default (default: keepalives_idle + keepalives_interval * keepalives_count)",
        )),
    }
}

#[cfg(test)]
#[path = "keepalive_tests.rs"]
mod tests;
