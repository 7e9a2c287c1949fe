use super::*;
use crate::protocol::tags::fe;
use crate::protocol::Violation;
use bytes::BytesMut;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;

/// The body of the one message `build` writes, checking its type byte.
fn body(tag: u8, build: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut buf = BytesMut::new();
    build(&mut buf);
    assert_eq!(buf[0], tag);
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    assert_eq!(len + 1, buf.len());
    buf[5..].to_vec()
}

fn err<T: std::fmt::Debug>(r: Result<T, Violation>) -> String {
    r.expect_err("a malformed body was accepted").0
}

#[test]
fn parse_reads_what_postgres_protocol_writes() {
    let b = body(fe::PARSE, |buf| {
        frontend::parse("s1", "SELECT $1::int, $2", [23, 0], buf).unwrap()
    });
    let p = Parse::parse(&b).unwrap();
    assert_eq!(p.name, b"s1");
    assert_eq!(p.query, b"SELECT $1::int, $2");
    assert_eq!(p.definition, &b[3..]);
    assert_eq!(p.param_types, 2);
    assert_eq!((p.param_type(0), p.param_type(1)), (Some(23), Some(0)));
    assert_eq!(p.param_type(2), None);

    let b = body(fe::PARSE, |buf| frontend::parse("", "", [], buf).unwrap());
    let p = Parse::parse(&b).unwrap();
    assert_eq!((p.name, p.query, p.param_types), (&b""[..], &b""[..], 0));
    assert_eq!(p.definition, b"\0\0\0");
}

#[test]
fn parse_refuses_what_postgres_refuses() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "invalid string in message"),
        (b"s1", "invalid string in message"),
        (b"s1\0SELECT 1", "invalid string in message"),
        (b"s1\0SELECT 1\0", "insufficient data left in message"),
        (b"s1\0SELECT 1\0\0", "insufficient data left in message"),
        (b"s1\0SELECT 1\0\0\x01", "insufficient data left in message"),
        (
            b"s1\0SELECT 1\0\0\x01\0\0\0",
            "insufficient data left in message",
        ),
        (
            b"s1\0SELECT 1\0\xff\xff\0\0\0\x17",
            "insufficient data left in message",
        ),
        (b"s1\0SELECT 1\0\0\0\0", "invalid message format"),
        (
            b"s1\0SELECT 1\0\0\x01\0\0\0\x17\0",
            "invalid message format",
        ),
    ];
    for (b, want) in cases {
        assert_eq!(err(Parse::parse(b)), *want, "{}", b.escape_ascii());
    }
}

#[test]
fn parse_name_is_found_in_any_prefix_holding_its_nul() {
    let b = body(fe::PARSE, |buf| {
        frontend::parse("big", "SELECT 1", [], buf).unwrap()
    });
    for n in 0..=b.len() {
        let got = Parse::name_in_prefix(&b[..n]).unwrap();
        assert_eq!(got, (n > 3).then_some(&b"big"[..]), "prefix of {n}");
    }
    assert_eq!(Parse::name_in_prefix(b"\0").unwrap(), Some(&b""[..]));
}

fn bind_body(portal: &str, statement: &str) -> Vec<u8> {
    body(fe::BIND, |buf| {
        frontend::bind(
            portal,
            statement,
            [1],
            [&b"42"[..]],
            |v, buf| {
                buf.extend_from_slice(v);
                Ok(IsNull::No)
            },
            [1],
            buf,
        )
        .map_err(|_| ())
        .unwrap()
    })
}

#[test]
fn bind_head_reads_names_from_a_body_or_a_prefix() {
    let b = bind_body("p1", "s1");
    let h = BindHead::parse(&b).unwrap().unwrap();
    assert_eq!(
        (h.portal, h.statement, h.rest_at),
        (&b"p1"[..], &b"s1"[..], 6)
    );
    assert_eq!(
        &b[h.rest_at..h.rest_at + 4],
        [0, 1, 0, 1],
        "format count, then a format"
    );
    for n in 0..=b.len() {
        let got = BindHead::parse(&b[..n]).unwrap();
        assert_eq!(got, (n >= 6).then_some(h), "prefix of {n}");
    }
    let b = bind_body("", "");
    let h = BindHead::parse(&b).unwrap().unwrap();
    assert_eq!((h.portal, h.statement, h.rest_at), (&b""[..], &b""[..], 2));
    for incomplete in [&b""[..], b"p", b"p\0", b"p\0s"] {
        assert_eq!(BindHead::parse(incomplete).unwrap(), None);
    }
}

#[test]
fn describe_and_close_read_both_targets() {
    for (variant, target) in [(b'S', Target::Statement), (b'P', Target::Portal)] {
        let b = body(fe::DESCRIBE, |buf| {
            frontend::describe(variant, "x1", buf).unwrap()
        });
        assert_eq!(
            Describe::parse(&b).unwrap(),
            Describe {
                target,
                name: b"x1"
            }
        );
        let b = body(fe::CLOSE, |buf| frontend::close(variant, "", buf).unwrap());
        assert_eq!(Close::parse(&b).unwrap(), Close { target, name: b"" });
        assert_eq!(Target::from_byte(target.as_byte()), Some(target));
    }
    assert_eq!(Target::from_byte(b's'), None);
}

#[test]
fn describe_and_close_refuse_as_postgres_does() {
    // PostgreSQL reads the string and checks the end before the subtype,
    // so a body broken twice reports the string.
    let cases: &[(&[u8], &str)] = &[
        (b"", "no data left in message"),
        (b"S", "invalid string in message"),
        (b"Ss1", "invalid string in message"),
        (b"Xs1", "invalid string in message"),
        (b"Ss1\0\0", "invalid message format"),
        (b"Ss1\0x", "invalid message format"),
        (b"Xs1\0", "invalid %s message subtype 88"),
        (b"\0\0", "invalid %s message subtype 0"),
        (b"\xff\0", "invalid %s message subtype 255"),
    ];
    for (b, want) in cases {
        let msg = |what| want.replace("%s", what);
        assert_eq!(
            err(Describe::parse(b)),
            msg("DESCRIBE"),
            "{}",
            b.escape_ascii()
        );
        assert_eq!(err(Close::parse(b)), msg("CLOSE"), "{}", b.escape_ascii());
    }
}

#[test]
fn execute_reads_portal_and_limit() {
    for (portal, max_rows) in [("", 0), ("c1", 100), ("c2", -1)] {
        let b = body(fe::EXECUTE, |buf| {
            frontend::execute(portal, max_rows, buf).unwrap()
        });
        let e = Execute::parse(&b).unwrap();
        assert_eq!((e.portal, e.max_rows), (portal.as_bytes(), max_rows));
    }
    let cases: &[(&[u8], &str)] = &[
        (b"", "invalid string in message"),
        (b"c1", "invalid string in message"),
        (b"c1\0", "insufficient data left in message"),
        (b"c1\0\0\0\0", "insufficient data left in message"),
        (b"c1\0\0\0\0\0\0", "invalid message format"),
    ];
    for (b, want) in cases {
        assert_eq!(err(Execute::parse(b)), *want, "{}", b.escape_ascii());
    }
}

#[test]
fn parameter_status_reads_server_bytes() {
    let p = ParameterStatus::parse(b"server_version\x0016.4 (Debian 16.4-1)\0").unwrap();
    assert_eq!(
        (p.name, p.value),
        (&b"server_version"[..], &b"16.4 (Debian 16.4-1)"[..])
    );
    let p = ParameterStatus::parse(b"application_name\0\0").unwrap();
    assert_eq!((p.name, p.value), (&b"application_name"[..], &b""[..]));
    for bad in [
        &b""[..],
        b"TimeZone",
        b"TimeZone\0UTC",
        b"TimeZone\0UTC\0\0",
        b"a\0b\0c",
    ] {
        let e = err(ParameterStatus::parse(bad));
        assert!(
            e.starts_with("malformed ParameterStatus from the server: "),
            "{e}"
        );
    }
}

#[test]
fn ready_for_query_is_one_known_byte() {
    for (b, status) in [
        (b'I', TxStatus::Idle),
        (b'T', TxStatus::InTransaction),
        (b'E', TxStatus::Failed),
    ] {
        assert_eq!(ReadyForQuery::parse(&[b]).unwrap().status, status);
        assert_eq!(TxStatus::from_byte(b).map(TxStatus::as_byte), Some(b));
    }
    assert_eq!(TxStatus::from_byte(b'x'), None);
    assert!(err(ReadyForQuery::parse(b"")).contains("0 bytes, expected 1"));
    assert!(err(ReadyForQuery::parse(b"II")).contains("2 bytes, expected 1"));
    assert!(err(ReadyForQuery::parse(b"x")).contains("invalid transaction status 120"));
}

#[test]
fn backend_key_data_is_two_words_exactly() {
    let k = BackendKeyData::parse(&[0, 0, 0x30, 0x39, 0xff, 0xff, 0xff, 0xfe]).unwrap();
    assert_eq!((k.pid, k.secret), (12345, -2));
    // What postgres-protocol reads from the same message.
    let mut buf = BytesMut::from(&b"K\0\0\0\x0c\0\0\x30\x39\xff\xff\xff\xfe"[..]);
    let Ok(Some(Message::BackendKeyData(theirs))) = Message::parse(&mut buf) else {
        panic!("postgres-protocol refused BackendKeyData");
    };
    assert_eq!(
        (theirs.process_id(), theirs.secret_key()),
        (k.pid, k.secret)
    );
    let cases: &[(&[u8], &str)] = &[
        (b"", "insufficient data left in message"),
        (b"\0\0\0", "insufficient data left in message"),
        (b"\0\0\0\x01\0\0\0", "insufficient data left in message"),
        (b"\0\0\0\x01\0\0\0\x02\0", "invalid message format"),
    ];
    for (b, want) in cases {
        assert_eq!(
            err(BackendKeyData::parse(b)),
            format!("malformed BackendKeyData from the server: {want}"),
            "{}",
            b.escape_ascii()
        );
    }
}

/// `SELECT 1/0` on PostgreSQL 16.
const DIVISION_BY_ZERO: &[u8] =
    b"SERROR\0VERROR\0C22012\0Mdivision by zero\0Fint.c\0L841\0Rint4div\0\0";
/// `pg_terminate_backend` seen by its victim, with German messages.
const TERMINATED_DE: &[u8] = b"SSCHWERWIEGEND\0VFATAL\0C57P01\0Mbeende Verbindung aufgrund von Anweisung des Administrators\0Fpostgres.c\0L3300\0RProcessInterrupts\0\0";

#[test]
fn fields_read_real_error_responses() {
    let f = Fields::new(DIVISION_BY_ZERO);
    assert_eq!(f.severity(), Some(&b"ERROR"[..]));
    assert_eq!(f.sqlstate(), Some(&b"22012"[..]));
    assert_eq!(f.message(), Some(&b"division by zero"[..]));
    assert_eq!(f.get(b'R'), Some(&b"int4div"[..]));
    assert_eq!(f.get(b'D'), None);
    assert!(!f.is_fatal() && f.is_well_formed());
    assert_eq!(f.iter().count(), 7);

    let f = Fields::new(TERMINATED_DE);
    assert_eq!(f.get(b'S'), Some(&b"SCHWERWIEGEND"[..]));
    assert_eq!(
        f.severity(),
        Some(&b"FATAL"[..]),
        "V wins over a localised S"
    );
    assert!(f.is_fatal());

    // Servers before 9.6 send no V.
    assert!(Fields::new(b"SPANIC\0C XX000\0Mboom\0\0").is_fatal());
    assert!(!Fields::new(b"SNOTICE\0Mhello\0\0").is_fatal());
    assert_eq!(Fields::new(b"CXX000\0\0").severity(), None);
}

#[test]
fn fields_of_a_truncated_body_are_the_complete_ones() {
    let all: Vec<_> = Fields::new(TERMINATED_DE).iter().collect();
    for n in 0..TERMINATED_DE.len() {
        let f = Fields::new(&TERMINATED_DE[..n]);
        let got: Vec<_> = f.iter().collect();
        assert_eq!(got[..], all[..got.len()], "prefix of {n}");
        let complete = TERMINATED_DE[..n].iter().filter(|&&b| b == 0).count();
        assert_eq!(got.len(), complete.min(all.len()), "prefix of {n}");
        assert!(!f.is_well_formed());
    }
    // The fatal severity is known as soon as the V field is complete.
    assert!(Fields::new(&TERMINATED_DE[..22]).is_fatal());
    assert!(!Fields::new(&TERMINATED_DE[..21]).is_fatal());
}

#[test]
fn fields_tolerate_garbage_and_take_the_last_repeat() {
    let f = Fields::new(b"");
    assert_eq!((f.iter().count(), f.is_well_formed()), (0, false));
    let f = Fields::new(b"\0");
    assert_eq!((f.iter().count(), f.is_well_formed()), (0, true));
    let f = Fields::new(b"Mfirst\0Msecond\0\0");
    assert_eq!(f.message(), Some(&b"second"[..]));
    let f = Fields::new(b"Mok\0\0Mafter the end\0");
    assert_eq!((f.message(), f.is_well_formed()), (Some(&b"ok"[..]), false));
    let f = Fields::new(b"Mno nul");
    assert_eq!((f.message(), f.is_well_formed()), (None, false));
    assert!(!Fields::new(b"Mok\0\0\0").is_well_formed());
}

#[test]
fn copy_responses_read_server_bytes() {
    // COPY t(a, b) TO STDOUT; COPY t FROM STDIN (FORMAT binary); START_REPLICATION.
    let text = CopyResponse::parse(&[0, 0, 2, 0, 0, 0, 0]).unwrap();
    assert_eq!(
        text,
        CopyResponse {
            binary: false,
            columns: 2
        }
    );
    let binary = CopyResponse::parse(&[1, 0, 1, 0, 1]).unwrap();
    assert_eq!(
        binary,
        CopyResponse {
            binary: true,
            columns: 1
        }
    );
    let both = CopyResponse::parse(&[0, 0, 0]).unwrap();
    assert_eq!(both.columns, 0);
    let cases: &[(&[u8], &str)] = &[
        (b"", "no data left in message"),
        (&[0], "insufficient data left in message"),
        (&[0, 0], "insufficient data left in message"),
        (&[0, 0, 2, 0, 0], "insufficient data left in message"),
        (&[0, 0, 0, 0], "invalid message format"),
        (&[2, 0, 0], "invalid overall format 2"),
        (&[0, 0, 1, 0, 7], "invalid column format 7"),
        (&[0, 0, 1, 1, 0], "invalid column format 256"),
    ];
    for (b, want) in cases {
        assert_eq!(
            err(CopyResponse::parse(b)),
            format!("malformed CopyResponse from the server: {want}"),
            "{b:?}"
        );
    }
}
