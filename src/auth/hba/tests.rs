//! Parsing and first-match tests: connection types against transports,
//! addresses, names and keywords, methods, options and refusals.

use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;

pub(super) const HBA: &str = "/etc/pgharbor/pg_hba.conf";
pub(super) const IDENT: &str = "/etc/pgharbor/pg_ident.conf";

pub(super) fn load(files: MemoryFiles, ident: bool) -> Result<Hba, HbaError> {
    let ident = ident.then_some(Path::new(IDENT));
    Hba::load_from(&files, Path::new(HBA), ident)
}

pub(super) fn hba(text: &str) -> Hba {
    load(MemoryFiles::default().with(HBA, text), false).unwrap()
}

pub(super) fn local<'a>(database: &'a str, user: &'a str) -> ConnFacts<'a> {
    ConnFacts {
        transport: Transport::Local { tls: false },
        database,
        user,
    }
}

fn tcp<'a>(addr: &str, tls: bool, database: &'a str, user: &'a str) -> ConnFacts<'a> {
    let addr: IpAddr = addr.parse().unwrap();
    ConnFacts {
        transport: Transport::Tcp { addr, tls },
        database,
        user,
    }
}

/// The line number of the first matching rule.
pub(super) fn hit(hba: &Hba, facts: ConnFacts<'_>) -> Option<usize> {
    hba.matches(&facts).map(|r| r.line)
}

#[test]
fn first_match_wins_in_file_order() {
    let h = hba("local app alice reject\nlocal all alice trust\nlocal all all md5\n");
    assert_eq!(hit(&h, local("app", "alice")), Some(1));
    assert_eq!(hit(&h, local("other", "alice")), Some(2));
    assert_eq!(hit(&h, local("app", "bob")), Some(3));
    assert_eq!(h.matches(&local("app", "bob")).unwrap().method, Method::Md5);
}

#[test]
fn connection_types_against_transports_and_tls() {
    let h = |line: &str| hba(line);
    let cases = [
        // rule, local plain, local tls, tcp plain, tcp tls
        ("local all all trust", [true, true, false, false]),
        ("host all all all trust", [false, false, true, true]),
        ("hostssl all all all trust", [false, false, false, true]),
        ("hostnossl all all all trust", [false, false, true, false]),
    ];
    for (rule, expected) in cases {
        let h = h(rule);
        let facts = [
            local("d", "u"),
            ConnFacts {
                transport: Transport::Local { tls: true },
                ..local("d", "u")
            },
            tcp("10.0.0.1", false, "d", "u"),
            tcp("10.0.0.1", true, "d", "u"),
        ];
        for (facts, want) in facts.into_iter().zip(expected) {
            assert_eq!(h.matches(&facts).is_some(), want, "{rule} / {facts:?}");
        }
    }
}

#[test]
fn cidr_ranges_v4_and_v6() {
    let h = hba("host all all 10.0.0.0/8 trust\n\
         host all all 192.168.1.77/24 trust\n\
         host all all 127.0.0.1/32 trust\n\
         host all all 2001:db8::/32 trust\n\
         host all all ::1/128 trust\n");
    assert_eq!(hit(&h, tcp("10.200.3.4", false, "d", "u")), Some(1));
    assert_eq!(hit(&h, tcp("11.0.0.1", false, "d", "u")), None);
    // Host bits in the rule are allowed and ignored.
    assert_eq!(hit(&h, tcp("192.168.1.3", false, "d", "u")), Some(2));
    assert_eq!(hit(&h, tcp("192.168.2.3", false, "d", "u")), None);
    assert_eq!(hit(&h, tcp("127.0.0.1", false, "d", "u")), Some(3));
    assert_eq!(hit(&h, tcp("127.0.0.2", false, "d", "u")), None);
    assert_eq!(hit(&h, tcp("2001:db8:1::5", true, "d", "u")), Some(4));
    assert_eq!(hit(&h, tcp("2001:db9::5", true, "d", "u")), None);
    assert_eq!(hit(&h, tcp("::1", false, "d", "u")), Some(5));
    // Families never mix, as in PostgreSQL: a mapped IPv4 is IPv6.
    assert_eq!(hit(&h, tcp("::ffff:10.0.0.1", false, "d", "u")), None);
    let all_v4 = hba("host all all 0.0.0.0/0 trust");
    assert_eq!(hit(&all_v4, tcp("8.8.8.8", false, "d", "u")), Some(1));
    assert_eq!(hit(&all_v4, tcp("::1", false, "d", "u")), None);
    let single = hba("host all all 10.0.0.0/8 trust");
    assert_eq!(
        single.rules()[0].address,
        Some(Address::Cidr("10.0.0.0/8".parse().unwrap()))
    );
}

#[test]
fn separate_netmask_forms() {
    let h = hba("host all all 10.1.0.0 255.255.0.0 trust\n\
         host all all 172.16.0.1 255.0.255.0 trust\n\
         host all all 2001:db8:: ffff:ffff:: trust\n");
    assert_eq!(hit(&h, tcp("10.1.200.200", false, "d", "u")), Some(1));
    assert_eq!(hit(&h, tcp("10.2.0.1", false, "d", "u")), None);
    // A non-contiguous mask is PostgreSQL's too: bits 1 and 3 only.
    assert_eq!(hit(&h, tcp("172.99.0.77", false, "d", "u")), Some(2));
    assert_eq!(hit(&h, tcp("2001:db8:ff::1", false, "d", "u")), Some(3));
    let rule = &h.rules()[0];
    assert_eq!(
        rule.address,
        Some(Address::Masked {
            addr: "10.1.0.0".parse().unwrap(),
            mask: "255.255.0.0".parse().unwrap()
        })
    );
}

/// Counts how often the interfaces are listed.
struct Counting(Vec<Interface>, AtomicUsize);

impl Interfaces for Counting {
    fn list(&self) -> std::io::Result<Vec<Interface>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(self.0.clone())
    }
}

#[test]
fn samehost_and_samenet_use_the_injected_interfaces_lazily() {
    let ifaces = vec![
        Interface::new(
            "192.168.5.10".parse().unwrap(),
            "255.255.255.0".parse().ok(),
        ),
        Interface::new(
            "fd00::10".parse().unwrap(),
            "ffff:ffff:ffff:ffff::".parse().ok(),
        ),
        // No mask: only the address itself, as PostgreSQL.
        Interface::new("10.9.9.9".parse().unwrap(), None),
    ];
    let counting = Arc::new(Counting(ifaces, AtomicUsize::new(0)));
    let h = hba("host app all samehost trust\nhost all all samenet md5\nhost all bob all trust\n")
        .with_interfaces(counting.clone());
    assert_eq!(hit(&h, tcp("192.168.5.10", false, "app", "u")), Some(1));
    assert_eq!(hit(&h, tcp("192.168.5.11", false, "app", "u")), Some(2));
    assert_eq!(hit(&h, tcp("fd00::99", false, "app", "u")), Some(2));
    assert_eq!(hit(&h, tcp("10.9.9.9", false, "x", "u")), Some(2));
    assert_eq!(hit(&h, tcp("10.9.9.8", false, "x", "u")), None);
    assert_eq!(hit(&h, tcp("10.9.9.8", false, "x", "bob")), Some(3));
    // Listed once per match that reached a samehost/samenet rule.
    assert_eq!(counting.1.load(Ordering::SeqCst), 6);
    let before = counting.1.load(Ordering::SeqCst);
    let h2 = hba("host all all all trust\nhost all all samenet trust\n")
        .with_interfaces(counting.clone());
    assert_eq!(hit(&h2, tcp("1.2.3.4", false, "d", "u")), Some(1));
    assert_eq!(
        counting.1.load(Ordering::SeqCst),
        before,
        "not listed when not needed"
    );
}

#[test]
fn system_interfaces_can_be_listed() {
    let list = SystemInterfaces.list().expect("getifaddrs");
    for i in list {
        assert_eq!(i.addr.is_ipv4(), i.netmask.is_ipv4(), "{i:?}");
    }
}

#[test]
fn names_keywords_lists_and_regexes() {
    let h = hba("local sameuser all trust\n\
         local \"all\" all trust\n\
         local app,\"sameuser\" \"all\",carol trust\n\
         local /^shard_[0-9]+$ /^svc_ md5\n\
         local replication all trust\n\
         local all dave password\n");
    assert_eq!(hit(&h, local("alice", "alice")), Some(1));
    // A quoted keyword is a name.
    assert_eq!(hit(&h, local("all", "x")), Some(2));
    assert_eq!(hit(&h, local("app", "all")), Some(3));
    assert_eq!(hit(&h, local("sameuser", "carol")), Some(3));
    assert_eq!(hit(&h, local("app", "bob")), None);
    assert_eq!(hit(&h, local("shard_12", "svc_web")), Some(4));
    assert_eq!(hit(&h, local("shard_12x", "svc_web")), None);
    // Regexes search unanchored, as PostgreSQL's.
    assert_eq!(hit(&h, local("shard_1", "my_svc_web")), None);
    // replication never matches a pooled connection; "all" does not
    // match a database called replication specially either.
    assert_eq!(hit(&h, local("replication", "dave")), Some(6));
    let rule = &h.rules()[2];
    assert_eq!(
        rule.databases,
        vec![
            DatabaseMatch::Name("app".into()),
            DatabaseMatch::Name("sameuser".into())
        ]
    );
    assert_eq!(
        rule.users,
        vec![
            UserMatch::Name("all".into()),
            UserMatch::Name("carol".into())
        ]
    );
    assert_eq!(h.rules()[4].databases, vec![DatabaseMatch::Replication]);
}

#[test]
fn methods_and_options() {
    let ident = MemoryFiles::default()
        .with(HBA, "local all all peer map=os")
        .with(IDENT, "os a b");
    let with_map = load(ident, true).unwrap();
    assert_eq!(with_map.rules()[0].map.as_deref(), Some("os"));
    let h = hba("local all postgres ident\n\
         hostssl all all all cert\n\
         hostssl all all all scram-sha-256 clientcert=verify-ca\n\
         hostssl all all all md5 clientcert=verify-full,clientcert=verify-ca\n\
         host all all all password\n");
    let r = h.rules();
    assert_eq!(r[0].method, Method::Peer, "ident on local is peer");
    assert_eq!(
        (r[1].method, r[1].client_cert),
        (Method::Cert, Some(ClientCert::VerifyFull))
    );
    assert_eq!(r[2].client_cert, Some(ClientCert::VerifyCa));
    assert_eq!(
        r[3].client_cert,
        Some(ClientCert::VerifyCa),
        "the last one wins"
    );
    assert_eq!((r[4].method, r[4].client_cert), (Method::Password, None));
    assert_eq!(Method::ScramSha256.keyword(), "scram-sha-256");
    assert_eq!(ConnType::HostNoSsl.keyword(), "hostnossl");
}

#[test]
fn refusal_messages_are_postgresqls() {
    let h = hba("host all all 10.0.0.0/8 reject\nhostssl all all all trust\n");
    let no_entry = h.decide(&local("app", "alice")).unwrap_err();
    assert_eq!(
        no_entry.message,
        "no pg_hba.conf entry for host \"[local]\", user \"alice\", database \"app\", no encryption"
    );
    assert_eq!(no_entry.rejected_by, None);
    let pg = no_entry.to_pg_error();
    assert_eq!(
        (pg.code, pg.message.as_str()),
        ("28000", no_entry.message.as_str())
    );
    let v6 = h.decide(&tcp("2001:db8::1", false, "d", "u")).unwrap_err();
    assert_eq!(
        v6.message,
        "no pg_hba.conf entry for host \"2001:db8::1\", user \"u\", database \"d\", no encryption"
    );
    let rejected = h.decide(&tcp("10.1.2.3", true, "d", "u")).unwrap_err();
    assert_eq!(
        rejected.message,
        "pg_hba.conf rejects connection for host \"10.1.2.3\", user \"u\", database \"d\", SSL encryption"
    );
    assert_eq!(rejected.rejected_by.as_ref().map(|(_, l)| *l), Some(1));
    assert_eq!(h.decide(&tcp("11.1.2.3", true, "d", "u")).unwrap().line, 2);
}
