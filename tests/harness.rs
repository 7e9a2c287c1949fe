//! Proves the test harness itself against PostgreSQL directly (no pooler):
//! each role logs in with its own method over TCP, the socket works, SSL is
//! on with the generated certificate, the secrets are what the pooler tests
//! will copy, and clusters are independent and cleaned up.

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::secrets;
use common::wire::{request_packet, SSL_REQUEST_CODE};
use common::{
    connect, psql_ok, PgCluster, RawConn, Reply, Transport, MD5_USER, SCRAM_USER, TEST_DB,
    TRUST_USER,
};
use md5::{Digest, Md5};

#[tokio::test(flavor = "multi_thread")]
async fn each_role_logs_in_over_tcp_with_its_method() {
    let pg = PgCluster::shared();
    let cases = [
        (SCRAM_USER.0, Some(SCRAM_USER.1), 10), // AuthenticationSASL
        (MD5_USER.0, Some(MD5_USER.1), 5),      // AuthenticationMD5Password
        (TRUST_USER, None, 0),                  // straight to AuthenticationOk
    ];
    for (user, password, first_code) in cases {
        let mut raw = RawConn::connect(&pg.endpoint(Transport::Tcp));
        let session = raw
            .login(&[("user", user), ("database", TEST_DB)], password)
            .unwrap_or_else(|e| panic!("raw login {user}: {e:?}"));
        assert_eq!(session.auth_codes[0], first_code, "{user}: {session:?}");
        assert_eq!(session.status, b'I');
        assert!(session.key.is_some());
        assert_eq!(
            raw.query("SELECT current_user").scalar().as_deref(),
            Some(user)
        );

        let client = connect(&pg.conninfo(Transport::Tcp, user, password, TEST_DB))
            .await
            .unwrap_or_else(|e| panic!("tokio-postgres {user}: {e:?}"));
        let row = client
            .query_one("SELECT current_user::text, inet_client_addr()::text", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(0), user);
        assert_eq!(
            row.get::<_, Option<String>>(1).as_deref(),
            Some("127.0.0.1/32")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_passwords_are_refused_by_postgres() {
    let pg = PgCluster::shared();
    for (user, _) in [SCRAM_USER, MD5_USER] {
        let err = connect(&pg.conninfo(Transport::Tcp, user, Some("wrong"), TEST_DB))
            .await
            .err()
            .unwrap_or_else(|| panic!("{user} logged in with a wrong password"));
        let db = err.as_db_error().expect("an ErrorResponse");
        assert_eq!(db.code().code(), "28P01");
        assert_eq!(
            db.message(),
            format!("password authentication failed for user \"{user}\"")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn socket_admin_client_and_psql_work() {
    let pg = PgCluster::shared();
    let admin = pg.admin_client().await;
    let row = admin
        .query_one(
            "SELECT current_user::text, current_database()::text, inet_client_addr() IS NULL",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "postgres");
    assert_eq!(row.get::<_, String>(1), TEST_DB);
    assert!(
        row.get::<_, bool>(2),
        "admin client should be on the Unix socket"
    );
    assert!(pg.socket_path().exists());

    // Every role may log in over the socket (local trust) and create tables.
    for user in [SCRAM_USER.0, MD5_USER.0, TRUST_USER] {
        let out = psql_ok(
            &pg.conninfo(Transport::Unix, user, None, TEST_DB),
            None,
            &format!(
                "CREATE TEMP TABLE t_{user} (i int); CREATE TABLE harness_{user} (i int); \
                 DROP TABLE harness_{user}; SELECT current_user"
            ),
        );
        assert_eq!(out, user);
    }
    assert_eq!(
        pg.psql_ok(TEST_DB, "SELECT pg_catalog.pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()"),
        SCRAM_USER.0
    );
}

#[test]
fn ssl_is_on_with_the_generated_certificate() {
    let pg = PgCluster::shared();
    // verify-full against our CA proves the chain, CN and SAN, not just "ssl on".
    let conninfo = format!(
        "host=localhost hostaddr=127.0.0.1 port={} user={} dbname={TEST_DB} \
         sslmode=verify-full sslrootcert={}",
        pg.port(),
        SCRAM_USER.0,
        pg.ca_cert().display()
    );
    let out = psql_ok(
        &conninfo,
        Some(SCRAM_USER.1),
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    assert_eq!(out, "t");
    let require = format!(
        "host=127.0.0.1 port={} user={} dbname={TEST_DB} sslmode=require",
        pg.port(),
        SCRAM_USER.0
    );
    let out = psql_ok(
        &require,
        Some(SCRAM_USER.1),
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    assert_eq!(out, "t");

    // PostgreSQL answers SSLRequest 'S' over TCP and 'N' on its Unix socket.
    let mut tcp = RawConn::connect(&pg.endpoint(Transport::Tcp));
    tcp.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
    assert_eq!(tcp.read_byte(Duration::from_secs(5)), Reply::Byte(b'S'));
    let mut unix = RawConn::connect(&pg.endpoint(Transport::Unix));
    unix.send(&request_packet(SSL_REQUEST_CODE)).unwrap();
    assert_eq!(unix.read_byte(Duration::from_secs(5)), Reply::Byte(b'N'));
}

#[test]
fn secrets_have_the_expected_form() {
    let pg = PgCluster::shared();
    let scram = pg.scram_secret(SCRAM_USER.0);
    let (head, keys) = scram.split_once('$').unwrap().1.split_once('$').unwrap();
    let (iterations, salt) = head.split_once(':').unwrap();
    assert_eq!(iterations, "4096");
    assert!(!salt.is_empty() && keys.contains(':'), "{scram}");

    let md5 = pg.md5_secret(MD5_USER.0);
    let mut h = Md5::new();
    h.update(format!("{}{}", MD5_USER.1, MD5_USER.0));
    let expected: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(md5, format!("md5{expected}"));
    assert_eq!(md5, secrets::md5_secret(MD5_USER.0, MD5_USER.1));

    // The harness's own SCRAM secret builder agrees with PostgreSQL.
    let salt = base64::engine::general_purpose::STANDARD
        .decode(salt)
        .unwrap();
    assert_eq!(secrets::scram_secret(SCRAM_USER.1, &salt, 4096), scram);
}

#[test]
fn a_hand_built_low_iteration_scram_secret_logs_in_to_postgres() {
    // The way BENCHMARKS.md makes a cheap SCRAM role, used by tests whose
    // subject is not the cost of PBKDF2.
    let pg = PgCluster::shared();
    let secret = secrets::scram_secret("cheap_pass", b"0123456789abcdef", 16);
    pg.psql_ok(
        "postgres",
        &format!(
            "DROP ROLE IF EXISTS cheap_user; CREATE ROLE cheap_user LOGIN PASSWORD '{secret}'"
        ),
    );
    let out = psql_ok(
        &pg.conninfo(Transport::Tcp, "cheap_user", None, TEST_DB),
        Some("cheap_pass"),
        "SELECT current_user",
    );
    assert_eq!(out, "cheap_user");
}

#[test]
fn clusters_are_independent_and_removed_on_drop() {
    let shared = PgCluster::shared();
    let other = PgCluster::start();
    assert_ne!(other.port(), shared.port());
    assert_ne!(other.socket_dir(), shared.socket_dir());
    assert_eq!(other.psql_ok(TEST_DB, "SELECT 1"), "1");
    let dir = other.data_dir().parent().unwrap().to_path_buf();
    let sock = other.socket_path();
    assert!(dir.exists() && sock.exists());
    drop(other);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(!sock.exists());
    // The shared one is untouched.
    assert_eq!(shared.psql_ok(TEST_DB, "SELECT 2"), "2");
}
