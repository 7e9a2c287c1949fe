use std::path::PathBuf;

use crate::config::{BackendHost, ConnInfo, LoadBalance, ServerName, TargetSessionAttrs};

use crate::config::conninfo::tests::{err, parse};

/// (where, port, TLS name) of every host.
fn hosts(s: &str) -> Vec<(String, u16, Option<String>)> {
    parse(s)
        .hosts
        .iter()
        .map(|h| {
            let place = match &h.host {
                BackendHost::Tcp(t) => t.clone(),
                BackendHost::Unix(d) => d.display().to_string(),
            };
            (place, h.port, h.tls_server_name().map(str::to_string))
        })
        .collect()
}

fn h(place: &str, port: u16, name: Option<&str>) -> (String, u16, Option<String>) {
    (place.to_string(), port, name.map(str::to_string))
}

#[test]
fn lists_match_up_as_in_libpq() {
    assert_eq!(
        hosts("host=a,b,c port=5433"),
        [
            h("a", 5433, Some("a")),
            h("b", 5433, Some("b")),
            h("c", 5433, Some("c"))
        ],
        "one port for all"
    );
    assert_eq!(
        hosts("host=a,b port=1,2"),
        [h("a", 1, Some("a")), h("b", 2, Some("b"))]
    );
    assert_eq!(
        hosts("host=a,,/tmp port=,7,"),
        [
            h("a", 5432, Some("a")),
            h("/var/run/postgresql", 7, None),
            h("/tmp", 5432, None)
        ],
        "empty entries are the defaults"
    );
    assert_eq!(
        hosts("host=db1.example,db2.example hostaddr=10.0.0.1,10.0.0.2"),
        [
            h("10.0.0.1", 5432, Some("db1.example")),
            h("10.0.0.2", 5432, Some("db2.example"))
        ],
        "hostaddr connects, host names the server per entry"
    );
    assert_eq!(
        hosts("host=a,b hostaddr=,10.0.0.2"),
        [h("a", 5432, Some("a")), h("10.0.0.2", 5432, Some("b"))],
        "an empty hostaddr entry uses its host"
    );
    assert_eq!(
        hosts("hostaddr=10.0.0.1,::1"),
        [h("10.0.0.1", 5432, None), h("::1", 5432, None)]
    );
    assert_eq!(
        hosts("host=a,b host=c"),
        [h("c", 5432, Some("c"))],
        "a later keyword overrides"
    );
    let default = h("/var/run/postgresql", 5432, None);
    assert_eq!(hosts("host=,"), [default.clone(), default]);
    assert_eq!(
        parse("").hosts,
        ConnInfo::default().hosts,
        "no host: one default"
    );
}

#[test]
fn uri_host_lists() {
    assert_eq!(
        hosts("postgresql://a:1,b,[::1]:3/app"),
        [
            h("a", 1, Some("a")),
            h("b", 5432, Some("b")),
            h("::1", 3, Some("::1"))
        ]
    );
    assert_eq!(
        hosts("postgresql://a,b/app"),
        [h("a", 5432, Some("a")), h("b", 5432, Some("b"))]
    );
    assert_eq!(
        hosts("postgresql://a,%2Ftmp:6000/app"),
        [h("a", 5432, Some("a")), h("/tmp", 6000, None)]
    );
    let info = parse("postgresql://a,b/app?target_session_attrs=primary&load_balance_hosts=random");
    assert_eq!(info.target_session_attrs, TargetSessionAttrs::Primary);
    assert_eq!(info.load_balance_hosts, LoadBalance::Random);
}

#[test]
fn malformed_lists_name_the_key() {
    let cases = [
        ("host=a,b port=1,2,3", "port list \"1,2,3\""),
        ("host=a,b port=1,2,3", "3 port numbers for 2 hosts"),
        ("port=1,2", "2 port numbers for 1 hosts"),
        (
            "host=a,b,c hostaddr=10.0.0.1,10.0.0.2",
            "host list \"a,b,c\"",
        ),
        (
            "host=a,b,c hostaddr=10.0.0.1,10.0.0.2",
            "3 host names for 2 hostaddr values",
        ),
        (
            "host=a,b port=5432,x",
            "invalid port \"5432,x\": \"x\" is not a number",
        ),
        (
            "host=a,b port=5432,0",
            "\"0\" is not a number from 1 to 65535",
        ),
        ("host=a,b port=70000,1", "\"70000\" is not a number"),
        ("host=a port=x", "invalid port \"x\""),
        (
            "hostaddr=10.0.0.1,db.example",
            "invalid hostaddr \"db.example\"",
        ),
        (
            "hostaddr=10.0.0.1,/tmp",
            "a socket directory belongs in host",
        ),
        ("host=a,@sock", "abstract Unix socket \"@sock\""),
        ("postgresql://a:1,b:2,[::1/app", "missing \"]\""),
        (
            "target_session_attrs=master",
            "invalid target_session_attrs \"master\"",
        ),
        (
            "target_session_attrs=Read-Write",
            "expected any, read-write",
        ),
        (
            "load_balance_hosts=round-robin",
            "invalid load_balance_hosts \"round-robin\"",
        ),
    ];
    for (input, want) in cases {
        let e = err(input);
        assert!(e.contains(want), "{input:?}: {e}");
    }
}

#[test]
fn every_target_session_attrs_value() {
    for (value, want) in [
        ("any", TargetSessionAttrs::Any),
        ("read-write", TargetSessionAttrs::ReadWrite),
        ("read-only", TargetSessionAttrs::ReadOnly),
        ("primary", TargetSessionAttrs::Primary),
        ("standby", TargetSessionAttrs::Standby),
        ("prefer-standby", TargetSessionAttrs::PreferStandby),
    ] {
        let info = parse(&format!("target_session_attrs={value}"));
        assert_eq!(info.target_session_attrs, want);
        assert_eq!(want.as_str(), value);
    }
    assert_eq!(parse("").target_session_attrs, TargetSessionAttrs::Any);
    assert_eq!(parse("").load_balance_hosts, LoadBalance::Disable);
}

#[test]
fn redacted_lists_read_back_the_same() {
    for s in [
        "host=a,b,c port=1,2,3 target_session_attrs=read-write",
        "host=a,b port=5433 load_balance_hosts=random",
        "host=db1.example,db2.example hostaddr=10.0.0.1,10.0.0.2",
        "host=a,b hostaddr=,10.0.0.2 port=1,",
        "hostaddr=10.0.0.1,::1",
        "host=/tmp,a",
        "postgresql://a:1,b/app?target_session_attrs=prefer-standby",
    ] {
        let info = parse(s);
        let again = parse(&info.redacted());
        assert_eq!(again, info, "{s} -> {}", info.redacted());
    }
    assert_eq!(
        parse("host=a,b port=1,2").redacted(),
        "host=a,b port=1,2 sslmode=prefer socketsslmode=disable"
    );
}

#[test]
fn tls_name_follows_each_host() {
    let info = parse("host=db1.example,db2.example hostaddr=10.0.0.1,10.0.0.2");
    assert_eq!(
        info.hosts[1].server_name,
        ServerName::Named("db2.example".into())
    );
    assert_eq!(
        info.hosts[0].socket_path(),
        None,
        "TCP hosts have no socket"
    );
    assert_eq!(
        parse("host=/tmp,b port=6000").hosts[0].socket_path(),
        Some(PathBuf::from("/tmp/.s.PGSQL.6000"))
    );
    // verify-full needs a name for every TCP host.
    let e = parse("host=a, hostaddr=10.0.0.1,10.0.0.2 sslmode=verify-full")
        .check_tls()
        .expect_err("second host has no name");
    assert!(e.contains("10.0.0.2:5432"), "{e}");
}
