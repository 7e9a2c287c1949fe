use std::time::Duration;

use super::*;

/// `s` parsed; panics with the error otherwise. Shared by the keyword modules' tests.
pub(super) fn parse(s: &str) -> ConnInfo {
    ConnInfo::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

/// The error `s` is refused with; panics if it parses.
pub(super) fn err(s: &str) -> String {
    match ConnInfo::parse(s) {
        Ok(info) => panic!("{s:?} parsed: {info:?}"),
        Err(e) => e.to_string(),
    }
}

fn tcp(h: &str) -> BackendHost {
    BackendHost::Tcp(h.to_string())
}

fn unix(dir: &str) -> BackendHost {
    BackendHost::Unix(PathBuf::from(dir))
}

#[test]
fn empty_string_gives_libpq_defaults() {
    let info = parse("");
    assert_eq!(info, ConnInfo::default());
    assert_eq!(info.first_host().host, unix("/var/run/postgresql"));
    assert_eq!(info.first_host().port, 5432);
    assert_eq!(info.sslmode, SslMode::Prefer);
    assert_eq!(info.socketsslmode, SslMode::Disable);
    assert_eq!(info.dbname, None);
}

#[test]
fn keyword_form_all_known_keys() {
    let info = parse(
        "host=db.example.com port=5433 dbname=app user=alice password=s3cret \
         sslmode=verify-full socketsslmode=require sslrootcert=/etc/ca.pem \
         connect_timeout=10 application_name=harbor options='-c work_mem=64MB' \
         target_session_attrs=read-write load_balance_hosts=random",
    );
    assert_eq!(info.first_host().host, tcp("db.example.com"));
    assert_eq!(info.first_host().port, 5433);
    assert_eq!(info.dbname.as_deref(), Some("app"));
    assert_eq!(info.user.as_deref(), Some("alice"));
    assert_eq!(info.password.as_deref(), Some("s3cret"));
    assert_eq!(info.sslmode, SslMode::VerifyFull);
    assert_eq!(info.socketsslmode, SslMode::Require);
    assert_eq!(info.sslrootcert, Some(PathBuf::from("/etc/ca.pem")));
    assert_eq!(info.connect_timeout, Some(Duration::from_secs(10)));
    assert_eq!(info.extra["application_name"], "harbor");
    assert_eq!(info.extra["options"], "-c work_mem=64MB");
    assert_eq!(info.target_session_attrs, TargetSessionAttrs::ReadWrite);
    assert_eq!(info.load_balance_hosts, LoadBalance::Random);
    assert!(!info.extra.contains_key("target_session_attrs"));
}

#[test]
fn keyword_form_spacing_quotes_and_escapes() {
    let info = parse("  host = /tmp\tport= 6000 dbname ='my db'  user=o\\'brien ");
    assert_eq!(info.first_host().host, unix("/tmp"));
    assert_eq!(info.first_host().port, 6000);
    assert_eq!(info.dbname.as_deref(), Some("my db"));
    assert_eq!(info.user.as_deref(), Some("o'brien"));

    let info = parse(r"password='it\'s a \\ test' dbname=''");
    assert_eq!(info.password.as_deref(), Some(r"it's a \ test"));
    assert_eq!(info.dbname, None, "empty value means unset");

    // As in libpq, a quoted value needs no space before the next keyword.
    let info = parse("dbname='a b'user=bob");
    assert_eq!(info.dbname.as_deref(), Some("a b"));
    assert_eq!(info.user.as_deref(), Some("bob"));
}

#[test]
fn later_keys_override_earlier_ones_and_hostaddr_wins() {
    let info = parse("port=1 port=2 host=a.example hostaddr=10.0.0.5");
    assert_eq!(info.first_host().port, 2);
    assert_eq!(info.first_host().host, tcp("10.0.0.5"));
    assert_eq!(parse("port=").first_host().port, 5432);
    assert_eq!(parse("connect_timeout=0").connect_timeout, None);
    assert_eq!(parse("connect_timeout=-3").connect_timeout, None);
}

#[test]
fn keyword_form_malformed() {
    assert!(err("host=/tmp dbname='app").contains("unterminated quoted string"));
    assert!(err(r"dbname='app\").contains("unterminated quoted string"));
    assert_eq!(
        err("host=/tmp dbname"),
        r#"missing "=" after "dbname" in connection info string"#
    );
    assert!(err("host /tmp").contains(r#"missing "=" after "host""#));
    assert!(err("=x").contains("missing keyword"));
    assert!(err("port=abc").starts_with(r#"invalid port "abc""#));
    assert!(err("port=0").starts_with(r#"invalid port "0""#));
    assert!(err("port=70000").starts_with(r#"invalid port "70000""#));
    assert!(err("sslmode=on").starts_with(r#"invalid sslmode "on""#));
    assert!(err("socketsslmode=yes").starts_with(r#"invalid socketsslmode "yes""#));
    assert!(err("connect_timeout=5s").starts_with(r#"invalid connect_timeout "5s""#));
    assert!(err("hostaddr=db.example.com").starts_with(r#"invalid hostaddr"#));
    assert!(err("port=5432,5433").contains("2 port numbers for 1 hosts"));
    assert!(err("host=@pgsock").contains("abstract Unix socket"));
}

#[test]
fn uri_form_full() {
    let info = parse(
        "postgresql://alice:p%40ss%3Aword@db.example.com:5433/my%20db\
         ?sslmode=require&application_name=harbor&connect_timeout=3",
    );
    assert_eq!(info.user.as_deref(), Some("alice"));
    assert_eq!(info.password.as_deref(), Some("p@ss:word"));
    assert_eq!(info.first_host().host, tcp("db.example.com"));
    assert_eq!(info.first_host().port, 5433);
    assert_eq!(info.dbname.as_deref(), Some("my db"));
    assert_eq!(info.sslmode, SslMode::Require);
    assert_eq!(info.extra["application_name"], "harbor");
    assert_eq!(info.connect_timeout, Some(Duration::from_secs(3)));
}

#[test]
fn uri_form_short_and_defaults() {
    assert_eq!(parse("postgres://"), ConnInfo::default());
    let info = parse("postgresql://localhost");
    assert_eq!(
        (
            info.first_host().host.clone(),
            info.first_host().port,
            info.dbname
        ),
        (tcp("localhost"), 5432, None)
    );
    let info = parse("postgresql://bob@/app");
    assert_eq!(info.user.as_deref(), Some("bob"));
    assert_eq!(info.first_host().host, unix("/var/run/postgresql"));
    assert_eq!(info.dbname.as_deref(), Some("app"));
    assert_eq!(parse("postgresql://h/").dbname, None);
    assert_eq!(
        parse("postgresql://h?dbname=x").dbname.as_deref(),
        Some("x")
    );
    assert_eq!(
        parse("postgresql://h/app?ssl=true").sslmode,
        SslMode::Require
    );
}

#[test]
fn uri_ipv6_and_socket_paths() {
    let info = parse("postgresql://[::1]:6000/app");
    assert_eq!(
        (info.first_host().host.clone(), info.first_host().port),
        (tcp("::1"), 6000)
    );
    let info = parse("postgresql://[2001:db8::7]/app");
    assert_eq!(info.first_host().host, tcp("2001:db8::7"));

    let info = parse("postgresql://%2Fvar%2Frun%2Fpostgresql/db");
    assert_eq!(info.first_host().host, unix("/var/run/postgresql"));
    assert_eq!(info.dbname.as_deref(), Some("db"));
    assert_eq!(
        info.first_host().socket_path(),
        Some(PathBuf::from("/var/run/postgresql/.s.PGSQL.5432"))
    );
    assert_eq!(info.tls_mode(info.first_host()), SslMode::Disable);

    let info = parse("postgresql:///db?host=/tmp&port=6432");
    assert_eq!(
        (info.first_host().host.clone(), info.first_host().port),
        (unix("/tmp"), 6432)
    );
    let info = parse("postgresql://ignored/db?host=%2Ftmp");
    assert_eq!(info.first_host().host, unix("/tmp"));
}

#[test]
fn uri_malformed() {
    assert!(err("postgresql://[::1/app").contains(r#"missing "]""#));
    assert!(err("postgresql://[]/app").contains("empty IPv6"));
    assert!(err("postgresql://h:abc/app").starts_with(r#"invalid port "abc""#));
    assert!(err("postgresql://[::1]x/app").contains("unexpected character"));
    assert!(err("postgresql://h/app?sslmode").contains("missing key/value separator"));
    assert!(err("postgresql://h/app?a=b=c").contains("extra key/value separator"));
    assert!(err("postgresql://h/app?ssl=false").contains("invalid ssl"));
    assert!(err("postgresql://h/a%zzb").contains("invalid percent-encoding in the database name"));
    assert!(err("postgresql://h/a%2").contains("invalid percent-encoding"));
    assert!(err("postgresql://h/a%00b").contains("forbidden %00"));
    assert!(err("postgresql://h/a%ff").contains("not valid UTF-8"));
    assert!(err("postgresql://h1:5432,h2:x/app").contains(r#"invalid port "5432,x""#));
    assert!(err("postgresql://%40abstract/app").contains("abstract Unix socket"));
}

#[test]
fn errors_never_echo_uri_passwords() {
    let e = err("postgresql://u:hunter%zz@h/app");
    assert!(e.contains("password"), "{e}");
    assert!(!e.contains("hunter"), "{e}");
}

#[test]
fn debug_and_display_hide_the_password() {
    let info = parse("host=h user=u password=hunter2 sslpassword=keypass dbname=d");
    for shown in [
        format!("{info:?}"),
        info.to_string(),
        info.redacted(),
        format!("{info:#?}"),
    ] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("keypass"), "{shown}");
        assert!(shown.contains("********"), "{shown}");
    }
    assert_eq!(
        info.redacted(),
        "host=h port=5432 dbname=d user=u password=******** sslmode=prefer \
         socketsslmode=disable sslpassword=********"
    );
}

#[test]
fn redacted_form_round_trips_without_password() {
    let original = parse(concat!(
        r"host=/run/pg port=6000 dbname='my db' user=o\'brien sslrootcert=/ca.pem",
        r" connect_timeout=7 options='-c x=\\y' application_name=''",
    ));
    let again = parse(&original.redacted());
    assert_eq!(again, original);
}

#[test]
fn fallback_application_name_is_used_only_without_application_name() {
    let info = ConnInfo::parse("host=/tmp fallback_application_name=fb options=-cx=1").unwrap();
    assert_eq!(
        info.startup_params(),
        vec![
            ("application_name".to_string(), "fb".to_string()),
            ("options".to_string(), "-cx=1".to_string())
        ]
    );
    let info =
        ConnInfo::parse("host=/tmp fallback_application_name=fb application_name=app").unwrap();
    assert_eq!(
        info.startup_params(),
        vec![("application_name".to_string(), "app".to_string())]
    );
}
