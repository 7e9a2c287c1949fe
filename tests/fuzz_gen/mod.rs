//! Structure-aware random inputs for the fuzz targets: mostly well-formed
//! protocol bytes with a few mutations, since uniform noise almost never
//! gets past the first length check or NUL.

use pgharbor::protocol::tags::{be, fe};
use pgharbor::protocol::{
    CANCEL_REQUEST_CODE, GSSENC_REQUEST_CODE, PROTOCOL_3_0, SSL_REQUEST_CODE,
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

/// A random input for `target` (a name from `pgharbor::fuzzing::TARGETS`).
pub fn input(target: &str, rng: &mut StdRng) -> Vec<u8> {
    match target {
        "proxy" => proxy(rng),
        "scan" => scan(rng),
        "startup" => startup(rng),
        "views" => {
            let which = rng.gen_range(0..9);
            view(which, rng)
        }
        // Every byte is a meaningful step of the model: uniform bytes are
        // the right distribution; lengths up to a few hundred steps.
        "replies" | "rewrite" => {
            let n = rng.gen_range(0..400);
            (0..n).map(|_| rng.gen()).collect()
        }
        other => panic!("no generator for target {other}: add one in tests/fuzz_gen"),
    }
}

const WORDS: &[&[u8]] = &[
    b"",
    b"s1",
    b"p1",
    b"user",
    b"database",
    b"alice",
    b"app",
    b"_pq_.x",
    b"options",
    b"SELECT 1",
    b"S",
    b"P",
    b"I",
    b"T",
    b"E",
    b"FATAL",
    b"PANIC",
    b"ERROR",
    b"\xff\xfe",
    b"application_name",
    b"caf\xc3\xa9",
    b"replication",
];

fn word(rng: &mut StdRng) -> Vec<u8> {
    if rng.gen_bool(0.8) {
        WORDS.choose(rng).unwrap().to_vec()
    } else {
        let n = rng.gen_range(0..12);
        (0..n).map(|_| rng.gen_range(1..=255)).collect()
    }
}

fn cstr(out: &mut Vec<u8>, rng: &mut StdRng) {
    out.extend(word(rng));
    out.push(0);
}

/// 0 to 3 small damages: flip, cut, insert, drop a byte, add a NUL.
fn mutate(mut b: Vec<u8>, rng: &mut StdRng) -> Vec<u8> {
    for _ in 0..rng.gen_range(0..=3) {
        let at = rng.gen_range(0..=b.len());
        match rng.gen_range(0..6) {
            0 if at < b.len() => b[at] ^= 1 << rng.gen_range(0..8),
            1 => b.truncate(at),
            2 => b.insert(at, rng.gen()),
            3 if at < b.len() => {
                b.remove(at);
            }
            4 => b.insert(at, 0),
            _ => {}
        }
    }
    b
}

/// Length words PostgreSQL draws a line at, and their neighbours.
const EDGE_LENGTHS: &[u32] = &[
    0,
    1,
    3,
    4,
    5,
    7,
    8,
    9,
    10_000,
    10_004,
    10_005,
    0x3fff_fffe,
    0x3fff_ffff,
    0x4000_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

fn scan(rng: &mut StdRng) -> Vec<u8> {
    let mut stream = Vec::new();
    for _ in 0..rng.gen_range(0..8) {
        let tag = *[
            fe::QUERY,
            fe::PARSE,
            fe::BIND,
            fe::SYNC,
            be::DATA_ROW,
            be::READY_FOR_QUERY,
        ]
        .choose(rng)
        .unwrap();
        let tag = if rng.gen_bool(0.1) { rng.gen() } else { tag };
        let body_len = if rng.gen_bool(0.1) {
            rng.gen_range(0..2000)
        } else {
            rng.gen_range(0..40)
        };
        let len = if rng.gen_bool(0.05) {
            *EDGE_LENGTHS.choose(rng).unwrap()
        } else {
            body_len as u32 + 4
        };
        stream.push(tag);
        stream.extend(len.to_be_bytes());
        stream.extend((0..body_len).map(|_| rng.gen::<u8>()));
    }
    let stream = if rng.gen_bool(0.3) {
        mutate(stream, rng)
    } else {
        stream
    };
    let ncuts: u8 = rng.gen_range(0..8);
    let mut out = vec![rng.gen(), rng.gen(), ncuts];
    for _ in 0..ncuts {
        out.extend(rng.gen::<u16>().to_be_bytes());
    }
    out.extend(stream);
    out
}

fn startup(rng: &mut StdRng) -> Vec<u8> {
    let code = match rng.gen_range(0..8) {
        0 => SSL_REQUEST_CODE,
        1 => GSSENC_REQUEST_CODE,
        2 => CANCEL_REQUEST_CODE,
        3 => 2 << 16,
        4 => PROTOCOL_3_0 | rng.gen_range(0..4),
        5 => rng.gen(),
        _ => PROTOCOL_3_0,
    };
    let mut body = code.to_be_bytes().to_vec();
    if code == CANCEL_REQUEST_CODE {
        body.extend((0..8).map(|_| rng.gen::<u8>()));
    } else if code >> 16 == 3 || rng.gen_bool(0.2) {
        for _ in 0..rng.gen_range(0..5) {
            cstr(&mut body, rng);
            cstr(&mut body, rng);
        }
        body.push(0);
    }
    if rng.gen_bool(0.05) {
        body.resize(rng.gen_range(9_990..10_010), b'x');
    }
    let body = if rng.gen_bool(0.3) {
        mutate(body, rng)
    } else {
        body
    };
    let len = if rng.gen_bool(0.1) {
        *EDGE_LENGTHS.choose(rng).unwrap()
    } else {
        body.len() as u32 + 4
    };
    let mut out = vec![rng.gen()];
    out.extend(len.to_be_bytes());
    out.extend(body);
    out
}

/// Selector byte `which` and a body built for that view.
pub fn view(which: u8, rng: &mut StdRng) -> Vec<u8> {
    let mut b = vec![which];
    let mut target = || {
        if rng.gen_bool(0.9) {
            *b"SP".choose(rng).unwrap()
        } else {
            rng.gen()
        }
    };
    match which {
        0 => {
            cstr(&mut b, rng);
            cstr(&mut b, rng);
            let n: u16 = rng.gen_range(0..4);
            b.extend(n.to_be_bytes());
            b.extend((0..n * 4).map(|_| rng.gen::<u8>()));
        }
        1 => {
            cstr(&mut b, rng);
            cstr(&mut b, rng);
            b.extend((0..rng.gen_range(0..20)).map(|_| rng.gen::<u8>()));
        }
        2 | 3 => {
            let t = target();
            b.push(t);
            cstr(&mut b, rng);
        }
        4 => {
            cstr(&mut b, rng);
            b.extend(rng.gen::<i32>().to_be_bytes());
        }
        5 => {
            cstr(&mut b, rng);
            cstr(&mut b, rng);
        }
        6 => b.push(*b"ITEx".choose(rng).unwrap()),
        7 => {
            for _ in 0..rng.gen_range(0..6) {
                b.push(*b"SVCMDFLRx".choose(rng).unwrap());
                cstr(&mut b, rng);
            }
            b.push(0);
        }
        _ => {
            b.push(rng.gen_range(0..3));
            let n: u16 = rng.gen_range(0..4);
            b.extend(n.to_be_bytes());
            for _ in 0..n {
                b.extend((rng.gen_range(0..3) as u16).to_be_bytes());
            }
        }
    }
    if rng.gen_bool(0.4) {
        let mut body = mutate(b.split_off(1), rng);
        b.append(&mut body);
    }
    b
}

/// A PROXY header, v1 or v2, of a random command, family and length,
/// followed by what a client sends next, then mutated.
fn proxy(rng: &mut StdRng) -> Vec<u8> {
    let mut b = if rng.gen() {
        let line: &[u8] = [
            &b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 6432\r\n"[..],
            b"PROXY TCP6 2001:db8::1 ::1 0 65535\r\n",
            b"PROXY UNKNOWN\r\n",
            b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ::1 65535 65535\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
        ]
        .choose(rng)
        .copied()
        .unwrap_or_default();
        line.to_vec()
    } else {
        let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        h.push(
            *[0x20u8, 0x21, 0x21, 0x22, 0x11]
                .choose(rng)
                .unwrap_or(&0x21),
        );
        h.push(
            *[0x00u8, 0x11, 0x21, 0x31, 0x12, 0x41]
                .choose(rng)
                .unwrap_or(&0x11),
        );
        let len: u16 = *[0u16, 11, 12, 36, 215, 216, 300, 2048, 2049]
            .choose(rng)
            .unwrap_or(&12);
        h.extend_from_slice(&len.to_be_bytes());
        let body = usize::from(len).min(rng.gen_range(0..=2100));
        h.extend((0..body).map(|_| rng.gen::<u8>()));
        h
    };
    // What follows: an SSLRequest, a ClientHello record, or noise.
    match rng.gen_range(0..3) {
        0 => b.extend_from_slice(&[0, 0, 0, 8, 4, 210, 22, 47]),
        1 => b.extend_from_slice(&[0x16, 3, 1, 0, 5]),
        _ => b.extend((0..rng.gen_range(0..20)).map(|_| rng.gen::<u8>())),
    }
    mutate(b, rng)
}
