//! The operator signals on a real process: SIGUSR1/SIGUSR2 pause and resume
//! like the console's PAUSE and RESUME, SIGHUP reloads, a second SIGTERM or
//! a SIGQUIT cuts a safe shutdown short, and no signal ends the process by
//! its default action or leaves the socket file behind.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use common::PgCluster;
use common::{connect_ok, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER, TEST_DB};
use support::{console, show, show_until};

fn login(pooler: &Pooler, t: Transport) -> RawConn {
    common::scram_login(&pooler.endpoint(t))
}

fn paused(t: &support::Table) -> i64 {
    t.int(t.find(&[("name", TEST_DB)]), "paused")
}

#[tokio::test(flavor = "multi_thread")]
async fn sigusr1_pauses_and_sigusr2_resumes() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::transaction(2).admin_users(&[SCRAM_USER.0]));
    let admin = console(&pooler, Transport::Tcp).await;
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let client = connect_ok(&app).await;
    client.simple_query("SELECT 1").await.expect("first query");

    pooler.signal(libc::SIGUSR1);
    show_until(&admin, "SHOW DATABASES", |t| paused(t) == 1).await;
    assert!(pooler.wait_for_log("SIGUSR1: paused", 1, Duration::from_secs(5)));
    pooler.assert_alive();

    // Paused: a transaction waits for a backend instead of running.
    let query = tokio::spawn(async move {
        let r = client.simple_query("SELECT 'after resume'").await;
        (client, r)
    });
    show_until(&admin, "SHOW POOLS", |p| p.int(0, "cl_waiting") == 1).await;
    assert!(!query.is_finished(), "a query ran while paused");

    pooler.signal(libc::SIGUSR2);
    let (_client, r) = tokio::time::timeout(Duration::from_secs(5), query)
        .await
        .expect("query still waiting 5 s after SIGUSR2")
        .unwrap();
    r.expect("query after SIGUSR2");
    assert_eq!(paused(&show(&admin, "SHOW DATABASES").await), 0);

    // A second RESUME is refused, as on the console, and logged.
    pooler.signal(libc::SIGUSR2);
    assert!(pooler.wait_for_log("SIGUSR2: RESUME refused", 1, Duration::from_secs(5)));
    pooler.assert_alive();
    let log = pooler.log_text();
    for sig in ["SIGUSR1", "SIGUSR2"] {
        assert!(
            log.contains(&format!("signal received signal={sig}")),
            "{log}"
        );
    }
}

#[test]
fn sighup_reloads_and_keeps_serving() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    pooler.signal(libc::SIGHUP);
    assert!(pooler.wait_for_log("configuration reloaded", 1, Duration::from_secs(5)));
    pooler.assert_alive();
    let mut raw = login(&pooler, Transport::Unix);
    assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
}

/// Waits for the exit and checks it was an orderly one (an exit code, not
/// death by signal) that removed the socket file.
fn assert_clean_exit(pooler: &mut Pooler, within: Duration, what: &str) {
    let socket = pooler.socket_path();
    let status = pooler
        .wait_exit(within)
        .unwrap_or_else(|| panic!("pgharbor still running {within:?} after {what}"));
    assert!(
        status.code().is_some(),
        "{what}: died of a signal: {status}"
    );
    assert!(!socket.exists(), "{what}: socket file left behind");
    assert!(
        pooler.log_text().contains("pgharbor stopped"),
        "{what}: no orderly stop in the log"
    );
}

#[test]
fn a_second_sigterm_or_a_sigquit_cuts_the_safe_shutdown_short() {
    let pg = PgCluster::shared();
    for second in [libc::SIGTERM, libc::SIGQUIT, libc::SIGINT] {
        let mut pooler = Pooler::start(pg, PoolerOpts::default().shutdown_timeout("30s"));
        let mut idle = login(&pooler, Transport::Tcp);
        pooler.signal(libc::SIGTERM);
        assert!(pooler.wait_for_log("safe shutdown", 1, Duration::from_secs(5)));
        pooler.assert_alive();
        let t0 = Instant::now();
        pooler.signal(second);
        let replies = idle.read_until_close(Duration::from_secs(5));
        let err = replies
            .iter()
            .find_map(Reply::error)
            .unwrap_or_else(|| panic!("signal {second}: no ErrorResponse in {replies:?}"));
        assert_eq!(err.code, "57P01", "{err:?}");
        assert_clean_exit(&mut pooler, Duration::from_secs(5), "the second signal");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn sigquit_alone_is_an_immediate_shutdown() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default().shutdown_timeout("30s"));
    let mut idle = login(&pooler, Transport::Unix);
    pooler.signal(libc::SIGQUIT);
    let replies = idle.read_until_close(Duration::from_secs(5));
    assert!(
        replies
            .iter()
            .find_map(Reply::error)
            .is_some_and(|e| e.code == "57P01"),
        "{replies:?}"
    );
    assert_clean_exit(&mut pooler, Duration::from_secs(5), "SIGQUIT");
}

#[test]
fn no_signal_an_operator_sends_kills_the_process_silently() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default());
    for (sig, name) in [
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        pooler.signal(sig);
        let needle = format!("signal received signal={name}");
        assert!(
            pooler.wait_for_log(&needle, 1, Duration::from_secs(5)),
            "{name} not logged"
        );
        pooler.assert_alive();
    }
    let mut raw = login(&pooler, Transport::Tcp);
    assert_eq!(raw.query("SELECT 2").scalar().as_deref(), Some("2"));
    drop(raw);
    pooler.signal(libc::SIGTERM);
    assert_clean_exit(&mut pooler, Duration::from_secs(10), "SIGTERM");
}
