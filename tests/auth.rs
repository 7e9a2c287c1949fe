//! Client authentication (trust, md5, SCRAM-SHA-256) against every kind of
//! auth_file secret, and backend authentication (trust, md5, SCRAM,
//! SCRAM passthrough) over the Unix socket and TCP.

mod common;

use std::time::{Duration, Instant};

use common::clients::psql_cmd;
use common::{
    backend_pid, connect, connect_err, connect_ok, psql_ok, Backend, DbEntry, PgCluster, Pooler,
    PoolerOpts, RawConn, Transport, MD5_USER, SCRAM_USER, TEST_DB, TRUST_USER,
};

fn failed_for(user: &str) -> String {
    format!("password authentication failed for user \"{user}\"")
}

/// `SELECT current_user, inet_client_addr() IS NULL` through `conninfo`:
/// who the backend session runs as and whether the backend is on the socket.
async fn whoami(conninfo: &str) -> (String, bool) {
    let client = connect_ok(conninfo).await;
    let row = client
        .query_one("SELECT current_user::text, inet_client_addr() IS NULL", &[])
        .await
        .unwrap_or_else(|e| panic!("query through {conninfo}: {e:?}"));
    (row.get(0), row.get(1))
}

/// The authentication request codes a raw client sees for a login attempt,
/// and the error (if any).
fn raw_attempt(
    pooler: &Pooler,
    t: Transport,
    user: &str,
    password: &str,
    db: &str,
) -> (Vec<i32>, Option<common::ErrorFields>) {
    let mut raw = RawConn::connect(&pooler.endpoint(t));
    let res = raw.login(&[("user", user), ("database", db)], Some(password));
    let err = match res {
        Ok(_) => None,
        Err(common::wire::Failure::Error(e)) => Some(e),
        Err(other) => panic!("{user}@{db} over {t:?}: no ErrorResponse: {other:?}"),
    };
    (raw.auth_codes.clone(), err)
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_right_wrong_and_unknown_user() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());

    // What PostgreSQL itself says for a wrong SCRAM password.
    let direct =
        connect_err(&pg.conninfo(Transport::Tcp, SCRAM_USER.0, Some("nope"), TEST_DB)).await;

    for t in Transport::ALL {
        let ok = pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
        assert_eq!(whoami(&ok).await.0, SCRAM_USER.0);

        let wrong = connect_err(&pooler.conninfo(t, SCRAM_USER.0, Some("nope"), TEST_DB)).await;
        assert_eq!(wrong, direct, "wrong password over {t:?}");
        assert_eq!(wrong.severity, "FATAL");
        assert_eq!(wrong.code, "28P01");
        assert_eq!(wrong.message, failed_for(SCRAM_USER.0));

        let unknown = connect_err(&pooler.conninfo(t, "nosuch_user", Some("nope"), TEST_DB)).await;
        assert_eq!(
            (
                unknown.severity.as_str(),
                unknown.code.as_str(),
                unknown.message.clone()
            ),
            ("FATAL", "28P01", failed_for("nosuch_user")),
            "unknown user over {t:?}"
        );

        // The exchange itself must not tell the two apart: an unknown user
        // gets the same SASL / SASLContinue sequence as a known one.
        let (known_codes, known_err) = raw_attempt(&pooler, t, SCRAM_USER.0, "nope", TEST_DB);
        let (unknown_codes, unknown_err) = raw_attempt(&pooler, t, "nosuch_user", "nope", TEST_DB);
        assert_eq!(known_codes, vec![10, 11]);
        assert_eq!(
            unknown_codes, known_codes,
            "mock SCRAM exchange for an unknown user"
        );
        assert_eq!(known_err.unwrap().code, "28P01");
        assert_eq!(unknown_err.unwrap().code, "28P01");

        // psql (libpq) too.
        let out = psql_ok(
            &pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB),
            Some(SCRAM_USER.1),
            "SELECT current_user",
        );
        assert_eq!(out, SCRAM_USER.0);
        let out = psql_cmd(
            &pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB),
            Some("nope"),
        )
        .args(["-c", "SELECT 1"])
        .output()
        .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&failed_for(SCRAM_USER.0)),
            "psql stderr: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn md5_method_with_md5_hash_and_plain_password_secrets() {
    let pg = PgCluster::shared();
    let md5_secret = pg.md5_secret(MD5_USER.0);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("md5")
            .userlist(&[(MD5_USER.0, &md5_secret), (SCRAM_USER.0, SCRAM_USER.1)]),
    );
    for t in Transport::ALL {
        for (user, password) in [MD5_USER, SCRAM_USER] {
            let (codes, err) = raw_attempt(&pooler, t, user, password, TEST_DB);
            assert_eq!(
                codes,
                vec![5, 0],
                "{user} over {t:?}: md5 challenge expected"
            );
            assert!(err.is_none(), "{user} over {t:?}: {err:?}");
            let ok = pooler.conninfo(t, user, Some(password), TEST_DB);
            assert_eq!(whoami(&ok).await.0, user);

            let wrong = connect_err(&pooler.conninfo(t, user, Some("nope"), TEST_DB)).await;
            assert_eq!(
                (
                    wrong.severity.as_str(),
                    wrong.code.as_str(),
                    wrong.message.clone()
                ),
                ("FATAL", "28P01", failed_for(user)),
                "{user} wrong password over {t:?}"
            );
        }
        // An unknown user gets PostgreSQL's mock for an unknown role in md5
        // mode: a SCRAM exchange (password_encryption's method), see
        // `md5_method_mocks_unknown_users_like_scram_secrets`.
        let (codes, err) = raw_attempt(&pooler, t, "nosuch_user", "nope", TEST_DB);
        assert_eq!(codes, vec![10, 11], "unknown user: mock SCRAM exchange");
        let err = err.unwrap();
        assert_eq!(
            (err.code.as_str(), err.message.clone()),
            ("28P01", failed_for("nosuch_user"))
        );

        let out = psql_ok(
            &pooler.conninfo(t, MD5_USER.0, None, TEST_DB),
            Some(MD5_USER.1),
            "SELECT current_user",
        );
        assert_eq!(out, MD5_USER.0);
    }
}

/// What the first two server messages of a login show a prober: the
/// authentication request code, the SASL mechanisms offered and, for SCRAM,
/// the salt and iteration count of server-first-message. The client sends a
/// fixed client-first-message and stops there.
#[derive(Debug, PartialEq, Eq)]
struct FirstChallenge {
    code: i32,
    mechanisms: Vec<String>,
    salt_and_iterations: Option<(String, String)>,
}

fn first_challenge(pooler: &Pooler, t: Transport, user: &str) -> FirstChallenge {
    use common::wire::{cstrings, message, Reply};
    let mut raw = RawConn::connect(&pooler.endpoint(t));
    raw.send_startup(&[("user", user), ("database", TEST_DB)])
        .expect("send startup");
    let timeout = Duration::from_secs(10);
    let Reply::Msg(b'R', body) = raw.read_msg(timeout) else {
        panic!("{user}: no authentication request");
    };
    let code = i32::from_be_bytes(body[..4].try_into().unwrap());
    let mut challenge = FirstChallenge {
        code,
        mechanisms: Vec::new(),
        salt_and_iterations: None,
    };
    if code != 10 {
        return challenge;
    }
    challenge.mechanisms = cstrings(&body[4..])
        .into_iter()
        .filter(|m| !m.is_empty())
        .collect();
    let client_first = b"n,,n=,r=fixedclientnonce";
    let mut sasl = b"SCRAM-SHA-256\0".to_vec();
    sasl.extend((client_first.len() as i32).to_be_bytes());
    sasl.extend(client_first);
    raw.send(&message(b'p', &sasl))
        .expect("send SASLInitialResponse");
    let Reply::Msg(b'R', body) = raw.read_msg(timeout) else {
        panic!("{user}: no SASLContinue");
    };
    assert_eq!(&body[..4], &11i32.to_be_bytes(), "{user}: not SASLContinue");
    let text = String::from_utf8_lossy(&body[4..]).into_owned();
    let attr = |name: &str| {
        text.split(',')
            .find_map(|a| a.strip_prefix(name))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{user}: no {name} in {text:?}"))
    };
    challenge.salt_and_iterations = Some((attr("s="), attr("i=")));
    challenge
}

/// With `[auth] method = "md5"`, an unknown user must look like a user
/// whose secret is SCRAM: PostgreSQL (auth.c, CheckPWChallengeAuth) mocks an
/// unknown role with password_encryption's method, scram-sha-256 by
/// default, and its mock salt is a function of the user name
/// (auth-scram.c, scram_mock_salt), so asking twice gives the same salt.
#[tokio::test(flavor = "multi_thread")]
async fn md5_method_mocks_unknown_users_like_scram_secrets() {
    let pg = PgCluster::shared();
    let scram_secret = pg.scram_secret(SCRAM_USER.0);
    let md5_secret = pg.md5_secret(MD5_USER.0);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("md5")
            .userlist(&[(MD5_USER.0, &md5_secret), (SCRAM_USER.0, &scram_secret)]),
    );
    for t in Transport::ALL {
        let known = first_challenge(&pooler, t, SCRAM_USER.0);
        let unknown = first_challenge(&pooler, t, "nosuch_user");
        let again = first_challenge(&pooler, t, "nosuch_user");
        let other = first_challenge(&pooler, t, "nosuch_other");
        assert_eq!(known.code, 10, "{t:?}: SCRAM secret under md5: {known:?}");
        assert_eq!(
            (unknown.code, &unknown.mechanisms),
            (known.code, &known.mechanisms),
            "{t:?}: the first message tells an unknown user from a known one"
        );
        let (known_salt, known_iter) = known.salt_and_iterations.unwrap();
        let (salt, iter) = unknown.salt_and_iterations.clone().unwrap();
        assert_eq!(iter, known_iter, "{t:?}: iteration count differs");
        assert_eq!(salt.len(), known_salt.len(), "{t:?}: salt length differs");
        assert_eq!(unknown, again, "{t:?}: the mock salt changes between tries");
        assert_ne!(
            unknown.salt_and_iterations, other.salt_and_iterations,
            "{t:?}: two unknown users share a mock salt"
        );
        // A known md5 secret still gets the md5 challenge, as in PostgreSQL.
        assert_eq!(first_challenge(&pooler, t, MD5_USER.0).code, 5);
        // And the mock ends as a wrong password does.
        let (codes, err) = raw_attempt(&pooler, t, "nosuch_user", "nope", TEST_DB);
        assert_eq!(codes, vec![10, 11]);
        assert_eq!(err.map(|e| e.message), Some(failed_for("nosuch_user")));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn trust_method_needs_no_password() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default().auth("trust"));
    for t in Transport::ALL {
        let mut raw = RawConn::connect(&pooler.endpoint(t));
        let session = raw
            .login(&[("user", TRUST_USER), ("database", TEST_DB)], None)
            .unwrap_or_else(|e| panic!("trust login over {t:?}: {e:?}"));
        assert_eq!(session.auth_codes, vec![0]);
        assert_eq!(
            raw.query("SELECT current_user").scalar().as_deref(),
            Some(TRUST_USER)
        );

        let (user, on_socket) = whoami(&pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB)).await;
        assert_eq!(user, SCRAM_USER.0);
        assert!(on_socket);
        assert_eq!(
            psql_ok(
                &pooler.conninfo(t, TRUST_USER, None, TEST_DB),
                None,
                "SELECT 42"
            ),
            "42"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_secret_from_pg_authid_passes_through_to_a_scram_backend() {
    let pg = PgCluster::shared();
    let secret = pg.scram_secret(SCRAM_USER.0);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .userlist(&[(SCRAM_USER.0, &secret)])
            .databases(vec![DbEntry::new(TEST_DB, Backend::Tcp)]),
    );
    // No plaintext anywhere in what the pooler was given.
    for entry in std::fs::read_dir(pooler.dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.extension().is_some_and(|e| e == "toml" || e == "txt") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains(SCRAM_USER.1),
                "{} holds the password",
                path.display()
            );
        }
    }
    for t in Transport::ALL {
        let ok = pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB);
        let (user, on_socket) = whoami(&ok).await;
        assert_eq!(user, SCRAM_USER.0);
        assert!(
            !on_socket,
            "backend should be TCP, where pg_hba demands SCRAM"
        );
        // A second login: the pooler may reuse the backend or log in again;
        // either way it must work.
        assert_eq!(whoami(&ok).await.0, SCRAM_USER.0);
        assert_eq!(
            psql_ok(
                &pooler.conninfo(t, SCRAM_USER.0, None, TEST_DB),
                Some(SCRAM_USER.1),
                "SELECT current_user"
            ),
            SCRAM_USER.0
        );
        let wrong = connect_err(&pooler.conninfo(t, SCRAM_USER.0, Some("nope"), TEST_DB)).await;
        assert_eq!(wrong.code, "28P01");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_passthrough_opens_a_fresh_backend_per_client() {
    // pool_size 2 and two clients at once: the second backend login happens
    // while the first is busy, with only the second client's proof to go on.
    let pg = PgCluster::shared();
    let secret = pg.scram_secret(SCRAM_USER.0);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .userlist(&[(SCRAM_USER.0, &secret)])
            .databases(vec![DbEntry::new(TEST_DB, Backend::Tcp).pool_size(2)]),
    );
    let a =
        connect_ok(&pooler.conninfo(Transport::Unix, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB))
            .await;
    let b = connect_ok(&pooler.conninfo(Transport::Tcp, SCRAM_USER.0, Some(SCRAM_USER.1), TEST_DB))
        .await;
    let pa: i32 = backend_pid(&a).await;
    let pb: i32 = backend_pid(&b).await;
    assert_ne!(
        pa, pb,
        "two concurrent session clients must have two backends"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn md5_secret_from_pg_authid_logs_in_to_an_md5_backend() {
    let pg = PgCluster::shared();
    let secret = pg.md5_secret(MD5_USER.0);
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .auth("md5")
            .userlist(&[(MD5_USER.0, &secret)])
            .databases(vec![DbEntry::new(TEST_DB, Backend::Tcp)]),
    );
    for t in Transport::ALL {
        let (user, on_socket) =
            whoami(&pooler.conninfo(t, MD5_USER.0, Some(MD5_USER.1), TEST_DB)).await;
        assert_eq!(user, MD5_USER.0);
        assert!(!on_socket);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_backend_auth_method_over_tcp_and_trust_over_the_socket() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().databases(vec![
            DbEntry::new("over_tcp", Backend::Tcp),
            DbEntry::new("over_socket", Backend::Unix),
        ]),
    );
    // pg_hba over TCP: trust_user trust, md5_user md5, scram_user SCRAM.
    for (user, password) in [(TRUST_USER, "trust_pass"), MD5_USER, SCRAM_USER] {
        for t in Transport::ALL {
            let (who, on_socket) =
                whoami(&pooler.conninfo(t, user, Some(password), "over_tcp")).await;
            assert_eq!(who, user, "{user} via over_tcp, client over {t:?}");
            assert!(!on_socket, "over_tcp must reach PostgreSQL over TCP");

            let (who, on_socket) =
                whoami(&pooler.conninfo(t, user, Some(password), "over_socket")).await;
            assert_eq!(who, user);
            assert!(
                on_socket,
                "over_socket must reach PostgreSQL over its socket"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn conninfo_user_is_shared_by_all_clients_of_the_entry() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default().databases(vec![
            DbEntry::new("shared", Backend::Tcp).user(SCRAM_USER.0, Some(SCRAM_USER.1)),
            DbEntry::new("shared_md5", Backend::Tcp).user(MD5_USER.0, Some(MD5_USER.1)),
        ]),
    );
    for t in Transport::ALL {
        for (user, password) in [MD5_USER, (TRUST_USER, "trust_pass")] {
            let (who, _) = whoami(&pooler.conninfo(t, user, Some(password), "shared")).await;
            assert_eq!(who, SCRAM_USER.0, "client {user} on `shared` over {t:?}");
        }
        let (who, _) =
            whoami(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), "shared_md5")).await;
        assert_eq!(who, MD5_USER.0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_database_is_reported_after_authentication() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(pg, PoolerOpts::default());
    let direct = connect_err(&pg.conninfo(Transport::Unix, SCRAM_USER.0, None, "no_such_db")).await;
    assert_eq!(direct.code, "3D000");
    for t in Transport::ALL {
        let err =
            connect_err(&pooler.conninfo(t, SCRAM_USER.0, Some(SCRAM_USER.1), "no_such_db")).await;
        assert_eq!(err.severity, "FATAL");
        assert_eq!(err.code, "3D000", "{err:?}");
        assert!(err.message.contains("no_such_db"), "{err:?}");

        // Authentication comes first: the raw client is challenged, and a
        // wrong password is reported as such, not as a missing database.
        let (codes, err) = raw_attempt(&pooler, t, SCRAM_USER.0, SCRAM_USER.1, "no_such_db");
        assert_eq!(codes[..3], [10, 11, 12], "SCRAM must complete before 3D000");
        assert_eq!(err.unwrap().code, "3D000");
        let wrong =
            connect_err(&pooler.conninfo(t, SCRAM_USER.0, Some("nope"), "no_such_db")).await;
        assert_eq!(wrong.code, "28P01");
        let unknown =
            connect_err(&pooler.conninfo(t, "nosuch_user", Some("nope"), "no_such_db")).await;
        assert_eq!(unknown.code, "28P01");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backend_login_failure_reaches_the_client_as_an_error() {
    let pg = PgCluster::shared();
    let pooler = Pooler::start(
        pg,
        PoolerOpts::default()
            .databases(vec![DbEntry::new("bad_backend", Backend::Tcp)
                .user(SCRAM_USER.0, Some("not_the_password"))]),
    );
    for t in Transport::ALL {
        let started = Instant::now();
        let res = tokio::time::timeout(
            Duration::from_secs(10),
            connect(&pooler.conninfo(t, MD5_USER.0, Some(MD5_USER.1), "bad_backend")),
        )
        .await
        .expect("client left hanging when the backend refused the login");
        let err = match res {
            Ok(client) => client
                .simple_query("SELECT 1")
                .await
                .expect_err("query worked although the backend refused the login"),
            Err(e) => e,
        };
        assert!(
            err.as_db_error().is_some(),
            "expected an ErrorResponse, got {err:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
