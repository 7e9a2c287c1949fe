//! `pgharbor report`: the overhead report of a running pooler, read from its
//! admin console (`SHOW OVERHEAD`) and printed as a table or as JSON.

use std::fmt::Write as _;

use tokio_postgres::{NoTls, SimpleQueryMessage};

/// Why the report could not be produced, in words that say what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The `--admin` string is not a connection string.
    #[error("--admin: {0}")]
    Conninfo(tokio_postgres::Error),
    /// No login to the admin console.
    #[error("cannot log in to the admin console: {0}")]
    Login(String),
    /// Logged in, but SHOW OVERHEAD failed.
    #[error("cannot read SHOW OVERHEAD from the admin console: {0}")]
    Query(tokio_postgres::Error),
}

/// What went wrong with a login, for a person: tokio-postgres says
/// "invalid configuration: password missing" where libpq would prompt.
fn explain_login(e: &tokio_postgres::Error, config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("(no user)");
    if let Some(db) = e.as_db_error() {
        let (code, message) = (db.code().code(), db.message());
        return match code {
            "28P01" => format!(
                "wrong password for user \"{user}\" ({code}: {message}); check password= in --admin or PGPASSWORD"
            ),
            "28000" if message.contains("SSL") => format!(
                "the pooler requires TLS on this transport ({code}: {message}), which pgharbor report does not speak; connect through its Unix socket"
            ),
            _ => format!("{code}: {message}"),
        };
    }
    // tokio-postgres keeps the cause out of its Display ("invalid
    // configuration"), in the source chain.
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    if text.contains("password missing") {
        return format!(
            "the admin console asks user \"{user}\" for a password and none was given; add password= to --admin or set PGPASSWORD (pgharbor report does not prompt)"
        );
    }
    if text.contains("TLS") {
        return format!(
            "{text}: pgharbor report does not speak TLS; use sslmode=disable (or prefer) with the pooler's Unix socket or a loopback address"
        );
    }
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    match io.map(std::io::Error::kind) {
        Some(std::io::ErrorKind::ConnectionRefused) => format!(
            "connection refused at {}: is pgharbor running and listening there?",
            target(config)
        ),
        Some(std::io::ErrorKind::NotFound) => format!(
            "no socket at {}: is pgharbor running, with this listen.unix_socket_dir and port?",
            target(config)
        ),
        _ => text,
    }
}

/// Where `config` points, as `host:port` or the socket file.
fn target(config: &tokio_postgres::Config) -> String {
    let port = config.get_ports().first().copied().unwrap_or(5432);
    match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => format!("{h}:{port}"),
        Some(tokio_postgres::config::Host::Unix(dir)) => {
            dir.join(format!(".s.PGSQL.{port}")).display().to_string()
        }
        None => format!("localhost:{port}"),
    }
}

/// One row of SHOW OVERHEAD: column names and text values (None = NULL).
pub type Row = Vec<(String, Option<String>)>;

/// Connects to the admin console (`dbname=pgharbor`) and reads SHOW OVERHEAD.
/// TLS is not used: point it at the Unix socket or a loopback address. As
/// with libpq, `PGPASSWORD` supplies a password the string does not give.
pub async fn fetch(conninfo: &str) -> Result<Vec<Row>, ReportError> {
    let mut config: tokio_postgres::Config = conninfo.parse().map_err(ReportError::Conninfo)?;
    if config.get_password().is_none() {
        if let Ok(pw) = std::env::var("PGPASSWORD") {
            config.password(pw);
        }
    }
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| ReportError::Login(explain_login(&e, &config)))?;
    let driver = tokio::spawn(connection);
    let messages = client
        .simple_query("SHOW OVERHEAD")
        .await
        .map_err(ReportError::Query)?;
    drop(client);
    let _ = driver.await;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                r.columns()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.name().to_string(), r.get(i).map(str::to_string)))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

/// `pgharbor report`: prints the report (a table, or JSON), or says why not.
pub fn run(conninfo: &str, json: bool) -> std::process::ExitCode {
    use std::process::ExitCode;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pgharbor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(fetch(conninfo)) {
        Ok(rows) if json => println!("{}", to_json(&rows)),
        Ok(rows) => print!("{}", to_table(&rows)),
        Err(e) => {
            eprintln!("pgharbor: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn get<'a>(row: &'a Row, name: &str) -> Option<&'a str> {
    row.iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.as_deref())
}

/// The rows as a JSON array of objects; numbers stay numbers.
pub fn to_json(rows: &[Row]) -> String {
    let array: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let object = row
                .iter()
                .map(|(k, v)| {
                    let value = match v {
                        None => serde_json::Value::Null,
                        Some(s) => s
                            .parse::<i64>()
                            .map(serde_json::Value::from)
                            .or_else(|_| s.parse::<f64>().map(serde_json::Value::from))
                            .unwrap_or_else(|_| serde_json::Value::from(s.as_str())),
                    };
                    (k.clone(), value)
                })
                .collect::<serde_json::Map<_, _>>();
            serde_json::Value::Object(object)
        })
        .collect();
    serde_json::to_string_pretty(&array).unwrap_or_else(|_| "[]".into())
}

/// Phases shown in the table (avg and p95 of each), client then server.
const SHOWN: [(&str, &str); 6] = [
    ("tls_handshake", "TLS"),
    ("auth", "auth"),
    ("backend_wait", "wait"),
    ("connect", "connect"),
    ("first_ready", "ready"),
    ("total", "total"),
];

/// A table a person can read: establishment (avg / p95 in µs) and transfer
/// per class, then the amortisation figure.
pub fn to_table(rows: &[Row]) -> String {
    let mut header = vec![
        "side".to_string(),
        "transport".into(),
        "tls".into(),
        "method".into(),
        "n".into(),
    ];
    header.extend(SHOWN.iter().map(|(_, label)| format!("{label} µs")));
    header.extend(["MB in".into(), "MB out".into(), "bulk MB/s".into()]);
    let mut lines = vec![header];
    let mut total = None;
    for row in rows {
        if get(row, "side") == Some("total") {
            total = Some(row);
            continue;
        }
        let mut cells = vec![
            get(row, "side").unwrap_or("").to_string(),
            get(row, "transport").unwrap_or("").to_string(),
            get(row, "tls").unwrap_or("").to_string(),
            get(row, "auth").unwrap_or("-").to_string(),
            get(row, "established").unwrap_or("0").to_string(),
        ];
        for (phase, _) in SHOWN {
            let avg = get(row, &format!("{phase}_avg_us"));
            let p95 = get(row, &format!("{phase}_p95_us"));
            cells.push(match (avg, p95) {
                (Some(a), Some(p)) => format!("{} / {}", round(a), round(p)),
                _ => "-".into(),
            });
        }
        let mb = |name| {
            get(row, name)
                .and_then(|v| v.parse::<f64>().ok())
                .map_or("-".into(), |b| format!("{:.1}", b / 1e6))
        };
        cells.push(mb("bytes_in"));
        cells.push(mb("bytes_out"));
        cells.push(get(row, "bulk_mb_per_s").map_or("-".into(), round));
        lines.push(cells);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  "));
        if n == 0 {
            let _ = writeln!(
                out,
                "{}",
                "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
            );
        }
    }
    if let Some(t) = total {
        let _ = writeln!(
            out,
            "\nclient logins: {}   backend connects: {}   backend handshakes avoided: {}   establishment time saved: {} ms",
            get(t, "logins").unwrap_or("0"),
            get(t, "backend_connects").unwrap_or("0"),
            get(t, "handshakes_avoided").unwrap_or("0"),
            get(t, "saved_ms").map_or("0".into(), round),
        );
    }
    out
}

/// Rounds a numeric string for display.
fn round(v: &str) -> String {
    v.parse::<f64>()
        .map_or_else(|_| v.to_string(), |f| format!("{f:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, Option<&str>)]) -> Row {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn table_and_json_show_classes_and_the_total() {
        let rows = vec![
            row(&[
                ("side", Some("client")),
                ("transport", Some("tcp-loopback")),
                ("tls", Some("t")),
                ("auth", Some("scram-sha-256")),
                ("established", Some("5")),
                ("tls_handshake_avg_us", Some("712.4")),
                ("tls_handshake_p95_us", Some("901")),
                ("bytes_out", Some("2500000")),
                ("bulk_mb_per_s", None),
            ]),
            row(&[
                ("side", Some("total")),
                ("logins", Some("10")),
                ("backend_connects", Some("2")),
                ("handshakes_avoided", Some("8")),
                ("saved_ms", Some("24.6")),
            ]),
        ];
        let table = to_table(&rows);
        assert!(table.contains("712 / 901"), "{table}");
        assert!(table.contains("scram-sha-256"), "{table}");
        assert!(table.contains("2.5"), "{table}");
        assert!(table.contains("backend handshakes avoided: 8"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&to_json(&rows)).unwrap();
        assert_eq!(json[0]["established"], 5);
        assert_eq!(json[0]["tls_handshake_avg_us"], 712.4);
        assert_eq!(json[0]["bulk_mb_per_s"], serde_json::Value::Null);
        assert_eq!(json[1]["side"], "total");
    }

    #[test]
    fn empty_report_is_just_a_header() {
        let table = to_table(&[]);
        assert_eq!(table.lines().count(), 2);
        assert_eq!(to_json(&[]), "[]");
    }
}
