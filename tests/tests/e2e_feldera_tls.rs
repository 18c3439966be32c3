//! End to end, both binaries: an `https://` Feldera. The double serves its API over TLS
//! with a certificate issued by a CA generated here (rcgen), which no public root knows.
//!
//! With `FELDERA_CA_CERT` naming that CA, a snapshot and streamed rows arrive and the slot
//! advances, and `check` finds the pipeline. Without it, or with a certificate for another
//! host name, every attempt is refused: that is a Feldera the connector cannot reach, so it
//! backs off and exits 69 at the no-progress deadline, as for an unreachable Feldera, with
//! the reason (and its fix) on stderr, never the API key, and without a slot. A
//! `FELDERA_CA_CERT` that cannot be read or holds no certificate exits 2 before anything
//! is contacted.

use serde_json::{json, Value};
use slotline_tests::e2e::{shared_cluster, Env, Shell};
use slotline_tests::feldera_double::DoubleConfig;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// A recognisable API key: it must never appear in what the connector prints.
const API_KEY: &str = "apikey-tls-canary-5d1f0c";

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
     CREATE PUBLICATION pub FOR TABLE users;";

/// The test CA and the server identities it issued, in files under the shared cluster's
/// directory (its watchdog removes it when the test process ends).
struct Pki {
    /// The CA certificate, PEM.
    ca: PathBuf,
    /// A certificate for `127.0.0.1` (an IP address subject alternative name) and its key.
    ip_cert: String,
    ip_key: String,
    /// A certificate for `feldera.invalid` only, from the same CA, and its key.
    other_name_cert: String,
    other_name_key: String,
    /// A self-signed certificate (no CA flag) for `localhost` and `127.0.0.1`, as Feldera's
    /// HTTPS guide makes one, its key, and the file holding it (its own trust anchor).
    self_signed_cert: String,
    self_signed_key: String,
    self_signed: PathBuf,
    dir: PathBuf,
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "slotline feldera test CA");
        let ca = params.self_signed(&ca_key).expect("CA");
        let issue = |name: &str| {
            let key = rcgen::KeyPair::generate().expect("key");
            let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).expect("params");
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let cert = params.signed_by(&key, &ca, &ca_key).expect("sign");
            (cert.pem(), key.serialize_pem())
        };
        let (ip_cert, ip_key) = issue("127.0.0.1");
        let (other_name_cert, other_name_key) = issue("feldera.invalid");
        let dir = shared_cluster()
            .data_dir()
            .parent()
            .expect("the cluster has a directory")
            .join("feldera-tls");
        std::fs::create_dir_all(&dir).expect("dir");
        let ca_path = dir.join("feldera-ca.pem");
        std::fs::write(&ca_path, ca.pem()).expect("write the CA");
        let self_key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        let self_signed_cert = params.self_signed(&self_key).expect("self-signed").pem();
        let self_signed = dir.join("feldera-self-signed.pem");
        std::fs::write(&self_signed, &self_signed_cert).expect("write the certificate");
        Pki {
            self_signed_cert,
            self_signed_key: self_key.serialize_pem(),
            self_signed,
            ca: ca_path,
            ip_cert,
            ip_key,
            other_name_cert,
            other_name_key,
            dir,
        }
    })
}

fn schema() -> Value {
    let field = |name: &str, ty: &str, nullable: bool| {
        json!({"name": name, "case_sensitive": false,
               "columntype": {"type": ty, "nullable": nullable}})
    };
    json!({"inputs": [{"name": "users", "case_sensitive": false, "materialized": false,
        "properties": {}, "primary_key": ["id"],
        "fields": [field("id", "BIGINT", false), field("name", "VARCHAR", true)]}],
        "outputs": []})
}

/// A database with a published table, and a double serving HTTPS with `cert`.
fn https_env(prefix: &str, cert: &str, key: &str) -> Env {
    let env = Env::with_double(
        prefix,
        SETUP,
        DoubleConfig::new("p", schema()).with_tls(cert, key),
    );
    assert!(env.feldera.base_url().starts_with("https://127.0.0.1:"));
    env
}

fn ca_path() -> String {
    pki().ca.display().to_string()
}

/// Runs the connector until it exits on its own; its exit code and log.
fn run_to_exit(shell: Shell, env: &Env, extra: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut connector = env.start(shell, extra);
    let code = connector.wait_exit(Duration::from_secs(60));
    (code, connector.log_text())
}

/// The API key never reaches the connector's output, and no slot was made.
fn assert_no_key_and_no_slot(shell: Shell, env: &Env, log: &str) {
    assert!(
        !log.contains(API_KEY),
        "{shell:?} printed the API key:\n{log}"
    );
    assert!(!env.slot_exists(), "{shell:?} left a slot behind:\n{log}");
}

#[test]
fn with_the_private_ca_a_snapshot_and_streamed_rows_arrive_and_the_slot_advances() {
    let pki = pki();
    for shell in Shell::BOTH {
        let env = https_env("ftls_ok", &pki.ip_cert, &pki.ip_key);
        env.sql("INSERT INTO users VALUES (1, 'before the start')");
        let mut connector = env.start(
            shell,
            &[
                ("TABLES", "users"),
                ("SNAPSHOT_MODE", "initial"),
                ("FELDERA_CA_CERT", &ca_path()),
                ("FELDERA_API_KEY", API_KEY),
                ("RUST_LOG", "debug"),
            ],
        );
        let snapshotted = env.wait_snapshot_complete_and_caught_up(Duration::from_secs(60));
        assert!(snapshotted, "{shell:?}:\n{}", connector.log_text());
        let before = env.slot_confirmed().expect("the slot exists");
        let commit = env.write_txn("INSERT INTO users VALUES (2, 'streamed')");
        let caught_up = env.wait_caught_up(Duration::from_secs(30));
        assert!(caught_up, "{shell:?}:\n{}", connector.log_text());
        let after = env.slot_confirmed().expect("the slot exists");
        assert!(
            env.lsn_at_least(&after, &commit) && !env.lsn_at_least(&before, &after),
            "{shell:?}: confirmed_flush_lsn went from {before} to {after}, commit at {commit}"
        );
        env.assert_rows_equal("users", "users", "id");
        assert_eq!(env.feldera_rows("users", "id").len(), 2);
        assert_eq!(env.feldera.tls_handshake_failures(), 0);
        let code = connector.stop(Duration::from_secs(30));
        let log = connector.log_text();
        assert_eq!(code, Some(0), "{shell:?}:\n{log}");
        assert!(
            !log.contains(API_KEY),
            "{shell:?} printed the API key:\n{log}"
        );
    }
}

#[test]
fn check_reaches_the_https_pipeline_with_the_private_ca_or_a_self_signed_certificate() {
    let pki = pki();
    let self_signed = pki.self_signed.display().to_string();
    let identities = [
        (&pki.ip_cert, &pki.ip_key, ca_path()),
        (&pki.self_signed_cert, &pki.self_signed_key, self_signed),
    ];
    for shell in Shell::BOTH {
        for (cert, key, trusted) in &identities {
            check_is_green(shell, cert, key, trusted);
        }
    }
}

/// Runs `check` with the environment's configuration plus `extra`: its exit code, its
/// lines about Feldera and everything it printed.
fn check(shell: Shell, env: &Env, extra: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let pairs = env.config(&[&[("TABLES", "users"), ("FELDERA_API_KEY", API_KEY)], extra].concat());
    let out = Command::new(shell.binary())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(pairs.iter().map(|(k, v)| (k, v)))
        .arg("check")
        .stdin(Stdio::null())
        .output()
        .expect("run check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let printed = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    let feldera = stdout
        .lines()
        .filter(|l| l.starts_with("ok   feldera ") || l.starts_with("FAIL feldera "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !printed.contains(API_KEY),
        "{shell:?} printed the API key:\n{printed}"
    );
    assert!(!env.slot_exists(), "{shell:?}: check created the slot");
    (out.status.code(), feldera, printed)
}

fn check_is_green(shell: Shell, cert: &str, key: &str, trusted: &str) {
    let env = https_env("ftls_check", cert, key);
    let (code, feldera, printed) = check(shell, &env, &[("FELDERA_CA_CERT", trusted)]);
    assert_eq!(code, Some(0), "{shell:?}:\n{printed}");
    assert!(
        feldera
            .lines()
            .any(|l| l.starts_with("ok   feldera pipeline ") && l.ends_with(" Running")),
        "{shell:?}:\n{printed}"
    );
}

#[test]
fn without_feldera_ca_cert_the_certificate_is_not_trusted_and_the_exit_is_69() {
    let pki = pki();
    for shell in Shell::BOTH {
        let env = https_env("ftls_untrusted", &pki.ip_cert, &pki.ip_key);
        let (code, log) = run_to_exit(
            shell,
            &env,
            &[
                ("TABLES", "users"),
                ("FELDERA_API_KEY", API_KEY),
                ("NO_PROGRESS_TIMEOUT_SECS", "2"),
                ("RUST_LOG", "debug"),
            ],
        );
        assert_eq!(code, Some(69), "{shell:?}:\n{log}");
        // The first line names the fix; the exit reason repeats it as the last failure.
        for needle in [
            "Feldera's TLS certificate is not trusted",
            "UnknownIssuer",
            "set FELDERA_CA_CERT to a PEM file holding that CA",
            &format!("Feldera at {}", env.feldera.base_url()),
            "NO_PROGRESS_TIMEOUT_SECS",
        ] {
            assert!(log.contains(needle), "{shell:?}: no {needle:?} in\n{log}");
        }
        assert!(
            env.feldera.tls_handshake_failures() > 0,
            "{shell:?}: the double saw no refused handshake"
        );
        assert!(env.feldera.requests().is_empty(), "{shell:?}");
        assert_no_key_and_no_slot(shell, &env, &log);
        let (code, feldera, printed) = check(shell, &env, &[]);
        assert_eq!(code, Some(1), "{shell:?}:\n{printed}");
        assert!(
            feldera.starts_with("FAIL feldera ") && feldera.contains("FELDERA_CA_CERT"),
            "{shell:?}:\n{printed}"
        );
    }
}

#[test]
fn an_unreachable_https_feldera_exits_69_as_well() {
    // The exit a refused certificate is compared with: nothing listens on the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("https://127.0.0.1:{port}");
    for shell in Shell::BOTH {
        let env = https_env("ftls_down", &pki().ip_cert, &pki().ip_key);
        let (code, log) = run_to_exit(
            shell,
            &env,
            &[
                ("TABLES", "users"),
                ("FELDERA_URL", &url),
                ("FELDERA_CA_CERT", &ca_path()),
                ("FELDERA_API_KEY", API_KEY),
                ("NO_PROGRESS_TIMEOUT_SECS", "2"),
            ],
        );
        assert_eq!(code, Some(69), "{shell:?}:\n{log}");
        assert!(log.contains(&format!("Feldera at {url}")), "{log}");
        assert_no_key_and_no_slot(shell, &env, &log);
    }
}

#[test]
fn a_certificate_for_another_host_name_is_refused() {
    let pki = pki();
    for shell in Shell::BOTH {
        let env = https_env("ftls_name", &pki.other_name_cert, &pki.other_name_key);
        let (code, log) = run_to_exit(
            shell,
            &env,
            &[
                ("TABLES", "users"),
                ("FELDERA_CA_CERT", &ca_path()),
                ("FELDERA_API_KEY", API_KEY),
                ("NO_PROGRESS_TIMEOUT_SECS", "2"),
            ],
        );
        assert_eq!(code, Some(69), "{shell:?}:\n{log}");
        for needle in [
            "Feldera's TLS certificate does not name the host of FELDERA_URL",
            "feldera.invalid",
        ] {
            assert!(log.contains(needle), "{shell:?}: no {needle:?} in\n{log}");
        }
        assert!(env.feldera.tls_handshake_failures() > 0, "{shell:?}");
        assert!(env.feldera.requests().is_empty(), "{shell:?}");
        assert_no_key_and_no_slot(shell, &env, &log);
    }
}

#[test]
fn an_unusable_feldera_ca_cert_exits_2_naming_the_setting_and_path() {
    let pki = pki();
    let not_pem = pki.dir.join("not-a-certificate.txt");
    std::fs::write(&not_pem, "this is not a certificate\n").expect("write");
    let broken_pem = pki.dir.join("broken.pem");
    std::fs::write(
        &broken_pem,
        "-----BEGIN CERTIFICATE-----\n%%% not base64 %%%\n-----END CERTIFICATE-----\n",
    )
    .expect("write");
    let missing = pki.dir.join("no-such-ca.pem").display().to_string();
    let not_pem = not_pem.display().to_string();
    let broken_pem = broken_pem.display().to_string();
    let cases = [
        (&missing, format!("FELDERA_CA_CERT: cannot read {missing}")),
        (
            &not_pem,
            format!("FELDERA_CA_CERT: {not_pem} holds no PEM certificate"),
        ),
        (
            &broken_pem,
            format!("FELDERA_CA_CERT: {broken_pem} is not PEM"),
        ),
    ];
    for shell in Shell::BOTH {
        for (path, expected) in &cases {
            let env = https_env("ftls_bad_ca", &pki.ip_cert, &pki.ip_key);
            let (code, log) = run_to_exit(
                shell,
                &env,
                &[
                    ("TABLES", "users"),
                    ("FELDERA_CA_CERT", path.as_str()),
                    ("FELDERA_API_KEY", API_KEY),
                ],
            );
            assert_eq!(code, Some(2), "{shell:?} {path}:\n{log}");
            assert!(
                log.contains(expected.as_str()),
                "{shell:?}: no {expected:?} in\n{log}"
            );
            // Before any side effect: Feldera was never contacted.
            assert_eq!(env.feldera.tls_handshake_failures(), 0, "{shell:?}");
            assert!(env.feldera.requests().is_empty(), "{shell:?}");
            assert_no_key_and_no_slot(shell, &env, &log);
        }
    }
}
