//! Transaction pooling with many and varied clients: 1 000 tokio-postgres
//! clients over 10 backends, and Python clients (psycopg with server-side
//! prepared statements, asyncpg) whose named statements must follow them
//! from backend to backend.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::skip::skip_or_fail;
use common::{connect, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB, TRUST_USER};

const CLIENTS: usize = 1000;
const TXNS: i32 = 20;
const POOL: usize = 10;

/// Makes sure this process (and the pooler it spawns, which inherits the
/// limit) may open enough files for `need` descriptors.
fn raise_nofile(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur >= need {
            return;
        }
        assert!(
            lim.rlim_max >= need,
            "this test needs {need} open files; the hard limit is {}",
            lim.rlim_max
        );
        lim.rlim_cur = need;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0, "setrlimit");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_clients_over_ten_backends_each_see_exactly_their_rows() {
    // Client sockets here, client sockets + backends in the pooler, slack.
    raise_nofile(CLIENTS as u64 * 2 + 512);
    let pg = PgCluster::shared();
    pg.psql_ok(
        TEST_DB,
        "DROP TABLE IF EXISTS many_rows; CREATE TABLE many_rows(client int, n int); \
         GRANT ALL ON many_rows TO trust_user",
    );
    // trust between the test and the pooler: 1 000 SCRAM proofs in an
    // unoptimised test build would take longer than the whole workload.
    let p = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("trust")
            .mode("transaction")
            .pool_size(POOL)
            .max_client_conn(CLIENTS + 100),
    );
    let ci = p.conninfo(Transport::Unix, TRUST_USER, None, TEST_DB);

    // Open all clients first (in batches: a listen backlog overflows with a
    // thousand simultaneous connects on a Unix socket).
    let mut clients = Vec::with_capacity(CLIENTS);
    for chunk in 0..CLIENTS.div_ceil(50) {
        let batch: Vec<_> = (0..50.min(CLIENTS - chunk * 50))
            .map(|_| {
                let ci = ci.clone();
                tokio::spawn(async move {
                    let mut last = None;
                    for _ in 0..5 {
                        match connect(&ci).await {
                            Ok(c) => return c,
                            Err(e) => last = Some(e),
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    panic!("connect: {last:?}")
                })
            })
            .collect();
        for h in batch {
            clients.push(h.await.unwrap());
        }
    }
    assert_eq!(clients.len(), CLIENTS);

    // Watch how many backends PostgreSQL has for this role meanwhile.
    let admin = pg.admin_client().await;
    let most = Arc::new(AtomicI64::new(0));
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let most = most.clone();
        let watching = watching.clone();
        tokio::spawn(async move {
            while watching.load(Ordering::Relaxed) {
                let n: i64 = admin
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE usename = 'trust_user' AND backend_type = 'client backend'",
                        &[],
                    )
                    .await
                    .unwrap()
                    .get(0);
                most.fetch_max(n, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(id, mut c)| {
            let failures = failures.clone();
            let id = id as i32;
            tokio::spawn(async move {
                let run = async {
                    let insert = c
                        .prepare("INSERT INTO many_rows(client, n) VALUES ($1, $2)")
                        .await?;
                    let count = c
                        .prepare("SELECT count(*) FROM many_rows WHERE client = $1")
                        .await?;
                    let mut bad = Vec::new();
                    for n in 0..TXNS {
                        let tx = c.transaction().await?;
                        tx.execute(&insert, &[&id, &n]).await?;
                        let got: i64 = tx.query_one(&count, &[&id]).await?.get(0);
                        if got != i64::from(n) + 1 {
                            bad.push(format!("client {id}, transaction {n}: count {got}"));
                        }
                        tx.commit().await?;
                    }
                    let total: i64 = c.query_one(&count, &[&id]).await?.get(0);
                    if total != i64::from(TXNS) {
                        bad.push(format!("client {id}: {total} rows at the end"));
                    }
                    Ok::<_, tokio_postgres::Error>(bad)
                };
                match run.await {
                    Ok(bad) => failures.lock().unwrap().extend(bad),
                    Err(e) => failures.lock().unwrap().push(format!(
                        "client {id}: {}",
                        common::clients::describe_error(&e)
                    )),
                }
            })
        })
        .collect();
    let all = futures_util::future::join_all(tasks);
    let results = tokio::time::timeout(Duration::from_secs(300), all)
        .await
        .expect("1 000 clients x 20 transactions did not finish within 5 minutes");
    for r in results {
        r.expect("client task panicked");
    }
    watching.store(false, Ordering::Relaxed);
    watcher.await.unwrap();

    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    let check = pg.psql_ok(
        TEST_DB,
        "SELECT count(*), count(DISTINCT (client, n)), count(DISTINCT client), \
         min(n), max(n) FROM many_rows",
    );
    assert_eq!(
        check,
        format!(
            "{}|{}|{CLIENTS}|0|{}",
            CLIENTS * TXNS as usize,
            CLIENTS * TXNS as usize,
            TXNS - 1
        ),
        "rows, distinct (client, n), clients, min n, max n"
    );
    let wrong = pg.psql_ok(
        TEST_DB,
        &format!(
            "SELECT count(*) FROM (SELECT client FROM many_rows GROUP BY client \
             HAVING count(*) <> {TXNS} OR count(DISTINCT n) <> {TXNS}) x"
        ),
    );
    assert_eq!(wrong, "0", "clients without exactly their {TXNS} rows");
    let most = most.load(Ordering::Relaxed);
    eprintln!("{CLIENTS} clients x {TXNS} transactions; at most {most} backends at once");
    assert!(
        (1..=POOL as i64).contains(&most),
        "backends seen at once: {most} (pool size {POOL})"
    );
}

// ---------------------------------------------------------------------------
// Python clients

/// One pip install at a time in this process.
static PIP: Mutex<()> = Mutex::new(());

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Imports `module`, installing `spec` from PyPI first if needed.
fn ensure_python_module(module: &str, spec: &str) -> Result<(), String> {
    let _one = PIP.lock().unwrap_or_else(|e| e.into_inner());
    if python_has(module) {
        return Ok(());
    }
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            spec,
        ])
        .output()
        .map_err(|e| format!("cannot run python3 -m pip: {e}"))?;
    if python_has(module) {
        return Ok(());
    }
    Err(format!(
        "`python3 -m pip install {spec}` failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

fn script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py/txn_clients.py")
        .display()
        .to_string()
}

fn py_table(pg: &PgCluster, name: &str) {
    pg.psql_ok(
        TEST_DB,
        &format!(
            "DROP TABLE IF EXISTS {name}; CREATE TABLE {name}(client int, n int); \
             GRANT ALL ON {name} TO scram_user"
        ),
    );
}

fn check_py_rows(pg: &PgCluster, table: &str, workers: usize, txns: usize) {
    let got = pg.psql_ok(
        TEST_DB,
        &format!(
            "SELECT count(*), count(DISTINCT (client, n)), count(DISTINCT client) FROM {table}"
        ),
    );
    assert_eq!(
        got,
        format!("{}|{}|{workers}", workers * txns, workers * txns)
    );
}

fn run_py(args: &[&str]) {
    let out = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ok "),
        "{} failed ({}):\n{stdout}\n{}",
        args[0],
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn psycopg_with_server_side_prepared_statements_in_transaction_mode() {
    if let Err(e) = ensure_python_module("psycopg", "psycopg[binary]") {
        return skip_or_fail(&format!(
            "psycopg is needed and could not be installed: {e}"
        ));
    }
    let pg = PgCluster::shared();
    py_table(pg, "txn_py_psycopg");
    let p = Pooler::start(pg, PoolerOpts::default().mode("transaction").pool_size(2));
    let ci = p.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    run_py(&["psycopg", &ci, "txn_py_psycopg", "4", "50"]);
    check_py_rows(pg, "txn_py_psycopg", 4, 50);
}

#[test]
fn asyncpg_named_statements_in_transaction_mode() {
    if let Err(e) = ensure_python_module("asyncpg", "asyncpg") {
        return skip_or_fail(&format!(
            "asyncpg is needed and could not be installed: {e}"
        ));
    }
    let pg = PgCluster::shared();
    py_table(pg, "txn_py_asyncpg");
    let p = Pooler::start(pg, PoolerOpts::default().mode("transaction").pool_size(2));
    let dir = p.socket_dir().display().to_string();
    let port = p.port().to_string();
    run_py(&[
        "asyncpg",
        &dir,
        &port,
        SCRAM_USER.0,
        SCRAM_USER.1,
        TEST_DB,
        "txn_py_asyncpg",
        "4",
        "50",
    ]);
    check_py_rows(pg, "txn_py_asyncpg", 4, 50);
}
