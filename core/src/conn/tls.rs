//! TLS as the connection machine sees it: which attempts `sslmode` makes (libpq's rules),
//! the server's one-byte answer to SSLRequest, and the `tls-server-end-point` channel
//! binding data computed from the server's certificate.
//!
//! The handshake itself is the shells' (rustls); nothing here touches a socket or a file.

use sha2::{Digest, Sha256, Sha384, Sha512};
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::der::Decode;

use super::config::Encryption;
use super::event::ConnError;
use crate::config::SslMode;
use crate::io::TlsVerify;

pub(super) const UNENCRYPTED_AFTER_S: &str =
    "the server sent unencrypted bytes after agreeing to TLS (possibly injected by a man in the middle)";

/// What the server's answer to SSLRequest means.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SslAnswer {
    /// `S`: run the TLS handshake.
    Tls,
    /// `N`, and plain text is allowed: send the startup message on this connection.
    Plain,
    /// `E`: an ErrorResponse follows in place of an answer (e.g. too many connections).
    Error,
}

pub(super) fn read_ssl_response(byte: u8, required: bool) -> Result<SslAnswer, ConnError> {
    match byte {
        b'S' => Ok(SslAnswer::Tls),
        b'N' if required => Err(ConnError::TlsNotOffered),
        b'N' => Ok(SslAnswer::Plain),
        b'E' => Ok(SslAnswer::Error),
        other => Err(ConnError::Tls(format!(
            "the server answered SSLRequest with byte 0x{other:02x}, neither S nor N"
        ))),
    }
}

/// The attempts one logical connection makes, by libpq's rules for `sslmode`:
/// - `disable`: plain text;
/// - `allow`: plain text, and once more with TLS if the server rejects it;
/// - `prefer`: TLS if the server agrees, plain text if it answers `N`; once more in plain
///   text if the TLS handshake fails or the server rejects the encrypted attempt;
/// - `require`, `verify-ca`, `verify-full`: TLS or nothing.
///
/// Unix sockets never use TLS, whatever the mode (as libpq).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPlan {
    mode: SslMode,
    unix_socket: bool,
    has_root_cert: bool,
    retried: bool,
}

/// Why an attempt ended before the connection was ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The server rejected the attempt with an error during startup (`encrypted`: over
    /// TLS).
    Rejected { encrypted: bool },
    /// The TLS handshake failed (including a refused certificate).
    HandshakeFailed,
}

impl TlsPlan {
    pub fn new(mode: SslMode, unix_socket: bool, has_root_cert: bool) -> TlsPlan {
        TlsPlan {
            mode,
            unix_socket,
            has_root_cert,
            retried: false,
        }
    }

    /// How the first attempt negotiates.
    pub fn first(&self) -> Encryption {
        if self.unix_socket {
            return Encryption::Plain;
        }
        match self.mode {
            SslMode::Disable | SslMode::Allow => Encryption::Plain,
            SslMode::Prefer => Encryption::Request { required: false },
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                Encryption::Request { required: true }
            }
        }
    }

    /// After a failed attempt: how the one retry negotiates, or `None` when the failure
    /// stands.
    pub fn retry(&mut self, failed: Attempt) -> Option<Encryption> {
        if self.retried || self.unix_socket {
            return None;
        }
        let next = match (self.mode, failed) {
            (SslMode::Allow, Attempt::Rejected { encrypted: false }) => {
                Encryption::Request { required: false }
            }
            (SslMode::Prefer, Attempt::Rejected { encrypted: true } | Attempt::HandshakeFailed) => {
                Encryption::Plain
            }
            _ => return None,
        };
        self.retried = true;
        Some(next)
    }

    pub fn mode(&self) -> SslMode {
        self.mode
    }

    /// How much of the server's certificate the handshake checks. With a root
    /// certificate every mode checks the chain (as libpq: `require` then acts as
    /// `verify-ca`); only `verify-full` checks the host name.
    pub fn verify(&self) -> TlsVerify {
        match (self.mode, self.has_root_cert) {
            (SslMode::VerifyFull, _) => TlsVerify::Full,
            (SslMode::VerifyCa, _) | (_, true) => TlsVerify::Chain,
            (_, false) => TlsVerify::None,
        }
    }
}

/// Signature algorithms whose hash is SHA-256 for `tls-server-end-point` (RFC 5929: MD5
/// and SHA-1 are replaced by SHA-256).
const SHA256_ALGORITHMS: [&str; 7] = [
    "1.2.840.113549.1.1.4",   // md5WithRSAEncryption
    "1.2.840.113549.1.1.5",   // sha1WithRSAEncryption
    "1.2.840.113549.1.1.11",  // sha256WithRSAEncryption
    "1.2.840.10045.4.1",      // ecdsa-with-SHA1
    "1.2.840.10045.4.3.2",    // ecdsa-with-SHA256
    "1.2.840.10040.4.3",      // dsa-with-sha1
    "2.16.840.1.101.3.4.3.2", // dsa-with-sha256
];
const SHA384_ALGORITHMS: [&str; 2] = [
    "1.2.840.113549.1.1.12", // sha384WithRSAEncryption
    "1.2.840.10045.4.3.3",   // ecdsa-with-SHA384
];
const SHA512_ALGORITHMS: [&str; 2] = [
    "1.2.840.113549.1.1.13", // sha512WithRSAEncryption
    "1.2.840.10045.4.3.4",   // ecdsa-with-SHA512
];

/// The `tls-server-end-point` channel binding data (RFC 5929): the hash of the server's
/// certificate (DER) with the hash function of its signature algorithm. `None` when the
/// certificate does not decode or its algorithm names no single hash (Ed25519, RSA-PSS):
/// the binding is then undefined and SCRAM runs without it.
pub fn tls_server_end_point(certificate_der: &[u8]) -> Option<Vec<u8>> {
    let certificate = x509_cert::Certificate::from_der(certificate_der).ok()?;
    let algorithm = certificate.signature_algorithm.oid;
    let is_one_of = |names: &[&str]| {
        names
            .iter()
            .any(|name| ObjectIdentifier::new(name).is_ok_and(|oid| oid == algorithm))
    };
    if is_one_of(&SHA256_ALGORITHMS) {
        Some(Sha256::digest(certificate_der).to_vec())
    } else if is_one_of(&SHA384_ALGORITHMS) {
        Some(Sha384::digest(certificate_der).to_vec())
    } else if is_one_of(&SHA512_ALGORITHMS) {
        Some(Sha512::digest(certificate_der).to_vec())
    } else {
        None
    }
}

/// What the connection knows about its TLS session, once one is up.
#[derive(Debug)]
pub(crate) struct TlsSession {
    /// The `tls-server-end-point` channel binding data, when the server's certificate
    /// allows one.
    pub(crate) end_point: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_attempt_follows_the_mode() {
        let first = |mode| TlsPlan::new(mode, false, false).first();
        assert_eq!(first(SslMode::Disable), Encryption::Plain);
        assert_eq!(first(SslMode::Allow), Encryption::Plain);
        assert_eq!(
            first(SslMode::Prefer),
            Encryption::Request { required: false }
        );
        for mode in [SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull] {
            assert_eq!(first(mode), Encryption::Request { required: true });
        }
    }

    #[test]
    fn unix_sockets_never_ask_for_tls_nor_retry() {
        for mode in [SslMode::Prefer, SslMode::Require, SslMode::VerifyFull] {
            let mut plan = TlsPlan::new(mode, true, true);
            assert_eq!(plan.first(), Encryption::Plain);
            assert_eq!(plan.retry(Attempt::Rejected { encrypted: false }), None);
        }
    }

    #[test]
    fn allow_retries_a_rejected_plain_attempt_once_with_tls() {
        let mut plan = TlsPlan::new(SslMode::Allow, false, false);
        assert_eq!(
            plan.retry(Attempt::Rejected { encrypted: false }),
            Some(Encryption::Request { required: false })
        );
        assert_eq!(plan.retry(Attempt::Rejected { encrypted: true }), None);
    }

    #[test]
    fn prefer_retries_in_plain_text_once_after_a_tls_failure() {
        let mut plan = TlsPlan::new(SslMode::Prefer, false, false);
        assert_eq!(plan.retry(Attempt::Rejected { encrypted: false }), None);
        assert_eq!(
            plan.retry(Attempt::HandshakeFailed),
            Some(Encryption::Plain)
        );
        assert_eq!(plan.retry(Attempt::HandshakeFailed), None, "only once");
        let mut plan = TlsPlan::new(SslMode::Prefer, false, false);
        assert_eq!(
            plan.retry(Attempt::Rejected { encrypted: true }),
            Some(Encryption::Plain)
        );
    }

    #[test]
    fn modes_that_require_tls_never_retry() {
        for mode in [
            SslMode::Disable,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            let mut plan = TlsPlan::new(mode, false, true);
            assert_eq!(plan.retry(Attempt::HandshakeFailed), None, "{mode:?}");
            assert_eq!(plan.retry(Attempt::Rejected { encrypted: true }), None);
        }
    }

    #[test]
    fn a_root_certificate_makes_every_mode_check_the_chain() {
        let verify = |mode, root| TlsPlan::new(mode, false, root).verify();
        assert_eq!(verify(SslMode::Prefer, false), TlsVerify::None);
        assert_eq!(verify(SslMode::Require, false), TlsVerify::None);
        assert_eq!(verify(SslMode::Require, true), TlsVerify::Chain);
        assert_eq!(verify(SslMode::Prefer, true), TlsVerify::Chain);
        assert_eq!(verify(SslMode::VerifyCa, true), TlsVerify::Chain);
        assert_eq!(verify(SslMode::VerifyFull, true), TlsVerify::Full);
    }

    #[test]
    fn the_answer_byte_decides_between_tls_plain_and_failure() {
        assert_eq!(read_ssl_response(b'S', true), Ok(SslAnswer::Tls));
        assert_eq!(read_ssl_response(b'N', false), Ok(SslAnswer::Plain));
        assert_eq!(read_ssl_response(b'N', true), Err(ConnError::TlsNotOffered));
        assert_eq!(read_ssl_response(b'E', true), Ok(SslAnswer::Error));
        let Err(ConnError::Tls(message)) = read_ssl_response(b'X', false) else {
            panic!("X is no answer");
        };
        assert!(message.contains("0x58"), "{message}");
    }

    #[test]
    fn garbage_is_no_certificate() {
        assert_eq!(tls_server_end_point(b"not a certificate"), None);
        assert_eq!(tls_server_end_point(&[]), None);
    }
}
