//! TLS from pgharbor to PostgreSQL: `sslmode` (libpq's meanings, with
//! `sslrootcert`) for TCP backends, `socketsslmode` for Unix-socket backends.
//! The evidence is PostgreSQL's own `pg_stat_ssl` row for the backend that
//! serves the client, read through the pooler; refusals are the errors the
//! client receives.

mod common;

use common::clients::{connect, psql};
use common::tls::{other_name_for_loopback, Certs};
use common::{Backend, DbEntry, PgCluster, Pooler, PoolerOpts, Transport, TRUST_USER};

/// What a client of one database entry should see.
#[derive(Debug)]
enum Want {
    /// Logged in; pg_stat_ssl.ssl for its backend is this.
    Ssl(bool),
    /// Refused with a FATAL of this SQLSTATE whose message contains all of these.
    Refused(&'static str, Vec<String>),
}

/// Connects through the pooler's socket (plain) to database `db` as the
/// trust user and reads pg_stat_ssl for the backend serving it.
async fn backend_ssl(pooler: &Pooler, db: &str) -> Result<bool, tokio_postgres::Error> {
    let conninfo = format!(
        "host={} port={} user={TRUST_USER} dbname={db} sslmode=disable",
        pooler.socket_dir().display(),
        pooler.port()
    );
    let client = connect(&conninfo).await?;
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

#[test]
fn backend_tls_follows_sslmode_on_tcp_and_socketsslmode_on_the_socket() {
    let pg = PgCluster::shared();
    let ca = pg.ca_cert().display().to_string();
    // A CA that signed nothing PostgreSQL has.
    let stranger = Certs::generate("stranger");
    let stranger_ca = stranger.ca.display().to_string();
    let tcp = |name: &str, extra: &str| DbEntry::new(name, Backend::Tcp).conninfo_extra(extra);
    let unix = |name: &str, extra: &str| DbEntry::new(name, Backend::Unix).conninfo_extra(extra);
    // TLS failures toward the server are 08006 (connection failure).
    let refused =
        |parts: &[&str]| Want::Refused("08006", parts.iter().map(|s| s.to_string()).collect());

    let mut cases: Vec<(DbEntry, Want)> = vec![
        (tcp("tcp_disable", "sslmode=disable"), Want::Ssl(false)),
        (tcp("tcp_allow", "sslmode=allow"), Want::Ssl(false)),
        (tcp("tcp_prefer", "sslmode=prefer"), Want::Ssl(true)),
        (tcp("tcp_require", "sslmode=require"), Want::Ssl(true)),
        (
            tcp(
                "tcp_verify_ca",
                &format!("sslmode=verify-ca sslrootcert={ca}"),
            ),
            Want::Ssl(true),
        ),
        (
            tcp(
                "tcp_verify_full_localhost",
                &format!("host=localhost sslmode=verify-full sslrootcert={ca}"),
            ),
            Want::Ssl(true),
        ),
        // The certificate also names IP 127.0.0.1 (libpq checks IP SANs too).
        (
            tcp(
                "tcp_verify_full_ip",
                &format!("sslmode=verify-full sslrootcert={ca}"),
            ),
            Want::Ssl(true),
        ),
        (
            tcp(
                "tcp_verify_full_wrong_ca",
                &format!("host=localhost sslmode=verify-full sslrootcert={stranger_ca}"),
            ),
            refused(&["server TLS", "certificate verify failed"]),
        ),
        (
            tcp(
                "tcp_verify_ca_wrong_ca",
                &format!("sslmode=verify-ca sslrootcert={stranger_ca}"),
            ),
            refused(&["server TLS", "certificate verify failed"]),
        ),
        // libpq: require with a root certificate verifies the chain (as verify-ca).
        (
            tcp(
                "tcp_require_wrong_ca",
                &format!("sslmode=require sslrootcert={stranger_ca}"),
            ),
            refused(&["server TLS", "certificate verify failed"]),
        ),
        // socketsslmode does not apply to TCP backends.
        (
            tcp("tcp_socketsslmode", "sslmode=disable socketsslmode=require"),
            Want::Ssl(false),
        ),
        // The socket: stock PostgreSQL answers N there.
        (unix("sock_default", ""), Want::Ssl(false)),
        (
            unix("sock_disable", "socketsslmode=disable"),
            Want::Ssl(false),
        ),
        (
            unix("sock_prefer", "socketsslmode=prefer"),
            Want::Ssl(false),
        ),
        (
            unix("sock_require", "socketsslmode=require"),
            refused(&[
                "server TLS",
                "Unix socket",
                "socketsslmode requires it",
                "answers N",
            ]),
        ),
        // sslmode does not apply to socket backends.
        (
            unix("sock_sslmode", "sslmode=verify-full"),
            Want::Ssl(false),
        ),
    ];
    // verify-full checks the host name, verify-ca does not. PostgreSQL's
    // certificate names localhost and 127.0.0.1; connect under another name
    // for 127.0.0.1 when this machine has one.
    let other = other_name_for_loopback();
    match &other {
        Some(name) => {
            cases.push((
                tcp(
                    "tcp_verify_full_wrong_host",
                    &format!("host={name} sslmode=verify-full sslrootcert={ca}"),
                ),
                // Refused, naming the host (see also
                // `verify_full_host_name_mismatch_says_so`).
                refused(&["server TLS", "does not match host name"]),
            ));
            cases.push((
                tcp(
                    "tcp_verify_ca_other_host",
                    &format!("host={name} sslmode=verify-ca sslrootcert={ca}"),
                ),
                Want::Ssl(true),
            ));
        }
        None => eprintln!(
            "note: no second name for 127.0.0.1 here (neither this host's name nor 127.1 \
             resolves to it); the wrong-host-name case of verify-full is skipped"
        ),
    }

    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("trust")
            .databases(cases.iter().map(|(db, _)| db.clone()).collect()),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut failures = Vec::new();
    for (db, want) in &cases {
        let got = rt.block_on(backend_ssl(&pooler, &db.name));
        let ok = match (want, &got) {
            (Want::Ssl(w), Ok(g)) => w == g,
            (Want::Refused(code, parts), Err(e)) => e.as_db_error().is_some_and(|d| {
                d.severity() == "FATAL"
                    && d.code().code() == *code
                    && parts.iter().all(|p| d.message().contains(p.as_str()))
            }),
            _ => false,
        };
        if !ok {
            let got = match &got {
                Ok(ssl) => format!("logged in, pg_stat_ssl.ssl = {ssl}"),
                Err(e) => match e.as_db_error() {
                    Some(d) => format!("{} {} {:?}", d.severity(), d.code().code(), d.message()),
                    None => format!("{e:?}"),
                },
            };
            failures.push(format!(
                "{} ({}): expected {want:?}, got {got}",
                db.name,
                Pooler::backend_conninfo(pg, db)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} backend cases wrong:\n{}\n---- pgharbor log ----\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n"),
        pooler.log_text()
    );
}

/// A host-name mismatch under verify-full must say so: "certificate verify
/// failed" alone is also what a wrong CA gives, and an operator cannot tell
/// which of sslrootcert or host to fix. libpq says `server certificate for
/// "localhost" does not match host name "..."`; OpenSSL's verify result
/// for it reads "hostname mismatch".
#[test]
fn verify_full_host_name_mismatch_says_so() {
    let pg = PgCluster::shared();
    let Some(name) = other_name_for_loopback() else {
        eprintln!(
            "skipped: no second name for 127.0.0.1 here (neither this host's name nor 127.1 \
             resolves to it)"
        );
        return;
    };
    let db = DbEntry::new("wrong_host", Backend::Tcp).conninfo_extra(&format!(
        "host={name} sslmode=verify-full sslrootcert={}",
        pg.ca_cert().display()
    ));
    let pooler = Pooler::start(pg, PoolerOpts::default().auth("trust").databases(vec![db]));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt
        .block_on(backend_ssl(&pooler, "wrong_host"))
        .expect_err("verify-full accepted a certificate for another name");
    let msg = err
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| format!("{err:?}"));
    assert!(
        msg.contains("hostname mismatch") || msg.contains("does not match host name"),
        "the error does not say the host name {name:?} is not in the server's certificate: {msg}"
    );
}

/// The refusal for verify-full without `sslrootcert` names the database's
/// conninfo, and only that: `tls.cert_file` is the front end's certificate
/// and has nothing to do with it.
#[test]
fn missing_sslrootcert_blames_the_conninfo_only() {
    // libpq would fall back to ~/.postgresql/root.crt; pgharbor refuses the
    // config instead, at check and at start-up, naming the database entry.
    let pg = PgCluster::shared();
    let db = DbEntry::new("no_rootcert", Backend::Tcp).conninfo_extra("sslmode=verify-full");
    let config =
        Pooler::sample_config(pg, &PoolerOpts::default().auth("trust").databases(vec![db]));
    let (code, msg) = Pooler::run_check(&config);
    assert_ne!(
        code, 0,
        "verify-full without sslrootcert accepted by check:\n{config}"
    );
    assert!(
        msg.contains("databases.no_rootcert.conninfo")
            && msg.contains("sslrootcert")
            && !msg.contains("tls.cert_file"),
        "misleading error for a missing sslrootcert: {msg}"
    );
}

/// A one-shot fake server on 127.0.0.1 that reads the pooler's SSLRequest
/// and answers with `reply` in one write (an attacker in the middle, not a
/// stand-in for PostgreSQL). Returns its port.
fn hostile_server(reply: Vec<u8>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut req = [0u8; 8];
            if s.read_exact(&mut req).is_ok() {
                let _ = s.write_all(&reply);
                // Hold the connection until the pooler gives up on it.
                let mut sink = [0u8; 1024];
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
            }
        }
    });
    port
}

/// An ErrorResponse message with these fields.
fn error_response(code: &str, message: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (k, v) in [(b'S', "FATAL"), (b'C', code), (b'M', message)] {
        body.push(k);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    common::wire::message(b'E', &body)
}

/// As a client of PostgreSQL the pooler reads exactly one byte after its
/// SSLRequest (CVE-2021-23222): bytes sent together with `S` (here a forged
/// AuthenticationOk, BackendKeyData and ReadyForQuery) go to the TLS
/// handshake, which fails, and are never taken as a login. And an error
/// sent in answer to SSLRequest, before any server authentication, never
/// reaches the client (CVE-2024-10977).
#[test]
fn hostile_answers_to_the_backend_ssl_request_never_reach_the_client() {
    use common::wire::message;
    let pg = PgCluster::shared();
    let mut forged = b"S".to_vec();
    forged.extend(message(b'R', &0i32.to_be_bytes()));
    forged.extend(message(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]));
    forged.extend(message(b'Z', b"I"));
    let injected = "INJECTED-BY-THE-MAN-IN-THE-MIDDLE";
    let stuffed_port = hostile_server(forged);
    let error_port = hostile_server(error_response("28000", injected));
    let entry = |name: &str, port: u16| {
        DbEntry::new(name, Backend::Tcp).conninfo_extra(&format!("port={port} sslmode=require"))
    };
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().auth("trust").databases(vec![
            entry("stuffed_after_s", stuffed_port),
            entry("error_for_ssl", error_port),
        ]),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (db, must_contain) in [
        ("stuffed_after_s", "TLS handshake"),
        ("error_for_ssl", "server TLS"),
    ] {
        let err = rt
            .block_on(backend_ssl(&pooler, db))
            .expect_err("a login through a hostile server succeeded");
        let d = err
            .as_db_error()
            .unwrap_or_else(|| panic!("{db}: no ErrorResponse: {err:?}"));
        assert_eq!(
            (d.severity(), d.code().code()),
            ("FATAL", "08006"),
            "{db}: {}",
            d.message()
        );
        assert!(
            d.message().contains(must_contain) && !d.message().contains(injected),
            "{db}: {}",
            d.message()
        );
    }
}

/// SHOW SERVERS' `tls` for a TLS backend against PostgreSQL's own account
/// of the same connection (`pg_stat_ssl`'s version and cipher for the
/// backend's pid): the protocol and suite must agree; a socket backend
/// shows nothing.
#[test]
fn show_servers_says_what_postgresql_says_the_backend_negotiated() {
    let pg = PgCluster::shared();
    let dbs = vec![
        DbEntry::new("tls_shown", Backend::Tcp).conninfo_extra("sslmode=require"),
        DbEntry::new("plain_shown", Backend::Unix),
    ];
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("trust")
            .admin_users(&[TRUST_USER])
            .databases(dbs),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let seen = |db: &str| -> (i32, String) {
        rt.block_on(async {
            let conninfo = format!(
                "host={} port={} user={TRUST_USER} dbname={db} sslmode=disable",
                pooler.socket_dir().display(),
                pooler.port()
            );
            let client = connect(&conninfo).await.expect("connect");
            let row = client
                .query_one(
                    "SELECT pg_backend_pid(), coalesce(version || '/' || cipher || '/', '') \
                     FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await
                .expect("pg_stat_ssl");
            (row.get(0), row.get(1))
        })
    };
    let (tls_pid, tls_prefix) = seen("tls_shown");
    let (plain_pid, plain) = seen("plain_shown");
    assert!(tls_prefix.starts_with("TLSv1.3/"), "{tls_prefix:?}");
    assert_eq!(plain, "");

    let admin = pooler.conninfo(Transport::Unix, TRUST_USER, None, "pgharbor");
    let out = psql(&admin, None, "SHOW SERVERS");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // psql -At: `remote_pid` and `tls` are the 17th and 18th of 21 columns.
    let tls_of = |pid: i32| -> String {
        text.lines()
            .map(|row| row.split('|').collect::<Vec<_>>())
            .find(|cols| cols.get(16) == Some(&pid.to_string().as_str()))
            .and_then(|cols| cols.get(17).map(|s| s.to_string()))
            .unwrap_or_else(|| panic!("no server row for pid {pid}:\n{text}"))
    };
    let shown = tls_of(tls_pid);
    assert!(
        shown.starts_with(&tls_prefix) && shown.contains("/ECDH="),
        "SHOW SERVERS says {shown:?}, PostgreSQL says {tls_prefix:?}"
    );
    assert_eq!(tls_of(plain_pid), "");
}
