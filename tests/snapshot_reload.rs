//! A reload swaps the configuration and the auth file as one snapshot, and a
//! login reads that snapshot once: it can never pass the password check of
//! one reload and the privilege check of another.
//!
//! Two configurations alternate under concurrent logins to the admin
//! console, which needs no PostgreSQL: A lets alice in (her password is in
//! A's auth file, she is in A's `admin.users`), B lets bob in the same way.
//! Each of them sees only "logged in" (their snapshot) or "password
//! refused" (the other one). A mix of the two would show as the third
//! answer, 28000 "not allowed to connect to the admin console": a password
//! accepted by one reload's auth file, then refused by the other's
//! `admin.users`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgharbor::config::Config;
use pgharbor::listener::Listeners;
use pgharbor::pooler::Pooler;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;
use util::TempDir;

#[path = "common/util.rs"]
#[allow(dead_code)]
mod util;

/// Only names the socket file (`.s.PGSQL.<port>`) in a directory of this test's own.
const PORT: u16 = 6499;
/// How long logins and reloads race.
const RACE: Duration = Duration::from_secs(3);
/// Reloads the race must span, however long that takes up to [`RACE_LIMIT`].
const MIN_RELOADS: u32 = 10;
/// The longest the logins race, on a machine too loaded to reload often.
const RACE_LIMIT: Duration = Duration::from_secs(60);

/// A config that admits `user` (password `password`) to the console, with
/// an auth file holding only that user.
fn config(dir: &Path, user: &str, password: &str) -> Config {
    let auth = dir.join(format!("users-{user}.txt"));
    std::fs::write(&auth, format!("\"{user}\" \"{password}\"\n")).expect("auth file");
    let text = format!(
        "[listen]\naddresses = []\nport = {PORT}\nunix_socket_dir = \"{}\"\n\
         [auth]\nmethod = \"md5\"\nauth_file = \"{}\"\n\
         [admin]\nusers = [\"{user}\"]\n",
        dir.display(),
        auth.display()
    );
    Config::parse(&text, &dir.join("pgharbor.toml")).expect("config")
}

/// What one login to the console got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    LoggedIn,
    PasswordRefused,
    /// The mix this test exists to rule out.
    NotAnAdmin,
}

async fn login(dir: &Path, user: &str, password: &str) -> Outcome {
    let connect = tokio_postgres::Config::new()
        .host_path(dir)
        .port(PORT)
        .user(user)
        .password(password)
        .dbname("pgharbor")
        .connect_timeout(Duration::from_secs(5))
        .connect(NoTls)
        .await;
    match connect {
        Ok(_) => Outcome::LoggedIn,
        Err(e) if e.code() == Some(&SqlState::INVALID_PASSWORD) => Outcome::PasswordRefused,
        Err(e) if e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION) => {
            Outcome::NotAnAdmin
        }
        Err(e) => panic!("{user}: unexpected login error: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_login_never_mixes_two_reloads() {
    let dir = TempDir::new("snapshot");
    let a = || config(dir.path(), "alice", "pw-a");
    let b = || config(dir.path(), "bob", "pw-b");
    let listeners = Listeners::bind(&a()).await.expect("bind");
    let pooler = Pooler::new(a()).await.expect("pooler");
    let accept = tokio::spawn(pgharbor::client::accept(listeners, pooler.clone()));

    let stop = Arc::new(AtomicBool::new(false));
    // Reloads done so far: the logins race on until there were enough of
    // them (a loaded machine reloads slowly), within a hard deadline.
    let done = Arc::new(AtomicU32::new(0));
    let reloads = tokio::spawn({
        let (pooler, stop, done) = (pooler.clone(), stop.clone(), done.clone());
        let (a, b) = (a(), b());
        async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let next = if n % 2 == 0 { b.clone() } else { a.clone() };
                pooler.reload(next).await.expect("reload");
                n += 1;
                done.store(n, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
            n
        }
    });
    let mut logins = Vec::new();
    for i in 0..8 {
        let dir = dir.path().to_path_buf();
        let (user, password) = if i % 2 == 0 {
            ("alice", "pw-a")
        } else {
            ("bob", "pw-b")
        };
        let done = done.clone();
        logins.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let start = Instant::now();
            let racing = || {
                let elapsed = start.elapsed();
                elapsed < RACE_LIMIT
                    && (elapsed < RACE || done.load(Ordering::Relaxed) < MIN_RELOADS)
            };
            while racing() {
                seen.push(login(&dir, user, password).await);
            }
            (user, seen)
        }));
    }
    let mut counts = std::collections::BTreeMap::new();
    for l in logins {
        let (user, seen) = l.await.expect("login task");
        for outcome in seen {
            *counts.entry((user, format!("{outcome:?}"))).or_insert(0u32) += 1;
            assert_ne!(
                outcome,
                Outcome::NotAnAdmin,
                "{user} passed one reload's password check and another's admin.users check"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let reloaded = reloads.await.expect("reload task");
    pooler.stop_accepting.cancel();
    let _ = accept.await;
    // Both snapshots were in force while logins ran, or the race proved nothing.
    assert!(reloaded >= MIN_RELOADS, "only {reloaded} reloads");
    for user in ["alice", "bob"] {
        for outcome in ["LoggedIn", "PasswordRefused"] {
            assert!(
                counts.contains_key(&(user, outcome.to_string())),
                "{user} never {outcome}: {counts:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_failed_reload_keeps_the_whole_snapshot() {
    let dir = TempDir::new("snapshot-failed");
    let pooler = Pooler::new(config(dir.path(), "alice", "pw-a"))
        .await
        .expect("pooler");
    let before = pooler.snapshot();
    let broken = config(dir.path(), "bob", "pw-b");
    std::fs::remove_file(dir.path().join("users-bob.txt")).expect("remove auth file");
    assert!(pooler.reload(broken).await.is_err());
    let after = pooler.snapshot();
    assert!(
        Arc::ptr_eq(&before, &after),
        "a failed reload swapped something"
    );
    assert_eq!(after.config.admin.users, ["alice"]);
    assert!(after.secret("alice").is_some() && after.secret("bob").is_none());
}
