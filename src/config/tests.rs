use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use Tls13Suite::*;

const PATH: &str = "/etc/pgharbor/pgharbor.toml";
/// The least a config needs: an auth file for the default scram-sha-256.
const AUTH: &str = "[auth]\nauth_file = \"users.txt\"\n";

fn parse(text: &str) -> Config {
    Config::parse(text, Path::new(PATH)).unwrap_or_else(|e| panic!("{text}\n=> {e}"))
}

fn err(text: &str) -> String {
    match Config::parse(text, Path::new(PATH)) {
        Ok(c) => panic!("{text}\n=> parsed: {c:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `text` (plus the minimal auth section) fails with a message starting with `want`.
fn assert_err(text: &str, want: &str) {
    let got = err(&format!("{AUTH}{text}"));
    assert!(got.starts_with(want), "\n got: {got}\nwant: {want}…");
}

#[test]
fn minimal_config_gets_the_defaults() {
    let c = parse(AUTH);
    assert_eq!(c.path, PathBuf::from(PATH));
    assert_eq!(c.listen.addresses, vec![IpAddr::from(Ipv4Addr::LOCALHOST)]);
    assert_eq!(c.listen.port, 6432);
    assert_eq!(c.listen.unix_socket_dir, Some(PathBuf::from("/tmp")));
    assert_eq!(
        c.listen.unix_socket_path(),
        Some(PathBuf::from("/tmp/.s.PGSQL.6432"))
    );
    assert_eq!(c.listen.unix_socket_mode, 0o777);
    assert_eq!(c.listen.client_login_timeout, Duration::from_secs(15));
    assert_eq!(c.tls.cert_file, None);
    assert_eq!(c.tls.sslmode, SslMode::Disable);
    assert_eq!(c.tls.socketsslmode, SslMode::Disable);
    assert_eq!(c.tls.loopbacksslmode, None);
    assert_eq!(c.tls.min_protocol_version, TlsVersion::Tls12);
    assert_eq!(
        c.tls.tls13_ciphers,
        [Aes128GcmSha256, Aes256GcmSha384, Chacha20Poly1305Sha256]
    );
    assert_eq!(c.auth.method, AuthMethod::ScramSha256);
    assert_eq!(
        c.auth.auth_file,
        Some(PathBuf::from("/etc/pgharbor/users.txt"))
    );
    assert_eq!(c.pool.mode, PoolMode::Session);
    assert_eq!(c.pool.default_pool_size, 20);
    assert_eq!(c.pool.max_client_conn, 10_000);
    assert_eq!(c.pool.query_wait_timeout, Duration::from_secs(120));
    assert_eq!(c.pool.server_connect_timeout, Duration::from_secs(15));
    assert_eq!(c.pool.server_reset_query, "DISCARD ALL");
    assert_eq!(c.pool.shutdown_timeout, Duration::from_secs(30));
    assert!(c.admin.users.is_empty());
    assert!(c.databases.is_empty());
}

#[test]
fn trust_needs_no_auth_file() {
    let c = parse("[auth]\nmethod = \"trust\"\n");
    assert_eq!((c.auth.method, c.auth.auth_file), (AuthMethod::Trust, None));
}

#[test]
fn an_hba_file_needs_no_auth_file_and_resolves_beside_the_config() {
    let c = parse("[auth]\nhba_file = \"pg_hba.conf\"\nident_file = \"/x/ident\"\n");
    assert_eq!(c.auth.auth_file, None);
    let hba = Path::new("/etc/pgharbor/pg_hba.conf");
    assert_eq!(c.auth.hba_file.as_deref(), Some(hba));
    assert_eq!(c.auth.ident_file.as_deref(), Some(Path::new("/x/ident")));
}

#[test]
fn full_config() {
    let c = parse(
        r#"
        [listen]
        addresses = ["*", "127.0.0.1", "::1", "localhost"]
        port = 7000
        unix_socket_dir = "run"
        unix_socket_mode = "0700"
        client_login_timeout = "2m"
        [tls]
        cert_file = "/certs/server.crt"
        key_file = "server.key"
        sslmode = "require"
        socketsslmode = "allow"
        loopbacksslmode = "disable"
        min_protocol_version = "TLSv1.1"
        tls13_ciphers = "TLS_AES_256_GCM_SHA384 : TLS_CHACHA20_POLY1305_SHA256"
        [auth]
        method = "md5"
        auth_file = "../users.txt"
        [pool]
        mode = "session"
        default_pool_size = 5
        max_client_conn = 100
        query_wait_timeout = "500ms"
        server_connect_timeout = "1s 500ms"
        server_reset_query = ""
        shutdown_timeout = "0s"
        [admin]
        users = ["admin", "ops"]
        [databases.app]
        conninfo = "host=/run/pg password=hunter2"
        pool_size = 3
        pool_mode = "session"
        [databases."my.db"]
        conninfo = "postgresql://u@[::1]:5433/real?sslrootcert=ca.pem"
        "#,
    );
    let any4 = IpAddr::from(Ipv4Addr::UNSPECIFIED);
    let any6 = IpAddr::from(Ipv6Addr::UNSPECIFIED);
    let lo4 = IpAddr::from(Ipv4Addr::LOCALHOST);
    let lo6 = IpAddr::from(Ipv6Addr::LOCALHOST);
    assert_eq!(c.listen.addresses, vec![any4, any6, lo4, lo6]);
    assert_eq!(c.listen.port, 7000);
    assert_eq!(
        c.listen.unix_socket_dir,
        Some(PathBuf::from("/etc/pgharbor/run"))
    );
    assert_eq!(c.listen.unix_socket_mode, 0o700);
    assert_eq!(c.listen.client_login_timeout, Duration::from_secs(120));
    assert_eq!(c.tls.cert_file, Some(PathBuf::from("/certs/server.crt")));
    assert_eq!(
        c.tls.key_file,
        Some(PathBuf::from("/etc/pgharbor/server.key"))
    );
    assert_eq!(c.tls.sslmode, SslMode::Require);
    assert_eq!(c.tls.loopbacksslmode, Some(SslMode::Disable));
    assert_eq!(c.tls.socketsslmode, SslMode::Allow);
    assert_eq!(c.tls.min_protocol_version, TlsVersion::Tls11);
    assert_eq!(
        c.tls.tls13_ciphers,
        [Aes256GcmSha384, Chacha20Poly1305Sha256]
    );
    assert_eq!(c.auth.method, AuthMethod::Md5);
    assert_eq!(
        c.auth.auth_file,
        Some(PathBuf::from("/etc/pgharbor/../users.txt"))
    );
    assert_eq!(c.pool.default_pool_size, 5);
    assert_eq!(c.pool.max_client_conn, 100);
    assert_eq!(c.pool.query_wait_timeout, Duration::from_millis(500));
    assert_eq!(c.pool.server_connect_timeout, Duration::from_millis(1500));
    assert_eq!(c.pool.server_reset_query, "");
    assert_eq!(c.pool.shutdown_timeout, Duration::ZERO);
    assert_eq!(c.admin.users, ["admin", "ops"]);

    let app = &c.databases["app"];
    assert_eq!(
        app.conninfo.dbname.as_deref(),
        Some("app"),
        "dbname defaults to the entry name"
    );
    assert_eq!(
        app.conninfo.first_host().host,
        BackendHost::Unix("/run/pg".into())
    );
    assert_eq!(
        (app.pool_size, app.pool_mode),
        (Some(3), Some(PoolMode::Session))
    );
    assert_eq!(c.pool_size_for("app"), 3);
    let other = &c.databases["my.db"];
    assert_eq!(other.conninfo.dbname.as_deref(), Some("real"));
    assert_eq!(
        other.conninfo.first_host().host,
        BackendHost::Tcp("::1".into())
    );
    assert_eq!(
        other.conninfo.sslrootcert,
        Some(PathBuf::from("/etc/pgharbor/ca.pem"))
    );
    assert_eq!((other.pool_size, other.pool_mode), (None, None));
    assert_eq!(c.pool_size_for("my.db"), 5);
    assert_eq!(c.pool_mode_for("my.db", "anyone"), PoolMode::Session);

    let debug = format!("{c:?}");
    assert!(!debug.contains("hunter2"), "password leaked: {debug}");
}

#[test]
fn min_protocol_version_takes_every_openssl_version() {
    for (text, want) in [
        ("TLSv1", TlsVersion::Tls10),
        ("TLSv1.1", TlsVersion::Tls11),
        ("TLSv1.2", TlsVersion::Tls12),
        ("TLSv1.3", TlsVersion::Tls13),
    ] {
        let c = parse(&format!("{AUTH}[tls]\nmin_protocol_version = \"{text}\"\n"));
        assert_eq!(c.tls.min_protocol_version, want, "{text}");
    }
}

#[test]
fn tls_defaults_follow_the_certificate() {
    let c = parse(&format!(
        "{AUTH}[tls]\ncert_file = \"a.crt\"\nkey_file = \"a.key\"\n"
    ));
    assert!(c.tls.has_certificate());
    assert_eq!(c.tls.sslmode, SslMode::Prefer);
    assert_eq!(c.tls.socketsslmode, SslMode::Disable);
    assert_eq!(c.tls.loopbacksslmode, None, "loopback follows sslmode");
}

#[test]
fn unknown_keys_name_the_dotted_path() {
    assert_err(
        "[listen]\nbogus = 1\n",
        "listen.bogus: unknown key (expected one of `addresses`",
    );
    let got = err(&format!("colour = 1\n{AUTH}"));
    assert!(
        got.starts_with("colour: unknown key (expected one of `listen`"),
        "{got}"
    );
    assert_err(
        "[databases.app]\nconninfo = \"\"\nsize = 1\n",
        "databases.app.size: unknown key",
    );
    assert_err(
        "[pool]\nquery_wait_timeout_ms = 5\n",
        "pool.query_wait_timeout_ms: unknown key",
    );
}

#[test]
fn wrong_types_name_the_dotted_path() {
    assert_err(
        "[listen]\nport = \"6432\"\n",
        "listen.port: invalid type: string, expected an integer (line 4)",
    );
    assert_err(
        "[listen]\naddresses = \"127.0.0.1\"\n",
        "listen.addresses: invalid type: string",
    );
    assert_err(
        "[listen]\naddresses = [\"::1\", 5]\n",
        "listen.addresses[1]: invalid type: integer `5`",
    );
    assert_err(
        "[pool]\nquery_wait_timeout = 15\n",
        "pool.query_wait_timeout: a duration needs a unit: write \"15s\"",
    );
    let text = "[databases]\napp = \"host=/tmp password=hunter2\"\n";
    assert_err(
        text,
        "databases.app: invalid type: string, expected a table (line 4)",
    );
    assert_err(
        "[admin]\nusers = \"admin\"\n",
        "admin.users: invalid type: string",
    );
    let got = err(&format!("listen = 1\n{AUTH}"));
    assert!(
        got.starts_with("listen: invalid type: integer `1`, expected a table"),
        "{got}"
    );
}

#[test]
fn syntax_errors_give_line_and_column() {
    let got = err("[listen]\nport = \n");
    assert!(
        got.starts_with("TOML syntax error at line 2, column 8: "),
        "{got}"
    );
}

#[test]
fn impossible_values_name_their_key() {
    let cases = [
        ("[listen]\nport = 0", "listen.port: must be from 1 to 65535, not 0"),
        ("[listen]\nport = 65536", "listen.port: must be from 1 to 65535, not 65536"),
        ("[listen]\naddresses = [\"10.0.0.300\"]", "listen.addresses[0]: invalid address \"10.0.0.300\""),
        ("[listen]\naddresses = [\"[::1]\"]", "listen.addresses[0]: invalid address"),
        ("[listen]\naddresses = []\nunix_socket_dir = \"\"", "listen.addresses: no TCP addresses and no listen.unix_socket_dir"),
        ("[listen]\nunix_socket_mode = \"0778\"", "listen.unix_socket_mode: invalid mode \"0778\""),
        ("[listen]\nunix_socket_mode = \"1777\"", "listen.unix_socket_mode: invalid mode \"1777\""),
        ("[listen]\nunix_socket_mode = \"rwx\"", "listen.unix_socket_mode: invalid mode"),
        ("[listen]\nunix_socket_mode = \"\"", "listen.unix_socket_mode: invalid mode"),
        ("[listen]\nclient_login_timeout = \"0s\"", "listen.client_login_timeout: must be greater than zero"),
        ("[listen]\nproxy_protocol_from = [\"10.0.0.0/33\"]", "listen.proxy_protocol_from[0]: invalid CIDR \"10.0.0.0/33\""),
        ("[listen]\nproxy_protocol_from = [\"10.0.0.1\", \"lb.example\"]", "listen.proxy_protocol_from[1]: invalid CIDR \"lb.example\""),
        ("[tls]\nsslmode = \"on\"", "tls.sslmode: invalid sslmode \"on\""),
        ("[tls]\ncert_file = \"a.crt\"", "tls.key_file: required when tls.cert_file is set"),
        ("[tls]\nkey_file = \"a.key\"", "tls.cert_file: required when tls.key_file is set"),
        ("[tls]\nsslmode = \"require\"", "tls.sslmode: \"require\" needs tls.cert_file and tls.key_file"),
        ("[tls]\nsocketsslmode = \"prefer\"", "tls.socketsslmode: \"prefer\" needs tls.cert_file and tls.key_file"),
        ("[tls]\nloopbacksslmode = \"allow\"", "tls.loopbacksslmode: \"allow\" needs tls.cert_file"),
        ("[tls]\ntls13_ciphers = \"TLS_AES_128_CCM_SHA256\"", "tls.tls13_ciphers: invalid value \"TLS_AES_128_CCM_SHA256\" (expected one of \"TLS_AES_128_GCM_SHA256\", \"TLS_AES_256_GCM_SHA384\", \"TLS_CHACHA20_POLY1305_SHA256\")"),
        ("[tls]\ntls13_ciphers = \"\"", "tls.tls13_ciphers: \"\" has an empty entry"),
        ("[tls]\ntls13_ciphers = \"TLS_AES_128_GCM_SHA256::TLS_AES_256_GCM_SHA384\"", "tls.tls13_ciphers: \"TLS_AES_128_GCM_SHA256::TLS_AES_256_GCM_SHA384\" has an empty entry"),
        ("[tls]\ntls13_ciphers = \"TLS_AES_256_GCM_SHA384:TLS_AES_256_GCM_SHA384\"", "tls.tls13_ciphers: TLS_AES_256_GCM_SHA384 is listed twice"),
        ("[tls]\ntls13_ciphers = \"tls_aes_128_gcm_sha256\"", "tls.tls13_ciphers: invalid value \"tls_aes_128_gcm_sha256\""),
        ("[tls]\nmin_protocol_version = \"TLSv1.4\"", "tls.min_protocol_version: invalid value \"TLSv1.4\" (expected one of \"TLSv1\", \"TLSv1.1\", \"TLSv1.2\", \"TLSv1.3\")"),
        ("[pool]\nmode = \"Session\"", "pool.mode: invalid value \"Session\""),
        ("[pool]\ndefault_pool_size = 0", "pool.default_pool_size: must be at least 1, not 0"),
        ("[pool]\ndefault_pool_size = -5", "pool.default_pool_size: must be at least 1, not -5"),
        ("[pool]\nmax_client_conn = 0", "pool.max_client_conn: must be at least 1, not 0"),
        ("[pool]\nserver_connect_timeout = \"0ms\"", "pool.server_connect_timeout: must be greater than zero"),
        ("[admin]\nusers = [\"\"]", "admin.users[0]: must not be empty"),
        ("[databases.app]\npool_size = 1", "databases.app.conninfo: required"),
        ("[databases.app]\nconninfo = \"port=abc\"", "databases.app.conninfo: invalid port \"abc\""),
        ("[databases.app]\nconninfo = \"dbname='x\"", "databases.app.conninfo: unterminated quoted string"),
        ("[databases.app]\nconninfo = \"\"\npool_size = 0", "databases.app.pool_size: must be at least 1, not 0"),
        ("[databases.app]\nconninfo = \"\"\npool_mode = \"Transaction\"", "databases.app.pool_mode: invalid value \"Transaction\" (expected one of \"session\", \"transaction\", \"statement\")"),
        ("[databases.pgharbor]\nconninfo = \"\"", "databases.pgharbor: the name \"pgharbor\" is reserved for the admin console"),
        ("[databases.pgbouncer]\nconninfo = \"\"", "databases.pgbouncer: the name \"pgbouncer\" is reserved for the admin console"),
        ("[admin]\nstats_users = [\"\"]", "admin.stats_users[0]: must not be empty"),
        ("[databases.\"\"]\nconninfo = \"\"", "databases.\"\": database name must not be empty"),
        ("[databases.\"a b\"]\nconninfo = \"port=0\"", "databases.\"a b\".conninfo: invalid port \"0\""),
    ];
    for (text, want) in cases {
        assert_err(text, want);
    }
}

#[test]
fn auth_errors_name_their_key() {
    let got = err("[auth]\nmethod = \"password\"\nauth_file = \"u\"\n");
    assert!(
        got.starts_with("auth.method: invalid value \"password\""),
        "{got}"
    );
    let got = err("");
    assert_eq!(
        got,
        "auth.auth_file: required when auth.method is \"scram-sha-256\" (or set auth.user to look users up)"
    );
    let got = err("[auth]\nmethod = \"md5\"\nauth_file = \"\"\n");
    assert_eq!(
        got,
        "auth.auth_file: required when auth.method is \"md5\" (or set auth.user to look users up)"
    );
}

#[test]
fn client_certificate_modes_without_a_ca_file_are_refused_with_the_reason() {
    for key in ["sslmode", "socketsslmode", "loopbacksslmode"] {
        for mode in ["verify-ca", "verify-full"] {
            let text = format!("[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n{key} = \"{mode}\"\n");
            assert_err(
                &text,
                &format!("tls.{key}: \"{mode}\" needs tls.ca_file (the CA that signs client certificates)"),
            );
        }
    }
}

#[test]
fn durations_are_humantime_strings() {
    let with = |v: &str| {
        Config::parse(
            &format!("{AUTH}[pool]\nquery_wait_timeout = \"{v}\"\n"),
            Path::new(PATH),
        )
    };
    let ok = |v: &str| with(v).map(|c| c.pool.query_wait_timeout).unwrap();
    assert_eq!(ok("15s"), Duration::from_secs(15));
    assert_eq!(ok("500ms"), Duration::from_millis(500));
    assert_eq!(ok("2m"), Duration::from_secs(120));
    assert_eq!(ok("1h 30m"), Duration::from_secs(5400));
    for bad in ["15", "fifteen seconds", "", "-1s", "1.5.3s"] {
        let e = with(bad).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "pool.query_wait_timeout: invalid duration {bad:?}"
            )),
            "{e}"
        );
    }
}

#[test]
fn a_plain_number_for_a_duration_gets_a_hint_naming_the_unit() {
    // Written as PgBouncer writes it (seconds, no unit), quoted or not, in
    // any table that holds durations.
    for (table, line) in [
        ("[pool]", "server_idle_timeout = 600"),
        ("[pool]", "server_idle_timeout = \"600\""),
        ("[pool]", "server_idle_timeout = 0.5"),
        ("[listen]", "tcp_keepidle = 600"),
    ] {
        let text = format!("{AUTH}{table}\n{line}\n");
        let e = Config::parse(&text, Path::new(PATH))
            .unwrap_err()
            .to_string();
        let n = line.rsplit(' ').next().unwrap_or("").trim_matches('"');
        assert!(
            e.contains(&format!("write \"{n}s\" for {n} seconds"))
                && e.contains("ms\" for milliseconds"),
            "{line}: {e}"
        );
    }
    // A number where a number belongs, or text where text belongs, keeps
    // serde's own message.
    let e = Config::parse(
        &format!("{AUTH}[pool]\nserver_reset_query = 5\n"),
        Path::new(PATH),
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains("a duration needs a unit"), "{e}");
}

#[test]
fn socket_paths_longer_than_sockaddr_un_are_refused() {
    let dir = "/".to_string() + &"d".repeat(100);
    assert_err(
        &format!("[listen]\nunix_socket_dir = \"{dir}\"\n"),
        "listen.unix_socket_dir: socket path",
    );
}

#[test]
fn relative_paths_without_a_directory_stay_relative() {
    let c = Config::parse(AUTH, Path::new("pgharbor.toml")).unwrap();
    assert_eq!(c.auth.auth_file, Some(PathBuf::from("users.txt")));
}

#[test]
fn metrics_listen_is_an_address_or_unset() {
    let base = "[databases.app]\nconninfo = \"host=/tmp\"\n[auth]\nmethod = \"trust\"\n";
    let path = std::path::Path::new("/tmp/pgharbor.toml");
    let ok = Config::parse(
        &format!("[admin]\nmetrics_listen = \"127.0.0.1:9930\"\n{base}"),
        path,
    )
    .unwrap();
    assert_eq!(
        ok.admin.metrics_listen,
        Some("127.0.0.1:9930".parse().unwrap())
    );
    let off = Config::parse(base, path).unwrap();
    assert_eq!(off.admin.metrics_listen, None);
    let bad =
        Config::parse(&format!("[admin]\nmetrics_listen = \"9930\"\n{base}"), path).unwrap_err();
    assert!(bad.to_string().contains("admin.metrics_listen"), "{bad}");
}

#[test]
fn the_fallback_never_serves_the_console_names() {
    let text = "[auth]\nmethod = \"trust\"\n[databases.\"*\"]\nconninfo = \"host=/tmp\"\n\
                [admin]\nusers = [\"a\"]\nstats_users = [\"m\", \"n\"]\n";
    let c = Config::parse(text, std::path::Path::new("/tmp/pgharbor.toml")).unwrap();
    assert!(
        c.database("app").is_some(),
        "the fallback serves other names"
    );
    for name in ["pgharbor", "pgbouncer"] {
        assert!(c.database(name).is_none(), "{name}");
        assert!(crate::config::is_admin_database(name), "{name}");
    }
    assert!(!crate::config::is_admin_database("PgBouncer"));
    assert_eq!(c.admin.stats_users, ["m", "n"]);
}

#[test]
fn proxy_protocol_sources_are_cidrs_or_single_addresses() {
    let c = parse(&format!(
        "{AUTH}[listen]\nproxy_protocol_from = [\"10.9.8.7/8\", \"192.0.2.7\", \"fd00::/8\", \"::1\"]"
    ));
    let shown: Vec<String> = c
        .listen
        .proxy_protocol_from
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(shown, ["10.0.0.0/8", "192.0.2.7/32", "fd00::/8", "::1/128"]);
    assert!(
        parse(AUTH).listen.proxy_protocol_from.is_empty(),
        "off by default"
    );
}
