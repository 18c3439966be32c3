//! End to end, both binaries: TLS to a real PostgreSQL started with `ssl=on` and a CA
//! generated here (rcgen), client certificates, SCRAM channel binding, Unix sockets, the
//! password file and the connect timeout.
//!
//! The server's certificate names `localhost` only, so `verify-full` against 127.0.0.1 is
//! a host-name mismatch. A refused certificate exits 1 before any slot exists.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};
use slotline_tests::pg::{ClusterOptions, PgCluster};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The cluster with TLS, and where the client's files are.
struct Tls {
    pg: PgCluster,
    ca: PathBuf,
    other_ca: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    dir: PathBuf,
}

fn ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    (params.self_signed(&key).expect("CA"), key)
}

fn issued(
    names: Vec<String>,
    common_name: &str,
    issuer: &(rcgen::Certificate, rcgen::KeyPair),
) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(names).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    let cert = params.signed_by(&key, &issuer.0, &issuer.1).expect("sign");
    (cert.pem(), key.serialize_pem())
}

fn tls() -> &'static Tls {
    static TLS: OnceLock<Tls> = OnceLock::new();
    TLS.get_or_init(|| {
        let pg = PgCluster::start_with(ClusterOptions::default());
        let authority = ca("slotline test CA");
        let (server_cert, server_key) = issued(vec!["localhost".into()], "localhost", &authority);
        let (client_cert, client_key) = issued(vec![], "cert_user", &authority);
        let cert_file = pg.write_server_file("server.crt", server_cert.as_bytes());
        let key_file = pg.write_server_file("server.key", server_key.as_bytes());
        let ca_file = pg.write_server_file("ca.crt", authority.0.pem().as_bytes());
        pg.psql(
            "postgres",
            "SET password_encryption = 'scram-sha-256'; \
             CREATE ROLE scram_user LOGIN REPLICATION SUPERUSER PASSWORD 'scram-secret'; \
             CREATE ROLE cert_user LOGIN REPLICATION SUPERUSER; \
             CREATE ROLE plain_user LOGIN REPLICATION SUPERUSER PASSWORD 'plain-secret'",
        );
        pg.reconfigure(
            "hostssl all scram_user 127.0.0.1/32 scram-sha-256\n\
             hostssl all cert_user 127.0.0.1/32 cert\n\
             hostnossl all plain_user 127.0.0.1/32 scram-sha-256\n",
            &[
                ("ssl", "on"),
                ("ssl_cert_file", &cert_file.display().to_string()),
                ("ssl_key_file", &key_file.display().to_string()),
                ("ssl_ca_file", &ca_file.display().to_string()),
            ],
        );
        // Inside the cluster's directory, which its watchdog removes when the test process
        // ends (a static is never dropped).
        let dir = pg
            .data_dir()
            .parent()
            .expect("the cluster has a directory")
            .join("client-files");
        std::fs::create_dir_all(&dir).expect("dir");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        let other = ca("another CA");
        Tls {
            ca: write("ca.pem", &authority.0.pem()),
            other_ca: write("other-ca.pem", &other.0.pem()),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            pg,
            dir,
        }
    })
}

static ENV_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A database with a published table on the TLS cluster, and a double for it.
fn env(prefix: &str) -> Env {
    let pg = &tls().pg;
    let name = format!(
        "{prefix}_{}_{}",
        std::process::id(),
        ENV_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let db = pg.create_database(&name);
    pg.psql(
        &db,
        "CREATE TABLE users (id bigint PRIMARY KEY, name text); \
         CREATE PUBLICATION pub FOR TABLE users;",
    );
    let field = |name: &str, ty: &str, nullable: bool| json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": nullable}});
    let schema = json!({"inputs": [{"name": "users", "case_sensitive": false, "materialized": false,
        "properties": {}, "primary_key": ["id"],
        "fields": [field("id", "BIGINT", false), field("name", "VARCHAR", true)]}], "outputs": []});
    let feldera = FelderaDouble::start(DoubleConfig::new("p", schema)).expect("double");
    let state_dir = std::env::temp_dir().join(format!("slotline-state-{name}"));
    Env {
        pg,
        db,
        feldera,
        name,
        state_dir,
    }
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

fn with_tables<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = vec![("TABLES", "users")];
    all.extend_from_slice(extra);
    all
}

/// Runs the connector until it streams a row, and returns its log.
fn streams(shell: Shell, env: &Env, extra: &[(&str, &str)]) -> String {
    let mut connector = env.start(shell, &with_tables(extra));
    let streaming = connector.wait_log("streaming from slot", Duration::from_secs(30));
    let log = connector.log_text();
    assert!(streaming, "{shell:?} did not stream:\n{log}");
    env.sql("INSERT INTO users VALUES (1, 'a')");
    let arrived = slotline_tests::pg::wait_for(Duration::from_secs(20), || {
        (env.feldera_rows("users", "id").len() == 1).then_some(())
    });
    connector.stop(Duration::from_secs(20));
    let log = connector.log_text();
    assert!(
        arrived.is_some(),
        "{shell:?}: the row did not arrive:\n{log}"
    );
    log
}

/// Runs the connector until it exits, checks the code and that no slot was made.
fn refused(shell: Shell, env: &Env, extra: &[(&str, &str)], code: i32) -> String {
    let mut connector = env.start(shell, &with_tables(extra));
    let exit = connector.wait_exit(Duration::from_secs(60));
    let log = connector.log_text();
    assert_eq!(exit, Some(code), "{shell:?}:\n{log}");
    assert!(!env.slot_exists(), "{shell:?} left a slot behind");
    log
}

fn url(user: &str, host: &str, db: &str, query: &str) -> String {
    format!("postgres://{user}@{host}:{}/{db}?{query}", tls().pg.port())
}

#[test]
fn verify_full_streams_with_scram_bound_to_the_tls_session() {
    for shell in Shell::BOTH {
        let env = env("tls_full");
        let pg_url = url(
            "scram_user:scram-secret",
            "localhost",
            &env.db,
            &format!("sslmode=verify-full&sslrootcert={}", path(&tls().ca)),
        );
        let log = streams(shell, &env, &[("PG_URL", &pg_url)]);
        assert!(log.contains("chain and host name verified"), "{log}");
        assert!(
            log.contains("authenticated with SCRAM-SHA-256-PLUS over TLS, channel binding"),
            "{log}"
        );
    }
}

#[test]
fn require_encrypts_without_verifying_and_prefer_uses_tls_when_offered() {
    for shell in Shell::BOTH {
        for mode in ["require", "prefer"] {
            let env = env("tls_require");
            let pg_url = url(
                "scram_user:scram-secret",
                "127.0.0.1",
                &env.db,
                &format!("sslmode={mode}"),
            );
            let log = streams(shell, &env, &[("PG_URL", &pg_url)]);
            assert!(
                log.contains("server certificate not verified"),
                "{mode}: {log}"
            );
        }
    }
}

#[test]
fn a_wrong_ca_exits_1_naming_the_refused_certificate() {
    for shell in Shell::BOTH {
        let env = env("tls_wrong_ca");
        let pg_url = url(
            "scram_user:scram-secret",
            "127.0.0.1",
            &env.db,
            &format!("sslmode=verify-ca&sslrootcert={}", path(&tls().other_ca)),
        );
        let log = refused(shell, &env, &[("PG_URL", &pg_url)], 1);
        assert!(
            log.contains("the server's certificate was refused"),
            "{log}"
        );
        assert!(log.contains("UnknownIssuer"), "{log}");
    }
}

#[test]
fn a_host_name_mismatch_under_verify_full_exits_1() {
    for shell in Shell::BOTH {
        let env = env("tls_mismatch");
        let pg_url = url(
            "scram_user:scram-secret",
            "127.0.0.1",
            &env.db,
            &format!("sslmode=verify-full&sslrootcert={}", path(&tls().ca)),
        );
        let log = refused(shell, &env, &[("PG_URL", &pg_url)], 1);
        assert!(log.contains("not valid for name"), "{log}");
    }
}

#[test]
fn a_client_certificate_authenticates_under_cert() {
    for shell in Shell::BOTH {
        let env = env("tls_cert");
        let query = format!(
            "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
            path(&tls().ca),
            path(&tls().client_cert),
            path(&tls().client_key)
        );
        let pg_url = url("cert_user", "localhost", &env.db, &query);
        streams(shell, &env, &[("PG_URL", &pg_url)]);
    }
}

#[test]
fn a_missing_certificate_file_exits_2_naming_the_setting_and_path() {
    for shell in Shell::BOTH {
        let env = env("tls_missing");
        let pg_url = url(
            "scram_user:scram-secret",
            "localhost",
            &env.db,
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        );
        let log = refused(shell, &env, &[("PG_URL", &pg_url)], 2);
        assert!(
            log.contains("sslrootcert in PG_URL: cannot read /nonexistent/ca.pem"),
            "{log}"
        );
    }
}

#[test]
fn a_unix_socket_directory_connects_without_tls() {
    for shell in Shell::BOTH {
        let env = env("unix");
        let socket = tls().pg.socket_dir().display().to_string();
        let pg_url = format!(
            "host={socket} port={} user=postgres dbname={} sslmode=require",
            tls().pg.port(),
            env.db
        );
        let log = streams(shell, &env, &[("PG_URL", &pg_url)]);
        assert!(!log.contains("TLS established"), "{log}");
    }
}

#[test]
fn the_password_file_supplies_the_password() {
    use std::os::unix::fs::PermissionsExt;
    let file = tls().dir.join("pgpass");
    std::fs::write(&file, "127.0.0.1:*:*:plain_user:plain-secret\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    for shell in Shell::BOTH {
        let env = env("pgpass");
        let pg_url = url("plain_user", "127.0.0.1", &env.db, "sslmode=disable");
        streams(
            shell,
            &env,
            &[("PG_URL", &pg_url), ("PGPASSFILE", &path(&file))],
        );
    }
}

#[test]
fn a_handshake_that_never_finishes_times_out() {
    for shell in Shell::BOTH {
        let env = env("timeout");
        // Agrees to TLS, then says nothing.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let silent = std::thread::spawn(move || {
            let mut held = Vec::new();
            listener.set_nonblocking(true).expect("nonblocking");
            let until = std::time::Instant::now() + Duration::from_secs(20);
            while std::time::Instant::now() < until {
                if let Ok((mut stream, _)) = listener.accept() {
                    stream.set_nonblocking(false).expect("blocking");
                    let mut request = [0u8; 8];
                    if stream.read_exact(&mut request).is_ok() {
                        let _ = stream.write_all(b"S");
                    }
                    held.push(stream);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let pg_url = format!("postgres://u@127.0.0.1:{port}/db?sslmode=require&connect_timeout=2");
        let mut connector = env.start(
            shell,
            &with_tables(&[("PG_URL", &pg_url), ("NO_PROGRESS_TIMEOUT_SECS", "3")]),
        );
        let timed_out = connector.wait_log(
            "TLS handshake timed out after 2000 ms",
            Duration::from_secs(15),
        );
        let log = connector.log_text();
        connector.stop(Duration::from_secs(10));
        assert!(timed_out, "{shell:?}:\n{log}");
        drop(silent);
    }
}
