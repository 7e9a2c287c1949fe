//! prometheus-community/pgbouncer_exporter against pgharbor: its queries,
//! as it sends them (lib/pq's simple query protocol, `SHOW x;` with the
//! trailing semicolon, on `dbname=pgbouncer`), and the checks its
//! collector makes of each answer: SHOW VERSION has exactly one column
//! `version`; SHOW LISTS two columns with numeric `items`; SHOW CONFIG three
//! or four columns, with `max_client_conn` and `max_user_connections` as
//! numbers; SHOW DATABASES has every column the exporter maps, its gauges
//! numeric. SHOW POOLS and SHOW STATS_TOTALS columns are checked in their
//! own test file.

mod common;

use common::{
    connect_ok, psql_ok, Backend, DbEntry, PgCluster, Pooler, PoolerOpts, Transport, MD5_USER,
    SCRAM_USER, TEST_DB,
};
use tokio_postgres::{Client, SimpleQueryMessage};

/// The exporter's console login: a stats user, on PgBouncer's name.
const EXPORTER_USER: (&str, &str) = MD5_USER;

/// SHOW DATABASES columns the exporter reads: labels, then gauges.
const DATABASE_LABELS: [&str; 6] = [
    "name",
    "host",
    "port",
    "database",
    "force_user",
    "pool_mode",
];
const DATABASE_GAUGES: [&str; 6] = [
    "pool_size",
    "reserve_pool",
    "max_connections",
    "current_connections",
    "paused",
    "disabled",
];

/// SHOW LISTS rows the exporter turns into metrics (`dns_pending` it skips).
const LISTS: [&str; 11] = [
    "databases",
    "users",
    "pools",
    "free_clients",
    "used_clients",
    "login_clients",
    "free_servers",
    "used_servers",
    "dns_names",
    "dns_zones",
    "dns_queries",
];

/// One answer as the exporter's `rows.Columns()` and raw scans see it.
struct Answer {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

impl Answer {
    fn col(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns))
    }
}

async fn query(c: &Client, sql: &str) -> Answer {
    let messages = c
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let mut a = Answer {
        columns: Vec::new(),
        rows: Vec::new(),
    };
    for m in messages {
        match m {
            SimpleQueryMessage::RowDescription(cols) => {
                a.columns = cols.iter().map(|c| c.name().to_string()).collect()
            }
            SimpleQueryMessage::Row(r) => a
                .rows
                .push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect()),
            _ => {}
        }
    }
    a
}

/// The exporter's `strconv.ParseFloat` (NULL it takes as NaN, which is fine).
fn float(sql: &str, column: &str, v: &Option<String>) {
    if let Some(text) = v {
        assert!(
            text.parse::<f64>().is_ok(),
            "{sql}: {column} = {text:?} does not parse as a float"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pgbouncer_exporters_queries_get_the_shapes_it_parses() {
    let pg = PgCluster::shared();
    let opts = PoolerOpts::default()
        .admin_users(&[SCRAM_USER.0])
        .stats_users(&[EXPORTER_USER.0])
        .databases(vec![
            DbEntry::new(TEST_DB, Backend::Unix),
            DbEntry::new("other", Backend::Tcp).pool_size(3),
        ]);
    let pooler = Pooler::start(pg, opts);
    // Something to count: one client holding a backend.
    let app = pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
    let client = connect_ok(&app).await;
    client.simple_query("SELECT 1").await.expect("query");
    let dsn = pooler.conninfo(
        Transport::Tcp,
        EXPORTER_USER.0,
        Some(EXPORTER_USER.1),
        "pgbouncer",
    );
    let c = connect_ok(&dsn).await;

    // getDB's ping, then Collect's queries in order.
    query(&c, "SHOW STATS").await;
    let version = query(&c, "SHOW VERSION;").await;
    assert_eq!(version.columns, ["version"]);
    assert_eq!(version.rows.len(), 1);
    assert!(version.rows[0][0]
        .as_deref()
        .unwrap_or("")
        .starts_with("pgharbor "));

    let lists = query(&c, "SHOW LISTS;").await;
    assert_eq!(lists.columns, ["list", "items"]);
    for row in &lists.rows {
        float("SHOW LISTS", row[0].as_deref().unwrap_or("?"), &row[1]);
        assert!(row[1].is_some(), "{row:?}");
    }
    let items = |name: &str| -> i64 {
        let row = lists.rows.iter().find(|r| r[0].as_deref() == Some(name));
        let row = row.unwrap_or_else(|| panic!("SHOW LISTS has no {name} row"));
        row[1].as_deref().and_then(|v| v.parse().ok()).unwrap_or(-1)
    };
    for name in LISTS.iter().chain(&["dns_pending"]) {
        items(name);
    }
    assert_eq!(items("databases"), 2);
    assert_eq!(items("pools"), 1);
    assert_eq!(items("used_servers"), 1);
    // The app client and this console session; nobody is logging in.
    assert_eq!((items("used_clients"), items("login_clients")), (2, 0));
    assert_eq!(items("users"), 1, "the one user with a pool and a client");

    let config = query(&c, "SHOW CONFIG;").await;
    assert!(
        matches!(config.columns.len(), 3 | 4),
        "{:?}",
        config.columns
    );
    let value = |key: &str| {
        let row = config.rows.iter().find(|r| r[0].as_deref() == Some(key));
        row.unwrap_or_else(|| panic!("SHOW CONFIG has no {key}"))[1].clone()
    };
    for key in ["max_client_conn", "max_user_connections"] {
        float("SHOW CONFIG", key, &value(key));
    }
    assert_eq!(value("max_client_conn"), value("pool.max_client_conn"));
    assert_eq!(value("max_client_conn").as_deref(), Some("10000"));

    check_databases(&query(&c, "SHOW databases;").await);
    query(&c, "SHOW pools;").await;

    // psql, the other client people point at the console.
    let psql_dsn = pooler.conninfo(Transport::Unix, EXPORTER_USER.0, None, "pgbouncer");
    let out = psql_ok(&psql_dsn, Some(EXPORTER_USER.1), "SHOW LISTS;");
    assert!(out.lines().any(|l| l == "pools|1"), "{out}");
    drop(client);
}

/// SHOW DATABASES as the exporter reads it.
fn check_databases(dbs: &Answer) {
    let sql = "SHOW DATABASES";
    for label in DATABASE_LABELS {
        dbs.col(label);
    }
    for gauge in DATABASE_GAUGES {
        let i = dbs.col(gauge);
        for row in &dbs.rows {
            assert!(row[i].is_some(), "{sql}: {gauge} is NULL in {row:?}");
            float(sql, gauge, &row[i]);
        }
    }
    let other = dbs
        .rows
        .iter()
        .find(|r| r[dbs.col("name")].as_deref() == Some("other"))
        .expect("a row for other");
    let get = |c: &str| other[dbs.col(c)].as_deref();
    assert_eq!(
        (
            get("pool_size"),
            get("current_connections"),
            get("disabled")
        ),
        (Some("3"), Some("0"), Some("0"))
    );
    assert_eq!(get("reserve_pool"), get("reserve_pool_size"));
}
