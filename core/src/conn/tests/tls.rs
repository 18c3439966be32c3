//! The TLS negotiation (SSLRequest and its one-byte answer) and SCRAM channel binding.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha2::{Digest, Sha256, Sha384};

use super::*;
use crate::conn::tls_server_end_point;
use crate::wire::testing::pg_error;

/// SSLRequest: length 8, then the code 80877103 (1234 << 16 | 5679).
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

fn tls_config(required: bool, password: Option<&str>) -> ConnectionConfig {
    ConnectionConfig {
        encryption: Encryption::Request { required },
        keepalive: None,
        ..config(password)
    }
}

fn sent(conn: &mut Connection) -> Vec<u8> {
    std::iter::from_fn(|| conn.poll_transmit())
        .flat_map(|b| b.to_vec())
        .collect()
}

fn events(conn: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

/// A certificate signed with `algorithm`, as DER.
fn certificate(algorithm: &'static rcgen::SignatureAlgorithm) -> Vec<u8> {
    let key = rcgen::KeyPair::generate_for(algorithm).unwrap();
    let params = rcgen::CertificateParams::new(vec!["db.example".to_owned()]).unwrap();
    params.self_signed(&key).unwrap().der().to_vec()
}

#[test]
fn ssl_request_goes_first_and_n_lets_a_preferring_client_start_in_plain_text() {
    let mut conn = Connection::new(tls_config(false, None)).unwrap();
    assert_eq!(sent(&mut conn), SSL_REQUEST);
    conn.handle_bytes(b"N");
    assert!(events(&mut conn).is_empty());
    let startup = sent(&mut conn);
    assert_eq!(
        &startup[4..8],
        &[0, 3, 0, 0],
        "protocol 3.0 startup follows"
    );
    assert!(!conn.is_encrypted());
}

#[test]
fn n_fails_a_client_that_requires_tls_and_sends_nothing_more() {
    let mut conn = Connection::new(tls_config(true, None)).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"N");
    assert_eq!(events(&mut conn), [Event::Failed(ConnError::TlsNotOffered)]);
    assert!(sent(&mut conn).is_empty());
    assert_eq!(conn.phase(), Phase::Failed);
}

#[test]
fn s_asks_for_the_handshake_and_startup_waits_for_it() {
    let mut conn = Connection::new(tls_config(true, None)).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"S");
    assert_eq!(events(&mut conn), [Event::TlsRequested]);
    assert!(sent(&mut conn).is_empty(), "nothing before the handshake");
    conn.tls_established(Some(&certificate(&rcgen::PKCS_ECDSA_P256_SHA256)));
    assert!(conn.is_encrypted());
    assert_eq!(&sent(&mut conn)[4..8], &[0, 3, 0, 0]);
    conn.handle_bytes(&encode_backend(&BackendMessage::Authentication(
        Authentication::Ok,
    )));
    assert_eq!(events(&mut conn), [Event::Authenticated]);
    assert_eq!(conn.authentication_method(), Some("trust"));
}

#[test]
fn bytes_after_s_are_refused_whether_they_come_with_it_or_later() {
    let mut conn = Connection::new(tls_config(false, None)).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"Sinjected");
    let [Event::Failed(ConnError::Tls(reason))] = &events(&mut conn)[..] else {
        panic!("bytes with S must fail the connection");
    };
    assert!(reason.contains("unencrypted"), "{reason}");

    let mut conn = Connection::new(tls_config(false, None)).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"S");
    events(&mut conn);
    conn.handle_bytes(b"R");
    assert!(matches!(
        &events(&mut conn)[..],
        [Event::Failed(ConnError::Tls(_))]
    ));
    conn.tls_established(None);
    assert!(
        sent(&mut conn).is_empty(),
        "a failed connection stays failed"
    );
}

#[test]
fn an_error_in_place_of_the_answer_is_reported_as_the_servers_error() {
    let mut conn = Connection::new(tls_config(true, None)).unwrap();
    sent(&mut conn);
    let error = BackendMessage::ErrorResponse(Box::new(pg_error(
        "FATAL",
        "53300",
        "sorry, too many clients already",
    )));
    // Byte by byte: the answer byte is read alone, the message is framed.
    for byte in encode_backend(&error) {
        conn.handle_bytes(&[byte]);
    }
    let [Event::Failed(ConnError::Server(error))] = &events(&mut conn)[..] else {
        panic!("the error must be reported");
    };
    assert_eq!(error.code, "53300");
}

#[test]
fn any_other_answer_byte_is_a_protocol_violation() {
    let mut conn = Connection::new(tls_config(false, None)).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"\x00");
    assert!(matches!(
        &events(&mut conn)[..],
        [Event::Failed(ConnError::Tls(_))]
    ));
}

/// The client's SASL initial response after a TLS handshake with `certificate`, the
/// server offering `mechanisms`: (mechanism, client-first message).
fn sasl_initial(certificate: Option<&[u8]>, mechanisms: &[&str]) -> (String, String, Connection) {
    let mut conn = Connection::new(tls_config(true, Some("pencil"))).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"S");
    conn.tls_established(certificate);
    sent(&mut conn);
    conn.handle_bytes(&encode_backend(&BackendMessage::Authentication(
        Authentication::Sasl {
            mechanisms: mechanisms.iter().map(|m| (*m).to_owned()).collect(),
        },
    )));
    let bytes = sent(&mut conn);
    assert_eq!(bytes[0], b'p');
    let body = &bytes[5..];
    let nul = body.iter().position(|b| *b == 0).unwrap();
    let mechanism = String::from_utf8(body[..nul].to_vec()).unwrap();
    let data = String::from_utf8(body[nul + 5..].to_vec()).unwrap();
    (mechanism, data, conn)
}

#[test]
fn scram_over_tls_binds_to_the_server_certificate_when_offered() {
    let der = certificate(&rcgen::PKCS_ECDSA_P256_SHA256);
    let offered = ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"];
    let (mechanism, first, mut conn) = sasl_initial(Some(&der), &offered);
    assert_eq!(mechanism, "SCRAM-SHA-256-PLUS");
    let bare = first.strip_prefix("p=tls-server-end-point,,").unwrap();
    let client_nonce = bare.strip_prefix("n=,r=").unwrap().to_owned();
    assert_eq!(conn.authentication_method(), Some("SCRAM-SHA-256-PLUS"));
    // The client-final message carries the gs2 header and the certificate's hash (c=).
    let server_first = format!("r={client_nonce}SRV,s={},i=4096", STANDARD.encode(b"salt"));
    conn.handle_bytes(&encode_backend(&BackendMessage::Authentication(
        Authentication::SaslContinue(Bytes::from(server_first)),
    )));
    let final_bytes = sent(&mut conn);
    let client_final = String::from_utf8(final_bytes[5..].to_vec()).unwrap();
    let mut expected = b"p=tls-server-end-point,,".to_vec();
    expected.extend_from_slice(&Sha256::digest(&der));
    let binding = client_final
        .strip_prefix("c=")
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    assert_eq!(STANDARD.decode(binding).unwrap(), expected);
}

#[test]
fn scram_over_tls_says_y_when_the_server_offers_no_binding() {
    let der = certificate(&rcgen::PKCS_ECDSA_P256_SHA256);
    let (mechanism, first, _) = sasl_initial(Some(&der), &["SCRAM-SHA-256"]);
    assert_eq!(mechanism, "SCRAM-SHA-256");
    assert!(first.starts_with("y,,"), "{first}");
}

#[test]
fn scram_without_binding_data_says_n_even_over_tls() {
    let offered = ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"];
    let (mechanism, first, _) = sasl_initial(None, &offered);
    assert_eq!(mechanism, "SCRAM-SHA-256");
    assert!(first.starts_with("n,,"), "{first}");
    let ed25519 = certificate(&rcgen::PKCS_ED25519);
    let (mechanism, first, _) = sasl_initial(Some(&ed25519), &offered);
    assert_eq!((mechanism.as_str(), &first[..3]), ("SCRAM-SHA-256", "n,,"));
}

#[test]
fn only_plus_offered_and_no_binding_possible_is_unsupported() {
    let mut conn = Connection::new(tls_config(true, Some("pencil"))).unwrap();
    sent(&mut conn);
    conn.handle_bytes(b"S");
    conn.tls_established(None);
    events(&mut conn);
    conn.handle_bytes(&encode_backend(&BackendMessage::Authentication(
        Authentication::Sasl {
            mechanisms: vec!["SCRAM-SHA-256-PLUS".into()],
        },
    )));
    assert!(matches!(
        &events(&mut conn)[..],
        [Event::Failed(ConnError::UnsupportedAuthentication { .. })]
    ));
}

#[test]
fn the_end_point_hash_follows_the_signature_algorithm() {
    let p256 = certificate(&rcgen::PKCS_ECDSA_P256_SHA256);
    assert_eq!(
        tls_server_end_point(&p256),
        Some(Sha256::digest(&p256).to_vec())
    );
    let p384 = certificate(&rcgen::PKCS_ECDSA_P384_SHA384);
    let hash = tls_server_end_point(&p384).unwrap();
    assert_eq!(hash, Sha384::digest(&p384).to_vec());
    assert_eq!(hash.len(), 48);
    assert_eq!(
        tls_server_end_point(&certificate(&rcgen::PKCS_ED25519)),
        None,
        "Ed25519 names no hash: the binding is undefined"
    );
    let mut truncated = p256.clone();
    truncated.truncate(p256.len() / 2);
    assert_eq!(tls_server_end_point(&truncated), None);
}
