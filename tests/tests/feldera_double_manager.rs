//! The pipeline manager's part of the Feldera double (docs/feldera.md, "Against Feldera's
//! own server"): a crashed pipeline left stopped with its error until started, 503s by
//! deployment status, the manager's timeout for requests it forwards whole and its one
//! retry after a failure with a cached status, and what that retry does (and does not do)
//! to the order of requests.

#[path = "feldera_double/client.rs"]
mod client;

use std::time::{Duration, Instant};

use client::{schema, start, start_with, Client, PIPELINE};
use serde_json::{json, Value};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble, STOPPING_FOR};

fn pipeline(c: &Client) -> Value {
    c.get(&format!("/v0/pipelines/{PIPELINE}")).json()
}

fn stats(c: &Client) -> client::Reply {
    c.get(&format!("/v0/pipelines/{PIPELINE}/stats"))
}

/// `total_records` of `table`'s ingress endpoints, from `/stats`.
fn records_read(c: &Client, table: &str) -> u64 {
    let stats = stats(c).json();
    stats["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .filter(|i| i["config"]["stream"] == table)
        .map(|i| i["metrics"]["total_records"].as_u64().unwrap_or(0))
        .sum()
}

fn names(double: &FelderaDouble) -> Vec<(i64, String)> {
    let mut rows: Vec<(i64, String)> = double
        .table("t")
        .unwrap()
        .rows
        .iter()
        .map(|r| {
            (
                r.row["id"].as_i64().unwrap(),
                r.row["name"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn body(ids: std::ops::RangeInclusive<i64>, name: &str) -> String {
    ids.map(|id| json!({"insert": {"id": id, "name": name}}).to_string() + "\n")
        .collect()
}

#[test]
fn a_crashed_pipeline_stays_stopped_with_its_error_until_someone_starts_it() {
    let double = start();
    let c = Client::new(&double);
    let token = c.ingest_ok("t", &body(1..=1, "a"));
    let before = double.incarnation();

    double.crash();
    let p = pipeline(&c);
    assert_eq!(p["deployment_status"], "Stopping");
    assert_eq!(p["deployment_desired_status"], "Stopped");
    assert_eq!(p["deployment_runtime_status"], Value::Null);
    assert_eq!(p["deployment_error"]["error_code"], "RunnerCheckError");
    // Every pipeline endpoint, `checkpoint_status` and queries included: the manager checks
    // the deployment before forwarding anything.
    let completion = c.completion(&token);
    for reply in [
        stats(&c),
        completion,
        c.ingress("t", &body(2..=2, "a")),
        c.query("SELECT * FROM t"),
        c.get(&format!("/v0/pipelines/{PIPELINE}/checkpoint_status")),
        c.post(&format!("/v0/pipelines/{PIPELINE}/start_transaction"), ""),
    ] {
        assert_eq!(reply.status, 503, "{}", reply.text);
        assert_eq!(reply.error_code(), "PipelineInteractionNotDeployed");
    }
    let refused = c.post(&format!("/v0/pipelines/{PIPELINE}/start"), "");
    assert_eq!(
        refused.status, 400,
        "a start while stopping: {}",
        refused.text
    );
    assert_eq!(refused.error_code(), "IllegalPipelineAction");

    std::thread::sleep(STOPPING_FOR + Duration::from_millis(1_500));
    let p = pipeline(&c);
    assert_eq!(p["deployment_status"], "Stopped", "nothing restarted it");
    assert_eq!(p["deployment_desired_status"], "Stopped");
    assert_eq!(p["deployment_error"]["error_code"], "RunnerCheckError");
    assert_eq!(
        c.get("/v0/pipelines").json()[0]["deployment_status"],
        "Stopped"
    );
    assert_eq!(stats(&c).error_code(), "PipelineInteractionNotDeployed");

    let started = c.post(&format!("/v0/pipelines/{PIPELINE}/start"), "");
    assert_eq!(started.status, 202, "{}", started.text);
    let p = pipeline(&c);
    assert_eq!(p["deployment_status"], "Running");
    assert_eq!(p["deployment_error"], Value::Null, "the start dismissed it");
    assert_ne!(double.incarnation(), before, "a new process");
    assert_eq!(c.completion(&token).status, 410, "the old process's token");
    assert!(
        names(&double).is_empty(),
        "no fault tolerance: nothing came back"
    );
    c.ingest_ok("t", &body(3..=3, "a"));
}

#[test]
fn a_request_forwarded_whole_is_503_after_the_manager_timeout_and_twice_that_with_a_cached_status()
{
    let timeout = Duration::from_millis(400);
    let double = start_with(DoubleConfig::new(PIPELINE, schema()).with_request_timeout(timeout));
    let c = Client::new(&double);
    double.stall_answers(Duration::from_secs(30));

    // No cache entry yet: one attempt.
    let sent = Instant::now();
    let r = stats(&c);
    let first = sent.elapsed();
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.error_code(), "PipelineInteractionUnreachable");
    assert!(first >= timeout && first < 2 * timeout, "{first:?}");

    // The entry that check made is fresh: the failure evicts it and the manager sends the
    // request once more, its status read afresh (so not a third time).
    let sent = Instant::now();
    let r = c.get(&format!("/v0/pipelines/{PIPELINE}/checkpoint_status"));
    let second = sent.elapsed();
    assert_eq!(r.error_code(), "PipelineInteractionUnreachable");
    assert!(second >= 2 * timeout && second < 3 * timeout, "{second:?}");

    // Ingress is streamed: neither held by the stall nor given the 10 s timeout.
    c.ingest_ok("t", &body(1..=1, "a"));
}

#[test]
fn a_retried_post_is_carried_out_twice_first_the_lost_attempt_then_the_retry() {
    let timeout = Duration::from_millis(400);
    let double = start_with(DoubleConfig::new(PIPELINE, schema()).with_request_timeout(timeout));
    let c = Client::new(&double);
    let start_txn = format!("/v0/pipelines/{PIPELINE}/start_transaction");
    let commit_txn = format!("/v0/pipelines/{PIPELINE}/commit_transaction");

    // A cached status (a request within 5 s), a pipeline that answers only after the first
    // attempt timed out: the first opens the transaction, the retry finds it open.
    assert_eq!(stats(&c).status, 200);
    double.stall_answers(timeout + timeout / 2);
    let r = c.post(&start_txn, "");
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.error_code(), "TransactionInProgress");
    let token = c.ingest_ok("t", &body(1..=1, "a"));

    // The same for the commit: the first attempt commits, the retry finds none open.
    double.stall_answers(timeout + timeout / 2);
    let r = c.post(&commit_txn, "");
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.error_code(), "NoTransactionInProgress");
    wait_until("the committed row is complete", || {
        c.completion(&token).json()["status"] == "complete"
    });
    assert_eq!(names(&double), vec![(1, "a".to_owned())]);
}

#[test]
fn without_a_cached_status_a_post_is_sent_once_its_503_does_not_mean_it_was_not_carried_out() {
    let timeout = Duration::from_millis(400);
    let double = start_with(DoubleConfig::new(PIPELINE, schema()).with_request_timeout(timeout));
    let c = Client::new(&double);
    double.stall_answers(timeout * 2);
    let r = c.post(&format!("/v0/pipelines/{PIPELINE}/start_transaction"), "");
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.error_code(), "PipelineInteractionUnreachable");
    std::thread::sleep(timeout * 2);
    // The pipeline got the request, and opened the transaction once the stall ended.
    let r = c.post(&format!("/v0/pipelines/{PIPELINE}/start_transaction"), "");
    assert_eq!(r.error_code(), "TransactionInProgress", "{}", r.text);
}

/// Two requests of one table: `A` the manager gave up on during a pause, `B` sent after the
/// resume. The manager never sends an ingress body again (it streams it; only requests
/// without a body are retried), so `A` lands once, at the resume, before `B`; `B` wins.
#[test]
fn an_ingress_body_the_manager_gave_up_on_lands_once_and_before_the_next_request_of_its_table() {
    let double = start_with(
        DoubleConfig::new(PIPELINE, schema()).with_proxy_timeout(Duration::from_millis(300)),
    );
    let c = Client::new(&double);
    double.pause();
    let a = c.ingress("t", &body(1..=20, "a"));
    assert_eq!(a.status, 503, "{}", a.text);
    assert_eq!(a.error_code(), "PipelineInteractionUnreachable");
    std::thread::sleep(Duration::from_millis(300));
    double.resume();
    wait_until("A landed at the resume", || names(&double).len() == 20);
    assert!(names(&double).iter().all(|(_, n)| n == "a"));
    assert_eq!(records_read(&c, "t"), 20, "A was read once");

    c.ingest_ok("t", &body(1..=20, "b"));
    wait_until("B is applied", || {
        names(&double).iter().all(|(_, n)| n == "b")
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        names(&double).iter().all(|(_, n)| n == "b"),
        "nothing of A after B"
    );
    assert_eq!(records_read(&c, "t"), 40, "A once and B once");
}
