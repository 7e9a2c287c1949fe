//! The importer end to end: PgBouncer text in, a pgharbor config that loads out.

use std::path::{Path, PathBuf};

use super::settings::{Rule, SETTINGS};
use super::*;
use crate::config::{Config, PoolMode};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("pgharbor-import-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Imports `ini` and loads the result as pgharbor would.
fn import_text(tag: &str, ini: &str) -> (Imported, Config) {
    let dir = Scratch::new(tag);
    let path = dir.write("pgbouncer.ini", ini);
    let imported = import(&path, None).expect("import");
    let config = Config::parse(&imported.toml, &dir.0.join("pgharbor.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", imported.toml));
    (imported, config)
}

fn differs(imported: &Imported) -> Vec<&str> {
    imported
        .notes
        .iter()
        .filter(|n| n.impact == Impact::Differs)
        .map(|n| n.key.as_str())
        .collect()
}

/// Every `[pgbouncer]` key of PgBouncer's reference file (etc/pgbouncer.ini)
/// at the default value that file documents for it.
const REFERENCE_DEFAULTS: &str = "\
[databases]
app = host=127.0.0.1 port=5432 dbname=app
[users]
[pgbouncer]
logfile =
pidfile =
listen_addr = localhost
listen_port = 6432
unix_socket_dir = /tmp
unix_socket_mode = 0777
unix_socket_group =
peer_id = 0
query_wait_notify = 0
login_notify_message =
client_tls_sslmode = disable
client_tls_ca_file =
client_tls_key_file =
client_tls_cert_file =
client_tls_ciphers = default
client_tls13_ciphers =
client_tls_protocols = secure
client_tls_dheparams = auto
client_tls_ecdhcurve = auto
server_tls_sslmode = prefer
server_tls_ca_file =
server_tls_key_file =
server_tls_cert_file =
server_tls_protocols = secure
server_tls_ciphers = default
server_tls13_ciphers =
auth_type = trust
auth_file =
auth_hba_file =
auth_ident_file =
auth_ldap_options =
auth_query = SELECT usename, passwd FROM pg_shadow WHERE usename=$1
auth_dbname =
auth_pam_confdir =
admin_users = admin, ops
stats_users =
pool_mode = session
max_prepared_statements = 0
scram_iterations = 4096
server_reset_query = DISCARD ALL
server_reset_query_always = 0
track_extra_parameters = IntervalStyle
ignore_startup_parameters =
server_check_query = select 1
server_check_delay = 30
server_fast_close = 0
application_name_add_host = 0
stats_period = 60
max_client_conn = 100
default_pool_size = 20
min_pool_size = 0
reserve_pool_size = 0
reserve_pool_timeout = 5
max_db_connections = 0
max_user_connections = 0
server_round_robin = 0
syslog = 0
syslog_facility = daemon
syslog_ident = pgbouncer
log_connections = 1
log_disconnections = 1
log_pooler_errors = 1
log_stats = 1
verbose = 0
server_lifetime = 3600
server_idle_timeout = 600
server_connect_timeout = 15
server_login_retry = 15
query_timeout = 0
query_wait_timeout = 120
cancel_wait_timeout = 10
client_idle_timeout = 0
client_login_timeout = 60
pool_idle_timeout = 0
autodb_idle_timeout = 3600
idle_transaction_timeout = 0
pkt_buf = 4096
listen_backlog = 128
sbuf_loopcnt = 5
max_packet_size = 2147483647
so_reuseport = 0
tcp_defer_accept = 0
tcp_socket_buffer = 0
tcp_keepalive = 1
tcp_keepcnt = 0
tcp_keepidle = 0
tcp_keepintvl = 0
tcp_user_timeout = 0
dns_max_ttl = 15
dns_zone_check_period = 0
dns_nxdomain_ttl = 15
resolv_conf =
disable_pqexec = 0
service_name = pgbouncer
job_name = pgbouncer
";

#[test]
fn the_reference_file_at_its_defaults_imports_without_a_difference() {
    let (imported, config) = import_text("reference", REFERENCE_DEFAULTS);
    assert_eq!(differs(&imported), Vec::<&str>::new(), "{}", imported.toml);
    assert_eq!(config.pool.max_client_conn, 100);
    assert_eq!(config.pool.mode, PoolMode::Session);
    assert_eq!(config.pool.default_pool_size, 20);
    assert_eq!(config.pool.max_prepared_statements, 0);
    assert_eq!(config.admin.users, ["admin", "ops"]);
    assert_eq!(config.listen.port, 6432);
    assert_eq!(config.listen.client_login_timeout.as_secs(), 60);
    assert_eq!(config.pool.reserve_pool_timeout.as_secs(), 5);
    assert_eq!(config.pool.server_lifetime.as_secs(), 3600);
    let app = config.databases.get("app").expect("app");
    let conninfo = app.conninfo.redacted();
    assert!(conninfo.contains("sslmode=prefer"), "{conninfo}");
    assert!(conninfo.contains("host=127.0.0.1"), "{conninfo}");
}

#[test]
fn every_reference_key_has_a_rule() {
    for line in REFERENCE_DEFAULTS
        .lines()
        .skip_while(|l| *l != "[pgbouncer]")
        .skip(1)
    {
        let key = line.split('=').next().unwrap_or("").trim();
        assert!(settings::rule(key).is_some(), "{key} has no rule");
    }
    // And the table has no rule the reference file lacks.
    for (key, _) in SETTINGS {
        let line = format!("\n{key} =");
        // Keys of PgBouncer's documentation that its example file leaves out.
        let undocumented = [
            "transaction_timeout",
            "max_db_client_connections",
            "max_user_client_connections",
            "auth_user",
            "user",
            "conffile",
        ];
        assert!(
            REFERENCE_DEFAULTS.contains(&line) || undocumented.contains(key),
            "{key}"
        );
    }
}

#[test]
fn values_convert_with_their_units() {
    let (imported, config) = import_text(
        "units",
        "[databases]\napp = dbname=app\n[pgbouncer]\nauth_type = trust\n\
         listen_addr = *\nserver_idle_timeout = 0.5\nquery_wait_timeout = 0\n\
         server_lifetime = 0\ntcp_keepidle = 60\ntcp_user_timeout = 2500\n\
         pool_mode = Transaction\nclient_tls_protocols = tlsv1.2,tlsv1.3\n",
    );
    assert_eq!(config.pool.server_idle_timeout.as_millis(), 500);
    // 0 disables these in PgBouncer; pgharbor keeps its default and says so.
    assert_eq!(config.pool.query_wait_timeout.as_secs(), 120);
    assert_eq!(config.pool.server_lifetime.as_secs(), 3600);
    assert_eq!(
        differs(&imported),
        ["query_wait_timeout", "server_lifetime"]
    );
    assert_eq!(config.pool.mode, PoolMode::Transaction);
    assert_eq!(
        config.listen.tcp.user_timeout.map(|d| d.as_millis()),
        Some(2500)
    );
    assert!(
        imported.toml.contains("addresses = [\"*\"]"),
        "{}",
        imported.toml
    );
    assert!(imported.toml.contains("min_protocol_version = \"TLSv1.2\""));
    // The backend side of PgBouncer's TCP settings goes into the conninfo.
    let conninfo = config.databases["app"].conninfo.redacted();
    assert!(conninfo.contains("keepalives_idle=60"), "{conninfo}");
    assert!(conninfo.contains("tcp_user_timeout=2500"), "{conninfo}");
}

#[test]
fn absent_keys_get_pgbouncers_defaults_where_pgharbor_differs() {
    let (_, config) = import_text(
        "absent",
        "[databases]\napp =\n[pgbouncer]\nauth_type = trust\n",
    );
    assert!(
        config.listen.addresses.is_empty(),
        "PgBouncer listens on no TCP address by default"
    );
    assert_eq!(config.pool.max_client_conn, 100);
    assert_eq!(config.listen.client_login_timeout.as_secs(), 60);
}

#[test]
fn databases_and_users_become_tables() {
    let (imported, config) = import_text(
        "entries",
        "[databases]\n\
         app = host=db1,db2 port=5433 dbname=real user=svc password='p w' pool_size=7 \
         reserve_pool=2 max_db_connections=9 pool_mode=transaction datestyle=ISO \
         timezone=UTC application_name=x connect_query='SELECT 1'\n\
         \"my db\" = host=/var/run/postgresql\n\
         [users]\nbob = pool_mode=statement max_user_connections=3 pool_size=4\n\
         [pgbouncer]\nauth_type = trust\nserver_tls_sslmode = require\n\
         [peers]\n1 = host=/tmp\n",
    );
    let app = &config.databases["app"];
    assert_eq!(app.pool_size, Some(7));
    assert_eq!(app.reserve_pool_size, Some(2));
    assert_eq!(app.max_db_connections, Some(9));
    assert_eq!(app.pool_mode, Some(PoolMode::Transaction));
    let conninfo = app.conninfo.redacted();
    for want in [
        "host=db1,db2",
        "port=5433",
        "dbname=real",
        "user=svc",
        "sslmode=require",
        "application_name=x",
    ] {
        assert!(conninfo.contains(want), "{want} in {conninfo}");
    }
    assert_eq!(app.conninfo.password.as_deref(), Some("p w"));
    assert!(
        conninfo.contains("DateStyle=ISO") && conninfo.contains("TimeZone=UTC"),
        "{conninfo}"
    );
    assert!(config.databases.contains_key("my db"));
    let bob = &config.users["bob"];
    assert_eq!(bob.pool_mode, Some(PoolMode::Statement));
    assert_eq!(bob.max_user_connections, Some(3));
    assert_eq!(
        differs(&imported),
        ["[databases] app: connect_query", "[users] bob: pool_size",]
    );
    // Without peer_id PgBouncer ignores [peers], and so does the import.
    assert!(config.peers.is_empty());
    assert!(imported.notes.iter().any(|n| n.key == "[peers] 1"));
}

#[test]
fn peering_becomes_a_fleet() {
    let (imported, config) = import_text(
        "peers",
        "[databases]
app =
[pgbouncer]
auth_type = trust
peer_id = 2
so_reuseport = 1
         unix_socket_dir = /run/pgb2
         [peers]
1 = host=/run/pgb1 port=6432 pool_size=3
2 = host=/run/pgb2 port=6432
         3 = host=10.0.0.3 port=6433 frobnicate=1
",
    );
    let id = |n| crate::config::InstanceId::new(n).expect("id");
    assert_eq!(config.listen.instance_id, Some(id(2)));
    assert!(config.listen.reuseport);
    // Its own line is in the file (the fleet may share it) and skipped.
    assert!(
        imported.toml.contains("2 = \"host=/run/pgb2 port=6432\""),
        "{}",
        imported.toml
    );
    let ids: Vec<u8> = config.peers.keys().map(|i| i.get()).collect();
    assert_eq!(ids, [1, 3]);
    assert_eq!(config.peers[&id(3)].host.describe(), "10.0.0.3:6433");
    assert_eq!(differs(&imported), ["[peers] 3: frobnicate"]);
}

#[test]
fn unknown_and_unsupported_keys_are_reported_with_a_reason() {
    let (imported, _) = import_text(
        "unknown",
        "[databases]\napp =\n[pgbouncer]\nauth_type = hba\nfrobnicate = 1\nauth_user = pgb\nauth_file = /u\n",
    );
    let keys = differs(&imported);
    assert_eq!(keys, ["auth_type", "frobnicate"]);
    // auth_user has an equivalent now: auth.user.
    assert!(
        imported.toml.contains("user = \"pgb\""),
        "{}",
        imported.toml
    );
    for note in imported
        .notes
        .iter()
        .filter(|n| n.impact == Impact::Differs)
    {
        assert!(note.at.contains("pgbouncer.ini:"), "{note}");
        assert!(!note.reason.is_empty(), "{note}");
        // Each goes into the file's header too, so the file says what it lacks.
        assert!(imported.toml.contains(&note.reason), "{note}");
    }
}

#[test]
fn the_userlist_argument_replaces_auth_file() {
    let dir = Scratch::new("userlist");
    let ini = dir.write(
        "pgbouncer.ini",
        "[databases]\napp =\n[pgbouncer]\nauth_file = /old\n",
    );
    let imported = import(&ini, Some(Path::new("/etc/pgbouncer/userlist.txt"))).expect("import");
    let config = Config::parse(&imported.toml, &dir.0.join("x.toml")).expect("loads");
    assert_eq!(
        config.auth.auth_file.as_deref(),
        Some(Path::new("/etc/pgbouncer/userlist.txt"))
    );
}

#[test]
fn broken_files_are_errors_that_name_the_line() {
    let dir = Scratch::new("broken");
    let ini = dir.write("pgbouncer.ini", "[pgbouncer]\nlisten_port 6432\n");
    let err = import(&ini, None).expect_err("syntax");
    assert!(err.to_string().contains("pgbouncer.ini:2"), "{err}");
    let err = import(&dir.0.join("missing.ini"), None).expect_err("missing");
    assert!(err.to_string().contains("missing.ini"), "{err}");
    // A connect string libpq could not read is a note, not a crash.
    let ini = dir.write(
        "bad.ini",
        "[databases]\napp = host='unterminated\n[pgbouncer]\nauth_type = trust\n",
    );
    let imported = import(&ini, None).expect("import");
    assert_eq!(differs(&imported), ["[databases] app"]);
}

#[test]
fn rules_name_real_pgharbor_keys() {
    // A rule's target must be a row of pgharbor's key table.
    for (key, rule) in SETTINGS {
        if let Rule::To { table, key: to, .. } = rule {
            let known =
                crate::config::keys::all().any(|k| k.section.as_str() == *table && k.name == *to);
            assert!(known, "{key} -> {table}.{to}");
        }
    }
}

#[test]
fn the_readme_maps_every_key() {
    let readme = include_str!("../../README.md");
    for (key, _) in SETTINGS {
        assert!(
            readme.contains(&format!("| `{key}` |")),
            "README lacks {key}"
        );
    }
}

#[test]
fn the_tls13_suite_list_carries_over_and_empty_keeps_the_default() {
    use crate::config::Tls13Suite::*;
    let (imported, config) = import_text(
        "tls13-ciphers",
        "[databases]\napp =\n[pgbouncer]\nauth_type = trust\n\
         client_tls13_ciphers = TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\n",
    );
    assert_eq!(
        config.tls.tls13_ciphers,
        [Aes256GcmSha384, Chacha20Poly1305Sha256]
    );
    assert!(differs(&imported).is_empty(), "{:?}", imported.notes);
    let (imported, config) = import_text(
        "tls13-empty",
        "[databases]\napp =\n[pgbouncer]\nauth_type = trust\nclient_tls13_ciphers =\n",
    );
    assert_eq!(config.tls.tls13_ciphers[0], Aes128GcmSha256);
    assert!(
        !imported.toml.contains("tls13_ciphers"),
        "{}",
        imported.toml
    );
}

#[test]
fn client_certificate_settings_carry_over() {
    let (imported, config) = import_text(
        "client-certs",
        "[databases]\napp =\n[pgbouncer]\nauth_type = trust\n\
         client_tls_sslmode = verify-full\nclient_tls_ca_file = /etc/pgb/ca.crt\n\
         client_tls_cert_file = /etc/pgb/server.crt\nclient_tls_key_file = /etc/pgb/server.key\n",
    );
    // PgBouncer's verify-full checks the certificate only: pgharbor's verify-ca.
    assert_eq!(config.tls.sslmode, crate::config::SslMode::VerifyCa);
    assert_eq!(
        config.tls.ca_file.as_deref(),
        Some(std::path::Path::new("/etc/pgb/ca.crt"))
    );
    let keys = differs(&imported);
    assert!(
        !keys.iter().any(|k| k.starts_with("client_tls")),
        "{keys:?}"
    );
}
