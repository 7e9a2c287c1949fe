//! `auth.hba_file` and `auth.ident_file` (issue 16, items 1 and 2) against a
//! real pgharbor: the method each rule gives over the Unix socket and TCP
//! (seen from the client: which authentication requests it gets),
//! first-match order, PostgreSQL's own 28000 texts for `reject` and for no
//! matching rule, peer authentication with ident maps as root and as an
//! unprivileged OS user, how `loopbacksslmode` combines with `hostssl`
//! lines for 127.0.0.1, RELOAD with a broken file, and `pgharbor check`.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::pg::Custom;
use common::tls::{tls_toml, Certs};
use common::util::TempDir;
use common::wire::{request_packet, Failure, TlsVerify, SSL_REQUEST_CODE};
use common::{
    connect_err, Endpoint, ErrorFields, PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport,
    MD5_USER, SCRAM_USER, TEST_DB, TRUST_USER,
};

const STEP: Duration = Duration::from_secs(20);
/// AuthenticationOk, CleartextPassword, MD5Password, SASL, SASLContinue, SASLFinal.
const OK: i32 = 0;
const CLEARTEXT: i32 = 3;
const MD5: i32 = 5;
const SASL: &[i32] = &[10, 11, 12, 0];

/// An hba (and ident) file in a fresh directory, removed on drop: declare
/// it before the pooler that reads it.
struct Files {
    hba: PathBuf,
    ident: Option<PathBuf>,
    _dir: TempDir,
}

impl Files {
    /// The `[auth]` lines naming the files.
    fn auth_lines(&self) -> String {
        let mut t = format!("hba_file = \"{}\"\n", self.hba.display());
        if let Some(i) = &self.ident {
            t.push_str(&format!("ident_file = \"{}\"\n", i.display()));
        }
        t
    }
}

/// Writes the hba (and ident) file into a fresh directory.
fn write_files(hba: &str, ident: Option<&str>) -> Files {
    let dir = TempDir::new("hba");
    let hba_path = dir.path().join("pg_hba.conf");
    std::fs::write(&hba_path, hba).expect("write pg_hba.conf");
    let ident_path = ident.map(|text| {
        let p = dir.path().join("pg_ident.conf");
        std::fs::write(&p, text).expect("write pg_ident.conf");
        p
    });
    Files {
        hba: hba_path,
        ident: ident_path,
        _dir: dir,
    }
}

/// pgharbor with `files` as its rule files; `files` must outlive it.
fn start(pg: &PgCluster, opts: PoolerOpts, files: &Files) -> Pooler {
    Pooler::start(pg, opts.auth_toml(&files.auth_lines()))
}

/// The authentication request codes a raw client saw, and the error if any.
fn attempt_on(mut raw: RawConn, user: &str, password: &str) -> (Vec<i32>, Option<ErrorFields>) {
    let res = raw.login(&[("user", user), ("database", TEST_DB)], Some(password));
    let err = match res {
        Ok(_) => None,
        Err(Failure::Error(e)) => Some(e),
        Err(other) => panic!("{user}: no ErrorResponse: {other:?}"),
    };
    (raw.auth_codes.clone(), err)
}

fn attempt(
    p: &Pooler,
    t: Transport,
    user: &str,
    password: &str,
) -> (Vec<i32>, Option<ErrorFields>) {
    attempt_on(RawConn::connect(&p.endpoint(t)), user, password)
}

/// A TCP connection that asked for TLS and got it.
fn tls_conn(p: &Pooler) -> RawConn {
    let mut raw = RawConn::connect(&Endpoint::Tcp(p.port()));
    raw.send(&request_packet(SSL_REQUEST_CODE))
        .expect("send SSLRequest");
    match raw.read_request_answer(STEP) {
        Reply::Byte(b'S') => {}
        other => panic!("SSLRequest answered {other:?}"),
    }
    raw.start_tls(&TlsVerify::None).expect("TLS handshake");
    raw
}

fn no_entry(host: &str, user: &str, encryption: &str) -> String {
    format!("no pg_hba.conf entry for host \"{host}\", user \"{user}\", database \"{TEST_DB}\", {encryption}")
}

fn refused(got: &(Vec<i32>, Option<ErrorFields>)) -> (String, String) {
    let e = got
        .1
        .as_ref()
        .unwrap_or_else(|| panic!("logged in: {got:?}"));
    assert_eq!(e.severity, "FATAL", "{e:?}");
    (e.code.clone(), e.message.clone())
}

fn assert_codes(got: (Vec<i32>, Option<ErrorFields>), want: &[i32], what: &str) {
    assert!(got.1.is_none(), "{what}: refused: {:?}", got.1);
    assert_eq!(got.0, want, "{what}: authentication requests");
}

#[test]
fn each_rule_gives_its_method_first_match_over_both_transports() {
    let pg = PgCluster::shared();
    let hba = "\
        # methods by user and transport\n\
        local all trust_user trust\n\
        local all md5_user password\n\
        local all scram_user scram-sha-256\n\
        host all trust_user 127.0.0.1/32 trust\n\
        host all md5_user 127.0.0.1/32 md5\n\
        host all scram_user 127.0.0.1/32 password\n\
        host all rejected 127.0.0.1/32 reject\n\
        # never reached for md5_user: the first match wins\n\
        host all md5_user 127.0.0.1/32 reject\n";
    let files = write_files(hba, None);
    let p = start(pg, PoolerOpts::default(), &files);
    let (md5, scram) = (MD5_USER, SCRAM_USER);
    use Transport::{Tcp, Unix};
    assert_codes(attempt(&p, Unix, TRUST_USER, "x"), &[OK], "trust on unix");
    assert_codes(attempt(&p, Tcp, TRUST_USER, "x"), &[OK], "trust on tcp");
    assert_codes(
        attempt(&p, Unix, md5.0, md5.1),
        &[CLEARTEXT, OK],
        "password on unix",
    );
    assert_codes(attempt(&p, Tcp, md5.0, md5.1), &[MD5, OK], "md5 on tcp");
    assert_codes(attempt(&p, Unix, scram.0, scram.1), SASL, "scram on unix");
    assert_codes(
        attempt(&p, Tcp, scram.0, scram.1),
        &[CLEARTEXT, OK],
        "password on tcp",
    );

    let wrong = attempt(&p, Unix, md5.0, "nope");
    let want = format!("password authentication failed for user \"{}\"", md5.0);
    assert_eq!(
        refused(&wrong),
        ("28P01".into(), want),
        "wrong cleartext password"
    );

    let none = attempt(&p, Unix, "rejected", "x");
    let want = no_entry("[local]", "rejected", "no encryption");
    assert_eq!(refused(&none), ("28000".into(), want), "no local rule");
    assert_eq!(
        none.0,
        Vec::<i32>::new(),
        "no password asked before refusing"
    );
    let rejected = attempt(&p, Tcp, "rejected", "x");
    let want = format!(
        "pg_hba.conf rejects connection for host \"127.0.0.1\", user \"rejected\", database \"{TEST_DB}\", no encryption"
    );
    assert_eq!(refused(&rejected), ("28000".into(), want), "reject rule");
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_read_as_postgresql_writes_them() {
    // The same rules in PostgreSQL's own pg_hba.conf and in pgharbor's.
    let hba = "local all all trust\n\
               host all trust_user 127.0.0.1/32 trust\n\
               host all md5_user 127.0.0.1/32 reject\n";
    let pki = common::pki::Pki::generate();
    let server_files = pki.dir.clone();
    let pg = PgCluster::start_custom(&Custom {
        certs: Box::new(move |dir| common::pki::install_server(&server_files, dir)),
        hba: hba.into(),
        conf: String::new(),
    });
    let files = write_files(hba, None);
    let p = start(&pg, PoolerOpts::default(), &files);
    for user in [SCRAM_USER.0, MD5_USER.0] {
        let direct = connect_err(&pg.conninfo(Transport::Tcp, user, Some("x"), TEST_DB)).await;
        let pooled = connect_err(&p.conninfo(Transport::Tcp, user, Some("x"), TEST_DB)).await;
        assert_eq!(pooled, direct, "{user}: pgharbor and PostgreSQL differ");
        assert_eq!(direct.code, "28000");
    }
}

/// psql run as the OS user `postgres` over the pooler's socket.
fn psql_as_postgres(p: &Pooler, user: &str) -> std::process::Output {
    let pg = PgCluster::shared();
    let conninfo = format!(
        "host={} port={} user={user} dbname={TEST_DB} sslmode=disable",
        p.socket_dir().display(),
        p.port()
    );
    Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(pg.bin_dir().join("psql"))
        .args(["-X", "-At", "-d", &conninfo, "-c", "SELECT current_user"])
        .env_remove("PGPASSWORD")
        .env("PGCONNECT_TIMEOUT", "15")
        .output()
        .expect("run runuser psql")
}

#[test]
fn peer_maps_the_socket_peers_os_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test runs as root (CI does): it needs runuser");
    }
    let pg = PgCluster::shared();
    let hba = "local all postgres peer\n\
               local all all peer map=pooled\n\
               host all all 127.0.0.1/32 trust\n";
    let ident = "pooled root trust_user\npooled /^root$ scram_user\n";
    let files = write_files(hba, Some(ident));
    let p = start(pg, PoolerOpts::default(), &files);
    // root may be trust_user and scram_user (by the map), without a password.
    assert_codes(
        attempt(&p, Transport::Unix, TRUST_USER, "x"),
        &[OK],
        "root as trust_user",
    );
    assert_codes(
        attempt(&p, Transport::Unix, SCRAM_USER.0, "x"),
        &[OK],
        "root as scram_user",
    );
    // Not postgres: that line has no map, so the names must be equal.
    let got = attempt(&p, Transport::Unix, "postgres", "x");
    let want = "Peer authentication failed for user \"postgres\"".to_string();
    assert_eq!(refused(&got), ("28000".into(), want));
    assert!(got.0.is_empty(), "peer asks for nothing: {:?}", got.0);

    let own = psql_as_postgres(&p, "postgres");
    let stderr = String::from_utf8_lossy(&own.stderr);
    assert!(own.status.success(), "postgres as postgres: {stderr}");
    assert_eq!(String::from_utf8_lossy(&own.stdout).trim(), "postgres");
    let mapped = psql_as_postgres(&p, TRUST_USER);
    let stderr = String::from_utf8_lossy(&mapped.stderr);
    assert!(!mapped.status.success(), "the map has no line for postgres");
    assert!(
        stderr.contains("Peer authentication failed for user \"trust_user\""),
        "{stderr}"
    );
}

#[test]
fn hostssl_lines_never_match_a_plain_loopback_connection() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("hba");
    let hba = "hostssl all trust_user,md5_user 127.0.0.1/32 trust\n\
               hostnossl all md5_user 127.0.0.1/32 md5\n";
    let keys = [("sslmode", "prefer"), ("loopbacksslmode", "prefer")];
    let opts = PoolerOpts::default().tls(&tls_toml(Some(&certs), &keys));
    let files = write_files(hba, None);
    let p = start(pg, opts, &files);
    let md5 = MD5_USER;
    // Over TLS the hostssl line matches first, for every user.
    assert_codes(
        attempt_on(tls_conn(&p), TRUST_USER, "x"),
        &[OK],
        "TLS trust_user",
    );
    assert_codes(
        attempt_on(tls_conn(&p), md5.0, md5.1),
        &[OK],
        "TLS md5_user",
    );
    let other = attempt_on(tls_conn(&p), "nobody", "x");
    let want = no_entry("127.0.0.1", "nobody", "SSL encryption");
    assert_eq!(refused(&other), ("28000".into(), want));
    // In plain, only hostnossl (and host) lines can match.
    assert_codes(
        attempt(&p, Transport::Tcp, md5.0, md5.1),
        &[MD5, OK],
        "plain md5_user",
    );
    let plain = attempt(&p, Transport::Tcp, TRUST_USER, "x");
    let want = no_entry("127.0.0.1", TRUST_USER, "no encryption");
    assert_eq!(refused(&plain), ("28000".into(), want));

    // loopbacksslmode = disable answers N to SSLRequest on 127.0.0.1: a
    // hostssl line for 127.0.0.1 then can never match.
    let keys = [("sslmode", "prefer"), ("loopbacksslmode", "disable")];
    let opts = PoolerOpts::default().tls(&tls_toml(Some(&certs), &keys));
    let files = write_files(hba, None);
    let p = start(pg, opts, &files);
    let mut raw = RawConn::connect(&Endpoint::Tcp(p.port()));
    raw.send(&request_packet(SSL_REQUEST_CODE))
        .expect("send SSLRequest");
    assert!(matches!(raw.read_request_answer(STEP), Reply::Byte(b'N')));
    let plain = attempt_on(raw, TRUST_USER, "x");
    let want = no_entry("127.0.0.1", TRUST_USER, "no encryption");
    assert_eq!(refused(&plain), ("28000".into(), want));
}

#[test]
fn a_broken_file_on_reload_keeps_the_old_rules() {
    let pg = PgCluster::shared();
    let good = "local all all trust\nhost all all 127.0.0.1/32 trust\n";
    let opts = PoolerOpts::default().admin_users(&[TRUST_USER]);
    let files = write_files(good, None);
    let p = start(pg, opts, &files);
    let hba_path = &files.hba;
    assert_codes(
        attempt(&p, Transport::Tcp, TRUST_USER, "x"),
        &[OK],
        "before",
    );

    std::fs::write(
        hba_path,
        "local all all trust\nhost all all 127.0.0.1/32 bogus\n",
    )
    .expect("write broken pg_hba.conf");
    p.signal(libc::SIGHUP);
    assert!(
        p.wait_for_log("reload failed", 1, STEP),
        "no failed reload logged:\n{}",
        p.log_text()
    );
    let located = format!("{}:2:", hba_path.display());
    // The console's RELOAD refuses too, naming the line, and logs a WARN.
    let mut console = RawConn::connect(&p.endpoint(Transport::Unix));
    let params = [("user", TRUST_USER), ("database", "pgharbor")];
    console.login(&params, None).expect("console login");
    let reload = console.query("RELOAD").error.expect("RELOAD refused");
    assert!(reload.message.contains(&located), "{reload:?}");
    assert!(p.wait_for_log("RELOAD failed; keeping", 1, STEP));
    assert!(
        p.log_text().contains(&located),
        "log lacks {located}:\n{}",
        p.log_text()
    );
    assert_codes(
        attempt(&p, Transport::Tcp, TRUST_USER, "x"),
        &[OK],
        "old rules kept",
    );

    std::fs::write(
        hba_path,
        "local all all trust\nhost all all 127.0.0.1/32 md5\n",
    )
    .expect("write new pg_hba.conf");
    p.signal(libc::SIGHUP);
    assert!(
        p.wait_for_log("configuration reloaded", 1, STEP),
        "no reload logged:\n{}",
        p.log_text()
    );
    let md5 = MD5_USER;
    assert_codes(
        attempt(&p, Transport::Tcp, md5.0, md5.1),
        &[MD5, OK],
        "new rules",
    );
}

#[test]
fn check_names_the_bad_line() {
    let pg = PgCluster::shared();
    let bad = write_files(
        "local all all trust\n\nhost all all 10.0.0.0/8 ident\n",
        None,
    );
    let hba_path = &bad.hba;
    let opts = PoolerOpts::default().auth_toml(&bad.auth_lines());
    let (code, out) = Pooler::run_check(&Pooler::sample_config(pg, &opts));
    assert_ne!(code, 0, "check accepted a bad hba file: {out}");
    let located = format!("{}:3:", hba_path.display());
    assert!(
        out.contains(&located),
        "check output lacks {located}: {out}"
    );

    let good = write_files("local all all peer\n", None);
    let opts = PoolerOpts::default().auth_toml(&good.auth_lines());
    let (code, out) = Pooler::run_check(&Pooler::sample_config(pg, &opts));
    assert_eq!(code, 0, "check refused a good hba file: {out}");
}

#[test]
fn the_admin_console_goes_through_the_same_rules() {
    let pg = PgCluster::shared();
    let hba = "local all trust_user trust\n\
               host pgharbor,pgbouncer all 127.0.0.1/32 reject\n\
               host all all 127.0.0.1/32 trust\n";
    let opts = PoolerOpts::default().admin_users(&[TRUST_USER]);
    let files = write_files(hba, None);
    let p = start(pg, opts, &files);
    for console in ["pgharbor", "pgbouncer"] {
        let login = |t: Transport| {
            let mut raw = RawConn::connect(&p.endpoint(t));
            let res = raw.login(&[("user", TRUST_USER), ("database", console)], None);
            res.err().map(|f| match f {
                Failure::Error(e) => (e.code, e.message),
                other => panic!("{console} over {t:?}: {other:?}"),
            })
        };
        assert_eq!(login(Transport::Unix), None, "{console} on the socket");
        let want = format!(
            "pg_hba.conf rejects connection for host \"127.0.0.1\", user \"{TRUST_USER}\", database \"{console}\", no encryption"
        );
        assert_eq!(login(Transport::Tcp), Some(("28000".into(), want)));
    }
}

#[test]
fn loopbacksslmode_require_refuses_before_any_rule() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("hba-require");
    let hba = "hostnossl all all 127.0.0.1/32 trust\nhostssl all all 127.0.0.1/32 trust\n";
    let keys = [("sslmode", "prefer"), ("loopbacksslmode", "require")];
    let opts = PoolerOpts::default().tls(&tls_toml(Some(&certs), &keys));
    let files = write_files(hba, None);
    let p = start(pg, opts, &files);
    let plain = attempt(&p, Transport::Tcp, TRUST_USER, "x");
    let (code, message) = refused(&plain);
    assert_eq!(code, "28000");
    assert!(message.contains("SSL required"), "{message}");
    assert_codes(attempt_on(tls_conn(&p), TRUST_USER, "x"), &[OK], "TLS");
}
