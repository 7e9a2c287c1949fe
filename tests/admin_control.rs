//! The admin console, control side: SHOW CLIENTS/SERVERS around PAUSE,
//! RESUME and KILL; RELOAD taking effect on the next command; SHUTDOWN;
//! DISABLE/ENABLE, RECONNECT/WAIT_CLOSE, KILL_CLIENT and SET; what
//! `admin.stats_users` may and may not do.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::time::Duration;

use common::wait::wait_until;
use common::{
    backend_pid, connect_err, connect_ok, psql_ok, PgCluster, Pooler, PoolerOpts, Transport,
    MD5_USER, SCRAM_USER, TEST_DB,
};
use support::{console, fails, opts, show, show_until, ADMIN_DB};
use tokio_postgres::SimpleQueryMessage;

#[tokio::test(flavor = "multi_thread")]
async fn clients_servers_pause_resume_and_kill() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let admin = console(&pooler, Transport::Tcp).await;
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let a = connect_ok(&app).await;
    let pid: i32 = backend_pid(&a).await;

    let clients = show(&admin, "SHOW CLIENTS").await;
    let servers = show(&admin, "SHOW SERVERS").await;
    assert_eq!(clients.columns, servers.columns);
    let c = clients.find(&[("type", "C"), ("database", TEST_DB), ("state", "active")]);
    assert_eq!(clients.get(c, "addr"), Some("unix"));
    let pid_text = pid.to_string();
    let s = servers.find(&[
        ("type", "S"),
        ("state", "active"),
        ("remote_pid", &pid_text),
    ]);
    assert_eq!(servers.get(s, "link"), clients.get(c, "ptr"));
    assert_eq!(clients.get(c, "link"), servers.get(s, "ptr"));

    // PAUSE waits for the session to end; meanwhile a new client waits too.
    let pausing = {
        let admin2 = console(&pooler, Transport::Unix).await;
        tokio::spawn(async move { admin2.simple_query("PAUSE harbor_test").await })
    };
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { connect_ok(&app).await }
    });
    show_until(&admin, "SHOW POOLS", |p| p.int(0, "cl_waiting") == 1).await;
    assert!(
        !pausing.is_finished(),
        "PAUSE returned while a session held a backend"
    );
    drop(a);
    let paused = tokio::time::timeout(Duration::from_secs(5), pausing).await;
    paused.expect("PAUSE hung").unwrap().expect("PAUSE");
    let dbs = show(&admin, "SHOW DATABASES").await;
    assert_eq!(dbs.int(dbs.find(&[("name", TEST_DB)]), "paused"), 1);
    assert_eq!(fails(&admin, "PAUSE harbor_test").await.0, "55000");
    assert!(
        !waiting.is_finished(),
        "a client got a backend while paused"
    );
    show(&admin, "RESUME harbor_test").await;
    let b = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    let b = b.expect("client still waiting after RESUME").unwrap();
    assert_eq!(
        fails(&admin, "RESUME").await.0,
        "55000",
        "nothing is paused"
    );

    // KILL ends the session at once and leaves the database paused.
    show(&admin, "KILL harbor_test").await;
    let e = b
        .simple_query("SELECT 1")
        .await
        .expect_err("session survived KILL");
    assert!(e.is_closed() || e.as_db_error().is_some(), "{e:?}");
    let dbs = show(&admin, "SHOW DATABASES").await;
    assert_eq!(dbs.int(dbs.find(&[("name", TEST_DB)]), "paused"), 1);
    show(&admin, "RESUME").await;
    let c = connect_ok(&app).await;
    assert_eq!(c.simple_query("SELECT 1").await.unwrap().len(), 3);

    assert_eq!(fails(&admin, "PAUSE nosuchdb").await.0, "3D000");
    assert_eq!(fails(&admin, "KILL pgharbor").await.0, "55000");
}

#[tokio::test(flavor = "multi_thread")]
async fn reload_applies_to_the_next_command() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let c = console(&pooler, Transport::Unix).await;
    let path = pooler.config_path().to_path_buf();
    let good = std::fs::read_to_string(&path).unwrap();
    let admins = format!("users = [\"{}\"]", SCRAM_USER.0);
    assert!(good.contains(&admins), "{good}");

    // A broken file is refused and the old configuration stays.
    std::fs::write(&path, good.replace("[pool]", "[pool]\nbogus_key = 1")).unwrap();
    let (code, msg) = fails(&c, "RELOAD").await;
    assert_eq!(code, "F0000");
    assert!(msg.contains("pool.bogus_key"), "{msg}");
    assert_eq!(show(&c, "SHOW POOLS").await.columns[0], "database");

    // Removing the user takes effect on this session's next command.
    std::fs::write(&path, good.replace(&admins, "users = []")).unwrap();
    let done = c.simple_query("reload").await.expect("RELOAD");
    assert!(matches!(
        done.last(),
        Some(SimpleQueryMessage::CommandComplete(_))
    ));
    for sql in [
        "SHOW POOLS",
        "SHOW OVERHEAD",
        "RELOAD",
        "SHUTDOWN",
        "SHOW HELP",
    ] {
        let (code, msg) = fails(&c, sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
        assert!(msg.contains("admin.users"), "{msg}");
    }
    let refused =
        connect_err(&pooler.conninfo(Transport::Tcp, SCRAM_USER.0, Some(SCRAM_USER.1), ADMIN_DB))
            .await;
    assert_eq!(refused.code, "28000");
    let mut pooler = pooler;
    pooler.assert_alive();
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_stops_the_pooler() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, opts());
    let socket = pooler.socket_path();
    let c = console(&pooler, Transport::Tcp).await;
    let done = c.simple_query("SHUTDOWN;").await.expect("SHUTDOWN");
    assert!(matches!(
        done.last(),
        Some(SimpleQueryMessage::CommandComplete(_))
    ));
    let status = pooler
        .wait_exit(Duration::from_secs(10))
        .expect("pooler still running");
    assert!(status.success(), "{status}");
    assert!(
        wait_until(Duration::from_secs(1), || !socket.exists()),
        "socket file left behind"
    );
}

/// True while PostgreSQL has a session with process id `pid`.
async fn pg_has(direct: &tokio_postgres::Client, pid: i32) -> bool {
    let row = direct
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .expect("pg_stat_activity");
    row.get::<_, i64>(0) == 1
}

#[tokio::test(flavor = "multi_thread")]
async fn disable_refuses_new_logins_and_enable_lets_them_in() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let console_dsn = pooler.conninfo(Transport::Unix, SCRAM_USER.0, None, ADMIN_DB);
    let app = pooler.conninfo(Transport::Tcp, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let inside = connect_ok(&app).await;

    psql_ok(&console_dsn, Some(SCRAM_USER.1), "DISABLE harbor_test;");
    let refused = connect_err(&app).await;
    assert_eq!(
        (refused.severity.as_str(), refused.code.as_str()),
        ("FATAL", "55000")
    );
    assert_eq!(
        refused.message,
        "database \"harbor_test\" is not currently accepting connections"
    );
    // Those already in stay in.
    assert_eq!(inside.simple_query("SELECT 1").await.unwrap().len(), 3);
    let admin = console(&pooler, Transport::Tcp).await;
    let dbs = show(&admin, "SHOW DATABASES").await;
    assert_eq!(dbs.int(dbs.find(&[("name", TEST_DB)]), "disabled"), 1);
    assert_eq!(fails(&admin, "DISABLE harbor_test").await.0, "55000");
    assert_eq!(fails(&admin, "DISABLE pgbouncer").await.0, "55000");

    show(&admin, "ENABLE harbor_test").await;
    let again = connect_ok(&app).await;
    assert_eq!(again.simple_query("SELECT 1").await.unwrap().len(), 3);
    let dbs = show(&admin, "SHOW DATABASES").await;
    assert_eq!(dbs.int(dbs.find(&[("name", TEST_DB)]), "disabled"), 0);
    assert_eq!(fails(&admin, "ENABLE harbor_test").await.0, "55000");
}

#[tokio::test(flavor = "multi_thread")]
async fn reconnect_closes_backends_as_released_and_wait_close_waits_for_them() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let admin = console(&pooler, Transport::Unix).await;
    let direct = connect_ok(&pg.conninfo(Transport::Unix, "postgres", None, TEST_DB)).await;
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let held = connect_ok(&app).await;
    let idle = connect_ok(&app).await;
    let (held_pid, idle_pid) = (backend_pid(&held).await, backend_pid(&idle).await);
    drop(idle);
    let idle_text = idle_pid.to_string();
    show_until(&admin, "SHOW SERVERS", |s| {
        (0..s.rows.len()).any(|r| {
            s.get(r, "remote_pid") == Some(idle_text.as_str()) && s.get(r, "state") == Some("idle")
        })
    })
    .await;

    show(&admin, "RECONNECT harbor_test").await;
    // The idle backend goes at once, the one lent out stays with its client.
    let servers = show_until(&admin, "SHOW SERVERS", |s| s.rows.len() == 1).await;
    assert_eq!(servers.int(0, "remote_pid"), i64::from(held_pid));
    assert!(pg_has(&direct, held_pid).await);
    assert_eq!(held.simple_query("SELECT 1").await.unwrap().len(), 3);
    let waiting = {
        let admin2 = console(&pooler, Transport::Tcp).await;
        tokio::spawn(async move { admin2.simple_query("WAIT_CLOSE harbor_test").await })
    };
    // A newcomer gets a fresh backend meanwhile.
    let fresh = connect_ok(&app).await;
    assert_ne!(backend_pid(&fresh).await, held_pid);
    drop(fresh);
    assert!(!waiting.is_finished(), "WAIT_CLOSE returned early");

    drop(held);
    let waited = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    waited
        .expect("WAIT_CLOSE hung")
        .unwrap()
        .expect("WAIT_CLOSE");
    assert!(
        !pg_has(&direct, held_pid).await,
        "the released backend is still open"
    );
    // Backends opened after RECONNECT are kept.
    let servers = show(&admin, "SHOW SERVERS").await;
    assert_eq!(servers.rows.len(), 1, "{servers:?}");
    show(&admin, "WAIT_CLOSE").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_client_ends_that_client_only() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let admin = console(&pooler, Transport::Tcp).await;
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let doomed = connect_ok(&app).await;
    let clients = show(&admin, "SHOW CLIENTS").await;
    assert_eq!(clients.rows.len(), 1);
    let id = clients.int(0, "id");
    let spared = connect_ok(&app).await;

    show(&admin, &format!("KILL_CLIENT {id}")).await;
    let e = doomed
        .simple_query("SELECT 1")
        .await
        .expect_err("the killed client is still served");
    assert!(
        e.is_closed() || e.as_db_error().map(|d| d.code().code()) == Some("57P01"),
        "{e:?}"
    );
    assert_eq!(spared.simple_query("SELECT 1").await.unwrap().len(), 3);
    let left = show_until(&admin, "SHOW CLIENTS", |c| c.rows.len() == 1).await;
    assert_ne!(left.int(0, "id"), id);
    assert_eq!(fails(&admin, &format!("KILL_CLIENT {id}")).await.0, "42704");
}

#[tokio::test(flavor = "multi_thread")]
async fn set_changes_a_runtime_key_and_refuses_the_others() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let admin = console(&pooler, Transport::Unix).await;
    let value =
        |t: &support::Table, key: &str| t.get(t.find(&[("key", key)]), "value").map(str::to_string);
    let done = admin
        .simple_query("SET pool.idle_transaction_timeout = '45s';")
        .await
        .expect("SET");
    assert!(matches!(
        done.last(),
        Some(SimpleQueryMessage::CommandComplete(_))
    ));
    let config = show(&admin, "SHOW CONFIG").await;
    assert_eq!(
        value(&config, "pool.idle_transaction_timeout").as_deref(),
        Some("45s")
    );

    // psql, and a key a new login reads: the stats user can log in now.
    let console_dsn = pooler.conninfo(Transport::Unix, SCRAM_USER.0, None, "pgbouncer");
    psql_ok(
        &console_dsn,
        Some(SCRAM_USER.1),
        "SET admin.stats_users = 'md5_user'",
    );
    let monitor = pooler.conninfo(Transport::Tcp, MD5_USER.0, Some(MD5_USER.1), "pgbouncer");
    let m = connect_ok(&monitor).await;
    assert_eq!(show(&m, "SHOW STATE").await.rows.len(), 3);

    let (code, msg) = fails(&admin, "SET listen.port = 1").await;
    assert_eq!(code, "55P02");
    assert!(
        msg.contains("listen.port") && msg.contains("restart"),
        "{msg}"
    );
    // Pool sizes reach existing pools too since a reload applies them in
    // place, so SET takes them.
    admin
        .simple_query("SET pool.default_pool_size = 5")
        .await
        .expect("SET pool.default_pool_size");
    let config = show(&admin, "SHOW CONFIG").await;
    assert_eq!(
        value(&config, "pool.default_pool_size").as_deref(),
        Some("5")
    );
    let (code, msg) = fails(&admin, "SET pool.mode = 'sometimes'").await;
    assert_eq!(code, "22023");
    assert!(
        msg.contains("pool.mode") && msg.contains("sometimes"),
        "{msg}"
    );
    assert_eq!(fails(&admin, "SET max_client_conn = 5").await.0, "42704");
    assert_eq!(fails(&admin, "SET pool.mode").await.0, "42601");
    // The refused SETs changed nothing.
    let config = show(&admin, "SHOW CONFIG").await;
    assert_eq!(value(&config, "pool.mode").as_deref(), Some("session"));
}

#[tokio::test(flavor = "multi_thread")]
async fn stats_users_may_show_but_not_control() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts().stats_users(&[MD5_USER.0]));
    let monitor = pooler.conninfo(Transport::Unix, MD5_USER.0, Some(MD5_USER.1), ADMIN_DB);
    let m = connect_ok(&monitor).await;
    for sql in [
        "SHOW POOLS",
        "SHOW CONFIG",
        "SHOW USERS",
        "SHOW MEM",
        "SHOW LISTS",
    ] {
        assert!(!show(&m, sql).await.columns.is_empty(), "{sql}");
    }
    for sql in [
        "PAUSE",
        "RESUME",
        "RELOAD",
        "DISABLE harbor_test",
        "RECONNECT",
        "KILL_CLIENT 1",
        "SET pool.mode = 'session'",
        "SHUTDOWN",
    ] {
        let (code, msg) = fails(&m, sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
        assert!(msg.contains("not in admin.users"), "{msg}");
    }
    let state = show(&m, "SHOW STATE").await;
    state.find(&[("key", "paused"), ("value", "no")]);
    let out = psql_ok(&monitor, Some(MD5_USER.1), "SHOW VERSION;");
    assert!(out.starts_with("pgharbor "), "{out}");
    let mut pooler = pooler;
    pooler.assert_alive();
}

/// Transaction pooling: an idle client holds no backend and waits on its
/// socket and its registry entry alone. KILL_CLIENT ends that client only,
/// KILL of the database ends every session on it (57P01 or a close), and
/// a client that logs in after the KILL and the RESUME is served.
#[tokio::test(flavor = "multi_thread")]
async fn kill_and_kill_client_reach_idle_transaction_pooling_clients() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::transaction(2).admin_users(&[SCRAM_USER.0]));
    let admin = console(&pooler, Transport::Tcp).await;
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let mut clients = Vec::new();
    for _ in 0..3 {
        let c = connect_ok(&app).await;
        assert_eq!(c.simple_query("SELECT 1").await.unwrap().len(), 3);
        clients.push(c);
    }
    let listed = show_until(&admin, "SHOW CLIENTS", |t| t.rows.len() == 3).await;
    let ended = |e: tokio_postgres::Error| {
        assert!(
            e.is_closed() || e.as_db_error().map(|d| d.code().code()) == Some("57P01"),
            "{e:?}"
        );
    };
    let first = listed.int(0, "id");
    show(&admin, &format!("KILL_CLIENT {first}")).await;
    show_until(&admin, "SHOW CLIENTS", |t| t.rows.len() == 2).await;
    ended(
        clients[0]
            .simple_query("SELECT 1")
            .await
            .expect_err("killed, still served"),
    );
    assert_eq!(clients[1].simple_query("SELECT 1").await.unwrap().len(), 3);

    show(&admin, &format!("KILL {TEST_DB}")).await;
    show_until(&admin, "SHOW CLIENTS", |t| t.rows.is_empty()).await;
    for c in &clients[1..] {
        ended(
            c.simple_query("SELECT 1")
                .await
                .expect_err("KILLed, still served"),
        );
    }
    show(&admin, &format!("RESUME {TEST_DB}")).await;
    let fresh = connect_ok(&app).await;
    assert_eq!(fresh.simple_query("SELECT 1").await.unwrap().len(), 3);
}
