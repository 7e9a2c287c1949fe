//! Fleets (issue 17): pgharbor instances sharing one TCP port through
//! `listen.reuseport`, each with its own `listen.instance_id` and Unix
//! socket directory, and a `[peers]` table (the same for all: each skips
//! its own line) through which a CancelRequest that the kernel hands to the
//! wrong instance reaches the right one.

mod common;

use std::io::Read as _;
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::fleet::{
    cancel_and_wait_close, fleet, host, instance_of, login, reload_peers, send_query, sock_dir,
    socket_peers, with_owner, QUICK,
};
use common::util::free_port;
use common::wait::{wait_active, wait_show};
use common::wire::cancel_packet;
use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Reply};

#[test]
fn every_cancel_reaches_its_own_query_whichever_instance_takes_it() {
    let pg = PgCluster::shared();
    let fleet = fleet(pg, &[1, 2, 3], "transaction", socket_peers(3));
    let shared = Endpoint::Tcp(fleet.port);
    // 20 clients on the shared port, each with a query that runs 30s
    // unless cancelled; a thread per client notes when its answer came.
    let (done_tx, done_rx) = mpsc::channel();
    let mut keys = Vec::new();
    let mut landed = std::collections::BTreeSet::new();
    for i in 0..20 {
        let (mut c, (pid, secret)) = login(&shared);
        landed.insert(instance_of(secret));
        let marker = format!("fleet-client-{i}-");
        send_query(&mut c, &format!("SELECT pg_sleep(30) /* {marker} */"));
        wait_active(pg, &marker);
        keys.push((pid, secret));
        let done = done_tx.clone();
        std::thread::spawn(move || {
            let result = c.read_query_result(Duration::from_secs(40));
            let code = result.error.map(|e| e.code).unwrap_or_default();
            let _ = done.send((i, Instant::now(), code));
        });
    }
    assert!(
        landed.len() > 1 && landed.iter().all(|id| (1..=3).contains(id)),
        "the kernel put every client on one instance, or a key names no instance: {landed:?}"
    );
    // One cancel at a time, each on a fresh connection to the shared port.
    let mut sent_at = Vec::new();
    for &(pid, secret) in &keys {
        sent_at.push(Instant::now());
        cancel_and_wait_close(&shared, pid, secret, QUICK);
    }
    let mut answers = vec![None; keys.len()];
    for _ in 0..keys.len() {
        let (i, at, code) = done_rx
            .recv_timeout(Duration::from_secs(45))
            .expect("a client never got an answer");
        answers[i] = Some((at, code));
    }
    for (i, answer) in answers.into_iter().enumerate() {
        let (at, code) = answer.expect("answer");
        assert_eq!(
            code,
            "57014",
            "client {i} (instance {})",
            instance_of(keys[i].1)
        );
        // Not before its own cancel (so no other cancel hit it), and soon after.
        assert!(
            at >= sent_at[i],
            "client {i} was cancelled by someone else's key"
        );
        assert!(
            at - sent_at[i] < QUICK,
            "client {i}: cancel took {:?}",
            at - sent_at[i]
        );
    }
    let forwarded: usize = fleet
        .members
        .iter()
        .map(|m| {
            m.log_text()
                .matches("forwarding cancel request to a peer")
                .count()
        })
        .sum();
    assert!(
        forwarded > 0,
        "no cancel landed on another instance, nothing was forwarded"
    );
    // Every instance still serves.
    for m in &fleet.members {
        let (mut c, _) = login(&Endpoint::Unix(m.socket_path()));
        assert_eq!(c.query("SELECT 1").scalar().as_deref(), Some("1"));
    }
}

#[test]
fn unknown_dead_and_silent_peers_cost_a_cancel_nothing_more() {
    let pg = PgCluster::shared();
    // Peer 2 accepts connections but never reads (a hung instance, on
    // 127.0.0.2), peer 3's socket directory has no socket (a dead one),
    // and no line names instance 4.
    let silent_port = free_port();
    let silent = TcpListener::bind(("127.0.0.2", silent_port)).expect("bind 127.0.0.2");
    let fleet = fleet(pg, &[1], "session", |root, port| {
        format!(
            "1 = \"host={} port={port}\"\n\
             2 = \"host=127.0.0.2 port={silent_port} connect_timeout=2\"\n\
             3 = \"host={} port={port}\"\n",
            sock_dir(root, 1).display(),
            root.join("gone").display(),
        )
    });
    let one = &fleet.members[0];
    let shared = Endpoint::Tcp(fleet.port);
    let (mut victim, (pid, secret)) = login(&shared);
    assert_eq!(instance_of(secret), 1);
    send_query(&mut victim, "SELECT pg_sleep(30) /* fleet-victim */");
    wait_active(pg, "fleet-victim");

    // Unknown id, id 0 and a key out of hops: closed at once (the first
    // and last with a log line; id 0 is any unknown key, as PostgreSQL's).
    for (id, hops) in [(4, 3), (0, 3), (2, 0)] {
        let took = cancel_and_wait_close(&shared, pid, with_owner(secret, id, hops), QUICK);
        assert!(took < QUICK, "id {id}: {took:?}");
    }
    assert!(one.wait_for_log(
        "cancel request for an instance [peers] does not list dropped",
        1,
        QUICK
    ));
    assert!(one.wait_for_log("it was forwarded too often", 1, QUICK));
    // Malformed CancelRequests (short, and a protocol 3.2 key of 32 bytes,
    // which pgharbor never hands out) are closed without being forwarded.
    let mut long = 44u32.to_be_bytes().to_vec();
    long.extend_from_slice(&common::wire::CANCEL_REQUEST_CODE.to_be_bytes());
    long.extend_from_slice(&pid.to_be_bytes());
    long.extend(with_owner(secret, 2, 3).to_be_bytes());
    long.extend([7u8; 28]);
    let short = cancel_packet(pid, with_owner(secret, 2, 3))[..12]
        .iter()
        .enumerate()
        .map(|(i, b)| if i == 3 { 12 } else { *b })
        .collect::<Vec<u8>>();
    for packet in [long, short] {
        let mut c = RawConn::connect(&shared);
        c.send(&packet).expect("send");
        // PostgreSQL's answer to a bad length: FATAL 08P01, then the close.
        let replies = c.read_until_close(QUICK);
        assert_eq!(replies.last(), Some(&Reply::Closed), "{replies:?}");
        let codes: Vec<String> = replies
            .iter()
            .filter_map(|r| r.error())
            .map(|e| e.code)
            .collect();
        assert!(codes.iter().all(|c| c == "08P01"), "{codes:?}");
    }
    // A dead peer: the connect fails, the cancel connection closes.
    cancel_and_wait_close(&shared, pid, with_owner(secret, 3, 3), QUICK);
    assert!(one.wait_for_log("could not forward cancel request to the peer", 1, QUICK));

    // A silent peer: the cancel waits for it a bounded time, and meanwhile
    // the instance serves everyone else.
    let started = Instant::now();
    let mut pending = RawConn::connect(&shared);
    pending
        .send(&cancel_packet(pid, with_owner(secret, 2, 3)))
        .expect("send CancelRequest");
    let (mut other, _) = login(&Endpoint::Unix(one.socket_path()));
    assert_eq!(other.query("SELECT 1").scalar().as_deref(), Some("1"));
    assert_eq!(pending.read_msg(Duration::from_secs(15)), Reply::Closed);
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    // What the silent peer was sent: the same CancelRequest, one hop fewer.
    // (It stays in the backlog; accepting now reads it.)
    let (mut got, _) = silent.accept().expect("the forwarded cancel connected");
    got.set_read_timeout(Some(QUICK)).expect("timeout");
    let mut bytes = [0u8; 16];
    got.read_exact(&mut bytes)
        .expect("16 bytes of CancelRequest");
    assert_eq!(bytes.to_vec(), cancel_packet(pid, with_owner(secret, 2, 2)));
    // And nothing else was forwarded there (not the malformed ones).
    silent.set_nonblocking(true).expect("nonblocking");
    assert!(
        silent.accept().is_err(),
        "a second connection reached the silent peer"
    );

    // None of it touched the query; its own key still cancels it.
    cancel_and_wait_close(&shared, pid, secret, QUICK);
    let result = victim.read_query_result(QUICK);
    assert_eq!(result.error.map(|e| e.code).as_deref(), Some("57014"));
}

#[test]
fn instances_of_a_fleet_cannot_share_a_socket_directory() {
    let pg = PgCluster::shared();
    let fleet = fleet(pg, &[1], "session", socket_peers(1));
    let mut opts = PoolerOpts::default().listen_toml("reuseport = true\ninstance_id = 2\n");
    opts.port = Some(fleet.port);
    opts.socket_dir = Some(fleet.members[0].socket_dir().to_path_buf());
    // Its probe of the socket may reach the first instance before it exits.
    let err = match Pooler::try_start(pg, opts) {
        Err(e) => e,
        Ok(mut second) => {
            let exited = second.wait_exit(Duration::from_secs(10));
            assert!(exited.is_some_and(|s| !s.success()), "{exited:?}");
            second.log_text()
        }
    };
    assert!(
        err.contains("with listen.reuseport every instance needs its own listen.unix_socket_dir"),
        "{err}"
    );
    // The first one is untouched.
    let (mut c, _) = login(&Endpoint::Unix(fleet.members[0].socket_path()));
    assert_eq!(c.query("SELECT 1").scalar().as_deref(), Some("1"));
}

#[test]
fn check_refuses_reuseport_without_an_instance_id() {
    let (code, out) = Pooler::run_check(
        "[listen]\nreuseport = true\n[auth]\nauth_file = \"userlist.txt\"\n[databases.app]\nconninfo = \"host=/tmp\"\n",
    );
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("listen.reuseport: needs listen.instance_id"),
        "{out}"
    );
}

#[test]
fn peers_on_other_hosts_are_reached_over_tcp_and_a_reload_changes_them() {
    let pg = PgCluster::shared();
    let (port_a, port_b) = (free_port(), free_port());
    // B is "another host": its peers line points at 127.0.0.2.
    let a = host(pg, 1, port_a, &[], "");
    let b = host(
        pg,
        2,
        port_b,
        &["127.0.0.2"],
        &format!("1 = \"host=127.0.0.1 port={port_a}\"\n"),
    );
    let (mut client, (pid, secret)) = login(&Endpoint::Tcp(port_b));
    assert_eq!(instance_of(secret), 2);
    send_query(&mut client, "SELECT pg_sleep(30) /* fleet-remote */");
    wait_active(pg, "fleet-remote");

    // A has no line for 2 yet: the cancel is dropped, the query runs on.
    cancel_and_wait_close(&Endpoint::Tcp(port_a), pid, secret, QUICK);
    assert!(a.wait_for_log(
        "cancel request for an instance [peers] does not list dropped",
        1,
        QUICK
    ));
    // A RELOAD adds the line; now the same cancel gets there.
    reload_peers(&a, &format!("2 = \"host=127.0.0.2 port={port_b}\"\n"), 0);
    let sent = Instant::now();
    cancel_and_wait_close(&Endpoint::Tcp(port_a), pid, secret, QUICK);
    let result = client.read_query_result(QUICK);
    assert_eq!(result.error.map(|e| e.code).as_deref(), Some("57014"));
    assert!(sent.elapsed() < QUICK);
    assert!(a.wait_for_log("forwarding cancel request to a peer", 1, QUICK));
    assert!(b.wait_for_log("forwarding cancel request", 1, QUICK));
    // SHOW CONFIG shows the table in force; the id is restart-only.
    let peers = format!("2=127.0.0.2:{port_b}");
    wait_show(&a, "SHOW CONFIG_RELOAD", "the peers row", |r| {
        let row = |key: &str| {
            r.rows
                .iter()
                .find(|row| row[0].as_deref() == Some(key))
                .cloned()
                .unwrap_or_default()
        };
        let (p, id) = (row("peers.*"), row("listen.instance_id"));
        p.get(1).cloned().flatten().as_deref() == Some(peers.as_str())
            && p.get(4).cloned().flatten().as_deref() == Some("immediate")
            && id.get(1).cloned().flatten().as_deref() == Some("1")
            && id.get(4).cloned().flatten().as_deref() == Some("restart")
    });
}

#[test]
fn peers_tables_that_disagree_cannot_make_a_cancel_loop() {
    let pg = PgCluster::shared();
    let (port_a, port_b) = (free_port(), free_port());
    // Each says instance 3 is the other one.
    let a = host(
        pg,
        1,
        port_a,
        &[],
        &format!("3 = \"host=127.0.0.1 port={port_b}\"\n"),
    );
    let b = host(
        pg,
        2,
        port_b,
        &[],
        &format!("3 = \"host=127.0.0.1 port={port_a}\"\n"),
    );
    let took = cancel_and_wait_close(
        &Endpoint::Tcp(port_a),
        42,
        with_owner(0x0012_3456, 3, 3),
        QUICK,
    );
    assert!(took < QUICK, "{took:?}");
    // A -> B -> A -> B, and B drops it: three hops.
    let forwards = |p: &Pooler| {
        p.log_text()
            .matches("forwarding cancel request to a peer")
            .count()
    };
    assert!(
        b.wait_for_log("it was forwarded too often", 1, QUICK),
        "{}",
        b.log_text()
    );
    assert_eq!((forwards(&a), forwards(&b)), (2, 1));
    // Both still serve.
    for p in [&a, &b] {
        let (mut c, _) = login(&Endpoint::Tcp(p.port()));
        assert_eq!(c.query("SELECT 1").scalar().as_deref(), Some("1"));
    }
}
