//! pg_ident.conf: parsing, regex maps with `\1`, and malformed lines.

use std::path::Path;

use super::tests::{load, HBA, IDENT};
use super::*;

fn maps(text: &str) -> Result<IdentMaps, HbaError> {
    IdentMaps::load_from(&MemoryFiles::default().with(IDENT, text), Path::new(IDENT))
}

#[test]
fn literal_maps_are_scoped_by_name_and_ordered() {
    let m = maps(
        "# MAP  SYSTEM  PG\n\
         os     root    postgres\n\
         os     alice   alice\n\
         os     alice   \"all\"\n\
         other  bob     postgres  ignored-extra-field\n",
    )
    .unwrap();
    assert!(m.allows("os", "root", "postgres"));
    assert!(!m.allows("os", "root", "alice"));
    assert!(m.allows("os", "alice", "alice"));
    // A quoted all is a role named all.
    assert!(m.allows("os", "alice", "all"));
    assert!(!m.allows("os", "alice", "postgres"));
    assert!(!m.allows("os", "bob", "postgres"), "bob is in another map");
    assert!(m.allows("other", "bob", "postgres"));
    assert!(!m.allows("missing", "root", "postgres"));
    assert!(ident_allows(&m, "os", "root", "postgres"));
    assert!(m.contains("other") && !m.contains("missing"));
    assert_eq!(m.lines().len(), 4);
    assert_eq!(m.lines()[3].line, 5);
}

#[test]
fn regex_system_names_and_backreference() {
    let m = maps(
        "certs  /^(.*)@example\\.com$   \\1\n\
         certs  /^admin-(.*)$            prefix_\\1_suffix\n\
         certs  /^ops-                   all\n\
         certs  /^svc-                   /^app_\n\
         certs  /^(x)?y$                 \\1z\n\
         certs  /^(x)?y$                 z\n",
    )
    .unwrap();
    assert!(m.allows("certs", "alice@example.com", "alice"));
    assert!(!m.allows("certs", "alice@example.com", "bob"));
    assert!(!m.allows("certs", "alice@example.org", "alice"));
    assert!(m.allows("certs", "admin-carol", "prefix_carol_suffix"));
    assert!(!m.allows("certs", "admin-carol", "carol"));
    assert!(m.allows("certs", "ops-1", "anyone"));
    assert!(m.allows("certs", "svc-web", "app_web"));
    assert!(!m.allows("certs", "svc-web", "web"));
    // Group 1 did not take part: PostgreSQL's error ends the search, so
    // the next line (which would allow "z") is not reached.
    assert!(!m.allows("certs", "y", "z"));
    assert!(m.allows("certs", "xy", "xz"));
}

#[test]
fn substituted_names_are_literal() {
    // `\1` becoming "all" is a role named all, not the keyword.
    let m = maps("m /^(.*)$ \\1").unwrap();
    assert!(m.allows("m", "all", "all"));
    assert!(!m.allows("m", "all", "postgres"));
    // Without a regex, `\1` is just characters.
    let m = maps("m root \\1").unwrap();
    assert!(m.allows("m", "root", "\\1"));
}

#[test]
fn malformed_ident_lines() {
    let cases = [
        ("m", 1, "missing entry at end of line"),
        ("m root", 1, "missing entry at end of line"),
        ("\nm,n root postgres", 2, "multiple values in ident field"),
        ("m root,admin postgres", 1, "multiple values in ident field"),
        ("m root a,b", 1, "multiple values in ident field"),
        ("m \"root postgres", 1, "unterminated quoted string"),
        (
            "m /^root$ \\1",
            1,
            "regular expression \"^root$\" has no subexpressions as requested by backreference in \"\\1\"",
        ),
    ];
    for (text, line, message) in cases {
        let e = maps(text).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (line, message), "{text}");
    }
    let e = maps("m /( postgres").unwrap_err();
    assert!(
        e.message.starts_with("invalid regular expression \"(\""),
        "{e}"
    );
    let e = maps("m root +admins").unwrap_err();
    assert!(
        e.message.starts_with("role membership (\"+admins\")"),
        "{e}"
    );
    assert!(maps("m root \"+admins\"")
        .unwrap()
        .allows("m", "root", "+admins"));
    assert_eq!(maps("# empty\n").unwrap().lines().len(), 0);
}

#[test]
fn ident_files_include_like_hba_files() {
    let files = MemoryFiles::default()
        .with(IDENT, "include more.conf\nm @systems postgres\n")
        .with("/etc/pgharbor/more.conf", "m root admin")
        .with("/etc/pgharbor/systems", "alice");
    let m = IdentMaps::load_from(&files, Path::new(IDENT)).unwrap();
    assert!(m.allows("m", "root", "admin"));
    assert!(m.allows("m", "alice", "postgres"));
}

#[test]
fn usermap_allows_follows_check_usermap() {
    let files = MemoryFiles::default()
        .with(
            HBA,
            "local all all peer map=os\nhostssl all all all cert map=certs\nlocal all all peer\n",
        )
        .with(IDENT, "os root postgres\ncerts /^(.*)@corp$ \\1\n");
    let h = load(files, true).unwrap();
    let map = |i: usize| h.rules()[i].map.as_deref();
    assert!(h.usermap_allows(map(0), "root", "postgres"));
    assert!(!h.usermap_allows(map(0), "root", "root"));
    assert!(h.usermap_allows(map(1), "dana@corp", "dana"));
    // No map: the names must be equal.
    assert_eq!(map(2), None);
    assert!(h.usermap_allows(None, "dana", "dana"));
    assert!(!h.usermap_allows(None, "dana", "postgres"));
    assert!(h.ident().is_some());
    // A map named with no ident file loaded allows nobody.
    let bare = load(
        MemoryFiles::default().with(HBA, "local all all trust"),
        false,
    )
    .unwrap();
    assert!(!bare.usermap_allows(Some("os"), "root", "postgres"));
}
