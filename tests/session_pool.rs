//! Session pooling with one backend: consecutive clients share it, and
//! nothing of one client's session (settings, temp tables, prepared
//! statements, locks, LISTENs, open or failed transactions, ParameterStatus,
//! cancel keys) reaches the next one.

mod common;

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use common::clients::psql_cmd;
use common::ext::query;
use common::wait::{wait_active, wait_for_async, wait_until, WAIT};
use common::wire::{send_cancel, Session};
use common::{
    connect_ok, PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER, TEST_DB,
};

fn one_backend(pg: &PgCluster) -> Pooler {
    Pooler::start(pg, PoolerOpts::default().pool_size(1))
}

fn other(t: Transport) -> Transport {
    match t {
        Transport::Unix => Transport::Tcp,
        Transport::Tcp => Transport::Unix,
    }
}

fn raw_login(ep: &common::Endpoint, extra: &[(&str, &str)]) -> (RawConn, Session) {
    let mut params = vec![("user", SCRAM_USER.0), ("database", TEST_DB)];
    params.extend_from_slice(extra);
    let mut raw = RawConn::connect(ep);
    let session = raw
        .login(&params, Some(SCRAM_USER.1))
        .unwrap_or_else(|e| panic!("login to {ep:?}: {e:?}"));
    (raw, session)
}

/// What `SHOW application_name` answers in the session.
fn assert_session_app_name(raw: &mut RawConn, expected: &str) {
    let shown = raw.query("SHOW application_name");
    assert_eq!(shown.scalar().as_deref(), Some(expected), "{shown:?}");
}

fn backend_pid(raw: &mut RawConn) -> i32 {
    let res = raw.query("SELECT pg_backend_pid()");
    assert!(res.error.is_none(), "{res:?}");
    res.scalar().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn consecutive_clients_share_the_backend_but_not_its_state() {
    let pg = PgCluster::shared();
    let pooler = one_backend(pg);
    let default_work_mem = pg.psql_ok(TEST_DB, "SHOW work_mem");
    assert_ne!(default_work_mem, "7MB");
    for t in Transport::ALL {
        let first =
            connect_ok(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)).await;
        let pid_a: i32 = first
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        first
            .batch_execute(
                "SET work_mem = '7MB'; \
                 CREATE TEMP TABLE leftover (i int); \
                 PREPARE leftover_stmt AS SELECT 1; \
                 LISTEN leftover_chan; \
                 SELECT pg_advisory_lock(4242)",
            )
            .await
            .unwrap();
        drop(first);

        let second =
            connect_ok(&pooler.conninfo(other(t), SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)).await;
        let row = second
            .query_one(
                "SELECT pg_backend_pid(), current_setting('work_mem'), \
                        to_regclass('pg_temp.leftover') IS NULL, \
                        (SELECT count(*) FROM pg_prepared_statements WHERE name = 'leftover_stmt'), \
                        (SELECT count(*) FROM pg_listening_channels()), \
                        (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory')",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), pid_a, "pool_size 1: the same backend");
        assert_eq!(row.get::<_, String>(1), default_work_mem, "SET leaked");
        assert!(row.get::<_, bool>(2), "temp table leaked");
        assert_eq!(row.get::<_, i64>(3), 0, "prepared statement leaked");
        assert_eq!(row.get::<_, i64>(4), 0, "LISTEN leaked");
        assert_eq!(row.get::<_, i64>(5), 0, "advisory lock leaked");
    }
}

/// Waits until the backend serving `marker`'s transaction is idle in it.
async fn wait_idle_in_transaction(admin: &tokio_postgres::Client, marker: &str) -> i32 {
    let pid = wait_for_async(WAIT, || async {
        let rows = admin
            .query(
                "SELECT pid FROM pg_stat_activity \
                 WHERE state = 'idle in transaction' AND query LIKE '%' || $1 || '%'",
                &[&marker],
            )
            .await
            .unwrap();
        rows.first().map(|r| r.get(0))
    })
    .await;
    pid.unwrap_or_else(|| panic!("{marker}: no idle-in-transaction backend"))
}

/// After an abandoned client: the next client gets the same backend, idle,
/// outside any transaction, and the marker row was never committed.
async fn assert_clean_next_client(
    pg: &PgCluster,
    pooler: &Pooler,
    t: Transport,
    pid: i32,
    marker: &str,
) {
    let (mut raw, session) = raw_login(&pooler.endpoint(t), &[]);
    assert_eq!(
        session.status, b'I',
        "{marker}: login ReadyForQuery not idle"
    );
    let res = raw.query(&format!(
        "SELECT pg_backend_pid(), now() = statement_timestamp(), \
                (SELECT count(*) FROM killed_tx WHERE marker = '{marker}')"
    ));
    assert!(res.error.is_none(), "{marker}: {res:?}");
    assert_eq!(
        res.status, b'I',
        "{marker}: next client is inside a transaction"
    );
    let row = &res.rows[0];
    assert_eq!(
        row[0].as_deref(),
        Some(pid.to_string().as_str()),
        "{marker}: backend not reused"
    );
    assert_eq!(
        row[1].as_deref(),
        Some("t"),
        "{marker}: transaction still open"
    );
    assert_eq!(row[2].as_deref(), Some("0"), "{marker}: row visible");
    assert_eq!(
        pg.psql_ok(
            TEST_DB,
            &format!("SELECT count(*) FROM killed_tx WHERE marker = '{marker}'")
        ),
        "0",
        "{marker}: row committed"
    );
    // Seen from PostgreSQL: the backend waits for the next command, no
    // transaction open.
    assert_eq!(
        pg.psql_ok(
            TEST_DB,
            &format!("SELECT state FROM pg_stat_activity WHERE pid = {pid}")
        ),
        "idle",
        "{marker}: backend state"
    );
    raw.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_killed_inside_a_transaction_leaves_nothing_behind() {
    let pg = PgCluster::shared();
    let pooler = one_backend(pg);
    let admin = pg.admin_client().await;
    admin
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS killed_tx (marker text); \
             GRANT ALL ON killed_tx TO PUBLIC",
        )
        .await
        .unwrap();

    for t in Transport::ALL {
        // 1. Raw socket dropped (no Terminate) in an open transaction.
        let marker = format!("raw_drop_{t:?}");
        let (mut raw, _) = raw_login(&pooler.endpoint(t), &[]);
        let pid = backend_pid(&mut raw);
        assert_eq!(raw.query("BEGIN").status, b'T');
        let res = raw.query(&format!("INSERT INTO killed_tx VALUES ('{marker}')"));
        assert!(res.error.is_none() && res.status == b'T', "{res:?}");
        drop(raw);
        assert_clean_next_client(pg, &pooler, other(t), pid, &marker).await;

        // 2. Raw socket dropped in a failed transaction.
        let marker = format!("raw_failed_{t:?}");
        let (mut raw, _) = raw_login(&pooler.endpoint(t), &[]);
        assert_eq!(raw.query("BEGIN").status, b'T');
        raw.query(&format!("INSERT INTO killed_tx VALUES ('{marker}')"));
        let res = raw.query("SELECT 1/0");
        assert_eq!(res.status, b'E');
        drop(raw);
        assert_clean_next_client(pg, &pooler, t, pid, &marker).await;

        // 3. psql killed with SIGKILL while idle in a transaction.
        let marker = format!("psql_kill_{t:?}");
        let mut child = psql_cmd(
            &pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB),
            Some(SCRAM_USER.1),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "BEGIN;\nINSERT INTO killed_tx VALUES ('{marker}');").unwrap();
        stdin.flush().unwrap();
        let busy_pid = wait_idle_in_transaction(&admin, &marker).await;
        assert_eq!(busy_pid, pid);
        child.kill().unwrap();
        child.wait().unwrap();
        drop(stdin);
        assert_clean_next_client(pg, &pooler, other(t), pid, &marker).await;
    }
}

#[test]
fn parameter_status_through_a_reused_backend_equals_a_direct_connection() {
    let pg = PgCluster::shared();
    let pooler = one_backend(pg);
    for t in Transport::ALL {
        // The first client changes everything it can that PostgreSQL reports.
        let (mut first, _) = raw_login(&pooler.endpoint(t), &[("application_name", "first_app")]);
        let pid = backend_pid(&mut first);
        let res = first.query(
            "SET TimeZone = 'Asia/Tokyo'; SET DateStyle = 'German'; \
             SET IntervalStyle = 'sql_standard'; SET application_name = 'changed'; \
             SET standard_conforming_strings = off; SET client_encoding = 'LATIN1'; \
             SET extra_float_digits = 1",
        );
        assert!(res.error.is_none(), "{res:?}");
        first.terminate();
        drop(first);

        for extra in [vec![("application_name", "second_app")], vec![]] {
            let (mut second, via_pooler) = raw_login(&pooler.endpoint(other(t)), &extra);
            assert_eq!(backend_pid(&mut second), pid, "backend not reused");
            let (mut direct, direct_session) = raw_login(&pg.endpoint(other(t)), &extra);
            assert_eq!(
                via_pooler.params, direct_session.params,
                "ParameterStatus through a reused backend (startup extra {extra:?})"
            );
            let show = "SELECT current_setting('TimeZone'), current_setting('DateStyle'), \
                        current_setting('IntervalStyle'), current_setting('application_name'), \
                        current_setting('standard_conforming_strings'), \
                        current_setting('client_encoding'), current_setting('extra_float_digits')";
            assert_eq!(second.query(show).rows, direct.query(show).rows);
            second.terminate();
            direct.terminate();
        }
    }
}

#[test]
fn backend_key_data_has_the_real_pid_and_a_secret_of_the_poolers_and_stale_keys_cancel_nothing() {
    let pg = PgCluster::shared();
    let pooler = one_backend(pg);
    for t in Transport::ALL {
        let (mut first, s1) = raw_login(&pooler.endpoint(t), &[]);
        let real_pid = backend_pid(&mut first);
        let key1 = s1.key.expect("BackendKeyData");
        assert_eq!(key1.0, real_pid, "session pooling shows the real pid");
        first.terminate();
        drop(first);

        let (mut second, s2) = raw_login(&pooler.endpoint(t), &[]);
        assert_eq!(backend_pid(&mut second), real_pid);
        let key2 = s2.key.expect("BackendKeyData");
        assert_eq!(key2.0, real_pid);
        assert_ne!(key2.1, key1.1, "each client gets a secret of its own");

        // The first client's key must not cancel the second client's query.
        let marker = format!("stale_key_{t:?}");
        second
            .send(&query(&format!(
                "SELECT pg_sleep(1), 'done' /* {marker} */"
            )))
            .unwrap();
        wait_active(pg, &marker);
        assert_eq!(
            send_cancel(&pooler.endpoint(t), key1.0, key1.1),
            Reply::Closed
        );
        let res = second.read_query_result(Duration::from_secs(10));
        assert!(
            res.error.is_none(),
            "a stale key (client 1's) cancelled client 2's query: {res:?}"
        );
        assert_eq!(res.rows[0][1].as_deref(), Some("done"));
        // Its own key does.
        let marker = format!("own_key_{t:?}");
        second
            .send(&query(&format!("SELECT pg_sleep(30) /* {marker} */")))
            .unwrap();
        wait_active(pg, &marker);
        send_cancel(&pooler.endpoint(t), key2.0, key2.1);
        let res = second.read_query_result(Duration::from_secs(10));
        assert_eq!(res.error.map(|e| e.code).as_deref(), Some("57014"));
        second.terminate();
    }
}

/// A backend opened for one application keeps that application_name across
/// resets (so its next client needs no SET); a client that names none still
/// sees '' there, in ParameterStatus and in the session, as on a direct login.
#[test]
fn application_name_follows_each_client_on_a_reused_backend() {
    let pg = PgCluster::shared();
    let pooler = one_backend(pg);
    for t in [Transport::Unix, Transport::Tcp] {
        let ep = pooler.endpoint(t);
        let (mut first, s1) = raw_login(&ep, &[("application_name", "first_app")]);
        assert_eq!(
            s1.params.get("application_name").map(String::as_str),
            Some("first_app")
        );
        let pid = backend_pid(&mut first);
        first.terminate();

        let (mut plain, s2) = raw_login(&ep, &[]);
        assert_eq!(
            s2.params.get("application_name").map(String::as_str),
            Some("")
        );
        assert_eq!(
            backend_pid(&mut plain),
            pid,
            "pool_size 1: the same backend"
        );
        assert_session_app_name(&mut plain, "");
        plain.terminate();

        let (mut again, s3) = raw_login(&ep, &[("application_name", "first_app")]);
        assert_eq!(
            s3.params.get("application_name").map(String::as_str),
            Some("first_app")
        );
        assert_session_app_name(&mut again, "first_app");
        again.terminate();
    }
}

/// A client that logs in and leaves without a query costs its backend
/// nothing: no SET for its application_name, no reset (PgBouncer never
/// links such a client at all); and the next clients still see exactly
/// what a direct login shows.
#[test]
fn a_client_that_sends_nothing_leaves_its_backend_untouched() {
    let pg = PgCluster::shared();
    let pooler = one_backend(pg);
    let ep = pooler.endpoint(Transport::Unix);
    let (mut first, _) = raw_login(&ep, &[("application_name", "busy_app")]);
    let pid = backend_pid(&mut first);
    first.terminate();
    let last_query = |pid: i32| {
        pg.psql_ok(
            TEST_DB,
            &format!(
                "SELECT query || ' at ' || query_start FROM pg_stat_activity WHERE pid = {pid}"
            ),
        )
    };
    // The reset after the first client is the backend's last statement.
    let mut after_reset = String::new();
    assert!(
        wait_until(WAIT, || {
            after_reset = last_query(pid);
            after_reset.starts_with("DISCARD ALL")
        }),
        "no reset after a client that ran a query: {after_reset}"
    );

    let (mut quiet, s) = raw_login(&ep, &[("application_name", "quiet_app")]);
    assert_eq!(
        s.params.get("application_name").map(String::as_str),
        Some("quiet_app")
    );
    quiet.terminate();
    let (mut plain, s) = raw_login(&ep, &[]);
    assert_eq!(
        s.params.get("application_name").map(String::as_str),
        Some("")
    );
    // Logged in, before its first query: nothing ran since the reset.
    assert_eq!(
        last_query(pid),
        after_reset,
        "the quiet client cost the server a statement"
    );
    assert_eq!(
        backend_pid(&mut plain),
        pid,
        "pool_size 1: the same backend"
    );
    assert_session_app_name(&mut plain, "");
    plain.terminate();

    let (mut named, _) = raw_login(&ep, &[("application_name", "quiet_app")]);
    assert_session_app_name(&mut named, "quiet_app");
    named.terminate();
}
