//! TLS configuration for both shells, built once at start from the files the configuration
//! names: the rustls client configurations for PostgreSQL (one per level of verification
//! the core may ask for) and the roots for an `https://` Feldera.
//!
//! Reading a named file happens here, before any socket is opened: a missing or unreadable
//! certificate or key is a configuration error (exit 2) naming the setting and the path.
//! Which checks a handshake makes is the core's decision (`Command::PgStartTls`); this
//! module only builds what each decision needs.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use slotline_core::config::{Config, PgConnConfig, RootCert};
use slotline_core::io::{ConnFailure, FailureKind, TlsVerify};
use std::sync::Arc;

/// Everything TLS the run loop needs, prepared before it starts.
#[derive(Debug, Clone, Default)]
pub struct TlsSetup {
    pub pg: PgTls,
    /// The only roots an `https://` Feldera is checked against (`FELDERA_CA_CERT`);
    /// `None`: the built-in public roots.
    pub feldera_roots: Option<Vec<CertificateDer<'static>>>,
}

/// The client configurations for PostgreSQL, by verification level.
#[derive(Debug, Clone)]
pub struct PgTls {
    unverified: Arc<ClientConfig>,
    /// `None` without a root certificate: the core then never asks for these levels.
    chain: Option<Arc<ClientConfig>>,
    full: Option<Arc<ClientConfig>>,
}

impl Default for PgTls {
    fn default() -> Self {
        let provider = provider();
        PgTls {
            unverified: Arc::new(
                client_config(&provider, unverified(&provider), None)
                    .expect("a configuration without a client certificate always builds"),
            ),
            chain: None,
            full: None,
        }
    }
}

/// A configuration error: the setting, the path, and what went wrong.
#[derive(Debug)]
pub struct TlsSetupError(pub String);

impl std::fmt::Display for TlsSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the certificate files the configuration names and builds every configuration.
pub fn prepare(config: &Config) -> Result<TlsSetup, TlsSetupError> {
    let feldera_roots = match &config.feldera_ca_cert {
        Some(path) => Some(read_certificates("FELDERA_CA_CERT", path)?),
        None => None,
    };
    Ok(TlsSetup {
        pg: PgTls::prepare(&config.pg)?,
        feldera_roots,
    })
}

impl PgTls {
    fn prepare(pg: &PgConnConfig) -> Result<PgTls, TlsSetupError> {
        let provider = provider();
        let client_auth = match (&pg.sslcert, &pg.sslkey) {
            (Some(cert), Some(key)) => Some((
                read_certificates(&pg.setting_name("sslcert"), cert)?,
                read_key(&pg.setting_name("sslkey"), key)?,
            )),
            _ => None,
        };
        let build = |verifier: Arc<dyn ServerCertVerifier>| {
            let auth = client_auth
                .as_ref()
                .map(|(chain, key)| (chain.clone(), key.clone_key()));
            client_config(&provider, verifier, auth)
                .map(Arc::new)
                .map_err(|e| {
                    TlsSetupError(format!(
                        "{} and {}: the client certificate and key cannot be used together: {e}",
                        pg.setting_name("sslcert"),
                        pg.setting_name("sslkey")
                    ))
                })
        };
        let unverified = build(unverified(&provider))?;
        let Some(root) = &pg.sslrootcert else {
            return Ok(PgTls {
                unverified,
                chain: None,
                full: None,
            });
        };
        let roots = Arc::new(root_store(&pg.setting_name("sslrootcert"), root)?);
        let full = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| {
                TlsSetupError(format!(
                    "{}: the root certificates cannot be used: {e}",
                    pg.setting_name("sslrootcert")
                ))
            })?;
        let chain = Arc::new(ChainOnly {
            roots,
            provider: provider.clone(),
        });
        Ok(PgTls {
            unverified,
            chain: Some(build(chain)?),
            full: Some(build(full)?),
        })
    }

    /// The configuration for a handshake checking `verify`.
    pub fn config(&self, verify: TlsVerify) -> Result<Arc<ClientConfig>, ConnFailure> {
        let missing = || {
            ConnFailure::new(
                FailureKind::TlsVerification,
                "no root certificate is configured to verify the server (sslrootcert)",
            )
        };
        match verify {
            TlsVerify::None => Ok(self.unverified.clone()),
            TlsVerify::Chain => self.chain.clone().ok_or_else(missing),
            TlsVerify::Full => self.full.clone().ok_or_else(missing),
        }
    }
}

/// What a connection needs to run a TLS handshake.
#[derive(Debug, Clone)]
pub struct TlsStart {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
    /// Give up (`FailureKind::Timeout`) when the handshake takes longer.
    pub timeout: Option<std::time::Duration>,
}

/// The name a handshake presents (SNI) and, under `verify-full`, checks. A host that is
/// neither a DNS name nor an IP address can only be used unverified or chain-verified.
pub fn server_name(host: &str, verify: TlsVerify) -> Result<ServerName<'static>, ConnFailure> {
    match ServerName::try_from(host.to_owned()) {
        Ok(name) => Ok(name),
        Err(_) if verify != TlsVerify::Full => Ok(ServerName::IpAddress(
            std::net::Ipv4Addr::UNSPECIFIED.into(),
        )),
        Err(_) => Err(ConnFailure::new(
            FailureKind::TlsVerification,
            format!("the host {host:?} is neither a DNS name nor an IP address to check the certificate against"),
        )),
    }
}

/// The kind of a failed handshake: a refused certificate is not worth a retry.
pub fn failure_kind(error: &rustls::Error) -> FailureKind {
    match error {
        rustls::Error::InvalidCertificate(_) => FailureKind::TlsVerification,
        _ => FailureKind::Tls,
    }
}

/// The message of a failed handshake.
pub fn failure(error: &rustls::Error) -> ConnFailure {
    let kind = failure_kind(error);
    let what = match kind {
        FailureKind::TlsVerification => "the server's certificate was refused",
        _ => "TLS handshake failed",
    };
    ConnFailure::new(kind, format!("{what}: {error}"))
}

fn client_config(
    provider: &Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
    client_auth: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<ClientConfig, rustls::Error> {
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match client_auth {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key)?,
        None => builder.with_no_client_auth(),
    };
    // PostgreSQL 17+ checks the ALPN protocol when a client offers one; older servers
    // ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(config)
}

fn read(setting: &str, path: &str) -> Result<Vec<u8>, TlsSetupError> {
    std::fs::read(path).map_err(|e| TlsSetupError(format!("{setting}: cannot read {path}: {e}")))
}

fn read_certificates(
    setting: &str,
    path: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let pem = read(setting, path)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsSetupError(format!("{setting}: {path} is not PEM: {e}")))?;
    if certificates.is_empty() {
        return Err(TlsSetupError(format!(
            "{setting}: {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(certificates)
}

fn read_key(setting: &str, path: &str) -> Result<PrivateKeyDer<'static>, TlsSetupError> {
    let pem = read(setting, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        TlsSetupError(format!(
            "{setting}: {path} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"
        ))
    })
}

fn root_store(setting: &str, root: &RootCert) -> Result<RootCertStore, TlsSetupError> {
    let mut store = RootCertStore::empty();
    let (certificates, source) = match root {
        RootCert::File(path) => (read_certificates(setting, path)?, path.as_str()),
        RootCert::System => {
            let loaded = rustls_native_certs::load_native_certs();
            if loaded.certs.is_empty() {
                let errors: Vec<String> = loaded.errors.iter().map(|e| e.to_string()).collect();
                return Err(TlsSetupError(format!(
                    "{setting}=system: the platform's trust store holds no certificate ({})",
                    errors.join("; ")
                )));
            }
            (loaded.certs, "the platform's trust store")
        }
    };
    let (added, _ignored) = store.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(TlsSetupError(format!(
            "{setting}: no usable CA certificate in {source}"
        )));
    }
    Ok(store)
}

fn unverified(provider: &Arc<CryptoProvider>) -> Arc<dyn ServerCertVerifier> {
    Arc::new(Unverified {
        provider: provider.clone(),
    })
}

/// `require` without a root certificate: encrypted, the server not authenticated (as
/// libpq). The handshake signatures are still checked against the presented key.
#[derive(Debug)]
struct Unverified {
    provider: Arc<CryptoProvider>,
}

/// `verify-ca`: the chain must end at a trusted root; the host name is not checked.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

macro_rules! signatures_checked_by_the_provider {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls12_signature(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls13_signature(
                message,
                cert,
                dss,
                &self.provider.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.provider
                .signature_verification_algorithms
                .supported_schemes()
        }
    };
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    signatures_checked_by_the_provider!();
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let certificate = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &certificate,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    signatures_checked_by_the_provider!();
}
