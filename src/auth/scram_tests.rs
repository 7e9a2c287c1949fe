//! Tests of both SCRAM sides: RFC 7677's exchange, each side against the
//! other and against postgres-protocol's client, and hostile input.

use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

use super::channel_binding::Gs2;
use super::crypto;
use super::scram::{ScramError, ScramServer};
use super::scram_client::{SaltedPasswordCache, ScramClient, ScramCredential, ScramKeys};
use super::scram_plus::ServerBinding;
use super::secret::ScramSecret;

const SEED: [u8; 32] = [7; 32];
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

fn rfc_secret() -> &'static ScramSecret {
    static SECRET: std::sync::LazyLock<ScramSecret> = std::sync::LazyLock::new(|| {
        ScramSecret::from_password("pencil", &crypto::b64_decode(RFC_SALT).unwrap(), 4096)
    });
    &SECRET
}

/// A server on a plain connection (no -PLUS offered).
fn server(secret: Option<&ScramSecret>) -> ScramServer<'_> {
    ScramServer::new("user", secret, &SEED, ServerBinding::NotOffered)
}

/// Runs our client against our server; returns the server's result and the client's verdict.
fn exchange(
    secret: Option<&ScramSecret>,
    credential: &ScramCredential,
) -> Result<[u8; 32], ScramError> {
    let cache = SaltedPasswordCache::new(8);
    let mut server = server(secret);
    let (mut client, first) = ScramClient::new(Gs2::No);
    let server_first = server.handle_client_first(&first)?;
    let params = client.handle_server_first(server_first)?;
    let keys = credential.keys("user", &params, &cache)?;
    let success = server.handle_client_final(&client.client_final(&keys)?)?;
    client.verify_server_final(&success.server_final)?;
    Ok(success.client_key)
}

#[test]
fn rfc7677_exchange_reproduced_exactly() {
    let mut server = ScramServer::with_server_nonce(
        "user",
        Some(rfc_secret()),
        &SEED,
        ServerBinding::NotOffered,
        RFC_SERVER_NONCE.into(),
    );
    let (mut client, client_first) =
        ScramClient::with_nonce("user", RFC_CLIENT_NONCE.into(), Gs2::No);
    assert_eq!(client_first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");

    let server_first = server.handle_client_first(&client_first).unwrap();
    let expected =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    assert_eq!(String::from_utf8(server_first.to_vec()).unwrap(), expected);

    let params = client.handle_server_first(server_first).unwrap();
    assert_eq!((params.salt.len(), params.iterations), (16, 4096));
    let keys = ScramKeys::from_password("pencil", &params.salt, params.iterations);
    let client_final = client.client_final(&keys).unwrap();
    let expected = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                    p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    assert_eq!(String::from_utf8(client_final.clone()).unwrap(), expected);

    let success = server.handle_client_final(&client_final).unwrap();
    assert_eq!(
        success.server_final,
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
    assert_eq!(success.client_key, keys.client_key);
    client.verify_server_final(&success.server_final).unwrap();
    // The exchange is over: nothing more is accepted on either side.
    assert_eq!(
        server.handle_client_final(&client_final).unwrap_err(),
        ScramError::OutOfOrder
    );
    assert_eq!(
        client.client_final(&keys).unwrap_err(),
        ScramError::OutOfOrder
    );
}

#[test]
fn postgres_protocol_client_logs_in() {
    for binding in [ChannelBinding::unsupported(), ChannelBinding::unrequested()] {
        let mut server = server(Some(rfc_secret()));
        let mut client = ScramSha256::new(b"pencil", binding);
        let server_first = server.handle_client_first(client.message()).unwrap();
        client.update(server_first).unwrap();
        let success = server.handle_client_final(client.message()).unwrap();
        client.finish(&success.server_final).unwrap();
    }
    let mut server = server(Some(rfc_secret()));
    let mut client = ScramSha256::new(b"wrong", ChannelBinding::unsupported());
    let server_first = server.handle_client_first(client.message()).unwrap();
    client.update(server_first).unwrap();
    assert_eq!(
        server.handle_client_final(client.message()).unwrap_err(),
        ScramError::InvalidProof
    );
}

#[test]
fn password_and_passthrough_credentials() {
    let secret = ScramSecret::generate("pencil");
    let password = ScramCredential::Password("pencil".into());
    let client_key = exchange(Some(&secret), &password).unwrap();

    // The ClientKey recovered by the server logs in again with no password.
    let passthrough = ScramCredential::passthrough(&secret, client_key);
    assert_eq!(exchange(Some(&secret), &passthrough).unwrap(), client_key);
    // ...but only toward a server with the same salt.
    let changed = ScramSecret::generate("pencil");
    assert_eq!(
        exchange(Some(&changed), &passthrough).unwrap_err(),
        ScramError::KeysMismatch
    );

    let wrong = ScramCredential::Password("pencil2".into());
    assert_eq!(
        exchange(Some(&secret), &wrong).unwrap_err(),
        ScramError::InvalidProof
    );
    assert!(!format!("{password:?}{passthrough:?}").contains("pencil"));
}

#[test]
fn mock_exchange_for_unknown_user() {
    let password = ScramCredential::Password("pencil".into());
    assert_eq!(
        exchange(None, &password).unwrap_err(),
        ScramError::InvalidProof
    );

    let server_first = |user: &str, seed: &[u8; 32]| {
        let mut server = ScramServer::new(user, None, seed, ServerBinding::NotOffered);
        let reply = server.handle_client_first(b"n,,n=,r=abc").unwrap();
        let text = String::from_utf8(reply.to_vec()).unwrap();
        let (nonce, rest) = text.split_once(",s=").unwrap();
        assert!(nonce.starts_with("r=abc") && nonce.len() == 2 + 3 + 24);
        let (salt, iterations) = rest.split_once(",i=").unwrap();
        assert_eq!(crypto::b64_decode(salt).unwrap().len(), 16);
        assert_eq!(iterations, "4096");
        salt.to_string()
    };
    assert_eq!(server_first("ghost", &SEED), server_first("ghost", &SEED));
    assert_ne!(server_first("ghost", &SEED), server_first("phantom", &SEED));
    assert_ne!(
        server_first("ghost", &SEED),
        server_first("ghost", &[8; 32])
    );
}

/// Server state after a valid client-first for `nonce` "abc"; returns the combined nonce.
fn after_first(first: &[u8]) -> (ScramServer<'static>, String) {
    let mut server = server(Some(rfc_secret()));
    let reply = String::from_utf8(server.handle_client_first(first).unwrap().to_vec()).unwrap();
    let nonce = reply[2..reply.find(',').unwrap()].to_string();
    (server, nonce)
}

#[test]
fn malformed_client_first() {
    let long = format!("n,,n=,r={}", "x".repeat(1020));
    let cases: &[(&[u8], &str)] = &[
        (b"", "empty"),
        (b"n=,r=abc", "comma expected"),
        (b"x,,n=,r=abc", "channel-binding flag"),
        (b"p=tls-server-end-point,,n=,r=abc", "channel binding data"),
        (b"n,a=bob,n=,r=abc", "authorization identity"),
        (b"n,a=,n=,r=abc", "authorization identity"),
        (b"n,x,n=,r=abc", "unexpected attribute"),
        (b"n,,m=ext,n=,r=abc", "extension"),
        (b"n,,r=abc", "expected attribute \"n\""),
        (b"n,,n=", "expected attribute \"r\""),
        (b"n,,n=,x=abc", "expected attribute \"r\""),
        (b"n,,n=,r=", "nonce"),
        (b"n,,n=,r=a b", "nonce"),
        (b"n,,n=,r=abc,", "x=value"),
        (b"n,,n=,r=abc,junk", "x=value"),
        (b"n,,n=,r=abc\0", "NUL"),
        (b"n,,n=\xff\xfe,r=abc", "UTF-8"),
        (long.as_bytes(), "1024"),
    ];
    for (input, detail) in cases {
        let err = server(None).handle_client_first(input).unwrap_err();
        assert!(err.to_string().contains(detail), "{input:?}: {err}");
    }
    // Trailing extensions are ignored, as PostgreSQL does.
    after_first(b"n,,n=,r=abc,x=1");
    after_first(b"y,,n=anything,r=abc");
}

#[test]
fn malformed_client_final() {
    // "@" stands for the exchange's combined nonce, which is random.
    let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let long = format!("c=biws,r=@,{}", "x".repeat(1024));
    let cases = [
        (String::new(), "empty"),
        (format!("r=@,{proof}"), "expected attribute \"c\""),
        (format!("c=eSws,r=@,{proof}"), "channel-binding attribute"),
        (format!("c=bi!s,r=@,{proof}"), "channel-binding attribute"),
        (format!("c=biws,{proof}"), "expected attribute \"r\""),
        (format!("c=biws,r=@x,{proof}"), "nonce does not match"),
        (format!("c=biws,r=abc,{proof}"), "nonce does not match"),
        ("c=biws,r=@".to_string(), "could not find proof"),
        ("c=biws,r=@,x=1".to_string(), "could not find proof"),
        (format!("c=biws,r=@,{proof},x=1"), "garbage"),
        (format!("c=biws,r=@,{proof},"), "garbage"),
        (format!("c=biws,r=@,x,{proof}"), "x=value"),
        ("c=biws,r=@,p=***".to_string(), "malformed proof"),
        ("c=biws,r=@,p=AAAA".to_string(), "malformed proof"),
        (format!("c=biws,r=@,{proof}AAAA"), "malformed proof"),
        ("c=biws,r=@,p=\u{e9}".to_string(), "malformed proof"),
        (long, "1024"),
    ];
    for (template, detail) in cases {
        let (mut server, nonce) = after_first(b"n,,n=,r=abc");
        let input = template.replace('@', &nonce);
        let err = server.handle_client_final(input.as_bytes()).unwrap_err();
        assert!(err.to_string().contains(detail), "{input}: {err}");
        // Any error ends the exchange.
        let retry = format!("c=biws,r={nonce},{proof}");
        assert_eq!(
            server.handle_client_final(retry.as_bytes()).unwrap_err(),
            ScramError::OutOfOrder
        );
    }
    let (mut server, nonce) = after_first(b"n,,n=,r=abc");
    assert!(server.handle_client_final(b"c=biws,r=\xff").is_err());
    let _ = nonce;
    // Extensions before the proof are allowed; a wrong proof is InvalidProof.
    let (mut server, nonce) = after_first(b"y,,n=,r=abc");
    let input = format!("c=eSws,r={nonce},x=1,{proof}");
    assert_eq!(
        server.handle_client_final(input.as_bytes()).unwrap_err(),
        ScramError::InvalidProof
    );
    let mut fresh = ScramServer::new("user", None, &SEED, ServerBinding::NotOffered);
    assert_eq!(
        fresh.handle_client_final(b"c=biws").unwrap_err(),
        ScramError::OutOfOrder
    );
}

/// A client that has sent client-first with nonce "abc".
fn client() -> ScramClient {
    ScramClient::with_nonce("", "abc".into(), Gs2::No).0
}

#[test]
fn malformed_server_first() {
    let long = format!("r=abcd,s=QUJD,i=4096,x={}", "x".repeat(1024));
    let cases: &[(&[u8], ScramError)] = &[
        (b"", ScramError::Malformed("the message is empty")),
        (
            b"s=QUJD,i=4096",
            ScramError::Malformed("expected attribute \"r\""),
        ),
        (
            b"r=abcd,i=4096",
            ScramError::Malformed("expected attribute \"s\""),
        ),
        (
            b"r=abcd,s=QUJD",
            ScramError::Malformed("expected attribute \"i\""),
        ),
        (b"r=xyzd,s=QUJD,i=4096", ScramError::NonceMismatch),
        (b"r=abc,s=QUJD,i=4096", ScramError::NonceMismatch),
        (b"r=ab,s=QUJD,i=4096", ScramError::NonceMismatch),
        (b"r=abc d,s=QUJD,i=4096", ScramError::NonceMismatch),
        (
            b"r=abcd,s=Q!JD,i=4096",
            ScramError::Malformed("invalid salt in server-first-message"),
        ),
        (
            b"r=abcd,s=,i=4096",
            ScramError::Malformed("invalid salt in server-first-message"),
        ),
        (
            b"r=abcd,s=QUJD,i=0",
            ScramError::Malformed("invalid iteration count in server-first-message"),
        ),
        (
            b"r=abcd,s=QUJD,i=-1",
            ScramError::Malformed("invalid iteration count in server-first-message"),
        ),
        (
            b"r=abcd,s=QUJD,i=99999999999",
            ScramError::Malformed("invalid iteration count in server-first-message"),
        ),
        (
            b"r=abcd,s=QUJD,i=4096,",
            ScramError::Malformed("expected an attribute of the form x=value"),
        ),
        (
            b"m=x,r=abcd,s=QUJD,i=4096",
            ScramError::Unsupported("server requires an unsupported SCRAM extension"),
        ),
        (
            b"r=abcd\xff,s=QUJD,i=4096",
            ScramError::Malformed("message is not valid UTF-8"),
        ),
        (
            long.as_bytes(),
            ScramError::Malformed("message longer than 1024 bytes"),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            &client().handle_server_first(input).unwrap_err(),
            expected,
            "{input:?}"
        );
    }
    let params = client()
        .handle_server_first(b"r=abcd,s=QUJD,i=4096,x=ext")
        .unwrap();
    assert_eq!(
        (params.salt.as_slice(), params.iterations),
        (&b"ABC"[..], 4096)
    );
}

#[test]
fn server_final_is_checked() {
    let secret = ScramSecret::generate("pencil");
    let keys = ScramKeys::from_password("pencil", &secret.salt, secret.iterations);
    let ready = || {
        let mut server = server(Some(&secret));
        let (mut client, first) = ScramClient::new(Gs2::No);
        client
            .handle_server_first(server.handle_client_first(&first).unwrap())
            .unwrap();
        let success = server
            .handle_client_final(&client.client_final(&keys).unwrap())
            .unwrap();
        (client, success.server_final)
    };
    let (mut client, good) = ready();
    assert_eq!(
        client.verify_server_final(b"e=invalid-proof"),
        Err(ScramError::ServerError("invalid-proof".into()))
    );
    assert_eq!(
        client.verify_server_final(b"v=AAAA").unwrap_err(),
        ScramError::Malformed("invalid signature in server-final-message")
    );
    assert_eq!(
        client.verify_server_final(b"x=1").unwrap_err(),
        ScramError::Malformed("expected attribute \"v\" or \"e\"")
    );
    assert_eq!(
        client.verify_server_final(b"").unwrap_err(),
        ScramError::Malformed("the message is empty")
    );
    let forged = format!("v={}", crypto::b64_encode(&[1; 32]));
    assert_eq!(
        client.verify_server_final(forged.as_bytes()).unwrap_err(),
        ScramError::InvalidServerSignature
    );
    client.verify_server_final(&good).unwrap();
    assert!(!client.channel_bound(), "no binding was asked for");
    // A server that knows the StoredKey but not the ServerKey cannot pass.
    let (mut client, _) = ready();
    let mut impostor = secret.clone();
    impostor.server_key = crypto::MacKey::new([0; 32]);
    let mut server = server(Some(&impostor));
    let (mut other, first) = ScramClient::new(Gs2::No);
    other
        .handle_server_first(server.handle_client_first(&first).unwrap())
        .unwrap();
    let success = server
        .handle_client_final(&other.client_final(&keys).unwrap())
        .unwrap();
    assert_eq!(
        other
            .verify_server_final(&success.server_final)
            .unwrap_err(),
        ScramError::InvalidServerSignature
    );
    assert_eq!(
        client.verify_server_final(&good).unwrap_err(),
        ScramError::InvalidServerSignature
    );
    // Out of order calls.
    let (mut fresh, _) = ScramClient::new(Gs2::No);
    assert_eq!(
        fresh.client_final(&keys).unwrap_err(),
        ScramError::OutOfOrder
    );
    assert_eq!(
        fresh.verify_server_final(&good).unwrap_err(),
        ScramError::OutOfOrder
    );
}

#[test]
fn password_iterations_are_bounded() {
    let cache = SaltedPasswordCache::new(4);
    let huge = super::scram_client::ServerFirst {
        salt: b"salt".to_vec(),
        iterations: super::scram_client::MAX_PASSWORD_ITERATIONS + 1,
    };
    let password = ScramCredential::Password("pencil".into());
    assert!(matches!(
        password.keys("user", &huge, &cache),
        Err(ScramError::TooManyIterations(_))
    ));
    assert_eq!(cache.computations(), 0);
}

#[test]
fn salted_password_cache() {
    let cache = SaltedPasswordCache::new(2);
    let direct = ScramKeys::from_password("pencil", b"salt1", 4096);
    assert_eq!(cache.get_cached("u", "pencil", b"salt1", 4096), None);
    assert_eq!(cache.keys("u", "pencil", b"salt1", 4096), direct);
    assert_eq!(cache.computations(), 1);
    // A hit runs no PBKDF2.
    assert_eq!(cache.keys("u", "pencil", b"salt1", 4096), direct);
    assert_eq!(
        cache.get_cached("u", "pencil", b"salt1", 4096),
        Some(direct)
    );
    assert_eq!(cache.computations(), 1);
    // A changed password, salt, count or user is a different entry.
    assert_ne!(cache.keys("u", "pencil2", b"salt1", 4096), direct);
    assert_eq!(cache.computations(), 2);
    assert_eq!(cache.get_cached("u", "pencil", b"salt2", 4096), None);
    assert_eq!(cache.get_cached("u", "pencil", b"salt1", 4097), None);
    assert_eq!(cache.get_cached("v", "pencil", b"salt1", 4096), None);
    // Bounded: a third entry evicts the oldest.
    cache.keys("u", "pencil", b"salt3", 4096);
    assert_eq!(cache.get_cached("u", "pencil", b"salt1", 4096), None);
    assert!(cache.get_cached("u", "pencil2", b"salt1", 4096).is_some());
    assert!(!format!("{cache:?}").contains("pencil"));

    let off = SaltedPasswordCache::new(0);
    off.keys("u", "pencil", b"salt1", 1);
    off.keys("u", "pencil", b"salt1", 1);
    assert_eq!(off.computations(), 2);
}

#[test]
fn cache_is_shared_across_threads() {
    let cache = std::sync::Arc::new(SaltedPasswordCache::new(16));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let cache = cache.clone();
            std::thread::spawn(move || cache.keys("u", "pencil", b"salt", 64))
        })
        .collect();
    let keys: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    assert!((1..=4).contains(&cache.computations()));
}

/// SCRAM-SHA-256-PLUS: the gs2 header names tls-server-end-point, and c=
/// carries it with the certificate hash, byte for byte as postgres-protocol's
/// client (a second implementation) builds it; the exchange is channel-bound
/// only once the server's signature is checked.
#[test]
fn plus_binds_the_certificate_hash_into_c() {
    let hash = vec![0xAB; 32];
    let (mut client, first) = ScramClient::new(Gs2::ServerEndPoint(hash.clone()));
    assert_eq!(client.mechanism(), "SCRAM-SHA-256-PLUS");
    assert!(first.starts_with(b"p=tls-server-end-point,,n=,r="));
    let nonce = String::from_utf8(first[29..].to_vec()).unwrap();
    let server_first = format!("r={nonce}srv,s={RFC_SALT},i=4096");
    let keys = ScramKeys::from_password("pencil", &crypto::b64_decode(RFC_SALT).unwrap(), 4096);
    client.handle_server_first(server_first.as_bytes()).unwrap();
    let ours = String::from_utf8(client.client_final(&keys).unwrap()).unwrap();

    let mut theirs = ScramSha256::new(b"pencil", ChannelBinding::tls_server_end_point(hash));
    let their_nonce = String::from_utf8(theirs.message()[29..].to_vec()).unwrap();
    theirs
        .update(format!("r={their_nonce}srv,s={RFC_SALT},i=4096").as_bytes())
        .unwrap();
    let theirs = String::from_utf8(theirs.message().to_vec()).unwrap();
    let c = |m: &str| m.split(',').next().unwrap().to_string();
    assert_eq!(c(&ours), c(&theirs));
    assert!(
        !client.channel_bound(),
        "bound before the server's signature"
    );

    let (plain, _) = ScramClient::new(Gs2::NotOffered);
    assert_eq!(plain.mechanism(), "SCRAM-SHA-256");
}
