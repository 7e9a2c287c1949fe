//! Transaction pooling on PostgreSQL 18, where search_path is reported:
//! since 18 the server sends a ParameterStatus for search_path at login and
//! whenever it changes (GUC_REPORT), so every time pgharbor moves the one
//! backend between two clients with different search_paths the server
//! announces the switch. Each client must still see only its own
//! search_path, and receive exactly the ParameterStatus messages a direct
//! connection gets for the same statements: the same script runs on two
//! direct connections first, then through pgharbor with one backend, and
//! the two transcripts must match.
//!
//! Needs PostgreSQL 18 binaries (`PgCluster::shared18`, installed by
//! scripts/test.sh); without them each test fails, or with
//! `PGHARBOR_ALLOW_SKIP=1` says so and passes.

mod common;

use common::wire::{QueryResult, Session};
use common::{Endpoint, PgCluster, Pooler, PoolerOpts, RawConn, Transport, SCRAM_USER, TEST_DB};

/// search_path's default as PostgreSQL shows it.
const DEFAULT: &str = "\"$user\", public";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    A,
    B,
}
use Who::{A, B};

/// One statement of a script: who sends it, the SQL, and the value its
/// first row must hold (None: not checked, e.g. a SET).
type Step = (Who, &'static str, Option<&'static str>);

/// A sets search_path and keeps it; B, never setting it, takes the one
/// backend between A's transactions and must see the default.
const ALTERNATING: &[Step] = &[
    (A, "SET search_path = tenant_a, public", None),
    (A, "SHOW search_path", Some("tenant_a, public")),
    (B, "SHOW search_path", Some(DEFAULT)),
    (
        A,
        "SELECT current_setting('search_path')",
        Some("tenant_a, public"),
    ),
    (B, "SELECT current_setting('search_path')", Some(DEFAULT)),
    (B, "SHOW search_path", Some(DEFAULT)),
    (A, "SHOW search_path", Some("tenant_a, public")),
    (A, "SHOW search_path", Some("tenant_a, public")),
    (B, "SHOW search_path", Some(DEFAULT)),
    // SET LOCAL: reported at the SET and again at COMMIT.
    (A, "BEGIN", None),
    (A, "SET LOCAL search_path = tenant_local", None),
    (A, "SHOW search_path", Some("tenant_local")),
    (A, "COMMIT", None),
    (B, "SELECT current_setting('search_path')", Some(DEFAULT)),
    (A, "SHOW search_path", Some("tenant_a, public")),
    // A SET in a rolled back transaction: reported, then undone.
    (A, "BEGIN", None),
    (A, "SET search_path = tenant_rolled_back", None),
    (A, "ROLLBACK", None),
    (B, "SHOW search_path", Some(DEFAULT)),
    (
        A,
        "SELECT current_setting('search_path')",
        Some("tenant_a, public"),
    ),
    // A failed Query undoes its SET before anything was reported.
    (A, "SET search_path = tenant_failed; SELECT 1/0", None),
    (B, "SHOW search_path", Some(DEFAULT)),
    (A, "SHOW search_path", Some("tenant_a, public")),
    // Setting it again to the value it has: nothing to report.
    (A, "SET search_path = tenant_a, public", None),
    (B, "SELECT current_setting('search_path')", Some(DEFAULT)),
    (A, "SHOW search_path", Some("tenant_a, public")),
    (
        A,
        "SELECT current_setting('search_path')",
        Some("tenant_a, public"),
    ),
    (B, "SHOW search_path", Some(DEFAULT)),
];

/// A's search_path comes from its startup packet (`options=-c ...`): B,
/// taking the one backend between A's transactions, must never see it, and
/// B's `RESET ALL` there must not take it away from A.
const STARTUP_OPTIONS: &[Step] = &[
    (A, "SHOW search_path", Some("acc18,public")),
    (B, "SHOW search_path", Some(DEFAULT)),
    (A, "SHOW search_path", Some("acc18,public")),
    (B, "SELECT current_setting('search_path')", Some(DEFAULT)),
    (B, "RESET ALL", None),
    (A, "SHOW search_path", Some("acc18,public")),
    (B, "SHOW search_path", Some(DEFAULT)),
    (B, "RESET ALL", None),
    (
        A,
        "SELECT current_setting('search_path')",
        Some("acc18,public"),
    ),
    (B, "RESET ALL", None),
    (B, "SELECT current_setting('search_path')", Some(DEFAULT)),
    (A, "SET search_path = acc_other", None),
    (B, "RESET ALL", None),
    (A, "SHOW search_path", Some("acc_other")),
    (B, "SHOW search_path", Some(DEFAULT)),
    (
        A,
        "SELECT current_setting('search_path')",
        Some("acc_other"),
    ),
];

fn login(ep: &Endpoint, options: Option<&str>) -> (RawConn, Session) {
    let mut params = vec![("user", SCRAM_USER.0), ("database", TEST_DB)];
    if let Some(o) = options {
        params.push(("options", o));
    }
    let mut c = RawConn::connect(ep);
    let session = c
        .login(&params, Some(SCRAM_USER.1))
        .unwrap_or_else(|e| panic!("login to {ep:?} with {params:?}: {e:?}"));
    (c, session)
}

/// What a client can see of one Query: its rows or error, and the
/// ParameterStatus messages that came with it, search_path apart.
fn seen(r: &QueryResult) -> String {
    let result = match &r.error {
        Some(e) => format!("ERROR {}", e.code),
        None => format!("{:?} {:?}", r.rows, r.tags),
    };
    let search_path: Vec<&str> = r
        .params
        .iter()
        .filter(|(k, _)| k == "search_path")
        .map(|(_, v)| v.as_str())
        .collect();
    let other: Vec<&(String, String)> = r
        .params
        .iter()
        .filter(|(k, _)| k != "search_path")
        .collect();
    format!("{result}; ParameterStatus search_path {search_path:?}, other {other:?}")
}

/// Runs `steps` with A (logged in with `a_options`) and B on `ep`, checks
/// every expected value, and returns the transcript: each client's login
/// search_path, then one line per statement.
struct Transcript {
    /// Each client's login search_path, then one line per statement.
    lines: Vec<String>,
    /// The steps whose value was not the one expected.
    wrong: Vec<String>,
}

/// Runs `steps` with A (logged in with `a_options`) and B on `ep`.
fn run(ep: &Endpoint, a_options: Option<&str>, steps: &[Step]) -> Transcript {
    let (mut a, a_login) = login(ep, a_options);
    let (mut b, b_login) = login(ep, None);
    let mut t = Transcript {
        lines: vec![
            format!(
                "A login search_path {:?}",
                a_login.params.get("search_path")
            ),
            format!(
                "B login search_path {:?}",
                b_login.params.get("search_path")
            ),
        ],
        wrong: Vec::new(),
    };
    for (i, (who, sql, want)) in steps.iter().enumerate() {
        let conn = if *who == A { &mut a } else { &mut b };
        let r = conn.query(sql);
        let got = r.scalar();
        if want.is_some() && got.as_deref() != *want {
            t.wrong.push(format!(
                "step {i}: {who:?}'s {sql:?} gave {got:?} (error {:?}), not {want:?}",
                r.error.as_ref().map(|e| &e.message)
            ));
        }
        t.lines.push(format!("{i} {who:?} {sql} => {}", seen(&r)));
    }
    a.terminate();
    b.terminate();
    t
}

/// The differences between the direct and the pooled transcript.
fn diff(direct: &[String], pooled: &[String]) -> Vec<String> {
    assert_eq!(direct.len(), pooled.len());
    direct
        .iter()
        .zip(pooled)
        .filter(|(d, p)| d != p)
        .map(|(d, p)| format!("direct:   {d}\npgharbor: {p}"))
        .collect()
}

/// Runs `steps` direct and through pgharbor (transaction pooling, one
/// backend): each client must see the values `steps` expect, and the two
/// transcripts (rows, errors, ParameterStatus) must match.
fn same_as_direct(pg: &PgCluster, a_options: Option<&str>, steps: &[Step]) {
    let direct = run(&pg.endpoint(Transport::Unix), a_options, steps);
    assert!(
        direct.wrong.is_empty(),
        "the script expects what PostgreSQL does not do:\n{}",
        direct.wrong.join("\n")
    );
    // Had PostgreSQL reported no search_path the comparison would prove little.
    assert!(
        direct.lines[0].contains("Some(")
            && direct.lines[2..]
                .iter()
                .any(|l| !l.contains("search_path []")),
        "PostgreSQL reported no search_path:\n{}",
        direct.lines.join("\n")
    );
    let p = Pooler::start(pg, PoolerOpts::transaction(1));
    let pooled = run(&p.endpoint(Transport::Unix), a_options, steps);
    let diff = diff(&direct.lines, &pooled.lines);
    assert!(
        pooled.wrong.is_empty() && diff.is_empty(),
        "through pgharbor:\n{}\n\ndiffers from a direct connection:\n{}\n\n\
         the direct transcript:\n{}",
        pooled.wrong.join("\n"),
        diff.join("\n"),
        direct.lines.join("\n")
    );
}

#[test]
fn each_client_keeps_its_search_path_and_its_parameter_status_as_direct() {
    let Some(pg) = PgCluster::shared18() else {
        return;
    };
    same_as_direct(pg, None, ALTERNATING);
}

// On 18 the server reports search_path, yet pgharbor does not track it by
// its reports: a startup search_path is the client's own setting, set on
// whichever backend it gets (this leaked to the next client of the backend
// before the fix, and was lost after another client's RESET ALL).
#[test]
fn a_startup_search_path_stays_with_its_client_across_another_clients_reset_all() {
    let Some(pg) = PgCluster::shared18() else {
        return;
    };
    same_as_direct(pg, Some("-c search_path=acc18,public"), STARTUP_OPTIONS);
}

// Not tested here, a documented difference (README, state table): after a
// client's own RESET of a startup option, PostgreSQL returns it to the
// startup value at once (and reports it); pgharbor does from the client's
// next transaction on (tests/txn_startup.rs checks that).

#[test]
fn the_server_is_postgresql_18_direct_and_through_pgharbor() {
    let Some(pg) = PgCluster::shared18() else {
        return;
    };
    assert_eq!(pg.major_version(), 18);
    assert!(!pg.has_tls());
    let p = Pooler::start(pg, PoolerOpts::transaction(1));
    for ep in [pg.endpoint(Transport::Unix), p.endpoint(Transport::Unix)] {
        let (mut c, session) = login(&ep, None);
        let version = c.query("SHOW server_version").scalar().unwrap_or_default();
        assert!(
            version.starts_with("18"),
            "{ep:?}: server_version {version:?}"
        );
        let reported = session.params.get("server_version").cloned();
        assert!(
            reported.as_deref().is_some_and(|v| v.starts_with("18")),
            "{ep:?}: ParameterStatus server_version {reported:?}"
        );
        c.terminate();
    }
}
