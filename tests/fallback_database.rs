//! `[databases."*"]`, PgBouncer's fallback database: any name without a
//! table of its own reaches the PostgreSQL database of that name, with a
//! pool of its own; a name PostgreSQL lacks gets PostgreSQL's own error,
//! as a direct connection would.

mod common;

use common::{
    connect_err, connect_ok, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, Transport,
    SCRAM_USER, TEST_DB,
};

fn fallback_pooler(pg: &PgCluster, dbname: Option<&str>) -> Pooler {
    let mut star = DbEntry::new("*", Backend::Unix);
    star.dbname = dbname.map(str::to_string);
    let named = DbEntry::new("app", Backend::Unix).conninfo_extra("application_name=named");
    Pooler::start(
        pg,
        PoolerOpts::default()
            .databases(vec![star, named])
            .admin_users(&[SCRAM_USER.0]),
    )
}

async fn current_database(pooler: &Pooler, t: Transport, db: &str) -> (String, String) {
    let c = connect_ok(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), db)).await;
    let row = c
        .query_one(
            "SELECT current_database(), current_setting('application_name')",
            &[],
        )
        .await
        .expect("query");
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread")]
async fn any_name_reaches_the_backend_database_of_that_name() {
    let pg = PgCluster::shared();
    let pooler = fallback_pooler(pg, None);
    for t in Transport::ALL {
        for db in [TEST_DB, "postgres"] {
            let (name, _) = current_database(&pooler, t, db).await;
            assert_eq!(name, db, "{t:?}");
        }
        // A table of its own wins over the fallback.
        let (name, app) = current_database(&pooler, t, "app").await;
        assert_eq!((name.as_str(), app.as_str()), (TEST_DB, "named"));

        // PostgreSQL's own refusal of a database it lacks, as direct.
        let direct =
            connect_err(&pg.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), "no_such_db")).await;
        let through =
            connect_err(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), "no_such_db")).await;
        assert_eq!(through.code, direct.code, "{through:?} vs {direct:?}");
        assert_eq!(through.code, "3D000");
    }
    // The admin console is never the fallback's.
    let admin = connect_ok(&pooler.conninfo(
        Transport::Unix,
        SCRAM_USER.0,
        Some(SCRAM_USER.1),
        "pgharbor",
    ))
    .await;
    let pools = admin.simple_query("SHOW POOLS").await.expect("SHOW POOLS");
    let names: Vec<String> = pools
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    // Each name the fallback served has a pool of its own.
    for db in [TEST_DB, "postgres", "app"] {
        assert!(names.iter().any(|n| n == db), "{db} in {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fallback_that_names_a_dbname_sends_every_name_there() {
    let pg = PgCluster::shared();
    let pooler = fallback_pooler(pg, Some("postgres"));
    for db in ["anything", "else"] {
        let (name, _) = current_database(&pooler, Transport::Tcp, db).await;
        assert_eq!(name, "postgres");
    }
}
