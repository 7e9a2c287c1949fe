//! `auth.query` (issue 16 item 6): users missing from the auth file are
//! looked up in PostgreSQL through a pooled backend of `auth.user`, against
//! a real PostgreSQL 15. A SCRAM secret found logs the client in and then
//! the backend (SCRAM passthrough over TCP); an md5 one the same way by
//! md5; an unknown user and a wrong password get the same exchange and the
//! same 28P01; answers are cached for the TTL (a counting query shows how
//! often it ran); a lookup that takes too long refuses the login after
//! `auth.query_timeout`, and the pooler goes on serving.

mod common;

use std::time::{Duration, Instant};

use common::wire::Failure;
use common::{
    connect_err, connect_ok, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, RawConn, Transport,
    MD5_USER, SCRAM_USER, TEST_DB, TRUST_USER,
};

/// Counts its calls in `lookup_log`, then answers as PgBouncer's default
/// query does.
const COUNTING: &str = "CREATE TABLE IF NOT EXISTS lookup_log (usename text);
CREATE OR REPLACE FUNCTION pgharbor_lookup(u text) RETURNS TABLE (usename name, passwd text)
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  INSERT INTO lookup_log VALUES (u);
  RETURN QUERY SELECT s.usename, s.passwd FROM pg_catalog.pg_shadow s WHERE s.usename = u;
END $$;";

/// A pooler with only trust_user in its auth file, looking the others up as `postgres`
/// (trusted on the cluster's socket) in the `authdb` entry; clients reach
/// `harbor_test` with backends over TCP, so PostgreSQL checks the
/// credentials the lookup gave the pool.
fn lookup_pooler(pg: &PgCluster, auth_lines: &str) -> Pooler {
    let opts = PoolerOpts {
        auth_method: "md5".into(),
        ..PoolerOpts::default()
    }
    .userlist(&[(TRUST_USER, "trust_pw")])
    .databases(vec![
        DbEntry::new(TEST_DB, Backend::Tcp),
        DbEntry::new("authdb", Backend::Unix).user("postgres", None),
    ])
    .auth_toml(&format!(
        "user = \"postgres\"\ndbname = \"authdb\"\n{auth_lines}"
    ));
    Pooler::start(pg, opts)
}

fn lookups(pg: &PgCluster) -> usize {
    let out = pg.psql_ok(TEST_DB, "SELECT count(*) FROM lookup_log");
    out.trim().parse().expect("a count")
}

#[tokio::test(flavor = "multi_thread")]
async fn looked_up_users_log_in_and_unknown_ones_look_the_same_and_answers_are_cached() {
    let pg = PgCluster::shared();
    pg.psql_ok(TEST_DB, COUNTING);
    pg.psql_ok(TEST_DB, "TRUNCATE lookup_log");
    let pooler = lookup_pooler(
        pg,
        "query = \"SELECT usename, passwd FROM pgharbor_lookup($1)\"\n",
    );
    for (user, password) in [SCRAM_USER, MD5_USER] {
        for _ in 0..3 {
            let conninfo = pooler.conninfo(Transport::Tcp, user, Some(password), TEST_DB);
            let c = connect_ok(&conninfo).await;
            let rows = c.simple_query("SELECT current_user").await.expect("query");
            let got = match &rows[1] {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                other => panic!("{other:?}"),
            };
            assert_eq!(got.as_deref(), Some(user));
        }
    }
    // Three logins each, one lookup each: the answer is cached.
    assert_eq!(lookups(pg), 2);

    // Same SQLSTATE and message for a wrong password and for a user that
    // does not exist, and the same first request (SCRAM's, as md5 mode
    // gives an unknown role on PostgreSQL).
    let wrong =
        connect_err(&pooler.conninfo(Transport::Tcp, SCRAM_USER.0, Some("nope"), TEST_DB)).await;
    let unknown =
        connect_err(&pooler.conninfo(Transport::Tcp, "no_such_role", Some("nope"), TEST_DB)).await;
    assert_eq!(
        (wrong.code.as_str(), unknown.code.as_str()),
        ("28P01", "28P01")
    );
    assert_eq!(
        unknown.message,
        "password authentication failed for user \"no_such_role\""
    );
    // The log says where the pooler looked, both places.
    let log = pooler.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("client login failed") && l.contains("no_such_role"))
        .unwrap_or_else(|| panic!("no failed-login line for no_such_role:\n{log}"));
    assert!(
        line.contains("no such user in auth.auth_file, and auth.query returned no row"),
        "{line}"
    );
    let codes = |user: &str| {
        let mut raw = RawConn::connect(&pooler.endpoint(Transport::Unix));
        let got = raw.login(&[("user", user), ("database", TEST_DB)], Some("nope"));
        assert!(matches!(got, Err(Failure::Error(_))), "{user}: {got:?}");
        raw.auth_codes.clone()
    };
    assert_eq!(codes("no_such_role_2"), codes(SCRAM_USER.0));
    // The miss is cached too: trying the same unknown name again costs no query.
    let before = lookups(pg);
    let _ = connect_err(&pooler.conninfo(Transport::Tcp, "no_such_role", Some("x"), TEST_DB)).await;
    assert_eq!(lookups(pg), before);

    // A zero TTL looks up every login (in this test: the log is shared).
    let zero = lookup_pooler(
        pg,
        "query = \"SELECT usename, passwd FROM pgharbor_lookup($1)\"\nquery_cache_ttl = \"0s\"\n",
    );
    let before = lookups(pg);
    for _ in 0..3 {
        let conninfo = zero.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
        connect_ok(&conninfo).await;
    }
    assert_eq!(lookups(pg) - before, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_lookup_refuses_the_login_in_time_and_the_pooler_goes_on() {
    let pg = PgCluster::shared();
    let pooler = lookup_pooler(
        pg,
        "query = \"SELECT usename, passwd FROM pg_shadow, pg_sleep(5) WHERE usename = $1\"\n\
         query_timeout = \"500ms\"\n",
    );
    let started = Instant::now();
    let e =
        connect_err(&pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB))
            .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.code, "08006", "{e:?}");
    assert!(e.message.contains("auth.query"), "{e:?}");
    // The pooler goes on serving users it needs no lookup for.
    let c =
        connect_ok(&pooler.conninfo(Transport::Tcp, TRUST_USER, Some("trust_pw"), TEST_DB)).await;
    c.simple_query("SELECT 1").await.expect("query");
}

#[test]
fn the_query_must_take_the_user_as_a_parameter() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::default()
        .auth_toml("user = \"postgres\"\nquery = \"SELECT usename, passwd FROM pg_shadow\"\n");
    let err = match Pooler::try_start(pg, opts) {
        Ok(_) => panic!("a query without $1 was accepted"),
        Err(e) => e,
    };
    assert!(err.contains("auth.query: must use $1"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn lookups_run_at_most_query_concurrency_at_once() {
    let pg = PgCluster::shared();
    // Slow for unknown users too (a join with pg_sleep would be skipped
    // when no row matches).
    pg.psql_ok(
        TEST_DB,
        "CREATE OR REPLACE FUNCTION pgharbor_slow_lookup(u text) \
         RETURNS TABLE (usename name, passwd text) LANGUAGE plpgsql SECURITY DEFINER AS $$ \
         BEGIN PERFORM pg_sleep(1); \
         RETURN QUERY SELECT s.usename, s.passwd FROM pg_catalog.pg_shadow s WHERE s.usename = u; \
         END $$",
    );
    let pooler = lookup_pooler(
        pg,
        "query = \"SELECT usename, passwd FROM pgharbor_slow_lookup($1)\"\n\
         query_concurrency = 1\nquery_timeout = \"20s\"\n",
    );
    let started = Instant::now();
    let logins = (0..3).map(|i| {
        let conninfo =
            pooler.conninfo(Transport::Unix, &format!("unknown_{i}"), Some("x"), TEST_DB);
        async move { connect_err(&conninfo).await }
    });
    for e in futures_util::future::join_all(logins).await {
        assert_eq!(e.code, "28P01", "{e:?}");
    }
    // One at a time: three one-second lookups cannot take less than three seconds.
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "{:?}",
        started.elapsed()
    );
}
