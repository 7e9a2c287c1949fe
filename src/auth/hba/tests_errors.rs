//! Malformed input: every error path names its file and line with
//! PostgreSQL's message (or ours, where pgharbor refuses what PostgreSQL
//! takes).

use std::path::Path;

use super::tests::{load, HBA, IDENT};
use super::*;

fn error(text: &str) -> HbaError {
    load(MemoryFiles::default().with(HBA, text), false).unwrap_err()
}

/// `text`'s error is `message` on `line` of the hba file.
#[track_caller]
fn refused(text: &str, line: usize, message: &str) {
    let e = error(text);
    assert_eq!(
        (e.file.as_path(), e.line, e.message.as_str()),
        (Path::new(HBA), line, message)
    );
}

#[test]
fn bad_fields() {
    let ok = "local all all trust\n";
    refused(
        &format!("{ok}hostx all all all trust"),
        2,
        "invalid connection type \"hostx\"",
    );
    refused(
        "local,host all all trust",
        1,
        "multiple values specified for connection type",
    );
    refused("local", 1, "end-of-line before database specification");
    refused("local all", 1, "end-of-line before role specification");
    refused(
        "local all all",
        1,
        "end-of-line before authentication method",
    );
    refused(
        "host all all",
        1,
        "end-of-line before IP address specification",
    );
    refused(
        "host all all 10.0.0.0/8",
        1,
        "end-of-line before authentication method",
    );
    refused(
        "host all all 1.2.3.4,5.6.7.8 trust",
        1,
        "multiple values specified for host address",
    );
    refused(
        "local all all trust,md5",
        1,
        "multiple values specified for authentication type",
    );
    refused(
        "host all all 10.0.0.0",
        1,
        "end-of-line before netmask specification",
    );
    refused(
        "host all all 10.0.0.0 255.0.0.0,255.0.0.0 trust",
        1,
        "multiple values specified for netmask",
    );
    // Continuations count: line 2 takes in line 3, the bad one starts on 4.
    refused(
        &format!("{ok}\\\n\nlocal \\\nall"),
        4,
        "end-of-line before role specification",
    );
}

#[test]
fn gssapi_connection_types_are_refused() {
    for t in ["hostgssenc", "hostnogssenc"] {
        let e = error(&format!("{t} all all all trust"));
        assert_eq!(e.line, 1);
        assert!(e
            .message
            .starts_with(&format!("connection type \"{t}\" is not supported")));
    }
}

#[test]
fn bad_addresses() {
    for bad in [
        "10.0.0.0/33",
        "::/129",
        "10.0.0.0/",
        "10.0.0.0/x",
        "10.0.0.0/+8",
        "10.0.0.0/8/8",
    ] {
        let message = format!("invalid CIDR mask in address \"{bad}\"");
        refused(&format!("host all all {bad} trust"), 1, &message);
    }
    refused(
        "host all all db.example.com/24 trust",
        1,
        "specifying both host name and CIDR mask is invalid: \"db.example.com/24\"",
    );
    let e = error("host all all db.example.com trust");
    assert!(e
        .message
        .starts_with("host name \"db.example.com\" in the address field is not supported"));
    let e = error("host all all .example.com trust");
    assert!(e.message.starts_with("host name \".example.com\""));
    refused(
        "host all all fe80::1%eth0 trust",
        1,
        "invalid IP address \"fe80::1%eth0\"",
    );
    // A quoted keyword is not a keyword: here it is a host name.
    let e = error("host all all \"samehost\" trust");
    assert!(e.message.starts_with("host name \"samehost\""), "{e}");
    refused(
        "host all all 10.0.0.0 255.0.0.x trust",
        1,
        "invalid IP mask \"255.0.0.x\"",
    );
    refused(
        "host all all 10.0.0.0 ffff:: trust",
        1,
        "IP address and mask do not match",
    );
    refused(
        "host all all ::1 255.255.255.255 trust",
        1,
        "IP address and mask do not match",
    );
}

#[test]
fn bad_methods() {
    refused(
        "local all all foo",
        1,
        "invalid authentication method \"foo\"",
    );
    for m in ["ldap", "radius", "pam", "gss", "sspi", "bsd"] {
        let message = format!("invalid authentication method \"{m}\": not supported by pgharbor");
        refused(&format!("host all all all {m}"), 1, &message);
    }
    refused(
        "host all all all ident",
        1,
        "invalid authentication method \"ident\": not supported by pgharbor",
    );
    let peer = "peer authentication is only supported on local sockets";
    refused("host all all all peer", 1, peer);
    refused("hostssl all all all peer", 1, peer);
    let cert = "cert authentication is only supported on hostssl connections";
    refused("host all all all cert", 1, cert);
    refused("hostnossl all all all cert", 1, cert);
    refused("local all all cert", 1, cert);
}

#[test]
fn bad_options() {
    refused(
        "local all all peer map",
        1,
        "authentication option not in name=value format: map",
    );
    refused(
        "local all all trust foo=bar",
        1,
        "unrecognized authentication option name: \"foo\"",
    );
    refused(
        "local all all trust ldapserver=x",
        1,
        "authentication option \"ldapserver\" is only valid for authentication methods ldap",
    );
    refused(
        "local all all trust krb_realm=x",
        1,
        "authentication option \"krb_realm\" is only valid for authentication methods gssapi and sspi",
    );
    refused(
        "local all all md5 map=m",
        1,
        "authentication option \"map\" is only valid for authentication methods peer and cert",
    );
    let hostssl_only = "clientcert can only be configured for \"hostssl\" rows";
    refused("host all all all md5 clientcert=verify-ca", 1, hostssl_only);
    refused("local all all md5 clientcert=verify-full", 1, hostssl_only);
    refused(
        "hostssl all all all cert clientcert=verify-ca",
        1,
        "clientcert only accepts \"verify-full\" when using \"cert\" authentication",
    );
    refused(
        "hostssl all all all md5 clientcert=1",
        1,
        "invalid value for clientcert: \"1\"",
    );
    refused(
        "hostssl all all all cert clientname=DN",
        1,
        "authentication option \"clientname\" is not supported by pgharbor",
    );
}

#[test]
fn role_membership_and_bad_regexes() {
    let e = error("local all +admins trust");
    assert!(
        e.message
            .starts_with("role membership (\"+admins\") cannot be checked"),
        "{e}"
    );
    for kw in ["samerole", "samegroup"] {
        let e = error(&format!("local {kw} all trust"));
        assert!(
            e.message
                .starts_with(&format!("\"{kw}\" needs role membership")),
            "{e}"
        );
    }
    // Quoted, they are plain names.
    let h = load(
        MemoryFiles::default().with(HBA, "local \"samerole\" \"+admins\" trust"),
        false,
    );
    assert!(h.is_ok());
    let e = error("local /( all trust");
    assert!(
        e.message.starts_with("invalid regular expression \"(\": "),
        "{e}"
    );
    assert!(!e.message.contains('\n'), "{e:?}");
    let e = error("local all \"/a[\" trust");
    assert!(
        e.message.starts_with("invalid regular expression \"a[\""),
        "{e}"
    );
}

#[test]
fn unterminated_quote() {
    refused("local \"app all trust", 1, "unterminated quoted string");
    refused(
        "local all all trust\nlocal \"a\"\"b all trust",
        2,
        "unterminated quoted string",
    );
}

#[test]
fn inclusion_errors() {
    let looping = MemoryFiles::default()
        .with(HBA, "local @loop all trust")
        .with("/etc/pgharbor/loop", "x @loop");
    let e = load(looping, false).unwrap_err();
    assert_eq!(
        e.message,
        "could not open file \"/etc/pgharbor/loop\": maximum nesting depth exceeded"
    );
    assert_eq!(
        (e.file.as_path(), e.line),
        (Path::new("/etc/pgharbor/loop"), 1)
    );
    let e = load(
        MemoryFiles::default().with(HBA, "include pg_hba.conf"),
        false,
    )
    .unwrap_err();
    assert!(e.message.ends_with("maximum nesting depth exceeded"), "{e}");
    let e = error("local all all trust\nlocal @missing all trust");
    assert_eq!(e.line, 2);
    assert!(
        e.message
            .starts_with("could not open file \"/etc/pgharbor/missing\": "),
        "{e}"
    );
    let e = error("include other.conf");
    assert!(
        e.message
            .starts_with("could not open file \"/etc/pgharbor/other.conf\""),
        "{e}"
    );
    let e = error("include_dir conf.d");
    assert!(
        e.message
            .starts_with("could not open directory \"/etc/pgharbor/conf.d\""),
        "{e}"
    );
    // An error inside an included file names that file and line.
    let inner = MemoryFiles::default()
        .with(HBA, "local all all trust\ninclude more.conf")
        .with("/etc/pgharbor/more.conf", "\nlocal all all nope");
    let e = load(inner, false).unwrap_err();
    assert_eq!(
        (e.file.as_path(), e.line),
        (Path::new("/etc/pgharbor/more.conf"), 2)
    );
    assert_eq!(
        e.to_string(),
        "/etc/pgharbor/more.conf:2: invalid authentication method \"nope\""
    );
}

#[test]
fn empty_files_and_maps() {
    let e = error("# nothing\n\n");
    assert_eq!(e.line, 0);
    assert_eq!(
        e.message,
        format!("configuration file \"{HBA}\" contains no entries")
    );
    assert_eq!(
        e.to_string(),
        format!("{HBA}: configuration file \"{HBA}\" contains no entries")
    );
    // Only an include of nothing is empty too.
    let e = load(
        MemoryFiles::default().with(HBA, "include_if_exists none.conf"),
        false,
    );
    assert_eq!(e.unwrap_err().line, 0);
    let e = error("local all all trust\nlocal all all peer map=os");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("needs auth.ident_file"), "{e}");
    let files = MemoryFiles::default()
        .with(HBA, "local all all peer map=os")
        .with(IDENT, "other root postgres");
    let e = load(files, true).unwrap_err();
    assert_eq!(
        e.message,
        format!("ident map \"os\" is not defined in \"{IDENT}\"")
    );
    let files = MemoryFiles::default()
        .with(HBA, "local all all trust")
        .with(IDENT, "m a");
    let e = load(files, true).unwrap_err();
    assert_eq!((e.file.as_path(), e.line), (Path::new(IDENT), 1));
}
