//! The admin console, control side: SHOW CLIENTS/SERVERS around PAUSE,
//! RESUME and KILL; RELOAD taking effect on the next command; SHUTDOWN.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::time::Duration;

use common::wait::wait_until;
use common::{connect_err, connect_ok, PgCluster, Pooler, Transport, SCRAM_USER, TEST_DB};
use support::{console, fails, opts, show, show_until, ADMIN_DB};
use tokio_postgres::SimpleQueryMessage;

#[tokio::test(flavor = "multi_thread")]
async fn clients_servers_pause_resume_and_kill() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let admin = console(&pooler, Transport::Tcp).await;
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let a = connect_ok(&app).await;
    let pid: i32 = a
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);

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
