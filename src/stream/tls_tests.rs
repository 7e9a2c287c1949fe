//! The shared-BIO TLS stream against OpenSSL on both ends of a socket pair:
//! handshakes, both directions, a write that must wait for the reader,
//! the ways a peer can end, and bytes that are not TLS.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use openssl::asn1::Asn1Time;
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::PKey;
use openssl::ssl::{SslAcceptor, SslConnector, SslMethod, SslMode, SslVerifyMode};
use openssl::x509::{X509Builder, X509NameBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Socket, Stream};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn acceptor() -> Result<SslAcceptor> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
    let key = PKey::from_ec_key(EcKey::generate(&group)?)?;
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_nid(Nid::COMMONNAME, "localhost")?;
    let name = name.build();
    let mut cert = X509Builder::new()?;
    cert.set_version(2)?;
    cert.set_subject_name(&name)?;
    cert.set_issuer_name(&name)?;
    cert.set_pubkey(&key)?;
    cert.set_not_before(&*Asn1Time::days_from_now(0)?)?;
    cert.set_not_after(&*Asn1Time::days_from_now(1)?)?;
    cert.sign(&key, MessageDigest::sha256())?;
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
    b.set_certificate(&cert.build())?;
    b.set_private_key(&key)?;
    // As the pooler's acceptor (tls::acceptor, which the stream module
    // must not import): no tickets, buffers released while idle, records
    // read whole.
    #[cfg(not(feature = "aws-lc"))]
    b.set_num_tickets(0)?;
    // SAFETY: the context is live and exclusively borrowed.
    #[cfg(feature = "aws-lc")]
    unsafe {
        openssl_sys::SSL_CTX_set_num_tickets(b.as_ptr(), 0);
    }
    b.set_mode(SslMode::RELEASE_BUFFERS);
    b.set_read_ahead(true);
    Ok(b.build())
}

fn connector() -> Result<SslConnector> {
    let mut b = SslConnector::builder(SslMethod::tls_client())?;
    b.set_verify(SslVerifyMode::NONE);
    Ok(b.build())
}

fn pair() -> Result<(Stream, Stream)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    a.set_nonblocking(true)?;
    b.set_nonblocking(true)?;
    Ok((
        Stream::Unix(Socket::new(OwnedFd::from(a))?),
        Stream::Unix(Socket::new(OwnedFd::from(b))?),
    ))
}

/// Server and client streams after a completed handshake.
async fn connected() -> Result<(Stream, Stream)> {
    let (mut server, mut client) = pair()?;
    let acceptor = acceptor()?;
    let connector = connector()?;
    let (accepted, connected) = tokio::join!(
        server.accept_tls(&acceptor, &[]),
        client.connect_tls(&connector, "localhost", false, false)
    );
    accepted?;
    connected?;
    Ok((server, client))
}

#[tokio::test]
async fn bytes_cross_both_ways_and_a_close_notify_reads_as_the_end() -> Result {
    let (mut server, mut client) = connected().await?;
    assert!(server.is_tls() && client.is_tls());
    client.write_all(b"hello").await?;
    let mut got = [0u8; 5];
    server.read_exact(&mut got).await?;
    assert_eq!(&got, b"hello");
    server.write_all(b"world").await?;
    client.read_exact(&mut got).await?;
    assert_eq!(&got, b"world");
    client.shutdown().await?;
    assert_eq!(server.read(&mut got).await?, 0);
    Ok(())
}

/// This process's uid, which a Unix socket pair reports for its peer.
fn own_uid() -> io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/self")?.uid())
}

#[tokio::test]
async fn a_write_larger_than_the_socket_waits_for_the_reader() -> Result {
    let (mut server, mut client) = connected().await?;
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    let len = data.len();
    let reader = async {
        // Let the writer fill the socket and block first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut all = vec![0u8; len];
        client.read_exact(&mut all).await?;
        io::Result::Ok(all)
    };
    let (wrote, read) = tokio::join!(server.write_all(&data), reader);
    wrote?;
    assert!(read? == data, "the bytes arrive whole and in order");
    Ok(())
}

#[tokio::test]
async fn a_peer_that_vanishes_without_close_notify_ends_the_read() -> Result {
    let (mut server, client) = connected().await?;
    drop(client);
    let mut got = [0u8; 8];
    let read = tokio::time::timeout(Duration::from_secs(5), server.read(&mut got)).await?;
    // OpenSSL 3 calls a bare end of file an error; older ones, the end.
    match read {
        Ok(n) => assert_eq!(n, 0),
        Err(e) => assert!(e.to_string().contains("unexpected eof"), "{e}"),
    }
    Ok(())
}

#[tokio::test]
async fn bytes_that_are_not_tls_fail_the_handshake_with_openssls_reason() -> Result {
    let (mut server, client) = pair()?;
    let Stream::Unix(peer) = client else {
        return Err("a plain pair".into());
    };
    let mut peer = peer;
    peer.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    let err = match server.accept_tls(&acceptor()?, &[]).await {
        Ok(()) => return Err("an HTTP request passed for a ClientHello".into()),
        Err(e) => e,
    };
    assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
    // OpenSSL's words, which AWS-LC spells HTTP_REQUEST.
    assert!(err.to_string().contains("http request"), "{err}");
    // The stream is left detached: nothing more reads or writes on it.
    assert!(!server.is_tls());
    assert!(server.write_all(b"x").await.is_err());
    Ok(())
}

#[tokio::test]
async fn a_peer_gone_before_its_hello_is_an_end_of_file() -> Result {
    let (mut server, client) = pair()?;
    drop(client);
    let err = match server.accept_tls(&acceptor()?, &[]).await {
        Ok(()) => return Err("a handshake with nobody".into()),
        Err(e) => e,
    };
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    Ok(())
}

#[tokio::test]
async fn a_stream_already_under_tls_refuses_a_second_layer() -> Result {
    let (mut server, _client) = connected().await?;
    let err = match server.accept_tls(&acceptor()?, &[]).await {
        Ok(()) => return Err("TLS inside TLS".into()),
        Err(e) => e,
    };
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(server.is_tls(), "the session stays in place");
    Ok(())
}

#[tokio::test]
async fn only_a_unix_socket_under_tls_has_a_peer_uid() -> Result {
    let (server, _client) = connected().await?;
    assert_eq!(server.peer_uid().transpose()?, Some(own_uid()?));
    // A TCP pair on loopback (the kernel picks the port).
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let near = std::net::TcpStream::connect(listener.local_addr()?)?;
    let (far, _) = listener.accept()?;
    let mut tcp = Vec::new();
    for s in [near, far] {
        s.set_nonblocking(true)?;
        tcp.push(Stream::Tcp(Socket::new(OwnedFd::from(s))?));
    }
    let (mut client, mut server) = (tcp.remove(0), tcp.remove(0));
    let (acceptor, connector) = (acceptor()?, connector()?);
    let (accepted, connected) = tokio::join!(
        server.accept_tls(&acceptor, &[]),
        client.connect_tls(&connector, "localhost", false, false)
    );
    accepted?;
    connected?;
    assert!(server.peer_uid().is_none());
    Ok(())
}

/// The client's first `cut` bytes, read off the server's socket as
/// negotiation reads them (0: the whole first record, the ClientHello).
async fn read_early(server: &mut Stream, cut: usize) -> Result<Vec<u8>> {
    if cut > 0 {
        let mut early = vec![0u8; cut];
        server.read_exact(&mut early).await?;
        return Ok(early);
    }
    let mut early = vec![0u8; 5];
    server.read_exact(&mut early).await?;
    let len = usize::from(u16::from_be_bytes([early[3], early[4]]));
    early.resize(5 + len, 0);
    server.read_exact(&mut early[5..]).await?;
    Ok(early)
}

/// A client connecting in the background, handed back once it is done.
fn connecting(mut client: Stream) -> Result<tokio::task::JoinHandle<io::Result<Stream>>> {
    let connector = connector()?;
    Ok(tokio::spawn(async move {
        client
            .connect_tls(&connector, "localhost", false, false)
            .await
            .map(|()| client)
    }))
}

/// The server reads the client's first bytes itself (as negotiation does:
/// one read tells a direct TLS client's record from a startup packet) and
/// hands them to the handshake, which takes them before the socket's: cut
/// anywhere, the handshake completes and bytes cross both ways.
#[tokio::test]
async fn a_handshake_starts_from_bytes_already_read() -> Result {
    for cut in [1, 4, 5, 64, 0] {
        let (mut server, client) = pair()?;
        let client = connecting(client)?;
        let early = read_early(&mut server, cut).await?;
        server.accept_tls(&acceptor()?, &early).await?;
        let mut client = client.await??;
        client.write_all(b"ping").await?;
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await?;
        assert_eq!(&got, b"ping", "cut {cut}");
        server.write_all(b"pong").await?;
        client.read_exact(&mut got).await?;
        assert_eq!(&got, b"pong", "cut {cut}");
    }
    Ok(())
}

/// Bytes read with the ClientHello that are not the ClientHello were sent
/// before the client could know the server's answer: the handshake fails
/// on them instead of taking them as the client's next records.
#[tokio::test]
async fn bytes_after_the_hello_fail_the_handshake() -> Result {
    for extra in [
        &b"\x17"[..],
        b"\x17\x03\x03\x00\x01x",
        b"\0\0\0\x08\x04\xd2\x16\x2f",
    ] {
        let (mut server, client) = pair()?;
        let client = connecting(client)?;
        let mut early = read_early(&mut server, 0).await?;
        early.extend_from_slice(extra);
        let accepted = tokio::time::timeout(
            Duration::from_secs(10),
            server.accept_tls(&acceptor()?, &early),
        )
        .await?;
        assert!(accepted.is_err(), "{extra:?}");
        drop(server);
        let _ = client.await?;
    }
    Ok(())
}

/// A connection ended the way a client's session ends, close_notify and
/// then the socket closed without a shutdown of its own, reads as a clean
/// end on the peer, after every byte sent before.
#[tokio::test]
async fn close_notify_then_close_is_a_clean_end() -> Result {
    let (mut server, mut client) = connected().await?;
    server.write_all(b"bye").await?;
    server.close_notify().await?;
    drop(server);
    let mut got = Vec::new();
    client.read_to_end(&mut got).await?;
    assert_eq!(got, b"bye");
    Ok(())
}
