//! Client authentication: trust, md5, SCRAM-SHA-256 and cleartext password
//! against the auth file. Which one a login gets is decided before (by
//! `auth.method`, or by the hba rules in `super::hba`).
//!
//! An unknown user and a wrong password end in the same 28P01 error, and an
//! unknown user still goes through a full (mock) exchange, so probing cannot
//! tell them apart.

use bytes::BytesMut;
use rand::RngCore;
use tokio::io::AsyncWriteExt;

use super::error::ClientError;
use crate::auth::{
    cleartext_verify, md5_verify, scram_mechanisms, Md5Outcome, ScramError, ScramServer,
    ScramSuccess, Secret, ServerBinding,
};
use crate::config::AuthMethod;
use crate::protocol::frontend::{parse_password, parse_sasl_initial};
use crate::protocol::tags::fe;
use crate::protocol::{server, FrameBuf, PgError, Violation, MAX_AUTH_MESSAGE};
use crate::stream::{read_tagged, Stream};

/// What a successful login proved, beyond the user name.
pub enum Proof {
    /// No secret involved (trust) or a secret the pooler already has.
    Verified,
    /// SCRAM succeeded: the server-final message still has to be sent, and the
    /// client's ClientKey, with a pg_authid secret, lets the pooler log in to
    /// PostgreSQL as this user. `channel_binding` says whether it was -PLUS.
    Scram(ScramSuccess),
}

/// The exchange a login runs, once the method is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// None: trust.
    Trust,
    /// None either: the peer check (`super::hba`) already passed.
    Peer,
    /// md5 challenge (SCRAM for a SCRAM secret or an unknown user).
    Md5,
    /// SCRAM-SHA-256.
    ScramSha256,
    /// AuthenticationCleartextPassword.
    Password,
    /// None: the `cert` method, whose certificate check already passed.
    Cert,
}

impl Exchange {
    /// Whether it checks a secret, so a user the auth file lacks is worth
    /// looking up (`auth.query`).
    pub fn checks_secret(self) -> bool {
        match self {
            Exchange::Trust | Exchange::Peer | Exchange::Cert => false,
            Exchange::Md5 | Exchange::ScramSha256 | Exchange::Password => true,
        }
    }
}

impl From<AuthMethod> for Exchange {
    fn from(m: AuthMethod) -> Exchange {
        match m {
            AuthMethod::Trust => Exchange::Trust,
            AuthMethod::Md5 => Exchange::Md5,
            AuthMethod::ScramSha256 => Exchange::ScramSha256,
        }
    }
}

fn auth_failed(user: &str, why: &'static str) -> ClientError {
    ClientError::AuthFailed {
        user: user.to_string(),
        why,
    }
}

/// Where a login looked for the user's secret: what the log says when
/// neither had it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched {
    /// `auth.auth_file` only.
    AuthFile,
    /// `auth.auth_file`, then `auth.query`.
    AuthFileAndQuery,
}

impl Searched {
    /// The log's reason for a user found in neither place.
    fn unknown_user(self) -> &'static str {
        match self {
            Searched::AuthFile => "no such user in auth.auth_file",
            Searched::AuthFileAndQuery => {
                "no such user in auth.auth_file, and auth.query returned no row"
            }
        }
    }
}

/// Why a SCRAM proof failed, for the log.
fn scram_failure(secret: Option<&Secret>, searched: Searched) -> &'static str {
    match secret {
        None => searched.unknown_user(),
        Some(s) if s.scram().is_none() => {
            "auth.auth_file holds only an md5 hash for the user, which cannot check SCRAM"
        }
        Some(_) => "wrong password",
    }
}

/// Runs the configured method for `user`; `secret` is None for an unknown user.
pub async fn authenticate(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    method: Exchange,
    user: &str,
    (secret, searched): (Option<&Secret>, Searched),
    mock_seed: &[u8; 32],
) -> Result<Proof, ClientError> {
    match method {
        Exchange::Trust | Exchange::Peer | Exchange::Cert => Ok(Proof::Verified),
        Exchange::Md5 => match secret {
            Some(s @ (Secret::Plain { .. } | Secret::Md5 { .. })) => {
                md5(stream, buf, user, s).await
            }
            // A SCRAM secret cannot check an md5 answer; and an unknown user
            // gets what PostgreSQL gives an unknown role in md5 mode, a mock
            // exchange in password_encryption's method (scram-sha-256 by
            // default, auth.c's CheckPWChallengeAuth), so the first message
            // cannot tell that the user does not exist.
            Some(Secret::Scram(_)) | None => {
                scram(stream, buf, user, (secret, searched), mock_seed).await
            }
        },
        Exchange::ScramSha256 => scram(stream, buf, user, (secret, searched), mock_seed).await,
        Exchange::Password => cleartext(stream, buf, user, (secret, searched)).await,
    }
}

/// Reads the client's next authentication message (type `p`).
async fn read_auth_message(
    stream: &mut Stream,
    buf: &mut FrameBuf,
) -> Result<(Vec<u8>, usize), ClientError> {
    let f = read_tagged(stream, buf, MAX_AUTH_MESSAGE).await?;
    match f.tag {
        fe::PASSWORD => Ok((buf.body(&f).to_vec(), f.total)),
        fe::TERMINATE => Err(ClientError::Gone),
        other => Err(ClientError::Protocol(Violation::new(format!(
            "expected password response, got message type {other}"
        )))),
    }
}

async fn md5(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    user: &str,
    secret: &Secret,
) -> Result<Proof, ClientError> {
    let mut salt = [0u8; 4];
    rand::thread_rng().fill_bytes(&mut salt);
    let mut out = BytesMut::new();
    server::auth_md5(&mut out, salt);
    stream.write_all(&out).await?;
    let (body, total) = read_auth_message(stream, buf).await?;
    buf.consume(total);
    let response = parse_password(&body)?;
    match md5_verify(secret, user, salt, response) {
        Md5Outcome::Accepted => Ok(Proof::Verified),
        _ => Err(auth_failed(user, "wrong password")),
    }
}

/// PostgreSQL's `password` method: the password crosses in the clear (TLS
/// or not, as PostgreSQL allows), and is checked against any secret.
async fn cleartext(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    user: &str,
    (secret, searched): (Option<&Secret>, Searched),
) -> Result<Proof, ClientError> {
    let mut out = BytesMut::new();
    server::auth_cleartext(&mut out);
    stream.write_all(&out).await?;
    let (body, total) = read_auth_message(stream, buf).await?;
    buf.consume(total);
    let password = parse_password(&body)?;
    let Some(secret) = secret else {
        return Err(auth_failed(user, searched.unknown_user()));
    };
    let Ok(password) = std::str::from_utf8(password) else {
        return Err(auth_failed(user, "the password is not UTF-8"));
    };
    // A SCRAM secret costs a PBKDF2: off the async workers.
    let (secret, user_owned, password) = (secret.clone(), user.to_owned(), password.to_owned());
    let checked =
        tokio::task::spawn_blocking(move || cleartext_verify(&secret, &user_owned, &password));
    match checked.await {
        Ok(true) => Ok(Proof::Verified),
        _ => Err(auth_failed(user, "wrong password")),
    }
}

async fn scram(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    user: &str,
    (secret, searched): (Option<&Secret>, Searched),
    mock_seed: &[u8; 32],
) -> Result<Proof, ClientError> {
    let tls = stream.is_tls();
    let mut out = BytesMut::new();
    server::auth_sasl(&mut out, scram_mechanisms(tls));
    stream.write_all(&out).await?;

    let (body, total) = read_auth_message(stream, buf).await?;
    buf.consume(total);
    let (mechanism, client_first) = parse_sasl_initial(&body)?;
    // Hashed per login from this session's own certificate, only for -PLUS,
    // as PostgreSQL does: after a SIGHUP, sessions hold different ones.
    let binding = ServerBinding::select(mechanism, tls, || own_certificate_hash(stream))
        .map_err(scram_error)?;
    let mut exchange = ScramServer::new(user, secret.and_then(Secret::scram), mock_seed, binding);
    let server_first = exchange
        .handle_client_first(client_first)
        .map_err(scram_error)?;
    out.clear();
    server::auth_sasl_continue(&mut out, server_first);
    stream.write_all(&out).await?;

    let (client_final, total) = read_auth_message(stream, buf).await?;
    buf.consume(total);
    match exchange.handle_client_final(&client_final) {
        // AuthenticationSASLFinal goes out with the rest of the login reply.
        Ok(success) => Ok(Proof::Scram(success)),
        Err(ScramError::InvalidProof) => Err(auth_failed(user, scram_failure(secret, searched))),
        Err(e) => Err(scram_error(e)),
    }
}

/// The tls-server-end-point hash of the certificate this TLS session
/// presented (be_tls_get_certificate_hash).
fn own_certificate_hash(stream: &Stream) -> Result<Vec<u8>, String> {
    let Stream::Tls(tls) = stream else {
        return Err("not a TLS connection".into());
    };
    let cert = tls
        .ssl()
        .certificate()
        .ok_or("the TLS session has no server certificate")?;
    crate::tls::channel_binding::server_end_point(cert)
}

fn scram_error(e: ScramError) -> ClientError {
    let mut err = PgError::fatal(e.sqlstate(), e.to_string());
    if let Some(detail) = e.detail() {
        err = err.with_detail(detail);
    }
    ClientError::Refused(err)
}
