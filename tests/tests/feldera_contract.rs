//! The core's Feldera request builders and answer classifiers against the Feldera double,
//! over real HTTP: every answer class the double can give, each checked twice, once as the
//! core classifies it and once in the double's resulting state (tables, log, status).
//!
//! The requests are executed by a small ureq executor that does what a shell does and
//! nothing more: method, URL, headers, body and timeout as the core built them; any HTTP
//! status is an answer; only a transport failure is `Reply::Failed`. No test here builds a
//! URL by hand: a wrong spelling in the core would reach the double and fail there.

use std::net::TcpListener;
use std::time::Duration;

use serde_json::{json, Map, Value};
use slotline_core::feldera::{
    classify_commit_transaction, classify_completion, classify_ingress, classify_pipeline,
    classify_query, classify_start_transaction, CommitOutcome, CompletionOutcome, FelderaEndpoint,
    FelderaError, HttpRequest, IngressOutcome, PipelineOutcome, QueryOutcome, Reply,
    StartTransactionOutcome,
};
use slotline_core::schema::Name;
use slotline_tests::feldera_double::{
    CompletionDelay, DoubleConfig, FailMode, FelderaDouble, RequestRecord,
};

const PIPELINE: &str = "p1";
/// Generous: the double answers in milliseconds; only the pause tests wait on purpose.
const TIMEOUT_MS: u64 = 10_000;

// ---- the executor: what a shell does with an `HttpRequest` ----

/// An owned reply, so that the borrowed `Reply` the classifiers take can point into it.
#[derive(Debug)]
enum Answer {
    Answered { status: u16, body: Vec<u8> },
    Failed(String),
}

impl Answer {
    fn reply(&self) -> Reply<'_> {
        match self {
            Answer::Answered { status, body } => Reply::Answered {
                status: *status,
                body,
            },
            Answer::Failed(error) => Reply::Failed { error },
        }
    }

    /// The body as JSON, for oracles that read the raw answer independently of the core.
    fn json(&self) -> Value {
        match self {
            Answer::Answered { body, .. } => serde_json::from_slice(body)
                .unwrap_or_else(|e| panic!("body is not JSON ({e}): {self:?}")),
            Answer::Failed(error) => panic!("no answer: {error}"),
        }
    }
}

/// Executes `request` exactly as built: no redirects followed, no retry, statuses as values.
fn execute(request: &HttpRequest) -> Answer {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let mut builder = ureq::http::Request::builder()
        .method(request.method.as_str())
        .uri(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    let http_request = match builder.body(request.body.to_vec()) {
        Ok(r) => r,
        Err(e) => return Answer::Failed(format!("unusable request: {e}")),
    };
    let http_request = agent
        .configure_request(http_request)
        .timeout_global(Some(Duration::from_millis(request.timeout_ms)))
        .build();
    match agent.run(http_request) {
        Ok(mut response) => {
            let status = response.status().as_u16();
            match response.body_mut().read_to_vec() {
                Ok(body) => Answer::Answered { status, body },
                Err(e) => Answer::Failed(format!("reading the body: {e}")),
            }
        }
        Err(e) => Answer::Failed(e.to_string()),
    }
}

// ---- fixtures ----

fn field(name: &str, case_sensitive: bool, ty: Value) -> Value {
    json!({"name": name, "case_sensitive": case_sensitive, "columntype": ty})
}

/// `t`: keyed, unquoted. `TaBle`: keyed, quoted (case-sensitive table and columns). `bag`:
/// keyless and not materialized, so not queryable ad hoc.
fn schema() -> Value {
    let bigint = json!({"type": "BIGINT", "nullable": false});
    let varchar = json!({"type": "VARCHAR", "nullable": true, "precision": -1});
    json!({
        "inputs": [
            {"name": "t", "case_sensitive": false, "materialized": false, "properties": {},
             "primary_key": ["id"],
             "fields": [field("id", false, bigint.clone()), field("name", false, varchar.clone()),
                        field("n", false, json!({"type": "INTEGER", "nullable": true}))]},
            {"name": "TaBle", "case_sensitive": true, "materialized": false, "properties": {},
             "primary_key": ["Id"],
             "fields": [field("Id", true, bigint.clone()), field("Val", true, varchar.clone())]},
            {"name": "bag", "case_sensitive": false, "materialized": false, "properties": {},
             "fields": [field("k", false, varchar)]},
        ],
        "outputs": [
            {"name": "error_view", "case_sensitive": false, "materialized": false,
             "properties": {},
             "fields": [field("message", false, json!({"type": "VARCHAR", "nullable": false}))]},
        ],
    })
}

fn start_with(config: DoubleConfig) -> (FelderaDouble, FelderaEndpoint) {
    let double = FelderaDouble::start(config).expect("the double starts");
    let endpoint =
        FelderaEndpoint::new(&double.base_url(), PIPELINE, None).expect("a valid endpoint");
    (double, endpoint)
}

fn start() -> (FelderaDouble, FelderaEndpoint) {
    start_with(DoubleConfig::new(PIPELINE, schema()))
}

/// An NDJSON body built by hand (not by the core's encoder: this file tests the HTTP contract).
fn ndjson(lines: &[Value]) -> Vec<u8> {
    let mut body = String::new();
    for line in lines {
        body.push_str(&line.to_string());
        body.push('\n');
    }
    body.into_bytes()
}

fn ingress(endpoint: &FelderaEndpoint, table: &Name, lines: &[Value]) -> IngressOutcome {
    classify_ingress(execute(&endpoint.ingress(table, ndjson(lines).into(), TIMEOUT_MS)).reply())
}

fn accepted_token(outcome: IngressOutcome) -> String {
    match outcome {
        IngressOutcome::Accepted { token } => token,
        other => panic!("expected Accepted, got {other:?}"),
    }
}

fn completion(endpoint: &FelderaEndpoint, token: &str) -> CompletionOutcome {
    classify_completion(execute(&endpoint.completion_status(token, TIMEOUT_MS)).reply())
}

fn query(endpoint: &FelderaEndpoint, sql: &str) -> QueryOutcome {
    classify_query(execute(&endpoint.query(sql, TIMEOUT_MS)).reply())
}

fn rows(outcome: QueryOutcome) -> Vec<Map<String, Value>> {
    match outcome {
        QueryOutcome::Rows(rows) => rows,
        other => panic!("expected Rows, got {other:?}"),
    }
}

/// The rows of a double's table, without weights, in the double's order.
fn table_rows(double: &FelderaDouble, table: &str) -> Vec<Value> {
    let snapshot = double.table(table).expect("the table exists in the double");
    assert!(snapshot.faults.is_empty(), "{:?}", snapshot.faults);
    snapshot.rows.into_iter().map(|r| r.row).collect()
}

fn ids(double: &FelderaDouble) -> Vec<i64> {
    let mut ids: Vec<i64> = table_rows(double, "t")
        .iter()
        .map(|r| r["id"].as_i64().expect("id is a number"))
        .collect();
    ids.sort_unstable();
    ids
}

fn assert_error(error: &FelderaError, status: Option<u16>, code: Option<&str>) {
    assert_eq!(error.status, status, "{error}");
    assert_eq!(error.error_code.as_deref(), code, "{error}");
    assert!(!error.message.is_empty(), "{error:?}");
}

/// The last logged `/v0` request of one endpoint kind.
fn last_logged(double: &FelderaDouble, endpoint: &str) -> RequestRecord {
    double
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.endpoint == endpoint)
        .unwrap_or_else(|| panic!("no `{endpoint}` request logged"))
}

/// A loopback port nobody listens on (bound, then released).
fn refused_base_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let addr = listener.local_addr().expect("its address");
    drop(listener);
    format!("http://{addr}")
}

// ---- pipeline ----

#[test]
fn pipeline_get_is_ready_with_every_table_of_the_schema() {
    let (double, endpoint) = start();
    let outcome = classify_pipeline(execute(&endpoint.get_pipeline(TIMEOUT_MS)).reply());
    let PipelineOutcome::Ready(info) = outcome else {
        panic!("expected Ready, got {outcome:?}");
    };
    assert_eq!(info.name.as_deref(), Some(PIPELINE));
    assert_eq!(info.program_status.as_deref(), Some("Success"));
    assert_eq!(info.deployment_status.as_deref(), Some("Running"));
    let inputs: Vec<(&Name, bool)> = info
        .schema
        .inputs
        .iter()
        .map(|t| (&t.name, t.queryable()))
        .collect();
    assert_eq!(
        inputs,
        vec![
            (&Name::unquoted("t"), true),
            (&Name::quoted("TaBle"), true),
            (&Name::unquoted("bag"), false),
        ]
    );
    assert_eq!(
        info.schema.inputs[1].primary_key,
        Some(vec![Name::quoted("Id")])
    );
    assert_eq!(info.schema.inputs[2].primary_key, None, "absent, not null");
    let outputs: Vec<&Name> = info.schema.outputs.iter().map(|t| &t.name).collect();
    assert_eq!(outputs, vec![&Name::unquoted("error_view")]);
    assert!(info.schema.unreadable.is_empty());
    let logged = last_logged(&double, "pipeline");
    assert_eq!((logged.method.as_str(), logged.status), ("GET", 200));
}

#[test]
fn unknown_pipeline_is_fatal_404_unknown_pipeline_name() {
    let (double, _) = start();
    let wrong = FelderaEndpoint::new(&double.base_url(), "nope", None).expect("endpoint");
    match classify_pipeline(execute(&wrong.get_pipeline(TIMEOUT_MS)).reply()) {
        PipelineOutcome::Fatal(e) => {
            assert_error(&e, Some(404), Some("UnknownPipelineName"));
            assert!(e.message.contains("nope"), "{e}");
        }
        other => panic!("expected Fatal, got {other:?}"),
    }
    let logged = last_logged(&double, "pipeline");
    assert_eq!(logged.error_code.as_deref(), Some("UnknownPipelineName"));
}

#[test]
fn pipeline_get_while_unavailable_is_transient() {
    let (double, endpoint) = start();
    double.set_unavailable(None);
    match classify_pipeline(execute(&endpoint.get_pipeline(TIMEOUT_MS)).reply()) {
        PipelineOutcome::Transient(e) => assert_error(&e, Some(503), Some("PipelineUnavailable")),
        other => panic!("expected Transient, got {other:?}"),
    }
}

// ---- ingress ----

#[test]
fn valid_ndjson_is_accepted_and_its_rows_appear_once_complete() {
    let (double, endpoint) = start();
    let token = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[
            json!({"insert": {"id": 1, "name": "a", "n": 10}}),
            json!({"insert": {"id": 2, "name": null}}),
            json!({"delete": {"id": 1}}),
        ],
    ));
    assert!(matches!(
        completion(&endpoint, &token),
        CompletionOutcome::Complete { .. }
    ));
    assert_eq!(
        table_rows(&double, "t"),
        vec![json!({"id": 2, "name": null, "n": null})]
    );
    let logged = last_logged(&double, "ingress");
    assert_eq!(logged.rows, Some(3));
    assert_eq!(
        logged.path,
        format!("/v0/pipelines/{PIPELINE}/ingress/t?format=json&update_format=insert_delete&lines=single")
    );
}

#[test]
fn a_quoted_table_is_addressed_by_the_builders_url_and_matched_exactly() {
    let (double, endpoint) = start();
    let table = Name::quoted("TaBle");
    assert!(
        endpoint
            .ingress_url(&table)
            .ends_with("/ingress/%22TaBle%22?format=json&update_format=insert_delete&lines=single"),
        "{}",
        endpoint.ingress_url(&table)
    );
    let token = accepted_token(ingress(
        &endpoint,
        &table,
        &[json!({"insert": {"Id": 7, "Val": "x"}})],
    ));
    assert!(matches!(
        completion(&endpoint, &token),
        CompletionOutcome::Complete { .. }
    ));
    assert_eq!(
        table_rows(&double, "TaBle"),
        vec![json!({"Id": 7, "Val": "x"})]
    );
    assert_eq!(
        last_logged(&double, "ingress").table.as_deref(),
        Some("\"TaBle\"")
    );

    // The unquoted spelling folds to `table`, which does not exist: a 404, not a match.
    match ingress(
        &endpoint,
        &Name::unquoted("TaBle"),
        &[json!({"insert": {"Id": 8}})],
    ) {
        IngressOutcome::Fatal(e) => {
            assert_error(&e, Some(404), Some("ConfigError.UnknownInputStream"))
        }
        other => panic!("expected Fatal, got {other:?}"),
    }
    assert_eq!(table_rows(&double, "TaBle").len(), 1);
}

#[test]
fn one_bad_line_is_fatal_with_a_parse_error_summary_and_the_good_lines_are_ingested() {
    let (double, endpoint) = start();
    let answer = execute(
        &endpoint.ingress(
            &Name::unquoted("t"),
            ndjson(&[
                json!({"insert": {"id": 1, "name": "good"}}),
                json!({"insert": {"id": "not a number"}}),
                json!({"insert": {"id": 3, "name": "good too"}}),
            ])
            .into(),
            TIMEOUT_MS,
        ),
    );
    // The oracle: Feldera's error body as it arrived.
    let raw = answer.json();
    let raw_first = &raw["details"]["errors"][0];
    match classify_ingress(answer.reply()) {
        IngressOutcome::Fatal(e) => {
            assert_error(&e, Some(400), Some("ParseErrors"));
            let summary = e.parse_errors.as_ref().expect("a parse error summary");
            assert_eq!(summary.num_errors, 1);
            assert_eq!(raw_first["event_number"], json!(2), "the second line");
            let description = raw_first["description"].as_str().expect("description");
            assert_eq!(summary.first, vec![format!("event 2: {description}")]);
            assert!(e.to_string().contains("1 parse error(s)"), "{e}");
        }
        other => panic!("expected Fatal, got {other:?}"),
    }
    // Feldera: the valid lines of the same request are still ingested.
    assert_eq!(ids(&double), vec![1, 3]);
}

#[test]
fn an_unknown_table_is_fatal_404_and_ingests_nothing() {
    let (double, endpoint) = start();
    match ingress(
        &endpoint,
        &Name::unquoted("nope"),
        &[json!({"insert": {"id": 1}})],
    ) {
        IngressOutcome::Fatal(e) => {
            assert_error(&e, Some(404), Some("ConfigError.UnknownInputStream"));
            assert!(e.message.contains("nope"), "{e}");
        }
        other => panic!("expected Fatal, got {other:?}"),
    }
    assert!(ids(&double).is_empty());
}

#[test]
fn a_503_before_apply_is_transient_and_ingests_nothing() {
    let (double, endpoint) = start();
    double.fail_next_ingress(1, FailMode::BeforeApply);
    match ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ) {
        IngressOutcome::Transient(e) => {
            assert_error(&e, Some(503), Some("PipelineInteractionUnreachable"));
        }
        other => panic!("expected Transient, got {other:?}"),
    }
    assert!(ids(&double).is_empty());
    // The fault was used up: the resend goes through.
    accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ));
    assert_eq!(ids(&double), vec![1]);
}

#[test]
fn a_503_after_apply_is_transient_although_the_rows_were_ingested() {
    let (double, endpoint) = start();
    double.fail_next_ingress(1, FailMode::AfterApply);
    match ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 5}})],
    ) {
        IngressOutcome::Transient(e) => {
            assert_error(&e, Some(503), Some("PipelineInteractionUnreachable"));
        }
        other => panic!("expected Transient, got {other:?}"),
    }
    // The lost-response case: why a transient ingress must be resent, and why rows must be
    // idempotent under replay.
    assert_eq!(ids(&double), vec![5]);
}

#[test]
fn an_unavailable_pipeline_is_transient_for_ingress() {
    let (double, endpoint) = start();
    double.set_unavailable(None);
    match ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ) {
        IngressOutcome::Transient(e) => assert_error(&e, Some(503), Some("PipelineUnavailable")),
        other => panic!("expected Transient, got {other:?}"),
    }
    double.clear_unavailable();
    assert!(ids(&double).is_empty());
}

#[test]
fn a_refused_connection_is_transient_without_a_status() {
    let endpoint = FelderaEndpoint::new(&refused_base_url(), PIPELINE, None).expect("endpoint");
    let answer = execute(&endpoint.ingress(
        &Name::unquoted("t"),
        ndjson(&[json!({"insert": {"id": 1}})]).into(),
        TIMEOUT_MS,
    ));
    assert!(matches!(answer, Answer::Failed(_)), "{answer:?}");
    match classify_ingress(answer.reply()) {
        IngressOutcome::Transient(e) => {
            assert_error(&e, None, None);
            assert!(e.message.starts_with("no answer from Feldera"), "{e}");
        }
        other => panic!("expected Transient, got {other:?}"),
    }
    // Every endpoint reads a refused connection the same way.
    assert!(matches!(
        classify_pipeline(execute(&endpoint.get_pipeline(TIMEOUT_MS)).reply()),
        PipelineOutcome::Transient(_)
    ));
    assert!(matches!(
        completion(&endpoint, "dG9rZW4"),
        CompletionOutcome::Transient(_)
    ));
}

#[test]
fn a_paused_pipeline_answers_503_after_the_proxy_timeout_which_is_transient() {
    let (double, endpoint) = start();
    double.set_proxy_timeout(Duration::from_millis(200));
    double.pause();
    match classify_pipeline(execute(&endpoint.get_pipeline(TIMEOUT_MS)).reply()) {
        PipelineOutcome::Ready(info) => {
            assert_eq!(info.deployment_status.as_deref(), Some("Paused"));
        }
        other => panic!("a paused pipeline still describes itself: {other:?}"),
    }
    match ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ) {
        IngressOutcome::Transient(e) => {
            assert_error(&e, Some(503), Some("PipelineInteractionUnreachable"));
        }
        other => panic!("expected Transient, got {other:?}"),
    }
    assert!(
        ids(&double).is_empty(),
        "the timed-out request is not ingested while the pipeline stays paused"
    );
    // Like the real pipeline, the double keeps the request the manager gave up on and
    // applies it once it resumes: a 503 here never means "not applied" (docs/feldera.md).
    double.resume();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ids(&double).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        ids(&double),
        [1],
        "the request answered 503 is applied after the resume"
    );
}

#[test]
fn a_shell_timeout_shorter_than_the_proxy_timeout_is_transient_without_a_status() {
    let (double, endpoint) = start();
    double.set_proxy_timeout(Duration::from_secs(2));
    double.pause();
    let answer = execute(&endpoint.ingress(
        &Name::unquoted("t"),
        ndjson(&[json!({"insert": {"id": 1}})]).into(),
        200,
    ));
    assert!(matches!(answer, Answer::Failed(_)), "{answer:?}");
    match classify_ingress(answer.reply()) {
        IngressOutcome::Transient(e) => assert_error(&e, None, None),
        other => panic!("expected Transient, got {other:?}"),
    }
    assert!(ids(&double).is_empty(), "nothing is processed while paused");
}

// ---- completion ----

#[test]
fn completion_reports_the_step_that_processed_the_token() {
    let (double, endpoint) = start();
    let first = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ));
    let second = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 2}})],
    ));
    // Each request is its own step in the double, counted from 1.
    assert_eq!(
        completion(&endpoint, &first),
        CompletionOutcome::Complete { step: Some(1) }
    );
    assert_eq!(
        completion(&endpoint, &second),
        CompletionOutcome::Complete { step: Some(2) }
    );
    assert_eq!(double.status()["step"], json!(2));
    assert_eq!(ids(&double), vec![1, 2]);
}

#[test]
fn completion_is_in_progress_until_released_then_complete() {
    let (double, endpoint) = start_with(
        DoubleConfig::new(PIPELINE, schema()).with_completion_delay(CompletionDelay::Never),
    );
    let token = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ));
    assert_eq!(completion(&endpoint, &token), CompletionOutcome::InProgress);
    assert!(ids(&double).is_empty(), "accepted is not processed");
    double.release_completions();
    assert!(matches!(
        completion(&endpoint, &token),
        CompletionOutcome::Complete { step: Some(_) }
    ));
    assert_eq!(ids(&double), vec![1]);
}

#[test]
fn completion_in_progress_answered_with_202_is_in_progress() {
    let config = DoubleConfig::new(PIPELINE, schema())
        .with_completion_delay(CompletionDelay::Never)
        .with_inprogress_202(true);
    let (double, endpoint) = start_with(config);
    let token = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ));
    assert_eq!(completion(&endpoint, &token), CompletionOutcome::InProgress);
    assert_eq!(last_logged(&double, "completion_status").status, 202);
}

#[test]
fn a_token_from_before_a_restart_is_restarted_410() {
    let (double, endpoint) = start_with(
        DoubleConfig::new(PIPELINE, schema()).with_completion_delay(CompletionDelay::Never),
    );
    let token = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ));
    double.restart(false);
    match completion(&endpoint, &token) {
        CompletionOutcome::Restarted(e) => assert_error(&e, Some(410), Some("PipelineRestarted")),
        other => panic!("expected Restarted, got {other:?}"),
    }
    double.release_completions();
    assert!(ids(&double).is_empty(), "the accepted request was lost");
}

#[test]
fn a_malformed_token_is_fatal_400_invalid_param() {
    let (double, endpoint) = start();
    // Characters outside base64 also prove the builder percent-encodes the token.
    match completion(&endpoint, "not a token/+&=") {
        CompletionOutcome::Fatal(e) => assert_error(&e, Some(400), Some("InvalidParam")),
        other => panic!("expected Fatal, got {other:?}"),
    }
    let logged = last_logged(&double, "completion_status");
    assert!(
        logged.path.ends_with("?token=not%20a%20token%2F%2B%26%3D"),
        "{}",
        logged.path
    );
}

// ---- ad-hoc query ----

fn ingest_two_rows(double: &FelderaDouble, endpoint: &FelderaEndpoint) {
    accepted_token(ingress(
        endpoint,
        &Name::unquoted("t"),
        &[
            json!({"insert": {"id": 2, "name": "b", "n": 20}}),
            json!({"insert": {"id": 1, "name": null, "n": 10}}),
        ],
    ));
    assert_eq!(ids(double), vec![1, 2]);
}

#[test]
fn ndjson_and_json_array_answers_parse_to_the_same_rows() {
    let (double, endpoint) = start();
    ingest_two_rows(&double, &endpoint);
    let sql = "SELECT * FROM t ORDER BY id";
    let from_ndjson = rows(query(&endpoint, sql));
    let expected: Vec<Map<String, Value>> = [
        json!({"id": 1, "name": null, "n": 10}),
        json!({"id": 2, "name": "b", "n": 20}),
    ]
    .into_iter()
    .map(|v| v.as_object().cloned().expect("an object"))
    .collect();
    assert_eq!(from_ndjson, expected, "explicit nulls, in ORDER BY order");

    double.set_query_array(true);
    let from_array = rows(query(&endpoint, sql));
    assert_eq!(from_array, from_ndjson);
    assert_eq!(last_logged(&double, "query").rows, Some(2));
}

#[test]
fn a_quoted_table_is_queryable_by_its_quoted_name() {
    let (_double, endpoint) = start();
    accepted_token(ingress(
        &endpoint,
        &Name::quoted("TaBle"),
        &[json!({"insert": {"Id": 3, "Val": "q"}})],
    ));
    let found = rows(query(&endpoint, "SELECT * FROM \"TaBle\""));
    assert_eq!(found.len(), 1);
    assert_eq!(
        Value::Object(found[0].clone()),
        json!({"Id": 3, "Val": "q"})
    );
}

#[test]
fn count_star_is_one_row_with_the_count() {
    let (double, endpoint) = start();
    ingest_two_rows(&double, &endpoint);
    let found = rows(query(&endpoint, "SELECT COUNT(*) FROM t"));
    assert_eq!(found.len(), 1, "{found:?}");
    let values: Vec<&Value> = found[0].values().collect();
    assert_eq!(values, vec![&json!(2)]);
    let empty = rows(query(&endpoint, "SELECT * FROM \"TaBle\""));
    assert!(
        empty.is_empty(),
        "an empty answer is zero rows, not an error"
    );
}

#[test]
fn a_table_without_key_and_not_materialized_is_an_ad_hoc_query_error() {
    let (double, endpoint) = start();
    match query(&endpoint, "SELECT * FROM bag") {
        QueryOutcome::Fatal(e) => assert_error(&e, Some(400), Some("AdHocQueryError")),
        other => panic!("expected Fatal, got {other:?}"),
    }
    assert_eq!(
        last_logged(&double, "query").error_code.as_deref(),
        Some("AdHocQueryError")
    );
}

#[test]
fn an_error_line_after_streamed_rows_is_interrupted() {
    let (double, endpoint) = start();
    ingest_two_rows(&double, &endpoint);
    double.fail_next_queries(1);
    match query(&endpoint, "SELECT * FROM t") {
        QueryOutcome::Interrupted(e) => {
            assert_eq!(e.status, Some(200));
            assert!(!e.message.is_empty(), "{e:?}");
        }
        other => panic!("expected Interrupted, got {other:?}"),
    }
    assert_eq!(
        rows(query(&endpoint, "SELECT * FROM t")).len(),
        2,
        "one failure only"
    );

    // The same error element closing a JSON array answer.
    double.set_query_array(true);
    double.fail_next_queries(1);
    assert!(matches!(
        query(&endpoint, "SELECT * FROM t"),
        QueryOutcome::Interrupted(_)
    ));
}

// ---- transactions ----

#[test]
fn a_transaction_makes_its_rows_visible_only_at_commit() {
    let (double, endpoint) = start();
    let started =
        classify_start_transaction(execute(&endpoint.start_transaction(TIMEOUT_MS)).reply());
    let StartTransactionOutcome::Started { transaction_id } = started else {
        panic!("expected Started, got {started:?}");
    };
    assert_eq!(double.status()["transaction_id"], json!(transaction_id));

    let again =
        classify_start_transaction(execute(&endpoint.start_transaction(TIMEOUT_MS)).reply());
    match again {
        StartTransactionOutcome::AlreadyOpen(e) => assert_eq!(e.status, Some(409), "{e}"),
        other => panic!("expected AlreadyOpen, got {other:?}"),
    }

    let token = accepted_token(ingress(
        &endpoint,
        &Name::unquoted("t"),
        &[json!({"insert": {"id": 1}})],
    ));
    assert_eq!(completion(&endpoint, &token), CompletionOutcome::InProgress);
    assert!(ids(&double).is_empty(), "held by the open transaction");

    let committed =
        classify_commit_transaction(execute(&endpoint.commit_transaction(TIMEOUT_MS)).reply());
    assert_eq!(committed, CommitOutcome::CommitStarted);
    assert_eq!(ids(&double), vec![1]);
    assert!(matches!(
        completion(&endpoint, &token),
        CompletionOutcome::Complete { .. }
    ));
    assert_eq!(double.status()["transaction_id"], Value::Null);
}

#[test]
fn committing_without_a_transaction_is_400_no_transaction() {
    let (_double, endpoint) = start();
    match classify_commit_transaction(execute(&endpoint.commit_transaction(TIMEOUT_MS)).reply()) {
        CommitOutcome::NoTransaction(e) => {
            assert_eq!(e.status, Some(400), "{e}");
            assert_eq!(e.error_code.as_deref(), Some("NoTransactionInProgress"));
        }
        other => panic!("expected NoTransaction, got {other:?}"),
    }
}

#[test]
fn transaction_calls_while_unavailable_are_transient() {
    let (double, endpoint) = start();
    double.set_unavailable(None);
    assert!(matches!(
        classify_start_transaction(execute(&endpoint.start_transaction(TIMEOUT_MS)).reply()),
        StartTransactionOutcome::Transient(_)
    ));
    assert!(matches!(
        classify_commit_transaction(execute(&endpoint.commit_transaction(TIMEOUT_MS)).reply()),
        CommitOutcome::Transient(_)
    ));
    assert!(matches!(
        query(&endpoint, "SELECT * FROM t"),
        QueryOutcome::Transient(_)
    ));
}
