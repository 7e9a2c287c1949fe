//! Multi-host conninfo against a real primary and its streaming standby
//! (`pg_basebackup -R`): target_session_attrs picks the host libpq would,
//! SHOW SERVERS names each backend's host, and when the primary stops and
//! the standby is promoted, new clients reach the new primary while
//! read-write never lands on a read-only host.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use common::{
    connect, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, StopMode, Transport, SCRAM_USER,
    TRUST_USER,
};
use support::{console, show};
use tokio_postgres::Client;

/// A primary and its hot standby; the standby goes first on drop.
struct Pair {
    standby: PgCluster,
    primary: PgCluster,
}

fn pair() -> Pair {
    let primary = PgCluster::start_primary();
    let standby = primary.start_standby();
    assert!(standby.in_recovery(), "the standby is in recovery");
    Pair { standby, primary }
}

/// A database entry over both hosts (in `ports` order) as trust_user.
fn entry(name: &str, ports: [u16; 2], attrs: &str) -> DbEntry {
    DbEntry::new(name, Backend::Tcp).conninfo_extra(&format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user={TRUST_USER} target_session_attrs={attrs} connect_timeout=2",
        ports[0], ports[1]
    ))
}

fn pooler(p: &Pair, dbs: Vec<DbEntry>) -> Pooler {
    let opts = PoolerOpts::default()
        .admin_users(&[SCRAM_USER.0])
        .databases(dbs);
    Pooler::start(&p.primary, opts)
}

async fn client(pooler: &Pooler, db: &str) -> Result<Client, String> {
    let conninfo = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), db);
    match tokio::time::timeout(Duration::from_secs(15), connect(&conninfo)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(common::clients::describe_error(&e)),
        Err(_) => Err("login timed out".into()),
    }
}

/// The error of a login through `pooler` that must fail (`why` it must).
async fn refused(pooler: &Pooler, db: &str, why: &str) -> String {
    match client(pooler, db).await {
        Ok(_) => panic!("{db}: logged in, but {why}"),
        Err(e) => e,
    }
}

/// (server port, in recovery) of the backend serving `c`.
async fn where_am_i(c: &Client) -> Result<(u16, bool), tokio_postgres::Error> {
    let row = c
        .query_one(
            "SELECT inet_server_port(), pg_catalog.pg_is_in_recovery()",
            &[],
        )
        .await?;
    let port: i32 = row.get(0);
    Ok((u16::try_from(port).unwrap_or(0), row.get(1)))
}

async fn lands_on(pooler: &Pooler, db: &str) -> (u16, bool) {
    let c = client(pooler, db)
        .await
        .unwrap_or_else(|e| panic!("{db}: {e}"));
    where_am_i(&c).await.expect("where am I")
}

#[tokio::test(flavor = "multi_thread")]
async fn target_session_attrs_choose_the_host_libpq_would() {
    let p = pair();
    let (pp, sp) = (p.primary.port(), p.standby.port());
    let pooler = pooler(
        &p,
        vec![
            entry("rw", [pp, sp], "read-write"),
            entry("rw_rev", [sp, pp], "read-write"),
            entry("prim_rev", [sp, pp], "primary"),
            entry("ro", [pp, sp], "read-only"),
            entry("sb", [pp, sp], "standby"),
            entry("ps", [pp, sp], "prefer-standby"),
            entry("any_rev", [sp, pp], "any"),
        ],
    );
    assert_eq!(lands_on(&pooler, "rw").await, (pp, false));
    assert_eq!(
        lands_on(&pooler, "rw_rev").await,
        (pp, false),
        "read-write skips the standby listed first"
    );
    assert_eq!(lands_on(&pooler, "prim_rev").await, (pp, false));
    assert_eq!(lands_on(&pooler, "ro").await, (sp, true));
    assert_eq!(lands_on(&pooler, "sb").await, (sp, true));
    assert_eq!(
        lands_on(&pooler, "ps").await,
        (sp, true),
        "prefer-standby prefers the standby listed second"
    );
    assert_eq!(
        lands_on(&pooler, "any_rev").await,
        (sp, true),
        "any takes the first host"
    );

    // SHOW SERVERS names the host each backend is on.
    let admin = console(&pooler, Transport::Unix).await;
    let servers = show(&admin, "SHOW SERVERS").await;
    let port_of = |db: &str| {
        let r = servers.find(&[("database", db)]);
        servers.get(r, "port").map(str::to_string)
    };
    assert_eq!(port_of("rw_rev"), Some(pp.to_string()));
    assert_eq!(port_of("ps"), Some(sp.to_string()));
    assert_eq!(
        servers.get(servers.find(&[("database", "ps")]), "addr"),
        Some("127.0.0.1")
    );
    let dbs = show(&admin, "SHOW DATABASES").await;
    let r = dbs.find(&[("name", "rw_rev")]);
    assert_eq!(dbs.get(r, "host"), Some("127.0.0.1,127.0.0.1"));
    assert_eq!(dbs.get(r, "port"), None, "two ports: no single one");
    assert_eq!(dbs.get(r, "load_balance_hosts"), Some("disable"));

    // With only the standby, read-write has nowhere to go: an error that
    // says why, never a session on the read-only host.
    let only_standby = Pooler::start(
        &p.primary,
        PoolerOpts::default().databases(vec![entry("rw", [sp, sp], "read-write")]),
    );
    let e = refused(&only_standby, "rw", "refused").await;
    assert!(e.contains("session is read-only"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn failover_reaches_the_promoted_standby_and_never_writes_to_a_read_only_host() {
    let p = pair();
    let (pp, sp) = (p.primary.port(), p.standby.port());
    let pooler = pooler(
        &p,
        vec![
            entry("rw", [pp, sp], "read-write"),
            entry("sb", [pp, sp], "standby"),
        ],
    );
    // In flight on the primary.
    let writer = client(&pooler, "rw").await.expect("rw before");
    assert_eq!(where_am_i(&writer).await.expect("rw"), (pp, false));
    writer
        .batch_execute("CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (1)")
        .await
        .expect("write on the primary");
    // A standby session that will outlive the promotion.
    let reader = client(&pooler, "sb").await.expect("sb before");
    assert_eq!(where_am_i(&reader).await.expect("sb"), (sp, true));

    let stopped = Instant::now();
    p.primary.stop_server(StopMode::Fast);
    let e = writer
        .batch_execute("INSERT INTO t VALUES (2)")
        .await
        .expect_err("the in-flight client's primary is gone");
    eprintln!("in-flight client: {}", common::clients::describe_error(&e));

    // Before the promotion only a read-only host is up: refused, not landed.
    let e = refused(&pooler, "rw", "no read-write host yet").await;
    assert!(e.contains("session is read-only"), "{e}");

    p.standby.promote();
    let deadline = Instant::now() + Duration::from_secs(30);
    let new_writer = loop {
        match client(&pooler, "rw").await {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                assert!(
                    !e.contains("does not exist"),
                    "unexpected error during failover: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no new primary within 30 s: {e}"),
        }
    };
    eprintln!(
        "failover: first read-write client {:.2} s after the stop began",
        stopped.elapsed().as_secs_f64()
    );
    assert_eq!(
        where_am_i(&new_writer).await.expect("rw after"),
        (sp, false)
    );
    new_writer
        .batch_execute("CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (3)")
        .await
        .expect("write on the new primary");

    // The standby session now sits on a primary: its next ReadyForQuery
    // says so (in_hot_standby off), and its backend is retired at release.
    let (port, recovering) = where_am_i(&reader).await.expect("sb after promote");
    assert_eq!((port, recovering), (sp, false));
    drop(reader);
    let admin = console(&pooler, Transport::Unix).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let servers = show(&admin, "SHOW SERVERS").await;
        if !(0..servers.rows.len()).any(|r| servers.get(r, "database") == Some("sb")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the backend of the promoted standby was pooled again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = refused(&pooler, "sb", "no standby is left").await;
    assert!(e.contains("not in hot standby mode"), "{e}");
}

/// Failover time through pgharbor, median of 5: seconds from the start of
/// the primary's (fast) stop to the first successful new read-write client
/// on the promoted standby. By hand: `cargo test --test failover -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn failover_time_median_of_5() {
    let mut times = Vec::new();
    for round in 0..5 {
        let p = pair();
        let (pp, sp) = (p.primary.port(), p.standby.port());
        let pooler = pooler(&p, vec![entry("rw", [pp, sp], "read-write")]);
        assert_eq!(lands_on(&pooler, "rw").await, (pp, false));
        let stopped = Instant::now();
        p.primary.stop_server(StopMode::Fast);
        p.standby.promote();
        loop {
            if let Ok(c) = client(&pooler, "rw").await {
                if let Ok((port, false)) = where_am_i(&c).await {
                    assert_eq!(port, sp);
                    break;
                }
            }
            assert!(stopped.elapsed() < Duration::from_secs(60), "no failover");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let t = stopped.elapsed().as_secs_f64();
        eprintln!("round {round}: {t:.3} s");
        times.push(t);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    eprintln!("failover times {times:?}; median {:.3} s", times[2]);
}
