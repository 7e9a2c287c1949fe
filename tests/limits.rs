//! Limits: max_client_conn, the wait for a free backend bounded by
//! query_wait_timeout, and many concurrent clients sharing a small pool.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::secrets;
use common::{
    connect, connect_err, connect_ok, PgCluster, Pooler, PoolerOpts, Transport, SCRAM_USER, TEST_DB,
};

#[tokio::test(flavor = "multi_thread")]
async fn max_client_conn_refuses_the_next_client_with_53300() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default().max_client_conn(2));
    let conninfo = |t| pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let a = connect_ok(&conninfo(Transport::Unix)).await;
    let b = connect_ok(&conninfo(Transport::Tcp)).await;
    for t in Transport::ALL {
        let err = connect_err(&conninfo(t)).await;
        assert_eq!(err.code, "53300", "third client over {t:?}: {err:?}");
        assert_eq!(err.severity, "FATAL");
    }
    // The two connected clients are unaffected.
    a.simple_query("SELECT 1").await.unwrap();
    b.simple_query("SELECT 1").await.unwrap();

    // A freed slot is usable again.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    let c = loop {
        match connect(&conninfo(Transport::Tcp)).await {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("slot not freed 5 s after a client left: {e:?}"),
        }
    };
    c.simple_query("SELECT 1").await.unwrap();
    b.simple_query("SELECT 1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_for_a_busy_pool_ends_in_an_error_after_query_wait_timeout() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().pool_size(1).query_wait_timeout("1s"),
    );
    let conninfo = |t| pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let holder = connect_ok(&conninfo(Transport::Unix)).await;
    holder.simple_query("SELECT 1").await.unwrap();
    for t in Transport::ALL {
        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(10), async {
            let client = connect(&conninfo(t)).await?;
            client.simple_query("SELECT 1").await.map(|_| client)
        })
        .await;
        let elapsed = started.elapsed();
        let err = match outcome {
            Err(_) => panic!("over {t:?}: still waiting after 10 s (query_wait_timeout = 1s)"),
            Ok(Ok(_)) => panic!("over {t:?}: got a backend although the only one is held"),
            Ok(Err(e)) => e,
        };
        let db = err
            .as_db_error()
            .unwrap_or_else(|| panic!("over {t:?}: no ErrorResponse, just {err:?}"));
        assert!(
            elapsed >= Duration::from_millis(800) && elapsed < Duration::from_secs(3),
            "over {t:?}: error after {elapsed:?}, expected about 1 s"
        );
        assert!(!db.message().is_empty());
        eprintln!(
            "query_wait_timeout over {t:?}: {} {} {:?} after {elapsed:?}",
            db.severity(),
            db.code().code(),
            db.message()
        );
    }
    // Once the holder leaves, the next client gets the backend.
    drop(holder);
    let client = tokio::time::timeout(Duration::from_secs(5), connect(&conninfo(Transport::Tcp)))
        .await
        .expect("no backend 5 s after the holder left")
        .expect("connect after the holder left");
    client.simple_query("SELECT 1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_clients_fifty_queries_each_share_twenty_backends() {
    const CLIENTS: i32 = 200;
    const QUERIES: i32 = 50;
    let pg = PgCluster::shared();
    // The subject is the pool, not PBKDF2: a 16-iteration SCRAM secret
    // keeps 200 logins from spending seconds of debug-build key derivation
    // in this test process (which would also trip client_login_timeout on a
    // busy machine), and the login timeout is generous for the same reason.
    let secret = secrets::scram_secret(SCRAM_USER.1, b"harbor-200-salt!", 16);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .userlist(&[(SCRAM_USER.0, &secret)])
            .pool_size(20)
            .query_wait_timeout("120s")
            .client_login_timeout("120s"),
    );
    let started = Instant::now();
    let mut tasks = Vec::new();
    for n in 0..CLIENTS {
        let t = if n % 2 == 0 {
            Transport::Unix
        } else {
            Transport::Tcp
        };
        let conninfo = pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
        tasks.push(tokio::spawn(async move {
            let client = connect(&conninfo)
                .await
                .map_err(|e| format!("client {n} ({t:?}) connect: {e:?}"))?;
            let stmt = client
                .prepare("SELECT $1::int + 1, pg_backend_pid()")
                .await
                .map_err(|e| format!("client {n} prepare: {e:?}"))?;
            let mut pid = None;
            for i in 0..QUERIES {
                let v = n * 1000 + i;
                let row = client
                    .query_one(&stmt, &[&v])
                    .await
                    .map_err(|e| format!("client {n} query {i}: {e:?}"))?;
                let got: i32 = row.get(0);
                if got != v + 1 {
                    return Err(format!("client {n} query {i}: {got} != {}", v + 1));
                }
                let p: i32 = row.get(1);
                if *pid.get_or_insert(p) != p {
                    return Err(format!("client {n}: backend changed mid-session"));
                }
            }
            Ok::<(i32, i32), String>((QUERIES, pid.unwrap()))
        }));
    }
    let mut done = 0;
    let mut pids = HashSet::new();
    let mut failures = Vec::new();
    for task in tasks {
        match tokio::time::timeout(Duration::from_secs(180), task).await {
            Ok(Ok(Ok((q, pid)))) => {
                done += q;
                pids.insert(pid);
            }
            Ok(Ok(Err(e))) => failures.push(e),
            Ok(Err(join)) => failures.push(format!("task panicked: {join}")),
            Err(_) => failures.push("a client did not finish within 180 s".into()),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {CLIENTS} clients failed; first ones: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(done, CLIENTS * QUERIES);
    assert!(
        pids.len() <= 20,
        "{} backends served a pool of 20 in session mode",
        pids.len()
    );
    eprintln!(
        "{CLIENTS} clients x {QUERIES} queries in {:?} on {} backends",
        started.elapsed(),
        pids.len()
    );
}
