//! Server TLS handshakes per server-CPU-second: OpenSSL (the system's 3.0,
//! through the `openssl` crate, as pgharbor uses it) against rustls 0.23 with
//! its aws-lc-rs and ring providers (pgharbor issue 15).
//!
//! Every handshake is a full one between a fresh server connection and a
//! fresh OpenSSL client connection, over in-memory buffers, in this one
//! thread. Only the server's CPU is counted: `CLOCK_THREAD_CPUTIME_ID` read
//! around every stretch of server-side calls (creating the connection, each
//! flight it reads and answers, dropping it). The client is OpenSSL for
//! every row (libpq's library), so only the server differs.
//!
//! Usage: `cargo run --release [-- --reps 5 --ecdsa-n 2000 --rsa-n 500]`

mod certs;
mod client;
mod clock;
mod handshake;
mod link;
mod server;

use std::process::Command;
use std::sync::Arc;

use certs::{make_cert, CertKind};
use client::openssl_client;
use clock::thread_cpu_ns;
use handshake::{run, Negotiated};
use server::{openssl_server, rustls_server, Library, Server, Version};

/// The ALPN protocol both sides agree on, as PostgreSQL 17 names it.
const ALPN: &[u8] = b"postgresql";
/// ALPN as OpenSSL's protocol list wants it: length-prefixed.
const ALPN_WIRE: &[u8] = b"\x0apostgresql";

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number after the flag"))
        .unwrap_or(default)
}

fn cpu_facts() -> (String, String) {
    let info = std::fs::read_to_string("/proc/cpuinfo").expect("cannot read /proc/cpuinfo");
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let model = field("model name");
    let flags = field("flags");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let feats = ["sha_ni", "avx2", "aes", "vaes", "avx512f", "adx", "bmi2"]
        .iter()
        .map(|f| format!("{f}={}", if has(f) { "yes" } else { "no" }))
        .collect::<Vec<_>>()
        .join(" ");
    (model, feats)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps = arg(&args, "--reps", 5);
    let ecdsa_n = arg(&args, "--ecdsa-n", 2000);
    let rsa_n = arg(&args, "--rsa-n", 500);

    let dir = std::env::temp_dir().join(format!("tls-handshakes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("cannot create the temp dir for certificates");
    let certs = [
        (CertKind::Ecdsa, make_cert(CertKind::Ecdsa, &dir)),
        (CertKind::Rsa, make_cert(CertKind::Rsa, &dir)),
    ];

    let cli = Command::new("openssl")
        .arg("version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("(openssl version failed: {e})"));
    let (model, feats) = cpu_facts();
    println!("openssl version: {cli}");
    println!("openssl crate links: {}", openssl::version::version());
    println!("rustls 0.23 (aws-lc-rs and ring providers), client: OpenSSL for every row");
    println!("cpu: {model}; {feats}");
    println!(
        "cores online: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let t0 = thread_cpu_ns();
    for _ in 0..1000 {
        std::hint::black_box(thread_cpu_ns());
    }
    println!(
        "clock_gettime(CLOCK_THREAD_CPUTIME_ID): {:.0} ns a call",
        (thread_cpu_ns() - t0) as f64 / 1000.0
    );
    println!("repetitions: {reps}, median shown; N = {ecdsa_n} (ECDSA) / {rsa_n} (RSA)\n");

    println!(
        "| server | cert | TLS | handshakes/server-CPU-s | µs server CPU/handshake | min–max µs | windows/hs | wall s/rep | cipher | group |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---|---|");
    for (kind, cert) in &certs {
        for version in [Version::Tls13, Version::Tls12] {
            let connector = openssl_client(version);
            for lib in [Library::OpenSsl, Library::RustlsAwsLc, Library::RustlsRing] {
                let server = match lib {
                    Library::OpenSsl => Server::OpenSsl(openssl_server(cert, version)),
                    Library::RustlsAwsLc => Server::Rustls(Arc::new(rustls_server(
                        cert,
                        version,
                        rustls::crypto::aws_lc_rs::default_provider(),
                    ))),
                    Library::RustlsRing => Server::Rustls(Arc::new(rustls_server(
                        cert,
                        version,
                        rustls::crypto::ring::default_provider(),
                    ))),
                };
                let n = if *kind == CertKind::Ecdsa {
                    ecdsa_n
                } else {
                    rsa_n
                };
                // Warm-up: caches, lazy initialisation, allocator.
                run(&server, &connector, (n / 10).max(10));
                let mut us = Vec::new();
                let mut walls = Vec::new();
                let mut neg = Negotiated::default();
                let mut windows = 0;
                for _ in 0..reps {
                    let (clock, ng, wall) = run(&server, &connector, n);
                    us.push(clock.ns as f64 / 1000.0 / n as f64);
                    walls.push(wall.as_secs_f64());
                    windows = clock.windows / n as u64;
                    neg = ng;
                }
                let lo = us.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = us.iter().cloned().fold(0.0, f64::max);
                let med = median(&mut us);
                println!(
                    "| {} | {} | {} | {:.0} | {:.1} | {:.1}–{:.1} | {} | {:.2} | {} | {} |",
                    lib.name(),
                    kind.name(),
                    version.name(),
                    1e6 / med,
                    med,
                    lo,
                    hi,
                    windows,
                    median(&mut walls),
                    neg.cipher,
                    neg.group,
                );
                assert_eq!(
                    neg.version,
                    version.name().replace(' ', "v"),
                    "protocol version"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
