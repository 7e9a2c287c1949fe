//! The admin console (database `pgharbor`), read side: who may log in, each
//! SHOW command's columns and rows against a known workload, errors that
//! keep the session, and the simple-protocol-only rule. PAUSE/RESUME/KILL,
//! RELOAD and SHUTDOWN are in `admin_control.rs`.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::time::Duration;

use common::tls::{connect_tls_tcp, tls_toml, Certs};
use common::wire::message;
use common::{
    connect_err, connect_ok, psql_ok, Backend, DbEntry, PgCluster, Pooler, Reply, Transport,
    MD5_USER, SCRAM_USER, TEST_DB, TRUST_USER,
};
use support::{console, fails, opts, raw_console, show, show_until, Table, ADMIN_DB};
use tokio_postgres::{Client, SimpleQueryMessage};

#[tokio::test(flavor = "multi_thread")]
async fn admins_log_in_over_both_transports_and_others_are_refused() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    for t in Transport::ALL {
        let c = console(&pooler, t).await;
        let v = show(&c, "SHOW VERSION").await;
        let version = format!("pgharbor {}", env!("CARGO_PKG_VERSION"));
        assert_eq!((v.columns.len(), v.rows.len()), (1, 1));
        assert_eq!(v.get(0, "version"), Some(version.as_str()));

        let refused =
            connect_err(&pooler.conninfo(t, MD5_USER.0, Some(MD5_USER.1), ADMIN_DB)).await;
        assert_eq!(
            (refused.severity.as_str(), refused.code.as_str()),
            ("FATAL", "28000")
        );
        assert_eq!(
            refused.message,
            "not allowed to connect to the admin console"
        );
        // Authentication still comes first.
        let wrong = connect_err(&pooler.conninfo(t, SCRAM_USER.0, Some("nope"), ADMIN_DB)).await;
        assert_eq!(wrong.code, "28P01");
    }
    // psql, and what a raw client sees at login.
    let out = psql_ok(
        &pooler.conninfo(Transport::Unix, SCRAM_USER.0, None, ADMIN_DB),
        Some(SCRAM_USER.1),
        "show version;",
    );
    assert!(out.starts_with("pgharbor "), "{out}");
    let (_raw, session) = raw_console(&pooler, Transport::Tcp);
    assert_eq!(session.auth_codes, [10, 11, 12, 0]);
    assert!(session.params["server_version"].contains("pgharbor"));
    assert_eq!(session.params["client_encoding"], "UTF8");
    assert!(session.key.is_some() && session.status == b'I');
}

/// 5 clients over the socket, 5 over TCP, 5 over TCP with TLS, one at a
/// time, each after the previous one's backend is idle again (so all 15
/// logins share one backend), each running one simple query (one exchange).
async fn workload(pooler: &Pooler, admin: &Client, certs: &Certs) {
    let idle = |p: &Table| {
        let r = p.find(&[("database", TEST_DB)]);
        p.int(r, "sv_active") == 0 && p.int(r, "sv_idle") == 1
    };
    for i in 0..15 {
        let t = [Transport::Unix, Transport::Tcp, Transport::Tcp][i % 3];
        let conninfo = pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
        let client = if i % 3 == 2 {
            let conninfo = conninfo.replace("sslmode=disable", "sslmode=require");
            connect_tls_tcp(&conninfo, &certs.ca)
                .await
                .expect("TLS client")
        } else {
            connect_ok(&conninfo).await
        };
        let rows = client.simple_query("SELECT 1").await.expect("query");
        assert!(matches!(&rows[1], SimpleQueryMessage::Row(r) if r.get(0) == Some("1")));
        if i == 0 {
            let pools = show(admin, "SHOW POOLS").await;
            let r = pools.find(&[("database", TEST_DB), ("user", SCRAM_USER.0)]);
            let busy = (pools.int(r, "cl_active"), pools.int(r, "sv_active"));
            assert_eq!(busy, (1, 1), "while a client holds the backend");
        }
        drop(client);
        show_until(admin, "SHOW POOLS", idle).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn show_commands_report_a_known_workload() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("admin");
    let other = DbEntry::new("other", Backend::Tcp).user(TRUST_USER, Some("hidden_pw"));
    let pooler = Pooler::start(
        pg,
        opts()
            .tls(&tls_toml(Some(&certs), &[("sslmode", "prefer")]))
            .databases(vec![DbEntry::new(TEST_DB, Backend::Unix), other]),
    );
    let admin = console(&pooler, Transport::Unix).await;
    workload(&pooler, &admin, &certs).await;

    let pools = show(&admin, "SHOW POOLS").await;
    assert_eq!(
        pools.columns[..4],
        ["database", "user", "cl_active", "cl_waiting"]
    );
    assert_eq!(pools.columns.len(), 17);
    let r = pools.find(&[("database", TEST_DB), ("user", SCRAM_USER.0)]);
    assert_eq!(pools.get(r, "pool_mode"), Some("session"));
    assert_eq!(pools.int(r, "cl_waiting"), 0);

    let dbs = show(&admin, "SHOW DATABASES").await;
    assert_eq!(
        dbs.columns[..5],
        ["name", "host", "port", "database", "force_user"]
    );
    let r = dbs.find(&[("name", TEST_DB), ("database", TEST_DB)]);
    assert_eq!(dbs.get(r, "host"), pg.socket_dir().to_str());
    assert_eq!(dbs.int(r, "port"), i64::from(pg.port()));
    assert_eq!(dbs.get(r, "force_user"), None);
    let sizes = (dbs.int(r, "pool_size"), dbs.int(r, "current_connections"));
    assert_eq!(sizes, (20, 1));
    let r = dbs.find(&[("name", "other"), ("force_user", TRUST_USER)]);
    assert_eq!(dbs.int(r, "current_connections"), 0);

    // PgBouncer's four columns (pgbouncer_exporter accepts no others); the
    // reload column is SHOW CONFIG_RELOAD's.
    let plain = show(&admin, "SHOW CONFIG").await;
    assert_eq!(plain.columns, ["key", "value", "default", "changeable"]);
    let config = show(&admin, "SHOW CONFIG_RELOAD").await;
    assert_eq!(
        config.columns,
        ["key", "value", "default", "changeable", "reload"]
    );
    assert_eq!(plain.rows.len(), config.rows.len());
    let port = pooler.port().to_string();
    config.find(&[
        ("key", "listen.port"),
        ("value", &port),
        ("changeable", "no"),
        ("reload", "restart"),
    ]);
    config.find(&[
        ("key", "admin.users"),
        ("value", SCRAM_USER.0),
        ("changeable", "yes"),
        ("reload", "immediate"),
    ]);
    config.find(&[
        ("key", "databases.other.pool_size"),
        ("default", "20"),
        ("reload", "immediate"),
    ]);
    config.find(&[("key", "pool.shutdown_timeout"), ("default", "30s")]);
    let r = config.find(&[("key", "databases.other.conninfo")]);
    let shown = config.get(r, "value").unwrap_or_default();
    assert!(shown.contains("password=********"), "{shown}");
    assert!(!shown.contains("hidden_pw"), "{shown}");

    // Counters arrive as each session ends; one row per configured database.
    let stats = show_until(&admin, "SHOW STATS", |s| {
        s.int(s.find(&[("database", TEST_DB)]), "total_query_count") >= 15
    })
    .await;
    assert_eq!(stats.rows.len(), 2, "{stats:#?}");
    let r = stats.find(&[("database", TEST_DB)]);
    // Each client ran one autocommit query: one transaction each.
    assert_eq!(stats.int(r, "total_query_count"), 15);
    assert_eq!(stats.int(r, "total_xact_count"), 15);
    assert!(stats.int(r, "total_received") > 0 && stats.int(r, "total_sent") > 0);
    assert!(stats.int(r, "total_query_time") > 0);
    assert!(stats.int(r, "total_xact_time") >= stats.int(r, "total_query_time"));
    assert_eq!(stats.get(r, "avg_query_count"), None, "no stats period");
    let other = stats.find(&[("database", "other")]);
    assert_eq!(stats.int(other, "total_query_count"), 0);
    assert_eq!(stats.int(other, "total_xact_count"), 0);

    check_overhead(&show(&admin, "SHOW OVERHEAD").await);
}

/// SHOW OVERHEAD after [`workload`].
fn check_overhead(o: &Table) {
    assert_eq!(
        o.columns[..6],
        ["side", "transport", "tls", "auth", "established", "failed"]
    );
    for (transport, tls) in [("unix", "f"), ("tcp-loopback", "f"), ("tcp-loopback", "t")] {
        // libpq binds SCRAM to the TLS channel when it is offered.
        let auth = if tls == "t" {
            "scram-sha-256-plus"
        } else {
            "scram-sha-256"
        };
        let r = o.find(&[
            ("side", "client"),
            ("transport", transport),
            ("tls", tls),
            ("auth", auth),
        ]);
        let what = format!("client {transport} tls={tls}");
        assert_eq!(
            (o.int(r, "established"), o.int(r, "failed")),
            (5, 0),
            "{what}"
        );
        let handshake = o.int(r, "tls_handshake_avg_us");
        assert_eq!(
            handshake > 0,
            tls == "t",
            "{what}: TLS handshake {handshake} µs"
        );
        assert!(
            o.int(r, "total_p99_us") >= o.int(r, "auth_p50_us"),
            "{what}"
        );
        assert_eq!(o.get(r, "connect_avg_us"), None, "{what}");
        assert_eq!(o.int(r, "chatty_exchanges"), 5, "{what}");
        assert_eq!(o.get(r, "handshakes_avoided"), None, "{what}");
    }
    let r = o.find(&[("side", "server"), ("transport", "unix"), ("tls", "f")]);
    assert_eq!(o.int(r, "established"), 1);
    assert_eq!(o.get(r, "auth"), None, "server rows have no client method");
    assert!(o.int(r, "connect_avg_us") > 0 && o.int(r, "total_p50_us") > 0);
    assert_eq!(o.get(r, "first_packet_avg_us"), None);
    let total = o.find(&[("side", "total")]);
    assert_eq!(total, o.rows.len() - 1, "the total row comes last");
    let (logins, connects) = (o.int(total, "logins"), o.int(total, "backend_connects"));
    assert_eq!((logins, connects), (15, 1));
    assert_eq!(o.int(total, "handshakes_avoided"), logins - connects);
    let saved: f64 = o
        .get(total, "saved_ms")
        .unwrap_or("")
        .parse()
        .expect("saved_ms");
    assert!(saved > 0.0, "{saved}");
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_keep_the_session_and_violations_end_it() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let c = console(&pooler, Transport::Tcp).await;
    let (code, msg) = fails(&c, "FROB the pools").await;
    assert_eq!(
        (code.as_str(), msg.as_str()),
        ("42601", "unknown command \"FROB the pools\"")
    );
    for sql in [
        "SHOW",
        "SHOW FDS",
        "SUSPEND",
        "SET",
        "SET pool.mode",
        "KILL_CLIENT",
        "KILL",
        "SELECT 1",
        "SHOW POOLS; SHOW STATS",
    ] {
        assert_eq!(fails(&c, sql).await.0, "42601", "{sql}");
    }
    assert_eq!(fails(&c, "KILL_CLIENT abc").await.0, "22P02");
    assert_eq!(fails(&c, "KILL_CLIENT 999999").await.0, "42704");
    assert_eq!(fails(&c, "SET nosuch.key = 1").await.0, "42704");
    assert_eq!(fails(&c, "DISABLE nosuchdb").await.0, "3D000");
    assert!(c.simple_query(" ; ").await.is_ok(), "empty query");
    assert_eq!(show(&c, "  show\tVERSION ;").await.rows.len(), 1);

    // SHOW HELP is a notice, as in PgBouncer; unknown commands name the commands.
    let (mut raw, _) = raw_console(&pooler, Transport::Unix);
    let help = raw.query("SHOW HELP");
    assert_eq!(help.tags, ["SHOW"]);
    assert_eq!(help.notices[0].message, "Console usage");
    let usage = &help.notices[0].fields[&'D'];
    assert!(
        usage.contains("OVERHEAD") && usage.contains("SHUTDOWN"),
        "{usage}"
    );
    let unknown = raw.query("bogus");
    assert!(unknown.error.unwrap().fields[&'H'].contains("RELOAD"));
    assert_eq!(raw.query("SHOW VERSION").rows.len(), 1);
    // A query string with a NUL inside is a protocol violation: FATAL 08P01.
    raw.send(&message(b'Q', b"SHOW\0POOLS\0")).unwrap();
    raw.fatal_then_close(Duration::from_secs(5), "08P01", "a NUL in the query");
}

#[tokio::test(flavor = "multi_thread")]
async fn extended_protocol_gets_an_error_not_a_hang() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, opts());
    let c = console(&pooler, Transport::Unix).await;
    let e = tokio::time::timeout(Duration::from_secs(5), c.query("SHOW VERSION", &[]))
        .await
        .expect("extended query hung")
        .expect_err("extended query succeeded");
    assert_eq!(e.as_db_error().map(|d| d.code().code()), Some("0A000"));
    assert_eq!(
        show(&c, "SHOW VERSION").await.rows.len(),
        1,
        "session still in sync"
    );

    // Raw: one error for the whole batch, one ReadyForQuery at Sync; an
    // error without a Sync still arrives at once.
    let (mut raw, _) = raw_console(&pooler, Transport::Tcp);
    let mut batch = message(b'P', b"\0SHOW POOLS\0\0\0");
    batch.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
    batch.extend(message(b'E', b"\0\0\0\0\0"));
    batch.extend(message(b'H', b""));
    raw.send(&batch).unwrap();
    let first = raw.read_msg(Duration::from_secs(5));
    assert_eq!(
        first.error().map(|e| e.code),
        Some("0A000".to_string()),
        "{first:?}"
    );
    raw.send(&message(b'S', b"")).unwrap();
    assert_eq!(
        raw.read_msg(Duration::from_secs(5)),
        Reply::Msg(b'Z', vec![b'I'])
    );
    assert_eq!(raw.query("SHOW VERSION").rows.len(), 1);
}
