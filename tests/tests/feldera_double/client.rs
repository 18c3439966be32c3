//! A small blocking HTTP client for the double's tests (ureq 3, statuses as values), and
//! the schema the tests share.

// Shared by two test crates through `#[path]`; each uses a different subset.
#![allow(dead_code)]

use std::time::Duration;

use serde_json::{json, Value};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};

pub const PIPELINE: &str = "p1";

/// `t`: keyed, one column of most types. `m`: keyless, materialized. `Quoted`: keyless,
/// case-sensitive, not materialized (so not queryable).
pub fn schema() -> Value {
    let f =
        |name: &str, ty: Value| json!({"name": name, "case_sensitive": false, "columntype": ty});
    json!({
        "inputs": [
            {"name": "t", "case_sensitive": false, "materialized": false, "properties": {},
             "primary_key": ["id"],
             "fields": [
                f("id", json!({"type": "BIGINT", "nullable": false})),
                f("name", json!({"type": "VARCHAR", "nullable": true, "precision": -1})),
                f("amount", json!({"type": "DECIMAL", "nullable": true, "precision": 10, "scale": 2})),
                f("ts", json!({"type": "TIMESTAMP", "nullable": true})),
                f("bin", json!({"type": "VARBINARY", "nullable": true})),
                f("d", json!({"type": "DATE", "nullable": true})),
                f("ok", json!({"type": "BOOLEAN", "nullable": true})),
                f("small", json!({"type": "SMALLINT", "nullable": true})),
                f("u", json!({"type": "UUID", "nullable": true})),
                f("v", json!({"type": "VARIANT", "nullable": true})),
                f("tags", json!({"type": "ARRAY", "nullable": true,
                                 "component": {"type": "VARCHAR", "nullable": true, "precision": -1}})),
             ]},
            {"name": "m", "case_sensitive": false, "materialized": true, "properties": {},
             "fields": [
                f("k", json!({"type": "VARCHAR", "nullable": false, "precision": -1})),
                f("n", json!({"type": "INTEGER", "nullable": true})),
             ]},
            {"name": "Quoted", "case_sensitive": true, "materialized": false, "properties": {},
             "fields": [
                {"name": "Who", "case_sensitive": true, "columntype": {"type": "VARCHAR", "nullable": false}},
             ]},
        ],
        "outputs": [
            {"name": "error_view", "case_sensitive": false, "materialized": false, "properties": {},
             "fields": [f("message", json!({"type": "VARCHAR", "nullable": false}))]},
        ],
    })
}

pub fn start() -> FelderaDouble {
    start_with(DoubleConfig::new(PIPELINE, schema()))
}

pub fn start_with(config: DoubleConfig) -> FelderaDouble {
    FelderaDouble::start(config).expect("the double starts")
}

/// A status and a body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text))
    }

    /// NDJSON lines parsed one by one.
    pub fn lines(&self) -> Vec<Value> {
        self.text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
            .collect()
    }

    pub fn error_code(&self) -> String {
        self.json()["error_code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

pub struct Client {
    agent: ureq::Agent,
    pub base: String,
}

impl Client {
    pub fn new(double: &FelderaDouble) -> Client {
        Client::with_timeout(double, Duration::from_secs(20))
    }

    pub fn with_timeout(double: &FelderaDouble, timeout: Duration) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into();
        Client {
            agent,
            base: double.base_url(),
        }
    }

    fn reply(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
        let mut resp = result.expect("HTTP exchange with the double");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().expect("body");
        Reply { status, text }
    }

    pub fn get(&self, path: &str) -> Reply {
        Self::reply(self.agent.get(format!("{}{path}", self.base)).call())
    }

    pub fn delete(&self, path: &str) -> Reply {
        Self::reply(self.agent.delete(format!("{}{path}", self.base)).call())
    }

    pub fn post(&self, path: &str, body: &str) -> Reply {
        Self::reply(self.agent.post(format!("{}{path}", self.base)).send(body))
    }

    /// `POST /v0/pipelines/p1/ingress/{table}?format=json&update_format=insert_delete`.
    pub fn ingress(&self, table: &str, body: &str) -> Reply {
        self.post(
            &format!(
                "/v0/pipelines/{PIPELINE}/ingress/{table}?format=json&update_format=insert_delete"
            ),
            body,
        )
    }

    /// Ingests and returns the token, asserting 200.
    pub fn ingest_ok(&self, table: &str, body: &str) -> String {
        let r = self.ingress(table, body);
        assert_eq!(r.status, 200, "ingress failed: {}", r.text);
        r.json()["token"].as_str().expect("token").to_string()
    }

    pub fn completion(&self, token: &str) -> Reply {
        Self::reply(
            self.agent
                .get(format!(
                    "{}/v0/pipelines/{PIPELINE}/completion_status",
                    self.base
                ))
                .query("token", token)
                .call(),
        )
    }

    pub fn query(&self, sql: &str) -> Reply {
        Self::reply(
            self.agent
                .get(format!("{}/v0/pipelines/{PIPELINE}/query", self.base))
                .query("sql", sql)
                .query("format", "json")
                .call(),
        )
    }
}
