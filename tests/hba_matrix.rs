//! Issue 16's matrix, as a differential test: HBA rule files × transports
//! (Unix socket; TCP 127.0.0.1 with libpq sslmode disable, prefer,
//! require) × users × databases. Each combination is run with psql (the
//! system libpq) once against PostgreSQL 15 reading the rule file as its
//! pg_hba.conf and once against pgharbor reading the same text as
//! `auth.hba_file`; what the client saw (served with or without TLS, or
//! the exact error text) must be equal.
//!
//! The reference clusters only answer direct logins. pgharbor's own
//! backend is the shared cluster (`local all all trust`), so the rules
//! under test never judge pgharbor's server connections, only its clients.
//!
//! Not covered: `+group` and `samerole` (pgharbor refuses them when it
//! reads the file: it cannot see role membership). Which method ran is
//! not shown by psql, so a raw client (hba_matrix_support/wire_probe.rs)
//! adds rows with the authentication requests it was sent.

mod common;
#[path = "hba_matrix_support/wire_probe.rs"]
mod wire_probe;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::pg::Custom;
use common::tls::{psql_conninfo, tls_toml, Certs};
use common::util::TempDir;
use common::{Backend, DbEntry, PgCluster, Pooler, PoolerOpts, MD5_USER, SCRAM_USER, TEST_DB};
use wire_probe::{wire_outcome, WIRE_TRANSPORTS};

/// The database named like a user, so that `sameuser` can match.
const SAMEUSER_DB: &str = "md5_user";
const DATABASES: [&str; 3] = [TEST_DB, "postgres", SAMEUSER_DB];
/// (user, password given to the client). trust_user has no password in
/// PostgreSQL, so the client gets none: a password rule then ends in
/// libpq's "no password supplied" on both sides.
const CLIENTS: [(&str, Option<&str>); 4] = [
    ("trust_user", None),
    (SCRAM_USER.0, Some(SCRAM_USER.1)),
    (MD5_USER.0, Some(MD5_USER.1)),
    (MD5_USER.0, Some("wrong_pass")),
];
/// Transport label and the TCP sslmode (None: the Unix socket, where
/// libpq never uses TLS whatever sslmode says).
const TRANSPORTS: [(&str, Option<&str>); 4] = [
    ("unix", None),
    ("tcp/disable", Some("disable")),
    ("tcp/prefer", Some("prefer")),
    ("tcp/require", Some("require")),
];

/// Every file starts with `local all postgres trust`: the harness sets the
/// reference cluster up as `postgres` over its socket. No client of the
/// matrix logs in as postgres, so the line decides nothing below.
const HARNESS_LINE: &str = "local all postgres trust\n";

/// The rule files: (name, body after [`HARNESS_LINE`]). `@USERS` is
/// replaced by `@/abs/path/users` (a file listing md5_user), the same
/// absolute path for both readers.
const RULE_FILES: [(&str, &str); 5] = [
    (
        "connection types and methods",
        "local all trust_user trust\n\
         local all scram_user scram-sha-256\n\
         local all md5_user md5\n\
         hostssl all scram_user 127.0.0.1/32 scram-sha-256\n\
         hostnossl all scram_user 127.0.0.1/32 reject\n\
         hostnossl all md5_user 127.0.0.1/32 password\n\
         hostssl all md5_user 127.0.0.1/32 md5\n\
         host all trust_user 127.0.0.1/32 trust\n",
    ),
    (
        "first match wins",
        "# a reject before a trust, and a trust before a reject\n\
         local all trust_user reject\n\
         local all trust_user trust\n\
         host all trust_user 127.0.0.1/32 trust\n\
         host all trust_user 127.0.0.1/32 reject\n\
         hostssl all md5_user 127.0.0.1/32 reject\n\
         host all md5_user 127.0.0.1/32 md5\n\
         host all all 127.0.0.1/32 scram-sha-256\n\
         local all all password\n",
    ),
    (
        "database and user lists",
        "local harbor_test trust_user,md5_user trust\n\
         local sameuser all md5\n\
         local all scram_user reject\n\
         host harbor_test,postgres scram_user 127.0.0.1/32 scram-sha-256\n\
         host harbor_test @USERS 127.0.0.1/32 md5\n\
         host sameuser all 127.0.0.1/32 password\n\
         host all all 0.0.0.0/0 reject\n",
    ),
    (
        "addresses",
        "host all trust_user 10.0.0.0/8 trust\n\
         host all trust_user 127.0.0.0/8 md5\n\
         host all scram_user samehost trust\n\
         host all md5_user ::1/128 trust\n\
         host all md5_user 127.0.0.1 255.255.255.255 scram-sha-256\n\
         local all all scram-sha-256\n",
    ),
    (
        "only TLS, only plain",
        "hostssl all trust_user,scram_user 127.0.0.1/32 trust\n\
         hostnossl all md5_user,trust_user 127.0.0.1/32 password\n\
         local all md5_user reject\n",
    ),
];

/// The full text of one rule file.
fn rule_text(body: &str, users_file: &Path) -> String {
    format!(
        "{HARNESS_LINE}{}",
        body.replace("@USERS", &format!("@{}", users_file.display()))
    )
}

/// A file both readers can open (PostgreSQL runs as `postgres`), and its
/// directory's guard: keep it until the clusters and poolers are gone.
fn users_file() -> (TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    // unique_temp_dir makes it 0755 already.
    let dir = TempDir::new("hba-matrix");
    let path = dir.path().join("users");
    std::fs::write(&path, "# @file inclusion\nmd5_user\n").expect("write users");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod users");
    (dir, path)
}

/// One side's server: where psql connects and what to scrub from its text.
struct Side<'a> {
    socket_dir: &'a Path,
    port: u16,
}

impl Side<'_> {
    fn conninfo(&self, sslmode: Option<&str>, user: &str, db: &str) -> String {
        match sslmode {
            None => format!(
                "host={} port={} user={user} dbname={db} sslmode=disable",
                self.socket_dir.display(),
                self.port
            ),
            Some(m) => format!(
                "host=127.0.0.1 port={} user={user} dbname={db} sslmode={m}",
                self.port
            ),
        }
    }

    /// What the client saw, in one line.
    fn outcome(
        &self,
        sslmode: Option<&str>,
        user: &str,
        password: Option<&str>,
        db: &str,
    ) -> String {
        let run = psql_conninfo(&self.conninfo(sslmode, user, db), password);
        if run.ok {
            return if run.uses_tls() {
                "served, TLS"
            } else {
                "served, plain"
            }
            .to_string();
        }
        self.normalise(&run.stderr)
    }

    fn wire(&self, tcp: Option<bool>, user: &str, password: Option<&str>, db: &str) -> String {
        wire_outcome(self.socket_dir, self.port, tcp, user, password, db)
    }

    /// The one place texts are made comparable: the two servers differ in
    /// socket directory and port, which psql names in "connection to
    /// server ... failed"; everything else must be equal as it stands.
    fn normalise(&self, stderr: &str) -> String {
        let sock = self.socket_dir.display().to_string();
        stderr
            .replace(&sock, "<sock>")
            .replace(&format!(".s.PGSQL.{}", self.port), ".s.PGSQL.<port>")
            .replace(&format!("port {}", self.port), "port <port>")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// One row of the matrix.
struct Row {
    file: &'static str,
    transport: &'static str,
    user: &'static str,
    password: Option<&'static str>,
    db: &'static str,
    direct: String,
    pooled: String,
}

/// Runs every combination of one rule file against both servers.
fn run_file(file: &'static str, direct: &Side<'_>, pooled: &Side<'_>) -> Vec<Row> {
    let mut combos = Vec::new();
    for (transport, sslmode) in TRANSPORTS {
        for (user, password) in CLIENTS {
            for db in DATABASES {
                combos.push((transport, sslmode, user, password, db));
            }
        }
    }
    let mut wire = Vec::new();
    for (transport, tcp) in WIRE_TRANSPORTS {
        for (user, password) in CLIENTS {
            for db in DATABASES {
                wire.push((transport, tcp, user, password, db));
            }
        }
    }
    std::thread::scope(|s| {
        let wire_handles: Vec<_> = wire
            .into_iter()
            .map(|(transport, tcp, user, password, db)| {
                s.spawn(move || Row {
                    file,
                    transport,
                    user,
                    password,
                    db,
                    direct: direct.wire(tcp, user, password, db),
                    pooled: pooled.wire(tcp, user, password, db),
                })
            })
            .collect();
        let handles: Vec<_> = combos
            .into_iter()
            .map(|(transport, sslmode, user, password, db)| {
                s.spawn(move || Row {
                    file,
                    transport,
                    user,
                    password,
                    db,
                    direct: direct.outcome(sslmode, user, password, db),
                    pooled: pooled.outcome(sslmode, user, password, db),
                })
            })
            .collect();
        handles
            .into_iter()
            .chain(wire_handles)
            .map(|h| h.join().expect("client thread"))
            .collect()
    })
}

fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    for r in rows {
        let pw = match r.password {
            None => "no password",
            Some(p) if p == MD5_USER.1 || p == SCRAM_USER.1 => "right password",
            Some(_) => "wrong password",
        };
        let mark = if r.direct == r.pooled { "  " } else { "≠ " };
        t.push_str(&format!(
            "{mark}[{}] {} {} ({pw}) db={}\n    PostgreSQL: {}\n    pgharbor:   {}\n",
            r.file, r.transport, r.user, r.db, r.direct, r.pooled
        ));
    }
    t
}

/// A reference cluster whose pg_hba.conf is `hba`, with the database
/// named like a user.
fn reference_cluster(hba: String) -> PgCluster {
    let pki = common::pki::Pki::generate();
    let server_files = pki.dir.clone();
    let pg = PgCluster::start_custom(&Custom {
        certs: Box::new(move |dir| common::pki::install_server(&server_files, dir)),
        hba,
        conf: String::new(),
    });
    pg.psql_ok("postgres", &format!("CREATE DATABASE {SAMEUSER_DB}"));
    pg
}

/// pgharbor with `hba` as its rule file, TLS offered as PostgreSQL's
/// `ssl = on` offers it (sslmode prefer: the rules decide), the secrets of
/// `reference` in its userlist, and the shared cluster as its backend. The
/// rule file goes into `dir`, which must outlive the pooler.
///
/// The userlist mirrors `reference`'s pg_authid exactly: trust_user has
/// no password there, so it has no entry here. With a plaintext entry for
/// it, pgharbor answers `host ... md5` for trust_user with an MD5 request
/// (5) where PostgreSQL, having no secret, asks for SCRAM (10): a
/// different input, not a different answer.
fn pooler_for(reference: &PgCluster, hba: &str, certs: &Certs, dir: &Path) -> Pooler {
    let hba_path = dir.join("pg_hba.conf");
    std::fs::write(&hba_path, hba).expect("write pg_hba.conf");
    let scram = reference.scram_secret(SCRAM_USER.0);
    let md5 = reference.md5_secret(MD5_USER.0);
    let databases = DATABASES
        .iter()
        .map(|name| {
            let mut e = DbEntry::new(name, Backend::Unix);
            e.dbname = Some(name.to_string());
            e
        })
        .collect();
    let opts = PoolerOpts::default()
        .userlist(&[(SCRAM_USER.0, &scram), (MD5_USER.0, &md5)])
        .databases(databases)
        .tls(&tls_toml(Some(certs), &[("sslmode", "prefer")]))
        .auth_toml(&format!("hba_file = \"{}\"\n", hba_path.display()));
    Pooler::start(PgCluster::shared(), opts)
}

#[test]
fn hba_files_transports_and_sslmodes_answer_as_postgresql_does() {
    let started = Instant::now();
    let backend = PgCluster::shared();
    backend.psql_ok("postgres", &format!("CREATE DATABASE {SAMEUSER_DB}"));
    let (_users_dir, users) = users_file();
    let certs = Certs::generate("hba-matrix");
    let texts: Vec<(&'static str, String)> = RULE_FILES
        .iter()
        .map(|(name, body)| (*name, rule_text(body, &users)))
        .collect();

    // Clusters start in parallel: each initdb is most of the run time.
    let clusters: Vec<PgCluster> = std::thread::scope(|s| {
        let handles: Vec<_> = texts
            .iter()
            .map(|(_, text)| {
                let text = text.clone();
                s.spawn(move || reference_cluster(text))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("cluster thread"))
            .collect()
    });

    let mut rows = Vec::new();
    let mut texts_by_file = BTreeMap::new();
    for ((name, text), pg) in texts.iter().zip(&clusters) {
        let hba_dir = TempDir::new("hba-matrix");
        let p = pooler_for(pg, text, &certs, hba_dir.path());
        let direct = Side {
            socket_dir: pg.socket_dir(),
            port: pg.port(),
        };
        let pooled = Side {
            socket_dir: p.socket_dir(),
            port: p.port(),
        };
        rows.extend(run_file(name, &direct, &pooled));
        texts_by_file.insert(*name, text.clone());
    }

    // Equal answers prove little if the matrix never reached an outcome
    // (e.g. every login failed the same way): PostgreSQL must have given
    // each of these somewhere.
    for needle in [
        "served, TLS",
        "served, plain",
        "requests [0], logged in",
        "requests [3, 0], logged in",
        "requests [5, 0], logged in",
        "requests [10, 11, 12, 0], logged in",
        "28P01: password authentication failed",
        "no password supplied",
        "no pg_hba.conf entry",
        "rejects connection",
        "SSL encryption",
        "no encryption",
    ] {
        assert!(
            rows.iter().any(|r| r.direct.contains(needle)),
            "no combination gave {needle:?} directly:\n{}",
            table(&rows)
        );
    }
    let differ = rows.iter().filter(|r| r.direct != r.pooled).count();
    eprintln!(
        "hba matrix: {} combinations over {} rule files in {:?}",
        rows.len(),
        RULE_FILES.len(),
        started.elapsed()
    );
    // PGHARBOR_HBA_MATRIX_SHOW=1 prints the whole matrix on success too.
    if std::env::var_os("PGHARBOR_HBA_MATRIX_SHOW").is_some() {
        eprintln!("{}", table(&rows));
    }
    let files: String = texts_by_file
        .iter()
        .map(|(n, t)| format!("--- {n}\n{t}"))
        .collect();
    assert_eq!(
        differ,
        0,
        "{differ} of {} combinations differ (≠):\n{}\nrule files:\n{files}",
        rows.len(),
        table(&rows)
    );
}
