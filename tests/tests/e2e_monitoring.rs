//! The dashboard and the alert rules in `docs/monitoring/` name only metrics a running
//! connector exports: each `slotline_*` name in them must be a metric family of a real
//! scrape (both shells), so a renamed or removed metric fails here rather than leaving a
//! dashboard blank or an alert silent.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::pg::wait_for;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE PUBLICATION pub FOR TABLE users;";

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": true, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}
    ], "outputs": []})
}

fn monitoring(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/monitoring")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `slotline_...` identifier in `text`.
fn names(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("slotline_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if end > "slotline_".len() {
            found.insert(tail[..end].to_owned());
        }
        rest = &tail[end.max(1)..];
    }
    found
}

/// The PromQL expressions of the dashboard (every `expr` and template `query`).
fn dashboard_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "query", serde_json::Value::String(expr)) => out.push(expr.clone()),
                    _ => dashboard_exprs(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

/// The metric families of a scrape, with the sample names Prometheus derives from them
/// (`_total` of a counter, `_bucket`/`_sum`/`_count` of a histogram).
fn exported(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        names.insert(name.to_owned());
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {}
        }
    }
    names
}

fn get(url: &str) -> String {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    agent
        .get(url)
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

fn every_metric_the_dashboard_and_alerts_name_is_exported(shell: Shell) {
    let dashboard: serde_json::Value =
        serde_json::from_str(&monitoring("grafana-dashboard.json")).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 9, "{exprs:?}");
    let alerts = monitoring("prometheus-alerts.yml");
    let mut wanted: BTreeSet<String> = exprs.iter().flat_map(|e| names(e)).collect();
    // The rules' expressions and the metrics their annotations query.
    wanted.extend(names(&alerts));
    assert!(wanted.len() >= 12, "{wanted:?}");

    let env = Env::new("monitoring", SETUP, schema());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let addr = format!("127.0.0.1:{port}");
    let connector = env.start(
        shell,
        &[
            ("TABLES", "users"),
            ("METRICS_ADDR", addr.as_str()),
            ("SLOT_CHECK_INTERVAL_MS", "200"),
            ("BATCH_LINGER_MS", "0"),
        ],
    );
    assert!(
        connector.wait_log("streaming from slot", Duration::from_secs(60)),
        "{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'a'), (2, 'b')");
    assert!(env.wait_caught_up(Duration::from_secs(30)));
    // Once a batch completed and the slot was sampled, every family is there.
    let scrape = wait_for(Duration::from_secs(10), || {
        let text = get(&format!("http://{addr}/metrics"));
        (text.contains("slotline_slot_retained_wal_bytes") && text.contains("slotline_rows_sent"))
            .then_some(text)
    })
    .unwrap_or_else(|| panic!("no complete scrape\n{}", connector.log_text()));
    let exported = exported(&scrape);
    let missing: Vec<&String> = wanted.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "named in docs/monitoring but not exported: {missing:?}\nexported: {exported:?}"
    );
    drop(connector);
}

#[test]
fn every_metric_the_dashboard_and_alerts_name_is_exported_tokio() {
    every_metric_the_dashboard_and_alerts_name_is_exported(Shell::Tokio);
}

#[test]
fn every_metric_the_dashboard_and_alerts_name_is_exported_blocking() {
    every_metric_the_dashboard_and_alerts_name_is_exported(Shell::Blocking);
}

#[test]
fn the_name_scanner_sees_what_a_renamed_metric_would_break() {
    let found = names(r#"rate(slotline_rows_sent_total{x="slotline"}[1m]) / slotline_lag"#);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["slotline_lag", "slotline_rows_sent_total"]
    );
    let scrape = "# TYPE slotline_rows_sent counter\nslotline_rows_sent_total 3\n# TYPE slotline_w histogram\n";
    let exported = exported(scrape);
    assert!(exported.contains("slotline_rows_sent_total"));
    assert!(exported.contains("slotline_w_bucket"));
    assert!(!exported.contains("slotline_lag"));
}
