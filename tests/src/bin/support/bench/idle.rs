//! The idle suite: CPU and memory of caught-up connectors that have nothing to do, and the
//! size of the binaries.
//!
//! Owns: the idle runs and the size report. Never asserts a figure.

use super::{mib, Binary, Common, Launched};
use crate::support::{self, Psql};
use serde_json::json;
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};
use slotline_tests::pg::PgCluster;
use std::path::Path;
use std::time::Duration;

/// CPU over `duration` and RSS at its end, per binary (by label).
pub fn run(
    pg: &PgCluster,
    binaries: &[Binary],
    common: &Common,
    duration: Duration,
) -> Result<Vec<(String, f64, u64)>, String> {
    let db = pg.create_database("idle");
    pg.psql(
        &db,
        "CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL); CREATE PUBLICATION p FOR TABLE t;",
    );
    let schema = json!({"inputs": [{"name": "t", "case_sensitive": false, "primary_key": ["id"],
        "materialized": false, "properties": {}, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "v", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": false}}]}],
        "outputs": []});
    let mut psql = Psql::connect(pg.port(), &db)?;
    let mut running = Vec::new();
    for binary in binaries {
        let feldera = FelderaDouble::start(DoubleConfig::new("demo", schema.clone()))
            .map_err(|e| format!("start the double: {e}"))?;
        let slot = format!("idle_{}", running.len());
        let state_dir = super::state_dir(&slot)?;
        let mut vars =
            support::connector_vars(&pg.url(&db), &feldera.base_url(), "p", "t", &state_dir);
        vars.push(("PG_SLOT".to_owned(), slot.clone()));
        let mut connector = Launched::start(common, &binary.path, &slot, vars, state_dir)?;
        super::poll_until(
            Duration::from_secs(60),
            Duration::from_millis(10),
            "the connector to stream",
            || {
                connector.check_running()?;
                psql.slot_active(&slot)
            },
        )
        .map_err(|e| connector.failure(&e))?;
        running.push((binary.label.clone(), connector, feldera));
    }
    println!(
        "idle: measuring {} s of CPU of caught-up connectors",
        duration.as_secs()
    );
    let before: Vec<f64> = running
        .iter()
        .map(|(_, c, _)| super::cpu_seconds(c.pid()))
        .collect();
    std::thread::sleep(duration);
    let mut out = Vec::new();
    for ((label, connector, _), before) in running.iter_mut().zip(before) {
        connector.check_running()?;
        let pid = connector.pid();
        out.push((
            label.clone(),
            super::cpu_seconds(pid) - before,
            super::current_rss_kib(pid)?,
        ));
    }
    Ok(out)
}

/// Size of the binary as built, and after `strip` (a temporary copy).
fn sizes(binary: &Path) -> (u64, Option<u64>) {
    let built = std::fs::metadata(binary).map_or(0, |m| m.len());
    let copy = std::env::temp_dir().join(format!(
        "slotline-size-{}-{}",
        std::process::id(),
        binary.file_name().and_then(|n| n.to_str()).unwrap_or("bin")
    ));
    let stripped = std::fs::copy(binary, &copy)
        .ok()
        .filter(|_| {
            std::process::Command::new("strip")
                .arg(&copy)
                .status()
                .is_ok_and(|s| s.success())
        })
        .and_then(|_| std::fs::metadata(&copy).ok())
        .map(|m| m.len());
    let _ = std::fs::remove_file(&copy);
    (built, stripped)
}

pub fn print_summary(binaries: &[Binary], idle: &[(String, f64, u64)], secs: u64) {
    println!("\n| binary | size as built | stripped |");
    println!("|---|---:|---:|");
    for binary in binaries {
        let (built, stripped) = sizes(&binary.path);
        println!(
            "| {} | {} | {} |",
            binary.label,
            mib(built / 1024),
            stripped.map_or("strip failed".to_owned(), |s| mib(s / 1024))
        );
    }
    if idle.is_empty() {
        return;
    }
    println!(
        "\n| binary | idle CPU over {secs} s (utime+stime, {:.0} ms ticks) | share of one core | RSS at the end |",
        1000.0 / super::clock_ticks()
    );
    println!("|---|---:|---:|---:|");
    for (label, cpu, rss) in idle {
        println!(
            "| {} | {:.2} s | {:.3} % | {} |",
            label,
            cpu,
            cpu / secs as f64 * 100.0,
            mib(*rss)
        );
    }
}
