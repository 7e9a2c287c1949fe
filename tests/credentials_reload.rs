//! Credentials follow RELOAD (issue 12, item 4): after a role's password
//! changes in PostgreSQL and in pgharbor's auth file (or a conninfo
//! `password=`), a reload gives the existing pool the new credential for
//! the backends it opens next. Before the reload, a new backend fails.
//!
//! The backends are reached over TCP, where the test cluster's pg_hba asks
//! for SCRAM; each test uses a role of its own (the cluster is shared).

mod common;

use std::time::Duration;

use common::util::free_port;
use common::wait::wait_until;
use common::{connect, db_err, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, Transport};
use common::{SCRAM_USER, TEST_DB};

const STEP: Duration = Duration::from_secs(20);

fn create_role(pg: &PgCluster, role: &str, password: &str) {
    pg.psql_ok(
        TEST_DB,
        &format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
             ALTER ROLE {role} PASSWORD '{password}'"
        ),
    );
}

/// Closes every backend of `role` from the server side and waits until
/// they are gone, so that the pool must open a new one.
fn empty_the_pool(pg: &PgCluster, role: &str) {
    let sql = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE usename = '{role}' AND backend_type = 'client backend'"
    );
    assert!(
        wait_until(STEP, || pg.psql_ok(TEST_DB, &sql) == "0"),
        "backends of {role} still there"
    );
}

/// Reloads with SIGHUP and waits for the `reloads`-th reload to be logged.
fn reload(pooler: &Pooler, reloads: usize) {
    pooler.signal(libc::SIGHUP);
    assert!(
        pooler.wait_for_log("configuration reloaded", reloads, STEP),
        "no reload logged:\n{}",
        pooler.log_text()
    );
}

/// Logs in and runs a query; the SQLSTATE and message on failure.
async fn login(conninfo: &str) -> Result<(), String> {
    let attempt = async {
        let c = connect(conninfo).await.map_err(|e| describe(&e))?;
        c.simple_query("SELECT 1").await.map_err(|e| describe(&e))?;
        Ok(())
    };
    tokio::time::timeout(STEP, attempt)
        .await
        .unwrap_or_else(|_| panic!("login to {conninfo} hung"))
}

fn describe(e: &tokio_postgres::Error) -> String {
    db_err(e).map_or_else(|| format!("{e:?}"), |d| format!("{} {}", d.code, d.message))
}

fn opts() -> PoolerOpts {
    PoolerOpts {
        port: Some(free_port()),
        ..PoolerOpts::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_auth_file_password_reaches_an_existing_pool_after_reload() {
    let pg = PgCluster::shared();
    let role = "reload_authfile_user";
    create_role(pg, role, "old_secret");
    let mut o = opts().databases(vec![DbEntry::new("reload_af", Backend::Tcp)]);
    o.userlist.push((role.into(), "old_secret".into()));
    let pooler = Pooler::start(pg, o);
    let with = |pw: &str| pooler.conninfo(Transport::Unix, role, Some(pw), "reload_af");
    login(&with("old_secret"))
        .await
        .expect("login with the old password");

    pg.psql_ok(TEST_DB, &format!("ALTER ROLE {role} PASSWORD 'new_secret'"));
    let userlist = pooler.dir().join("userlist.txt");
    let text = std::fs::read_to_string(&userlist).expect("read userlist");
    let changed = text.replace("\"old_secret\"", "\"new_secret\"");
    assert_ne!(text, changed, "{text}");
    std::fs::write(&userlist, changed).expect("write userlist");
    empty_the_pool(pg, role);

    // Not reloaded: pgharbor still knows the old password, the server does not.
    let e = login(&with("old_secret")).await.expect_err("old password");
    assert!(e.contains("password authentication failed"), "{e}");

    reload(&pooler, 1);
    login(&with("new_secret"))
        .await
        .expect("the pool logs in with the reloaded password");
    let e = login(&with("old_secret")).await.expect_err("old password");
    assert!(e.starts_with("28P01"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_conninfo_password_reaches_an_existing_pool_after_reload() {
    let pg = PgCluster::shared();
    let role = "reload_conninfo_user";
    create_role(pg, role, "old_ci_secret");
    let entry = DbEntry::new("reload_ci", Backend::Tcp).user(role, Some("old_ci_secret"));
    let pooler = Pooler::start(pg, opts().databases(vec![entry]));
    let client = pooler.conninfo(
        Transport::Unix,
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        "reload_ci",
    );
    login(&client).await.expect("login with the old password");

    pg.psql_ok(
        TEST_DB,
        &format!("ALTER ROLE {role} PASSWORD 'new_ci_secret'"),
    );
    let path = pooler.config_path();
    let text = std::fs::read_to_string(path).expect("read config");
    let changed = text.replace("password=old_ci_secret", "password=new_ci_secret");
    assert_ne!(text, changed, "{text}");
    std::fs::write(path, changed).expect("write config");
    empty_the_pool(pg, role);

    let e = login(&client).await.expect_err("before the reload");
    assert!(e.contains("password authentication failed"), "{e}");

    reload(&pooler, 1);
    login(&client)
        .await
        .expect("the pool logs in with the reloaded conninfo password");
}
