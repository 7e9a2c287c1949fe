//! Running as a system service, on real processes and without systemd as
//! PID 1: sd_notify to a NOTIFY_SOCKET the test binds itself (a path and an
//! abstract name), socket activation through Debian's
//! `systemd-socket-activate`, `--pidfile`, `--logfile` reopened on SIGHUP
//! and RELOAD, `service.user`, the open-files warning and the default config
//! path. Fixed ports 24131-24139 (below the ephemeral range `free_port`
//! draws from).

mod common;
#[path = "service_support/mod.rs"]
mod support;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::util::unique_temp_dir;
use common::wait::wait_until;
use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, TEST_DB, TRUST_USER};
use support::{serves, Running, Setup};

fn recv(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("no notification within 10 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// READY once serving, RELOADING then READY around SIGHUP, STOPPING on SIGTERM.
fn notify_round(setup: &Setup, sock: &UnixDatagram, notify_socket: &str) {
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut cmd = setup.pgharbor(&[]);
    cmd.env("NOTIFY_SOCKET", notify_socket);
    let mut p = Running::spawn(setup, cmd);
    let ready = recv(sock);
    assert!(ready.contains("READY=1\n"), "{ready:?}");
    assert!(
        ready.contains(&format!("MAINPID={}\n", p.pid())),
        "{ready:?}"
    );
    // READY means serving: no retry needed for the first client.
    let mut raw = RawConn::connect(&Endpoint::Tcp(setup.port));
    raw.login(&[("user", TRUST_USER), ("database", TEST_DB)], None)
        .expect("login right after READY=1");
    drop(raw);
    p.signal(libc::SIGHUP);
    let reloading = recv(sock);
    assert!(
        reloading.contains("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading:?}"
    );
    assert!(recv(sock).contains("READY=1\n"));
    p.signal(libc::SIGTERM);
    assert!(recv(sock).contains("STOPPING=1\n"));
    assert_eq!(p.wait_exit(), 0);
    assert!(!setup.socket().exists(), "socket file left behind");
}

#[test]
fn sd_notify_to_a_path_socket() {
    let setup = Setup::new(PgCluster::shared(), 24131, "");
    let path = setup.dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    notify_round(&setup, &sock, &path.display().to_string());
}

#[test]
fn sd_notify_to_an_abstract_socket() {
    let setup = Setup::new(PgCluster::shared(), 24132, "");
    let name = format!("pgharbor-test-notify-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let sock = UnixDatagram::bind_addr(&addr).unwrap();
    notify_round(&setup, &sock, &format!("@{name}"));
}

fn socket_activate(setup: &Setup, listen: &[String]) -> Running {
    let tool = "systemd-socket-activate";
    assert!(
        Command::new(tool).arg("--version").output().is_ok(),
        "{tool} not found: install Debian's systemd package (scripts/test.sh does)"
    );
    let mut cmd = Command::new(tool);
    for l in listen {
        cmd.arg("-l").arg(l);
    }
    cmd.arg("--fdname=first:second")
        .args(["-E", "RUST_LOG=info", "-E", "NO_COLOR=1"])
        .arg(Pooler::binary())
        .arg("--config")
        .arg(&setup.config);
    setup.output_to_log(&mut cmd);
    Running::spawn(setup, cmd)
}

#[test]
fn socket_activation_takes_the_inherited_sockets() {
    let setup = Setup::new(PgCluster::shared(), 24133, "");
    let socket = setup.socket();
    let mut p = socket_activate(
        &setup,
        &[
            format!("127.0.0.1:{}", setup.port),
            socket.display().to_string(),
        ],
    );
    // The first connection makes systemd-socket-activate exec pgharbor,
    // which then accepts it from the inherited socket.
    assert!(
        serves(&Endpoint::Tcp(setup.port)),
        "TCP: {}",
        setup.log_text()
    );
    assert!(
        serves(&Endpoint::Unix(socket.clone())),
        "Unix: {}",
        setup.log_text()
    );
    let exe = std::fs::read_link(format!("/proc/{}/exe", p.pid())).unwrap();
    assert_eq!(exe, Path::new(Pooler::binary()).canonicalize().unwrap());
    let log = setup.log_text();
    assert!(
        log.contains("inherited TCP socket fd=3 name=first"),
        "{log}"
    );
    assert!(
        log.contains("inherited Unix socket fd=4 name=second"),
        "{log}"
    );
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait_exit(), 0);
    // The socket file belongs to whoever bound it (the service manager).
    assert!(
        socket.exists(),
        "pgharbor removed a socket file it did not create"
    );
}

#[test]
fn socket_activation_refuses_a_socket_the_config_does_not_name() {
    let setup = Setup::new(PgCluster::shared(), 24134, "");
    let mut p = socket_activate(
        &setup,
        &["127.0.0.1:24135".into(), "127.0.0.1:24134".into()],
    );
    // Retried: systemd-socket-activate may not be listening yet.
    assert!(wait_until(Duration::from_secs(10), || {
        RawConn::try_connect(&Endpoint::Tcp(24135)).is_ok()
    }));
    assert_ne!(p.wait_exit(), 0);
    let log = setup.log_text();
    assert!(
        log.contains("127.0.0.1:24135, which the config does not name"),
        "{log}"
    );
}

#[test]
fn pidfile_is_written_refuses_a_second_start_and_is_removed() {
    let setup = Setup::new(PgCluster::shared(), 24136, "");
    let pidfile = setup.dir.join("run").join("pgharbor.pid");
    std::fs::create_dir(setup.dir.join("run")).unwrap();
    let pidarg = pidfile.display().to_string();
    let mut p = Running::spawn(&setup, setup.pgharbor(&["--pidfile", &pidarg]));
    assert!(serves(&Endpoint::Tcp(setup.port)));
    let text = std::fs::read_to_string(&pidfile).unwrap();
    assert_eq!(text.trim(), p.pid().to_string());

    let second = setup.pgharbor(&["--pidfile", &pidarg]).output().unwrap();
    assert!(!second.status.success());
    let log = setup.log_text();
    assert!(
        log.contains("is still running; is pgharbor already running?"),
        "{log}"
    );
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap(), text);

    p.signal(libc::SIGINT);
    assert_eq!(p.wait_exit(), 0);
    assert!(!pidfile.exists(), "pidfile left behind");
}

#[test]
fn logfile_is_reopened_on_sighup_and_on_reload() {
    let setup = Setup::new(PgCluster::shared(), 24137, "");
    let logfile = setup.dir.join("pgharbor.log");
    let arg = logfile.display().to_string();
    let mut p = Running::spawn(&setup, setup.pgharbor(&["--logfile", &arg]));
    assert!(setup.wait_log(&logfile, "pgharbor started"));
    assert!(
        !setup.log_text().contains("pgharbor started"),
        "logged to stderr too"
    );

    std::fs::rename(&logfile, setup.dir.join("pgharbor.log.1")).unwrap();
    p.signal(libc::SIGHUP);
    assert!(setup.wait_log(&logfile, "log file reopened"));

    std::fs::rename(&logfile, setup.dir.join("pgharbor.log.2")).unwrap();
    let mut admin = RawConn::connect(&Endpoint::Tcp(setup.port));
    admin
        .login(&[("user", TRUST_USER), ("database", "pgharbor")], None)
        .expect("admin login");
    let r = admin.query("RELOAD");
    assert!(r.error.is_none(), "{r:?}");
    assert!(setup.wait_log(&logfile, "log file reopened"));
    drop(admin);
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait_exit(), 0);
    assert!(std::fs::read_to_string(&logfile)
        .unwrap()
        .contains("pgharbor stopped"));
}

#[test]
fn a_low_open_files_limit_is_warned_about() {
    let setup = Setup::new(PgCluster::shared(), 24138, "");
    let mut cmd = setup.pgharbor(&[]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut p = Running::spawn(&setup, cmd);
    assert!(serves(&Endpoint::Tcp(setup.port)));
    let log = setup.log_text();
    assert!(
        log.contains("open-files limit (ulimit -n) is below max_client_conn"),
        "{log}"
    );
    assert!(log.contains("limit=256"), "{log}");
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait_exit(), 0);
}

#[test]
fn service_user_switches_after_binding_and_still_serves() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: switching users needs root");
        return;
    }
    let postgres = Command::new("id")
        .args(["-u", "postgres"])
        .output()
        .unwrap();
    let uid: u32 = String::from_utf8_lossy(&postgres.stdout)
        .trim()
        .parse()
        .unwrap();
    let sock_dir = unique_temp_dir("service-sock");
    std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let opts = PoolerOpts {
        socket_dir: Some(sock_dir.clone()),
        extra_toml: "[service]\nuser = \"postgres\"\n".into(),
        ..PoolerOpts::default()
    };
    let mut pooler = Pooler::start(PgCluster::shared(), opts);
    let status = std::fs::read_to_string(format!("/proc/{}/status", pooler.pid())).unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    let want = format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}");
    assert_eq!(uids, want, "real, effective, saved and fs uid");
    let socket = pooler.socket_path();
    assert_eq!(std::fs::metadata(&socket).unwrap().uid(), uid);
    assert!(pooler.log_text().contains("switched to service.user"));
    let mut raw = common::scram_login(&pooler.endpoint(common::Transport::Tcp));
    assert_eq!(raw.query("SELECT current_user").rows.len(), 1);
    drop(raw);
    pooler.signal(libc::SIGTERM);
    let exit = pooler
        .wait_exit(Duration::from_secs(10))
        .expect("still running");
    assert_eq!(exit.code(), Some(0));
    assert!(
        !socket.exists(),
        "socket file left behind by the unprivileged process"
    );
    let _ = std::fs::remove_dir_all(&sock_dir);
}

#[test]
fn the_default_config_path_is_absolute() {
    let dir = unique_temp_dir("service-default");
    let out = Command::new(Pooler::binary())
        .arg("check")
        .current_dir(&dir)
        .env_remove("PGHARBOR_CONFIG")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if Path::new("/etc/pgharbor/pgharbor.toml").exists() {
        return;
    }
    assert!(!out.status.success());
    assert!(stderr.contains("/etc/pgharbor/pgharbor.toml"), "{stderr}");
}
