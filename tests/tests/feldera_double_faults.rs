//! The Feldera double's faults and lifecycle over real HTTP: completion delays, restart,
//! pause, injected 503s, bodies queued as they arrive and read slowly on demand, the
//! request log, the `/control` endpoints, stopping, and the `feldera-double` binary.

#[path = "feldera_double/client.rs"]
mod client;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use client::{schema, start, start_with, Client, PIPELINE};
use serde_json::json;
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig, FailMode};

fn config() -> DoubleConfig {
    DoubleConfig::new(PIPELINE, schema())
}

fn ids(double: &slotline_tests::feldera_double::FelderaDouble) -> Vec<i64> {
    double
        .table("t")
        .unwrap()
        .rows
        .iter()
        .map(|r| r.row["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn never_delay_keeps_tokens_in_progress_until_released() {
    let double = start_with(config().with_completion_delay(CompletionDelay::Never));
    let c = Client::new(&double);
    let token = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let r = c.completion(&token);
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"status": "inprogress", "step": null}));
    assert!(ids(&double).is_empty(), "unprocessed input is not visible");

    let r = c.post("/control/release", "");
    assert_eq!(r.status, 200, "{}", r.text);
    let body = c.completion(&token).json();
    assert_eq!(body["status"], "complete");
    assert!(body["step"].as_u64().is_some_and(|s| s >= 1), "{body}");
    assert_eq!(ids(&double), vec![1]);

    // Still `Never` for later requests.
    let later = c.ingest_ok("t", r#"{"insert": {"id": 2}}"#);
    assert_eq!(c.completion(&later).json()["status"], "inprogress");
    double.release_completions();
    assert_eq!(c.completion(&later).json()["status"], "complete");
}

#[test]
fn fixed_delay_completes_only_after_the_delay() {
    let double = start_with(
        config().with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(300))),
    );
    let c = Client::new(&double);
    let sent = Instant::now();
    let token = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    assert_eq!(c.completion(&token).json()["status"], "inprogress");
    while c.completion(&token).json()["status"] != "complete" {
        assert!(sent.elapsed() < Duration::from_secs(5), "never completed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sent.elapsed() >= Duration::from_millis(300));
}

#[test]
fn restart_answers_410_to_old_tokens_and_drops_or_keeps_state_as_asked() {
    let double = start();
    let c = Client::new(&double);
    let old = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let before = double.incarnation();

    let r = c.post("/control/restart", r#"{"keep_state": true}"#);
    assert_eq!(r.status, 200);
    assert_ne!(r.json()["incarnation"], before);
    assert_eq!(ids(&double), vec![1], "state kept");
    let r = c.completion(&old);
    assert_eq!(r.status, 410);
    assert_eq!(r.error_code(), "PipelineRestarted");

    let fresh = c.ingest_ok("t", r#"{"insert": {"id": 2}}"#);
    assert_eq!(c.completion(&fresh).json()["status"], "complete");
    double.restart(false);
    assert!(ids(&double).is_empty(), "state dropped");
    assert_eq!(c.completion(&fresh).status, 410);
}

#[test]
fn restart_loses_accepted_but_unprocessed_input() {
    let double = start_with(config().with_completion_delay(CompletionDelay::Never));
    let c = Client::new(&double);
    c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    double.restart(true);
    double.release_completions();
    assert!(ids(&double).is_empty());
}

#[test]
fn paused_ingress_waits_for_resume_or_answers_503_after_the_proxy_timeout() {
    let double = start_with(config().with_proxy_timeout(Duration::from_millis(300)));
    let c = Client::new(&double);
    let r = c.post("/control/pause", "");
    assert_eq!(r.status, 200);
    assert_eq!(
        c.get(&format!("/v0/pipelines/{PIPELINE}")).json()["deployment_status"],
        "Paused"
    );

    let sent = Instant::now();
    let r = c.ingress("t", r#"{"insert": {"id": 1}}"#);
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code(), "PipelineInteractionUnreachable");
    assert!(sent.elapsed() >= Duration::from_millis(300));
    assert!(
        ids(&double).is_empty(),
        "nothing of the timed-out request is applied while paused"
    );

    // A request waiting on the pause goes through once resumed.
    double.set_proxy_timeout(Duration::from_secs(10));
    let base = double.base_url();
    let waiter = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!(
            "{base}/v0/pipelines/{PIPELINE}/ingress/t?format=json&update_format=insert_delete"
        );
        agent
            .post(url)
            .send(r#"{"insert": {"id": 2}}"#)
            .map(|r| r.status().as_u16())
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "ingress must wait while paused");
    assert_eq!(c.post("/control/resume", "").status, 200);
    assert_eq!(waiter.join().unwrap().unwrap(), 200);
    // The request the manager gave up on lands too: Feldera read its body at the resume
    // (docs/feldera.md, "Against Feldera's own server").
    let both = wait_ids(&double, 2);
    assert_eq!(both, vec![1, 2]);
}

/// The ids of `t` once it holds `count` rows (or what it holds after 5 s).
fn wait_ids(double: &slotline_tests::feldera_double::FelderaDouble, count: usize) -> Vec<i64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut now = ids(double);
        now.sort();
        if now.len() >= count || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A request the manager answered 503 while the pipeline was paused is still applied at
/// the resume, unless the pipeline process restarted meanwhile.
#[test]
fn a_request_given_up_during_a_pause_lands_at_the_resume_not_after_a_restart() {
    let double = start_with(config().with_proxy_timeout(Duration::from_millis(200)));
    let c = Client::new(&double);
    assert_eq!(c.post("/control/pause", "").status, 200);
    assert_eq!(c.ingress("t", r#"{"insert": {"id": 7}}"#).status, 503);
    std::thread::sleep(Duration::from_millis(300));
    assert!(ids(&double).is_empty());
    assert_eq!(c.post("/control/resume", "").status, 200);
    assert_eq!(wait_ids(&double, 1), vec![7]);

    assert_eq!(c.post("/control/pause", "").status, 200);
    assert_eq!(c.ingress("t", r#"{"insert": {"id": 8}}"#).status, 503);
    double.crash_restart();
    assert_eq!(c.post("/control/resume", "").status, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !ids(&double).contains(&8),
        "the old process's connection died with it"
    );
}

#[test]
fn failure_before_apply_ingests_nothing_and_failure_after_apply_ingests_the_rows() {
    let double = start();
    let c = Client::new(&double);
    double.fail_next_ingress(1, FailMode::BeforeApply);
    let r = c.ingress("t", r#"{"insert": {"id": 1}}"#);
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code(), "PipelineInteractionUnreachable");
    assert!(ids(&double).is_empty());

    let r = c.post("/control/fail_ingress", r#"{"count": 1, "mode": "after"}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    let r = c.ingress("t", r#"{"insert": {"id": 2}}"#);
    assert_eq!(r.status, 503);
    assert!(
        r.json().get("token").is_none(),
        "no token in a lost response"
    );
    assert_eq!(ids(&double), vec![2], "applied despite the 503");

    // Only the next N calls fail.
    c.ingest_ok("t", r#"{"insert": {"id": 3}}"#);
}

#[test]
fn unavailable_window_answers_503_on_every_v0_call_until_cleared() {
    let double = start();
    let c = Client::new(&double);
    let token = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let r = c.post("/control/unavailable", "{}");
    assert_eq!(r.status, 200);
    assert_eq!(c.get(&format!("/v0/pipelines/{PIPELINE}")).status, 503);
    assert_eq!(c.completion(&token).status, 503);
    assert_eq!(c.query("select * from t").status, 503);
    let r = c.ingress("t", r#"{"insert": {"id": 2}}"#);
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (503, "PipelineUnavailable")
    );
    assert_eq!(
        c.get("/control/status").status,
        200,
        "control stays reachable"
    );

    assert_eq!(c.delete("/control/unavailable").status, 200);
    assert_eq!(c.completion(&token).status, 200);

    double.set_unavailable(Some(Duration::from_millis(150)));
    assert_eq!(c.completion(&token).status, 503);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.completion(&token).status, 200, "window elapsed");
}

#[test]
fn request_log_records_each_call_with_table_rows_status_and_timing() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok("T", "{\"insert\": {\"id\": 1}}\n{\"insert\": {\"id\": 2}}");
    let _ = c.ingress("t", r#"{"update": {"small": 1}}"#);
    let _ = c.query("select * from t");
    let _ = c.get("/control/tables");

    let counts = double.request_counts();
    assert_eq!(counts.get("ingress"), Some(&2));
    assert_eq!(counts.get("query"), Some(&1));
    assert_eq!(counts.get("control"), None, "control calls are not logged");
    let log = double.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].table.as_deref(), Some("T"));
    assert_eq!((log[0].status, log[0].rows), (200, Some(2)));
    assert_eq!(log[1].error_code.as_deref(), Some("ParseErrors"));
    assert_eq!(log[2].rows, Some(2), "query rows returned");
    assert!(log.iter().all(|r| r.started <= r.finished));
    assert!(log[0].finished <= log[1].started);

    let over_http = c.get("/control/log").json();
    assert_eq!(over_http["counts"]["ingress"], 2);
    assert_eq!(over_http["requests"][1]["status"], 400);
}

#[test]
fn concurrent_ingress_is_all_applied() {
    let double = start();
    let base = double.base_url();
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let base = base.clone();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .build()
                    .into();
                for i in 0..10 {
                    let url = format!("{base}/v0/pipelines/{PIPELINE}/ingress/t?format=json");
                    let body = format!("{{\"insert\": {{\"id\": {}}}}}", w * 100 + i);
                    let status = agent.post(url).send(body).unwrap().status().as_u16();
                    assert_eq!(status, 200);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(ids(&double).len(), 80);
}

#[test]
fn dropping_the_double_frees_its_port_quickly() {
    let started = Instant::now();
    let double = start();
    let addr = double.addr();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "starts in well under a second"
    );
    let c = Client::new(&double);
    assert_eq!(c.get(&format!("/v0/pipelines/{PIPELINE}")).status, 200);
    drop(double);
    std::net::TcpListener::bind(addr).expect("port is free again after drop");
}

#[test]
fn binary_prints_its_address_and_serves_the_schema() {
    let dir = std::env::temp_dir().join(format!("feldera-double-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema_path = dir.join("schema.json");
    std::fs::write(&schema_path, schema().to_string()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_feldera-double"))
        .args([
            "--schema",
            schema_path.to_str().unwrap(),
            "--port",
            "0",
            "--pipeline",
            "demo",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .strip_prefix("feldera-double listening on ")
        .and_then(|rest| rest.trim_end().strip_suffix(" pipeline=demo"))
        .unwrap_or_else(|| panic!("unexpected banner: {line}"))
        .to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = agent
        .get(format!("{base}/v0/pipelines/demo"))
        .call()
        .map(|r| r.status().as_u16());
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(status.unwrap(), 200);
}

#[test]
fn complete_step_is_the_step_that_processed_the_token_not_the_current_one() {
    let double = start();
    let c = Client::new(&double);
    let first = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let step_of = |t: &str| c.completion(t).json()["step"].as_u64().expect("complete");
    let s1 = step_of(&first);
    let second = c.ingest_ok("t", r#"{"insert": {"id": 2}}"#);
    let s2 = step_of(&second);
    assert!(s2 > s1, "{s1} then {s2}");
    assert_eq!(
        step_of(&first),
        s1,
        "a later step does not move an earlier token's step"
    );
}

#[test]
fn inprogress_can_be_answered_with_202_as_the_openapi_document_says() {
    let double = start_with(
        config()
            .with_completion_delay(CompletionDelay::Never)
            .with_inprogress_202(true),
    );
    let c = Client::new(&double);
    let token = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let r = c.completion(&token);
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (202, Some("inprogress"))
    );
    double.release_completions();
    assert_eq!(c.completion(&token).status, 200);
}

#[test]
fn each_phase_answers_every_pipeline_endpoint_as_feldera_does_and_the_pipeline_get_still_answers() {
    let double = start();
    let c = Client::new(&double);
    let token = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let start_path = format!("/v0/pipelines/{PIPELINE}/start_transaction");
    let commit_path = format!("/v0/pipelines/{PIPELINE}/commit_transaction");
    for (phase, status, code, runtime) in [
        ("initializing", 503, "Initializing", "Initializing"),
        ("standby", 503, "Initializing", "Standby"),
        ("awaiting_approval", 503, "Initializing", "AwaitingApproval"),
        ("suspended", 503, "Suspended", "Suspended"),
        ("terminating", 410, "Terminating", "Stopping"),
        (
            "initialization_error",
            500,
            "InitializationError",
            "Unavailable",
        ),
        ("failed", 500, "StepError", "Unavailable"),
    ] {
        let r = c.post("/control/phase", &json!({"phase": phase}).to_string());
        assert_eq!(r.status, 200, "{}", r.text);
        let answers = [
            c.ingress("t", r#"{"insert": {"id": 2}}"#),
            c.completion(&token),
            c.query("select * from t"),
            c.post(&start_path, ""),
            c.post(&commit_path, ""),
        ];
        for r in answers {
            assert_eq!(
                (r.status, r.error_code()),
                (status, code.to_string()),
                "{phase}: {}",
                r.text
            );
        }
        let pipeline = c.get(&format!("/v0/pipelines/{PIPELINE}"));
        assert_eq!(pipeline.status, 200, "{phase}");
        assert_eq!(
            pipeline.json()["deployment_runtime_status"],
            runtime,
            "{phase}"
        );
    }
    let r = c.post(
        "/control/phase",
        r#"{"phase": "failed", "error_code": "ControllerPanic"}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(c.completion(&token).error_code(), "ControllerPanic");
    assert_eq!(
        c.post("/control/phase", r#"{"phase": "asleep"}"#).status,
        400
    );
    c.post("/control/phase", r#"{"phase": "running"}"#);
    assert_eq!(c.completion(&token).json()["status"], "complete");
    assert_eq!(
        ids(&double),
        vec![1],
        "nothing was ingested while not running"
    );
}

#[test]
fn removed_endpoints_make_their_tokens_answer_410_unknown_endpoint() {
    let double = start();
    let c = Client::new(&double);
    let old = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    assert_eq!(c.post("/control/remove_endpoints", "").status, 200);
    let r = c.completion(&old);
    assert_eq!(
        (r.status, r.error_code()),
        (410, "UnknownEndpointInCompletionToken".to_string()),
        "{}",
        r.text
    );
    let new = c.ingest_ok("t", r#"{"insert": {"id": 2}}"#);
    assert_eq!(c.completion(&new).json()["status"], "complete");
    assert_eq!(
        ids(&double),
        vec![1, 2],
        "what the removed endpoint accepted is still processed"
    );
}

/// The name column of row `id` of `t`, as processed so far.
fn name_of(double: &slotline_tests::feldera_double::FelderaDouble, id: i64) -> Option<String> {
    double.table("t").unwrap().rows.iter().find_map(|r| {
        (r.row["id"].as_i64() == Some(id)).then(|| r.row["name"].as_str().map(str::to_string))?
    })
}

/// Polls `check` until it holds; panics with `what` after 5 s.
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An ingress request written by hand over TCP, so the test decides when each part of the
/// body leaves (a plain client writes it all at once).
struct RawUpload {
    stream: TcpStream,
}

impl RawUpload {
    /// Sends the head of a request to `t` announcing `body_len` bytes of body.
    fn start(double: &slotline_tests::feldera_double::FelderaDouble, body_len: usize) -> RawUpload {
        let mut stream = TcpStream::connect(double.addr()).expect("connect to the double");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let head = format!(
            "POST /v0/pipelines/{PIPELINE}/ingress/t?format=json&update_format=insert_delete HTTP/1.1\r\n\
             Host: {}\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\
             Connection: close\r\n\r\n",
            double.addr()
        );
        stream.write_all(head.as_bytes()).expect("send the head");
        RawUpload { stream }
    }

    fn send(&mut self, part: &str) {
        self.stream.write_all(part.as_bytes()).expect("send a part");
        self.stream.flush().expect("flush");
    }

    /// The answer's status and body (the server closes the connection after it).
    fn answer(mut self) -> (u16, String) {
        let mut text = String::new();
        self.stream
            .read_to_string(&mut text)
            .expect("read the answer");
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {text:?}"));
        let body = text
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        (status, body)
    }
}

#[test]
fn records_are_queued_and_processed_as_the_body_arrives_before_it_ends() {
    let double = start();
    let first = "{\"insert\": {\"id\": 1}}\n{\"insert\": {\"id\": 2}}\n{\"insert\": {\"id\"";
    let rest = ": 3}}\n";
    let mut upload = RawUpload::start(&double, first.len() + rest.len());
    upload.send(first);
    wait_until("the first two records are processed", || {
        ids(&double) == vec![1, 2]
    });
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ids(&double), vec![1, 2], "a split line waits for its end");
    assert_eq!(double.status()["queued_records"], 0);

    upload.send(rest);
    let (status, body) = upload.answer();
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON answer");
    let token = answer["token"].as_str().expect("a token");
    assert_eq!(
        Client::new(&double).completion(token).json()["status"],
        "complete"
    );
    assert_eq!(ids(&double), vec![1, 2, 3]);
}

#[test]
fn concurrent_requests_upsert_a_key_in_the_order_their_records_arrive() {
    let double = start();
    double
        .read_slowly("t", 1, 2000)
        .expect("t is an input table");
    // The slow request sets key 1 first and key 2 last, with padding between that takes
    // about 0.8 s to read; the quick one, sent meanwhile, sets both.
    let mut slow_body = String::from("{\"insert\": {\"id\": 1, \"name\": \"slow\"}}\n");
    for id in 100..160 {
        slow_body.push_str(&format!("{{\"insert\": {{\"id\": {id}}}}}\n"));
    }
    slow_body.push_str("{\"insert\": {\"id\": 2, \"name\": \"slow\"}}\n");
    let slow = {
        let c = Client::new(&double);
        std::thread::spawn(move || c.ingress("t", &slow_body))
    };
    wait_until("the slow request's first record is processed", || {
        name_of(&double, 1).as_deref() == Some("slow")
    });
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        "{\"insert\": {\"id\": 1, \"name\": \"quick\"}}\n{\"insert\": {\"id\": 2, \"name\": \"quick\"}}",
    );
    assert!(
        !slow.is_finished(),
        "precondition: the slow request is still uploading"
    );
    assert_eq!(name_of(&double, 2).as_deref(), Some("quick"));

    let r = slow.join().expect("the slow client");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        name_of(&double, 1).as_deref(),
        Some("quick"),
        "arrived last, though its request ended first"
    );
    assert_eq!(
        name_of(&double, 2).as_deref(),
        Some("slow"),
        "arrived last, though its request started first"
    );
    assert_eq!(double.table("t").unwrap().rows.len(), 62);
}

#[test]
fn records_that_arrived_stay_queued_when_the_client_goes_away_mid_body() {
    let double = start_with(config().with_completion_delay(CompletionDelay::Never));
    let part = "{\"insert\": {\"id\": 1}}\n{\"insert\": {\"id\": 2}}\n{\"insert\": {\"id";
    let mut upload = RawUpload::start(&double, part.len() + 1000);
    upload.send(part);
    wait_until("two records are queued", || {
        double.status()["queued_records"] == 2
    });
    drop(upload);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        double.status()["queued_records"],
        2,
        "still queued after the client left"
    );
    assert!(ids(&double).is_empty(), "not processed before a release");
    double.release_completions();
    assert_eq!(ids(&double), vec![1, 2]);
}

#[test]
fn a_request_uploading_across_a_restart_loses_what_it_sends_afterwards() {
    let double = start();
    let (first, second) = ("{\"insert\": {\"id\": 1}}\n", "{\"insert\": {\"id\": 2}}\n");
    let mut upload = RawUpload::start(&double, first.len() + second.len());
    upload.send(first);
    wait_until("the first record is processed", || ids(&double) == vec![1]);
    double.restart(true);
    upload.send(second);
    let (status, body) = upload.answer();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("PipelineInteractionUnreachable"), "{body}");
    assert_eq!(
        ids(&double),
        vec![1],
        "the record sent after the restart is dropped"
    );
    assert_eq!(double.status()["queued_records"], 0);
}

#[test]
fn slow_reading_is_planned_over_http_for_the_next_requests_of_one_table() {
    let double = start();
    let c = Client::new(&double);
    let r = c.post(
        "/control/read_slowly",
        r#"{"table": "nope", "requests": 1, "bytes_per_sec": 100}"#,
    );
    assert_eq!(
        (r.status, r.error_code()),
        (400, "BadControlRequest".to_string())
    );
    let r = c.post(
        "/control/read_slowly",
        r#"{"table": "T", "requests": 1, "bytes_per_sec": 0}"#,
    );
    assert_eq!(r.status, 400, "a zero rate never ends");
    let r = c.post(
        "/control/read_slowly",
        r#"{"table": "T", "requests": 1, "bytes_per_sec": 2000}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        double.status()["slow_reads"],
        json!([{"table": "t", "requests": 1, "bytes_per_sec": 2000}])
    );

    let body: String = (0..40)
        .map(|id| format!("{{\"insert\": {{\"id\": {id}}}}}\n"))
        .collect();
    assert!(body.len() >= 800);
    let sent = Instant::now();
    c.ingest_ok("t", &body);
    assert!(
        sent.elapsed() >= Duration::from_millis(350),
        "{} bytes at 2000 B/s took {:?}",
        body.len(),
        sent.elapsed()
    );
    assert_eq!(double.status()["slow_reads"], json!([]), "one request only");
    assert_eq!(ids(&double).len(), 40);
}

/// Backpressure from a Running pipeline: a table's endpoint whose queue is full (100,000
/// records the circuit has not taken) reads no more; a request waiting for room gets the
/// manager's 503 and is still applied once there is room, the newest waiting request first.
#[test]
fn a_full_queue_answers_503_after_the_ingress_timeout_and_applies_the_bodies_later() {
    let double = start_with(config().with_completion_delay(CompletionDelay::Never));
    let c = Client::new(&double);
    let filler: String = (1_000..101_000)
        .map(|id| format!("{{\"insert\": {{\"id\": {id}}}}}\n"))
        .collect();
    c.ingest_ok("t", &filler);
    let stats = c.get(&format!("/v0/pipelines/{PIPELINE}/stats")).json();
    let input = &stats["inputs"][0];
    assert_eq!(input["metrics"]["buffered_records"], 100_000, "{input}");

    double.set_proxy_timeout(Duration::from_millis(300));
    let older = c.ingress("t", r#"{"insert": {"id": 1, "name": "older"}}"#);
    assert_eq!(older.status, 503, "{}", older.text);
    assert_eq!(older.error_code(), "PipelineInteractionUnreachable");
    let newer = c.ingress("t", r#"{"insert": {"id": 1, "name": "newer"}}"#);
    assert_eq!(newer.status, 503, "{}", newer.text);
    let again = c.get(&format!("/v0/pipelines/{PIPELINE}/stats")).json();
    assert_eq!(
        again["inputs"][0]["metrics"]["total_records"], 100_000,
        "the waiting bodies are not read: {again}"
    );
    assert_eq!(again["global_metrics"]["state"], "Running");

    double.set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    double.release_completions();
    wait_until("both waiting bodies are read", || {
        let stats = c.get(&format!("/v0/pipelines/{PIPELINE}/stats")).json();
        stats["inputs"][0]["metrics"]["total_records"] == 100_002
    });
    wait_until("both waiting bodies are processed", || {
        double.processed_records() >= 100_002
    });
    assert_eq!(
        name_of(&double, 1).as_deref(),
        Some("older"),
        "the newest waiting request is read first, so the older one lands last"
    );
}
