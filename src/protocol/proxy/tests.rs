use super::*;

/// A v2 header: signature, the two fixed bytes, the length word, `payload`.
fn v2(ver_cmd: u8, fam: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(ver_cmd);
    out.push(fam);
    let len = u16::try_from(payload.len()).unwrap();
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// An IPv4 address block: 192.0.2.7:51000 -> 10.0.0.1:6432.
fn inet_block() -> Vec<u8> {
    let mut b = vec![192, 0, 2, 7, 10, 0, 0, 1];
    b.extend_from_slice(&51000u16.to_be_bytes());
    b.extend_from_slice(&6432u16.to_be_bytes());
    b
}

fn complete(bytes: &[u8]) -> Header {
    match scan(bytes) {
        Scan::Complete(h) => h,
        other => panic!("{:?} => {other:?}", String::from_utf8_lossy(bytes)),
    }
}

fn invalid(bytes: &[u8]) -> Malformed {
    match scan(bytes) {
        Scan::Invalid(e) => e,
        other => panic!("{:?} => {other:?}", String::from_utf8_lossy(bytes)),
    }
}

fn tcp(source: &str, destination: &str) -> Origin {
    Origin::Tcp {
        source: source.parse().unwrap(),
        destination: destination.parse().unwrap(),
    }
}

/// Every strict prefix of a header is a prefix, never a verdict: a reader
/// may wait for more without having read past it.
fn assert_prefixes_partial(header: &[u8]) {
    for n in 0..header.len() {
        assert_eq!(scan(&header[..n]), Scan::Partial, "prefix of {n} bytes");
    }
}

#[test]
fn v1_tcp4_stops_at_its_crlf() {
    let line = b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 6432\r\n";
    let mut bytes = line.to_vec();
    // What follows (an SSLRequest) is not the header's.
    bytes.extend_from_slice(&[0, 0, 0, 8, 4, 210, 22, 47]);
    let h = complete(&bytes);
    assert_eq!(h.version, Version::V1);
    assert_eq!(h.len, line.len());
    assert_eq!(h.origin, tcp("192.0.2.7:51000", "10.0.0.1:6432"));
    assert_prefixes_partial(line);
}

#[test]
fn v1_tcp6_and_unknown() {
    let h = complete(b"PROXY TCP6 2001:db8::1 ::1 0 65535\r\n");
    assert_eq!(h.origin, tcp("[2001:db8::1]:0", "[::1]:65535"));
    assert_eq!(complete(b"PROXY UNKNOWN\r\n").origin, Origin::Unknown);
    // Whatever follows UNKNOWN is ignored, as the spec requires.
    let h = complete(b"PROXY UNKNOWN ffff::1 ffff::2 65535 65535\r\n");
    assert_eq!((h.origin, h.len), (Origin::Unknown, 43));
}

#[test]
fn v1_longest_line_is_accepted_and_one_more_byte_is_not() {
    let v6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let line = format!("PROXY UNKNOWN {v6} {v6} 65535 65535\r\n");
    assert_eq!(line.len(), V1_MAX_LEN);
    assert_eq!(complete(line.as_bytes()).len, V1_MAX_LEN);
    let longer = format!("PROXY UNKNOWN {v6} {v6} 65535 655350\r\n");
    assert_eq!(invalid(longer.as_bytes()), Malformed::V1TooLong);
}

#[test]
fn v1_without_crlf() {
    let mut endless = b"PROXY TCP4 ".to_vec();
    endless.resize(V1_MAX_LEN, b'1');
    assert_eq!(invalid(&endless), Malformed::V1TooLong);
    // A lone LF or CR does not end the line.
    assert_eq!(
        invalid(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"),
        Malformed::V1Byte(b'\n')
    );
    assert_eq!(
        invalid(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX"),
        Malformed::V1Byte(b'X')
    );
    // A CR at the end of what arrived may yet be followed by LF.
    assert_eq!(scan(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r"), Scan::Partial);
    // Binary in the line is refused at once, not after 107 bytes.
    assert_eq!(invalid(b"PROXY \0"), Malformed::V1Byte(0));
}

#[test]
fn v1_malformed_lines() {
    let cases: &[&[u8]] = &[
        b"PROXY \r\n",
        b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY UNKNOWNX\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
        b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 256.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
        b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
        b"PROXY TCP6 ::1 ::g 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
    ];
    for case in cases {
        assert!(
            matches!(invalid(case), Malformed::V1Line(_)),
            "{:?}",
            String::from_utf8_lossy(case)
        );
    }
    // Port 0 is a port.
    complete(b"PROXY TCP4 1.2.3.4 5.6.7.8 0 0\r\n");
}

#[test]
fn bad_signatures_are_no_header() {
    let startup = [0u8, 0, 0, 8, 4, 210, 22, 47]; // SSLRequest
    let hello = [0x16u8, 3, 1, 0, 200]; // a TLS ClientHello record
    let cases: &[&[u8]] = &[
        &startup,
        &hello,
        b"GET / HTTP/1.1\r\n",
        b"PROXZ TCP4",
        b"proxy TCP4",
        b"PROXY", // a prefix so far: see below
        b"\r\n\r\n\0\r\nQUIX\n",
        b"\r\n\r\n\x01",
    ];
    for case in cases {
        if *case == b"PROXY" {
            assert_eq!(scan(case), Scan::Partial);
            continue;
        }
        assert_eq!(invalid(case), Malformed::NoHeader, "{case:?}");
    }
}

#[test]
fn v2_proxy_tcp4_with_tlvs_skipped() {
    let mut payload = inet_block();
    // PP2_TYPE_ALPN "postgresql", PP2_TYPE_NOOP of 3 bytes.
    payload.extend_from_slice(&[0x01, 0, 10]);
    payload.extend_from_slice(b"postgresql");
    payload.extend_from_slice(&[0x04, 0, 3, 0, 0, 0]);
    let header = v2(0x21, 0x11, &payload);
    let mut bytes = header.clone();
    bytes.extend_from_slice(&[0x16, 3, 1]); // a ClientHello follows
    let h = complete(&bytes);
    assert_eq!(h.version, Version::V2);
    assert_eq!(h.len, header.len());
    assert_eq!(h.origin, tcp("192.0.2.7:51000", "10.0.0.1:6432"));
    assert_prefixes_partial(&header);
}

#[test]
fn v2_proxy_tcp6() {
    let mut payload = Vec::new();
    payload.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
    payload.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    payload.extend_from_slice(&[0xc7, 0x38, 0x19, 0x20]);
    let h = complete(&v2(0x21, 0x21, &payload));
    assert_eq!(h.origin, tcp("[2001:db8::7]:51000", "[::1]:6432"));
}

#[test]
fn v2_local_keeps_the_socket_address_whatever_it_carries() {
    assert_eq!(complete(&v2(0x20, 0x00, &[])).origin, Origin::Local);
    // LOCAL with an address block, or too short a one: ignored, skipped.
    let h = complete(&v2(0x20, 0x11, &inet_block()));
    assert_eq!((h.origin, h.len), (Origin::Local, 28));
    assert_eq!(complete(&v2(0x20, 0x21, &[1, 2])).origin, Origin::Local);
}

#[test]
fn v2_families_without_an_ip_address_are_unknown() {
    // UNSPEC, and the UNIX stream family (a client on the proxy's socket).
    assert_eq!(complete(&v2(0x21, 0x00, &[])).origin, Origin::Unknown);
    assert_eq!(
        complete(&v2(0x21, 0x31, &[0; UNIX_BLOCK])).origin,
        Origin::Unknown
    );
    assert_eq!(complete(&v2(0x21, 0x10, &[])).origin, Origin::Unknown);
}

#[test]
fn v2_malformed_headers() {
    assert_eq!(
        invalid(&v2(0x11, 0x11, &inet_block())),
        Malformed::V2Version(1)
    );
    assert_eq!(
        invalid(&v2(0x31, 0x11, &inet_block())),
        Malformed::V2Version(3)
    );
    assert_eq!(
        invalid(&v2(0x22, 0x11, &inet_block())),
        Malformed::V2Command(2)
    );
    assert_eq!(
        invalid(&v2(0x2f, 0x11, &inet_block())),
        Malformed::V2Command(15)
    );
    // UDP, and families and transports the spec does not define.
    for fam in [0x12, 0x22, 0x32, 0x41, 0x13, 0xf1] {
        assert_eq!(
            invalid(&v2(0x21, fam, &inet_block())),
            Malformed::V2Family(fam)
        );
    }
    // Family/length mismatches.
    assert_eq!(
        invalid(&v2(0x21, 0x11, &inet_block()[..11])),
        Malformed::V2Short { len: 11, need: 12 }
    );
    assert_eq!(
        invalid(&v2(0x21, 0x21, &inet_block())),
        Malformed::V2Short { len: 12, need: 36 }
    );
    assert_eq!(
        invalid(&v2(0x21, 0x31, &[0; 215])),
        Malformed::V2Short {
            len: 215,
            need: 216
        }
    );
    // Oversize, refused from the length word alone.
    let mut big = v2(0x21, 0x11, &[]);
    big[14..16].copy_from_slice(&(V2_MAX_PAYLOAD as u16 + 1).to_be_bytes());
    assert_eq!(invalid(&big), Malformed::V2TooLong(V2_MAX_PAYLOAD + 1));
    let mut max = v2(0x21, 0x11, &[0; V2_MAX_PAYLOAD]);
    assert_eq!(complete(&max).len, MAX_HEADER_LEN);
    max.pop();
    assert_eq!(scan(&max), Scan::Partial, "truncated");
}

#[test]
fn v2_verdicts_come_as_soon_as_the_byte_arrives() {
    let header = v2(0x21, 0x12, &inet_block());
    assert_eq!(scan(&header[..13]), Scan::Partial);
    assert_eq!(invalid(&header[..14]), Malformed::V2Family(0x12));
    let header = v2(0x41, 0x11, &inet_block());
    assert_eq!(invalid(&header[..13]), Malformed::V2Version(4));
}

#[test]
fn headers_are_recognised_from_four_bytes() {
    assert!(starts_like_header(b"PROX"));
    assert!(starts_like_header(b"PROXY TCP4 1.2.3.4"));
    assert!(starts_like_header(b"\r\n\r\n"));
    assert!(starts_like_header(&v2(0x21, 0x11, &inet_block())));
    assert!(!starts_like_header(b"PRO"));
    assert!(!starts_like_header(b"PROXZ"));
    assert!(!starts_like_header(&[0, 0, 0, 8, 4, 210, 22, 47]));
    assert!(!starts_like_header(b""));
}
