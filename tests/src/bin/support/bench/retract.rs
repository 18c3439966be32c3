//! The retract suite: what it costs to empty a Feldera table the connector cannot truncate,
//! against sending the same deletes without reading any key.
//!
//! For every binary, three runs on a table `r (id bigint PRIMARY KEY, name text)` whose `N`
//! rows the double holds from the start (loaded straight into it over HTTP before the
//! connector starts, as an earlier stream or copy would have left them):
//!
//! - `delete` (the baseline): PostgreSQL holds the same `N` rows; `DELETE FROM r` is
//!   streamed as `N` deletes. No key is read: the time is what `N` deletes cost end to end.
//! - `truncate`: `TRUNCATE r`; the connector reads the keys Feldera holds, deletes them and
//!   counts the table empty.
//! - `resnapshot`: PostgreSQL's `r` is empty and the connector starts with no state file
//!   against a double holding `N` rows: every one of them is a leftover of the copy.
//!
//! `delete` and `truncate` are timed from the commit (psql returned) to the slot confirming
//! it; `resnapshot` from the connector's start to its log line "state file ... says
//! complete". Each run reports the queries the double answered for `r` and the rows its
//! full scans visited (Feldera pushes no filter or limit into the scan, so every query reads
//! all of `r`), the connector's peak RSS and CPU, and the double's CPU (this process).
//!
//! Owns: the table, the runs and their report. Never asserts a figure.

use super::{cpu_per_100k, mib, Binary, Common, Launched};
use crate::support::{self, Psql};
use serde_json::json;
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};
use slotline_tests::pg::PgCluster;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(3600);
const DATABASE: &str = "retract";
const TABLE: &str = "r";
const PUBLICATION: &str = "p_r";
/// Rows per ingress request when the double is loaded.
const LOAD_ROWS: u64 = 20_000;
/// The log line that ends the re-snapshot.
const COMPLETE: &str = "says complete";

/// One measured run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// `DELETE FROM r` streamed: N deletes, no query (the baseline).
    Delete,
    /// `TRUNCATE r`: keys read from Feldera, deleted, counted.
    Truncate,
    /// A first start against a Feldera holding N rows PostgreSQL lacks.
    Resnapshot,
}

impl Scenario {
    pub fn parse(name: &str) -> Result<Scenario, String> {
        match name {
            "delete" => Ok(Scenario::Delete),
            "truncate" => Ok(Scenario::Truncate),
            "resnapshot" => Ok(Scenario::Resnapshot),
            other => Err(format!(
                "unknown scenario {other:?}: accepted are delete, truncate, resnapshot"
            )),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Scenario::Delete => "DELETE streamed (baseline)",
            Scenario::Truncate => "TRUNCATE",
            Scenario::Resnapshot => "re-snapshot leftovers",
        }
    }
}

#[derive(Debug)]
pub struct RetractArgs {
    pub binaries: Vec<Binary>,
    pub rows: u64,
    pub scenarios: Vec<Scenario>,
    /// The double's cost per row its scans visit (`FelderaDouble::set_scan_row_cost`).
    pub scan_ns_per_row: u64,
    pub common: Common,
}

#[derive(Debug)]
pub struct RetractRun {
    pub scenario: Scenario,
    /// The binary's label (`Binary::label`).
    pub binary: String,
    pub rows: u64,
    pub wall: Duration,
    pub queries: u64,
    pub rows_scanned: u64,
    pub ingress_requests: u64,
    pub peak_rss_kib: u64,
    pub cpu_connector: f64,
    pub cpu_double: f64,
}

fn schema() -> serde_json::Value {
    json!({"inputs": [{"name": TABLE, "case_sensitive": false, "primary_key": ["id"],
        "materialized": false, "properties": {}, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true}}]}],
        "outputs": []})
}

/// Runs every scenario for every binary (in that order); returns the runs as measured.
pub fn run(pg: &PgCluster, args: &RetractArgs) -> Result<Vec<RetractRun>, String> {
    pg.create_database(DATABASE);
    pg.psql(
        DATABASE,
        &format!(
            "CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text); \
             CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE};"
        ),
    );
    let mut runs = Vec::new();
    let mut counter = 0;
    for binary in &args.binaries {
        for scenario in &args.scenarios {
            counter += 1;
            let run = measure(pg, args, *scenario, binary, counter)?;
            print_run(&run);
            runs.push(run);
        }
    }
    Ok(runs)
}

fn measure(
    pg: &PgCluster,
    args: &RetractArgs,
    scenario: Scenario,
    binary: &Binary,
    counter: u32,
) -> Result<RetractRun, String> {
    let rows = args.rows;
    // PostgreSQL holds the rows only for the DELETE; the TRUNCATE and the re-snapshot find
    // them in Feldera alone.
    pg.psql(DATABASE, &format!("TRUNCATE {TABLE}"));
    if scenario == Scenario::Delete {
        pg.psql(
            DATABASE,
            &format!("INSERT INTO {TABLE} SELECT g, 'row ' || g FROM generate_series(1, {rows}) g"),
        );
    }
    let feldera = FelderaDouble::start(DoubleConfig::new("demo", schema()))
        .map_err(|e| format!("start the double: {e}"))?;
    load(&feldera, rows)?;
    feldera.clear_requests();
    feldera.set_scan_row_cost(Duration::from_nanos(args.scan_ns_per_row));

    let slot = format!("retract_{counter}");
    let state_dir = super::state_dir(&slot)?;
    let mut vars = support::connector_vars(
        &pg.url(DATABASE),
        &feldera.base_url(),
        PUBLICATION,
        TABLE,
        &state_dir,
    );
    vars.push(("PG_SLOT".to_owned(), slot.clone()));
    if scenario == Scenario::Resnapshot {
        vars.push(("SNAPSHOT_MODE".to_owned(), "initial".to_owned()));
    }
    let mut psql = Psql::connect(pg.port(), DATABASE)?;
    let double_cpu_before = super::cpu_seconds(std::process::id());
    let mut connector = Launched::start(&args.common, &binary.path, &slot, vars, state_dir)?;
    let wall = match scenario {
        Scenario::Resnapshot => {
            let done = super::poll_until(RUN_TIMEOUT, Duration::from_millis(5), "the copy", || {
                connector.check_running()?;
                Ok(connector.logged(COMPLETE))
            });
            let took = connector.started.elapsed();
            done.map_err(|e| connector.failure(&e))?;
            took
        }
        Scenario::Delete | Scenario::Truncate => {
            super::poll_until(RUN_TIMEOUT, Duration::from_millis(20), "streaming", || {
                connector.check_running()?;
                psql.slot_active(&slot)
            })
            .map_err(|e| connector.failure(&e))?;
            // Startup queries (none expected without a copy) are not the retraction's.
            feldera.clear_query_stats();
            let sql = match scenario {
                Scenario::Delete => format!("DELETE FROM {TABLE}"),
                _ => format!("TRUNCATE {TABLE}"),
            };
            psql.query(&sql)?;
            let committed = Instant::now();
            let target = psql.value("SELECT pg_current_wal_lsn()")?;
            super::poll_until(RUN_TIMEOUT, Duration::from_millis(5), "the slot", || {
                connector.check_running()?;
                psql.confirmed_at_least(&slot, &target)
            })
            .map_err(|e| connector.failure(&e))?;
            committed.elapsed()
        }
    };
    let pid = connector.pid();
    let stats = feldera.query_stats();
    let run = RetractRun {
        scenario,
        binary: binary.label.clone(),
        rows,
        wall,
        queries: stats.queries_of(TABLE),
        rows_scanned: stats.rows_scanned_of(TABLE),
        ingress_requests: feldera
            .request_counts()
            .get("ingress")
            .copied()
            .unwrap_or(0),
        peak_rss_kib: super::peak_rss_kib(pid)?,
        cpu_connector: super::cpu_seconds(pid),
        cpu_double: super::cpu_seconds(std::process::id()) - double_cpu_before,
    };
    connector.stop();
    pg.psql(
        DATABASE,
        &format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE slot_name = '{slot}' AND NOT active"
        ),
    );
    let left = feldera.row_count(TABLE).unwrap_or(0);
    if left != 0 {
        return Err(format!(
            "{}: the double still holds {left} rows of {TABLE}",
            scenario.label()
        ));
    }
    Ok(run)
}

/// Puts ids `1..=rows` into the double's `r` through its ingress, and waits until they are
/// processed. Raw HTTP/1.1: this program has no HTTP client of its own.
fn load(feldera: &FelderaDouble, rows: u64) -> Result<(), String> {
    let path =
        format!("/v0/pipelines/demo/ingress/{TABLE}?format=json&update_format=insert_delete");
    let mut id = 1;
    while id <= rows {
        let end = (id + LOAD_ROWS - 1).min(rows);
        let body: String = (id..=end)
            .map(|i| format!("{{\"insert\":{{\"id\":{i},\"name\":\"row {i}\"}}}}\n"))
            .collect();
        post(feldera, &path, &body)?;
        id = end + 1;
    }
    let held = feldera.row_count(TABLE).unwrap_or(0) as u64;
    if held != rows {
        return Err(format!("the double holds {held} rows after loading {rows}"));
    }
    Ok(())
}

fn post(feldera: &FelderaDouble, path: &str, body: &str) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("POST {path} to the double: {e}");
    let mut stream = TcpStream::connect(feldera.addr()).map_err(fail)?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: double\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(fail)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(fail)?;
    match answer.starts_with("HTTP/1.1 200") {
        true => Ok(()),
        false => Err(format!("the double answered the load with: {answer}")),
    }
}

fn print_run(r: &RetractRun) {
    println!(
        "{:<22} {:<27} {} rows: {:>7.2} s; {} queries of {TABLE}, {} rows scanned; {} ingress; \
         peak RSS {}; CPU s connector {:.2} ({:.2} per 100k rows), double {:.2}; load {}",
        r.binary,
        r.scenario.label(),
        r.rows,
        r.wall.as_secs_f64(),
        r.queries,
        r.rows_scanned,
        r.ingress_requests,
        mib(r.peak_rss_kib),
        r.cpu_connector,
        cpu_per_100k(r.cpu_connector, r.rows),
        r.cpu_double,
        super::load_average(),
    );
}

/// The runs, each with its ratio to the same binary's baseline (`delete`) of this run.
pub fn print_summary(runs: &[RetractRun]) {
    println!("\n| binary | scenario | rows | wall (s) | ratio to DELETE | queries of r | rows scanned | ingress requests | peak RSS | connector CPU s | double CPU s |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        let baseline = runs
            .iter()
            .find(|b| b.binary == r.binary && b.scenario == Scenario::Delete);
        let ratio = baseline.map_or("-".to_owned(), |b| {
            format!("**{:.2}**", r.wall.as_secs_f64() / b.wall.as_secs_f64())
        });
        println!(
            "| {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            r.binary,
            r.scenario.label(),
            r.rows,
            r.wall.as_secs_f64(),
            ratio,
            r.queries,
            r.rows_scanned,
            r.ingress_requests,
            mib(r.peak_rss_kib),
            r.cpu_connector,
            r.cpu_double,
        );
    }
}
