//! `tls.tls13_ciphers` reaches the acceptor, and the server's order decides
//! which TLS 1.3 suite a client gets. Two independent clients: libpq
//! (psql's `\conninfo`), which lists AES-256-GCM first, and `openssl
//! s_client -starttls postgres`, whose suite list each case sets.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::clients::{psql, psql_cmd};
use common::tls::{psql_conninfo, tls_pooler, tls_toml, Certs};
use common::util::free_port;
use common::{PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB};

fn start(certs: &Certs, suites: Option<&str>) -> Pooler {
    let mut keys = vec![("sslmode", "require")];
    keys.extend(suites.map(|s| ("tls13_ciphers", s)));
    tls_pooler(certs, &keys)
}

/// The suite libpq negotiated, from psql's `\conninfo`.
fn libpq_suite(pooler: &Pooler) -> String {
    let run = psql_conninfo(
        &format!(
            "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode=require connect_timeout=10",
            pooler.port(),
            SCRAM_USER.0
        ),
        Some(SCRAM_USER.1),
    );
    assert!(
        run.ok,
        "{}{}\n{}",
        run.stdout,
        run.stderr,
        pooler.log_text()
    );
    let line = run.ssl_line.unwrap_or_default();
    let suite = line
        .split("cipher: ")
        .nth(1)
        .and_then(|rest| rest.split(',').next());
    suite
        .unwrap_or_else(|| panic!("no cipher in {line:?}"))
        .to_string()
}

/// The suite `openssl s_client` negotiated offering `args` (e.g.
/// `-ciphersuites LIST` or `-tls1_2`), or `None` if the handshake failed.
fn s_client_suite(pooler: &Pooler, args: &[&str]) -> Option<String> {
    let out = Command::new("openssl")
        .args(["s_client", "-brief", "-starttls", "postgres", "-connect"])
        .arg(format!("127.0.0.1:{}", pooler.port()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl s_client");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Ciphersuite: "))
        .map(str::to_string)
}

const AES128: &str = "TLS_AES_128_GCM_SHA256";
const AES256: &str = "TLS_AES_256_GCM_SHA384";
const CHACHA: &str = "TLS_CHACHA20_POLY1305_SHA256";

#[test]
fn the_default_order_puts_aes128_first_unless_the_client_leads_with_chacha() {
    let certs = Certs::generate("suites-default");
    let pooler = start(&certs, None);
    // libpq asks for AES-256-GCM first; the server's order gives AES-128-GCM.
    assert_eq!(libpq_suite(&pooler), AES128);
    let offer = |list: &str| s_client_suite(&pooler, &["-ciphersuites", list]);
    assert_eq!(
        offer(&format!("{AES256}:{AES128}")).as_deref(),
        Some(AES128)
    );
    // A client without AES instructions lists ChaCha20 first, and gets it.
    assert_eq!(
        offer(&format!("{CHACHA}:{AES128}")).as_deref(),
        Some(CHACHA)
    );
    // A client gets what it offers, if that is all it offers.
    assert_eq!(offer(AES256).as_deref(), Some(AES256));
    // TLS 1.2 suites are chosen in the server's order too (Mozilla's list
    // starts with ECDHE-ECDSA-AES128-GCM-SHA256; OpenSSL's client starts
    // with the AES-256 one).
    assert_eq!(
        s_client_suite(&pooler, &["-tls1_2"]).as_deref(),
        Some("ECDHE-ECDSA-AES128-GCM-SHA256")
    );
}

#[test]
fn a_configured_list_is_the_order_and_the_limit() {
    let certs = Certs::generate("suites-set");
    let pooler = start(&certs, Some(&format!("{AES256}:{AES128}")));
    assert_eq!(libpq_suite(&pooler), AES256);
    let offer = |list: &str| s_client_suite(&pooler, &["-ciphersuites", list]);
    assert_eq!(
        offer(&format!("{AES128}:{AES256}")).as_deref(),
        Some(AES256)
    );
    assert_eq!(offer(AES128).as_deref(), Some(AES128));
    // ChaCha20 is not in the list: a client that offers only it is refused
    // in the handshake, and the pooler goes on serving.
    assert_eq!(offer(CHACHA), None);
    // Listed first by the client, ChaCha20 does not win when not allowed.
    assert_eq!(
        offer(&format!("{CHACHA}:{AES128}")).as_deref(),
        Some(AES128)
    );
    assert_eq!(libpq_suite(&pooler), AES256);
}

/// Rewrites the pooler's `tls13_ciphers` line and sends SIGHUP; waits for
/// the `n`th `marker` in the log.
fn reload_suites(pooler: &Pooler, from: &str, to: &str, marker: &str, n: usize) {
    let path = pooler.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let line = format!("tls13_ciphers = \"{from}\"");
    assert!(text.contains(&line), "no {line} in\n{text}");
    let text = text.replace(&line, &format!("tls13_ciphers = \"{to}\""));
    std::fs::write(path, text).expect("write config");
    pooler.sighup_until(marker, n);
}

#[test]
fn a_reload_changes_the_order_for_new_logins_and_a_bad_list_changes_nothing() {
    let certs = Certs::generate("suites-reload");
    let pooler = start(&certs, Some(AES128));
    assert_eq!(libpq_suite(&pooler), AES128);
    let both = format!("{AES256}:{AES128}");
    reload_suites(&pooler, AES128, &both, "configuration reloaded", 1);
    assert_eq!(libpq_suite(&pooler), AES256);
    // A name neither TLS library build has: the reload is refused, the
    // running order stays.
    reload_suites(&pooler, &both, "TLS_AES_128_CCM_SHA256", "reload failed", 1);
    assert!(
        pooler.log_text().contains("tls.tls13_ciphers"),
        "the failed reload does not name the key:\n{}",
        pooler.log_text()
    );
    assert_eq!(libpq_suite(&pooler), AES256);
}

/// SHOW CLIENTS' `tls` column for the one client row that has one, read
/// over the admin console while a psql session (`extra` conninfo keywords)
/// sleeps inside the pooler.
fn tls_column_while_connected(pooler: &Pooler, extra: &str) -> String {
    let session = format!(
        "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode=require {extra}",
        pooler.port(),
        SCRAM_USER.0
    );
    let mut sleeper = psql_cmd(&session, Some(SCRAM_USER.1))
        .args(["-c", "SELECT pg_sleep(5)"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start psql");
    let admin = pooler.conninfo(
        Transport::Unix,
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        "pgharbor",
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let column = loop {
        let out = psql(&admin, Some(SCRAM_USER.1), "SHOW CLIENTS");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // psql -At: the 18th of 21 '|'-separated columns is `tls`.
        let found = text
            .lines()
            .filter_map(|row| row.split('|').nth(17))
            .find(|tls| !tls.is_empty())
            .map(str::to_string);
        match found {
            Some(tls) => break tls,
            None if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            None => panic!("no TLS client in SHOW CLIENTS:\n{text}"),
        }
    };
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    column
}

#[test]
fn show_clients_says_what_each_tls_session_negotiated() {
    let certs = Certs::generate("suites-show");
    let mut opts = PoolerOpts::default()
        .tls(&tls_toml(Some(&certs), &[("sslmode", "require")]))
        .admin_users(&[SCRAM_USER.0]);
    opts.port = Some(free_port());
    let pooler = Pooler::start(PgCluster::shared(), opts);
    // PgBouncer's form; libpq (OpenSSL 3) offers an X25519 key share.
    assert_eq!(
        tls_column_while_connected(&pooler, ""),
        format!("TLSv1.3/{AES128}/ECDH=X25519")
    );
    let tls12 = tls_column_while_connected(&pooler, "ssl_max_protocol_version=TLSv1.2");
    assert_eq!(tls12, "TLSv1.2/ECDHE-ECDSA-AES128-GCM-SHA256/ECDH=X25519");
}
