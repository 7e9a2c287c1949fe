//! Pool sizing and timeouts against a real PostgreSQL: min_pool_size,
//! the reserve pool, max_db_connections and max_user_connections,
//! server_idle_timeout, server_lifetime, server_check_query,
//! query_wait_timeout, and first-come-first-served waiting.
//!
//! Each test uses roles of its own (the cluster is shared by the tests of
//! this binary, which run at once), so backends are counted in
//! pg_stat_activity by user name. `[pool]` keys the harness does not write
//! are added by editing the config and reloading before the first client:
//! pool settings reach every pool created after a reload.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    backend_pid, connect, connect_err, connect_ok, Backend, DbEntry, PgCluster, Pooler, PoolerOpts,
    Transport, SCRAM_USER, TEST_DB,
};
use tokio_postgres::{Client, SimpleQueryMessage};

/// Every role of this file logs in to pgharbor with this password
/// (PostgreSQL trusts the socket, so backends need none).
const PASSWORD: &str = "pool_limits_pw";

/// Creates `role` (LOGIN) unless it exists.
fn create_role(pg: &PgCluster, role: &str) {
    pg.psql_ok(
        TEST_DB,
        &format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ),
    );
}

/// Options with `roles` in the userlist (and created in PostgreSQL), no
/// harness database entries, and `tables` (whole TOML tables) appended.
fn opts(pg: &PgCluster, roles: &[&str], tables: &str) -> PoolerOpts {
    let mut users: Vec<(&str, &str)> = roles.iter().map(|r| (*r, PASSWORD)).collect();
    users.push((SCRAM_USER.0, SCRAM_USER.1));
    for role in roles {
        create_role(pg, role);
    }
    let mut o = PoolerOpts::default()
        .userlist(&users)
        .databases(Vec::new())
        .admin_users(roles);
    o.tcp = false;
    o.extra_toml = tables.to_string();
    o
}

/// A `[databases.NAME]` table for `harbor_test` over the socket, with
/// `user=` when `forced_user` is given, plus `keys`.
fn db_table(pg: &PgCluster, name: &str, forced_user: Option<&str>, keys: &str) -> String {
    let mut entry = DbEntry::new(name, Backend::Unix);
    if let Some(u) = forced_user {
        entry = entry.user(u, None);
    }
    let conninfo = Pooler::backend_conninfo(pg, &entry);
    format!("[databases.{name}]\nconninfo = {conninfo:?}\n{keys}\n\n")
}

/// Adds `lines` to the `[pool]` table of the running pooler's config and
/// reloads it (SIGHUP), waiting for the reload to be logged.
fn reload_pool_keys(pooler: &Pooler, lines: &str) {
    reload_edited(pooler, |text| {
        assert!(text.contains("[pool]\n"), "{text}");
        text.replacen("[pool]\n", &format!("[pool]\n{lines}\n"), 1)
    });
}

/// Rewrites the running pooler's config with `edit` (which must change
/// it) and reloads it (SIGHUP), waiting for the first reload to be logged.
fn reload_edited(pooler: &Pooler, edit: impl FnOnce(&str) -> String) {
    let path = pooler.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let changed = edit(&text);
    assert_ne!(text, changed, "the edit changed nothing");
    std::fs::write(path, changed).expect("write config");
    pooler.sighup_until("configuration reloaded", 1);
}

fn conninfo(pooler: &Pooler, role: &str, db: &str) -> String {
    pooler.conninfo(Transport::Unix, role, Some(PASSWORD), db)
}

/// Process ids of the client backends logged in as any of `roles`.
async fn backends(admin: &Client, roles: &[&str]) -> Vec<i32> {
    let roles: Vec<String> = roles.iter().map(|r| r.to_string()).collect();
    admin
        .query(
            "SELECT pid FROM pg_stat_activity \
             WHERE usename = ANY($1) AND backend_type = 'client backend' ORDER BY pid",
            &[&roles],
        )
        .await
        .expect("query pg_stat_activity")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Polls [`backends`] until `want` holds; panics with the last list after `timeout`.
async fn wait_backends(
    admin: &Client,
    roles: &[&str],
    timeout: Duration,
    what: &str,
    want: impl Fn(&[i32]) -> bool,
) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let pids = backends(admin, roles).await;
        if want(&pids) {
            return pids;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: backends of {roles:?} still {pids:?} after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One admin console command as rows of (column, value) pairs.
async fn console_rows(pooler: &Pooler, role: &str, sql: &str) -> Vec<Vec<(String, String)>> {
    let console = connect_ok(&conninfo(pooler, role, "pgharbor")).await;
    let mut rows = Vec::new();
    for m in console.simple_query(sql).await.expect(sql) {
        if let SimpleQueryMessage::Row(r) = m {
            let cols = r.columns().iter().map(|c| c.name().to_string());
            let vals = (0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_string());
            rows.push(cols.zip(vals).collect());
        }
    }
    rows
}

/// A pooler with one database named after `role`, in transaction pooling
/// over `size` backends with `query_wait_timeout` `wait`, and `role`'s
/// conninfo for it.
fn txn_pool(pg: &PgCluster, role: &str, size: usize, wait: &str) -> (Pooler, String) {
    let keys = format!("pool_size = {size}\npool_mode = \"transaction\"");
    let tables = db_table(pg, role, None, &keys);
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables).query_wait_timeout(wait));
    let url = conninfo(&pooler, role, role);
    (pooler, url)
}

/// SHOW POOLS' row of the database named after `role` (see [`txn_pool`]).
async fn pool_row(pooler: &Pooler, role: &str) -> Vec<(String, String)> {
    console_rows(pooler, role, "SHOW POOLS")
        .await
        .into_iter()
        .find(|r| field(r, "database") == role)
        .expect("the pool is listed")
}

fn field<'a>(row: &'a [(String, String)], column: &str) -> &'a str {
    row.iter()
        .find(|(c, _)| c == column)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no column {column} in {row:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn min_pool_size_opens_backends_before_any_client_and_replaces_killed_ones() {
    let pg = PgCluster::shared();
    let role = "pl_min";
    let tables = db_table(pg, "pl_min", Some(role), "pool_size = 4\nmin_pool_size = 2");
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables));
    let admin = pg.admin_client().await;

    let first = wait_backends(&admin, &[role], Duration::from_secs(5), "at start", |p| {
        p.len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        backends(&admin, &[role]).await,
        first,
        "min_pool_size = 2 only"
    );

    admin
        .execute("SELECT pg_terminate_backend($1)", &[&first[0]])
        .await
        .unwrap();
    let refilled = wait_backends(&admin, &[role], Duration::from_secs(5), "after kill", |p| {
        p.len() == 2 && !p.contains(&first[0])
    })
    .await;
    assert!(refilled.contains(&first[1]), "{first:?} -> {refilled:?}");

    // A client gets one of them; nothing is opened for it.
    let client = connect_ok(&conninfo(&pooler, role, "pl_min")).await;
    let pid = backend_pid(&client).await;
    assert!(refilled.contains(&pid), "{pid} not in {refilled:?}");
    assert_eq!(backends(&admin, &[role]).await, refilled);

    let dbs = console_rows(&pooler, role, "SHOW DATABASES").await;
    let row = dbs
        .iter()
        .find(|r| field(r, "name") == "pl_min")
        .expect("pl_min in SHOW DATABASES");
    assert_eq!(field(row, "pool_size"), "4");
    assert_eq!(field(row, "min_pool_size"), "2");
    assert_eq!(field(row, "reserve_pool_size"), "0");
    assert_eq!(field(row, "max_connections"), "0");
    assert_eq!(field(row, "server_lifetime"), "3600");
    assert_eq!(field(row, "current_connections"), "2");
}

/// The same over TLS (TCP backend, sslmode=require): a dead backend is
/// noticed under the TLS layer too.
#[tokio::test(flavor = "multi_thread")]
async fn min_pool_size_replaces_a_killed_tls_backend() {
    let pg = PgCluster::shared();
    let entry = DbEntry::new("pl_tls", Backend::Tcp)
        .user(SCRAM_USER.0, Some(SCRAM_USER.1))
        .conninfo_extra("sslmode=require application_name=pl_tls");
    let tables = format!(
        "[databases.pl_tls]\nconninfo = {:?}\nmin_pool_size = 1\n",
        Pooler::backend_conninfo(pg, &entry)
    );
    let _pooler = Pooler::start(pg, opts(pg, &[], &tables));
    let admin = pg.admin_client().await;
    let tls_backends = || async {
        admin
            .query(
                "SELECT a.pid FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
                 WHERE a.application_name = 'pl_tls' AND s.ssl ORDER BY a.pid",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<_, i32>(0))
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let first = loop {
        let pids = tls_backends().await;
        if pids.len() == 1 {
            break pids[0];
        }
        assert!(
            Instant::now() < deadline,
            "no TLS backend at start: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&first])
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pids = tls_backends().await;
        if pids.len() == 1 && pids[0] != first {
            break;
        }
        assert!(Instant::now() < deadline, "not replaced: {pids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reserve_pool_serves_only_after_reserve_pool_timeout() {
    let pg = PgCluster::shared();
    let role = "pl_reserve";
    let tables = db_table(
        pg,
        "pl_reserve",
        None,
        "pool_size = 1\nreserve_pool_size = 1",
    );
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables).query_wait_timeout("1500ms"));
    reload_pool_keys(&pooler, "reserve_pool_timeout = \"600ms\"");
    let admin = pg.admin_client().await;
    let url = conninfo(&pooler, role, "pl_reserve");

    let a = connect_ok(&url).await;
    let pid_a = backend_pid(&a).await;
    let started = Instant::now();
    let b = connect_ok(&url).await;
    let waited = started.elapsed();
    let pid_b = backend_pid(&b).await;
    assert!(
        waited >= Duration::from_millis(550) && waited < Duration::from_millis(1400),
        "the second client waited {waited:?}; reserve_pool_timeout is 600ms"
    );
    assert_ne!(pid_a, pid_b, "a reserve backend is a new one");

    // Pool and reserve both in use: the third client waits out query_wait_timeout.
    let started = Instant::now();
    let err = connect_err(&url).await;
    assert_eq!(err.code, "53300", "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(1400), "{err:?}");
    assert_eq!(backends(&admin, &[role]).await.len(), 2);
}

/// `first` holds every backend the limit allows; `second` (another pool of
/// the group) must wait until one of `first`'s backends goes idle, then
/// gets a backend by evicting it. The limit holds throughout.
async fn limit_is_shared(
    pooler: &Pooler,
    roles: &[&str],
    first: (&str, &str),
    second: (&str, &str),
    limit: usize,
) {
    let pg = PgCluster::shared();
    let admin = pg.admin_client().await;
    let mut holders = Vec::new();
    for _ in 0..limit {
        holders.push(connect_ok(&conninfo(pooler, first.0, first.1)).await);
    }
    let url = conninfo(pooler, second.0, second.1);
    let waiter = tokio::spawn(async move {
        let c = connect(&url).await?;
        let pid = backend_pid(&c).await;
        Ok::<_, tokio_postgres::Error>((c, pid))
    });
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        assert_eq!(backends(&admin, roles).await.len(), limit);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!waiter.is_finished(), "got a backend beyond the limit");

    let released = backend_pid(&holders[0]).await;
    drop(holders.remove(0));
    let (client, pid) = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("still waiting 3 s after a backend went idle")
        .unwrap()
        .expect("connect after a backend went idle");
    assert_ne!(pid, released, "the idle backend belongs to another pool");
    let pids = backends(&admin, roles).await;
    assert_eq!(pids.len(), limit, "the idle backend was evicted: {pids:?}");
    assert!(!pids.contains(&released), "{released} still open: {pids:?}");
    client.simple_query("SELECT 1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn max_db_connections_spans_the_users_of_a_database() {
    let pg = PgCluster::shared();
    let roles = ["pl_db_a", "pl_db_b"];
    let tables = db_table(pg, "pl_db", None, "pool_size = 5\nmax_db_connections = 2");
    let pooler = Pooler::start(pg, opts(pg, &roles, &tables).query_wait_timeout("5s"));
    limit_is_shared(&pooler, &roles, (roles[0], "pl_db"), (roles[1], "pl_db"), 2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn max_user_connections_spans_the_databases_of_a_user() {
    let pg = PgCluster::shared();
    let role = "pl_user";
    let tables = db_table(pg, "pl_user_a", None, "")
        + &db_table(pg, "pl_user_b", None, "")
        + "[users.pl_user]\nmax_user_connections = 2\n";
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables).query_wait_timeout("5s"));
    limit_is_shared(
        &pooler,
        &[role],
        (role, "pl_user_a"),
        (role, "pl_user_b"),
        2,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn server_idle_timeout_closes_idle_backends_down_to_min_pool_size() {
    let pg = PgCluster::shared();
    let role = "pl_idle";
    let tables = db_table(pg, "pl_idle", None, "pool_size = 4\nmin_pool_size = 1");
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables));
    reload_pool_keys(&pooler, "server_idle_timeout = \"400ms\"");
    let admin = pg.admin_client().await;
    let url = conninfo(&pooler, role, "pl_idle");

    let clients = [
        connect_ok(&url).await,
        connect_ok(&url).await,
        connect_ok(&url).await,
    ];
    assert_eq!(backends(&admin, &[role]).await.len(), 3);
    drop(clients);
    let left = wait_backends(&admin, &[role], Duration::from_secs(3), "idle", |p| {
        p.len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        backends(&admin, &[role]).await,
        left,
        "not below min_pool_size"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_lifetime_retires_a_backend_at_release_never_mid_transaction() {
    let pg = PgCluster::shared();
    let role = "pl_life";
    let tables = db_table(pg, "pl_life", None, "pool_size = 1");
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables));
    reload_pool_keys(&pooler, "server_lifetime = \"600ms\"");
    let admin = pg.admin_client().await;
    let url = conninfo(&pooler, role, "pl_life");

    let client = connect_ok(&url).await;
    let pid = backend_pid(&client).await;
    client
        .batch_execute("BEGIN; CREATE TEMP TABLE t (i int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let row = client
        .query_one("SELECT pg_backend_pid(), count(*) FROM t", &[])
        .await
        .expect("the transaction outlived server_lifetime");
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i64>(1)), (pid, 1));
    client.batch_execute("COMMIT").await.unwrap();
    assert_eq!(backends(&admin, &[role]).await, [pid]);

    drop(client);
    wait_backends(&admin, &[role], Duration::from_secs(3), "release", |p| {
        p.is_empty()
    })
    .await;
    let next = connect_ok(&url).await;
    assert_ne!(backend_pid(&next).await, pid, "a retired backend came back");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_check_query_runs_on_backends_idle_longer_than_server_check_delay() {
    let pg = PgCluster::shared();
    let role = "pl_check";
    let tables = db_table(pg, "pl_check", None, "pool_size = 1");
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables));
    // A failing check closes the backend, which shows when the check ran.
    reload_pool_keys(
        &pooler,
        "server_check_delay = \"1s\"\nserver_check_query = \"SELECT 1/0\"",
    );
    let admin = pg.admin_client().await;
    let url = conninfo(&pooler, role, "pl_check");

    let first = connect_ok(&url).await;
    let pid = backend_pid(&first).await;
    drop(first);
    let again = connect_ok(&url).await;
    assert_eq!(backend_pid(&again).await, pid, "checked before the delay");
    drop(again);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = connect_ok(&url).await;
    let new_pid = backend_pid(&later).await;
    assert_ne!(
        new_pid, pid,
        "the failing check did not replace the backend"
    );
    assert_eq!(backends(&admin, &[role]).await, [new_pid]);
    later.simple_query("SELECT 1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn query_wait_timeout_gives_the_waiting_client_53300_with_the_reason() {
    let pg = PgCluster::shared();
    let role = "pl_wait";
    let tables = db_table(pg, "pl_wait", None, "pool_size = 1");
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables).query_wait_timeout("700ms"));
    let url = conninfo(&pooler, role, "pl_wait");
    let holder = connect_ok(&url).await;
    let started = Instant::now();
    let err = connect_err(&url).await;
    let waited = started.elapsed();
    assert_eq!(
        (err.severity.as_str(), err.code.as_str()),
        ("FATAL", "53300")
    );
    assert_eq!(
        err.message,
        "no server connection became free within query_wait_timeout (700ms)"
    );
    assert!(
        waited >= Duration::from_millis(650) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    holder.simple_query("SELECT 1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_clients_are_served_in_arrival_order() {
    let pg = PgCluster::shared();
    let role = "pl_fifo";
    let tables = db_table(pg, "pl_fifo", None, "pool_size = 1");
    let pooler = Pooler::start(pg, opts(pg, &[role], &tables).query_wait_timeout("10s"));
    let url = conninfo(&pooler, role, "pl_fifo");
    let holder = connect_ok(&url).await;
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5usize {
        let (url, served) = (url.clone(), served.clone());
        tasks.push(tokio::spawn(async move {
            let c = connect_ok(&url).await;
            served.lock().unwrap().push(i);
            c.simple_query("SELECT 1").await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }));
        // The next client arrives only once this one is queued.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pools = console_rows(&pooler, role, "SHOW POOLS").await;
            let waiting: usize = pools
                .iter()
                .filter(|r| field(r, "database") == "pl_fifo")
                .map(|r| field(r, "cl_waiting").parse::<usize>().unwrap())
                .sum();
            if waiting == i + 1 {
                break;
            }
            assert!(Instant::now() < deadline, "client {i} never queued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    drop(holder);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("a waiting client was never served")
            .unwrap();
    }
    assert_eq!(*served.lock().unwrap(), [0, 1, 2, 3, 4]);
}

/// In transaction pooling a backend given back while clients wait goes
/// to the next one, with its place (the pool's tickets and shelf).
/// Waiters that give up at query_wait_timeout meanwhile must not strand
/// one: afterwards the pool holds its backends idle, counts no waiter, and
/// serves the next client.
#[tokio::test(flavor = "multi_thread")]
async fn backends_handed_between_waiting_clients_stay_in_the_pool_when_waiters_give_up() {
    let pg = PgCluster::shared();
    let role = "pl_shelf";
    let (pooler, url) = txn_pool(pg, role, 2, "300ms");
    let admin = pg.admin_client().await;
    // 20 clients over 2 backends, 50 ms a transaction: the tail of the
    // queue waits about 450 ms, so some give up while backends change hands.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let c = connect_ok(&url).await;
            let mut served = 0;
            for _ in 0..10 {
                match c.simple_query("SELECT pg_sleep(0.05)").await {
                    Ok(_) => served += 1,
                    Err(e) => {
                        let code = e.as_db_error().map(|d| d.code().code().to_string());
                        assert_eq!(code.as_deref(), Some("53300"), "{e}");
                        return (served, true);
                    }
                }
            }
            (served, false)
        }));
    }
    let (mut served, mut gave_up) = (0, 0);
    for t in tasks {
        let (s, g) = t.await.unwrap();
        served += s;
        gave_up += usize::from(g);
    }
    assert!(
        served > 20 && gave_up > 0,
        "served {served}, gave up {gave_up}"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let row = pool_row(&pooler, role).await;
        let counts = ["cl_waiting", "sv_active", "sv_idle"].map(|c| field(&row, c).to_string());
        let pids = backends(&admin, &[role]).await;
        if counts == ["0", "0", &pids.len().to_string()] && !pids.is_empty() && pids.len() <= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "SHOW POOLS {counts:?} against backends {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let next = connect_ok(&url).await;
    next.simple_query("SELECT 1").await.unwrap();
    let pid = backend_pid(&next).await;
    assert!(backends(&admin, &[role]).await.contains(&pid));
}

/// A reload that shrinks a transaction pool while clients queue for it:
/// places come back to the pool's semaphore, not to the next client in
/// line, until the smaller size holds. Had backends kept changing hands,
/// the clients that got a place freed by a closing backend would wait in
/// deadpool for a backend that never comes back there, and give up at
/// query_wait_timeout. Every client is served, and the pool settles at
/// the new size under the same load.
#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_pool_shrunk_by_a_reload_while_clients_queue_serves_them_all() {
    let pg = PgCluster::shared();
    let role = "pl_shrink";
    let (pooler, url) = txn_pool(pg, role, 4, "3s");
    let admin = pg.admin_client().await;
    let until = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let c = connect_ok(&url).await;
            let mut served = 0;
            while Instant::now() < until {
                if let Err(e) = c.simple_query("SELECT pg_sleep(0.01)").await {
                    let why = e.as_db_error().map(|d| d.message().to_string());
                    return Err(format!("after {served} transactions: {e} {why:?}"));
                }
                served += 1;
            }
            Ok(served)
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(backends(&admin, &[role]).await.len(), 4, "the pool is full");
    reload_edited(&pooler, |text| {
        text.replace("pool_size = 4\n", "pool_size = 2\n")
    });
    assert!(
        pooler.wait_for_log("pool_size 4 -> 2", 1, Duration::from_secs(5)),
        "{}",
        pooler.log_text()
    );
    // Settled well before the load ends: the new size holds under it.
    let settled = Instant::now() + Duration::from_millis(1500);
    let mut sizes = Vec::new();
    while Instant::now() < until - Duration::from_millis(300) {
        if Instant::now() > settled {
            sizes.push(backends(&admin, &[role]).await.len());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut served = 0;
    for t in tasks {
        served += t
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("a client failed {e}"));
    }
    assert!(served > 100, "served {served}");
    assert!(
        !sizes.is_empty() && sizes.iter().all(|&n| n <= 2),
        "backends under load after the reload: {sizes:?}"
    );
}

/// A client whose wait for a backend ends by KILL (its checkout dropped,
/// not timed out) leaves SHOW POOLS' cl_waiting as it found it.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_client_ended_by_kill_is_no_longer_counted_waiting() {
    let pg = PgCluster::shared();
    let role = "pl_killwait";
    let (pooler, url) = txn_pool(pg, role, 1, "30s");
    let holder = connect_ok(&url).await;
    holder.simple_query("BEGIN").await.unwrap();
    holder.simple_query("SELECT 1").await.unwrap();
    let waiter = connect_ok(&url).await;
    let waiting = tokio::spawn(async move { waiter.simple_query("SELECT 1").await.is_err() });
    let cl_waiting = || async { field(&pool_row(&pooler, role).await, "cl_waiting").to_string() };
    let deadline = Instant::now() + Duration::from_secs(5);
    while cl_waiting().await != "1" {
        assert!(Instant::now() < deadline, "the second client never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let console = connect_ok(&conninfo(&pooler, role, "pgharbor")).await;
    console.simple_query("KILL pl_killwait").await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("KILL did not end the waiting client")
            .unwrap(),
        "the waiting client's query succeeded"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let now = cl_waiting().await;
        if now == "0" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cl_waiting still {now} after KILL"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
