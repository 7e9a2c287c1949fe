//! Transaction pooling: the README's session-state table, line by line.
//! Each test has (at least) two clients share a small pool, so whatever one
//! of them leaves on a backend would be visible to the other: followed
//! state must come back to its owner on whichever backend it gets, pinning
//! state must keep its owner on one backend (and away from everyone else),
//! and a backend handed on after a client left must be clean.

mod common;

use common::scram_unix_conninfo;

use common::q_ok;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::ext::{self, read_batch, read_messages, Batch};
use common::wait::{wait_active, wait_clients_waiting};
use common::wire::{QueryResult, Session};
use common::{
    connect_ok, DbEntry, PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER,
    TEST_DB,
};
use tokio_postgres::Client;

/// Generous bound for anything that must happen "promptly" on a loaded machine.
const WAIT: Duration = Duration::from_secs(20);

fn txn_pooler(pool_size: usize) -> Pooler {
    Pooler::start(PgCluster::shared(), PoolerOpts::transaction(pool_size))
}

/// A raw client logged in through the pooler's socket as scram_user, with
/// `extra` startup parameters.
fn login(p: &Pooler, extra: &[(&str, &str)]) -> (RawConn, Session) {
    login_db(p, TEST_DB, extra)
}

fn login_db(p: &Pooler, db: &str, extra: &[(&str, &str)]) -> (RawConn, Session) {
    let mut c = RawConn::connect(&p.endpoint(Transport::Unix));
    let mut params = vec![("user", SCRAM_USER.0), ("database", db)];
    params.extend_from_slice(extra);
    let s = c
        .login(&params, Some(SCRAM_USER.1))
        .unwrap_or_else(|e| panic!("login through the pooler with {extra:?}: {e:?}"));
    (c, s)
}

/// A raw superuser connection straight to PostgreSQL (for looking at
/// backends from outside the pooler).
fn admin(pg: &PgCluster) -> RawConn {
    let mut c = RawConn::connect(&pg.endpoint(Transport::Unix));
    c.login(&[("user", "postgres"), ("database", TEST_DB)], None)
        .unwrap_or_else(|e| panic!("admin login: {e:?}"));
    c
}

/// Sends an extended-protocol batch and reads its replies.
fn batch(c: &mut RawConn, msgs: &[Vec<u8>]) -> Batch {
    c.send(&msgs.concat()).expect("send batch");
    let b = read_batch(c, WAIT);
    assert!(b.ended.is_none(), "batch ended early: {b:?}");
    b
}

/// The rows of a simple query, first column.
fn col(r: &QueryResult) -> Vec<String> {
    r.rows
        .iter()
        .map(|row| row[0].clone().unwrap_or_default())
        .collect()
}

async fn pid(c: &Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid")
        .get(0)
}

/// `SELECT pg_backend_pid(), (expr)::text` on a tokio-postgres client.
async fn pid_and(c: &Client, expr: &str) -> (i32, Option<String>) {
    let sql = format!("SELECT pg_backend_pid(), ({expr})::text");
    let r = tokio::time::timeout(WAIT, c.query_one(sql.as_str(), &[]))
        .await
        .unwrap_or_else(|_| panic!("{sql} did not complete within {WAIT:?}"))
        .unwrap_or_else(|e| panic!("{sql}: {}", common::clients::describe_error(&e)));
    (r.get(0), r.get(1))
}

/// Opens `n` new clients, each inside a transaction, so together they hold
/// `n` backends at once (the whole pool when `n` is the pool size), and
/// evaluates `expr` on each; returns (backend pid, value) per backend.
async fn on_every_backend(ci: &str, n: usize, expr: &str) -> Vec<(i32, Option<String>)> {
    let mut clients = Vec::new();
    let mut out = Vec::new();
    for _ in 0..n {
        let c = connect_ok(ci).await;
        tokio::time::timeout(WAIT, c.batch_execute("BEGIN"))
            .await
            .expect("BEGIN waited too long for a backend")
            .expect("BEGIN");
        out.push(pid_and(&c, expr).await);
        clients.push(c);
    }
    for c in &clients {
        c.batch_execute("COMMIT").await.expect("COMMIT");
    }
    let pids: std::collections::HashSet<i32> = out.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        pids.len(),
        n,
        "{n} open transactions hold {n} backends: {out:?}"
    );
    out
}

/// After the pinned client left: `count_expr` is 0 on both backends.
async fn no_backend_keeps(ci: &str, count_expr: &str, what: &str) {
    for (bp, v) in on_every_backend(ci, 2, count_expr).await {
        assert_eq!(
            v.as_deref(),
            Some("0"),
            "backend {bp} keeps {what} after A left"
        );
    }
}

// ---------------------------------------------------------------------------
// Followed parameters

/// The tracked parameters, as `current_setting` names them.
const FOLLOWED: &[&str] = &[
    "TimeZone",
    "DateStyle",
    "IntervalStyle",
    "application_name",
    "client_encoding",
    "standard_conforming_strings",
];

/// One client's view of the followed parameters.
struct Follower {
    name: &'static str,
    conn: RawConn,
    /// What the client must see: its login values, then whatever its own
    /// SETs made PostgreSQL report.
    want: BTreeMap<String, String>,
}

impl Follower {
    fn new(p: &Pooler, name: &'static str, startup: &[(&str, &str)]) -> Follower {
        let (conn, s) = login(p, startup);
        let want: BTreeMap<String, String> = FOLLOWED
            .iter()
            .map(|k| {
                let v = s
                    .params
                    .get(*k)
                    .unwrap_or_else(|| panic!("{name}: no ParameterStatus {k} at login"));
                (k.to_string(), v.clone())
            })
            .collect();
        Follower { name, conn, want }
    }

    /// Runs `sql` (the client's own statement): the ParameterStatus values
    /// it reports become what this client must see from now on.
    fn run(&mut self, sql: &str) -> QueryResult {
        let r = q_ok(&mut self.conn, sql);
        for (k, v) in &r.params {
            self.want.insert(k.clone(), v.clone());
        }
        r
    }

    /// Reads every followed parameter with SHOW (current_setting) and
    /// checks it and any ParameterStatus that arrived; returns the backend pid.
    fn check(&mut self, when: &str) -> String {
        let exprs: Vec<String> = FOLLOWED
            .iter()
            .map(|k| format!("current_setting('{k}')"))
            .collect();
        let sql = format!("SELECT pg_backend_pid(), {}", exprs.join(", "));
        let r = q_ok(&mut self.conn, &sql);
        for (k, v) in &r.params {
            if let Some(w) = self.want.get(k) {
                assert_eq!(
                    v, w,
                    "{}, {when}: got ParameterStatus {k}={v:?} but its own value is {w:?}",
                    self.name
                );
            }
        }
        let row = &r.rows[0];
        for (i, k) in FOLLOWED.iter().enumerate() {
            let got = row[i + 1].clone().unwrap_or_default();
            assert_eq!(
                &got, &self.want[*k],
                "{}, {when}: current_setting('{k}') on backend {:?}",
                self.name, row[0]
            );
        }
        row[0].clone().unwrap_or_default()
    }
}

#[test]
fn followed_parameters_come_back_to_each_client_on_a_shared_backend() {
    let p = txn_pooler(1);
    let mut a = Follower::new(
        &p,
        "A",
        &[
            ("application_name", "alpha"),
            ("TimeZone", "Asia/Tokyo"),
            ("DateStyle", "SQL, DMY"),
            ("IntervalStyle", "iso_8601"),
            ("client_encoding", "LATIN1"),
        ],
    );
    let mut b = Follower::new(
        &p,
        "B",
        &[
            ("application_name", "beta"),
            ("TimeZone", "America/New_York"),
            ("DateStyle", "German, DMY"),
            ("IntervalStyle", "sql_standard"),
        ],
    );
    assert_eq!(a.want["TimeZone"], "Asia/Tokyo");
    assert_eq!(b.want["application_name"], "beta");
    let pa = a.check("after login");
    let pb = b.check("after login");
    assert_eq!(pa, pb, "pool_size = 1: both clients share one backend");
    a.check("after B");

    // A's SET follows A, not B.
    let r = a.run("SET TimeZone = 'Europe/Paris'");
    assert!(
        r.params
            .contains(&("TimeZone".to_string(), "Europe/Paris".to_string())),
        "A's SET reports the new TimeZone: {:?}",
        r.params
    );
    b.check("after A set TimeZone");
    a.check("after A set TimeZone, then B");

    // Every followed parameter at once, on B.
    b.run(
        "SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; \
         SET standard_conforming_strings = off; SET application_name = 'beta2'; \
         SET client_encoding = 'SQL_ASCII'",
    );
    assert_eq!(b.want["application_name"], "beta2");
    assert_eq!(b.want["standard_conforming_strings"], "off");
    a.check("after B set everything");
    b.check("after B set everything, then A");
    a.check("again");

    // SET LOCAL of a followed parameter lasts until the end of A's transaction.
    a.run("BEGIN; SET LOCAL TimeZone = 'UTC'");
    assert_eq!(a.want["TimeZone"], "UTC");
    a.check("inside A's transaction");
    a.run("COMMIT");
    assert_eq!(
        a.want["TimeZone"], "Europe/Paris",
        "COMMIT reports the session value again"
    );
    b.check("after A's SET LOCAL transaction");
    a.check("after A's SET LOCAL transaction, then B");

    // A third client with the defaults sees none of it.
    let mut c = Follower::new(&p, "C", &[]);
    c.check("after A and B");
    a.check("after C");
    b.check("after C");
}

/// Collects mismatches so that a test reports every broken step at once.
#[derive(Default)]
struct Mismatches(Vec<String>);

impl Mismatches {
    fn check(&mut self, what: &str, got: &str, want: &str) {
        if got != want {
            self.0.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    fn assert_none(self, context: &str) {
        assert!(self.0.is_empty(), "{context}:\n  {}", self.0.join("\n  "));
    }
}

#[test]
fn reset_returns_the_pool_default_never_another_clients_value() {
    // Documented difference from a direct connection: in transaction
    // pooling, RESET of a followed parameter returns it to the pool's default
    // (the server's value for the pool's conninfo), not to the client's
    // startup value. What must never happen is that B gets A's values.
    let p = txn_pooler(1);
    let tz_default = PgCluster::shared().psql_ok(TEST_DB, "SHOW TimeZone");
    let reset_view = format!("|{tz_default}");
    let show = "SELECT current_setting('application_name'), current_setting('TimeZone')";
    let mut a = Follower::new(
        &p,
        "A",
        &[("application_name", "alpha"), ("TimeZone", "Asia/Tokyo")],
    );
    a.check("after login");
    let mut b = Follower::new(
        &p,
        "B",
        &[
            ("application_name", "beta"),
            ("TimeZone", "America/New_York"),
        ],
    );
    b.check("after login");
    let mut bad = Mismatches::default();
    let shown = |c: &mut RawConn| {
        let r = q_ok(c, show);
        format!(
            "{}|{}",
            r.rows[0][0].clone().unwrap_or_default(),
            r.rows[0][1].clone().unwrap_or_default()
        )
    };
    q_ok(
        &mut b.conn,
        "SET application_name = 'beta2'; SET TimeZone = 'Europe/Paris'",
    );
    bad.check(
        "B after its SETs",
        &shown(&mut b.conn),
        "beta2|Europe/Paris",
    );
    let r = q_ok(&mut b.conn, "RESET application_name; RESET TimeZone");
    bad.check(
        "ParameterStatus of B's RESETs",
        &format!("{:?}", r.params),
        &format!(
            "{:?}",
            [
                ("application_name".to_string(), String::new()),
                ("TimeZone".to_string(), tz_default.clone())
            ]
        ),
    );
    bad.check("B after RESET", &shown(&mut b.conn), &reset_view);
    bad.check("A after B's RESET", &shown(&mut a.conn), "alpha|Asia/Tokyo");
    q_ok(
        &mut b.conn,
        "SET application_name = 'beta3'; SET TimeZone = 'Europe/Paris'; RESET ALL",
    );
    bad.check("B after RESET ALL", &shown(&mut b.conn), &reset_view);
    bad.check(
        "A after B's RESET ALL",
        &shown(&mut a.conn),
        "alpha|Asia/Tokyo",
    );
    bad.assert_none("RESET through the pooler");
}

#[test]
fn track_parameters_follow_their_own_client_and_never_reach_another() {
    // work_mem is not reported by the server: a startup value follows its
    // client (set or reset per backend switch), and so does a later plain
    // SET of it, replayed as written on whichever backend the client gets.
    let p = Pooler::start(
        PgCluster::shared(),
        PoolerOpts::transaction(2).pool_toml("track_parameters = [\"work_mem\"]"),
    );
    let show = "SELECT pg_backend_pid(), current_setting('work_mem')";
    let get = |c: &mut RawConn| -> (String, String) {
        let r = q_ok(c, show);
        (
            r.rows[0][0].clone().unwrap_or_default(),
            r.rows[0][1].clone().unwrap_or_default(),
        )
    };
    let (mut a, _) = login(&p, &[("work_mem", "8MB")]);
    let (mut b, _) = login(&p, &[]);
    let mut bad = Mismatches::default();
    bad.check("A's startup work_mem", &get(&mut a).1, "8MB");
    bad.check("B (server default)", &get(&mut b).1, "4MB");
    bad.check("A again after B", &get(&mut a).1, "8MB");

    // B's SET follows B to every backend; A and a new client C never see it.
    q_ok(&mut b, "SET work_mem = '32MB'");
    bad.check("B's own SET", &get(&mut b).1, "32MB");
    bad.check("A after B's SET", &get(&mut a).1, "8MB");
    let (mut c, _) = login(&p, &[]);
    bad.check(
        "C (no work_mem anywhere) after B's SET",
        &get(&mut c).1,
        "4MB",
    );
    for _ in 0..3 {
        let (_, w2) = get(&mut b);
        bad.check("B again", &w2, "32MB");
        bad.check("A again", &get(&mut a).1, "8MB");
        bad.check("C again", &get(&mut c).1, "4MB");
    }
    drop(b);
    // After B leaves, nobody has its value.
    for _ in 0..4 {
        bad.check("C after B left", &get(&mut c).1, "4MB");
    }
    bad.assert_none("pool.track_parameters = [\"work_mem\"]");
}

// ---------------------------------------------------------------------------
// Session SETs: followed, or pinning (SET ROLE, SET SESSION AUTHORIZATION, set_config)

/// For each session SET: the client that ran it sees its effect on every
/// transaction (kept on one backend when the SET pins, on whichever backend
/// it gets when it is followed); the other client never sees the effect,
/// nor gets a pinned backend; after the client leaves, nothing of it shows
/// on any backend.
#[tokio::test(flavor = "multi_thread")]
async fn session_sets_pin_or_follow_and_never_leak() {
    let pg = PgCluster::shared();
    // Clients log in as scram_user; backends run as postgres, so that SET
    // SESSION AUTHORIZATION and SET ROLE are allowed.
    let su = DbEntry::new("harbor_su", common::Backend::Unix).user("postgres", None);
    let p = Pooler::start(pg, PoolerOpts::transaction(2).databases(vec![su]));
    let ci = p.conninfo(
        Transport::Unix,
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        "harbor_su",
    );
    let probe = "current_setting('work_mem') || '|' || current_setting('search_path') || '|' \
                 || current_user || '|' || session_user || '|' || current_setting('statement_timeout')";
    // (statement, what A sees, whether it pins A: a plain SET is followed
    // instead, on whichever backend A gets).
    let cases: &[(&str, &str, bool)] = &[
        ("SET work_mem = '12MB'", "12MB|", false),
        ("SET SESSION work_mem TO '11MB'", "11MB|", false),
        (
            "SET search_path = harbor_nowhere, public",
            "|harbor_nowhere, public|",
            false,
        ),
        (
            "SELECT set_config('work_mem', '13MB', false)",
            "13MB|",
            true,
        ),
        ("SET ROLE md5_user", "|md5_user|postgres|", true),
        (
            "SET SESSION AUTHORIZATION scram_user",
            "|scram_user|scram_user|",
            true,
        ),
        ("SET statement_timeout = '77s'", "|77s", false),
    ];
    let fresh = on_every_backend(&ci, 2, probe).await;
    let default = fresh[0].1.clone().unwrap();
    assert!(fresh.iter().all(|(_, v)| v.as_deref() == Some(&default)));
    let b = connect_ok(&ci).await;
    for &(stmt, mark, pins) in cases {
        let a = connect_ok(&ci).await;
        if stmt.starts_with("SELECT") {
            // Extended protocol (a named statement) for this one.
            a.query(stmt, &[]).await.expect(stmt);
        } else {
            a.batch_execute(stmt).await.expect(stmt);
        }
        let (pa, va) = pid_and(&a, probe).await;
        let va = va.unwrap();
        assert!(
            va.contains(mark) && va != default,
            "{stmt}: A sees {va:?} (default {default:?})"
        );
        for round in 0..4 {
            let (pb, vb) = pid_and(&b, probe).await;
            assert!(
                !pins || pb != pa,
                "{stmt}, round {round}: B was given A's pinned backend"
            );
            assert_eq!(
                vb.as_deref(),
                Some(default.as_str()),
                "{stmt}: B sees A's state"
            );
            let (pa2, va2) = pid_and(&a, probe).await;
            assert!(
                !pins || pa2 == pa,
                "{stmt}, round {round}: A left its pinned backend"
            );
            assert_eq!(
                va2,
                Some(va.clone()),
                "{stmt}, round {round}: A lost its state"
            );
            // A transaction of A's stays on the same backend too.
            let tx = a.simple_query("BEGIN; SELECT 1; COMMIT").await;
            tx.expect("A's transaction");
        }
        drop(a);
        let after = on_every_backend(&ci, 2, probe).await;
        for (bp, v) in &after {
            assert_eq!(
                v.as_deref(),
                Some(default.as_str()),
                "{stmt}: backend {bp} after the pinned client left (A had {pa})"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_client_keeps_the_only_backend_until_it_leaves() {
    let p = Pooler::start(
        PgCluster::shared(),
        PoolerOpts::transaction(1).admin_users(&[SCRAM_USER.0]),
    );
    let ci = scram_unix_conninfo(&p);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    let before = pid(&b).await;
    // The temporary table pins A; its SET shows what A's backend holds.
    a.batch_execute("CREATE TEMP TABLE pin_me (x int); SET work_mem = '12MB'")
        .await
        .unwrap();
    let pa = pid(&a).await;
    assert_eq!(pa, before, "one backend");
    let waiting = tokio::spawn(async move {
        let v: String = b
            .query_one("SELECT current_setting('work_mem')", &[])
            .await
            .expect("B's query")
            .get(0);
        (b, v)
    });
    // B waits for the pinned backend; A keeps using it meanwhile.
    tokio::task::block_in_place(|| wait_clients_waiting(&p, 1));
    for _ in 0..3 {
        assert_eq!(
            pid_and(&a, "current_setting('work_mem')").await,
            (pa, Some("12MB".into()))
        );
    }
    assert!(
        !waiting.is_finished(),
        "B was served on the only backend while A is pinned to it"
    );
    drop(a);
    let (b, v) = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("B is served once A has left")
        .unwrap();
    assert_eq!(v, "4MB", "B after the reset of A's backend");
    drop(b);
}

#[tokio::test(flavor = "multi_thread")]
async fn set_local_is_transaction_scoped_and_does_not_pin() {
    let p = txn_pooler(1);
    let ci = scram_unix_conninfo(&p);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    let probe = "current_setting('work_mem') || '|' || current_setting('search_path')";
    let (pb, default) = pid_and(&b, probe).await;
    for _ in 0..3 {
        a.batch_execute(
            "BEGIN; SET LOCAL work_mem = '21MB'; SET LOCAL search_path = harbor_nowhere",
        )
        .await
        .unwrap();
        let (pa, inside) = pid_and(&a, probe).await;
        assert_eq!(pa, pb);
        assert_eq!(inside.as_deref(), Some("21MB|harbor_nowhere"));
        a.batch_execute("COMMIT").await.unwrap();
        // A is not pinned: B gets the one backend (it would wait forever otherwise).
        assert_eq!(
            pid_and(&b, probe).await,
            (pb, default.clone()),
            "B after A's SET LOCAL"
        );
        assert_eq!(
            pid_and(&a, probe).await,
            (pb, default.clone()),
            "A after COMMIT"
        );
    }
    // SET LOCAL through the extended protocol inside a transaction.
    let mut a = a;
    let tx = a.transaction().await.unwrap();
    tx.execute("SET LOCAL work_mem = '22MB'", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(pid_and(&b, probe).await, (pb, default.clone()));
}

// ---------------------------------------------------------------------------
// Temp tables, advisory locks, LISTEN, WITH HOLD cursors, SQL PREPARE

#[tokio::test(flavor = "multi_thread")]
async fn temp_tables_pin_and_are_dropped_by_the_reset() {
    let p = txn_pooler(2);
    let ci = scram_unix_conninfo(&p);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    a.batch_execute("CREATE TEMP TABLE state_tmp(x int); INSERT INTO state_tmp VALUES (1), (2)")
        .await
        .unwrap();
    let pa = pid(&a).await;
    for n in 3..6 {
        a.execute("INSERT INTO state_tmp VALUES ($1)", &[&n])
            .await
            .unwrap();
        let (p2, count) = pid_and(&a, "(SELECT count(*) FROM state_tmp)").await;
        assert_eq!((p2, count), (pa, Some(n.to_string())));
        let err = b
            .query("SELECT * FROM state_tmp", &[])
            .await
            .expect_err("B must not see A's temp table");
        assert_eq!(
            common::clients::sqlstate(&err).as_deref(),
            Some("42P01"),
            "{err:?}"
        );
        assert_ne!(pid(&b).await, pa, "B never gets A's pinned backend");
    }
    drop(a);
    let pg = PgCluster::shared();
    let gone = common::wait::wait_until(WAIT, || {
        pg.psql_ok(
            TEST_DB,
            "SELECT count(*) FROM pg_class WHERE relname = 'state_tmp'",
        ) == "0"
    });
    assert!(gone, "A's temp table is dropped when it leaves");
    for (bp, v) in on_every_backend(&ci, 2, "to_regclass('state_tmp')").await {
        assert_eq!(v, None, "backend {bp}");
    }
}

fn advisory_held(pg: &PgCluster, key: i64) -> String {
    pg.psql_ok(
        TEST_DB,
        &format!(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
             AND classid = 0 AND objid = {key} AND granted"
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn session_advisory_locks_pin_and_are_released_when_the_client_leaves() {
    let pg = PgCluster::shared();
    let p = txn_pooler(2);
    let ci = scram_unix_conninfo(&p);
    let b = connect_ok(&ci).await;
    for (how, key) in [("Terminate", 91_001i64), ("killed", 91_002)] {
        let a = connect_ok(&ci).await;
        a.query_one("SELECT pg_advisory_lock($1)", &[&key])
            .await
            .unwrap();
        let pa = pid(&a).await;
        for _ in 0..3 {
            // Held by A's session, on A's backend only.
            let (p2, mine) = pid_and(
                &a,
                &format!(
                    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                     AND objid = {key} AND pid = pg_backend_pid())"
                ),
            )
            .await;
            assert_eq!((p2, mine.as_deref()), (pa, Some("1")), "{how}");
            let (pb, theirs) = pid_and(
                &b,
                &format!(
                    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                     AND objid = {key} AND pid = pg_backend_pid())"
                ),
            )
            .await;
            assert_ne!(pb, pa, "{how}: B got A's pinned backend");
            assert_eq!(theirs.as_deref(), Some("0"));
        }
        assert_eq!(advisory_held(pg, key), "1");
        if how == "killed" {
            // No Terminate: the socket just closes, as when the process dies.
            let (raw, _) = tokio::task::spawn_blocking({
                let p_ep = p.endpoint(Transport::Unix);
                move || {
                    let mut c = RawConn::connect(&p_ep);
                    let s = c
                        .login(
                            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                            Some(SCRAM_USER.1),
                        )
                        .expect("raw login");
                    let r = c.query(&format!("SELECT pg_advisory_lock({})", key + 100));
                    assert!(r.error.is_none(), "{r:?}");
                    (c, s)
                }
            })
            .await
            .unwrap();
            assert_eq!(advisory_held(pg, key + 100), "1");
            drop(raw);
            assert!(
                common::wait::wait_until(WAIT, || advisory_held(pg, key + 100) == "0"),
                "the lock of a client whose connection dropped is released"
            );
        }
        drop(a);
        assert!(
            common::wait::wait_until(WAIT, || advisory_held(pg, key) == "0"),
            "{how}: A's advisory lock is released when A leaves"
        );
        let got: bool = b
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&key])
            .await
            .unwrap()
            .get(0);
        assert!(got, "{how}: the next client can take the lock");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn transaction_advisory_locks_do_not_pin() {
    let p = txn_pooler(1);
    let ci = scram_unix_conninfo(&p);
    let mut a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    let pb = pid(&b).await;
    for _ in 0..3 {
        let tx = a.transaction().await.unwrap();
        tx.query_one("SELECT pg_advisory_xact_lock(91003)", &[])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        a.simple_query("BEGIN; SELECT pg_advisory_xact_lock(91004); COMMIT")
            .await
            .unwrap();
        // With one backend, B would wait forever if A were pinned.
        let (p2, free) = pid_and(&b, "pg_try_advisory_xact_lock(91003)").await;
        assert_eq!((p2, free.as_deref()), (pb, Some("true")));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_pins_and_notifications_reach_the_listener() {
    use tokio_postgres::AsyncMessage;
    let p = txn_pooler(2);
    let ci = scram_unix_conninfo(&p);
    let (a, mut rx) = common::connect_with_messages(&ci).await.unwrap();
    let b = connect_ok(&ci).await;
    a.batch_execute("LISTEN harbor_chan").await.unwrap();
    let pa = pid(&a).await;
    for i in 0..3 {
        let payload = format!("hello {i}");
        let pb = pid(&b).await;
        assert_ne!(pb, pa, "B got A's pinned backend");
        b.execute("SELECT pg_notify('harbor_chan', $1)", &[&payload])
            .await
            .unwrap();
        // A is idle: the notification must still reach it.
        let got = tokio::time::timeout(WAIT, async {
            loop {
                match rx.recv().await {
                    Some(AsyncMessage::Notification(n)) => return n,
                    Some(_) => continue,
                    None => panic!("A's connection ended"),
                }
            }
        })
        .await
        .expect("A receives the notification while idle");
        assert_eq!(got.channel(), "harbor_chan");
        assert_eq!(got.payload(), payload);
        assert_eq!(got.process_id(), pb, "sent by B's backend");
        assert_eq!(pid(&a).await, pa);
    }
    let (_, listening) = pid_and(&b, "(SELECT count(*) FROM pg_listening_channels())").await;
    assert_eq!(listening.as_deref(), Some("0"), "B listens to nothing");
    drop(a);
    drop(rx);
    no_backend_keeps(
        &ci,
        "(SELECT count(*) FROM pg_listening_channels())",
        "a LISTEN",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cursors_with_hold_pin_and_are_closed_by_the_reset() {
    let p = txn_pooler(2);
    let ci = scram_unix_conninfo(&p);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    a.batch_execute("DECLARE held CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 9) g")
        .await
        .unwrap();
    let pa = pid(&a).await;
    for chunk in 0..3i32 {
        let rows = a.simple_query("FETCH 3 FROM held").await.unwrap();
        let vals: Vec<i32> = rows
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|v| v.parse().unwrap()),
                _ => None,
            })
            .collect();
        assert_eq!(vals, vec![chunk * 3 + 1, chunk * 3 + 2, chunk * 3 + 3]);
        let err = b
            .simple_query("FETCH 1 FROM held")
            .await
            .expect_err("B has no such cursor");
        assert_eq!(
            common::clients::sqlstate(&err).as_deref(),
            Some("34000"),
            "{err:?}"
        );
        assert_ne!(pid(&b).await, pa);
        assert_eq!(pid(&a).await, pa);
    }
    drop(a);
    no_backend_keeps(
        &ci,
        "(SELECT count(*) FROM pg_cursors WHERE name = 'held')",
        "a cursor",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_prepare_pins_and_is_deallocated_by_the_reset() {
    let p = txn_pooler(2);
    let ci = scram_unix_conninfo(&p);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    a.batch_execute("PREPARE doubled(int) AS SELECT $1 * 2")
        .await
        .unwrap();
    let pa = pid(&a).await;
    for i in 0..3i32 {
        let rows = a
            .simple_query(&format!("EXECUTE doubled({i})"))
            .await
            .unwrap();
        let v = rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        });
        assert_eq!(v, Some((i * 2).to_string()));
        let err = b
            .simple_query("EXECUTE doubled(1)")
            .await
            .expect_err("B has no such statement");
        assert_eq!(
            common::clients::sqlstate(&err).as_deref(),
            Some("26000"),
            "{err:?}"
        );
        assert_ne!(pid(&b).await, pa);
        assert_eq!(pid(&a).await, pa);
    }
    drop(a);
    no_backend_keeps(
        &ci,
        "(SELECT count(*) FROM pg_prepared_statements WHERE name = 'doubled')",
        "A's PREPARE",
    )
    .await;
}

// ---------------------------------------------------------------------------
// Protocol-level named prepared statements

fn pooler_statements(c: &mut RawConn, sql_text: &str) -> Vec<String> {
    let r = q_ok(
        c,
        &format!(
            "SELECT name FROM pg_prepared_statements WHERE statement = '{}' ORDER BY name",
            sql_text.replace('\'', "''")
        ),
    );
    col(&r)
}

#[test]
fn named_statements_follow_clients_and_are_prepared_once_per_backend() {
    let p = txn_pooler(1);
    let (mut a, _) = login(&p, &[]);
    let (mut b, _) = login(&p, &[]);
    let text = "SELECT $1::int + 100";
    assert_eq!(
        batch(&mut a, &[ext::parse("a1", text), ext::sync()]).flow(),
        "1Z"
    );
    assert_eq!(
        batch(&mut b, &[ext::parse("b1", text), ext::sync()]).flow(),
        "1Z"
    );
    let rb = batch(
        &mut b,
        &[ext::bind_execute("b1", &[Some("1")]), ext::sync()],
    );
    assert_eq!(
        (rb.flow().as_str(), rb.scalar()),
        ("2DCZ", Some("101".into()))
    );
    let ra = batch(
        &mut a,
        &[ext::bind_execute("a1", &[Some("2")]), ext::sync()],
    );
    assert_eq!(
        (ra.flow().as_str(), ra.scalar()),
        ("2DCZ", Some("102".into()))
    );
    let names = pooler_statements(&mut a, text);
    assert_eq!(
        names.len(),
        1,
        "one statement on the one backend for both clients: {names:?}"
    );
    assert!(names[0].starts_with("PGHARBOR_"), "{names:?}");
    assert_eq!(
        q_ok(
            &mut a,
            "SELECT count(*) FROM pg_prepared_statements WHERE name IN ('a1', 'b1')"
        )
        .scalar()
        .as_deref(),
        Some("0"),
        "client names never reach the server"
    );

    // Describe of a client statement.
    let d = batch(&mut a, &[ext::describe(b'S', "a1"), ext::sync()]);
    assert_eq!(d.flow(), "tTZ");

    // Close by A does not break B's statement of the same text.
    assert_eq!(
        batch(&mut a, &[ext::close(b'S', "a1"), ext::sync()]).flow(),
        "3Z"
    );
    let rb = batch(
        &mut b,
        &[ext::bind_execute("b1", &[Some("3")]), ext::sync()],
    );
    assert_eq!(rb.scalar().as_deref(), Some("103"), "{rb:?}");
    let gone = batch(
        &mut a,
        &[ext::bind_execute("a1", &[Some("3")]), ext::sync()],
    );
    assert_eq!(
        (gone.flow().as_str(), gone.codes()),
        ("EZ", vec!["26000".to_string()])
    );
    // The name is free again for A.
    let again = batch(
        &mut a,
        &[
            ext::parse("a1", "SELECT $1::int * 3"),
            ext::bind_execute("a1", &[Some("3")]),
            ext::sync(),
        ],
    );
    assert_eq!(
        (again.flow().as_str(), again.scalar()),
        ("12DCZ", Some("9".into()))
    );

    // DEALLOCATE ALL by A drops A's statements only.
    assert_eq!(
        batch(&mut a, &[ext::parse("a2", "SELECT 'a2'"), ext::sync()]).flow(),
        "1Z"
    );
    q_ok(&mut a, "DEALLOCATE ALL");
    let rb = batch(
        &mut b,
        &[ext::bind_execute("b1", &[Some("4")]), ext::sync()],
    );
    assert_eq!(
        rb.scalar().as_deref(),
        Some("104"),
        "B after A's DEALLOCATE ALL: {rb:?}"
    );
    let gone = batch(&mut a, &[ext::bind_execute("a2", &[]), ext::sync()]);
    assert_eq!(
        gone.codes(),
        vec!["26000".to_string()],
        "A's own statements are gone"
    );

    // DISCARD ALL by B drops B's statements only.
    assert_eq!(
        batch(&mut a, &[ext::parse("a3", "SELECT 'a3'"), ext::sync()]).flow(),
        "1Z"
    );
    q_ok(&mut b, "DISCARD ALL");
    let ra = batch(&mut a, &[ext::bind_execute("a3", &[]), ext::sync()]);
    assert_eq!(
        ra.scalar().as_deref(),
        Some("a3"),
        "A after B's DISCARD ALL: {ra:?}"
    );
    let gone = batch(
        &mut b,
        &[ext::bind_execute("b1", &[Some("5")]), ext::sync()],
    );
    assert_eq!(
        gone.codes(),
        vec!["26000".to_string()],
        "B's own statements are gone"
    );
    // B can define b1 again after its DISCARD ALL.
    let again = batch(
        &mut b,
        &[
            ext::parse("b1", text),
            ext::bind_execute("b1", &[Some("6")]),
            ext::sync(),
        ],
    );
    assert_eq!(
        (again.flow().as_str(), again.scalar()),
        ("12DCZ", Some("106".into()))
    );
    assert_eq!(pooler_statements(&mut b, text).len(), 1);
}

/// A script of extended-protocol batches; each step's replies through the
/// pooler must be those PostgreSQL itself gives (message flow, SQLSTATEs,
/// values, transaction status). `between` runs before each step that starts
/// outside a transaction (another client may use the backend then).
fn run_script(
    c: &mut RawConn,
    steps: &[(&str, Vec<Vec<u8>>)],
    between: &mut dyn FnMut(),
) -> Vec<String> {
    let mut idle = true;
    steps
        .iter()
        .map(|(_, msgs)| {
            if idle {
                between();
            }
            if c.send(&msgs.concat()).is_err() {
                return "send failed: the connection is closed".to_string();
            }
            let b = read_batch(c, WAIT);
            idle = b.status == b'I';
            format!(
                "{} {:?} {:?} {} {}",
                b.flow(),
                b.codes(),
                b.rows,
                b.status as char,
                b.ended.as_ref().map(Reply::summary).unwrap_or_default()
            )
        })
        .collect()
}

#[test]
fn errors_inside_extended_batches_leave_statements_as_postgresql_does() {
    let pg = PgCluster::shared();
    let p = txn_pooler(1);
    type Steps = Vec<(&'static str, Vec<Vec<u8>>)>;
    let scripts: Vec<(&str, Steps)> = vec![
        (
            "a Parse skipped after an error",
            vec![
                (
                    "error at Bind: later messages up to Sync are skipped",
                    vec![
                        ext::parse("s1", "SELECT $1::int AS v"),
                        ext::bind_execute("s1", &[Some("x")]),
                        ext::parse("s2", "SELECT 2"),
                        ext::bind_execute("s2", &[]),
                        ext::sync(),
                    ],
                ),
                (
                    "s1 was prepared before the error",
                    vec![ext::bind_execute("s1", &[Some("5")]), ext::sync()],
                ),
                (
                    "s2's Parse was skipped: it does not exist",
                    vec![ext::bind_execute("s2", &[]), ext::sync()],
                ),
                (
                    "so s2 can be parsed now",
                    vec![
                        ext::parse("s2", "SELECT 2"),
                        ext::bind_execute("s2", &[]),
                        ext::sync(),
                    ],
                ),
            ],
        ),
        (
            "a Parse that fails",
            vec![
                ("the error", vec![ext::parse("bad", "SELEC 1"), ext::sync()]),
                (
                    "leaves its name free",
                    vec![
                        ext::parse("bad", "SELECT 'fixed'"),
                        ext::bind_execute("bad", &[]),
                        ext::sync(),
                    ],
                ),
            ],
        ),
        (
            "a Parse of a name in use",
            vec![
                (
                    "define s1",
                    vec![ext::parse("s1", "SELECT $1::int"), ext::sync()],
                ),
                (
                    "again: 42P05",
                    vec![ext::parse("s1", "SELECT 1"), ext::sync()],
                ),
                (
                    "the session goes on with the old statement",
                    vec![ext::bind_execute("s1", &[Some("6")]), ext::sync()],
                ),
            ],
        ),
        (
            "an error inside an explicit transaction",
            vec![
                ("BEGIN", vec![ext::query("BEGIN")]),
                (
                    "the error",
                    vec![
                        ext::parse("t1", "SELECT 1 / $1::int"),
                        ext::bind_execute("t1", &[Some("0")]),
                        ext::sync(),
                    ],
                ),
                (
                    "the failed transaction refuses statements",
                    vec![ext::bind_execute("t1", &[Some("1")]), ext::sync()],
                ),
                ("ROLLBACK", vec![ext::query("ROLLBACK")]),
                (
                    "t1 survives the rollback (statements are not transactional)",
                    vec![ext::bind_execute("t1", &[Some("1")]), ext::sync()],
                ),
            ],
        ),
        (
            "Describe of a statement that failed to parse",
            vec![
                (
                    "in the same batch",
                    vec![
                        ext::parse("bad2", "SELECT nope"),
                        ext::describe(b'S', "bad2"),
                        ext::sync(),
                    ],
                ),
                (
                    "after the Sync",
                    vec![ext::describe(b'S', "bad2"), ext::sync()],
                ),
            ],
        ),
    ];
    let mut diffs = Vec::new();
    for (script, steps) in &scripts {
        let mut direct = admin(pg);
        let want = run_script(&mut direct, steps, &mut || {});
        let (mut a, _) = login(&p, &[]);
        let (mut b, _) = login(&p, &[]);
        // Another client uses the backend between A's batches, with a
        // statement of the same text as one of A's, so A's statements are
        // shared with it on the backend.
        let mut n = 0;
        let mut other = || {
            n += 1;
            let name = format!("o{n}");
            let r = batch(
                &mut b,
                &[
                    ext::parse(&name, "SELECT 2"),
                    ext::bind_execute(&name, &[]),
                    ext::sync(),
                ],
            );
            assert_eq!(r.scalar().as_deref(), Some("2"), "{r:?}");
        };
        let got = run_script(&mut a, steps, &mut other);
        for (i, ((what, _), (w, g))) in steps.iter().zip(want.iter().zip(&got)).enumerate() {
            if w != g {
                diffs.push(format!(
                    "{script}, step {i} ({what}):\n  PostgreSQL: {w}\n  pooler:     {g}"
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "the pooler answers differently from PostgreSQL:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn parse_answered_before_sync_when_the_client_flushes() {
    let p = txn_pooler(1);
    let (mut a, _) = login(&p, &[]);
    let (mut b, _) = login(&p, &[]);
    let until = |c: &mut RawConn, tag: u8| {
        let r = read_messages(c, WAIT, |t| t == tag);
        assert!(r.ended.is_none(), "waiting for {:?}: {r:?}", tag as char);
        r
    };
    // A new statement: its Parse goes to the server; the Flush makes it answer.
    a.send(&[ext::parse("f1", "SELECT 41 + 1"), ext::flush()].concat())
        .unwrap();
    assert_eq!(until(&mut a, b'1').flow(), "1");
    // A is mid-batch: B must wait for the backend.
    b.send(&ext::query("SELECT 'b'")).unwrap();
    assert_eq!(
        b.read_msg(Duration::from_millis(300)),
        Reply::Timeout,
        "B was answered on a backend in the middle of A's batch"
    );
    a.send(&[ext::bind_execute("f1", &[]), ext::flush()].concat())
        .unwrap();
    let r = until(&mut a, b'C');
    assert_eq!((r.flow().as_str(), r.scalar()), ("2DC", Some("42".into())));
    a.send(&ext::sync()).unwrap();
    assert_eq!(until(&mut a, b'Z').flow(), "Z");
    let rb = b.read_query_result(WAIT);
    assert_eq!(rb.scalar().as_deref(), Some("b"));

    // The same text from B is already prepared on the backend: the pooler
    // answers the Parse itself, and must do so on Flush too.
    b.send(
        &[
            ext::parse("g1", "SELECT 41 + 1"),
            ext::describe(b'S', "g1"),
            ext::flush(),
        ]
        .concat(),
    )
    .unwrap();
    assert_eq!(until(&mut b, b'T').flow(), "1tT");
    b.send(&[ext::bind_execute("g1", &[]), ext::sync()].concat())
        .unwrap();
    let r = until(&mut b, b'Z');
    assert_eq!((r.flow().as_str(), r.scalar()), ("2DCZ", Some("42".into())));

    // After a DISCARD ALL the backend has nothing prepared: A's Bind makes
    // the pooler prepare f1 first, and that too must be flushed.
    q_ok(&mut b, "DISCARD ALL");
    a.send(&[ext::bind_execute("f1", &[]), ext::flush()].concat())
        .unwrap();
    let r = until(&mut a, b'C');
    assert_eq!((r.flow().as_str(), r.scalar()), ("2DC", Some("42".into())));
    a.send(&ext::sync()).unwrap();
    assert_eq!(until(&mut a, b'Z').status, b'I');
}

#[tokio::test(flavor = "multi_thread")]
async fn statements_survive_eviction_from_a_small_per_backend_cache() {
    let p = Pooler::start(
        PgCluster::shared(),
        PoolerOpts::transaction(1).pool_toml("max_prepared_statements = 2"),
    );
    let ci = scram_unix_conninfo(&p);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    let mut sa = Vec::new();
    let mut sb = Vec::new();
    for k in 0..5i32 {
        sa.push(a.prepare(&format!("SELECT $1::int + {k}")).await.unwrap());
        sb.push(
            b.prepare(&format!("SELECT $1::int * {}", k + 2))
                .await
                .unwrap(),
        );
    }
    for round in 0..3i32 {
        for k in 0..5i32 {
            let va: i32 = a
                .query_one(&sa[k as usize], &[&round])
                .await
                .unwrap()
                .get(0);
            let vb: i32 = b
                .query_one(&sb[k as usize], &[&round])
                .await
                .unwrap()
                .get(0);
            assert_eq!(
                (va, vb),
                (round + k, round * (k + 2)),
                "round {round}, statement {k}"
            );
        }
    }
    let (_, n) = pid_and(
        &a,
        "(SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'PGHARBOR%')",
    )
    .await;
    let n: usize = n.unwrap().parse().unwrap();
    assert!(
        n <= 3,
        "max_prepared_statements = 2 keeps the backend's cache small: {n}"
    );
}

// ---------------------------------------------------------------------------
// Clients that leave inside a transaction

#[tokio::test(flavor = "multi_thread")]
async fn a_client_leaving_inside_a_transaction_leaves_nothing_behind() {
    let pg = PgCluster::shared();
    pg.psql_ok(
        TEST_DB,
        "DROP TABLE IF EXISTS state_left; CREATE TABLE state_left(x int); \
         GRANT ALL ON state_left TO scram_user",
    );
    let p = txn_pooler(1);
    let ci = scram_unix_conninfo(&p);
    let ep = p.endpoint(Transport::Unix);
    let b = connect_ok(&ci).await;
    let check_b = |what: &'static str| {
        let b = &b;
        async move {
            // B's very first statement works, sees none of A's rows and is
            // not inside A's transaction; the table is not locked.
            let r = tokio::time::timeout(
                WAIT,
                b.simple_query(
                    "BEGIN; LOCK TABLE state_left IN ACCESS EXCLUSIVE MODE NOWAIT; \
                     SELECT count(*) FROM state_left; COMMIT",
                ),
            )
            .await
            .unwrap_or_else(|_| panic!("{what}: B not served within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("{what}: {}", common::clients::describe_error(&e)));
            let count = r.iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            });
            assert_eq!(
                count.as_deref(),
                Some("0"),
                "{what}: A's rows were committed"
            );
        }
    };
    check_b("before").await;

    // Terminate inside a transaction.
    let a = connect_ok(&ci).await;
    a.batch_execute(
        "BEGIN; INSERT INTO state_left VALUES (1); LOCK TABLE state_left IN ACCESS EXCLUSIVE MODE",
    )
    .await
    .unwrap();
    drop(a);
    check_b("after A sent Terminate inside a transaction").await;

    // Connection dropped (the client was killed) inside a transaction.
    let ep2 = ep.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = RawConn::connect(&ep2);
        c.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap();
        let r = c.query(
            "BEGIN; INSERT INTO state_left VALUES (2); \
             LOCK TABLE state_left IN ACCESS EXCLUSIVE MODE",
        );
        assert_eq!((r.error.as_ref(), r.status), (None, b'T'));
        drop(c);
    })
    .await
    .unwrap();
    check_b("after A's connection dropped inside a transaction").await;

    // Killed in the middle of a query inside a transaction: the query is
    // carried out (never cancelled), then the backend is drained, rolled
    // back and reset before B gets it.
    let ep3 = ep.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = RawConn::connect(&ep3);
        c.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap();
        c.send(&ext::query(
            "BEGIN; INSERT INTO state_left VALUES (3); \
             LOCK TABLE state_left IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(2)",
        ))
        .unwrap();
        // Vanish once the query runs.
        wait_active(PgCluster::shared(), "INSERT INTO state_left VALUES (3)");
        drop(c);
    })
    .await
    .unwrap();
    check_b("after A's connection dropped during a query in a transaction").await;
    // Also killed while holding a session advisory lock inside a transaction.
    let ep4 = ep.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = RawConn::connect(&ep4);
        c.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap();
        let r = c.query("BEGIN; SELECT pg_advisory_lock(91077); INSERT INTO state_left VALUES (4)");
        assert_eq!((r.error.as_ref(), r.status), (None, b'T'));
        drop(c);
    })
    .await
    .unwrap();
    check_b("after A's connection dropped holding an advisory lock").await;
    assert!(
        common::wait::wait_until(WAIT, || advisory_held(pg, 91077) == "0"),
        "the advisory lock of the killed client is released"
    );
    assert_eq!(pg.psql_ok(TEST_DB, "SELECT count(*) FROM state_left"), "0");
}

// ---------------------------------------------------------------------------
// Statement mode

#[test]
fn statement_mode_refuses_transaction_blocks_and_runs_single_statements() {
    let pg = PgCluster::shared();
    pg.psql_ok(
        TEST_DB,
        "DROP TABLE IF EXISTS state_stmt; CREATE TABLE state_stmt(x int); \
         GRANT ALL ON state_stmt TO scram_user",
    );
    let p = Pooler::start(pg, PoolerOpts::transaction(1).mode("statement"));
    let refused = |c: &mut RawConn, what: &str| {
        let err = c.fatal_then_close(WAIT, "0A000", what);
        assert_eq!(
            err.message, "transaction blocks are not allowed in statement pooling mode",
            "{what}"
        );
    };
    let (mut a, _) = login(&p, &[]);
    let r = q_ok(&mut a, "SELECT 1");
    assert_eq!((r.scalar().as_deref(), r.status), (Some("1"), b'I'));
    q_ok(&mut a, "INSERT INTO state_stmt VALUES (1)");
    a.send(&ext::query("BEGIN")).unwrap();
    refused(&mut a, "simple-protocol BEGIN");

    let (mut a, _) = login(&p, &[]);
    a.send(&ext::query("BEGIN; INSERT INTO state_stmt VALUES (2)"))
        .unwrap();
    refused(&mut a, "BEGIN and a statement in one Query");

    let (mut a, _) = login(&p, &[]);
    a.send(
        &[
            ext::parse("", "BEGIN"),
            ext::bind_execute("", &[]),
            ext::sync(),
        ]
        .concat(),
    )
    .unwrap();
    refused(&mut a, "extended-protocol BEGIN");

    // The one backend is clean and free for the next client.
    let (mut b, _) = login(&p, &[]);
    let r = q_ok(&mut b, "SELECT count(*) FROM state_stmt");
    assert_eq!((r.scalar().as_deref(), r.status), (Some("1"), b'I'));
    let r = batch(
        &mut b,
        &[
            ext::parse("s", "SELECT $1::int"),
            ext::bind_execute("s", &[Some("7")]),
            ext::sync(),
        ],
    );
    assert_eq!(
        (r.flow().as_str(), r.scalar(), r.status),
        ("12DCZ", Some("7".into()), b'I')
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn statement_mode_refuses_a_tokio_postgres_transaction() {
    let p = Pooler::start(
        PgCluster::shared(),
        PoolerOpts::transaction(1).mode("statement"),
    );
    let ci = scram_unix_conninfo(&p);
    let mut a = connect_ok(&ci).await;
    let v: i32 = a.query_one("SELECT 5", &[]).await.unwrap().get(0);
    assert_eq!(v, 5);
    let started = Instant::now();
    let err = match a.transaction().await {
        Ok(tx) => tx
            .query_one("SELECT 1", &[])
            .await
            .expect_err("a transaction in statement mode"),
        Err(e) => e,
    };
    // The pooler forwards BEGIN's ReadyForQuery ('T') before its FATAL, so
    // tokio-postgres may find the connection closed before it reads the
    // FATAL; the raw test above checks the exact error.
    match common::db_err(&err) {
        Some(db) => assert_eq!(
            (db.severity.as_str(), db.code.as_str()),
            ("FATAL", "0A000"),
            "{db:?}"
        ),
        None => assert!(err.is_closed(), "neither the FATAL nor a close: {err:?}"),
    }
    assert!(started.elapsed() < WAIT);
    let b = connect_ok(&ci).await;
    let v: i32 = b.query_one("SELECT 6", &[]).await.unwrap().get(0);
    assert_eq!(v, 6);
}
