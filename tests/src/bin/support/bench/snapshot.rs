//! The snapshot suite: how long the initial copy (`SNAPSHOT_MODE=initial`) of a table takes,
//! as a ratio of a plain `psql -c "COPY t TO STDOUT" > /dev/null` of the same table on the
//! same cluster.
//!
//! Two tables, filled once, frozen and analyzed (so neither reader pays for hint bits and
//! the connector's size estimate is known): a narrow one (bigint, text, timestamptz) and a
//! 20-column one of mixed types, each in its own publication. Run after run, the plain COPY
//! is timed, then right after it a connector (fresh process, slot, state directory and
//! Feldera stand-in completing at once) copies the table; its copy time runs from its start
//! to its log line "state file ... says complete", the moment the copy is durable and
//! recorded and streaming is about to begin.
//!
//! The stand-in is either the Feldera double, which parses and applies every row (its cost
//! shares the machine's two cores with the connector and PostgreSQL), or the double in
//! `discard` mode, which accepts and completes each request without parsing it: the
//! difference between the two is the double's own cost, not the connector's.
//!
//! Owns: the tables, their contents and the snapshot runs. Never asserts a figure.

use super::{cpu_per_100k, mib, Binary, Common, Launched};
use crate::support;
use serde_json::{json, Value};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};
use slotline_tests::pg::{find_pg_bin, PgCluster};
use std::process::Command;
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
const DATABASE: &str = "snap";

/// The log line that ends the copy.
const COMPLETE: &str = "says complete";

/// Which table a run copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `n`: bigint, text, timestamptz.
    Narrow,
    /// `w`: 20 columns of mixed types.
    Wide,
}

impl Shape {
    fn table(self) -> &'static str {
        match self {
            Shape::Narrow => "n",
            Shape::Wide => "w",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Shape::Narrow => "narrow (3 columns)",
            Shape::Wide => "wide (20 columns)",
        }
    }
}

/// What receives the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// The Feldera double: every row parsed and applied.
    Double,
    /// The double accepting and completing without parsing (`discard` mode).
    Discard,
}

impl Sink {
    pub fn parse(name: &str) -> Result<Sink, String> {
        match name {
            "double" => Ok(Sink::Double),
            "discard" => Ok(Sink::Discard),
            other => Err(format!(
                "unknown sink {other:?}: accepted are double and discard"
            )),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sink::Double => "double (applies rows)",
            Sink::Discard => "discard (counts rows)",
        }
    }
}

#[derive(Debug)]
pub struct SnapshotArgs {
    pub binaries: Vec<Binary>,
    pub narrow_rows: u64,
    pub wide_rows: u64,
    pub workers: Vec<u32>,
    pub sinks: Vec<Sink>,
    pub common: Common,
}

#[derive(Debug)]
pub struct SnapshotRun {
    pub shape: Shape,
    pub rows: u64,
    /// The binary's label (`Binary::label`).
    pub binary: String,
    pub workers: u32,
    pub sink: Sink,
    /// `psql -c "COPY t TO STDOUT" > /dev/null`, just before.
    pub baseline: Duration,
    /// Connector start → "state file ... says complete".
    pub copy: Duration,
    pub peak_rss_kib: u64,
    pub ingress_requests: u64,
    pub cpu_connector: f64,
    /// This process, which hosts the double.
    pub cpu_double: f64,
}

impl SnapshotRun {
    pub fn ratio(&self) -> f64 {
        self.copy.as_secs_f64() / self.baseline.as_secs_f64()
    }
}

/// (column, PostgreSQL type, Feldera type, value for row `g`).
fn wide_columns() -> Vec<(&'static str, &'static str, Value, &'static str)> {
    let t = |ty: &str| json!({"type": ty, "nullable": true});
    vec![
        (
            "id",
            "bigint PRIMARY KEY",
            json!({"type": "BIGINT", "nullable": false}),
            "g",
        ),
        ("b", "bool", t("BOOLEAN"), "g % 2 = 0"),
        ("i2", "int2", t("SMALLINT"), "(g % 30000)::int2"),
        ("i4", "int4", t("INTEGER"), "(g * 7)::int4"),
        ("i8", "int8", t("BIGINT"), "g::int8 * 1000003"),
        ("f4", "float4", t("REAL"), "(g / 7.0)::float4"),
        ("f8", "float8", t("DOUBLE"), "g / 3.0"),
        (
            "amount",
            "numeric(12,2)",
            json!({"type": "DECIMAL", "nullable": true, "precision": 12, "scale": 2}),
            "(g % 1000000) / 100.0",
        ),
        ("name", "text", t("VARCHAR"), "'customer ' || g"),
        (
            "note",
            "text",
            t("VARCHAR"),
            "E'a \"quoted\" note\\twith a tab and \u{e9} ' || g",
        ),
        ("code", "varchar(20)", t("VARCHAR"), "'ABC-' || (g % 1000)"),
        (
            "born",
            "date",
            t("DATE"),
            "date '1950-01-01' + (g % 20000)::int",
        ),
        (
            "opens",
            "time",
            t("TIME"),
            "time '00:00' + (g % 86400) * interval '1 second'",
        ),
        (
            "created",
            "timestamp",
            t("TIMESTAMP"),
            "timestamp '2020-01-01' + g * interval '1.5 second'",
        ),
        (
            "updated",
            "timestamptz",
            t("TIMESTAMP_TZ"),
            "timestamptz '2020-01-01 00:00+00' + g * interval '1 ms'",
        ),
        ("uid", "uuid", t("UUID"), "md5(g::text)::uuid"),
        (
            "doc",
            "jsonb",
            t("VARIANT"),
            "jsonb_build_object('a', g, 'b', jsonb_build_array(true, null, 'x'))",
        ),
        (
            "blob",
            "bytea",
            t("VARBINARY"),
            "decode(md5(g::text), 'hex')",
        ),
        (
            "tags",
            "text[]",
            json!({"type": "ARRAY", "nullable": true, "component": {"type": "VARCHAR", "nullable": true}}),
            "ARRAY['red', 'green', 'light blue ' || g]",
        ),
        ("missing", "text", t("VARCHAR"), "NULL"),
    ]
}

fn narrow_columns() -> Vec<(&'static str, &'static str, Value, &'static str)> {
    vec![
        (
            "id",
            "bigint PRIMARY KEY",
            json!({"type": "BIGINT", "nullable": false}),
            "g",
        ),
        (
            "name",
            "text",
            json!({"type": "VARCHAR", "nullable": true}),
            "'customer ' || g",
        ),
        (
            "at",
            "timestamptz",
            json!({"type": "TIMESTAMP", "nullable": true}),
            "timestamptz '2024-03-10 10:34:56.789012+00' + g * interval '1 ms'",
        ),
    ]
}

fn columns(shape: Shape) -> Vec<(&'static str, &'static str, Value, &'static str)> {
    match shape {
        Shape::Narrow => narrow_columns(),
        Shape::Wide => wide_columns(),
    }
}

fn schema(shape: Shape) -> Value {
    let fields: Vec<Value> = columns(shape)
        .into_iter()
        .map(|(c, _, ty, _)| json!({"name": c, "case_sensitive": false, "columntype": ty}))
        .collect();
    json!({"inputs": [{"name": shape.table(), "case_sensitive": false, "primary_key": ["id"],
        "materialized": false, "properties": {}, "fields": fields}], "outputs": []})
}

/// Creates and fills the table of `shape` with `rows` rows, then freezes and analyzes it.
fn fill(pg: &PgCluster, shape: Shape, rows: u64) {
    let cols = columns(shape);
    let table = shape.table();
    let defs: Vec<String> = cols
        .iter()
        .map(|(c, ty, _, _)| format!("{c} {ty}"))
        .collect();
    let values: Vec<&str> = cols.iter().map(|(_, _, _, v)| *v).collect();
    pg.psql(
        DATABASE,
        &format!(
            "CREATE TABLE {table} ({}); CREATE PUBLICATION p_{table} FOR TABLE {table};",
            defs.join(", ")
        ),
    );
    pg.psql(
        DATABASE,
        &format!(
            "INSERT INTO {table} SELECT {} FROM generate_series(1, {rows}) g",
            values.join(", ")
        ),
    );
    pg.psql(DATABASE, &format!("VACUUM (FREEZE, ANALYZE) {table}"));
}

/// Runs every combination; returns every run in the order measured.
pub fn run(pg: &PgCluster, args: &SnapshotArgs) -> Result<Vec<SnapshotRun>, String> {
    pg.create_database(DATABASE);
    let mut runs = Vec::new();
    let mut counter = 0;
    for (shape, rows) in [
        (Shape::Narrow, args.narrow_rows),
        (Shape::Wide, args.wide_rows),
    ] {
        if rows == 0 {
            continue;
        }
        println!("{}: filling {rows} rows", shape.label());
        fill(pg, shape, rows);
        let size = pg.psql(
            DATABASE,
            &format!("SELECT pg_size_pretty(pg_table_size('{}'))", shape.table()),
        );
        println!("{}: {rows} rows, {size} on disk", shape.label());
        for sink in &args.sinks {
            for workers in &args.workers {
                for binary in &args.binaries {
                    counter += 1;
                    let baseline = plain_copy(pg, shape)?;
                    let run = measure(
                        pg, args, shape, rows, binary, *workers, *sink, counter, baseline,
                    )?;
                    print_run(&run);
                    runs.push(run);
                }
            }
        }
    }
    Ok(runs)
}

/// `psql -c "COPY t TO STDOUT" > /dev/null`: its wall-clock time.
fn plain_copy(pg: &PgCluster, shape: Shape) -> Result<Duration, String> {
    let program = find_pg_bin()?.join("psql");
    let mut command = Command::new(program);
    command
        .args(["-X", "-q", "-h", "127.0.0.1", "-p", &pg.port().to_string()])
        .args(["-U", "postgres", "-d", DATABASE])
        .args(["-c", &format!("COPY {} TO STDOUT", shape.table())]);
    super::time_command("psql COPY", &mut command)
}

#[allow(clippy::too_many_arguments)]
fn measure(
    pg: &PgCluster,
    args: &SnapshotArgs,
    shape: Shape,
    rows: u64,
    binary: &Binary,
    workers: u32,
    sink: Sink,
    counter: u32,
    baseline: Duration,
) -> Result<SnapshotRun, String> {
    let feldera = FelderaDouble::start(
        DoubleConfig::new("demo", schema(shape)).with_discard(sink == Sink::Discard),
    )
    .map_err(|e| format!("start the double: {e}"))?;
    let slot = format!("snap_{counter}");
    let table = shape.table();
    let state_dir = super::state_dir(&slot)?;
    let mut vars = support::connector_vars(
        &pg.url(DATABASE),
        &feldera.base_url(),
        &format!("p_{table}"),
        table,
        &state_dir,
    );
    vars.extend([
        ("PG_SLOT".to_owned(), slot.clone()),
        ("SNAPSHOT_MODE".to_owned(), "initial".to_owned()),
        ("SNAPSHOT_WORKERS".to_owned(), workers.to_string()),
    ]);
    let double_cpu_before = super::cpu_seconds(std::process::id());
    let mut connector = Launched::start(&args.common, &binary.path, &slot, vars, state_dir)?;
    let done = super::poll_until(RUN_TIMEOUT, Duration::from_millis(5), "the copy", || {
        connector.check_running()?;
        Ok(connector.logged(COMPLETE))
    });
    let copy = connector.started.elapsed();
    done.map_err(|e| connector.failure(&e))?;
    let pid = connector.pid();
    let run = SnapshotRun {
        shape,
        rows,
        binary: binary.label.clone(),
        workers,
        sink,
        baseline,
        copy,
        peak_rss_kib: super::peak_rss_kib(pid)?,
        ingress_requests: feldera
            .request_counts()
            .get("ingress")
            .copied()
            .unwrap_or(0),
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
    check_rows(&feldera, table, sink, rows)?;
    Ok(run)
}

/// The stand-in received every row once: applied (the double) or counted (discard).
fn check_rows(feldera: &FelderaDouble, table: &str, sink: Sink, rows: u64) -> Result<(), String> {
    let held = match sink {
        Sink::Double => {
            let t = feldera.table(table).ok_or("no such table in the double")?;
            t.rows.iter().filter(|r| r.weight == 1).count() as u64
        }
        Sink::Discard => feldera
            .requests()
            .iter()
            .filter(|r| r.endpoint == "ingress" && r.status == 200)
            .filter_map(|r| r.rows)
            .sum(),
    };
    if held == rows {
        Ok(())
    } else {
        Err(format!(
            "the stand-in received {held} rows, expected {rows}"
        ))
    }
}

fn print_run(r: &SnapshotRun) {
    println!(
        "{:<22} {:<18} workers {} sink {:<22}: COPY {:>6.2} s, connector {:>6.2} s, ratio {:.2}; \
         peak RSS {}; {} ingress; CPU s connector {:.2} ({:.2} per 100k rows), double {:.2}; load {}",
        r.binary,
        r.shape.label(),
        r.workers,
        r.sink.label(),
        r.baseline.as_secs_f64(),
        r.copy.as_secs_f64(),
        r.ratio(),
        mib(r.peak_rss_kib),
        r.ingress_requests,
        r.cpu_connector,
        cpu_per_100k(r.cpu_connector, r.rows),
        r.cpu_double,
        super::load_average(),
    );
}

pub fn print_summary(runs: &[SnapshotRun]) {
    println!("\n| table | rows | sink | workers | binary | psql COPY (s) | connector copy (s) | ratio | rows/s | peak RSS | ingress requests | connector CPU s (per 100k rows) | double CPU s |");
    println!("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|");
    for r in runs {
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | **{:.2}** | {:.0} | {} | {} | {:.2} ({:.2}) | {:.2} |",
            r.shape.label(),
            r.rows,
            r.sink.label(),
            r.workers,
            r.binary,
            r.baseline.as_secs_f64(),
            r.copy.as_secs_f64(),
            r.ratio(),
            r.rows as f64 / r.copy.as_secs_f64(),
            mib(r.peak_rss_kib),
            r.ingress_requests,
            r.cpu_connector,
            cpu_per_100k(r.cpu_connector, r.rows),
            r.cpu_double,
        );
    }
}
