//! Process life cycle: SIGTERM (stop accepting, let sessions finish up to
//! shutdown_timeout, then FATAL 57P01), SIGINT (at once), the socket file
//! removed on exit, a stale socket file replaced and a live one refused.

mod common;

use std::time::{Duration, Instant};

use common::wait::WAIT;
use common::{PgCluster, Pooler, PoolerOpts, RawConn, Reply, Transport, SCRAM_USER, TEST_DB};

fn login(pooler: &Pooler, t: Transport) -> RawConn {
    common::scram_login(&pooler.endpoint(t))
}

/// True when a new client can no longer log in over `t`.
fn refuses_new_clients(pooler: &Pooler, t: Transport) -> bool {
    match RawConn::try_connect(&pooler.endpoint(t)) {
        Err(_) => true,
        Ok(mut raw) => raw
            .login(
                &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                Some(SCRAM_USER.1),
            )
            .is_err(),
    }
}

/// Reads `raw` (session `who`) until the pooler closes it: FATAL 57P01 first.
fn closed_with_57p01(raw: &mut RawConn, who: &str) {
    raw.fatal_then_close(Duration::from_secs(5), "57P01", who);
}

#[test]
fn sigterm_stops_accepting_then_closes_sessions_with_57p01() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default().shutdown_timeout("1s"));
    let socket = pooler.socket_path();
    let mut idle_unix = login(&pooler, Transport::Unix);
    let mut idle_tcp = login(&pooler, Transport::Tcp);
    let mut busy = login(&pooler, Transport::Tcp);

    let t0 = Instant::now();
    pooler.signal(libc::SIGTERM);
    assert!(
        pooler.wait_for_log("safe shutdown: no new clients", 1, WAIT),
        "SIGTERM not acted on"
    );

    // Sessions may finish their work during the grace period.
    let res = busy.query("SELECT pg_sleep(0.3), 'finished'");
    assert!(
        res.error.is_none(),
        "query during the grace period: {res:?}"
    );
    assert_eq!(res.rows[0][1].as_deref(), Some("finished"));

    // No new clients.
    for t in Transport::ALL {
        assert!(
            refuses_new_clients(&pooler, t),
            "a new client over {t:?} logged in after SIGTERM"
        );
    }
    assert!(
        t0.elapsed() < Duration::from_millis(900),
        "new-client checks took {:?}: was a new client left hanging?",
        t0.elapsed()
    );

    // After shutdown_timeout, every session gets FATAL 57P01 and is closed.
    for (name, raw) in [
        ("unix", &mut idle_unix),
        ("tcp", &mut idle_tcp),
        ("busy", &mut busy),
    ] {
        closed_with_57p01(raw, name);
        let elapsed = t0.elapsed();
        assert!(
            elapsed >= Duration::from_millis(800) && elapsed < Duration::from_secs(4),
            "{name} session closed {elapsed:?} after SIGTERM with shutdown_timeout = 1s"
        );
    }
    let status = pooler
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("pgharbor still running 5 s after its sessions were closed"));
    assert!(
        status.code().is_some(),
        "pgharbor died of a signal: {status}"
    );
    assert!(!socket.exists(), "socket file left behind after SIGTERM");
}

#[test]
fn sigterm_exits_as_soon_as_the_last_session_ends() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default().shutdown_timeout("30s"));
    let mut raw = login(&pooler, Transport::Unix);
    pooler.signal(libc::SIGTERM);
    // The drain has begun (so the session below is one it waits for).
    assert!(
        pooler.wait_for_log("safe shutdown: no new clients", 1, WAIT),
        "SIGTERM not acted on"
    );
    assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
    let t0 = Instant::now();
    raw.terminate();
    drop(raw);
    let status = pooler.wait_exit(Duration::from_secs(5));
    assert!(
        status.is_some(),
        "pgharbor waited for shutdown_timeout although no session was left"
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
}

/// Idle transaction-pooling clients hold no backend and wait on their
/// socket and their registry entry's signals alone: the shutdown still
/// reaches each with FATAL 57P01.
#[test]
fn a_shutdown_reaches_idle_transaction_pooling_clients() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::transaction(2).shutdown_timeout("1s");
    let mut pooler = Pooler::start(pg, opts);
    let mut idle: Vec<RawConn> = (0..4)
        .map(|i| {
            let t = [Transport::Unix, Transport::Tcp][i % 2];
            let mut raw = login(&pooler, t);
            // One transaction each: the backend went back, the client idles.
            let result = raw.query("SELECT 1");
            assert!(result.error.is_none(), "{:?}", result.error);
            raw
        })
        .collect();
    let t0 = Instant::now();
    pooler.signal(libc::SIGTERM);
    for (i, raw) in idle.iter_mut().enumerate() {
        closed_with_57p01(raw, &format!("client {i}"));
    }
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "idle clients closed {:?} after SIGTERM with shutdown_timeout = 1s",
        t0.elapsed()
    );
    pooler
        .wait_exit(Duration::from_secs(5))
        .expect("pgharbor still running 5 s after its sessions were closed");
}

#[test]
fn sigint_exits_at_once_and_removes_the_socket() {
    let pg = PgCluster::shared();
    let mut pooler = Pooler::start(pg, PoolerOpts::default().shutdown_timeout("30s"));
    let socket = pooler.socket_path();
    assert!(socket.exists());
    let mut unix = login(&pooler, Transport::Unix);
    let mut tcp = login(&pooler, Transport::Tcp);
    let t0 = Instant::now();
    pooler.signal(libc::SIGINT);
    let status = pooler
        .wait_exit(Duration::from_secs(3))
        .expect("pgharbor still running 3 s after SIGINT");
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert!(
        status.code().is_some(),
        "pgharbor died of a signal: {status}"
    );
    assert!(!socket.exists(), "socket file left behind after SIGINT");
    for raw in [&mut unix, &mut tcp] {
        let replies = raw.read_until_close(Duration::from_secs(2));
        assert_eq!(replies.last(), Some(&Reply::Closed), "{replies:?}");
    }
}

#[test]
fn a_stale_socket_file_is_replaced_and_a_live_one_refused() {
    let pg = PgCluster::shared();
    let first = Pooler::start(pg, PoolerOpts::default());
    let sock_dir = first.socket_dir().to_path_buf();
    let port = first.port();

    // A second pooler on the live socket must refuse to start.
    let clash = PoolerOpts {
        tcp: false,
        port: Some(port),
        socket_dir: Some(sock_dir.clone()),
        ..Default::default()
    };
    let failure = match Pooler::try_start(pg, clash.clone()) {
        Err(e) => e,
        Ok(mut p) => match p.wait_exit(Duration::from_secs(3)) {
            Some(status) => {
                assert!(!status.success(), "clashing pooler exited with {status}");
                p.log_text()
            }
            None => panic!("a second pooler runs on a live socket"),
        },
    };
    assert!(
        failure.contains(".s.PGSQL") || failure.to_lowercase().contains("socket"),
        "start-up failure should name the socket: {failure}"
    );
    let mut first = first;
    first.assert_alive();
    let mut raw = login(&first, Transport::Unix);
    assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
    drop(raw);

    // Crash the first one: the socket file stays behind, stale.
    first.signal(libc::SIGKILL);
    first.wait_exit(Duration::from_secs(5)).unwrap();
    assert!(sock_dir.join(format!(".s.PGSQL.{port}")).exists());
    let second = Pooler::start(pg, clash);
    let mut raw = login(&second, Transport::Unix);
    assert_eq!(raw.query("SELECT 2").scalar().as_deref(), Some("2"));
    raw.terminate();
    drop(second);
    drop(first);
}
