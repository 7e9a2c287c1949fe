use super::*;
use crate::client::txn::statements::ClientStatements;

fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn run(msgs: &[Vec<u8>]) -> (Vec<Result<Outcome, Violation>>, Vec<u8>) {
    let whole: Vec<_> = msgs.iter().map(|m| (&m[..], true)).collect();
    run_parts(&whole)
}

/// Like [`run`], each message with its `whole` flag (false: the first
/// bytes of a larger message, as the relay hands those over).
fn run_parts(msgs: &[(&[u8], bool)]) -> (Vec<Result<Outcome, Violation>>, Vec<u8>) {
    let registry = StatementRegistry::default();
    let mut statements = ClientStatements::default();
    let tracked = |_: &str| false;
    let mut rw = Rewriter {
        registry: &registry,
        manage: true,
        budget: 1 << 30,
        client_budget: 1 << 30,
        tracked: &tracked,
    };
    let mut ledger = crate::backend::Ledger::new(4);
    let mut shared = Shared::new(&mut ledger, 1, &mut statements);
    let mut out = Vec::new();
    let results = msgs
        .iter()
        .map(|&(m, whole)| rw.message(m, whole, &mut shared, &mut out))
        .collect();
    (results, out)
}

#[test]
fn named_statements_are_renamed_and_prepared_once() {
    let parse = msg(b'P', b"s1\0SELECT 1\0\0\0");
    let bind = msg(b'B', b"\0s1\0\0\0\0\0\0\0");
    let (r, out) = run(&[parse.clone(), bind, msg(b'S', b"")]);
    assert!(matches!(r[0], Ok(Outcome::Replaced { .. })));
    assert!(matches!(r[1], Ok(Outcome::Replaced { .. })));
    assert_eq!(r[2], Ok(Outcome::Forward));
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("PGHARBOR_"), "{text}");
    assert!(!text.contains("s1"), "{text}");
    // The same name again in one session: 42P05, answered by the pooler.
    let (r, _) = run(&[parse.clone(), msg(b'S', b""), parse]);
    assert_eq!(r[2], Ok(Outcome::Swallowed));
}

#[test]
fn malformed_messages_go_to_the_server_as_they_are() {
    // PostgreSQL answers these with an ERROR (in pqformat's words, which
    // the views' own tests check) and the session goes on; the pooler
    // forwards them untouched and expects that reply.
    let cases = [
        msg(b'P', b"no terminator"),
        msg(b'P', b"s1\0unterminated query"),
        msg(b'P', b"s1\0SELECT 1\0"),
        msg(b'P', b"s1\0SELECT 1\0\0\0\0"),
        msg(b'B', b"portal only\0"),
        msg(b'B', b""),
        msg(b'D', b""),
        msg(b'D', b"Sname without nul"),
        msg(b'D', b"Xs1\0"),
        msg(b'C', b""),
        msg(b'C', b"S"),
        msg(b'C', b"Xs1\0"),
    ];
    for m in &cases {
        let (r, out) = run(std::slice::from_ref(m));
        assert_eq!(r[0], Ok(Outcome::Forward), "{}", m.escape_ascii());
        assert!(out.is_empty(), "{}: nothing added", m.escape_ascii());
    }
    for m in [vec![b'P', 0, 0], vec![]] {
        let (r, _) = run(std::slice::from_ref(&m));
        assert!(r[0].is_err(), "{m:?} has no header");
    }
}

#[test]
fn portals_are_described_and_closed_by_the_server() {
    let (r, out) = run(&[
        msg(b'D', b"P\0"),
        msg(b'D', b"Pc1\0"),
        msg(b'C', b"Pc1\0"),
        msg(b'C', b"S\0"),
        msg(b'D', b"S\0"),
    ]);
    assert!(r.iter().all(|r| *r == Ok(Outcome::Forward)), "{r:?}");
    assert!(out.is_empty());
}

/// The head of a message of `total` bytes that declares its whole length.
fn head(tag: u8, total: usize, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&((total - 1) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

#[test]
fn oversized_messages_are_read_by_their_names() {
    let total = 2 << 20;
    let mut bind_body = b"\0s1\0".to_vec();
    bind_body.resize(PREFIX_CAP, 7);
    let bind = head(b'B', total, &bind_body);
    let parse = msg(b'P', b"s1\0SELECT $1\0\0\0");
    let (r, out) = run_parts(&[(&parse, true), (&bind, false)]);
    assert!(matches!(r[0], Ok(Outcome::Replaced { .. })), "{:?}", r[0]);
    assert_eq!(
        r[1],
        Ok(Outcome::Replaced {
            consumed: bind.len()
        })
    );
    // The new Bind: its declared length grows by the longer name, and the
    // bytes after the names follow unchanged.
    assert_eq!(out[0], fe::PARSE);
    let new = &out[1 + u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize..];
    assert_eq!(new[0], fe::BIND);
    let renamed = b"\0PGHARBOR_";
    assert_eq!(&new[5..5 + renamed.len()], renamed);
    let grown = u32::from_be_bytes([new[1], new[2], new[3], new[4]]) as usize;
    let name_len = new[6..].iter().position(|&b| b == 0).unwrap_or(0);
    assert_eq!(grown, total - 1 + name_len - 2);
    assert!(new.ends_with(&[7; 64]));

    // An oversized named Parse passes as it is (the client is pinned).
    let mut parse_body = b"big\0SELECT ".to_vec();
    parse_body.resize(PREFIX_CAP, b'1');
    let parse = head(b'P', total, &parse_body);
    let (r, out) = run_parts(&[(&parse, false)]);
    assert_eq!(r[0], Ok(Outcome::Forward));
    assert!(out.is_empty());

    // Names that do not end within the prefix are refused.
    let long = head(b'P', total, &vec![b'n'; PREFIX_CAP]);
    let (r, _) = run_parts(&[(&long, false)]);
    let e = r[0].clone().expect_err("accepted a Parse name over 64 KiB");
    assert!(e.0.starts_with("Parse message with names over"), "{e}");
    let mut body = b"portal\0".to_vec();
    body.resize(PREFIX_CAP, b'n');
    let long = head(b'B', total, &body);
    let (r, _) = run_parts(&[(&long, false)]);
    let e = r[0].clone().expect_err("accepted a Bind name over 64 KiB");
    assert!(e.0.starts_with("Bind message with names over"), "{e}");
}

#[test]
fn random_messages_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..5000 {
        let tag = b"PBDCQSEHFdcf"[(next() % 12) as usize];
        let len = (next() % 40) as usize;
        let body: Vec<u8> = (0..len)
            .map(|_| match next() % 4 {
                0 => 0,
                1 => b'S',
                _ => (next() % 256) as u8,
            })
            .collect();
        let _ = run(&[msg(tag, &body), msg(b'S', b"")]);
    }
}

#[test]
fn server_errors_get_the_clients_statement_name_back() {
    let body = b"SERROR\0VERROR\0C08P01\0Mbind message supplies 1 parameters, but prepared statement \"PGHARBOR_6\" requires 0\0Fpostgres.c\0\0";
    let out = error_with_client_name(body, 6, b"s6").expect("renamed");
    assert_eq!(out[0], b'E');
    assert_eq!(
        u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize,
        out.len() - 1
    );
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("prepared statement \"s6\" requires 0"),
        "{text}"
    );
    assert!(!text.contains("PGHARBOR"), "{text}");
    assert!(text.contains("Fpostgres.c"), "{text}");
    // Another statement's name, or none, is left alone.
    assert_eq!(error_with_client_name(body, 7, b"s7"), None);
    assert_eq!(error_with_client_name(b"SERROR\0Mx\0\0", 6, b"s6"), None);
}
