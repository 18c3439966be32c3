//! The Feldera double over real HTTP: table semantics, validation, query encodings,
//! transactions and the JSON shapes of docs/feldera.md. Faults and lifecycle are in
//! `feldera_double_faults.rs`.

#[path = "feldera_double/client.rs"]
mod client;

use base64::Engine as _;
use client::{start, Client, PIPELINE};
use serde_json::{json, Value};

fn rows_of(
    double: &slotline_tests::feldera_double::FelderaDouble,
    table: &str,
) -> Vec<(Value, i64)> {
    double
        .table(table)
        .expect("table exists")
        .rows
        .into_iter()
        .map(|r| (r.row, r.weight))
        .collect()
}

#[test]
fn pipeline_status_serves_the_configured_schema_and_other_names_are_404() {
    let double = start();
    let c = Client::new(&double);
    let r = c.get(&format!("/v0/pipelines/{PIPELINE}"));
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["name"], PIPELINE);
    assert_eq!(body["program_info"]["schema"], client::schema());
    assert_eq!(body["program_status"], "Success");
    assert_eq!(body["deployment_status"], "Running");

    let r = c.get("/v0/pipelines/nope");
    assert_eq!(r.status, 404);
    let err = r.json();
    let mut keys: Vec<&String> = err.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["details", "error_code", "message"],
        "Feldera's error body: {err}"
    );
    assert_eq!(err["error_code"], "UnknownPipelineName");
    assert!(err["message"].as_str().unwrap().contains("nope"));
}

#[test]
fn the_pipeline_list_names_the_one_pipeline_without_its_program() {
    let double = start();
    let c = Client::new(&double);
    for path in ["/v0/pipelines?selector=status", "/v0/pipelines"] {
        let r = c.get(path);
        assert_eq!(r.status, 200, "{path}");
        let list = r.json();
        let pipelines = list.as_array().expect("a JSON array");
        assert_eq!(pipelines.len(), 1, "{list}");
        assert_eq!(pipelines[0]["name"], PIPELINE);
        assert_eq!(pipelines[0]["deployment_status"], "Running");
        assert!(pipelines[0].get("program_info").is_none(), "{list}");
    }
    let r = c.get("/v0/pipelines?selector=everything");
    assert_eq!(r.status, 400);
}

#[test]
fn insert_of_an_existing_key_overwrites_the_row() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok("t", r#"{"insert": {"id": 1, "name": "a"}}"#);
    c.ingest_ok("t", r#"{"insert": {"id": 1, "name": "b"}}"#);
    let rows = rows_of(&double, "t");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0["name"], "b");
    assert_eq!(rows[0].1, 1);
}

#[test]
fn keyed_delete_needs_only_the_key_and_an_absent_key_is_ignored() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        "{\"insert\": {\"id\": 1, \"name\": \"a\"}}\n{\"insert\": {\"id\": 2}}",
    );
    c.ingest_ok("t", "{\"delete\": {\"id\": 1}}\n{\"delete\": {\"id\": 99}}");
    let rows = rows_of(&double, "t");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0["id"], 2);
    assert!(
        double.table("t").unwrap().faults.is_empty(),
        "absent-key delete is not a fault"
    );
}

#[test]
fn partial_update_changes_only_listed_columns_and_null_sets_null() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        r#"{"insert": {"id": 1, "name": "a", "amount": "5.00", "ok": true}}"#,
    );
    c.ingest_ok("t", r#"{"update": {"id": 1, "name": "z", "ok": null}}"#);
    c.ingest_ok("t", r#"{"update": {"id": 7, "name": "ghost"}}"#);
    let rows = rows_of(&double, "t");
    assert_eq!(
        rows.len(),
        1,
        "update of an absent key inserts nothing: {rows:?}"
    );
    let row = &rows[0].0;
    assert_eq!(row["name"], "z");
    assert_eq!(row["amount"], "5.00", "unlisted column unchanged");
    assert_eq!(row["ok"], Value::Null, "explicit null sets NULL");
}

#[test]
fn keyless_table_is_a_multiset_and_deleting_an_absent_row_is_a_fault() {
    let double = start();
    let c = Client::new(&double);
    let row = r#"{"k": "x", "n": 1}"#;
    c.ingest_ok(
        "m",
        &format!("{{\"insert\": {row}}}\n{{\"insert\": {row}}}"),
    );
    assert_eq!(rows_of(&double, "m"), vec![(json!({"k": "x", "n": 1}), 2)]);
    c.ingest_ok("m", &format!("{{\"delete\": {row}}}"));
    assert_eq!(rows_of(&double, "m"), vec![(json!({"k": "x", "n": 1}), 1)]);
    assert!(double.table("m").unwrap().faults.is_empty());

    c.ingest_ok("m", r#"{"delete": {"k": "y", "n": 2}}"#);
    let m = double.table("m").unwrap();
    assert_eq!(m.faults.len(), 1, "{:?}", m.faults);
    assert!(m.faults[0].contains("\"y\""), "{}", m.faults[0]);
    // The same fault is visible through the inspection endpoint.
    let tables = c.get("/control/tables").json();
    let m_json = tables["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "m")
        .unwrap()
        .clone();
    assert_eq!(m_json["faults"].as_array().unwrap().len(), 1);
    assert_eq!(m_json["rows"][0]["weight"], 1);
}

#[test]
fn parse_errors_answer_400_and_the_valid_lines_are_still_ingested() {
    let double = start();
    let c = Client::new(&double);
    let body = [
        r#"{"insert": {"id": 1}}"#,
        r#"{"insert": {"id": 2, "small": 70000}}"#,
        r#"{"insert": {"id": 3, "ts": "2024-01-01 25:00:00"}}"#,
        r#"{"insert": {"name": "no key"}}"#,
        r#"{"insert": {"id": 4, "ID_unknown_key": 5}}"#,
    ]
    .join("\n");
    let r = c.ingress("t", &body);
    assert_eq!(r.status, 400);
    let err = r.json();
    assert_eq!(err["error_code"], "ParseErrors");
    assert_eq!(err["details"]["num_errors"], 3);
    let errors = err["details"]["errors"].as_array().unwrap();
    let numbers: Vec<u64> = errors
        .iter()
        .map(|e| e["event_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, vec![2, 3, 4]);
    assert!(errors.iter().all(|e| e["description"].is_string()));
    let ids: Vec<Value> = rows_of(&double, "t")
        .into_iter()
        .map(|(r, _)| r["id"].clone())
        .collect();
    assert_eq!(
        ids,
        vec![json!(1), json!(4)],
        "valid lines ingested, unknown key ignored"
    );
}

#[test]
fn update_on_a_keyless_table_is_a_parse_error() {
    let double = start();
    let c = Client::new(&double);
    let r = c.ingress("m", r#"{"update": {"k": "x", "n": 1}}"#);
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), "ParseErrors");
    assert!(rows_of(&double, "m").is_empty());
}

#[test]
fn values_must_parse_into_their_column_types() {
    let double = start();
    let c = Client::new(&double);
    let bad = [
        r#"{"insert": {"id": 1.5}}"#,
        r#"{"insert": {"id": 1, "amount": "123456789.00"}}"#,
        r#"{"insert": {"id": 1, "bin": "AQI="}}"#,
        r#"{"insert": {"id": 1, "d": "2023-02-29"}}"#,
        r#"{"insert": {"id": 1, "u": "xyz"}}"#,
        r#"{"insert": {"id": 1, "ok": "true"}}"#,
        r#"{"insert": {"id": null}}"#,
    ];
    for line in bad {
        let r = c.ingress("t", line);
        assert_eq!(r.status, 400, "{line} should be rejected: {}", r.text);
    }
    assert!(rows_of(&double, "t").is_empty());
    let good = r#"{"insert": {"ID": 1, "Amount": 2.5, "bin": [0, 255], "d": "2024-02-29",
        "u": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "ok": false, "v": {"any": [1, "x"]},
        "tags": ["a", null], "ts": "2024-01-02 03:04:05.250"}}"#
        .replace('\n', " ");
    c.ingest_ok("t", &good);
    let row = &rows_of(&double, "t")[0].0;
    assert_eq!(row["amount"], "2.50");
    assert_eq!(row["bin"], json!([0, 255]));
    assert_eq!(row["u"], "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(row["v"], json!({"any": [1, "x"]}));
    assert_eq!(row["ts"], "2024-01-02 03:04:05.25");
}

#[test]
fn table_names_match_unquoted_case_insensitively_and_quoted_exactly() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok("T", r#"{"insert": {"id": 1}}"#);
    c.ingest_ok("%22Quoted%22", r#"{"insert": {"Who": "me"}}"#);
    assert_eq!(rows_of(&double, "Quoted"), vec![(json!({"Who": "me"}), 1)]);
    for wrong in ["Quoted", "%22quoted%22", "nosuch"] {
        let r = c.ingress(wrong, r#"{"insert": {"Who": "x"}}"#);
        assert_eq!(r.status, 404, "{wrong}");
        assert_eq!(r.error_code(), "ConfigError.UnknownInputStream");
    }
    // A quoted column needs its exact spelling.
    let r = c.ingress("%22Quoted%22", r#"{"insert": {"who": "lowercase"}}"#);
    assert_eq!(r.status, 400, "{}", r.text);
}

#[test]
fn json_sent_without_format_json_is_rejected_as_csv_and_nothing_is_ingested() {
    let double = start();
    let c = Client::new(&double);
    let r = c.post(
        &format!("/v0/pipelines/{PIPELINE}/ingress/t"),
        r#"{"insert": {"id": 1}}"#,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), "ParseErrors");
    assert!(rows_of(&double, "t").is_empty());
}

#[test]
fn token_decodes_to_this_incarnation_endpoint_and_count() {
    let double = start();
    let c = Client::new(&double);
    let t1 = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    let t2 = c.ingest_ok("t", r#"{"insert": {"id": 2}}"#);
    let decode = |t: &str| -> Value {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(t)
            .expect("URL-safe base64 without padding");
        serde_json::from_slice(&bytes).expect("JSON inside")
    };
    let (a, b) = (decode(&t1), decode(&t2));
    assert_eq!(a["u"], double.incarnation());
    assert_eq!(a["e"], b["e"], "same spelling, same endpoint");
    assert_eq!((a["c"].as_u64(), b["c"].as_u64()), (Some(1), Some(2)));
    let r = c.completion(&t2);
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["status"], "complete");
    assert!(body["step"].as_u64().is_some(), "{body}");
}

#[test]
fn malformed_token_is_400_invalid_param() {
    let double = start();
    let c = Client::new(&double);
    for token in ["%%%", "bm90LWpzb24", ""] {
        let r = c.completion(token);
        assert_eq!(r.status, 400, "{token}: {}", r.text);
        assert_eq!(r.error_code(), "InvalidParam");
    }
}

#[test]
fn query_uses_feldera_adhoc_encoding_with_explicit_nulls() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        r#"{"insert": {"id": 1, "amount": "12.5", "ts": "2024-01-02 03:04:05", "bin": [0, 171, 16], "d": "2024-03-01"}}"#,
    );
    let r = c.query("SELECT id, amount, ts, bin, d, name FROM T");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.text,
        "{\"id\":1,\"amount\":12.50,\"ts\":\"2024-01-02T03:04:05\",\"bin\":\"00ab10\",\"d\":\"2024-03-01\",\"name\":null}\n"
    );
    let row = &r.lines()[0];
    assert!(row["amount"].is_number(), "decimals as numbers");
    assert!(
        row.as_object().unwrap().contains_key("name"),
        "explicit null"
    );
}

#[test]
fn query_orders_counts_and_refuses_what_it_cannot_answer() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        "{\"insert\": {\"id\": 1, \"name\": \"b\"}}\n{\"insert\": {\"id\": 2, \"name\": \"a\"}}\n{\"insert\": {\"id\": 3}}",
    );
    let names = |sql: &str| -> Vec<Value> {
        c.query(sql)
            .lines()
            .into_iter()
            .map(|l| l["name"].clone())
            .collect()
    };
    assert_eq!(
        names("select name from t order by name"),
        vec![json!("a"), json!("b"), Value::Null]
    );
    assert_eq!(
        names("select name from t order by name desc"),
        vec![Value::Null, json!("b"), json!("a")]
    );
    assert_eq!(
        c.query("SELECT COUNT(*) FROM t").lines(),
        vec![json!({"count(*)": 3})]
    );
    // Keyless but materialized: queryable.
    assert_eq!(c.query("select * from m").status, 200);

    for (sql, why) in [
        ("select * from \"Quoted\"", "no key, not materialized"),
        ("select * from t where id in (1, 2)", "IN is not understood"),
        ("select * from t where name > 1", "a number is no VARCHAR"),
        ("select id from t order by t.nosuch", "unknown column"),
        ("select other.id from t", "another table's qualifier"),
        ("select * from nosuch", "unknown table"),
        ("select nosuch from t", "unknown column"),
    ] {
        let r = c.query(sql);
        assert_eq!(r.status, 400, "{why}: {}", r.text);
        assert_eq!(r.error_code(), "AdHocQueryError", "{why}");
    }
}

#[test]
fn query_filters_limits_aliases_and_casts_as_the_retraction_pages_need() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        "{\"insert\": {\"id\": 1, \"name\": \"b\", \"amount\": \"10.00\"}}\n\
         {\"insert\": {\"id\": 2, \"name\": \"a\", \"amount\": \"9.50\"}}\n\
         {\"insert\": {\"id\": 3, \"name\": \"a\", \"amount\": \"-1\"}}\n\
         {\"insert\": {\"id\": 4, \"name\": \"it's\"}}",
    );
    let page = |sql: &str| c.query(sql).lines();
    // A keyset page over (name, amount): ordered by value, decimals cast to text.
    assert_eq!(
        page(
            "SELECT \"t\".\"name\" AS \"k0\", CAST(\"t\".\"amount\" AS VARCHAR) AS \"k1\" \
             FROM \"t\" WHERE (\"t\".\"name\" > 'a') OR (\"t\".\"name\" = 'a' AND \"t\".\"amount\" > \
             CAST('-1.00' AS DECIMAL(10, 2))) ORDER BY \"t\".\"name\", \"t\".\"amount\" LIMIT 2"
        ),
        vec![
            json!({"k0": "a", "k1": "9.50"}),
            json!({"k0": "b", "k1": "10.00"})
        ]
    );
    assert_eq!(
        page("SELECT id AS \"K\" FROM t WHERE name = 'it''s'"),
        vec![json!({"K": 4})],
        "quoted aliases keep their case; '' is a quote"
    );
    assert_eq!(
        page("SELECT id AS K FROM t WHERE (id >= -9223372036854775808 AND id < 3) ORDER BY K DESC"),
        vec![json!({"k": 2}), json!({"k": 1})],
        "unquoted aliases fold to lowercase and ORDER BY can name them"
    );
    assert_eq!(
        page("SELECT id FROM t WHERE amount <> CAST('10' AS DECIMAL(10, 0)) ORDER BY id"),
        vec![json!({"id": 2}), json!({"id": 3})],
        "NULL matches no comparison; decimals compare by value"
    );
    assert_eq!(
        page("SELECT COUNT(*) AS \"slotline_count\" FROM t WHERE id > 1"),
        vec![json!({"slotline_count": 3})]
    );
    assert_eq!(
        page("SELECT id FROM t ORDER BY id LIMIT 0"),
        Vec::<Value>::new()
    );
}

#[test]
fn query_compares_typed_literals_at_every_key_type() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok(
        "t",
        "{\"insert\": {\"id\": 1, \"ts\": \"0001-01-01 00:00:00\", \"bin\": [0, 171], \"d\": \"9999-12-31\", \
          \"ok\": false, \"u\": \"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}}\n\
         {\"insert\": {\"id\": 2, \"ts\": \"2024-01-02 03:04:05.5\", \"bin\": [1], \"d\": \"0001-01-01\", \
          \"ok\": true, \"u\": \"b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\"}}",
    );
    let ids = |condition: &str| -> Vec<Value> {
        let r = c.query(&format!("SELECT id FROM t WHERE {condition} ORDER BY id"));
        assert_eq!(r.status, 200, "{condition}: {}", r.text);
        r.lines().into_iter().map(|l| l["id"].clone()).collect()
    };
    assert_eq!(
        ids("ts > CAST('0001-01-01 00:00:00' AS TIMESTAMP(6))"),
        vec![json!(2)]
    );
    assert_eq!(
        ids("ts = CAST('2024-01-02 03:04:05.5' AS TIMESTAMP(6))"),
        vec![json!(2)]
    );
    assert_eq!(ids("bin > X'00ab'"), vec![json!(2)]);
    assert_eq!(ids("bin = X'00AB'"), vec![json!(1)]);
    assert_eq!(ids("d < CAST('9999-12-31' AS DATE)"), vec![json!(2)]);
    assert_eq!(ids("ok > FALSE"), vec![json!(2)]);
    assert_eq!(
        ids("u > 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"),
        vec![json!(2)]
    );
    assert_eq!(
        c.query("SELECT ts FROM t WHERE id = 2").lines(),
        vec![json!({"ts": "2024-01-02T03:04:05.500"})],
        "the query engine prints fractions in groups of three digits"
    );
}

#[test]
fn changes_inside_a_transaction_become_visible_at_commit() {
    let double = start();
    let c = Client::new(&double);
    let start_path = format!("/v0/pipelines/{PIPELINE}/start_transaction");
    let commit_path = format!("/v0/pipelines/{PIPELINE}/commit_transaction");
    let r = c.post(&start_path, "");
    assert_eq!(r.status, 200);
    assert!(r.json()["transaction_id"].as_u64().is_some(), "{}", r.text);
    assert_eq!(
        c.post(&start_path, "").status,
        409,
        "one transaction at a time"
    );

    let token = c.ingest_ok("t", r#"{"insert": {"id": 1}}"#);
    c.ingest_ok("m", r#"{"insert": {"k": "x"}}"#);
    assert!(rows_of(&double, "t").is_empty(), "invisible before commit");
    assert_eq!(
        c.query("select count(*) from t").lines(),
        vec![json!({"count(*)": 0})]
    );
    let held = c.completion(&token).json();
    assert_eq!(held["status"], "inprogress");
    assert!(held["step"].is_u64(), "in the circuit: {held}");

    let committed = c.post(&commit_path, "");
    assert_eq!(committed.status, 200);
    assert_eq!(committed.json(), json!("Transaction commit initiated"));
    assert_eq!(rows_of(&double, "t").len(), 1);
    assert_eq!(rows_of(&double, "m").len(), 1);
    assert_eq!(c.completion(&token).json()["status"], "complete");
    let again = c.post(&commit_path, "");
    assert_eq!(again.status, 400, "nothing left to commit");
    assert_eq!(again.error_code(), "NoTransactionInProgress");
}

#[test]
fn query_can_fail_after_streaming_and_can_answer_as_a_json_array() {
    let double = start();
    let c = Client::new(&double);
    c.ingest_ok("t", "{\"insert\": {\"id\": 1}}\n{\"insert\": {\"id\": 2}}");

    let r = c.post("/control/fail_query", r#"{"count": 1}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    let r = c.query("select id from t order by id");
    assert_eq!(r.status, 200, "the failure comes after the headers");
    let lines = r.lines();
    assert_eq!(&lines[..2], &[json!({"id": 1}), json!({"id": 2})]);
    assert!(
        lines[2]["error"].is_string(),
        "final error line: {}",
        r.text
    );
    assert_eq!(
        c.query("select id from t").lines().len(),
        2,
        "only the next query fails"
    );

    assert_eq!(
        c.post("/control/query_format", r#"{"array": true}"#).status,
        200
    );
    let r = c.query("select id from t order by id desc");
    assert_eq!(r.json(), json!([{"id": 2}, {"id": 1}]));
    double.set_query_array(false);
    assert_eq!(c.query("select id from t").lines().len(), 2);
}

/// A keyless table whose unquoted name has 2^8 spellings: Feldera names an endpoint after the
/// table as the URL spells it, so each spelling is an endpoint of its own.
fn eight_letter_table() -> slotline_tests::feldera_double::FelderaDouble {
    client::start_with(slotline_tests::feldera_double::DoubleConfig::new(
        PIPELINE,
        json!({"inputs": [{"name": "abcdefgh", "case_sensitive": false, "materialized": false,
            "properties": {}, "fields": [{"name": "id", "case_sensitive": false,
            "columntype": {"type": "BIGINT", "nullable": true}}]}], "outputs": []}),
    ))
}

fn spelling(n: u32) -> String {
    "abcdefgh"
        .chars()
        .enumerate()
        .map(|(i, c)| match n >> i & 1 {
            1 => c.to_ascii_uppercase(),
            _ => c,
        })
        .collect()
}

#[test]
fn past_100_ingress_endpoints_feldera_answers_429_and_known_ones_still_work() {
    let double = eight_letter_table();
    let c = Client::new(&double);
    let post = |n: u32| {
        c.post(
            &format!(
                "/v0/pipelines/{PIPELINE}/ingress/{}?format=json",
                spelling(n)
            ),
            "",
        )
    };
    for n in 0..100 {
        let r = post(n);
        assert_eq!(r.status, 200, "{n}: {}", r.text);
    }
    assert_eq!(double.ingress_endpoints().len(), 100);
    let r = post(100);
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (429, "ApiConnectionLimit")
    );
    assert_eq!(post(7).status, 200, "a known endpoint still works");
    assert_eq!(double.ingress_endpoints().len(), 100);
}

#[test]
fn ingress_endpoints_are_one_per_table_and_parser_configuration_whatever_the_spelling() {
    let double = start();
    let c = Client::new(&double);
    let at = |table: &str, query: &str| {
        c.post(
            &format!("/v0/pipelines/{PIPELINE}/ingress/{table}?{query}"),
            "",
        )
    };
    let slotline = "format=json&update_format=insert_delete&lines=single";
    for _ in 0..50 {
        assert_eq!(at("t", slotline).status, 200);
    }
    assert_eq!(
        double.ingress_endpoints().len(),
        1,
        "{:?}",
        double.ingress_endpoints()
    );
    for same in [
        "lines=single&format=json",
        "format=json&lines=single&json_flavor=default&array=false&force=false&other=1",
    ] {
        assert_eq!(at("t", same).status, 200, "{same}");
    }
    assert_eq!(
        double.ingress_endpoints().len(),
        1,
        "the same configuration spelled otherwise: {:?}",
        double.ingress_endpoints()
    );
    assert_eq!(at("t", "format=json").status, 200);
    assert_eq!(at("t", "format=json&lines=multiple").status, 200);
    assert_eq!(
        double.ingress_endpoints().len(),
        2,
        "lines=multiple (the default) is another configuration"
    );
    assert_eq!(at("m", slotline).status, 200);
    assert_eq!(at("T", slotline).status, 200);
    let endpoints = double.ingress_endpoints();
    assert_eq!(
        endpoints.len(),
        4,
        "another table, another spelling of t: {endpoints:?}"
    );
    assert!(
        endpoints[0].starts_with("t.api-ingress json") && endpoints[0].ends_with("lines=single")
    );
}

#[test]
fn an_unknown_lines_value_is_refused_as_feldera_does_and_makes_no_endpoint() {
    let double = start();
    let c = Client::new(&double);
    let r = c.post(
        &format!("/v0/pipelines/{PIPELINE}/ingress/t?format=json&lines=one"),
        "{\"insert\": {\"id\": 1}}",
    );
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.error_code(), "ConfigError.ParserConfigParseError");
    let message = r.json()["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains("unknown variant `one`, expected `multiple` or `single`"),
        "{message}"
    );
    assert!(double.ingress_endpoints().is_empty());
    assert!(rows_of(&double, "t").is_empty());
}

#[test]
fn a_value_spanning_lines_is_a_parse_error_with_lines_single_and_read_with_multiple() {
    let double = start();
    let c = Client::new(&double);
    let body =
        "{\"insert\":\n  {\"id\": 1}}\n{\"insert\": {\"id\": 2}} {\"insert\": {\"id\": 3}}\n";
    let path =
        |lines: &str| format!("/v0/pipelines/{PIPELINE}/ingress/t?format=json&lines={lines}");
    let r = c.post(&path("single"), body);
    assert_eq!((r.status, r.error_code().as_str()), (400, "ParseErrors"));
    let ids = |double: &slotline_tests::feldera_double::FelderaDouble| -> Vec<i64> {
        let mut ids: Vec<i64> = rows_of(double, "t")
            .iter()
            .filter_map(|(row, _)| row["id"].as_i64())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(&double),
        vec![2, 3],
        "the valid values were taken, two on one line"
    );
    let r = c.post(&path("multiple"), body);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&double), vec![1, 2, 3]);
}

#[test]
fn with_tls_the_same_api_is_served_over_https_only() {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let double = client::start_with(
        slotline_tests::feldera_double::DoubleConfig::new(PIPELINE, client::schema())
            .with_tls(cert.pem(), key.serialize_pem()),
    );
    let base = double.base_url();
    assert_eq!(base, format!("https://{}", double.addr()));
    let roots = [ureq::tls::Certificate::from_der(cert.der()).to_owned()];
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
                .build(),
        )
        .build()
        .new_agent();
    let mut reply = agent
        .get(&format!("{base}/v0/pipelines/{PIPELINE}"))
        .call()
        .expect("an answer over https");
    assert_eq!(reply.status().as_u16(), 200);
    let body: Value =
        serde_json::from_str(&reply.body_mut().read_to_string().expect("body")).expect("JSON");
    assert_eq!(body["deployment_status"], "Running");
    assert_eq!(double.tls_handshake_failures(), 0);
    // Plain HTTP on the same port is a failed handshake, not an answer.
    let plain = agent
        .get(&format!("http://{}/v0/pipelines/{PIPELINE}", double.addr()))
        .config()
        .timeout_global(Some(std::time::Duration::from_secs(5)))
        .build()
        .call();
    assert!(plain.is_err(), "{plain:?}");
    assert!(
        slotline_tests::pg::wait_for(std::time::Duration::from_secs(5), || {
            (double.tls_handshake_failures() == 1).then_some(())
        })
        .is_some(),
        "{}",
        double.tls_handshake_failures()
    );
}

#[test]
fn with_tls_an_unusable_identity_is_invalid_input() {
    let config = slotline_tests::feldera_double::DoubleConfig::new(PIPELINE, client::schema())
        .with_tls("not a certificate", "not a key");
    let error = slotline_tests::feldera_double::FelderaDouble::start(config)
        .expect_err("no certificate, no server");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("no PEM certificate"), "{error}");
}
