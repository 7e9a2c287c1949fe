//! The relay: simple and extended protocol, pgbench in every query mode,
//! COPY both ways, LISTEN/NOTIFY, notices, FunctionCall, asynchronous
//! ParameterStatus and query cancellation, over the Unix socket and TCP.

mod common;

use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, TryStreamExt};
use tokio_postgres::{AsyncMessage, NoTls};

use common::clients::{pgbench_cmd, psql_cmd, sqlstate};
use common::ext::query;
use common::wait::{wait_active, wait_active_async};
use common::wire::{send_cancel, Failure};
use common::{
    backend_pid, connect_ok, connect_with_messages, psql_ok, PgCluster, Pooler, PoolerOpts,
    RawConn, Reply, Transport, SCRAM_USER, TEST_DB,
};

fn user_conninfo(pooler: &Pooler, t: Transport) -> String {
    pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)
}

#[tokio::test(flavor = "multi_thread")]
async fn simple_protocol_through_psql_and_tokio_postgres() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        let out = psql_ok(
            &pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB),
            Some(SCRAM_USER.1),
            "SELECT 1 AS a; SELECT 'two', NULL::text; SELECT generate_series(1, 3)",
        );
        assert_eq!(out, "1\ntwo|\n1\n2\n3");

        let client = connect_ok(&user_conninfo(&pooler, t)).await;
        let msgs = client
            .simple_query("SELECT 'x' || 'y'; SELECT n FROM generate_series(1, 1000) n")
            .await
            .unwrap();
        let rows: Vec<_> = msgs
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap().to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(rows.len(), 1001);
        assert_eq!(rows[0], "xy");
        assert_eq!(rows[1000], "1000");

        // An error does not end the session.
        let err = client.simple_query("SELEC 1").await.unwrap_err();
        assert_eq!(sqlstate(&err).as_deref(), Some("42601"));
        let err = client.simple_query("SELECT 1/0").await.unwrap_err();
        assert_eq!(sqlstate(&err).as_deref(), Some("22012"));
        client
            .batch_execute(
                "CREATE TEMP TABLE s (i int); INSERT INTO s SELECT generate_series(1, 10)",
            )
            .await
            .unwrap();
        client
            .batch_execute("BEGIN; DELETE FROM s WHERE i > 5; ROLLBACK")
            .await
            .unwrap();
        let n: i64 = client
            .query_one("SELECT count(*) FROM s", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 10);

        // A large result and a large query text.
        let big = "y".repeat(3_000_000);
        let row = client
            .query_one(
                &format!("SELECT length('{big}'), repeat('z', 5000000)"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 3_000_000);
        assert_eq!(row.get::<_, String>(1).len(), 5_000_000);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn extended_protocol_with_parameters_and_pipelining() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        let client = connect_ok(&user_conninfo(&pooler, t)).await;
        let blob: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let row = client
            .query_one(
                "SELECT $1::int4 + 1, $2::int8 * 2, $3::text || '!', $4::float8, $5::bool, \
                 $6::text IS NULL, $7::int4[], length($8::bytea), md5($8::bytea)",
                &[
                    &41i32,
                    &(1i64 << 40),
                    &"héllo",
                    &2.5f64,
                    &true,
                    &Option::<String>::None,
                    &vec![1i32, 2, 3],
                    &blob,
                ],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 42);
        assert_eq!(row.get::<_, i64>(1), 1i64 << 41);
        assert_eq!(row.get::<_, String>(2), "héllo!");
        assert_eq!(row.get::<_, f64>(3), 2.5);
        assert!(row.get::<_, bool>(4));
        assert!(row.get::<_, bool>(5));
        assert_eq!(row.get::<_, Vec<i32>>(6), vec![1, 2, 3]);
        assert_eq!(row.get::<_, i32>(7), 4_000_000);
        let md5_direct: String = pg
            .admin_client()
            .await
            .query_one("SELECT md5($1::bytea)", &[&blob])
            .await
            .unwrap()
            .get(0);
        assert_eq!(row.get::<_, String>(8), md5_direct);

        // A prepared statement reused many times.
        let stmt = client.prepare("SELECT $1::int4 * $1::int4").await.unwrap();
        for i in 0..200i32 {
            let v: i32 = client.query_one(&stmt, &[&i]).await.unwrap().get(0);
            assert_eq!(v, i * i);
        }

        // Pipelined: tokio-postgres sends all of these before reading replies.
        let futures: Vec<_> = (0..100i32)
            .map(|i| {
                let client = &client;
                let stmt = &stmt;
                async move {
                    client
                        .query_one(stmt, &[&i])
                        .await
                        .map(|r| r.get::<_, i32>(0))
                }
            })
            .collect();
        let results = futures_util::future::join_all(futures).await;
        for (i, r) in results.into_iter().enumerate() {
            assert_eq!(r.unwrap(), (i * i) as i32);
        }

        // An error in the extended protocol, then the session goes on.
        let err = client
            .query_one("SELECT 1 / $1::int4", &[&0i32])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&err).as_deref(), Some("22012"));

        // Transactions.
        let mut client = client;
        client
            .batch_execute("CREATE TEMP TABLE e (i int)")
            .await
            .unwrap();
        let tx = client.transaction().await.unwrap();
        tx.execute("INSERT INTO e VALUES ($1)", &[&1i32])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let tx = client.transaction().await.unwrap();
        tx.execute("INSERT INTO e VALUES ($1)", &[&2i32])
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        let rows = client.query("SELECT i FROM e", &[]).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i32>(0), 1);
    }
}

/// Runs pgbench and returns (processed, expected, failed) from its report.
fn pgbench_counts(out: &std::process::Output) -> (u64, u64, u64) {
    let text = String::from_utf8_lossy(&out.stdout);
    let mut processed = None;
    let mut failed = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("number of transactions actually processed: ") {
            let (done, total) = rest.split_once('/').expect("processed: n/m");
            processed = Some((done.trim().parse().unwrap(), total.trim().parse().unwrap()));
        }
        if let Some(rest) = line.strip_prefix("number of failed transactions: ") {
            failed = Some(rest.split_whitespace().next().unwrap().parse().unwrap());
        }
    }
    let (done, total) = processed.unwrap_or_else(|| {
        panic!(
            "no pgbench summary:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (done, total, failed.unwrap_or(0))
}

#[test]
fn pgbench_simple_extended_and_prepared_have_no_failures() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default().pool_size(8));
    let init = pgbench_cmd(
        &pooler.host(Transport::Unix),
        pooler.port(),
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        TEST_DB,
    )
    .args(["-i", "-s", "1", "-q"])
    .output()
    .expect("run pgbench -i");
    assert!(
        init.status.success(),
        "pgbench -i through the pooler failed: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    assert_eq!(
        pg.psql_ok(TEST_DB, "SELECT count(*) FROM pgbench_accounts"),
        "100000"
    );
    for t in Transport::ALL {
        for mode in ["simple", "extended", "prepared"] {
            let out = pgbench_cmd(
                &pooler.host(t),
                pooler.port(),
                SCRAM_USER.0,
                Some(SCRAM_USER.1),
                TEST_DB,
            )
            .args(["-n", "-M", mode, "-c", "4", "-j", "2", "-t", "200"])
            .output()
            .expect("run pgbench");
            assert!(
                out.status.success(),
                "pgbench -M {mode} over {t:?} failed ({}): {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let (done, total, failed) = pgbench_counts(&out);
            assert_eq!((done, total), (800, 800), "-M {mode} over {t:?}");
            assert_eq!(failed, 0, "-M {mode} over {t:?}");
        }
    }
    // The history table saw every transaction of the six runs.
    assert_eq!(
        pg.psql_ok(TEST_DB, "SELECT count(*) FROM pgbench_history"),
        "4800"
    );
}

const COPY_ROWS: i32 = 100_000;

fn copy_rows_text() -> Vec<u8> {
    let mut data = Vec::with_capacity(COPY_ROWS as usize * 48);
    for i in 1..=COPY_ROWS {
        writeln!(
            data,
            "{i}\trow {i} \\\\ tab\\there é {}",
            i.wrapping_mul(2654435761u32 as i32)
        )
        .unwrap();
    }
    data
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_in_and_out_of_100k_rows_matches_postgres() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    let admin = pg.admin_client().await;
    let data = copy_rows_text();
    let checksum_sql = |table: &str| {
        format!("SELECT count(*)::text || ':' || md5(string_agg(id::text || '|' || payload, ',' ORDER BY id)) FROM {table}")
    };
    // Reference: the same rows loaded directly.
    admin
        .batch_execute(
            "DROP TABLE IF EXISTS copy_direct; \
             CREATE TABLE copy_direct (id int PRIMARY KEY, payload text); \
             GRANT ALL ON copy_direct TO PUBLIC",
        )
        .await
        .unwrap();
    let sink = admin
        .copy_in::<_, Bytes>("COPY copy_direct FROM STDIN")
        .await
        .unwrap();
    futures_util::pin_mut!(sink);
    sink.send(Bytes::from(data.clone())).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), COPY_ROWS as u64);
    let expected: String = admin
        .query_one(&checksum_sql("copy_direct"), &[])
        .await
        .unwrap()
        .get(0);
    let direct_out: Vec<u8> = admin
        .copy_out("COPY copy_direct TO STDOUT")
        .await
        .unwrap()
        .map_ok(|b| b.to_vec())
        .try_concat()
        .await
        .unwrap();
    assert_eq!(direct_out, data);

    for t in Transport::ALL {
        let table = format!("copy_{t:?}").to_lowercase();
        let client = connect_ok(&user_conninfo(&pooler, t)).await;
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, payload text)"
            ))
            .await
            .unwrap();
        // COPY FROM STDIN in 64 KiB chunks that cut rows anywhere.
        let sink = client
            .copy_in::<_, Bytes>(&format!("COPY {table} FROM STDIN"))
            .await
            .unwrap();
        futures_util::pin_mut!(sink);
        for chunk in data.chunks(65_536) {
            sink.send(Bytes::copy_from_slice(chunk)).await.unwrap();
        }
        assert_eq!(sink.finish().await.unwrap(), COPY_ROWS as u64);
        let via_pooler: String = client
            .query_one(&checksum_sql(&table), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(via_pooler, expected, "COPY IN over {t:?}");
        let direct: String = admin
            .query_one(&checksum_sql(&table), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            direct, expected,
            "rows as PostgreSQL stored them, COPY IN over {t:?}"
        );

        // COPY TO STDOUT through the pooler: byte-identical to direct.
        let out: Vec<u8> = client
            .copy_out("COPY copy_direct TO STDOUT")
            .await
            .unwrap()
            .map_ok(|b| b.to_vec())
            .try_concat()
            .await
            .unwrap();
        assert_eq!(out.len(), direct_out.len(), "COPY OUT size over {t:?}");
        assert!(out == direct_out, "COPY OUT bytes differ over {t:?}");

        // psql \copy both ways.
        let file = pooler.dir().join(format!("{table}.tsv"));
        std::fs::write(&file, &data).unwrap();
        let conn = pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB);
        psql_ok(&conn, Some(SCRAM_USER.1), &format!("TRUNCATE {table}"));
        let out = psql_cmd(&conn, Some(SCRAM_USER.1))
            .args(["-c", &format!("\\copy {table} from '{}'", file.display())])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            psql_ok(&conn, Some(SCRAM_USER.1), &checksum_sql(&table)),
            expected,
            "psql \\copy from over {t:?}"
        );
        let out = psql_cmd(&conn, Some(SCRAM_USER.1))
            .args(["-c", "\\copy copy_direct to stdout"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout == direct_out,
            "psql \\copy to stdout differs over {t:?}"
        );

        // COPY errors mid-stream leave the session usable.
        let err = client
            .simple_query(&format!("COPY {table} FROM '/nonexistent/file'"))
            .await
            .unwrap_err();
        assert!(err.as_db_error().is_some(), "{err:?}");
        client.simple_query("SELECT 1").await.unwrap();
        client
            .batch_execute(&format!("DROP TABLE {table}"))
            .await
            .unwrap();
    }
}

async fn next_notification(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<AsyncMessage>,
) -> tokio_postgres::Notification {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(AsyncMessage::Notification(n))) => return n,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("connection closed while waiting for a notification"),
            Err(_) => panic!("no notification within 5 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_notify_and_notices_between_two_clients() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    for (listen_t, notify_t) in [
        (Transport::Unix, Transport::Tcp),
        (Transport::Tcp, Transport::Unix),
    ] {
        let (listener, mut rx) = connect_with_messages(&user_conninfo(&pooler, listen_t))
            .await
            .unwrap();
        let notifier = connect_ok(&user_conninfo(&pooler, notify_t)).await;
        listener.batch_execute("LISTEN harbor_chan").await.unwrap();
        // An idle listener gets it without sending anything.
        notifier
            .batch_execute("NOTIFY harbor_chan, 'hello one'")
            .await
            .unwrap();
        let n = next_notification(&mut rx).await;
        assert_eq!((n.channel(), n.payload()), ("harbor_chan", "hello one"));
        let listener_pid: i32 = backend_pid(&listener).await;
        assert_ne!(n.process_id(), listener_pid);
        notifier
            .query("SELECT pg_notify('harbor_chan', $1)", &[&"hello two"])
            .await
            .unwrap();
        assert_eq!(next_notification(&mut rx).await.payload(), "hello two");

        // NoticeResponse.
        listener
            .batch_execute("DO $$ BEGIN RAISE NOTICE 'harbor notice'; END $$")
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, rx.recv()).await {
                Ok(Some(AsyncMessage::Notice(n))) => {
                    assert_eq!(n.message(), "harbor notice");
                    break;
                }
                Ok(Some(_)) => continue,
                other => panic!("no notice: {other:?}"),
            }
        }
    }
}

#[test]
fn asynchronous_parameter_status_and_function_call_pass_through() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    let oid = pg.psql_ok(TEST_DB, "SELECT 'int4abs'::regproc::oid");
    let oid: u32 = oid.parse().unwrap();
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        raw.login(
            &[("user", SCRAM_USER.0), ("database", TEST_DB)],
            Some(SCRAM_USER.1),
        )
        .unwrap();
        let res = raw.query("SET application_name = 'async_ps'");
        assert!(res.error.is_none(), "{res:?}");
        assert!(
            res.params
                .contains(&("application_name".to_string(), "async_ps".to_string())),
            "ParameterStatus not relayed: {res:?}"
        );

        // FunctionCall: int4abs(-7) in text format.
        let mut body = oid.to_be_bytes().to_vec();
        body.extend_from_slice(&1i16.to_be_bytes()); // one format code
        body.extend_from_slice(&0i16.to_be_bytes()); // text
        body.extend_from_slice(&1i16.to_be_bytes()); // one argument
        body.extend_from_slice(&2i32.to_be_bytes());
        body.extend_from_slice(b"-7");
        body.extend_from_slice(&0i16.to_be_bytes()); // result in text
        raw.send(&common::wire::message(b'F', &body)).unwrap();
        match raw.read_msg(Duration::from_secs(5)) {
            Reply::Msg(b'V', v) => {
                assert_eq!(&v[..4], &1i32.to_be_bytes());
                assert_eq!(&v[4..], b"7");
            }
            other => panic!("FunctionCallResponse expected, got {}", other.summary()),
        }
        assert!(matches!(
            raw.read_msg(Duration::from_secs(5)),
            Reply::Msg(b'Z', _)
        ));
        raw.terminate();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_request_from_tokio_postgres_cancels_pg_sleep() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    let admin = pg.admin_client().await;
    for t in Transport::ALL {
        let client = connect_ok(&user_conninfo(&pooler, t)).await;
        let marker = format!("cancel_tp_{t:?}");
        let sql = format!("SELECT pg_sleep(30) /* {marker} */");
        let started = Instant::now();
        let sleeper = {
            let sql = sql.clone();
            let token = client.cancel_token();
            let task = tokio::spawn(async move {
                let res = client.simple_query(&sql).await;
                (res, client)
            });
            wait_active_async(&admin, &marker).await;
            token.cancel_query(NoTls).await.expect("send cancel");
            task
        };
        let (res, client) = tokio::time::timeout(Duration::from_secs(10), sleeper)
            .await
            .expect("cancelled query did not return")
            .unwrap();
        let err = res.expect_err("pg_sleep(30) was not cancelled");
        assert_eq!(sqlstate(&err).as_deref(), Some("57014"), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // The session is still good.
        let v: i32 = client.query_one("SELECT 5", &[]).await.unwrap().get(0);
        assert_eq!(v, 5);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn psql_interrupt_cancels_pg_sleep() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    let admin = pg.admin_client().await;
    for t in Transport::ALL {
        let marker = format!("cancel_psql_{t:?}");
        let mut child = psql_cmd(
            &pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB),
            Some(SCRAM_USER.1),
        )
        .args(["-c", &format!("SELECT pg_sleep(30) /* {marker} */")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        wait_active_async(&admin, &marker).await;
        let started = Instant::now();
        common::util::kill(child.id(), libc::SIGINT);
        let status = common::wait::wait_child(&mut child, Duration::from_secs(10));
        let Some(status) = status else {
            let _ = child.kill();
            panic!("psql still running 10 s after SIGINT over {t:?}");
        };
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!status.success());
        assert!(
            stderr.contains("canceling statement due to user request"),
            "psql stderr over {t:?}: {stderr}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn raw_cancel_with_the_pooler_key_works_and_a_wrong_key_is_ignored() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        let session = raw
            .login(
                &[("user", SCRAM_USER.0), ("database", TEST_DB)],
                Some(SCRAM_USER.1),
            )
            .unwrap_or_else(|e: Failure| panic!("{e:?}"));
        let (pid, key) = session.key.expect("BackendKeyData");

        // Wrong key: the server closes the cancel connection without a word
        // and the query is not touched.
        let marker = format!("wrong_key_{t:?}");
        raw.send(&query(&format!(
            "SELECT pg_sleep(1), 'done' /* {marker} */"
        )))
        .unwrap();
        wait_active(pg, &marker);
        assert_eq!(
            send_cancel(&pooler.endpoint(t), pid, key.wrapping_add(1)),
            Reply::Closed
        );
        assert_eq!(
            send_cancel(&pooler.endpoint(t), pid.wrapping_add(1), key),
            Reply::Closed
        );
        let res = raw.read_query_result(Duration::from_secs(10));
        assert!(
            res.error.is_none(),
            "wrong-key cancel reached the query: {res:?}"
        );
        assert_eq!(res.rows[0][1].as_deref(), Some("done"));

        // Right key, sent over the other transport: cancelled.
        let other = if t == Transport::Unix {
            Transport::Tcp
        } else {
            Transport::Unix
        };
        let marker = format!("right_key_{t:?}");
        raw.send(&query(&format!("SELECT pg_sleep(30) /* {marker} */")))
            .unwrap();
        wait_active(pg, &marker);
        let started = Instant::now();
        assert_eq!(
            send_cancel(&pooler.endpoint(other), pid, key),
            Reply::Closed
        );
        let res = raw.read_query_result(Duration::from_secs(10));
        assert_eq!(res.error.map(|e| e.code).as_deref(), Some("57014"));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(raw.query("SELECT 1").scalar().as_deref(), Some("1"));
    }
}
