//! End to end: TCP keepalive on every PostgreSQL socket, at both ends, in both shells.
//!
//! The connector runs with `keepalives_idle=37` in `PG_URL`. Its TCP sockets to the server
//! are found through `/proc/<pid>/fd` and `/proc/net/tcp`, where an armed keepalive timer
//! is timer 2 with the time left in clock ticks: each must be armed within 37 s. The
//! server's side of each connection (the same table: the cluster listens on 127.0.0.1)
//! must be too, which it is only if the startup message set its `tcp_keepalives_idle`:
//! PostgreSQL arms its sockets with the system's idle time (two hours by default)
//! otherwise. With `keepalives=0` the connector's sockets have no keepalive timer and the
//! server keeps the system's idle time. A bad value exits 2 naming the parameter.

use serde_json::{json, Value};
use slotline_tests::e2e::{operation, Connector, Env, Shell};
use slotline_tests::pg::wait_for;
use std::collections::BTreeSet;
use std::time::Duration;

const SETUP: &str = "CREATE TABLE t (id bigint PRIMARY KEY, v integer);
    CREATE PUBLICATION pub FOR TABLE t;";

/// The idle time the test configures: unlike the defaults of slotline (60 s), PostgreSQL
/// and the system, so only the parameter can explain it.
const IDLE_SECS: u64 = 37;

/// `/proc/net/tcp` counts timers in `USER_HZ` ticks, 100 a second on Linux.
const TICKS_PER_SEC: u64 = 100;

fn schema() -> Value {
    json!({"inputs": [{"name": "t", "case_sensitive": false, "materialized": false,
        "properties": {}, "primary_key": ["id"], "fields": [
        {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
        {"name": "v", "case_sensitive": false, "columntype": {"type": "INTEGER", "nullable": true}}]}],
        "outputs": []})
}

/// One established connection of `/proc/net/tcp`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TcpRow {
    /// `ADDR:PORT` in the file's hex, as written.
    local: String,
    remote: String,
    /// 0 none, 1 retransmit, 2 keepalive, 3 TIME_WAIT, 4 zero window probe.
    timer: u8,
    when_ticks: u64,
    inode: u64,
}

impl TcpRow {
    fn remote_port(&self) -> Option<u16> {
        let (_, port) = self.remote.split_once(':')?;
        u16::from_str_radix(port, 16).ok()
    }

    /// A keepalive timer that fires within `secs`.
    fn keepalive_within(&self, secs: u64) -> bool {
        self.timer == 2 && self.when_ticks <= secs * TICKS_PER_SEC
    }
}

/// The established IPv4 connections of this network namespace.
fn tcp_rows() -> Vec<TcpRow> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    table.lines().skip(1).filter_map(parse_row).collect()
}

/// `sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...`; `None` unless
/// established (state 01).
fn parse_row(line: &str) -> Option<TcpRow> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.get(3) != Some(&"01") {
        return None;
    }
    let (timer, when) = fields.get(5)?.split_once(':')?;
    Some(TcpRow {
        local: (*fields.get(1)?).to_owned(),
        remote: (*fields.get(2)?).to_owned(),
        timer: u8::from_str_radix(timer, 16).ok()?,
        when_ticks: u64::from_str_radix(when, 16).ok()?,
        inode: fields.get(9)?.parse().ok()?,
    })
}

/// The inodes of the sockets process `pid` holds open.
fn socket_inodes(pid: u32) -> BTreeSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return BTreeSet::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The connector's connections to the server, each with the server's side of it.
fn connections(connector: &Connector, pg_port: u16) -> Vec<(TcpRow, Option<TcpRow>)> {
    let inodes = socket_inodes(connector.pid());
    let rows = tcp_rows();
    rows.iter()
        .filter(|row| inodes.contains(&row.inode) && row.remote_port() == Some(pg_port))
        .map(|ours| {
            let theirs = rows
                .iter()
                .find(|row| row.local == ours.remote && row.remote == ours.local);
            (ours.clone(), theirs.cloned())
        })
        .collect()
}

fn url_with(env: &Env, parameters: &str) -> String {
    format!("{}?{parameters}", env.pg.url(&env.db))
}

/// Starts a streaming connector with `parameters` in `PG_URL`.
fn streaming(env: &Env, shell: Shell, parameters: &str) -> Connector {
    let url = url_with(env, parameters);
    let connector = env.start(shell, &[("PG_URL", url.as_str()), ("TABLES", "t")]);
    assert!(
        wait_for(Duration::from_secs(60), || env.walsender()).is_some(),
        "the connector never streamed:\n{}",
        connector.log_text()
    );
    connector
}

fn keepalive_reaches_both_ends_of_every_connection(shell: Shell) {
    let env = Env::new("keepalive", SETUP, schema());
    let port = env.pg.port();
    let mut connector = streaming(
        &env,
        shell,
        &format!("keepalives_idle={IDLE_SECS}&keepalives_interval=7&keepalives_count=3"),
    );
    // A change flows, so the stream is past its startup, and the slot monitor connects.
    env.sql("INSERT INTO t VALUES (1, 1)");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "{}",
        connector.log_text()
    );
    // A socket shows its retransmit timer while data waits for an acknowledgement, and the
    // server arms its side when it reads the startup message: look until every one shows
    // its keepalive.
    let mut last = Vec::new();
    let armed = wait_for(Duration::from_secs(20), || {
        last = connections(&connector, port);
        let all = !last.is_empty()
            && last.iter().all(|(ours, theirs)| {
                ours.keepalive_within(IDLE_SECS)
                    && theirs
                        .as_ref()
                        .is_some_and(|t| t.keepalive_within(IDLE_SECS))
            });
        all.then_some(())
    });
    assert!(
        armed.is_some(),
        "not every connection (ours, the server's) has keepalive within {IDLE_SECS} s: {last:#?}"
    );
    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

fn keepalives_zero_leaves_both_ends_to_the_system(shell: Shell) {
    let env = Env::new("nokeepalive", SETUP, schema());
    let port = env.pg.port();
    let mut connector = streaming(&env, shell, "keepalives=0");
    env.sql("INSERT INTO t VALUES (1, 1)");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "{}",
        connector.log_text()
    );
    let system_idle_secs: u64 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_keepalive_time")
        .expect("read tcp_keepalive_time")
        .trim()
        .parse()
        .expect("a number of seconds");
    let found = connections(&connector, port);
    assert!(!found.is_empty(), "no connection to the server found");
    for (ours, theirs) in &found {
        assert_ne!(ours.timer, 2, "keepalive on our side: {ours:?}");
        let theirs = theirs.as_ref().expect("the server's side");
        if system_idle_secs > IDLE_SECS {
            assert!(
                !theirs.keepalive_within(IDLE_SECS),
                "the server got a keepalive setting: {theirs:?}"
            );
        }
    }
    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

fn a_bad_keepalive_value_exits_2_naming_the_parameter(shell: Shell) {
    let env = Env::new("badkeepalive", SETUP, schema());
    let url = url_with(&env, "keepalives_count=0");
    let out = operation(
        shell,
        &env.config(&[("PG_URL", url.as_str()), ("TABLES", "t")]),
        &["check"],
    );
    assert_eq!(out.code, Some(2), "{out}");
    assert!(
        out.stderr.contains(
            r#"keepalives_count in PG_URL="0" is invalid: a number of probes from 1 to 127"#
        ),
        "{out}"
    );
}

mod keepalive_reaches_both_ends_of_every_connection {
    use super::*;

    #[test]
    fn tokio() {
        keepalive_reaches_both_ends_of_every_connection(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        keepalive_reaches_both_ends_of_every_connection(Shell::Blocking);
    }
}

mod keepalives_zero_leaves_both_ends_to_the_system {
    use super::*;

    #[test]
    fn tokio() {
        keepalives_zero_leaves_both_ends_to_the_system(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        keepalives_zero_leaves_both_ends_to_the_system(Shell::Blocking);
    }
}

mod a_bad_keepalive_value_exits_2_naming_the_parameter {
    use super::*;

    #[test]
    fn tokio() {
        a_bad_keepalive_value_exits_2_naming_the_parameter(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        a_bad_keepalive_value_exits_2_naming_the_parameter(Shell::Blocking);
    }
}
