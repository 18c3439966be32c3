//! Startup and authentication scripts.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use postgres_protocol::authentication::md5_hash;
use sha2::{Digest, Sha256};

use super::*;

#[test]
fn trust_startup_collects_parameters_and_key_then_is_ready() {
    let trace = run_both(|bytewise| {
        let mut h = Harness::new(config(None), bytewise);
        h.server(&trust_startup());
        assert_eq!(h.conn.parameters().get("server_version").unwrap(), "15.8");
        assert_eq!(h.conn.backend_key().unwrap().process_id, 77);
        h
    });
    insta::assert_snapshot!(trace, @r"
    -> startup user=alice database=shop application_name=slotline DateStyle=ISO TimeZone=UTC IntervalStyle=postgres bytea_output=hex extra_float_digits=3 client_encoding=UTF8 statement_timeout=0 lock_timeout=0 idle_in_transaction_session_timeout=0 idle_session_timeout=0 row_security=off
       authenticated
       param server_version=15.8
       param TimeZone=UTC
       backend key pid=77
       ready
    ");
}

#[test]
fn cleartext_password_is_sent_when_asked() {
    let trace = run_both(|bytewise| {
        let mut h = Harness::new(config(Some("s3cret")), bytewise);
        h.trace.clear();
        h.server(&[BackendMessage::Authentication(
            Authentication::CleartextPassword,
        )]);
        h.server(&trust_startup());
        assert_eq!(h.sent[0], (b'p', Bytes::from_static(b"s3cret\0")));
        h
    });
    insta::assert_snapshot!(trace, @r#"
    -> Password/SASL "s3cret\0"
       authenticated
       param server_version=15.8
       param TimeZone=UTC
       backend key pid=77
       ready
    "#);
}

#[test]
fn md5_response_is_md5_hash_of_user_password_and_salt() {
    for bytewise in [false, true] {
        let mut cfg = config(Some("password"));
        cfg.user = "md5_user".into();
        let mut h = Harness::new(cfg, bytewise);
        let salt = [0x2a, 0x3d, 0x8f, 0xe0];
        h.server(&[BackendMessage::Authentication(
            Authentication::Md5Password { salt },
        )]);
        // The vector is postgres-protocol's own, checked against real servers upstream:
        // "md5" || md5(hex(md5(password || user)) || salt).
        let expected = md5_hash(b"md5_user", b"password", salt);
        assert_eq!(expected, "md562af4dd09bbb41884907a838a3233294");
        assert_eq!(
            h.sent,
            vec![(
                b'p',
                Bytes::from_static(b"md562af4dd09bbb41884907a838a3233294\0")
            )]
        );
        h.server(&trust_startup());
        assert_eq!(h.conn.phase(), Phase::Ready);
    }
}

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// RFC 5802 Hi(): PBKDF2 with HMAC-SHA-256, one block.
fn salted_password(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut u = hmac(password, &[salt, &[0, 0, 0, 1]].concat());
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password, &u);
        out.iter_mut().zip(u).for_each(|(o, x)| *o ^= x);
    }
    out
}

/// The body of the client's last SASL message, without the mechanism header if present.
fn last_sasl_data(h: &Harness, initial: bool) -> String {
    let (tag, body) = h.sent.last().unwrap();
    assert_eq!(*tag, b'p');
    let data = if initial {
        let rest = body.strip_prefix(b"SCRAM-SHA-256\0".as_slice()).unwrap();
        let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        assert_eq!(rest.len(), 4 + len);
        &rest[4..]
    } else {
        &body[..]
    };
    String::from_utf8(data.to_vec()).unwrap()
}

/// A scripted SCRAM-SHA-256 server (RFC 5802/7677) that checks the client's proof and
/// signs the exchange with `server_password` (a wrong one gives a wrong signature).
fn scram_exchange(bytewise: bool, server_password: &str) -> Harness {
    let mut h = Harness::new(config(Some("pencil")), bytewise);
    h.server(&[BackendMessage::Authentication(Authentication::Sasl {
        mechanisms: vec!["SCRAM-SHA-256-PLUS".into(), "SCRAM-SHA-256".into()],
    })]);
    let client_first = last_sasl_data(&h, true);
    // No channel binding ("n"), empty user (PostgreSQL takes it from the startup).
    let bare = client_first.strip_prefix("n,,").unwrap();
    let client_nonce = bare.strip_prefix("n=,r=").unwrap();
    assert_eq!(client_nonce.len(), 24);
    assert!(client_nonce
        .bytes()
        .all(|b| (0x21..=0x7e).contains(&b) && b != b','));

    let salt = b"slotline-salt";
    let nonce = format!("{client_nonce}SERVERNONCE");
    let server_first = format!("r={nonce},s={},i=4096", STANDARD.encode(salt));
    h.server(&[BackendMessage::Authentication(
        Authentication::SaslContinue(Bytes::from(server_first.clone())),
    )]);

    let client_final = last_sasl_data(&h, false);
    let (without_proof, proof) = client_final.split_once(",p=").unwrap();
    assert_eq!(without_proof, format!("c=biws,r={nonce}"));
    let auth_message = format!("{bare},{server_first},{without_proof}");
    let salted = salted_password(b"pencil", salt, 4096);
    let client_key = hmac(&salted, b"Client Key");
    let stored_key: [u8; 32] = Sha256::digest(client_key).into();
    let signature = hmac(&stored_key, auth_message.as_bytes());
    let expected_proof: Vec<u8> = client_key
        .iter()
        .zip(signature)
        .map(|(k, s)| k ^ s)
        .collect();
    assert_eq!(STANDARD.decode(proof).unwrap(), expected_proof);

    let server_salted = salted_password(server_password.as_bytes(), salt, 4096);
    let server_key = hmac(&server_salted, b"Server Key");
    let server_signature = hmac(&server_key, auth_message.as_bytes());
    let server_final = format!("v={}", STANDARD.encode(server_signature));
    h.server(&[BackendMessage::Authentication(Authentication::SaslFinal(
        Bytes::from(server_final),
    ))]);
    h
}

fn events_only(h: &Harness) -> Vec<String> {
    h.trace
        .iter()
        .filter(|l| !l.starts_with("->"))
        .cloned()
        .collect()
}

#[test]
fn scram_sha_256_completes_against_a_scripted_server() {
    for bytewise in [false, true] {
        let mut h = scram_exchange(bytewise, "pencil");
        h.server(&trust_startup());
        assert_eq!(h.conn.phase(), Phase::Ready);
        // The nonce is random (see login.rs), so compare events, not the sent bytes.
        assert_eq!(
            events_only(&h),
            [
                "   authenticated",
                "   param server_version=15.8",
                "   param TimeZone=UTC",
                "   backend key pid=77",
                "   ready"
            ]
        );
    }
}

#[test]
fn scram_with_a_wrong_server_signature_fails_before_authentication_ok() {
    for bytewise in [false, true] {
        let mut h = scram_exchange(bytewise, "not-the-password");
        assert_eq!(h.conn.phase(), Phase::Failed);
        assert_eq!(
            events_only(&h),
            ["   FAILED SCRAM-SHA-256 authentication failed: SCRAM verification error"]
        );
        // Latched: a server that carries on gets no hearing.
        h.server(&trust_startup());
        assert_eq!(events_only(&h).len(), 1);
        assert!(h.conn.poll_transmit().is_none());
    }
}

#[test]
fn scram_with_a_foreign_nonce_is_refused() {
    let mut h = Harness::new(config(Some("pencil")), false);
    h.server(&[BackendMessage::Authentication(Authentication::Sasl {
        mechanisms: vec!["SCRAM-SHA-256".into()],
    })]);
    h.server(&[BackendMessage::Authentication(
        Authentication::SaslContinue(Bytes::from_static(b"r=someoneelse,s=c2FsdA==,i=4096")),
    )]);
    assert!(
        matches!(h.conn.error(), Some(ConnError::Scram(_))),
        "{:?}",
        h.trace
    );
}

#[test]
fn refused_methods_and_missing_passwords_are_fatal_with_a_clear_reason() {
    let cases: Vec<(Option<&str>, BackendMessage)> = vec![
        (
            Some("pw"),
            BackendMessage::Authentication(Authentication::Unsupported {
                code: 7,
                method: "GSSAPI",
            }),
        ),
        (
            Some("pw"),
            BackendMessage::Authentication(Authentication::Sasl {
                mechanisms: vec!["SCRAM-SHA-256-PLUS".into()],
            }),
        ),
        (
            None,
            BackendMessage::Authentication(Authentication::Md5Password { salt: [0; 4] }),
        ),
        (
            None,
            BackendMessage::Authentication(Authentication::CleartextPassword),
        ),
        (
            None,
            error(
                "FATAL",
                "28P01",
                "password authentication failed for user \"alice\"",
            ),
        ),
        (None, ready(TransactionStatus::Idle)),
    ];
    let mut lines = Vec::new();
    for (password, message) in cases {
        let mut h = Harness::new(config(password), true);
        h.trace.clear();
        h.server(&[message]);
        assert_eq!(h.conn.phase(), Phase::Failed);
        lines.extend(h.trace);
    }
    insta::assert_snapshot!(lines.join("\n"), @r#"
       FAILED the server requires GSSAPI authentication; slotline supports trust, password (cleartext), md5 and scram-sha-256
       FAILED the server requires SASL (SCRAM-SHA-256-PLUS) authentication; slotline supports trust, password (cleartext), md5 and scram-sha-256
       FAILED the server requires md5 authentication but no password is configured
       FAILED the server requires password (cleartext) authentication but no password is configured
       FAILED server error: FATAL 28P01: password authentication failed for user "alice"
       FAILED protocol violation: the server sent ReadyForQuery during startup (awaiting an authentication request)
    "#);
}

#[test]
fn a_non_fatal_error_during_startup_is_still_fatal_to_the_connection() {
    let mut h = Harness::new(config(None), false);
    h.server(&[
        BackendMessage::Authentication(Authentication::Ok),
        error("ERROR", "XX000", "odd"),
    ]);
    assert!(matches!(h.conn.error(), Some(ConnError::Server(e)) if e.code == "XX000"));
}

#[test]
fn notices_during_startup_are_reported_and_do_not_disturb_it() {
    let mut h = Harness::new(config(None), true);
    h.trace.clear();
    let mut messages = vec![BackendMessage::NoticeResponse(Box::new(pg_error(
        "WARNING", "01000", "careful",
    )))];
    messages.extend(trust_startup());
    h.server(&messages);
    assert_eq!(h.trace[0], "   notice WARNING 01000: careful");
    assert_eq!(h.conn.phase(), Phase::Ready);
}

#[test]
fn commands_before_ready_are_usage_errors_not_panics() {
    let mut h = Harness::new(config(None), false);
    assert_eq!(
        h.conn.query("SELECT 1"),
        Err(UsageError::NotReady {
            phase: Phase::Login
        })
    );
    assert_eq!(
        h.conn.finish_stream(),
        Err(UsageError::NotStreaming {
            phase: Phase::Login
        })
    );
    assert!(h.conn.poll_transmit().is_none());
}

#[test]
fn invalid_configs_are_refused_at_construction() {
    let mut cfg = config(None);
    cfg.database = "a\0b".into();
    assert_eq!(
        Connection::new(cfg).unwrap_err(),
        UsageError::InvalidConfig("database contains a NUL byte".into())
    );
}
