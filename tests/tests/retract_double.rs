//! The core's retraction questions asked of the Feldera double over real HTTP: every key
//! type is read with the key scan (its answer read piece by piece as the core reads it),
//! read back exactly, deleted with the delete lines retraction writes, and the count query
//! then says zero.
//!
//! The inserts are written by hand in the ingress encoding slotline's converter writes.

use std::time::Duration;

use serde_json::{json, Map, Value};
use slotline_core::feldera::{
    classify_ingress, classify_query, FelderaEndpoint, HttpRequest, IngressOutcome, QueryOutcome,
    Reply, RowStream,
};
use slotline_core::retract::{
    count_query, plan_keys, read_count, read_keys, scan_query, Key, KeyPlan,
};
use slotline_core::schema::{parse_program_schema, Name, Table};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};

const PIPELINE: &str = "p1";
const TIMEOUT_MS: u64 = 10_000;

/// Executes a request exactly as the core built it, as a shell would; `(status, body)`.
fn execute(request: &HttpRequest) -> (u16, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut builder = ureq::http::Request::builder()
        .method(request.method.as_str())
        .uri(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    let http_request = agent
        .configure_request(builder.body(request.body.to_vec()).expect("a request"))
        .timeout_global(Some(Duration::from_millis(request.timeout_ms)))
        .build();
    let mut response = agent.run(http_request).expect("the double answers");
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_vec().expect("a body"))
}

fn query_rows(endpoint: &FelderaEndpoint, sql: &str) -> Vec<Map<String, Value>> {
    let (status, body) = execute(&endpoint.query(sql, TIMEOUT_MS));
    match classify_query(Reply::Answered {
        status,
        body: &body,
    }) {
        QueryOutcome::Rows(rows) => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn ingest(endpoint: &FelderaEndpoint, table: &Name, body: Vec<u8>) {
    let (status, answer) = execute(&endpoint.ingress(table, body.into(), TIMEOUT_MS));
    let outcome = classify_ingress(Reply::Answered {
        status,
        body: &answer,
    });
    assert!(
        matches!(outcome, IngressOutcome::Accepted { .. }),
        "{outcome:?}"
    );
}

/// Every key, as retraction reads them: one scan, its answer read in small pieces (cut
/// inside lines) through the core's streamed-row reader.
fn read_all(endpoint: &FelderaEndpoint, plan: &KeyPlan) -> Vec<Key> {
    let sql = scan_query(plan);
    let (status, body) = execute(&endpoint.query_streamed(&sql, TIMEOUT_MS));
    assert_eq!(status, 200, "{sql}: {}", String::from_utf8_lossy(&body));
    let mut reader = RowStream::default();
    let mut keys = Vec::new();
    for piece in body.chunks(7) {
        let rows = reader.push(piece).unwrap_or_else(|e| panic!("{sql}: {e}"));
        keys.extend(read_keys(plan, rows, keys.len() + 1).unwrap_or_else(|e| panic!("{e}")));
    }
    let rows = reader.finish().unwrap_or_else(|e| panic!("{sql}: {e}"));
    keys.extend(read_keys(plan, rows, keys.len() + 1).unwrap_or_else(|e| panic!("{e}")));
    keys
}

fn field(name: &str, ty: Value) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": ty})
}

/// A keyed table: its name, its key column types and its keys in ascending order, each key
/// in the ingress encoding.
type Case = (&'static str, Vec<Value>, Vec<Vec<Value>>);

fn cases() -> Vec<Case> {
    let ty = |t: &str| json!({"type": t, "nullable": false});
    let one = |values: Vec<Value>| values.into_iter().map(|v| vec![v]).collect::<Vec<_>>();
    vec![
        (
            "ints",
            vec![ty("BIGINT")],
            one(vec![json!(i64::MIN), json!(-1), json!(0), json!(i64::MAX)]),
        ),
        (
            "tinys",
            vec![ty("TINYINT")],
            one(vec![json!(-128), json!(127)]),
        ),
        (
            "bools",
            vec![ty("BOOLEAN")],
            one(vec![json!(false), json!(true)]),
        ),
        (
            "texts",
            vec![json!({"type": "VARCHAR", "nullable": false, "precision": -1})],
            one(vec![
                json!(""),
                json!("\"); DROP TABLE texts; --"),
                json!("a\nb"),
                json!("back\\slash"),
                json!("it's"),
                json!("é😀"),
            ]),
        ),
        (
            "uuids",
            vec![ty("UUID")],
            one(vec![
                json!("0eebc99a-9c0b-4ef8-bb6d-6bb9bd380a11"),
                json!("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            ]),
        ),
        (
            "decimals",
            vec![json!({"type": "DECIMAL", "nullable": false, "precision": 38, "scale": 2})],
            one(vec![
                json!("-999999999999999999999999999999999999.99"),
                json!("-0.05"),
                json!("0.00"),
                json!("9.50"),
                json!("10.00"),
                json!("999999999999999999999999999999999999.99"),
            ]),
        ),
        (
            "bins",
            vec![ty("VARBINARY")],
            one(vec![json!([]), json!([0]), json!([0, 171]), json!([255])]),
        ),
        (
            "dates",
            vec![ty("DATE")],
            one(vec![
                json!("0001-01-01"),
                json!("2024-02-29"),
                json!("9999-12-31"),
            ]),
        ),
        (
            "times",
            vec![ty("TIME")],
            one(vec![
                json!("00:00:00"),
                json!("12:34:56.000000001"),
                json!("12:34:56.5"),
                json!("23:59:59.999999"),
            ]),
        ),
        (
            "stamps",
            vec![ty("TIMESTAMP")],
            one(vec![
                json!("0001-01-01 00:00:00"),
                json!("2024-01-02 03:04:05"),
                json!("2024-01-02 03:04:05.5"),
                json!("9999-12-31 23:59:59.999999"),
            ]),
        ),
        (
            "zoned",
            vec![ty("TIMESTAMP_TZ")],
            one(vec![
                json!("0001-01-01T00:00:00+00:00"),
                json!("2024-01-02T03:04:05.123456+00:00"),
            ]),
        ),
        (
            "pairs",
            vec![
                json!({"type": "VARCHAR", "nullable": false, "precision": -1}),
                json!({"type": "DECIMAL", "nullable": false, "precision": 10, "scale": 2}),
                ty("TIMESTAMP"),
            ],
            vec![
                vec![json!("a"), json!("-1.00"), json!("2024-01-01 00:00:00")],
                vec![json!("a"), json!("-1.00"), json!("2024-01-01 00:00:01")],
                vec![json!("a"), json!("9.50"), json!("0001-01-01 00:00:00")],
                vec![json!("a"), json!("10.00"), json!("0001-01-01 00:00:00")],
                vec![json!("a'"), json!("0.00"), json!("0001-01-01 00:00:00")],
                vec![json!("b"), json!("-1.00"), json!("0001-01-01 00:00:00")],
            ],
        ),
    ]
}

fn schema() -> Value {
    let inputs: Vec<Value> = cases()
        .into_iter()
        .map(|(name, types, _)| {
            let columns: Vec<String> = (0..types.len()).map(|i| format!("c{i}")).collect();
            let mut fields: Vec<Value> = columns
                .iter()
                .zip(types)
                .map(|(c, ty)| field(c, ty))
                .collect();
            fields.push(field(
                "payload",
                json!({"type": "INTEGER", "nullable": true}),
            ));
            json!({"name": name, "case_sensitive": false, "materialized": false,
                   "properties": {}, "primary_key": columns, "fields": fields})
        })
        .collect();
    json!({"inputs": inputs, "outputs": []})
}

fn table(name: &str) -> Table {
    let parsed = parse_program_schema(schema().to_string().as_bytes()).expect("schema");
    parsed
        .inputs
        .into_iter()
        .find(|t| t.name.name == name)
        .expect("table")
}

#[test]
fn every_key_type_scans_exactly_deletes_exactly_and_counts_to_zero() {
    let double = FelderaDouble::start(DoubleConfig::new(PIPELINE, schema())).expect("starts");
    let endpoint = FelderaEndpoint::new(&double.base_url(), PIPELINE, None).expect("endpoint");
    for (name, _, keys) in cases() {
        let table = table(name);
        let plan = plan_keys(&table).unwrap_or_else(|e| panic!("{e}"));
        // Inserted in reverse so the answer's order is the query engine's doing.
        let mut body = String::new();
        for (n, key) in keys.iter().enumerate().rev() {
            let mut row = Map::new();
            for (i, value) in key.iter().enumerate() {
                row.insert(format!("c{i}"), value.clone());
            }
            row.insert("payload".into(), json!(n));
            body.push_str(&json!({ "insert": row }).to_string());
            body.push('\n');
        }
        ingest(&endpoint, &plan.table, body.into_bytes());

        let read = read_all(&endpoint, &plan);
        let mut described: Vec<String> = read.iter().map(|k| plan.describe(k)).collect();
        described.sort();
        let mut expected: Vec<String> = keys
            .iter()
            .map(|key| {
                let parts: Vec<String> = plan
                    .columns
                    .iter()
                    .zip(key)
                    .map(|(c, v)| format!("{}={}", c.name, v))
                    .collect();
                parts.join(", ")
            })
            .collect();
        expected.sort();
        assert_eq!(described, expected, "{name}: every key, exactly");

        let mut deletes = Vec::new();
        for key in &read {
            plan.write_delete(key, &mut deletes);
        }
        ingest(&endpoint, &plan.table, deletes);
        let count = read_count(&query_rows(&endpoint, &count_query(&plan)));
        assert_eq!(count, Ok(0), "{name}: the deletes matched every stored key");
        let left = read_all(&endpoint, &plan);
        assert!(left.is_empty(), "{name}: {left:?}");
        assert_eq!(
            double.table(name).expect("table").rows.len(),
            0,
            "{name}: the double holds nothing"
        );
    }
}

#[test]
fn a_query_of_a_table_that_cannot_be_queried_is_an_ad_hoc_query_error() {
    let schema = json!({"inputs": [
        {"name": "bag", "case_sensitive": false, "materialized": false, "properties": {},
         "fields": [field("k", json!({"type": "BIGINT", "nullable": false}))]}],
        "outputs": []});
    let double = FelderaDouble::start(DoubleConfig::new(PIPELINE, schema)).expect("starts");
    let endpoint = FelderaEndpoint::new(&double.base_url(), PIPELINE, None).expect("endpoint");
    let (status, body) = execute(&endpoint.query(
        "SELECT COUNT(*) AS \"slotline_count\" FROM \"bag\"",
        TIMEOUT_MS,
    ));
    let answer: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error_code"], "AdHocQueryError");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("non-materialized")),
        "{answer}"
    );
}
