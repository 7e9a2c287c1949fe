//! Nothing waits forever on a backend (issue 12, item 2): a PostgreSQL
//! backend frozen with SIGSTOP under each timeout that should end the wait
//! (query_wait_timeout over a checkout stuck in the check query,
//! server_command_timeout over the check query, the reset, the login SETs
//! and the pooler's own queued SETs in the relay), libpq's connect_timeout
//! toward a listener that accepts and never answers, and the keepalive
//! options read back from pgharbor's own sockets with getsockopt.
//!
//! Every frozen backend is thawed by a Drop guard, so a failing test never
//! leaves a stopped postgres behind; every client call has a deadline.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use common::util::free_port;
use common::util::kill;
use common::{
    connect, db_err, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER,
    TEST_DB,
};
use support::{console, show, show_until};
use tokio_postgres::Client;

/// Longest any single step of these tests may take.
const STEP: Duration = Duration::from_secs(20);

/// A postgres backend stopped with SIGSTOP; SIGCONT on drop.
struct Frozen(u32);

impl Frozen {
    fn new(pid: i32) -> Frozen {
        let pid = u32::try_from(pid).expect("backend pid");
        kill(pid, libc::SIGSTOP);
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        kill(self.0, libc::SIGCONT);
    }
}

/// `f` within [`STEP`], with how long it took.
async fn timed<T>(what: &str, f: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    match tokio::time::timeout(STEP, f).await {
        Ok(v) => (v, started.elapsed()),
        Err(_) => panic!("{what}: still waiting after {STEP:?}"),
    }
}

fn opts(pool: &str) -> PoolerOpts {
    let mut o = PoolerOpts::default()
        .pool_size(1)
        .admin_users(&[SCRAM_USER.0])
        .pool_toml(pool);
    o.port = Some(free_port());
    o
}

fn app(pooler: &Pooler) -> String {
    pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)
}

/// By simple query: a prepared statement's Close (sent when tokio-postgres
/// drops it) would be a client statement left owed on a frozen backend.
async fn pid_of(c: &Client) -> i32 {
    let rows = c.simple_query("SELECT pg_backend_pid()").await;
    let rows = rows.expect("SELECT pg_backend_pid()");
    let pid = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
        _ => None,
    });
    pid.expect("a pid")
}

/// Logs a client in and out, leaving its backend idle in the pool; its pid.
async fn park_a_backend(pooler: &Pooler, admin: &Client) -> i32 {
    let c = timed("first login", connect(&app(pooler))).await.0;
    let pid = pid_of(&c.expect("first login")).await;
    show_until(admin, "SHOW POOLS", |p| {
        p.rows.len() == 1 && p.int(0, "sv_idle") == 1 && p.int(0, "sv_active") == 0
    })
    .await;
    pid
}

/// Whether SHOW SERVERS lists a backend with process id `pid`.
async fn listed(admin: &Client, pid: i32) -> bool {
    let servers = show(admin, "SHOW SERVERS").await;
    let pid = pid.to_string();
    (0..servers.rows.len()).any(|r| servers.get(r, "remote_pid") == Some(pid.as_str()))
}

/// The case of the report: server_check_delay = 0 and a frozen backend.
/// Before, the client waited past query_wait_timeout (the fast path had no
/// deadline); now it gets 53300 within it and the frozen backend is closed.
#[tokio::test(flavor = "multi_thread")]
async fn query_wait_timeout_bounds_a_checkout_stuck_in_the_check_query() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        opts("server_check_delay = \"0s\"").query_wait_timeout("3s"),
    );
    let admin = console(&pooler, Transport::Tcp).await;
    let pid = park_a_backend(&pooler, &admin).await;
    let frozen = Frozen::new(pid);
    let (got, took) = timed("login over a frozen backend", connect(&app(&pooler))).await;
    let e = got.err().and_then(|e| db_err(&e));
    let e = e.unwrap_or_else(|| panic!("no ErrorResponse after {took:?}"));
    eprintln!("query_wait_timeout = 3s: error after {took:?}: {e:?}");
    assert_eq!(e.code, "53300", "{e:?}");
    assert!(e.message.contains("query_wait_timeout (3s)"), "{e:?}");
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_millis(4500),
        "53300 after {took:?}, query_wait_timeout = 3s"
    );
    assert!(
        !listed(&admin, pid).await,
        "the frozen backend is still in the pool"
    );
    drop(frozen);
    // Its place is free again: the next client gets a fresh backend.
    let c = timed("login after the timeout", connect(&app(&pooler)))
        .await
        .0;
    assert_ne!(pid_of(&c.expect("login after the timeout")).await, pid);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_query_without_answer_closes_the_backend_and_serves_the_client() {
    let pg = PgCluster::shared();
    let pool = "server_check_delay = \"0s\"\nserver_command_timeout = \"1s\"";
    let pooler = Pooler::start(pg, opts(pool).query_wait_timeout("10s"));
    let admin = console(&pooler, Transport::Tcp).await;
    let pid = park_a_backend(&pooler, &admin).await;
    let _frozen = Frozen::new(pid);
    let (got, took) = timed("login over a frozen backend", connect(&app(&pooler))).await;
    let c = got.unwrap_or_else(|e| panic!("login failed after {took:?}: {e:?}"));
    assert_ne!(pid_of(&c).await, pid, "got the frozen backend");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "served after {took:?}, server_command_timeout = 1s"
    );
    assert!(pooler.wait_for_log("server_check_query failed", 1, STEP));
}

/// Before, a reset that never came back kept the pool's only place: the
/// next client waited out query_wait_timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_reset_without_answer_gives_the_pool_place_back() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        opts("server_command_timeout = \"1s\"").query_wait_timeout("10s"),
    );
    let admin = console(&pooler, Transport::Tcp).await;
    let a = timed("first login", connect(&app(&pooler))).await.0;
    let a = a.expect("first login");
    let pid = pid_of(&a).await;
    let _frozen = Frozen::new(pid);
    drop(a); // DISCARD ALL goes to the frozen backend.
    let (got, took) = timed("login while the reset hangs", connect(&app(&pooler))).await;
    let b = got.unwrap_or_else(|e| panic!("login failed after {took:?}: {e:?}"));
    assert_ne!(pid_of(&b).await, pid);
    assert!(took < Duration::from_secs(5), "served after {took:?}");
    assert!(pooler.wait_for_log(
        "reset failed: server did not answer server_reset_query",
        1,
        STEP
    ));
    assert!(!listed(&admin, pid).await);
}

/// A login whose parameters need a SET on a frozen backend gets FATAL 08006.
#[tokio::test(flavor = "multi_thread")]
async fn login_sets_without_answer_end_in_an_error() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        opts("server_command_timeout = \"1s\"").query_wait_timeout("10s"),
    );
    let admin = console(&pooler, Transport::Tcp).await;
    let pid = park_a_backend(&pooler, &admin).await;
    let _frozen = Frozen::new(pid);
    let conninfo = format!("{} options='-c work_mem=12345kB'", app(&pooler));
    let (got, took) = timed("login with a SET", connect(&conninfo)).await;
    let e = got.err().and_then(|e| db_err(&e));
    let e = e.unwrap_or_else(|| panic!("no ErrorResponse after {took:?}"));
    assert_eq!(
        (e.severity.as_str(), e.code.as_str()),
        ("FATAL", "08006"),
        "{e:?}"
    );
    assert!(
        e.message.contains("within server_command_timeout (1s)"),
        "{e:?}"
    );
    assert!(took < Duration::from_secs(5), "error after {took:?}");
    // The backend was closed, so its place serves the next client.
    show_until(&admin, "SHOW POOLS", |p| p.int(0, "sv_active") == 0).await;
    assert!(!listed(&admin, pid).await);
}

/// Transaction pooling: the RESET the pooler slips in ahead of a client's
/// query (another client SET work_mem on that backend) is its own
/// statement, bounded by server_command_timeout; before, the client hung.
#[tokio::test(flavor = "multi_thread")]
async fn the_poolers_own_statements_in_the_relay_are_bounded() {
    let pg = PgCluster::shared();
    let mut o = opts("server_command_timeout = \"1s\"").query_wait_timeout("10s");
    o.mode = "transaction".into();
    let pooler = Pooler::start(pg, o);
    let b = timed("login b", connect(&app(&pooler))).await.0;
    let b = b.expect("login b");
    b.simple_query("SELECT 1").await.expect("b's first query");
    let a = timed("login a", connect(&app(&pooler))).await.0;
    let a = a.expect("login a");
    let pid = pid_of(&a).await;
    a.simple_query("SET work_mem = '5MB'").await.expect("SET");
    let _frozen = Frozen::new(pid);
    let (got, took) = timed("b's query", b.simple_query("SELECT 2")).await;
    let e = got.err().and_then(|e| db_err(&e));
    let e = e.unwrap_or_else(|| panic!("no ErrorResponse after {took:?}"));
    assert_eq!(e.code, "08006", "{e:?}");
    assert!(e.message.contains("server_command_timeout (1s)"), "{e:?}");
    assert!(took < Duration::from_secs(5), "error after {took:?}");
}

/// libpq's connect_timeout, per attempt, at least 2 s, toward a server that
/// accepts the TCP connection and never says a word.
#[tokio::test(flavor = "multi_thread")]
async fn connect_timeout_toward_a_silent_listener() {
    let pg = PgCluster::shared();
    let port = free_port();
    // The kernel completes the handshakes; nobody ever reads.
    let _silent = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind");
    let entry = |name: &str, extra: &str| {
        DbEntry::new(name, Backend::Tcp).conninfo_extra(&format!("port={port} {extra}"))
    };
    let mut o = opts("").databases(vec![
        entry("silent_ct1", "connect_timeout=1"),
        entry("silent_ct3", "connect_timeout=3"),
        entry("silent_none", ""),
    ]);
    o.server_connect_timeout = "5s".into();
    let pooler = Pooler::start(pg, o);
    let login = |db: &str| {
        let c = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), db);
        async move { connect(&c).await }
    };
    let cases = [
        // libpq's minimum: 1 means 2.
        ("silent_ct1", Duration::from_secs(2)),
        ("silent_ct3", Duration::from_secs(3)),
        // No connect_timeout: server_connect_timeout bounds it.
        ("silent_none", Duration::from_secs(5)),
    ];
    for (db, want) in cases {
        let (got, took) = timed(db, login(db)).await;
        let e = got.err().and_then(|e| db_err(&e));
        let e = e.unwrap_or_else(|| panic!("{db}: no ErrorResponse after {took:?}"));
        assert_eq!(e.code, "08006", "{db}: {e:?}");
        assert!(e.message.contains("timed out connecting"), "{db}: {e:?}");
        assert!(
            took >= want - Duration::from_millis(100) && took < want + Duration::from_millis(1500),
            "{db}: error after {took:?}, expected about {want:?}"
        );
    }
}

/// Duplicates of pgharbor's TCP sockets (pidfd_getfd: root may), to read
/// their options with getsockopt.
fn pooler_tcp_sockets(pid: u32) -> Vec<socket2::Socket> {
    // SAFETY: plain syscalls; every fd returned is new and owned below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    let pidfd = pidfd as libc::c_int;
    let mut out = Vec::new();
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("read /proc/PID/fd");
    for entry in dir.flatten() {
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if !is_socket {
            continue;
        }
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
        if got >= 0 {
            // SAFETY: pidfd_getfd returned a new descriptor we own.
            out.push(unsafe { socket2::Socket::from_raw_fd(got as libc::c_int) });
        }
    }
    unsafe { libc::close(pidfd) };
    out
}

fn addr(s: &socket2::Socket, peer: bool) -> Option<SocketAddr> {
    let a = if peer { s.peer_addr() } else { s.local_addr() };
    a.ok().and_then(|a| a.as_socket())
}

#[derive(Debug, PartialEq, Eq)]
struct Options {
    keepalive: bool,
    idle: Duration,
    interval: Duration,
    count: u32,
    user_timeout: Option<Duration>,
}

fn options(s: &socket2::Socket) -> Options {
    Options {
        keepalive: s.keepalive().expect("SO_KEEPALIVE"),
        idle: s.keepalive_time().expect("TCP_KEEPIDLE"),
        interval: s.keepalive_interval().expect("TCP_KEEPINTVL"),
        count: s.keepalive_retries().expect("TCP_KEEPCNT"),
        user_timeout: s.tcp_user_timeout().expect("TCP_USER_TIMEOUT"),
    }
}

/// The kernel's defaults, read from a fresh socket.
fn system_defaults() -> Options {
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    options(&s)
}

#[tokio::test(flavor = "multi_thread")]
async fn backend_keepalive_options_are_on_the_socket() {
    let pg = PgCluster::shared();
    let timings =
        "keepalives_idle=17 keepalives_interval=3 keepalives_count=4 tcp_user_timeout=2500";
    let pooler = Pooler::start(
        pg,
        opts("").databases(vec![
            DbEntry::new("ka_set", Backend::Tcp).conninfo_extra(timings),
            DbEntry::new("ka_default", Backend::Tcp),
            DbEntry::new("ka_off", Backend::Tcp).conninfo_extra("keepalives=0"),
            // Ignored on a socket, as libpq does.
            DbEntry::new("ka_unix", Backend::Unix).conninfo_extra(timings),
        ]),
    );
    let pg_addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, pg.port()));
    let defaults = system_defaults();
    let cases = [
        (
            "ka_set",
            Options {
                keepalive: true,
                idle: Duration::from_secs(17),
                interval: Duration::from_secs(3),
                count: 4,
                user_timeout: Some(Duration::from_millis(2500)),
            },
        ),
        (
            "ka_default",
            Options {
                keepalive: true,
                ..system_defaults()
            },
        ),
        (
            "ka_off",
            Options {
                keepalive: false,
                ..system_defaults()
            },
        ),
    ];
    let mut seen = 0;
    for (db, want) in cases {
        let before: Vec<_> = pooler_tcp_sockets(pooler.pid())
            .iter()
            .filter_map(|s| addr(s, false))
            .collect();
        let conninfo = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), db);
        let c = timed(db, connect(&conninfo)).await.0;
        let c = c.unwrap_or_else(|e| panic!("{db}: {e:?}"));
        let new: Vec<_> = pooler_tcp_sockets(pooler.pid())
            .into_iter()
            .filter(|s| addr(s, true) == Some(pg_addr))
            .filter(|s| addr(s, false).is_some_and(|a| !before.contains(&a)))
            .collect();
        assert_eq!(new.len(), 1, "{db}: one new backend socket");
        assert_eq!(
            options(&new[0]),
            want,
            "{db} (system defaults {defaults:?})"
        );
        seen += 1;
        drop(c);
    }
    assert_eq!(seen, 3);
    let conninfo = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), "ka_unix");
    let c = timed("ka_unix", connect(&conninfo)).await.0;
    c.expect("a Unix-socket backend ignores the keepalive keywords")
        .simple_query("SELECT 1")
        .await
        .expect("SELECT 1");
}

#[tokio::test(flavor = "multi_thread")]
async fn client_keepalive_options_are_on_the_socket() {
    let pg = PgCluster::shared();
    let listen = "tcp_keepidle = \"21s\"\ntcp_keepintvl = \"4s\"\ntcp_keepcnt = 5\n\
                  tcp_user_timeout = \"1500ms\"";
    let set = Pooler::start(pg, opts("").listen_toml(listen));
    let default = Pooler::start(pg, opts(""));
    let off = Pooler::start(pg, opts("").listen_toml("tcp_keepalive = false"));
    let cases = [
        (
            &set,
            Options {
                keepalive: true,
                idle: Duration::from_secs(21),
                interval: Duration::from_secs(4),
                count: 5,
                user_timeout: Some(Duration::from_millis(1500)),
            },
        ),
        (
            &default,
            Options {
                keepalive: true,
                ..system_defaults()
            },
        ),
        (
            &off,
            Options {
                keepalive: false,
                ..system_defaults()
            },
        ),
    ];
    for (pooler, want) in cases {
        let conninfo = pooler.conninfo(Transport::Tcp, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
        let c = timed("tcp login", connect(&conninfo)).await.0;
        let _c = c.expect("tcp login");
        // Accepted sockets: local port = the listening port, with a peer.
        let accepted: Vec<_> = pooler_tcp_sockets(pooler.pid())
            .into_iter()
            .filter(|s| addr(s, false).is_some_and(|a| a.port() == pooler.port()))
            .filter(|s| addr(s, true).is_some())
            .collect();
        assert_eq!(accepted.len(), 1, "one client connection");
        assert_eq!(options(&accepted[0]), want);
    }
}
