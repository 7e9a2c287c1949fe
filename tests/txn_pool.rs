//! Transaction pooling: clients share backends per transaction, with their
//! prepared statements and parameters following them.

mod common;

use common::{
    backend_pid, connect_ok, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB,
};

fn txn_pooler(pg: &PgCluster, size: usize) -> Pooler {
    Pooler::start(pg, PoolerOpts::transaction(size))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_clients_alternate_over_one_backend_with_prepared_statements() {
    let pg = PgCluster::shared();
    let pooler = txn_pooler(pg, 1);
    let ci = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let a = connect_ok(&ci).await;
    let b = connect_ok(&ci).await;
    let sa = a.prepare("SELECT $1::int + 1").await.unwrap();
    let sb = b.prepare("SELECT $1::int * 10").await.unwrap();
    for i in 0..20i32 {
        let ra: i32 = a.query_one(&sa, &[&i]).await.unwrap().get(0);
        let rb: i32 = b.query_one(&sb, &[&i]).await.unwrap().get(0);
        assert_eq!(ra, i + 1);
        assert_eq!(rb, i * 10);
    }
    let pa: i32 = backend_pid(&a).await;
    let pb: i32 = backend_pid(&b).await;
    assert_eq!(pa, pb, "one backend serves both");
}

/// pgbench through `pooler` over `t`, as scram_user, with `args`.
fn pgbench_command(pooler: &Pooler, t: Transport, args: &[&str]) -> std::process::Command {
    let mut cmd = common::clients::pgbench_cmd(
        &pooler.host(t),
        pooler.port(),
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        TEST_DB,
    );
    cmd.args(args);
    cmd
}

fn pgbench(pooler: &Pooler, t: Transport, args: &[&str]) -> std::process::Output {
    pgbench_command(pooler, t, args)
        .output()
        .expect("run pgbench")
}

/// `pgbench -i` once for the tests of this file, which run in parallel.
fn init_tables(pooler: &Pooler) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let init = pgbench(pooler, Transport::Unix, &["-i", "-s", "1", "-q"]);
        assert!(
            init.status.success(),
            "{}",
            String::from_utf8_lossy(&init.stderr)
        );
    });
}

#[test]
fn pgbench_prepared_with_fewer_backends_than_clients_per_thread_does_not_deadlock() {
    // pgbench prepares synchronously: a thread whose client waits in
    // PQprepare cannot finish its other clients' open transactions, which
    // hold every backend. A Parse the pooler knows is answered without one.
    let pg = PgCluster::shared();
    let pooler = txn_pooler(pg, 5);
    init_tables(&pooler);
    let dir = common::util::unique_temp_dir("pgbench-script");
    let script = dir.join("tx.sql");
    std::fs::write(
        &script,
        "\\set aid random(1, 100000)\n\\set delta random(-5000, 5000)\nBEGIN;\n\
         UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n\
         SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\nEND;\n",
    )
    .expect("write script");
    let script = script.to_string_lossy().into_owned();
    let args = [
        "-n", "-M", "prepared", "-c", "50", "-j", "2", "-T", "10", "-f", &script,
    ];
    let mut child = pgbench_command(&pooler, Transport::Unix, &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run pgbench");
    if common::wait::wait_child(&mut child, std::time::Duration::from_secs(90)).is_none() {
        let _ = child.kill();
        panic!("pgbench -M prepared -c 50 -j 2 over 5 backends hung");
    }
    let out = child.wait_with_output().expect("pgbench output");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("number of failed transactions: 0"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pgbench_every_query_mode_through_transaction_pooling() {
    let pg = PgCluster::shared();
    let pooler = txn_pooler(pg, 2);
    init_tables(&pooler);
    pg.psql_ok(TEST_DB, "TRUNCATE pgbench_history");
    let mut runs = 0;
    for t in Transport::ALL {
        for mode in ["simple", "extended", "prepared"] {
            for connect in [false, true] {
                // One pgbench thread per client: a thread blocked in a
                // synchronous connect or PQprepare while another of its
                // clients holds a backend mid-transaction would deadlock
                // with any pool smaller than the client count.
                let mut args = vec!["-n", "-M", mode, "-c", "8", "-j", "8", "-t", "50"];
                if connect {
                    args.push("-C");
                }
                let out = pgbench(&pooler, t, &args);
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success()
                        && stdout.contains("number of transactions actually processed: 400/400"),
                    "pgbench -M {mode} -C={connect} over {t:?}: {stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
        }
    }
    assert_eq!(
        pg.psql_ok(TEST_DB, "SELECT count(*) FROM pgbench_history"),
        (runs * 400).to_string()
    );
}

/// The first login of a transaction pool checks a backend out to learn the
/// server's parameters; a client that then sits idle must not keep it. Its
/// application_name SET goes out at once (session pooling would hold it
/// for the client's first message), so the backend returns to the pool at
/// that SET's ReadyForQuery and a second client's query gets it.
#[test]
fn an_idle_first_client_does_not_keep_the_only_backend() {
    let pg = PgCluster::shared();
    let pooler = txn_pooler(pg, 1);
    let ep = pooler.endpoint(Transport::Unix);
    let login = |app: &str| {
        let mut raw = common::RawConn::connect(&ep);
        raw.login(
            &[
                ("user", SCRAM_USER.0),
                ("database", TEST_DB),
                ("application_name", app),
            ],
            Some(SCRAM_USER.1),
        )
        .unwrap_or_else(|e| panic!("login: {e:?}"));
        raw
    };
    let idle = login("idle_first");
    let mut busy = login("busy_second");
    let res = busy.query("SELECT current_setting('application_name')");
    assert!(res.error.is_none(), "{res:?}");
    assert_eq!(res.scalar().as_deref(), Some("busy_second"));
    drop(idle);
}

/// Idle backends are reused most recently used first, as PgBouncer's
/// default (`server_round_robin = 0`): a lone client's transactions stay
/// on one backend while others idle (and can time out), instead of
/// rotating over every open one.
#[tokio::test(flavor = "multi_thread")]
async fn a_lone_client_keeps_reusing_the_backend_it_just_released() {
    let pg = PgCluster::shared();
    let pooler = txn_pooler(pg, 3);
    let ci = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    // Three open transactions at once: the pool opens all three backends.
    let mut holders = Vec::new();
    for _ in 0..3 {
        let c = connect_ok(&ci).await;
        c.batch_execute("BEGIN").await.unwrap();
        holders.push(c);
    }
    let mut pids = std::collections::BTreeSet::new();
    for c in &holders {
        pids.insert(backend_pid(c).await);
    }
    assert_eq!(pids.len(), 3, "three transactions, three backends");
    for c in &holders {
        c.batch_execute("COMMIT").await.unwrap();
    }
    let lone = &holders[0];
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(backend_pid(lone).await);
    }
    assert!(
        seen.iter().all(|p| *p == seen[0]),
        "one client's transactions one after another rotated over backends: {seen:?}"
    );
}
