//! The pool keys at their three levels: defaults, valid values, errors
//! naming the dotted key, and user > database > `[pool]` precedence.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::{Config, PoolMode};

const AUTH: &str = "[auth]\nmethod = \"trust\"\n";

fn parse(text: &str) -> Config {
    Config::parse(&format!("{AUTH}{text}"), Path::new("/etc/pgharbor.toml"))
        .unwrap_or_else(|e| panic!("{text}\n=> {e}"))
}

fn assert_err(text: &str, want: &str) {
    match Config::parse(&format!("{AUTH}{text}"), Path::new("/etc/pgharbor.toml")) {
        Ok(c) => panic!("{text}\n=> parsed: {c:?}"),
        Err(e) => {
            let got = e.to_string();
            assert!(got.starts_with(want), "{text}\n got: {got}\nwant: {want}…");
        }
    }
}

#[test]
fn defaults_are_pgbouncers() {
    let c = parse("");
    let p = &c.pool;
    assert_eq!(p.min_pool_size, 0);
    assert_eq!(p.reserve_pool_size, 0);
    assert_eq!(p.reserve_pool_timeout, Duration::from_secs(5));
    assert_eq!(p.max_db_connections, 0);
    assert_eq!(p.max_user_connections, 0);
    assert_eq!(p.server_idle_timeout, Duration::from_secs(600));
    assert_eq!(p.server_lifetime, Duration::from_secs(3600));
    assert_eq!(p.server_check_delay, Duration::from_secs(30));
    assert_eq!(p.server_check_query, "SELECT 1");
    assert_eq!(p.idle_transaction_timeout, Duration::ZERO);
    assert_eq!(p.max_prepared_statements, 200);
    assert!(p.track_parameters.is_empty());
    assert!(c.users.is_empty());
}

#[test]
fn every_pool_key_parses() {
    let c = parse(
        r#"
        [pool]
        mode = "transaction"
        default_pool_size = 10
        min_pool_size = 2
        reserve_pool_size = 3
        reserve_pool_timeout = "250ms"
        max_db_connections = 40
        max_user_connections = 50
        server_idle_timeout = "0s"
        server_lifetime = "1h 30m"
        server_check_delay = "0s"
        server_check_query = ""
        idle_transaction_timeout = "2s"
        max_prepared_statements = 0
        track_parameters = ["search_path", "Work_Mem", "myapp.tenant", "search_path"]
        "#,
    );
    let p = &c.pool;
    assert_eq!(p.mode, PoolMode::Transaction);
    assert_eq!((p.min_pool_size, p.reserve_pool_size), (2, 3));
    assert_eq!(p.reserve_pool_timeout, Duration::from_millis(250));
    assert_eq!((p.max_db_connections, p.max_user_connections), (40, 50));
    assert_eq!(p.server_idle_timeout, Duration::ZERO);
    assert_eq!(p.server_lifetime, Duration::from_secs(5400));
    assert_eq!(p.server_check_delay, Duration::ZERO);
    assert_eq!(p.server_check_query, "");
    assert_eq!(p.idle_transaction_timeout, Duration::from_secs(2));
    assert_eq!(p.max_prepared_statements, 0);
    assert_eq!(
        p.track_parameters,
        ["search_path", "work_mem", "myapp.tenant"],
        "lower-cased, duplicates dropped"
    );
    assert_eq!(
        parse("[pool]\nmode = \"statement\"").pool.mode,
        PoolMode::Statement
    );
}

#[test]
fn tracked_parameters_are_the_builtin_six_and_the_listed_ones() {
    let c = parse("[pool]\ntrack_parameters = [\"Search_Path\"]\n");
    for name in TRACKED_PARAMETERS {
        assert!(c.pool.is_tracked(name), "{name}");
    }
    // Matched as PostgreSQL matches parameter names: in any case.
    for name in [
        "datestyle",
        "timezone",
        "intervalstyle",
        "search_path",
        "DateStyle",
        "Search_Path",
    ] {
        assert!(c.pool.is_tracked(name), "{name}");
    }
    for name in ["work_mem", "", "options"] {
        assert!(!c.pool.is_tracked(name), "{name}");
    }
    assert!(!parse("").pool.is_tracked("search_path"));
}

#[test]
fn database_and_user_levels_override_pool() {
    let c = parse(
        r#"
        [pool]
        mode = "session"
        default_pool_size = 10
        min_pool_size = 2
        reserve_pool_size = 1
        max_db_connections = 30
        max_user_connections = 40
        [databases.app]
        conninfo = "host=/tmp"
        pool_mode = "transaction"
        pool_size = 5
        min_pool_size = 8
        reserve_pool_size = 0
        max_db_connections = 0
        [databases.plain]
        conninfo = "host=/tmp"
        [users.alice]
        pool_mode = "statement"
        max_user_connections = 0
        [users.bob]
        max_user_connections = 3
        [users."odd.name"]
        pool_mode = "session"
        "#,
    );
    // pool_mode: user > database > pool.
    assert_eq!(c.pool_mode_for("app", "alice"), PoolMode::Statement);
    assert_eq!(c.pool_mode_for("app", "bob"), PoolMode::Transaction);
    assert_eq!(c.pool_mode_for("plain", "bob"), PoolMode::Session);
    assert_eq!(c.pool_mode_for("plain", "alice"), PoolMode::Statement);
    assert_eq!(c.pool_mode_for("app", "odd.name"), PoolMode::Session);
    assert_eq!(c.pool_mode_for("unknown", "nobody"), PoolMode::Session);
    // Sizes per database; min_pool_size is capped at the pool size.
    assert_eq!((c.pool_size_for("app"), c.min_pool_size_for("app")), (5, 5));
    assert_eq!(
        (c.pool_size_for("plain"), c.min_pool_size_for("plain")),
        (10, 2)
    );
    assert_eq!(c.reserve_pool_size_for("app"), 0);
    assert_eq!(c.reserve_pool_size_for("plain"), 1);
    assert_eq!(c.max_db_connections_for("app"), 0, "0 = no limit overrides");
    assert_eq!(c.max_db_connections_for("plain"), 30);
    // Limits per user.
    assert_eq!(c.max_user_connections_for("alice"), 0);
    assert_eq!(c.max_user_connections_for("bob"), 3);
    assert_eq!(c.max_user_connections_for("odd.name"), 40);
    assert_eq!(c.max_user_connections_for("carol"), 40);
    assert_eq!(c.users["bob"].pool_mode, None);
}

#[test]
fn bad_values_name_their_dotted_key() {
    let cases = [
        ("[pool]\nmode = \"txn\"", "pool.mode: invalid value \"txn\" (expected one of \"session\", \"transaction\", \"statement\")"),
        ("[pool]\nmin_pool_size = -1", "pool.min_pool_size: must be 0 or more, not -1"),
        ("[pool]\nreserve_pool_size = -2", "pool.reserve_pool_size: must be 0 or more, not -2"),
        ("[pool]\nmax_db_connections = -1", "pool.max_db_connections: must be 0 or more, not -1"),
        ("[pool]\nmax_user_connections = -1", "pool.max_user_connections: must be 0 or more, not -1"),
        ("[pool]\nmax_prepared_statements = -1", "pool.max_prepared_statements: must be 0 or more, not -1"),
        ("[pool]\nmin_pool_size = \"2\"", "pool.min_pool_size: invalid type: string, expected an integer"),
        ("[pool]\nreserve_pool_timeout = 5", "pool.reserve_pool_timeout: a duration needs a unit: write \"5s\""),
        ("[pool]\nreserve_pool_timeout = \"5\"", "pool.reserve_pool_timeout: invalid duration \"5\""),
        ("[pool]\nserver_idle_timeout = \"ten minutes\"", "pool.server_idle_timeout: invalid duration"),
        ("[pool]\nserver_lifetime = \"-1s\"", "pool.server_lifetime: invalid duration"),
        ("[pool]\nserver_check_delay = \"30\"", "pool.server_check_delay: invalid duration \"30\""),
        ("[pool]\nidle_transaction_timeout = \"1x\"", "pool.idle_transaction_timeout: invalid duration"),
        ("[pool]\nserver_check_query = 1", "pool.server_check_query: invalid type: integer `1`"),
        ("[pool]\ntrack_parameters = \"search_path\"", "pool.track_parameters: invalid type: string"),
        ("[pool]\ntrack_parameters = [\"ok\", \"\"]", "pool.track_parameters[1]: invalid parameter name \"\""),
        ("[pool]\ntrack_parameters = [\"a b\"]", "pool.track_parameters[0]: invalid parameter name \"a b\""),
        ("[pool]\nserver_check_timeout = \"1s\"", "pool.server_check_timeout: unknown key"),
        ("[databases.app]\nconninfo = \"\"\nmin_pool_size = -1", "databases.app.min_pool_size: must be 0 or more, not -1"),
        ("[databases.app]\nconninfo = \"\"\nreserve_pool_size = -1", "databases.app.reserve_pool_size: must be 0 or more, not -1"),
        ("[databases.app]\nconninfo = \"\"\nmax_db_connections = -3", "databases.app.max_db_connections: must be 0 or more, not -3"),
        ("[databases.app]\nconninfo = \"\"\nmax_user_connections = 3", "databases.app.max_user_connections: unknown key"),
        ("[databases.app]\nconninfo = \"\"\npool_mode = \"none\"", "databases.app.pool_mode: invalid value \"none\""),
        ("[users.alice]\npool_mode = \"Session\"", "users.alice.pool_mode: invalid value \"Session\""),
        ("[users.alice]\nmax_user_connections = -1", "users.alice.max_user_connections: must be 0 or more, not -1"),
        ("[users.alice]\npool_size = 3", "users.alice.pool_size: unknown key (expected `pool_mode` or `max_user_connections`)"),
        ("[users.\"a b\"]\nmax_user_connections = \"3\"", "users.\"a b\".max_user_connections: invalid type: string"),
        ("[users.\"\"]\npool_mode = \"session\"", "users.\"\": user name must not be empty"),
        ("[users]\nalice = \"session\"", "users.alice: invalid type: string, expected a table"),
    ];
    for (text, want) in cases {
        assert_err(text, want);
    }
}
