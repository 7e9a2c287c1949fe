//! Helpers shared by the admin console tests (`tests/admin.rs`,
//! `tests/admin_control.rs`): console connections and result tables.
#![allow(dead_code)]

use std::time::Duration;

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::common::{connect_ok, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER};

pub const ADMIN_DB: &str = "pgharbor";

pub fn opts() -> PoolerOpts {
    PoolerOpts::default().admin_users(&[SCRAM_USER.0])
}

pub async fn console(pooler: &Pooler, t: Transport) -> Client {
    connect_ok(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), ADMIN_DB)).await
}

/// A raw-protocol console session, logged in.
pub fn raw_console(pooler: &Pooler, t: Transport) -> (RawConn, crate::common::wire::Session) {
    let mut raw = RawConn::connect(&pooler.endpoint(t));
    let params = [("user", SCRAM_USER.0), ("database", ADMIN_DB)];
    let session = raw
        .login(&params, Some(SCRAM_USER.1))
        .expect("raw console login");
    (raw, session)
}

/// One command's answer: column names and text values.
#[derive(Debug)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

impl Table {
    pub fn get(&self, row: usize, column: &str) -> Option<&str> {
        let i = self.columns.iter().position(|c| c == column);
        let i = i.unwrap_or_else(|| panic!("no column {column} in {:?}", self.columns));
        self.rows[row][i].as_deref()
    }

    pub fn int(&self, row: usize, column: &str) -> i64 {
        let v = self.get(row, column);
        v.and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{column} of row {row} is {v:?}, not an integer"))
    }

    /// The index of the row with these (column, value) pairs.
    pub fn find(&self, key: &[(&str, &str)]) -> usize {
        (0..self.rows.len())
            .find(|&r| key.iter().all(|(c, v)| self.get(r, c) == Some(*v)))
            .unwrap_or_else(|| panic!("no row with {key:?} in {self:#?}"))
    }
}

pub async fn show(client: &Client, sql: &str) -> Table {
    let messages = client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let mut t = Table {
        columns: Vec::new(),
        rows: Vec::new(),
    };
    for m in messages {
        match m {
            SimpleQueryMessage::RowDescription(cols) => {
                t.columns = cols.iter().map(|c| c.name().to_string()).collect()
            }
            SimpleQueryMessage::Row(r) => t
                .rows
                .push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect()),
            _ => {}
        }
    }
    t
}

/// The SQLSTATE and message of a console command that must fail.
pub async fn fails(client: &Client, sql: &str) -> (String, String) {
    let e = match client.simple_query(sql).await {
        Ok(m) => panic!("{sql} succeeded: {} messages", m.len()),
        Err(e) => e,
    };
    let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e:?}"));
    (db.code().code().to_string(), db.message().to_string())
}

/// Runs `sql` until `done` holds for its answer (20 ms apart, 5 s at most).
pub async fn show_until(admin: &Client, sql: &str, done: impl Fn(&Table) -> bool) -> Table {
    for _ in 0..250 {
        let t = show(admin, sql).await;
        if done(&t) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{sql}: condition not met in 5 s: {:#?}",
        show(admin, sql).await
    )
}
