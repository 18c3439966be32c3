//! The Feldera double's checkpoints, incarnations and fault tolerance over real HTTP:
//! `/stats`, `/checkpoint`, `/checkpoint_status`, `runtime_config.fault_tolerance`, and
//! the restarts that come back empty or from the last checkpoint (docs/feldera.md).

#[path = "feldera_double/client.rs"]
mod client;

use std::time::{Duration, Instant};

use client::{schema, start, start_with, Client, PIPELINE};
use serde_json::{json, Value};
use slotline_tests::feldera_double::{
    CheckpointCounts, DoubleConfig, Edition, FelderaDouble, COMMUNITY_ERROR,
    COMMUNITY_FAULT_TOLERANCE_ERROR,
};

const NO_STORAGE: &str =
    "The pipeline does not support checkpointing for the following reasons: Storage must be configured";

fn ids(double: &FelderaDouble) -> Vec<i64> {
    double
        .table("t")
        .expect("table t")
        .rows
        .iter()
        .map(|r| r.row["id"].as_i64().expect("an id"))
        .collect()
}

fn insert(c: &Client, id: i64) -> String {
    c.ingest_ok("t", &format!("{{\"insert\": {{\"id\": {id}}}}}"))
}

fn path(tail: &str) -> String {
    format!("/v0/pipelines/{PIPELINE}/{tail}")
}

/// `POST /checkpoint`: `(sequence number, incarnation)`.
fn checkpoint(c: &Client) -> (u64, String) {
    let r = c.post(&path("checkpoint"), "");
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    let keys: Vec<&String> = body.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["checkpoint_sequence_number", "incarnation_uuid"]);
    (
        body["checkpoint_sequence_number"]
            .as_u64()
            .expect("a number"),
        body["incarnation_uuid"]
            .as_str()
            .expect("a UUID")
            .to_string(),
    )
}

fn status(c: &Client) -> Value {
    let r = c.get(&path("checkpoint_status"));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

fn stats(c: &Client) -> Value {
    let r = c.get(&path("stats"));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// Polls `checkpoint_status` until `success` is `seq`; panics after 5 s.
fn wait_success(c: &Client, seq: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = status(c);
        if s["success"] == json!(seq) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "checkpoint {seq} never succeeded: {s}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn with_ft(model: &str) -> FelderaDouble {
    let double = start();
    double
        .set_fault_tolerance(Some(model))
        .expect("a known model");
    double
}

#[test]
fn the_pipeline_shows_fault_tolerance_as_feldera_serializes_ft_config() {
    let double = start();
    let c = Client::new(&double);
    let pipeline = c.get(&format!("/v0/pipelines/{PIPELINE}")).json();
    assert_eq!(
        pipeline["runtime_config"]["fault_tolerance"],
        json!({"model": "none", "checkpoint_interval_secs": 60})
    );
    assert_eq!(
        pipeline["program_status"], "Success",
        "the rest is unchanged"
    );
    for model in ["at_least_once", "exactly_once"] {
        double.set_fault_tolerance(Some(model)).unwrap();
        assert_eq!(
            c.get(&format!("/v0/pipelines/{PIPELINE}")).json()["runtime_config"]["fault_tolerance"],
            json!({"model": model, "checkpoint_interval_secs": 60})
        );
    }
    double.set_fault_tolerance(Some("none")).unwrap();
    assert_eq!(
        c.get(&format!("/v0/pipelines/{PIPELINE}")).json()["runtime_config"]["fault_tolerance"]
            ["model"],
        "none"
    );
    assert!(double.set_fault_tolerance(Some("twice")).is_err());
}

#[test]
fn a_checkpoint_succeeds_after_its_delay_and_every_request_is_logged() {
    let double = with_ft("at_least_once");
    double.set_checkpoint_delay(Duration::from_millis(300));
    let c = Client::new(&double);
    let before = Instant::now();
    let (seq, incarnation) = checkpoint(&c);
    assert_eq!(seq, 0, "Feldera numbers from 0 in each process");
    assert_eq!(incarnation, double.incarnation());
    assert_eq!(status(&c), json!({"success": null, "failure": null}));
    let s = stats(&c);
    assert_eq!(s["checkpoint_activity"]["status"], "in_progress");
    assert_eq!(
        s["global_metrics"]["incarnation_uuid"],
        double.incarnation()
    );
    wait_success(&c, 0);
    assert!(before.elapsed() >= Duration::from_millis(300));
    assert_eq!(stats(&c)["checkpoint_activity"], json!({"status": "idle"}));
    assert_eq!(
        double.checkpoint_counts(),
        CheckpointCounts {
            requested: 1,
            succeeded: 1,
            failed: 0
        }
    );
    let kinds: Vec<String> = double
        .requests()
        .into_iter()
        .map(|r| r.endpoint)
        .filter(|e| e != "ingress")
        .collect();
    for kind in ["checkpoint", "checkpoint_status", "stats"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
}

#[test]
fn stats_show_the_incarnation_state_and_counters_in_feldera_s_shape() {
    let double = start();
    let c = Client::new(&double);
    insert(&c, 1);
    insert(&c, 2);
    let s = stats(&c);
    let g = &s["global_metrics"];
    assert_eq!(g["incarnation_uuid"], double.incarnation());
    assert_eq!(g["state"], "Running");
    assert_eq!(g["transaction_status"], "NoTransaction");
    assert_eq!(g["total_processed_records"], 2);
    assert_eq!(g["total_completed_steps"], 2);
    assert!(g["start_time"].is_u64() && g["uptime_msecs"].is_u64());
    assert_eq!(s["permanent_checkpoint_errors"], json!(["StorageRequired"]));
    assert_eq!(
        s["suspend_error"],
        json!({"Permanent": ["StorageRequired"]})
    );
    // One input endpoint for both requests, as the real server lists it.
    let inputs = s["inputs"].as_array().expect("inputs");
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["config"]["stream"], "t");
    assert_eq!(inputs[0]["metrics"]["total_records"], 2);
    assert_eq!(inputs[0]["paused"], false);
    assert!(inputs[0]["endpoint_name"]
        .as_str()
        .is_some_and(|name| name.starts_with("t.api-ingress")));
    double.pause();
    assert_eq!(stats(&c)["global_metrics"]["state"], "Paused");
    double.resume();
    double.set_unavailable(None);
    assert_eq!(c.get(&path("stats")).status, 503);
    double.clear_unavailable();
    double.set_phase(slotline_tests::feldera_double::Phase::Initializing);
    assert_eq!(c.get(&path("stats")).error_code(), "Initializing");
    assert_eq!(
        c.get(&path("checkpoint_status")).status,
        200,
        "Feldera's checkpoint_status needs no controller"
    );
}

#[test]
fn without_fault_tolerance_a_checkpoint_is_accepted_and_fails_for_lack_of_storage() {
    let double = start();
    let c = Client::new(&double);
    insert(&c, 1);
    let (seq, _) = checkpoint(&c);
    assert_eq!(seq, 0);
    let s = status(&c);
    assert_eq!(s["success"], Value::Null);
    assert_eq!(s["failure"]["sequence_number"], 0);
    assert_eq!(s["failure"]["error"], NO_STORAGE);
    let failed_at = s["failure"]["failed_at"].as_str().expect("a timestamp");
    assert!(
        failed_at.len() >= 20 && failed_at.ends_with('Z') && failed_at.contains('T'),
        "{failed_at}"
    );
    assert_eq!(checkpoint(&c).0, 1);
    assert_eq!(status(&c)["failure"]["sequence_number"], 1);
    assert_eq!(
        double.checkpoint_counts(),
        CheckpointCounts {
            requested: 2,
            succeeded: 0,
            failed: 2
        }
    );
}

/// Feldera's community edition, as its real server answered (docs/feldera.md, "Against
/// Feldera's own server"): fault tolerance refused, every checkpoint accepted and then
/// failed with the enterprise reason first.
#[test]
fn the_community_edition_refuses_fault_tolerance_and_every_checkpoint() {
    let double = start_with(DoubleConfig::new(PIPELINE, schema()).with_edition(Edition::Community));
    let refused = double
        .set_fault_tolerance(Some("at_least_once"))
        .expect_err("the community edition has no fault tolerance");
    assert_eq!(refused.to_string(), COMMUNITY_FAULT_TOLERANCE_ERROR);
    assert_eq!(
        COMMUNITY_FAULT_TOLERANCE_ERROR,
        "Cannot use enterprise-only feature (fault tolerance) in Feldera community edition."
    );
    let c = Client::new(&double);
    assert_eq!(
        c.get(&format!("/v0/pipelines/{PIPELINE}")).json()["runtime_config"]["fault_tolerance"]
            ["model"],
        "none"
    );
    insert(&c, 1);
    // The manager refuses the request itself; the pipeline never hears of it.
    let r = c.post(&path("checkpoint"), "");
    assert_eq!(r.status, 501, "{}", r.text);
    assert_eq!(r.error_code(), "EnterpriseFeature");
    assert_eq!(
        r.json()["message"],
        "Cannot use enterprise-only feature (checkpoint) in Feldera community edition."
    );
    let s = status(&c);
    assert_eq!((&s["success"], &s["failure"]), (&Value::Null, &Value::Null));
    // Asked directly, the community pipeline refuses with the enterprise reason first.
    assert_eq!(
        COMMUNITY_ERROR,
        "The pipeline does not support checkpointing for the following reasons: Suspend is an enterprise feature, Storage must be configured"
    );
}

#[test]
fn a_checkpoint_holds_the_tables_as_they_were_when_it_was_requested() {
    let double = with_ft("at_least_once");
    double.hold_checkpoints(true);
    let c = Client::new(&double);
    insert(&c, 1);
    checkpoint(&c);
    insert(&c, 2);
    double.hold_checkpoints(false);
    wait_success(&c, 0);
    insert(&c, 3);
    assert_eq!(ids(&double), [1, 2, 3]);
    double.crash_restart();
    assert_eq!(
        ids(&double),
        [1],
        "rows ingested after the request are not in it"
    );
}

#[test]
fn a_request_made_while_a_checkpoint_is_written_shares_that_checkpoint() {
    let double = with_ft("at_least_once");
    double.hold_checkpoints(true);
    let c = Client::new(&double);
    insert(&c, 1);
    assert_eq!(checkpoint(&c).0, 0);
    insert(&c, 2);
    assert_eq!(checkpoint(&c).0, 1);
    double.hold_checkpoints(false);
    wait_success(&c, 1);
    double.crash_restart();
    assert_eq!(
        ids(&double),
        [1],
        "checkpoint 1 succeeded with the state checkpoint 0 saved, as in Feldera"
    );
}

#[test]
fn failed_checkpoints_are_reported_and_never_restored() {
    let double = with_ft("at_least_once");
    double.set_checkpoint_delay(Duration::ZERO);
    let c = Client::new(&double);
    insert(&c, 1);
    checkpoint(&c);
    wait_success(&c, 0);
    double.fail_next_checkpoints(1);
    insert(&c, 2);
    assert_eq!(checkpoint(&c).0, 1);
    let s = status(&c);
    assert_eq!(s["success"], 0, "a failure leaves success as it was");
    assert_eq!(s["failure"]["sequence_number"], 1);
    assert!(s["failure"]["error"].as_str().unwrap().contains("injected"));
    insert(&c, 3);
    double.crash_restart();
    assert_eq!(ids(&double), [1]);
    assert_eq!(
        double.checkpoint_counts(),
        CheckpointCounts {
            requested: 2,
            succeeded: 1,
            failed: 1
        }
    );
}

#[test]
fn a_later_success_keeps_the_last_failure() {
    let double = with_ft("exactly_once");
    double.set_checkpoint_delay(Duration::ZERO);
    let c = Client::new(&double);
    double.fail_next_checkpoints(1);
    checkpoint(&c);
    checkpoint(&c);
    let s = wait_success(&c, 1);
    assert_eq!(s["failure"]["sequence_number"], 0);
}

#[test]
fn after_a_restart_the_old_incarnation_is_refused_with_400() {
    let double = with_ft("at_least_once");
    let c = Client::new(&double);
    let (_, old) = checkpoint(&c);
    wait_success(&c, 0);
    let ok = c.get(&path(&format!("checkpoint_status?incarnation_uuid={old}")));
    assert_eq!(ok.status, 200);
    let new = double.restart(true);
    assert_ne!(new, old);
    let r = c.get(&path(&format!("checkpoint_status?incarnation_uuid={old}")));
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({
            "message": format!("Incarnation UUID mismatch ({old} in request, expected {new})"),
            "error_code": "IncarnationUuidMismatch",
            "details": {"requested": old, "expected": new},
        })
    );
    assert_eq!(
        status(&c),
        json!({"success": null, "failure": null}),
        "without the parameter: the new process's ambiguous status"
    );
    assert_eq!(
        c.get(&path(&format!("checkpoint_status?incarnation_uuid={new}")))
            .status,
        200
    );
    assert_eq!(
        c.get(&path("checkpoint_status?incarnation_uuid=nope"))
            .status,
        400
    );
    assert_eq!(stats(&c)["global_metrics"]["incarnation_uuid"], new);
    assert_eq!(
        checkpoint(&c),
        (0, new),
        "numbering restarts with the process"
    );
}

#[test]
fn crash_restart_without_fault_tolerance_comes_back_empty() {
    let double = start();
    let c = Client::new(&double);
    let token = insert(&c, 1);
    checkpoint(&c);
    let old = double.incarnation();
    let new = double.crash_restart();
    assert_ne!(new, old);
    assert_eq!(double.incarnation(), new);
    assert_eq!(ids(&double), Vec::<i64>::new());
    assert_eq!(c.completion(&token).status, 410);
    assert_eq!(stats(&c)["global_metrics"]["total_processed_records"], 0);
}

#[test]
fn crash_restart_with_at_least_once_restores_the_last_successful_checkpoint() {
    let double = with_ft("at_least_once");
    let c = Client::new(&double);
    insert(&c, 1);
    double.crash_restart();
    assert_eq!(ids(&double), Vec::<i64>::new(), "no checkpoint yet: empty");
    insert(&c, 1);
    insert(&c, 2);
    checkpoint(&c);
    wait_success(&c, 0);
    insert(&c, 3);
    c.ingest_ok("t", r#"{"delete": {"id": 1}}"#);
    assert_eq!(ids(&double), [2, 3]);
    let token = insert(&c, 4);
    double.crash_restart();
    assert_eq!(
        ids(&double),
        [1, 2],
        "what came after the checkpoint is gone"
    );
    assert_eq!(c.completion(&token).status, 410);
    let g = stats(&c)["global_metrics"].clone();
    assert_eq!(
        g["total_processed_records"], 2,
        "restored with the checkpoint"
    );
    insert(&c, 5);
    assert_eq!(ids(&double), [1, 2, 5]);
}

#[test]
fn crash_restart_with_exactly_once_replays_every_processed_step() {
    let double = with_ft("exactly_once");
    let c = Client::new(&double);
    insert(&c, 1);
    checkpoint(&c);
    wait_success(&c, 0);
    insert(&c, 2);
    double.set_completion_delay(slotline_tests::feldera_double::CompletionDelay::Never);
    insert(&c, 3);
    double.crash_restart();
    assert_eq!(
        ids(&double),
        [1, 2],
        "the journal replays processed steps; the unprocessed queue is lost"
    );
}

#[test]
fn a_checkpoint_requested_in_an_open_transaction_waits_for_the_commit() {
    let double = with_ft("at_least_once");
    double.set_checkpoint_delay(Duration::from_millis(20));
    let c = Client::new(&double);
    insert(&c, 1);
    assert_eq!(c.post(&path("start_transaction"), "").status, 200);
    insert(&c, 2);
    let (seq, _) = checkpoint(&c);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        status(&c)["success"],
        Value::Null,
        "delayed by the transaction"
    );
    let s = stats(&c);
    assert_eq!(s["checkpoint_activity"]["status"], "delayed");
    assert_eq!(
        s["checkpoint_activity"]["reasons"],
        json!(["TransactionInProgress"])
    );
    assert_eq!(
        s["global_metrics"]["transaction_status"],
        "TransactionInProgress"
    );
    assert_eq!(c.post(&path("commit_transaction"), "").status, 200);
    wait_success(&c, seq);
    insert(&c, 3);
    double.crash_restart();
    assert_eq!(ids(&double), [1, 2], "saved right after the commit");
}

#[test]
fn a_checkpoint_also_waits_for_a_commit_still_in_progress() {
    let double = with_ft("at_least_once");
    double.set_checkpoint_delay(Duration::ZERO);
    double.hold_commits(true);
    let c = Client::new(&double);
    assert_eq!(c.post(&path("start_transaction"), "").status, 200);
    insert(&c, 1);
    assert_eq!(c.post(&path("commit_transaction"), "").status, 200);
    checkpoint(&c);
    assert_eq!(
        stats(&c)["global_metrics"]["transaction_status"],
        "CommitInProgress"
    );
    assert_eq!(status(&c)["success"], Value::Null);
    double.release_completions();
    wait_success(&c, 0);
    double.crash_restart();
    assert_eq!(ids(&double), [1]);
}

#[test]
fn the_control_routes_drive_fault_tolerance_checkpoints_and_crashes() {
    let double = start();
    let c = Client::new(&double);
    let r = c.post("/control/fault_tolerance", r#"{"model": "at_least_once"}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        c.get(&format!("/v0/pipelines/{PIPELINE}")).json()["runtime_config"]["fault_tolerance"]
            ["model"],
        "at_least_once"
    );
    assert_eq!(
        c.post("/control/fault_tolerance", r#"{"model": "twice"}"#)
            .status,
        400
    );
    assert_eq!(
        c.post("/control/checkpoint_delay", r#"{"ms": 0}"#).status,
        200
    );
    assert_eq!(
        c.post("/control/fail_checkpoints", r#"{"count": 1}"#)
            .status,
        200
    );
    assert_eq!(
        c.post("/control/hold_checkpoints", r#"{"hold": true}"#)
            .status,
        200
    );
    insert(&c, 1);
    checkpoint(&c);
    let control = c.get("/control/status").json();
    assert_eq!(control["fault_tolerance"], "at_least_once");
    assert_eq!(control["checkpoints"]["running"]["held"], true);
    assert_eq!(control["checkpoints"]["running"]["fails"], true);
    c.post("/control/hold_checkpoints", r#"{"hold": false}"#);
    assert_eq!(status(&c)["failure"]["sequence_number"], 0);
    checkpoint(&c);
    wait_success(&c, 1);
    insert(&c, 2);
    let old = double.incarnation();
    let r = c.post("/control/crash_restart", "");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_ne!(r.json()["incarnation"], old);
    assert_eq!(ids(&double), [1]);
    let r = c.post("/control/fault_tolerance", "{}");
    assert_eq!(r.json()["model"], "none");
}
