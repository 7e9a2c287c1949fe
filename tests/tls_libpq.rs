//! Backend TLS keywords against libpq's own behaviour: the same conninfo
//! is given to psql (libpq 15) directly and to pgharbor as a database
//! entry's conninfo, and both must log in or both must fail (for the same
//! reason where libpq's message is known). The cluster is a real
//! PostgreSQL 15 with its own CA, a server certificate that names only
//! `db.pgharbor.test` (not the 127.0.0.1 it is reached at), client
//! certificates required for `cert_user` (`hostssl ... cert`), and SCRAM
//! over TLS (so SCRAM-SHA-256-PLUS is offered). A thread that answers `N`
//! to SSLRequest and then logs anyone in stands for a man in the middle
//! who strips TLS: there `requiressl=1` and `channel_binding=require` must
//! refuse to go on in plain text.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;

use common::pg::Custom;
use common::pki::{Pki, CERT_USER, KEY_PASSWORD, SERVER_NAME};
use common::{Backend, DbEntry, PgCluster, Pooler, PoolerOpts, SCRAM_USER, TRUST_USER};

const QUERY: &str =
    "SELECT 'served', coalesce((SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()), 'no')";

/// What one login showed: the TLS version in use ("no" for plain, "" for
/// the stripping server), or the error text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Served(String),
    Failed(String),
}

fn direct(conninfo: &str) -> Outcome {
    let mut cmd = common::clients::psql_cmd(conninfo, None);
    let out = cmd
        .env("HOME", "/nonexistent")
        .args(["-At", "-c", QUERY])
        .output()
        .expect("run psql");
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().next() {
        Some(line) if out.status.success() && line.starts_with("served") => {
            Outcome::Served(line.strip_prefix("served|").unwrap_or("").to_string())
        }
        _ => Outcome::Failed(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

async fn through(pooler: &Pooler, db: &str) -> Outcome {
    let conninfo = format!(
        "host={} port={} user={TRUST_USER} dbname={db} sslmode=disable",
        pooler.socket_dir().display(),
        pooler.port()
    );
    let client = match common::connect(&conninfo).await {
        Ok(c) => c,
        Err(e) => {
            return Outcome::Failed(
                e.as_db_error()
                    .map(|d| d.message().to_string())
                    .unwrap_or_else(|| e.to_string()),
            )
        }
    };
    let q = if db.starts_with("strip") {
        "SELECT 1"
    } else {
        QUERY
    };
    match client.simple_query(q).await {
        Ok(msgs) => {
            let row = msgs.iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
                _ => None,
            });
            match row {
                Some(r) if r.get(0) == Some("served") => {
                    Outcome::Served(r.try_get(1).ok().flatten().unwrap_or("").to_string())
                }
                _ => Outcome::Failed(format!("no row: {msgs:?}")),
            }
        }
        Err(e) => Outcome::Failed(
            e.as_db_error()
                .map(|d| d.message().to_string())
                .unwrap_or_else(|| e.to_string()),
        ),
    }
}

/// A TLS-stripping server on 127.0.0.1: `N` to SSLRequest, then
/// AuthenticationOk for anyone and a `served` row for every query.
fn stripping_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            std::thread::spawn(move || {
                let _ = serve_stripped(&mut s);
            });
        }
    });
    port
}

fn read_packet(s: &mut std::net::TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize - 4];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn serve_stripped(s: &mut std::net::TcpStream) -> std::io::Result<()> {
    use common::wire::message;
    let mut first = read_packet(s)?;
    if first == [4, 210, 22, 47] {
        s.write_all(b"N")?;
        first = read_packet(s)?;
    }
    let _ = first;
    let mut hello = message(b'R', &0i32.to_be_bytes());
    for (k, v) in [
        ("server_version", "15.0"),
        ("client_encoding", "UTF8"),
        ("standard_conforming_strings", "on"),
        ("DateStyle", "ISO, MDY"),
        ("integer_datetimes", "on"),
    ] {
        hello.extend(message(b'S', format!("{k}\0{v}\0").as_bytes()));
    }
    hello.extend(message(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]));
    hello.extend(message(b'Z', b"I"));
    s.write_all(&hello)?;
    loop {
        let mut tag = [0u8; 1];
        s.read_exact(&mut tag)?;
        let _ = read_packet(s)?;
        match tag[0] {
            b'Q' => {
                let mut field = b"col\0".to_vec();
                field.extend([
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 25, 255, 255, 255, 255, 255, 255, 0, 0,
                ]);
                let mut reply = message(b'T', &[&[0u8, 1][..], &field].concat());
                reply.extend(message(
                    b'D',
                    &[0, 1, 0, 0, 0, 6, b's', b'e', b'r', b'v', b'e', b'd'],
                ));
                reply.extend(message(b'C', b"SELECT 1\0"));
                reply.extend(message(b'Z', b"I"));
                s.write_all(&reply)?;
            }
            b'X' => return Ok(()),
            _ => {}
        }
    }
}

/// One comparison: a conninfo tail, and what both must show (Served with
/// the TLS version, or Failed with a part of libpq's message).
struct Case {
    name: &'static str,
    conninfo: String,
    want: Outcome,
}

#[tokio::test(flavor = "multi_thread")]
async fn libpq_and_pgharbor_agree_on_backend_tls_keywords() {
    let pki = Pki::generate();
    let server_files = pki.dir.clone();
    let pg = PgCluster::start_custom(&Custom {
        certs: Box::new(move |dir| common::pki::install_server(&server_files, dir)),
        hba: format!(
            "local all all trust\n\
             hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
             host all trust_user 127.0.0.1/32 trust\n\
             host all md5_user 127.0.0.1/32 md5\n\
             host all all 127.0.0.1/32 scram-sha-256\n"
        ),
        conf: "ssl_ca_file = '../certs/ca.crt'".into(),
    });
    pg.psql_ok("postgres", &format!("CREATE ROLE {CERT_USER} LOGIN"));
    let strip_port = stripping_server();
    let ca = pki.path("ca.crt");
    let scram = format!("user={} password={}", SCRAM_USER.0, SCRAM_USER.1);
    let named = format!("host={SERVER_NAME} hostaddr=127.0.0.1");
    let cert = |key: &str| {
        format!(
            "{named} user={CERT_USER} sslmode=verify-full sslrootcert={ca} sslcert={} sslkey={}",
            pki.path("client.crt"),
            pki.path(key)
        )
    };
    let tls13 = Outcome::Served("TLSv1.3".into());
    let failed = |s: &str| Outcome::Failed(s.to_string());
    let strip = |extra: &str| format!("host=127.0.0.1 port={strip_port} user=x {extra}");
    let cases = vec![
        Case { name: "vfull_host_and_hostaddr", conninfo: format!("{named} {scram} sslmode=verify-full sslrootcert={ca}"), want: tls13.clone() },
        Case { name: "vfull_wrong_host", conninfo: format!("host=wrong.example hostaddr=127.0.0.1 {scram} sslmode=verify-full sslrootcert={ca}"), want: failed("does not match host name \"wrong.example\"") },
        Case { name: "vfull_ip_not_in_cert", conninfo: format!("host=127.0.0.1 {scram} sslmode=verify-full sslrootcert={ca}"), want: failed("does not match host name \"127.0.0.1\"") },
        Case { name: "vca_ip", conninfo: format!("host=127.0.0.1 {scram} sslmode=verify-ca sslrootcert={ca}"), want: tls13.clone() },
        Case { name: "requiressl", conninfo: format!("host=127.0.0.1 {scram} requiressl=1"), want: tls13.clone() },
        Case { name: "max_tls12", conninfo: format!("host=127.0.0.1 {scram} sslmode=require ssl_max_protocol_version=TLSv1.2"), want: Outcome::Served("TLSv1.2".into()) },
        Case { name: "min_tls13", conninfo: format!("host=127.0.0.1 {scram} sslmode=require ssl_min_protocol_version=TLSv1.3"), want: tls13.clone() },
        Case { name: "sni_off", conninfo: format!("{named} {scram} sslmode=verify-full sslrootcert={ca} sslsni=0"), want: tls13.clone() },
        Case { name: "cb_require_scram_tls", conninfo: format!("host=127.0.0.1 {scram} sslmode=require channel_binding=require"), want: tls13.clone() },
        Case { name: "cb_disable", conninfo: format!("host=127.0.0.1 {scram} sslmode=require channel_binding=disable"), want: tls13.clone() },
        Case { name: "cb_require_plain", conninfo: format!("host=127.0.0.1 {scram} sslmode=disable channel_binding=require"), want: failed("channel binding required, but SSL not in use") },
        Case { name: "cb_require_md5", conninfo: "host=127.0.0.1 user=md5_user password=md5_pass sslmode=require channel_binding=require".into(), want: failed("channel binding required but not supported by server's authentication request") },
        Case { name: "cb_require_trust", conninfo: "host=127.0.0.1 user=trust_user sslmode=require channel_binding=require".into(), want: failed("channel binding required, but server authenticated client without channel binding") },
        Case { name: "client_cert", conninfo: cert("client.key"), want: tls13.clone() },
        Case { name: "client_cert_encrypted_key", conninfo: format!("{} sslpassword={KEY_PASSWORD}", cert("client_enc.key")), want: tls13.clone() },
        Case { name: "client_cert_missing", conninfo: format!("{named} user={CERT_USER} sslmode=verify-full sslrootcert={ca}"), want: failed("connection requires a valid client certificate") },
        Case { name: "crl_empty", conninfo: format!("host=127.0.0.1 {scram} sslmode=verify-ca sslrootcert={ca} sslcrl={}", pki.path("empty.crl")), want: tls13.clone() },
        Case { name: "crl_revoked", conninfo: format!("host=127.0.0.1 {scram} sslmode=verify-ca sslrootcert={ca} sslcrl={}", pki.path("revoked.crl")), want: failed("certificate verify failed") },
        Case { name: "crldir_revoked", conninfo: format!("host=127.0.0.1 {scram} sslmode=verify-ca sslrootcert={ca} sslcrldir={}", pki.path("crldir")), want: failed("certificate verify failed") },
        Case { name: "strip_prefer", conninfo: strip("sslmode=prefer"), want: Outcome::Served(String::new()) },
        Case { name: "strip_requiressl", conninfo: strip("requiressl=1"), want: failed("server does not support SSL, but SSL was required") },
        Case { name: "strip_channel_binding", conninfo: strip("channel_binding=require"), want: failed("channel binding required, but server authenticated client without channel binding") },
    ];
    let entries: Vec<DbEntry> = cases
        .iter()
        .map(|c| {
            DbEntry::new(c.name, Backend::Tcp)
                .pool_size(1)
                .conninfo_extra(&format!("port={} {}", pg.port(), c.conninfo))
        })
        .collect();
    refused_at_check_as_libpq_refuses(&pg, &pki);
    let pooler = Pooler::start(
        &pg,
        PoolerOpts::default()
            .auth("trust")
            .databases(entries.clone()),
    );
    let mut wrong = Vec::new();
    for (case, entry) in cases.iter().zip(&entries) {
        let conninfo = Pooler::backend_conninfo(&pg, entry);
        let libpq = direct(&conninfo);
        let ours = through(&pooler, case.name).await;
        let agrees = |got: &Outcome| match (&case.want, got) {
            (Outcome::Served(w), Outcome::Served(g)) => w == g,
            (Outcome::Failed(w), Outcome::Failed(g)) => g.contains(w.as_str()),
            _ => false,
        };
        if !agrees(&libpq) || !agrees(&ours) {
            wrong.push(format!(
                "{}: {conninfo}\n  want {:?}\n  psql {libpq:?}\n  pgharbor {ours:?}",
                case.name, case.want
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases disagree:\n{}\n---- pgharbor log ----\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n"),
        pooler.log_text()
    );
}

/// Conninfos libpq refuses (at parse time or at connect) that pgharbor
/// refuses at `pgharbor check`, naming the database entry and the key.
fn refused_at_check_as_libpq_refuses(pg: &PgCluster, pki: &Pki) {
    let ca = pki.path("ca.crt");
    let scram = format!("user={} password={}", SCRAM_USER.0, SCRAM_USER.1);
    let cert = pki.path("client.crt");
    let enc_key = pki.path("client_enc.key");
    // (name, conninfo, part of libpq's error, the key pgharbor names)
    let cases = [
        ("range", format!("{scram} sslmode=require ssl_max_protocol_version=TLSv1.1"), "invalid SSL protocol version range", "ssl_max_protocol_version"),
        ("bad_version", format!("{scram} ssl_min_protocol_version=TLSv1.9"), "ssl_min_protocol_version", "ssl_min_protocol_version"),
        ("bad_cb", format!("{scram} channel_binding=maybe"), "invalid channel_binding value", "channel_binding"),
        ("gssenc", format!("{scram} gssencmode=require"), "GSSAPI encryption required", "gssencmode"),
        ("wrong_key_password", format!("user={CERT_USER} sslmode=require sslrootcert={ca} sslcert={cert} sslkey={enc_key} sslpassword=wrong"), "could not load private key file", "could not load private key file"),
        ("no_key_password", format!("user={CERT_USER} sslmode=require sslcert={cert} sslkey={enc_key}"), "", "sslpassword"),
    ];
    let mut wrong = Vec::new();
    for (name, conninfo, libpq_says, key) in cases {
        let entry = DbEntry::new(name, Backend::Tcp)
            .conninfo_extra(&format!("port={} {conninfo}", pg.port()));
        let full = Pooler::backend_conninfo(pg, &entry);
        let libpq = direct(&full);
        let opts = PoolerOpts::default().auth("trust").databases(vec![entry]);
        let (code, msg) = Pooler::run_check(&Pooler::sample_config(pg, &opts));
        let libpq_ok = matches!(&libpq, Outcome::Failed(m) if m.contains(libpq_says));
        let ours_ok =
            code != 0 && msg.contains(&format!("databases.{name}.conninfo")) && msg.contains(key);
        if !libpq_ok || !ours_ok {
            wrong.push(format!(
                "{name}: {full}\n  psql {libpq:?}\n  check ({code}) {msg}"
            ));
        }
    }
    assert!(wrong.is_empty(), "refusals differ:\n{}", wrong.join("\n"));
}
