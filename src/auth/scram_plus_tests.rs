//! Tests of SCRAM-SHA-256-PLUS on the server side: full exchanges with a
//! known certificate hash (our client and postgres-protocol's), every gs2
//! refusal PostgreSQL makes, mock exchanges, and a mutation sweep over the
//! headers that must end in an error, never a panic.

use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

use super::channel_binding::Gs2;
use super::crypto;
use super::scram::{ScramError, ScramServer, ScramSuccess};
use super::scram_client::{SaltedPasswordCache, ScramClient, ScramCredential, ScramKeys};
use super::scram_plus::ServerBinding;
use super::secret::ScramSecret;

const SEED: [u8; 32] = [7; 32];
/// Stands for our certificate's tls-server-end-point hash.
const HASH: [u8; 32] = [0xAB; 32];

fn plus() -> ServerBinding {
    ServerBinding::ServerEndPoint(HASH.to_vec())
}

/// Runs `client` (whose first message is `first`) against a server with
/// `binding`; returns the server's verdict, and the client's own check of
/// the server signature.
fn run(
    secret: Option<&ScramSecret>,
    binding: ServerBinding,
    gs2: Gs2,
    password: &str,
) -> Result<(ScramSuccess, bool), ScramError> {
    let mut server = ScramServer::new("user", secret, &SEED, binding);
    let (mut client, first) = ScramClient::new(gs2);
    let params = client.handle_server_first(server.handle_client_first(&first)?)?;
    let keys = ScramKeys::from_password(password, &params.salt, params.iterations);
    let success = server.handle_client_final(&client.client_final(&keys)?)?;
    client.verify_server_final(&success.server_final)?;
    Ok((success, client.channel_bound()))
}

#[test]
fn full_plus_exchange_with_a_known_hash() {
    let secret = ScramSecret::generate("pencil");
    let gs2 = Gs2::ServerEndPoint(HASH.to_vec());
    let (success, bound) = run(Some(&secret), plus(), gs2, "pencil").unwrap();
    assert!(success.channel_binding && bound);

    // c= is base64("p=tls-server-end-point,," + hash), byte for byte.
    let mut server = ScramServer::new("user", Some(&secret), &SEED, plus());
    let (mut client, first) = ScramClient::new(Gs2::ServerEndPoint(HASH.to_vec()));
    let params = client
        .handle_server_first(server.handle_client_first(&first).unwrap())
        .unwrap();
    let keys = ScramKeys::from_password("pencil", &params.salt, params.iterations);
    let client_final = String::from_utf8(client.client_final(&keys).unwrap()).unwrap();
    let mut input = b"p=tls-server-end-point,,".to_vec();
    input.extend_from_slice(&HASH);
    let want = format!("c={},", crypto::b64_encode(&input));
    assert!(client_final.starts_with(&want), "{client_final}");
    let success = server.handle_client_final(client_final.as_bytes()).unwrap();
    // The ClientKey is the same with or without binding: passthrough to a
    // backend (which may not bind, or bind to its own certificate) works.
    assert_eq!(success.client_key, keys.client_key);
    let passthrough = ScramCredential::passthrough(&secret, success.client_key);
    let cache = SaltedPasswordCache::new(4);
    for backend in [ServerBinding::NotOffered, plus()] {
        let gs2 = match backend {
            ServerBinding::ServerEndPoint(_) => Gs2::ServerEndPoint(HASH.to_vec()),
            _ => Gs2::No,
        };
        let mut server = ScramServer::new("user", Some(&secret), &SEED, backend);
        let (mut client, first) = ScramClient::new(gs2);
        let params = client
            .handle_server_first(server.handle_client_first(&first).unwrap())
            .unwrap();
        let keys = passthrough.keys("user", &params, &cache).unwrap();
        let done = server
            .handle_client_final(&client.client_final(&keys).unwrap())
            .unwrap();
        client.verify_server_final(&done.server_final).unwrap();
    }

    // A second implementation: postgres-protocol's client.
    let mut server = ScramServer::new("user", Some(&secret), &SEED, plus());
    let mut theirs = ScramSha256::new(b"pencil", ChannelBinding::tls_server_end_point(HASH.into()));
    theirs
        .update(server.handle_client_first(theirs.message()).unwrap())
        .unwrap();
    let success = server.handle_client_final(theirs.message()).unwrap();
    theirs.finish(&success.server_final).unwrap();
    assert!(success.channel_binding);
}

#[test]
fn plain_exchanges_report_no_binding() {
    let secret = ScramSecret::generate("pencil");
    for (binding, gs2) in [
        (ServerBinding::NotOffered, Gs2::No),
        (ServerBinding::NotOffered, Gs2::NotOffered),
        (ServerBinding::Declined, Gs2::No),
    ] {
        let (success, bound) = run(Some(&secret), binding, gs2, "pencil").unwrap();
        assert!(!success.channel_binding && !bound);
    }
}

#[test]
fn wrong_cbind_data_is_refused_for_known_and_unknown_users() {
    let secret = ScramSecret::generate("pencil");
    // Another certificate's hash: the client's TLS ends at someone else.
    for user_secret in [Some(&secret), None] {
        let other = Gs2::ServerEndPoint(vec![0xCD; 32]);
        let err = run(user_secret, plus(), other, "pencil").unwrap_err();
        assert_eq!(err, ScramError::BindingCheckFailed);
        assert_eq!(err.sqlstate(), "28000");
    }
    // Hand-made c= values under -PLUS: the plain headers, a truncated hash, garbage.
    let mut short = b"p=tls-server-end-point,,".to_vec();
    short.extend_from_slice(&HASH[..31]);
    let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    for c in [
        "biws".to_string(),
        "eSws".to_string(),
        crypto::b64_encode(&short),
        crypto::b64_encode(b"p=tls-server-end-point,,"),
        "***".to_string(),
        String::new(),
    ] {
        let mut server = ScramServer::new("user", Some(&secret), &SEED, plus());
        let reply = server
            .handle_client_first(b"p=tls-server-end-point,,n=,r=abc")
            .unwrap();
        let reply = String::from_utf8(reply.to_vec()).unwrap();
        let nonce = &reply[2..reply.find(',').unwrap()];
        let input = format!("c={c},r={nonce},{proof}");
        assert_eq!(
            server.handle_client_final(input.as_bytes()).unwrap_err(),
            ScramError::BindingCheckFailed,
            "{input}"
        );
    }
}

#[test]
fn a_right_binding_with_a_wrong_password_or_unknown_user_is_28p01() {
    let secret = ScramSecret::generate("pencil");
    let bound = || Gs2::ServerEndPoint(HASH.to_vec());
    let wrong = run(Some(&secret), plus(), bound(), "wrong").unwrap_err();
    let unknown = run(None, plus(), bound(), "pencil").unwrap_err();
    assert_eq!(
        (wrong, unknown),
        (ScramError::InvalidProof, ScramError::InvalidProof)
    );
}

/// Client-first-message against a fresh server with `binding`.
fn first(binding: ServerBinding, message: &[u8]) -> Result<Vec<u8>, ScramError> {
    ScramServer::new("user", None, &SEED, binding)
        .handle_client_first(message)
        .map(<[u8]>::to_vec)
}

#[test]
fn p_with_the_plain_mechanism_is_refused() {
    for binding in [ServerBinding::NotOffered, ServerBinding::Declined] {
        let err = first(binding, b"p=tls-server-end-point,,n=,r=abc").unwrap_err();
        assert_eq!(err.sqlstate(), "08P01");
        assert!(
            err.to_string()
                .contains("selected SCRAM-SHA-256 without channel binding"),
            "{err}"
        );
    }
}

#[test]
fn y_where_plus_was_offered_is_a_downgrade() {
    let err = first(ServerBinding::Declined, b"y,,n=,r=abc").unwrap_err();
    assert_eq!(err, ScramError::BindingNegotiation);
    assert_eq!(err.sqlstate(), "28000");
    assert_eq!(err.to_string(), "SCRAM channel binding negotiation error");
    assert!(err
        .detail()
        .unwrap()
        .contains("this server does support channel binding"));
    // What postgres-protocol sends when it could bind but saw no -PLUS.
    let theirs = ScramSha256::new(b"pencil", ChannelBinding::unrequested());
    assert_eq!(
        first(ServerBinding::Declined, theirs.message()).unwrap_err(),
        ScramError::BindingNegotiation
    );
    // Over a plain connection nothing was stripped: `y` is fine.
    first(ServerBinding::NotOffered, b"y,,n=,r=abc").unwrap();
    // Under -PLUS, `y` and `n` lack the binding the mechanism promised.
    for header in [&b"y,,n=,r=abc"[..], b"n,,n=,r=abc"] {
        let err = first(plus(), header).unwrap_err();
        assert!(err
            .to_string()
            .contains("does not include channel binding data"));
    }
}

#[test]
fn unsupported_channel_binding_types() {
    let cases: &[(&[u8], &str)] = &[
        (b"p=tls-unique,,n=,r=abc", "tls-unique"),
        (b"p=tls-exporter,,n=,r=abc", "tls-exporter"),
        (b"p=TLS-SERVER-END-POINT,,n=,r=abc", "TLS-SERVER-END-POINT"),
        (b"p=,,n=,r=abc", ""),
        (b"p=tls\xc3\xa9 x,,n=,r=abc", "tls?? x"),
        (b"p=tls-server-end-point", ""),
    ];
    for (input, name) in cases {
        let err = first(plus(), input).unwrap_err();
        if input.ends_with(b"point") {
            // No comma after the type: there is no client-first-message-bare.
            assert!(err.to_string().contains("unexpected attribute"), "{err}");
            continue;
        }
        let want = format!(
            "unsupported SCRAM channel-binding type \"{}\"",
            name.replace(' ', "?")
        );
        assert_eq!(err.to_string(), want);
        assert_eq!(err.sqlstate(), "08P01");
    }
    let long = format!("p={},,n=,r=abc", "x".repeat(100));
    let err = first(plus(), long.as_bytes()).unwrap_err();
    assert_eq!(err, ScramError::UnsupportedBindingType("x".repeat(30)));
}

#[test]
fn malformed_gs2_headers() {
    // (binding, input, part of the error)
    let np = ServerBinding::NotOffered;
    let cases: Vec<(ServerBinding, &[u8], &str)> = vec![
        (plus(), b"", "empty"),
        (plus(), b"p", "\"=\""),
        (plus(), b"px,,n=,r=abc", "\"=\""),
        (
            plus(),
            b"p=tls-server-end-point,a=u,n=,r=abc",
            "authorization identity",
        ),
        (
            plus(),
            b"p=tls-server-end-point,x,n=,r=abc",
            "unexpected attribute",
        ),
        (plus(), b"p=tls-server-end-point,,m=1,n=,r=abc", "extension"),
        (
            plus(),
            b"p=tls-server-end-point,,r=abc",
            "expected attribute \"n\"",
        ),
        (plus(), b"p=tls-server-end-point,,n=,r=", "nonce"),
        (plus(), b",,n=,r=abc", "channel-binding flag"),
        (
            plus(),
            b"P=tls-server-end-point,,n=,r=abc",
            "channel-binding flag",
        ),
        (np.clone(), b"n", "comma expected"),
        (np.clone(), b"nn,,n=,r=abc", "comma expected"),
        (np.clone(), b"y", "comma expected"),
        (np.clone(), b"y;,n=,r=abc", "comma expected"),
        (np.clone(), b"\xffn,,n=,r=abc", "UTF-8"),
        (ServerBinding::Declined, b"p", "without channel binding"),
        (
            ServerBinding::Declined,
            b" n,,n=,r=abc",
            "channel-binding flag",
        ),
    ];
    for (binding, input, detail) in cases {
        let err = first(binding.clone(), input).unwrap_err();
        assert!(
            err.to_string().contains(detail),
            "{binding:?} {input:?}: {err}"
        );
    }
}

/// Each single-byte edit of `message`: every truncation, and each position
/// deleted, replaced or preceded by one of a few bytes the grammar cares about.
fn mutations(message: &[u8]) -> Vec<Vec<u8>> {
    const BYTES: &[u8] = b",=pnyamcr \x00\xff\x7f";
    let mut out: Vec<Vec<u8>> = (0..message.len()).map(|n| message[..n].to_vec()).collect();
    for i in 0..=message.len() {
        for &b in BYTES {
            let mut inserted = message.to_vec();
            inserted.insert(i, b);
            out.push(inserted);
            if i < message.len() {
                let mut replaced = message.to_vec();
                replaced[i] = b;
                out.push(replaced);
            }
        }
        if i < message.len() {
            let mut deleted = message.to_vec();
            deleted.remove(i);
            out.push(deleted);
        }
    }
    out
}

#[test]
fn mutated_plus_messages_error_and_never_panic() {
    let secret = ScramSecret::generate("pencil");
    let (mut client, first_msg) = ScramClient::new(Gs2::ServerEndPoint(HASH.to_vec()));
    // Client-first: some edits stay valid (the user name and the nonce are
    // free text); the point is that none panics, whatever the binding.
    for m in mutations(&first_msg) {
        for binding in [plus(), ServerBinding::NotOffered, ServerBinding::Declined] {
            let _ = ScramServer::new("user", None, &SEED, binding).handle_client_first(&m);
        }
    }
    // Client-final: every edit is refused, since each byte is checked (c=,
    // r= or the proof). Each attempt gets a server in the same state, with
    // the same server nonce.
    let mut server = ScramServer::new("user", Some(&secret), &SEED, plus());
    let params = client
        .handle_server_first(server.handle_client_first(&first_msg).unwrap())
        .unwrap();
    let keys = ScramKeys::from_password("pencil", &params.salt, params.iterations);
    let good = client.client_final(&keys).unwrap();
    let nonce = server_nonce(&good, &first_msg);
    let edits = mutations(&good);
    for m in &edits {
        let mut s =
            ScramServer::with_server_nonce("user", Some(&secret), &SEED, plus(), nonce.clone());
        s.handle_client_first(&first_msg).unwrap();
        assert!(
            s.handle_client_final(m).is_err() || *m == good,
            "an edited client-final was accepted: {}",
            String::from_utf8_lossy(m)
        );
    }
    assert!(edits.len() > 1000);
    assert!(server.handle_client_final(&good).unwrap().channel_binding);
}

/// The server's part of the combined nonce in `client_final`'s `r=`, given
/// the client-first it followed.
fn server_nonce(client_final: &[u8], client_first: &[u8]) -> String {
    let text = String::from_utf8(client_final.to_vec()).unwrap();
    let combined = text.split(",r=").nth(1).unwrap().split(',').next().unwrap();
    let first = String::from_utf8(client_first.to_vec()).unwrap();
    let client_nonce = first.rsplit("r=").next().unwrap();
    combined[client_nonce.len()..].to_string()
}
