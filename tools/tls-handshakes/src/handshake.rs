//! N full handshakes of one row, with the server's CPU timed around each of
//! its stretches of calls (OpenSSL's and rustls's drivers).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use openssl::ssl::{Ssl, SslConnector, SslContext, SslStream};
use rustls::{ServerConfig, ServerConnection};

use crate::client::{negotiated_group, Client};
use crate::clock::ServerClock;
use crate::link::{Duplex, Pipe};
use crate::server::Server;
use crate::ALPN;

/// What the client saw on the last handshake of a run.
#[derive(Clone, Default)]
pub struct Negotiated {
    pub version: String,
    pub cipher: String,
    pub group: String,
}

/// N full handshakes; the server's CPU nanoseconds, server windows, and what
/// was negotiated.
pub fn run(
    server: &Server,
    connector: &SslConnector,
    n: usize,
) -> (ServerClock, Negotiated, std::time::Duration) {
    let mut clock = ServerClock::default();
    let mut neg = Negotiated::default();
    let wall = Instant::now();
    for i in 0..n {
        let c2s: Pipe = Rc::default();
        let s2c: Pipe = Rc::default();
        let mut client = Client::start(
            connector,
            Duplex {
                rx: s2c.clone(),
                tx: c2s.clone(),
            },
        );
        let last = i + 1 == n;
        let server_alpn = match server {
            Server::OpenSsl(ctx) => openssl_handshake(ctx, &mut client, c2s, s2c, &mut clock),
            Server::Rustls(cfg) => rustls_handshake(cfg, &mut client, c2s, s2c, &mut clock),
        };
        let ssl = client.done().ssl();
        assert!(!ssl.session_reused(), "a session was resumed");
        assert_eq!(ssl.selected_alpn_protocol(), Some(ALPN), "client ALPN");
        assert_eq!(server_alpn.as_deref(), Some(ALPN), "server ALPN");
        if last {
            neg = Negotiated {
                version: ssl.version_str().to_string(),
                cipher: ssl
                    .current_cipher()
                    .map(|c| c.standard_name().unwrap_or(c.name()).to_string())
                    .unwrap_or_default(),
                group: negotiated_group(ssl),
            };
        }
    }
    (clock, neg, wall.elapsed())
}

fn openssl_handshake(
    ctx: &SslContext,
    client: &mut Client,
    c2s: Pipe,
    s2c: Pipe,
    clock: &mut ServerClock,
) -> Option<Vec<u8>> {
    let link = Duplex { rx: c2s, tx: s2c };
    // Window 1: a new server connection, and its answer to the ClientHello.
    let mut stream = clock.time(|| {
        let mut ssl = Ssl::new(ctx).expect("server Ssl");
        ssl.set_accept_state();
        let mut stream = SslStream::new(ssl, link).expect("server SslStream");
        server_step(&mut stream);
        stream
    });
    loop {
        client.turn();
        // Later windows: each further flight from the client.
        let done = clock.time(|| server_step(&mut stream));
        if done {
            break;
        }
    }
    // TLS 1.2: the server finished first; the client reads its Finished.
    client.turn();
    let alpn = stream.ssl().selected_alpn_protocol().map(<[u8]>::to_vec);
    clock.time(|| drop(stream));
    alpn
}

/// One server do_handshake; true when the handshake is complete.
fn server_step(stream: &mut SslStream<Duplex>) -> bool {
    match stream.do_handshake() {
        Ok(()) => true,
        Err(e) if e.code() == openssl::ssl::ErrorCode::WANT_READ => false,
        Err(e) => panic!("OpenSSL server handshake: {e}"),
    }
}

fn rustls_handshake(
    cfg: &Arc<ServerConfig>,
    client: &mut Client,
    c2s: Pipe,
    s2c: Pipe,
    clock: &mut ServerClock,
) -> Option<Vec<u8>> {
    let mut conn = clock.time(|| {
        let mut conn = ServerConnection::new(cfg.clone()).expect("ServerConnection::new");
        rustls_step(&mut conn, &c2s, &s2c);
        conn
    });
    while conn.is_handshaking() {
        client.turn();
        clock.time(|| rustls_step(&mut conn, &c2s, &s2c));
    }
    client.turn();
    let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
    clock.time(|| drop(conn));
    alpn
}

/// The server reads all the client sent, processes it, writes its answer.
fn rustls_step(conn: &mut ServerConnection, c2s: &Pipe, s2c: &Pipe) {
    let mut rx = c2s.borrow_mut();
    while !rx.is_empty() {
        let (front, _) = rx.as_slices();
        let mut slice: &[u8] = front;
        let before = slice.len();
        conn.read_tls(&mut slice).expect("rustls read_tls");
        let used = before - slice.len();
        rx.drain(..used);
        conn.process_new_packets()
            .expect("rustls process_new_packets");
    }
    drop(rx);
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).expect("rustls write_tls");
    }
    s2c.borrow_mut().extend(out);
}
