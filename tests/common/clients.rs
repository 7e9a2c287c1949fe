//! Real clients: tokio-postgres, psql and pgbench.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::pooler::Pooler;
use super::util::clean_libpq_env;
use super::Transport;

/// Connection string to the pooler's Unix socket.
pub fn conninfo_unix(pooler: &Pooler, user: &str, password: Option<&str>, db: &str) -> String {
    pooler.conninfo(Transport::Unix, user, password, db)
}

/// Connection string to the pooler's TCP port (sslmode=disable).
pub fn conninfo_tcp(pooler: &Pooler, user: &str, password: Option<&str>, db: &str) -> String {
    pooler.conninfo(Transport::Tcp, user, password, db)
}

/// Connects with tokio-postgres (NoTls) and drives the connection on a
/// spawned task. Must be called inside a tokio runtime.
pub async fn connect(conninfo: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Like [`connect`], panicking with the error (and its SQLSTATE) on failure.
pub async fn connect_ok(conninfo: &str) -> Client {
    match connect(conninfo).await {
        Ok(c) => c,
        Err(e) => panic!("connect {conninfo}: {}", describe_error(&e)),
    }
}

/// The PostgreSQL backend process serving `c` now (`pg_backend_pid()`).
pub async fn backend_pid(c: &Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("SELECT pg_backend_pid()")
        .get(0)
}

/// Connects and forwards notices and notifications to the returned channel.
pub async fn connect_with_messages(
    conninfo: &str,
) -> Result<(Client, mpsc::UnboundedReceiver<AsyncMessage>), tokio_postgres::Error> {
    let (client, mut connection) = tokio_postgres::connect(conninfo, NoTls).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(msg)) = stream.next().await {
            if tx.send(msg).is_err() {
                // Nobody listens any more; keep driving the connection.
                continue;
            }
        }
    });
    Ok((client, rx))
}

/// "SQLSTATE severity: message" for a tokio-postgres error, or its Debug form.
pub fn describe_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{} {} {}: {}",
            db.code().code(),
            db.severity(),
            db.message(),
            e
        ),
        None => format!("{e:?}"),
    }
}

/// An ErrorResponse as (severity, SQLSTATE, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbErr {
    pub severity: String,
    pub code: String,
    pub message: String,
}

/// Connects, expecting the server to refuse with an ErrorResponse; panics
/// when the login succeeds or fails without one.
pub async fn connect_err(conninfo: &str) -> DbErr {
    match connect(conninfo).await {
        Ok(_) => panic!("login unexpectedly succeeded: {conninfo}"),
        Err(e) => db_err(&e).unwrap_or_else(|| {
            panic!("login to {conninfo} failed without an ErrorResponse: {e:?}")
        }),
    }
}

/// The ErrorResponse behind a tokio-postgres error, if there was one.
pub fn db_err(e: &tokio_postgres::Error) -> Option<DbErr> {
    e.as_db_error().map(|db| DbErr {
        severity: db.severity().to_string(),
        code: db.code().code().to_string(),
        message: db.message().to_string(),
    })
}

/// The SQLSTATE of a tokio-postgres error that came from an ErrorResponse.
pub fn sqlstate(e: &tokio_postgres::Error) -> Option<String> {
    e.as_db_error().map(|db| db.code().code().to_string())
}

/// Directory with psql and pgbench: PATH first, else the server's bin dir.
fn client_bin(name: &str) -> PathBuf {
    static BINDIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.exists())
    });
    if let Some(p) = on_path {
        return p;
    }
    let dir = BINDIR.get_or_init(|| {
        Command::new("pg_config")
            .arg("--bindir")
            .output()
            .ok()
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    });
    dir.as_deref().unwrap_or(Path::new("/usr/bin")).join(name)
}

/// A psql command for `conninfo` (without password) with PGPASSWORD set when
/// given, `-X`, ON_ERROR_STOP and a clean libpq environment. Add args and run.
pub fn psql_cmd(conninfo: &str, password: Option<&str>) -> Command {
    let mut cmd = Command::new(client_bin("psql"));
    clean_libpq_env(&mut cmd);
    if let Some(p) = password {
        cmd.env("PGPASSWORD", p);
    }
    cmd.args(["-X", "-v", "ON_ERROR_STOP=1", "-d", conninfo])
        .stdin(Stdio::null());
    cmd
}

/// Runs `psql -At -c sql` and returns its output.
pub fn psql(conninfo: &str, password: Option<&str>, sql: &str) -> Output {
    psql_cmd(conninfo, password)
        .args(["-q", "-At", "-c", sql])
        .output()
        .expect("run psql")
}

/// Like [`psql`], panicking on failure; returns trimmed stdout.
pub fn psql_ok(conninfo: &str, password: Option<&str>, sql: &str) -> String {
    let out = psql(conninfo, password, sql);
    assert!(
        out.status.success(),
        "psql {conninfo:?} {sql:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A pgbench command against host/port/user/db with PGPASSWORD set.
pub fn pgbench_cmd(host: &str, port: u16, user: &str, password: Option<&str>, db: &str) -> Command {
    let mut cmd = Command::new(client_bin("pgbench"));
    clean_libpq_env(&mut cmd);
    cmd.env("PGHOST", host)
        .env("PGPORT", port.to_string())
        .env("PGUSER", user)
        .env("PGDATABASE", db)
        .env("PGSSLMODE", "disable")
        .stdin(Stdio::null());
    if let Some(p) = password {
        cmd.env("PGPASSWORD", p);
    }
    cmd
}

/// Runs `SELECT pg_sleep(secs)` on `client`, cancels it with `token` once
/// PostgreSQL shows it running, and gives back the client with the error
/// the query ended with; panics unless the cancel ends it within 10 s.
pub async fn sleep_and_cancel(
    pg: &super::PgCluster,
    client: Client,
    token: &tokio_postgres::CancelToken,
    secs: u32,
) -> (Client, tokio_postgres::Error) {
    let query = format!("SELECT pg_sleep({secs})");
    let marker = format!("pg_sleep({secs})");
    let sleeping = tokio::spawn(async move {
        let r = client.batch_execute(&query).await;
        (client, r)
    });
    tokio::task::block_in_place(|| super::wait::wait_active(pg, &marker));
    token.cancel_query(NoTls).await.expect("send the cancel");
    let (client, r) = tokio::time::timeout(std::time::Duration::from_secs(10), sleeping)
        .await
        .expect("the cancel did not reach the query")
        .expect("the query task");
    let err = r.expect_err("pg_sleep was not cancelled");
    (client, err)
}
