//! Server-side timeouts: the four that exist on every supported server go off in the
//! StartupMessage; `transaction_timeout` (PostgreSQL 17 and newer, and an unknown startup
//! parameter before that) goes off by a SET before the connection reports ready.

use super::*;

/// A trusting server's startup answer reporting `version`.
fn startup_reporting(version: &str) -> Vec<BackendMessage> {
    vec![
        BackendMessage::Authentication(Authentication::Ok),
        param("server_version", version),
        BackendMessage::BackendKeyData(crate::wire::BackendKeyData {
            process_id: 77,
            secret_key: Bytes::from_static(&[1, 2, 3, 4]),
        }),
        ready(TransactionStatus::Idle),
    ]
}

fn replication_config() -> ConnectionConfig {
    ConnectionConfig {
        replication: true,
        ..config(None)
    }
}

#[test]
fn from_17_transaction_timeout_is_switched_off_before_the_connection_is_ready() {
    let trace = run_both(|bytewise| {
        let mut h = Harness::new(replication_config(), bytewise);
        h.server(&startup_reporting("17.2"));
        // Not ready until the SET is answered: a caller cannot slip a query in before it.
        assert_eq!(h.conn.phase(), Phase::Login);
        assert!(matches!(
            h.conn.query("SELECT 1"),
            Err(UsageError::NotReady {
                phase: Phase::Login
            })
        ));
        h.server(&[complete("SET"), ready(TransactionStatus::Idle)]);
        assert_eq!(h.conn.phase(), Phase::Ready);
        h
    });
    insta::assert_snapshot!(trace, @r#"
    -> startup user=alice database=shop application_name=slotline replication=database DateStyle=ISO TimeZone=UTC IntervalStyle=postgres bytea_output=hex extra_float_digits=3 client_encoding=UTF8 statement_timeout=0 lock_timeout=0 idle_in_transaction_session_timeout=0 idle_session_timeout=0 row_security=off
       authenticated
       param server_version=17.2
       backend key pid=77
    -> Query "SET transaction_timeout = 0"
       ready
    "#);
}

#[test]
fn before_17_nothing_follows_the_startup_message() {
    for version in ["15.8 (Debian 15.8-0+deb12u1)", "16.4", "16beta2"] {
        for bytewise in [false, true] {
            let mut h = Harness::new(replication_config(), bytewise);
            h.server(&startup_reporting(version));
            assert_eq!(h.conn.phase(), Phase::Ready, "{version}");
            assert!(h.sent.is_empty(), "{version}: sent {:?}", h.sent);
        }
    }
}

#[test]
fn every_version_from_17_gets_the_set_and_an_unreadable_or_missing_one_does_not() {
    for (version, set) in [
        ("17.0", true),
        ("18.4", true),
        ("19devel", true),
        ("devel", false),
    ] {
        let mut h = Harness::new(config(None), false);
        h.server(&startup_reporting(version));
        let sent_set = h
            .sent
            .iter()
            .any(|(tag, body)| *tag == b'Q' && &body[..] == b"SET transaction_timeout = 0\0");
        assert_eq!(sent_set, set, "{version}: sent {:?}", h.sent);
    }
    // A server that reports no version at all (only test doubles do).
    let mut h = Harness::new(config(None), false);
    h.server(&[
        BackendMessage::Authentication(Authentication::Ok),
        ready(TransactionStatus::Idle),
    ]);
    assert_eq!(h.conn.phase(), Phase::Ready);
    assert!(h.sent.is_empty(), "sent {:?}", h.sent);
}

#[test]
fn an_error_answering_the_set_fails_the_connection() {
    let trace = run_both(|bytewise| {
        let mut h = Harness::new(config(None), bytewise);
        h.server(&startup_reporting("17.2"));
        h.trace.clear();
        h.server(&[
            error("ERROR", "42501", "permission denied to set parameter"),
            ready(TransactionStatus::Idle),
        ]);
        assert_eq!(h.conn.phase(), Phase::Failed);
        h
    });
    insta::assert_snapshot!(trace, @"   FAILED server error: ERROR 42501: permission denied to set parameter");
}

#[test]
fn anything_but_set_answering_the_set_is_a_protocol_violation() {
    for bytewise in [false, true] {
        let mut h = Harness::new(config(None), bytewise);
        h.server(&startup_reporting("17.2"));
        h.server(&[complete("SELECT 0"), ready(TransactionStatus::Idle)]);
        assert_eq!(h.conn.phase(), Phase::Failed);
        let mut h = Harness::new(config(None), bytewise);
        h.server(&startup_reporting("17.2"));
        h.server(&[ready(TransactionStatus::Idle)]);
        assert_eq!(
            h.conn.phase(),
            Phase::Failed,
            "ReadyForQuery without the SET's completion"
        );
    }
}
