//! Transaction pooling over TLS. An idle client waits without a read
//! buffer: on its socket unless OpenSSL holds bytes of it (decrypted, or
//! records read ahead and not yet decrypted). A wait that missed the
//! socket's bytes or OpenSSL's would hang these clients.

mod common;

use std::time::Duration;

use bytes::BytesMut;
use common::tls::{raw_tls_link, tls_toml, Certs};
use common::wire::{startup_packet, PROTOCOL_3_0};
use common::{PgCluster, Pooler, PoolerOpts, RawConn, SCRAM_USER, TEST_DB, TRUST_USER};
use postgres_protocol::message::frontend;

fn tls_client(pooler: &Pooler) -> RawConn {
    let mut raw = raw_tls_link(pooler);
    raw.login(
        &[("user", SCRAM_USER.0), ("database", TEST_DB)],
        Some(SCRAM_USER.1),
    )
    .unwrap_or_else(|e| panic!("login inside TLS: {e:?}"));
    raw
}

fn one_value(raw: &mut RawConn) -> Option<String> {
    let res = raw.read_query_result(Duration::from_secs(10));
    assert!(res.error.is_none(), "{res:?}");
    res.rows.first().and_then(|r| r[0].clone())
}

#[test]
fn tls_clients_idle_between_transactions_and_pipeline_into_one_record() {
    let pg = PgCluster::shared();
    let certs = Certs::generate("txn-tls");
    let pooler = Pooler::start(
        pg,
        PoolerOpts::transaction(2).tls(&tls_toml(Some(&certs), &[("sslmode", "require")])),
    );
    let mut raw = tls_client(&pooler);

    // Idle between transactions: the wait is on the socket.
    for i in 1..=3 {
        std::thread::sleep(Duration::from_millis(150));
        let res = raw.query(&format!("SELECT {i}"));
        assert_eq!(res.rows, vec![vec![Some(i.to_string())]], "{res:?}");
    }

    // A query as big as the client's read buffer, or bigger, and a small one
    // in the same write, so in one TLS record: part of it may stay decrypted
    // inside OpenSSL while the socket has nothing more (the relay reading
    // ahead usually takes it first).
    // 2 025: the first message is 2 048 bytes, the read buffer's size, so
    // the first read ends exactly at its end.
    for size in [2_025usize, 6_000, 40_000] {
        let mut out = BytesMut::new();
        let big = format!("SELECT length('{}')", "x".repeat(size));
        frontend::query(&big, &mut out).unwrap();
        frontend::query("SELECT 'after'", &mut out).unwrap();
        raw.send(&out).unwrap();
        assert_eq!(one_value(&mut raw), Some(size.to_string()));
        assert_eq!(one_value(&mut raw), Some("after".into()));
    }

    // Two queries in two TLS records that arrive together: OpenSSL reads
    // both ahead and decrypts only the first, so after the first
    // transaction the second is in OpenSSL's buffer, not the socket's (a
    // wait that asked only for decrypted bytes, then the socket, hung).
    for round in 0..20 {
        let mut first = BytesMut::new();
        frontend::query(&format!("SELECT {round}"), &mut first).unwrap();
        let mut second = BytesMut::new();
        frontend::query("SELECT 'second record'", &mut second).unwrap();
        raw.send_corked(&[&first, &second]).unwrap();
        assert_eq!(one_value(&mut raw), Some(round.to_string()));
        assert_eq!(one_value(&mut raw), Some("second record".into()));
    }

    // Still served after the pipelined batches, idle again first.
    std::thread::sleep(Duration::from_millis(150));
    let res = raw.query("SELECT 'last'");
    assert_eq!(res.rows, vec![vec![Some("last".to_string())]], "{res:?}");
    raw.terminate();
}

#[test]
fn a_query_in_the_record_after_the_startup_packet_is_served() {
    // Trust: the login reads nothing after the startup packet, so the
    // query's record, read ahead with it, waits in OpenSSL's buffer when
    // the client first goes idle: the wait must find it there.
    let pg = PgCluster::shared();
    let certs = Certs::generate("txn-tls-ahead");
    let pooler = Pooler::start(
        pg,
        PoolerOpts::transaction(2)
            .auth("trust")
            .tls(&tls_toml(Some(&certs), &[("sslmode", "require")])),
    );
    for round in 0..5 {
        let mut raw = raw_tls_link(&pooler);
        let params = [("user", TRUST_USER), ("database", TEST_DB)];
        let startup = startup_packet(PROTOCOL_3_0, &params);
        let mut query = BytesMut::new();
        frontend::query(&format!("SELECT {round}"), &mut query).unwrap();
        raw.send_corked(&[&startup, &query]).unwrap();
        raw.finish_login(&params, None)
            .unwrap_or_else(|e| panic!("login: {e:?}\n{}", pooler.log_text()));
        assert_eq!(one_value(&mut raw), Some(round.to_string()));
        raw.terminate();
    }
}
