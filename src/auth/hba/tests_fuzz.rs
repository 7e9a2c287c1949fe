//! Random, often nearly valid, pg_hba.conf, pg_ident.conf and `@` files
//! never panic the parser or the matcher (the style of `src/fuzzing/`, as
//! a plain test with a deterministic generator).

use std::path::Path;

use super::tests::{load, HBA, IDENT};
use super::*;

/// xorshift64: deterministic noise without a new crate.
fn noise(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn pick<'a>(state: &mut u64, from: &[&'a str]) -> &'a str {
    from[(noise(state) % from.len() as u64) as usize]
}

/// A line that is often valid: a field from each column, sometimes with a
/// random byte or punctuation thrown in; or plain noise.
fn line(state: &mut u64) -> String {
    let mut out = match noise(state) % 4 {
        0 => (0..noise(state) % 30)
            .map(|_| noise(state) as u8 as char)
            .collect(),
        _ => {
            let conn = pick(
                state,
                &["local", "host", "hostssl", "hostnossl", "hostgssenc"],
            );
            let db = pick(
                state,
                &[
                    "all",
                    "sameuser",
                    "a",
                    "\"a\"",
                    "/^a",
                    "@a",
                    "replication",
                    "a,b",
                ],
            );
            let user = pick(state, &["all", "a", "/a", "@b", "+g", "\"all\""]);
            let addr = match conn {
                "local" => "",
                _ => pick(
                    state,
                    &[
                        "all",
                        "samehost",
                        "samenet",
                        "10.0.0.0/8",
                        "::1/128",
                        "10.0.0.0 255.0.0.0",
                    ],
                ),
            };
            let method = pick(
                state,
                &[
                    "trust",
                    "reject",
                    "md5",
                    "scram-sha-256",
                    "peer map=m",
                    "cert",
                    "ident",
                ],
            );
            format!("{conn} {db} {user} {addr} {method}")
        }
    };
    if noise(state) % 4 == 0 {
        let at = (noise(state) as usize) % (out.len() + 1);
        let extra = pick(
            state,
            &[" ", ",", "\"", "#", "\\\n", "@", "/", "=", "\u{e9}", "\r"],
        );
        if out.is_char_boundary(at) {
            out.insert_str(at, extra);
        }
    }
    out
}

#[test]
fn random_lines_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let text = |state: &mut u64| {
        let lines: Vec<String> = (0..1 + noise(state) % 4).map(|_| line(state)).collect();
        lines.join("\n")
    };
    let ifaces: Vec<Interface> = vec![Interface::new("10.0.0.1".parse().unwrap(), None)];
    let mut loaded = 0;
    for _ in 0..1000 {
        let ident = match noise(&mut state) % 3 {
            0 => text(&mut state),
            _ => "m /^x(.*)$ \\1\nm x y\n".to_owned(),
        };
        let files = MemoryFiles::default()
            .with(HBA, text(&mut state))
            .with(IDENT, ident)
            .with("/etc/pgharbor/a", text(&mut state))
            .with("/etc/pgharbor/b", "x y\n@a");
        let Ok(h) = load(files.clone(), noise(&mut state) % 4 != 0) else {
            let _ = IdentMaps::load_from(&files, Path::new(IDENT));
            continue;
        };
        loaded += 1;
        let h = h.with_interfaces(std::sync::Arc::new(ifaces.clone()));
        for transport in [
            Transport::Local { tls: false },
            Transport::Tcp {
                addr: "10.0.0.2".parse().unwrap(),
                tls: true,
            },
            Transport::Tcp {
                addr: "::1".parse().unwrap(),
                tls: false,
            },
        ] {
            let facts = ConnFacts {
                transport,
                database: "a",
                user: "a",
            };
            let _ = h.decide(&facts);
            let _ = h.usermap_allows(Some("m"), "xa", "a");
        }
    }
    assert!(
        loaded > 20,
        "the generator should make valid files too: {loaded}"
    );
}
