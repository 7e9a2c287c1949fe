//! The authentication method as a dimension of SHOW OVERHEAD and of the
//! metrics (issue 16, item 2): peer logins over the Unix socket and SCRAM
//! logins over the socket and TCP land in rows of their own, so what a
//! login costs can be read per method.

mod common;
#[path = "admin_support/mod.rs"]
mod support;

use common::util::unique_temp_dir;
use common::{connect_ok, PgCluster, Pooler, Transport, SCRAM_USER, TEST_DB, TRUST_USER};
use support::{opts, show, Table, ADMIN_DB};

fn client_row(o: &Table, transport: &str, auth: &str) -> usize {
    o.find(&[("side", "client"), ("transport", transport), ("auth", auth)])
}

#[tokio::test(flavor = "multi_thread")]
async fn each_method_is_a_row_of_its_own() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test runs as root (CI does): peer maps root to trust_user");
    }
    let pg = PgCluster::shared();
    let dir = unique_temp_dir("overhead-auth");
    let (hba, ident) = (dir.join("pg_hba.conf"), dir.join("pg_ident.conf"));
    // trust_user by peer over the socket; scram_user (also the console's
    // admin) by SCRAM over both transports.
    std::fs::write(
        &hba,
        "local all trust_user peer map=pooled\n\
         local all all scram-sha-256\n\
         host all all 127.0.0.1/32 scram-sha-256\n",
    )
    .expect("write pg_hba.conf");
    std::fs::write(&ident, "pooled root trust_user\n").expect("write pg_ident.conf");
    let auth = format!(
        "hba_file = \"{}\"\nident_file = \"{}\"\n",
        hba.display(),
        ident.display()
    );
    let pooler = Pooler::start(pg, opts().auth_toml(&auth));
    for _ in 0..3 {
        let peer = connect_ok(&pooler.conninfo(Transport::Unix, TRUST_USER, None, TEST_DB)).await;
        peer.simple_query("SELECT 1").await.expect("peer query");
    }
    for t in [Transport::Unix, Transport::Tcp] {
        let c = connect_ok(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB)).await;
        c.simple_query("SELECT 1").await.expect("scram query");
    }
    let admin =
        connect_ok(&pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), ADMIN_DB))
            .await;
    let o = show(&admin, "SHOW OVERHEAD").await;
    assert_eq!(o.columns[..4], ["side", "transport", "tls", "auth"]);
    let peer = client_row(&o, "unix", "peer");
    assert_eq!(o.int(peer, "established"), 3);
    assert!(o.get(peer, "auth_avg_us").is_some());
    let socket_scram = client_row(&o, "unix", "scram-sha-256");
    assert_eq!(o.int(socket_scram, "established"), 1);
    let tcp_scram = client_row(&o, "tcp-loopback", "scram-sha-256");
    assert_eq!(o.int(tcp_scram, "established"), 1);
    for (r, _) in o.rows.iter().enumerate() {
        if o.get(r, "side") == Some("server") {
            assert_eq!(o.get(r, "auth"), None, "server rows have no client method");
        }
    }
    drop(admin);
    std::fs::remove_dir_all(&dir).ok();
}
