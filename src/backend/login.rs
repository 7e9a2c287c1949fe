//! Opening a backend: socket, StartupMessage, authentication, and the
//! ParameterStatus/BackendKeyData burst up to the first ReadyForQuery.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::session::parse_error_fields;
use super::LinkStatus;
use super::{
    BackendError, BackendTarget, CancelGate, CancelTarget, Credentials, Link, MAX_INSPECTED,
};
use crate::auth::channel_binding::{self, Bound, Channel, Choice, Gs2, Request};
use crate::auth::{
    md5_password_hash, md5_salted_response, SaltedPasswordCache, ScramClient, ScramCredential,
    ScramKeys, ServerFirst,
};
use crate::config::ChannelBinding;
use crate::protocol::messages::{BackendKeyData, ParameterStatus, ReadyForQuery};
use crate::protocol::tags::{auth, be, encryption};
use crate::protocol::{be_u32, frontend::split_cstr, Violation};
use crate::stream::{read_tagged, Stream};
use crate::tls::connector::Opening;
use crate::tls::label::Label;
use crate::tls::BackendTls;

impl Link {
    /// Opens and authenticates backend `id`; `extra_params` go into the startup packet.
    pub async fn connect(
        target: Arc<BackendTarget>,
        tls: &BackendTls,
        creds: &Credentials,
        extra_params: &[(String, String)],
        cache: &Arc<SaltedPasswordCache>,
        id: u64,
    ) -> Result<Link, BackendError> {
        let started = Instant::now();
        let stream = target
            .open()
            .await
            .map_err(|source| BackendError::Connect {
                addr: target.describe(),
                source,
            })?;
        let connected = Instant::now();
        let cancel = CancelTarget {
            target: target.clone(),
            pid: 0,
            secret: 0,
            gate: Arc::new(CancelGate::default()),
        };
        let mut link = Link::new(stream, cancel, id);
        link.timings.connect = connected - started;
        negotiate_tls(&mut link.stream, &target, tls).await?;
        let connected = Instant::now();
        link.timings.tls = connected - started - link.timings.connect;

        let mut out = BytesMut::with_capacity(256);
        let mut params: Vec<(&str, &str)> =
            vec![("user", &target.user), ("database", &target.dbname)];
        for (k, v) in extra_params {
            if k != "user" && k != "database" {
                params.push((k, v));
            }
        }
        frontend::startup_message(params.iter().copied(), &mut out)
            .map_err(|e| BackendError::Protocol(e.to_string()))?;
        write(&mut link.stream, &out).await?;

        authenticate(&mut link, &target.user, creds, cache, tls.channel_binding).await?;
        let authed = Instant::now();
        link.timings.auth = authed - connected;
        read_until_ready(&mut link).await?;
        link.timings.ready = authed.elapsed();
        // Nobody holds the status yet: publish the real pid and TLS state.
        link.status = Arc::new(
            LinkStatus::new(
                link.id,
                link.cancel.pid,
                link.transport,
                Label::of_stream(&link.stream),
            )
            .on(target),
        );
        Ok(link)
    }
}

/// SSLRequest and handshake as libpq does them, or with
/// `sslnegotiation=direct` the handshake at once, as libpq 17 does it.
/// Exactly one byte is read for the SSLRequest's answer, straight from the
/// socket: anything the server (or a man in the middle) sends after it must
/// go through the TLS handshake, never be taken as protocol
/// (CVE-2021-23222). An error answer's text is not shown to anyone
/// (CVE-2024-10977): it came before the server was authenticated.
async fn negotiate_tls(
    stream: &mut Stream,
    target: &BackendTarget,
    tls: &BackendTls,
) -> Result<(), BackendError> {
    let opening = tls.opening();
    let Some(connector) = tls.connector().filter(|_| opening != Opening::Plain) else {
        return Ok(());
    };
    if tls.direct() {
        // No SSLRequest, so no fallback to plain: a server that cannot
        // take direct TLS fails the handshake. ALPN "postgresql" is what
        // says both ends mean PostgreSQL's protocol; libpq 17 leaves a
        // server that did not select it (fe-secure-openssl.c).
        handshake(stream, target, tls, connector).await?;
        return crate::tls::alpn::check_direct_server(stream)
            .map_err(|why| BackendError::Tls(format!("{why} ({})", target.describe())));
    }
    let mut out = BytesMut::with_capacity(8);
    frontend::ssl_request(&mut out);
    write(stream, &out).await?;
    let mut answer = [0u8; 1];
    stream
        .read_exact(&mut answer)
        .await
        .map_err(|e| BackendError::Read(e.into()))?;
    match answer[0] {
        encryption::SSL_ACCEPTED => handshake(stream, target, tls, connector).await,
        encryption::DECLINED if opening == Opening::Prefer => Ok(()),
        encryption::DECLINED => Err(BackendError::Tls(tls.refused_message())),
        // A server too old to know SSLRequest answers with an ErrorResponse.
        be::ERROR_RESPONSE => Err(BackendError::Tls(
            "server answered the SSL request with an error (not shown: it was sent before the server was authenticated)".into(),
        )),
        _ => Err(BackendError::Protocol(
            "received invalid response to SSL negotiation".into(),
        )),
    }
}

/// The client side of the TLS handshake; the name is `host` even when
/// `hostaddr` gave the address.
async fn handshake(
    stream: &mut Stream,
    target: &BackendTarget,
    tls: &BackendTls,
    connector: &openssl::ssl::SslConnector,
) -> Result<(), BackendError> {
    stream
        .connect_tls(
            connector,
            tls.server_name(),
            tls.verify_hostname(),
            tls.send_sni(),
        )
        .await
        .map_err(|e| {
            BackendError::Tls(format!(
                "TLS handshake with {} failed: {e}",
                target.describe()
            ))
        })
}

async fn write(stream: &mut Stream, bytes: &[u8]) -> Result<(), BackendError> {
    stream.write_all(bytes).await.map_err(BackendError::Write)
}

/// Reads one whole server message; returns its tag and a copy of the body
/// (login-time only, so the copy does not matter).
pub(super) async fn next(link: &mut Link) -> Result<(u8, Vec<u8>), BackendError> {
    let f = read_tagged(&mut link.stream, &mut link.buf, MAX_INSPECTED).await?;
    let body = link.buf.body(&f).to_vec();
    link.buf.consume(f.total);
    Ok((f.tag, body))
}

fn unexpected(tag: u8, phase: &str) -> BackendError {
    BackendError::Protocol(format!(
        "unexpected message type \"{}\" during {phase}",
        tag.escape_ascii()
    ))
}

/// Answers whatever authentication request the server makes, under
/// `channel_binding` as libpq (see [`channel_binding`]).
async fn authenticate(
    link: &mut Link,
    user: &str,
    creds: &Credentials,
    cache: &Arc<SaltedPasswordCache>,
    policy: ChannelBinding,
) -> Result<(), BackendError> {
    let mut out = BytesMut::with_capacity(256);
    let mut scram: Option<ScramClient> = None;
    let refused = |m: &str| BackendError::Auth(m.to_string());
    loop {
        let (tag, body) = next(link).await?;
        match tag {
            be::ERROR_RESPONSE => return Err(BackendError::Server(parse_error_fields(&body))),
            be::NOTICE_RESPONSE => continue,
            be::AUTHENTICATION if body.len() >= 4 => {}
            _ => return Err(unexpected(tag, "authentication")),
        }
        out.clear();
        let code = be_u32(&body);
        let request = match code {
            auth::OK => Request::Ok,
            auth::SASL | auth::SASL_CONTINUE | auth::SASL_FINAL => Request::Sasl,
            _ => Request::Other,
        };
        let bound = match &scram {
            Some(c) if c.channel_bound() => Bound::Yes,
            _ => Bound::No,
        };
        // Before answering anything: under require, no password (not even
        // its md5 hash) goes to a server that has not proved its certificate.
        channel_binding::check_request(policy, request, bound).map_err(refused)?;
        match code {
            auth::OK => return Ok(()),
            auth::CLEARTEXT_PASSWORD => {
                let pw = creds.password.as_deref().ok_or_else(|| {
                    BackendError::Auth(format!(
                        "server asked for a cleartext password for user \"{user}\", and pgharbor has none"
                    ))
                })?;
                frontend::password_message(pw.as_bytes(), &mut out)
                    .map_err(|e| BackendError::Protocol(e.to_string()))?;
            }
            auth::MD5_PASSWORD if body.len() == 8 => {
                let hash = match (&creds.password, &creds.md5_hash) {
                    (Some(pw), _) => md5_password_hash(user, pw),
                    (None, Some(h)) => h.clone(),
                    _ => {
                        return Err(BackendError::Auth(format!(
                            "server asked for an md5 password for user \"{user}\", and pgharbor has neither a password nor an md5 hash"
                        )))
                    }
                };
                let salt = [body[4], body[5], body[6], body[7]];
                let resp = md5_salted_response(&hash, salt);
                frontend::password_message(resp.as_bytes(), &mut out)
                    .map_err(|e| BackendError::Protocol(e.to_string()))?;
            }
            auth::SASL => {
                let offered = sasl_mechanisms(&body[4..]);
                let channel = if link.stream.is_tls() {
                    Channel::Tls
                } else {
                    Channel::Plain
                };
                let gs2 =
                    match channel_binding::select(policy, &offered, channel).map_err(refused)? {
                        Choice::Plus => Gs2::ServerEndPoint(server_end_point(link)?),
                        Choice::Plain(flag) => flag.into(),
                    };
                let (client, first) = ScramClient::new(gs2);
                frontend::sasl_initial_response(client.mechanism(), &first, &mut out)
                    .map_err(|e| BackendError::Protocol(e.to_string()))?;
                scram = Some(client);
            }
            auth::SASL_CONTINUE => {
                let client = scram.as_mut().ok_or_else(|| unexpected(tag, "SASL"))?;
                let first = client
                    .handle_server_first(&body[4..])
                    .map_err(|e| BackendError::Auth(e.to_string()))?;
                let keys = scram_keys(user, creds, cache, &first).await?;
                let fin = client
                    .client_final(&keys)
                    .map_err(|e| BackendError::Auth(e.to_string()))?;
                frontend::sasl_response(&fin, &mut out)
                    .map_err(|e| BackendError::Protocol(e.to_string()))?;
            }
            auth::SASL_FINAL => {
                let client = scram.as_mut().ok_or_else(|| unexpected(tag, "SASL"))?;
                client.verify_server_final(&body[4..]).map_err(|e| {
                    BackendError::Auth(format!("server signature check failed: {e}"))
                })?;
                continue;
            }
            other => {
                return Err(BackendError::Auth(format!(
                "server asked for authentication method {other}, which pgharbor does not support"
            )))
            }
        }
        write(&mut link.stream, &out).await?;
    }
}

/// The mechanism names of AuthenticationSASL (names that are not UTF-8
/// cannot be ours and are skipped).
fn sasl_mechanisms(mut list: &[u8]) -> Vec<&str> {
    let mut names = Vec::new();
    while let Some((name, rest)) = split_cstr(list) {
        if name.is_empty() {
            break;
        }
        if let Ok(name) = std::str::from_utf8(name) {
            names.push(name);
        }
        list = rest;
    }
    names
}

/// tls-server-end-point data for SCRAM-SHA-256-PLUS: the hash of the
/// certificate this TLS session was made with.
fn server_end_point(link: &Link) -> Result<Vec<u8>, BackendError> {
    let cert = link.stream.peer_certificate().ok_or_else(|| {
        BackendError::Auth("could not get server certificate for channel binding".into())
    })?;
    crate::tls::channel_binding::server_end_point(&cert).map_err(BackendError::Auth)
}

/// SCRAM keys for the server's salt: the passthrough keys if they fit, else
/// the password's, through [`ScramCredential::keys`] (which also refuses an
/// absurd iteration count a hostile server could ask for) — cached, and off
/// the async workers when PBKDF2 has to run.
async fn scram_keys(
    user: &str,
    creds: &Credentials,
    cache: &Arc<SaltedPasswordCache>,
    first: &ServerFirst,
) -> Result<ScramKeys, BackendError> {
    if let Some(Ok(keys)) = creds.scram.as_ref().map(|c| c.keys(user, first, cache)) {
        return Ok(keys);
    }
    let Some(pw) = &creds.password else {
        let why = if creds.scram.is_some() {
            "the SCRAM secret in the auth file does not match the server's (different salt or iteration count)"
        } else {
            "no password, and no client has logged in with SCRAM yet to lend its key"
        };
        return Err(BackendError::Auth(format!(
            "cannot answer the server's SCRAM challenge for user \"{user}\": {why}"
        )));
    };
    if let Some(keys) = cache.get_cached(user, pw, &first.salt, first.iterations) {
        return Ok(keys);
    }
    let credential = ScramCredential::Password(pw.clone());
    let (cache, user, first) = (cache.clone(), user.to_string(), first.clone());
    tokio::task::spawn_blocking(move || credential.keys(&user, &first, &cache))
        .await
        .map_err(|e| BackendError::Auth(format!("SCRAM key derivation failed: {e}")))?
        .map_err(|e| BackendError::Auth(e.to_string()))
}

/// Collects ParameterStatus and BackendKeyData up to the first ReadyForQuery.
async fn read_until_ready(link: &mut Link) -> Result<(), BackendError> {
    let malformed = |v: Violation| BackendError::Protocol(v.0);
    loop {
        let (tag, body) = next(link).await?;
        match tag {
            be::PARAMETER_STATUS => {
                let p = ParameterStatus::parse(&body).map_err(malformed)?;
                link.ledger.params_mut().set(
                    &String::from_utf8_lossy(p.name),
                    &String::from_utf8_lossy(p.value),
                );
            }
            be::BACKEND_KEY_DATA => {
                let key = BackendKeyData::parse(&body).map_err(malformed)?;
                // Unshared until the login ends: no copy is made.
                let cancel = Arc::make_mut(&mut link.cancel);
                cancel.pid = key.pid;
                cancel.secret = key.secret;
            }
            be::READY_FOR_QUERY => {
                let ready = ReadyForQuery::parse(&body).map_err(malformed)?;
                link.ledger.set_tx(ready.status);
                return Ok(());
            }
            be::NOTICE_RESPONSE | be::NEGOTIATE_PROTOCOL_VERSION => {}
            be::ERROR_RESPONSE => return Err(BackendError::Server(parse_error_fields(&body))),
            _ => return Err(unexpected(tag, "startup")),
        }
    }
}
