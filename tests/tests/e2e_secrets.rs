//! End to end, both binaries: no secret reaches any output.
//!
//! The connector streams rows as a role that logs in with a password (SCRAM) given in
//! `PG_URL`, sending a `FELDERA_API_KEY`, at `RUST_LOG=trace`, at the default level and as
//! JSON lines; `check` and `status` run with the same secrets at `RUST_LOG=trace`; and the
//! configuration refuses (exit 2) a `FELDERA_URL` carrying `user:password@` and a `PG_URL`
//! carrying a password. Everything each process wrote on stdout and stderr is searched for
//! every secret and for any `PIECE` characters of it in a row: a wire dump prints 16 bytes a
//! line, so a secret may show only in pieces.
//!
//! The double records the `Authorization` header it received, so the key is known to have
//! been on the wire; the runs at trace are known to log below INFO (their own debug lines
//! are there), so a clean log is not a quiet one.

use serde_json::{json, Value};
use slotline_tests::e2e::{shared_cluster, Connector, Env, Shell};
use slotline_tests::pg::{wait_for, PgCluster};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The role that authenticates with `PG_PASSWORD` (SCRAM-SHA-256).
const ROLE: &str = "secret_user";
const PG_PASSWORD: &str = "pgPw7Qx2Lr9Kd4ZtWv";
/// Longer than two dump lines, so a dump holds at least one whole line of it.
const API_KEY: &str = "apiKey3vN8qW1mZ6yT0uR5sE2aH7jL4xC9bF";
const URL_USER: &str = "feldUser9GhT";
const URL_PASSWORD: &str = "feldPw4Jk8Mn2Bq6Ys";
/// A value carried by every row sent: only a wire dump would print it.
const ROW_VALUE: &str = "rowVal5Hs2Np8KdQe";

const SECRETS: [(&str, &str); 5] = [
    ("the PostgreSQL password", PG_PASSWORD),
    ("the API key", API_KEY),
    ("the user of FELDERA_URL", URL_USER),
    ("the password of FELDERA_URL", URL_PASSWORD),
    ("a row's value", ROW_VALUE),
];

/// Characters in a row that count as a leak: less than a dump line (16), more than any
/// text slotline prints could share with these random strings by chance.
const PIECE: usize = 8;

/// The shared cluster, with `ROLE` admitted by password only (above the trust lines).
fn cluster() -> &'static PgCluster {
    static ROLE_READY: OnceLock<()> = OnceLock::new();
    let pg = shared_cluster();
    ROLE_READY.get_or_init(|| {
        pg.psql(
            "postgres",
            &format!(
                "SET password_encryption = 'scram-sha-256'; \
                 CREATE ROLE {ROLE} LOGIN REPLICATION SUPERUSER PASSWORD '{PG_PASSWORD}'"
            ),
        );
        pg.reconfigure(
            &format!("host all {ROLE} 127.0.0.1/32 scram-sha-256\n"),
            &[],
        );
    });
    pg
}

fn env(prefix: &str) -> Env {
    cluster();
    let field = |name: &str, ty: &str, nullable: bool| json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": nullable}});
    let schema = json!({"inputs": [{"name": "users", "case_sensitive": false, "materialized": false,
        "properties": {}, "primary_key": ["id"],
        "fields": [field("id", "BIGINT", false), field("name", "VARCHAR", true)]}], "outputs": []});
    Env::new(
        prefix,
        "CREATE TABLE users (id bigint PRIMARY KEY, name text); \
         CREATE PUBLICATION pub FOR TABLE users;",
        schema,
    )
}

/// The environment's configuration with every secret in play, then `extra`. Without
/// `RUST_LOG` in `extra` the variable is unset: the default level.
fn secret_config(env: &Env, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let pg_url = format!(
        "postgres://{ROLE}:{PG_PASSWORD}@127.0.0.1:{}/{}",
        env.pg.port(),
        env.db
    );
    let mut pairs = env.config(&[
        ("TABLES", "users"),
        ("PG_URL", &pg_url),
        ("FELDERA_API_KEY", API_KEY),
    ]);
    pairs.retain(|(key, _)| key != "RUST_LOG");
    for (key, value) in extra {
        pairs.retain(|(k, _)| k != key);
        pairs.push(((*key).to_owned(), (*value).to_owned()));
    }
    pairs
}

/// `FELDERA_URL` of the environment's double with `user:password@` in its authority.
fn url_with_userinfo(env: &Env) -> String {
    let base = env.feldera.base_url();
    let (scheme, rest) = base
        .split_once("://")
        .expect("the double's URL has a scheme");
    format!("{scheme}://{URL_USER}:{URL_PASSWORD}@{rest}")
}

/// The first piece of a secret (`PIECE` characters of it in a row) found in `output`.
fn leak(output: &str) -> Option<(&'static str, String)> {
    SECRETS.iter().find_map(|(name, secret)| {
        let chars: Vec<char> = secret.chars().collect();
        chars
            .windows(PIECE.min(chars.len()))
            .map(|window| window.iter().collect::<String>())
            .find(|piece| output.contains(piece.as_str()))
            .map(|piece| (*name, piece))
    })
}

/// Fails with the lines that show a secret (not the whole output: a trace log is long).
fn assert_no_secret(what: &str, output: &str) {
    if let Some((name, piece)) = leak(output) {
        let lines: Vec<&str> = output
            .lines()
            .filter(|line| line.contains(piece.as_str()))
            .take(10)
            .collect();
        panic!(
            "{what}: {name} shows (as {piece:?}) in {} line(s), among them:\n{}",
            output
                .lines()
                .filter(|l| l.contains(piece.as_str()))
                .count(),
            lines.join("\n")
        );
    }
}

/// What a process printed and how it exited.
struct Outcome {
    code: Option<i32>,
    printed: String,
}

/// Runs `<binary> <args>` to its end with exactly `pairs` as its environment (and `PATH`).
fn run(shell: Shell, pairs: &[(String, String)], args: &[&str]) -> Outcome {
    let out = Command::new(shell.binary())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(pairs.iter().map(|(k, v)| (k, v)))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the binary");
    Outcome {
        code: out.status.code(),
        printed: format!(
            "--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Runs the connector until it has delivered two more rows (ids `first` and `first + 1`),
/// stops it and returns everything it printed.
fn stream(shell: Shell, env: &Env, pairs: &[(String, String)], first: i64) -> String {
    let mut connector = Connector::spawn(shell, pairs, &env.name);
    let streaming = connector.wait_log("streaming from slot", Duration::from_secs(30));
    assert!(streaming, "{shell:?} did not stream:\n{}", tail(&connector));
    env.sql(&format!(
        "INSERT INTO users VALUES ({first}, '{ROW_VALUE}'), ({}, '{ROW_VALUE}')",
        first + 1
    ));
    let expected = usize::try_from(first + 1).expect("ids are positive");
    let arrived = wait_for(Duration::from_secs(30), || {
        (env.feldera_count("users") == expected).then_some(())
    });
    assert!(
        arrived.is_some(),
        "{shell:?}: the rows did not arrive:\n{}",
        tail(&connector)
    );
    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{shell:?}:\n{}",
        tail(&connector)
    );
    connector.log_text()
}

/// The end of a connector's output whose start may be megabytes of trace, for failure
/// messages; passed through `leak` first, so a failure never prints a secret of its own.
fn tail(connector: &Connector) -> String {
    let text = connector.log_text();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    match leak(&tail) {
        Some((name, _)) => format!("(not shown: it holds {name})"),
        None => tail,
    }
}

fn streaming_check_and_status_print_no_secret(shell: Shell) {
    let env = env("secrets_run");
    let trace = [("RUST_LOG", "trace")];

    for args in [&["check"][..], &["check", "--json"]] {
        let out = run(shell, &secret_config(&env, &trace), args);
        assert_no_secret(&format!("{shell:?} {args:?}"), &out.printed);
        assert_eq!(out.code, Some(0), "{shell:?} {args:?}: {}", out.printed);
    }

    let runs: [(&str, &[(&str, &str)]); 3] = [
        ("RUST_LOG=trace", &trace),
        ("the default level", &[]),
        (
            "RUST_LOG=trace LOG_FORMAT=json",
            &[("RUST_LOG", "trace"), ("LOG_FORMAT", "json")],
        ),
    ];
    for (index, (what, extra)) in runs.iter().enumerate() {
        env.feldera.clear_requests();
        let first = i64::try_from(2 * index + 1).expect("small");
        let log = stream(shell, &env, &secret_config(&env, extra), first);
        assert_no_secret(&format!("{shell:?} streaming at {what}"), &log);
        // The key was on the wire: the double received it with every request.
        let requests = env.feldera.requests();
        assert!(
            requests.iter().any(|r| r.endpoint == "ingress"),
            "{shell:?} at {what}: no ingress request reached the double"
        );
        let bearer = format!("Bearer {API_KEY}");
        assert!(
            requests
                .iter()
                .all(|r| r.authorization.as_deref() == Some(bearer.as_str())),
            "{shell:?} at {what}: a request came without the API key"
        );
        let own_debug = log.contains("core seed");
        if extra.contains(&("RUST_LOG", "trace")) {
            assert!(
                own_debug,
                "{shell:?} at {what}: slotline's debug lines are missing"
            );
        } else {
            assert!(
                !own_debug,
                "{shell:?} at {what}: debug lines at the default level"
            );
        }
        if extra.contains(&("LOG_FORMAT", "json")) {
            let json_lines = log
                .lines()
                .filter(|line| serde_json::from_str::<Value>(line).is_ok())
                .count();
            assert!(
                json_lines > 0 && json_lines == log.lines().count(),
                "{shell:?} at {what}: not every line is JSON"
            );
        }
    }

    for args in [&["status"][..], &["status", "--json"]] {
        let out = run(shell, &secret_config(&env, &trace), args);
        assert_no_secret(&format!("{shell:?} {args:?}"), &out.printed);
        assert_eq!(out.code, Some(0), "{shell:?} {args:?}: {}", out.printed);
        assert!(
            out.printed.contains(&env.slot_name()),
            "{shell:?} {args:?}: {}",
            out.printed
        );
    }
}

fn configuration_errors_print_no_secret(shell: Shell) {
    let env = env("secrets_refused");
    let userinfo = url_with_userinfo(&env);
    for format in ["text", "json"] {
        for args in [&[][..], &["check"], &["status"]] {
            let extra = [
                ("RUST_LOG", "trace"),
                ("LOG_FORMAT", format),
                ("FELDERA_URL", userinfo.as_str()),
            ];
            let out = run(shell, &secret_config(&env, &extra), args);
            let what = format!("{shell:?} {args:?} with user info in FELDERA_URL ({format})");
            assert_no_secret(&what, &out.printed);
            assert_eq!(out.code, Some(2), "{what}: {}", out.printed);
            assert!(
                out.printed.contains("FELDERA_URL"),
                "{what}: {}",
                out.printed
            );
        }
    }
    // PG_URL refused for another reason than its password: a URL that does not parse is
    // echoed with its password masked (so the role shows); a bad parameter is named alone.
    let (port, db) = (env.pg.port(), &env.db);
    let refused_pg_urls = [
        (format!("postgres://{ROLE}:{PG_PASSWORD}@127.0.0.1:{port}x/{db}"), true),
        (format!("postgres://{ROLE}@127.0.0.1:{port}/{db}?password={PG_PASSWORD}&sslmode=sometimes"), false),
        (format!("host=127.0.0.1 port={port} user={ROLE} password={PG_PASSWORD} dbname={db} nonsense"), true),
    ];
    for (pg_url, echoed) in &refused_pg_urls {
        for args in [&[][..], &["check"], &["status"]] {
            let out = run(
                shell,
                &secret_config(&env, &[("RUST_LOG", "trace"), ("PG_URL", pg_url)]),
                args,
            );
            let what = format!("{shell:?} {args:?} with a refused PG_URL (echoed: {echoed})");
            assert_no_secret(&what, &out.printed);
            assert_eq!(out.code, Some(2), "{what}: {}", out.printed);
            assert!(out.printed.contains("PG_URL"), "{what}: {}", out.printed);
            assert_eq!(
                out.printed.contains(ROLE),
                *echoed,
                "{what}: {}",
                out.printed
            );
        }
    }
    assert!(
        !env.slot_exists(),
        "{shell:?}: a refused start made the slot"
    );
}

slotline_tests::both_shells!(
    streaming_check_and_status_print_no_secret,
    configuration_errors_print_no_secret,
);
