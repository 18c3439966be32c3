//! Login: the startup and authentication exchange, from the StartupMessage to the first
//! ReadyForQuery, and on PostgreSQL 17 and newer the `SET transaction_timeout = 0` that
//! follows it before the connection is reported ready (that timeout cannot be a startup
//! parameter: 15 and 16 refuse unknown ones).
//!
//! This module owns the authentication exchange (trust, cleartext, MD5, SCRAM-SHA-256 with
//! channel binding over TLS) and the messages allowed before the connection is ready. It
//! never handles queries, and it never computes a password hash or a SCRAM proof itself:
//! `postgres-protocol` does.

use std::fmt;

use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{
    ChannelBinding, ScramSha256, SCRAM_SHA_256, SCRAM_SHA_256_PLUS,
};

use super::config::ConnectionConfig;
use super::event::{ConnError, Event};
use super::output::Output;
use super::tls::TlsSession;
use crate::wire::backend::{Authentication, BackendKeyData, BackendMessage};
use crate::wire::frontend;

/// What the caller should do after a startup message.
#[derive(Debug)]
pub(crate) enum LoginStep {
    Continue,
    KeyData(BackendKeyData),
    /// ReadyForQuery arrived: startup is over.
    Ready,
}

/// What SCRAM can bind to: nothing over plain text; over TLS, the server certificate's
/// `tls-server-end-point` data when it is defined.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Binding<'a> {
    Plain,
    Tls(Option<&'a [u8]>),
}

impl<'a> Binding<'a> {
    pub(crate) fn of(tls: Option<&'a TlsSession>) -> Binding<'a> {
        match tls {
            None => Binding::Plain,
            Some(session) => Binding::Tls(session.end_point.as_deref()),
        }
    }
}

/// Where authentication stands.
pub(crate) enum Login {
    AwaitRequest,
    /// A cleartext or MD5 password was sent; AuthenticationOk (or an error) follows.
    AwaitPasswordOk,
    ScramContinue(Box<ScramSha256>),
    ScramFinal(Box<ScramSha256>),
    /// The server's SCRAM signature checked out; AuthenticationOk follows.
    ScramOk,
    /// Authenticated: parameters and the key arrive, then ReadyForQuery.
    Authenticated,
    /// The server (17 or newer) said ReadyForQuery; `SET transaction_timeout = 0` was sent
    /// and its CommandComplete is awaited: the connection is not ready before it.
    DisablingTransactionTimeout,
    /// The SET completed; its ReadyForQuery follows.
    TransactionTimeoutDisabled,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Login {
    fn name(&self) -> &'static str {
        match self {
            Login::AwaitRequest => "startup (awaiting an authentication request)",
            Login::AwaitPasswordOk => "authentication (password sent)",
            Login::ScramContinue(_) => "SCRAM authentication (client-first sent)",
            Login::ScramFinal(_) => "SCRAM authentication (client-final sent)",
            Login::ScramOk => "SCRAM authentication (server verified)",
            Login::Authenticated => "startup (authenticated, awaiting ReadyForQuery)",
            Login::DisablingTransactionTimeout => "startup (switching transaction_timeout off)",
            Login::TransactionTimeoutDisabled => {
                "startup (transaction_timeout off, awaiting ReadyForQuery)"
            }
        }
    }

    /// `server_version`: what the server reported so far (ParameterStatus), if anything.
    pub(crate) fn handle(
        &mut self,
        message: BackendMessage,
        config: &ConnectionConfig,
        binding: Binding<'_>,
        server_version: Option<&str>,
        out: &mut Output,
    ) -> Result<LoginStep, ConnError> {
        let unexpected = |message: &BackendMessage, during: &'static str| ConnError::Unexpected {
            message: message.name(),
            during,
        };
        let during = self.name();
        match (std::mem::replace(self, Login::Authenticated), message) {
            // Any error before ReadyForQuery ends the connection: the server closes it. An
            // error answering `SET transaction_timeout` fails it too: that session could be
            // cut off in the middle of a copy, and the caller closes a failed connection.
            (_, BackendMessage::ErrorResponse(err)) => Err(ConnError::Server(err)),
            (Login::AwaitRequest, BackendMessage::Authentication(auth)) => {
                *self = request(auth, config, binding, out)?;
                Ok(LoginStep::Continue)
            }
            (
                Login::AwaitPasswordOk | Login::ScramOk,
                BackendMessage::Authentication(Authentication::Ok),
            ) => {
                out.events.push_back(Event::Authenticated);
                Ok(LoginStep::Continue)
            }
            (
                Login::ScramContinue(mut scram),
                BackendMessage::Authentication(Authentication::SaslContinue(data)),
            ) => {
                scram.update(&data).map_err(scram_error)?;
                frontend::encode_sasl_response(scram.message(), &mut out.transmit)
                    .map_err(ConnError::Encode)?;
                *self = Login::ScramFinal(scram);
                Ok(LoginStep::Continue)
            }
            (
                Login::ScramFinal(mut scram),
                BackendMessage::Authentication(Authentication::SaslFinal(data)),
            ) => {
                // Authentication succeeds only if the server proves it knows the password.
                scram.finish(&data).map_err(scram_error)?;
                *self = Login::ScramOk;
                Ok(LoginStep::Continue)
            }
            (Login::Authenticated, BackendMessage::BackendKeyData(key)) => {
                out.events.push_back(Event::BackendKeyData(key.clone()));
                Ok(LoginStep::KeyData(key))
            }
            (Login::Authenticated, BackendMessage::ReadyForQuery(_))
                if has_transaction_timeout(server_version) =>
            {
                frontend::encode_query(frontend::DISABLE_TRANSACTION_TIMEOUT, &mut out.transmit)
                    .map_err(ConnError::Encode)?;
                *self = Login::DisablingTransactionTimeout;
                Ok(LoginStep::Continue)
            }
            (Login::DisablingTransactionTimeout, BackendMessage::CommandComplete { tag })
                if tag == "SET" =>
            {
                *self = Login::TransactionTimeoutDisabled;
                Ok(LoginStep::Continue)
            }
            (
                Login::Authenticated | Login::TransactionTimeoutDisabled,
                BackendMessage::ReadyForQuery(_),
            ) => {
                out.events.push_back(Event::Ready);
                Ok(LoginStep::Ready)
            }
            (_, other) => Err(unexpected(&other, during)),
        }
    }
}

/// Whether the server has `transaction_timeout` (17 and newer). A server that reports no
/// version (only test doubles do) or one that cannot be read gets nothing: the startup
/// checks refuse what they cannot read.
fn has_transaction_timeout(server_version: Option<&str>) -> bool {
    server_version
        .and_then(crate::wire::server_version::parse_server_version)
        .is_some_and(|version| version >= frontend::TRANSACTION_TIMEOUT_SINCE)
}

fn scram_error(err: std::io::Error) -> ConnError {
    ConnError::Scram(err.to_string())
}

fn password<'a>(config: &'a ConnectionConfig, method: &'static str) -> Result<&'a str, ConnError> {
    config
        .password
        .as_ref()
        .map(|p| p.expose())
        .ok_or(ConnError::PasswordRequired { method })
}

/// Answers the server's first authentication request.
fn request(
    auth: Authentication,
    config: &ConnectionConfig,
    binding: Binding<'_>,
    out: &mut Output,
) -> Result<Login, ConnError> {
    match auth {
        Authentication::Ok => {
            out.method = Some("trust");
            out.events.push_back(Event::Authenticated);
            Ok(Login::Authenticated)
        }
        Authentication::CleartextPassword => {
            out.method = Some("password");
            let secret = password(config, "password (cleartext)")?;
            frontend::encode_password(secret.as_bytes(), &mut out.transmit)
                .map_err(ConnError::Encode)?;
            Ok(Login::AwaitPasswordOk)
        }
        Authentication::Md5Password { salt } => {
            out.method = Some("md5");
            let secret = password(config, "md5")?;
            let hash = md5_hash(config.user.as_bytes(), secret.as_bytes(), salt);
            frontend::encode_password(hash.as_bytes(), &mut out.transmit)
                .map_err(ConnError::Encode)?;
            Ok(Login::AwaitPasswordOk)
        }
        Authentication::Sasl { mechanisms } => {
            let offered = |name: &str| mechanisms.iter().any(|m| m == name);
            let (mechanism, channel_binding) = match binding {
                // Bound to the TLS session: a man in the middle terminating TLS cannot
                // relay the exchange.
                Binding::Tls(Some(end_point)) if offered(SCRAM_SHA_256_PLUS) => (
                    SCRAM_SHA_256_PLUS,
                    ChannelBinding::tls_server_end_point(end_point.to_vec()),
                ),
                // "y": the client could bind but the server did not offer it, which the
                // server checks (a downgrade by a man in the middle shows).
                Binding::Tls(Some(_)) if offered(SCRAM_SHA_256) => {
                    (SCRAM_SHA_256, ChannelBinding::unrequested())
                }
                // "n": no TLS, or a certificate whose binding is undefined.
                _ if offered(SCRAM_SHA_256) => (SCRAM_SHA_256, ChannelBinding::unsupported()),
                _ => {
                    return Err(ConnError::UnsupportedAuthentication {
                        method: format!("SASL ({})", mechanisms.join(", ")),
                    })
                }
            };
            out.method = Some(mechanism);
            let secret = password(config, SCRAM_SHA_256)?;
            // `ScramSha256::new` draws its client nonce from `rand::rng()` internally; the
            // seeded constructor (`new_inner`) is private in postgres-protocol 0.6.12, so a
            // caller-chosen nonce is impossible without hand-rolling SCRAM, which we refuse
            // to do. This is the core's only randomness not drawn from its seed; it does not
            // affect any decision or trace.
            let scram = ScramSha256::new(secret.as_bytes(), channel_binding);
            frontend::encode_sasl_initial_response(mechanism, scram.message(), &mut out.transmit)
                .map_err(ConnError::Encode)?;
            Ok(Login::ScramContinue(Box::new(scram)))
        }
        Authentication::Unsupported { method, .. } => Err(ConnError::UnsupportedAuthentication {
            method: method.to_owned(),
        }),
        Authentication::SaslContinue(_) | Authentication::SaslFinal(_) => {
            Err(ConnError::Unexpected {
                message: "a SASL continuation without a SASL request",
                during: Login::AwaitRequest.name(),
            })
        }
    }
}
