//! Helpers of `tests/client_cert.rs`: the outcomes a login can come to,
//! the client PKI with the `[tls]` table that asks for certificates, and
//! logins that present one (psql over TCP, tokio-postgres + OpenSSL over
//! the Unix socket), each read back as `Ok(current_user)` or the error.
#![allow(dead_code)]

use std::path::Path;

use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
use tokio_postgres::Client;

use crate::common::clients::{db_err, psql_cmd, DbErr};
use crate::common::pki::ClientPki;
use crate::common::tls::{tls_toml, Certs};
use crate::common::util::TempDir;
use crate::common::{Pooler, TEST_DB};

/// What a login should come to.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    /// Logged in as this user.
    User(&'static str),
    /// FATAL with this SQLSTATE and message.
    Fatal(&'static str, String),
    /// The TLS handshake failed; the client's error contains this.
    Handshake(&'static str),
}

pub const NEEDS_CERT: &str = "connection requires a valid client certificate";

pub fn needs_cert() -> Want {
    Want::Fatal("28000", NEEDS_CERT.to_string())
}

pub fn cert_failed(user: &str) -> Want {
    Want::Fatal(
        "28000",
        format!("certificate authentication failed for user \"{user}\""),
    )
}

/// The server certificate, the client PKI and the `[tls]` table that asks
/// for client certificates against the client CA.
pub struct Setup {
    pub server: Certs,
    pub pki: ClientPki,
}

impl Setup {
    pub fn new() -> Setup {
        Setup {
            server: Certs::generate("client-cert"),
            pki: ClientPki::generate(),
        }
    }

    /// `[tls]` with `ca_file`, `crl_file` and these keys.
    pub fn tls(&self, keys: &[(&str, &str)]) -> String {
        let ca = self.pki.path("ca.crt");
        let crl = self.pki.path("ca.crl");
        let mut all = vec![("ca_file", ca.as_str()), ("crl_file", crl.as_str())];
        all.extend_from_slice(keys);
        tls_toml(Some(&self.server), &all)
    }
}

/// The `[auth]` lines naming a pg_hba.conf (and pg_ident.conf), and the
/// directory holding them, removed on drop: keep it until the pooler that
/// reads the files has stopped (declare it before the pooler).
pub struct AuthFiles {
    pub toml: String,
    _dir: Option<TempDir>,
}

impl AuthFiles {
    /// No files, no `[auth]` lines.
    pub fn none() -> AuthFiles {
        AuthFiles {
            toml: String::new(),
            _dir: None,
        }
    }
}

/// Writes pg_hba.conf (and pg_ident.conf) into a fresh directory; the
/// `[auth]` lines naming them, with the directory's guard.
pub fn auth_files(hba: Option<&str>, ident: Option<&str>) -> AuthFiles {
    let dir = TempDir::new("client-cert-hba");
    let mut lines = String::new();
    if let Some(text) = hba {
        let p = dir.path().join("pg_hba.conf");
        std::fs::write(&p, text).expect("write pg_hba.conf");
        lines.push_str(&format!("hba_file = \"{}\"\n", p.display()));
    }
    if let Some(text) = ident {
        let p = dir.path().join("pg_ident.conf");
        std::fs::write(&p, text).expect("write pg_ident.conf");
        lines.push_str(&format!("ident_file = \"{}\"\n", p.display()));
    }
    AuthFiles {
        toml: lines,
        _dir: Some(dir),
    }
}

/// psql over TCP with `sslmode=require` and, when given, the PKI's
/// `NAME.crt` / `NAME.key`; HOME points nowhere so libpq finds no
/// `~/.postgresql/postgresql.crt` of its own.
pub fn psql_login(
    p: &Pooler,
    pki: &ClientPki,
    cert: Option<&str>,
    user: &str,
    password: Option<&str>,
) -> Result<String, String> {
    let mut conninfo = tls_tcp_conninfo(p, user);
    if let Some(name) = cert {
        conninfo.push_str(&format!(
            " sslcert={} sslkey={}",
            pki.path(&format!("{name}.crt")),
            pki.path(&format!("{name}.key"))
        ));
    }
    let out = psql_cmd(&conninfo, password)
        .env("HOME", "/nonexistent")
        .args(["-At", "-c", "SELECT current_user"])
        .output()
        .expect("run psql");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(stderr)
    }
}

/// Whether a psql outcome is `want` (psql shows the message, not the SQLSTATE).
pub fn psql_matches(got: &Result<String, String>, want: &Want) -> bool {
    match (got, want) {
        (Ok(user), Want::User(u)) => user == u,
        (Err(e), Want::Fatal(_, message)) => e.contains(&format!("FATAL:  {message}")),
        (Err(e), Want::Handshake(why)) => e.contains(why) && !e.contains("FATAL"),
        _ => false,
    }
}

/// An OpenSSL connector that shows the PKI's `NAME` certificate (or none)
/// and accepts any server certificate (libpq's sslmode=require).
pub fn connector(pki: &ClientPki, cert: Option<&str>) -> SslConnector {
    let mut b = SslConnector::builder(SslMethod::tls_client()).expect("SslConnector");
    b.set_verify(SslVerifyMode::NONE);
    if let Some(name) = cert {
        b.set_certificate_chain_file(pki.path(&format!("{name}.crt")))
            .expect("client certificate");
        b.set_private_key_file(pki.path(&format!("{name}.key")), SslFiletype::PEM)
            .expect("client key");
    }
    b.build()
}

/// tokio-postgres over the pooler's Unix socket with TLS and `cert`.
pub async fn socket_login(
    socket: &Path,
    pki: &ClientPki,
    cert: Option<&str>,
    user: &str,
) -> Result<Client, tokio_postgres::Error> {
    let config: tokio_postgres::Config =
        format!("user={user} dbname={TEST_DB} sslmode=require").parse()?;
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    let ssl = connector(pki, cert)
        .configure()
        .expect("ConnectConfiguration");
    let tls = postgres_openssl::TlsConnector::new(ssl, "localhost");
    let (client, connection) = config.connect_raw(stream, tls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The whole error chain, for handshake failures (the alert is deep in it).
pub fn chain(e: &tokio_postgres::Error) -> String {
    let mut text = format!("{e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

pub async fn socket_outcome(
    socket: &Path,
    pki: &ClientPki,
    cert: Option<&str>,
    user: &str,
) -> Result<String, String> {
    outcome(socket_login(socket, pki, cert, user).await).await
}

/// tokio-postgres over TCP with TLS and `cert`, read as [`socket_outcome`]
/// reads the socket (SQLSTATEs included, which psql does not show).
pub async fn tcp_outcome(
    p: &Pooler,
    pki: &ClientPki,
    cert: Option<&str>,
    user: &str,
    password: Option<&str>,
) -> Result<String, String> {
    let mut conninfo = tls_tcp_conninfo(p, user);
    if let Some(pw) = password {
        conninfo.push_str(&format!(" password={pw}"));
    }
    let tls = postgres_openssl::MakeTlsConnector::new(connector(pki, cert));
    let login = match tokio_postgres::connect(&conninfo, tls).await {
        Ok((client, connection)) => {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(client)
        }
        Err(e) => Err(e),
    };
    outcome(login).await
}

/// `Ok(current_user)`, `Err("FATAL <SQLSTATE> <message>")` or the error chain.
async fn outcome(login: Result<Client, tokio_postgres::Error>) -> Result<String, String> {
    match login {
        Ok(client) => match client.query_one("SELECT current_user::text", &[]).await {
            Ok(row) => Ok(row.get(0)),
            Err(e) => Err(chain(&e)),
        },
        Err(e) => match db_err(&e) {
            Some(DbErr { code, message, .. }) => Err(format!("FATAL {code} {message}")),
            None => Err(chain(&e)),
        },
    }
}

/// Whether a tokio-postgres outcome is `want`, SQLSTATE included.
pub fn socket_matches(got: &Result<String, String>, want: &Want) -> bool {
    match (got, want) {
        (Ok(user), Want::User(u)) => user == u,
        (Err(e), Want::Fatal(code, message)) => e == &format!("FATAL {code} {message}"),
        // Under TLS 1.3 the client may write its startup packet before the
        // server's alert arrives, and see the closed socket instead (the
        // test then reads the reason from the pooler's log).
        // OpenSSL names an alert "unknown ca", AWS-LC (the default TLS
        // library, for the test client too) "TLSV1_ALERT_UNKNOWN_CA".
        (Err(e), Want::Handshake(why)) => {
            let reason = e.to_lowercase().replace('_', " ");
            !e.starts_with("FATAL")
                && (reason.contains(why)
                    || e.contains("Broken pipe")
                    || e.contains("reset by peer"))
        }
        _ => false,
    }
}

/// The four certificates of the matrix and what each should get under a
/// setting where the test CA's `trust` certificate is enough.
pub fn matrix(good: Want) -> [(Option<&'static str>, Want); 4] {
    [
        (Some("trust"), good),
        (Some("other"), Want::Handshake("unknown ca")),
        (Some("revoked"), Want::Handshake("certificate revoked")),
        (None, needs_cert()),
    ]
}

/// The pooler's TCP listener with TLS required, as `user` on the test database.
fn tls_tcp_conninfo(p: &Pooler, user: &str) -> String {
    format!(
        "host=127.0.0.1 port={} user={user} dbname={TEST_DB} sslmode=require",
        p.port()
    )
}
