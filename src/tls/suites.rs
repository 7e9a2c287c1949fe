//! Which TLS 1.3 suite a client gets: the first of `tls.tls13_ciphers` it
//! offers, in the server's order, as PostgreSQL's default
//! `ssl_prefer_server_ciphers = on` has it; except that a client that lists
//! ChaCha20 first gets ChaCha20 when the list has it, since a client does
//! so when it has no AES instructions (OpenSSL's `SSL_OP_PRIORITIZE_CHACHA`).
//!
//! The choice matters for logins' cost: libpq lists AES-256-GCM-SHA384
//! first, and a TLS 1.3 key schedule over SHA-384 costs this pooler about
//! an eighth of a TLS login's CPU more than one over SHA-256, on the
//! client's side as well (README, the twenty-first and twenty-second
//! measurements).
//!
//! OpenSSL has the server's order as options. AWS-LC always follows the
//! client's order among the suites allowed, so there the choice is made in
//! its early ClientHello callback and pinned on the connection.

use openssl::error::ErrorStack;
use openssl::ssl::{SslContextBuilder, SslOptions};

use crate::config::Tls13Suite;

/// A suite's code point in a ClientHello (RFC 8446, appendix B.4).
fn code_point(suite: Tls13Suite) -> [u8; 2] {
    match suite {
        Tls13Suite::Aes128GcmSha256 => [0x13, 0x01],
        Tls13Suite::Aes256GcmSha384 => [0x13, 0x02],
        Tls13Suite::Chacha20Poly1305Sha256 => [0x13, 0x03],
    }
}

/// The suite to negotiate with a client that offered `offered` (the
/// ClientHello's cipher_suites, two bytes each), or `None` when it offered
/// none of `order` (a TLS 1.2 client; the handshake then goes on as the
/// library decides).
#[cfg_attr(not(any(test, feature = "aws-lc")), allow(dead_code))]
pub(super) fn choose(order: &[Tls13Suite], offered: &[u8]) -> Option<Tls13Suite> {
    let offered = offered.chunks_exact(2);
    let known = |c: &[u8]| order.iter().copied().find(|s| code_point(*s) == c);
    let clients_first = offered.clone().find_map(known)?;
    if clients_first == Tls13Suite::Chacha20Poly1305Sha256 {
        return Some(clients_first);
    }
    order
        .iter()
        .copied()
        .find(|s| offered.clone().any(|c| c == code_point(*s)))
}

/// Makes the acceptor offer `order`'s TLS 1.3 suites and choose among them
/// in that order. TLS 1.2 suites are chosen in the server's order too
/// (Mozilla's intermediate list), as PostgreSQL chooses them.
pub(super) fn prefer(b: &mut SslContextBuilder, order: &[Tls13Suite]) -> Result<(), ErrorStack> {
    b.set_options(SslOptions::CIPHER_SERVER_PREFERENCE);
    #[cfg(not(feature = "aws-lc"))]
    {
        b.set_ciphersuites(&Tls13Suite::join(order))?;
        b.set_options(SslOptions::PRIORITIZE_CHACHA);
        Ok(())
    }
    #[cfg(feature = "aws-lc")]
    aws_lc::pin_on_hello(b, order)
}

#[cfg(feature = "aws-lc")]
mod aws_lc {
    use std::ffi::CStr;
    use std::sync::OnceLock;

    use foreign_types::ForeignTypeRef as _;
    use openssl::error::ErrorStack;
    use openssl::ex_data::Index;
    use openssl::ssl::{SslContext, SslContextBuilder, SslContextRef};
    use openssl_sys as ffi;

    use super::choose;
    use crate::config::Tls13Suite;

    /// Where a context keeps its order, for the callback.
    static ORDER: OnceLock<Index<SslContext, Box<[Tls13Suite]>>> = OnceLock::new();

    fn order_index() -> Result<Index<SslContext, Box<[Tls13Suite]>>, ErrorStack> {
        if let Some(index) = ORDER.get() {
            return Ok(*index);
        }
        let index = SslContext::new_ex_index()?;
        Ok(*ORDER.get_or_init(|| index))
    }

    /// A suite's name as `SSL_set_ciphersuites` takes it.
    fn c_name(suite: Tls13Suite) -> &'static CStr {
        match suite {
            Tls13Suite::Aes128GcmSha256 => c"TLS_AES_128_GCM_SHA256",
            Tls13Suite::Aes256GcmSha384 => c"TLS_AES_256_GCM_SHA384",
            Tls13Suite::Chacha20Poly1305Sha256 => c"TLS_CHACHA20_POLY1305_SHA256",
        }
    }

    /// Allows `order`'s suites on the context and has each connection's
    /// ClientHello narrow them to the one `choose` picks.
    pub(super) fn pin_on_hello(
        b: &mut SslContextBuilder,
        order: &[Tls13Suite],
    ) -> Result<(), ErrorStack> {
        // The names are fixed ASCII: no NUL inside, one at the end.
        let mut list = Tls13Suite::join(order).into_bytes();
        list.push(0);
        // SAFETY: the context is live and exclusively borrowed; the list is
        // a C string for the call.
        if unsafe { ffi::SSL_CTX_set_ciphersuites(b.as_ptr(), list.as_ptr().cast()) } != 1 {
            return Err(ErrorStack::get());
        }
        b.set_ex_data(order_index()?, order.into());
        // SAFETY: as above; the callback only reads the ClientHello and
        // the context's own data.
        unsafe { ffi::SSL_CTX_set_select_certificate_cb(b.as_ptr(), Some(on_client_hello)) };
        Ok(())
    }

    /// AWS-LC's early callback: runs once per handshake, before the suite
    /// is chosen. It never refuses a client: if anything is missing, the
    /// context's list stands and the client's order decides.
    unsafe extern "C" fn on_client_hello(
        hello: *const ffi::SSL_CLIENT_HELLO,
    ) -> ffi::ssl_select_cert_result_t {
        const GO_ON: ffi::ssl_select_cert_result_t =
            ffi::ssl_select_cert_result_t_ssl_select_cert_success;
        // SAFETY: AWS-LC passes a live ClientHello whose buffers outlive
        // the call, and its connection and context.
        let (ssl, offered, ctx) = unsafe {
            let Some(hello) = hello.as_ref() else {
                return GO_ON;
            };
            let offered = match hello.cipher_suites.is_null() {
                true => &[][..],
                false => std::slice::from_raw_parts(hello.cipher_suites, hello.cipher_suites_len),
            };
            let ctx = ffi::SSL_get_SSL_CTX(hello.ssl);
            if ctx.is_null() {
                return GO_ON;
            }
            (hello.ssl, offered, SslContextRef::from_ptr(ctx))
        };
        let Some(order) = ORDER.get().and_then(|index| ctx.ex_data(*index)) else {
            return GO_ON;
        };
        if let Some(suite) = choose(order, offered) {
            // SAFETY: the connection is live for the call; the name is a
            // static C string.
            if unsafe { ffi::SSL_set_ciphersuites(ssl, c_name(suite).as_ptr()) } != 1 {
                // Out of memory: drop the error and let the client's order decide.
                drop(ErrorStack::get());
            }
        }
        GO_ON
    }
}

#[cfg(test)]
mod tests {
    use super::choose;
    use crate::config::Tls13Suite::{self, *};

    const DEFAULT: &[Tls13Suite] = &[Aes128GcmSha256, Aes256GcmSha384, Chacha20Poly1305Sha256];

    /// A ClientHello's cipher_suites from code points.
    fn hello(codes: &[u16]) -> Vec<u8> {
        codes.iter().flat_map(|c| c.to_be_bytes()).collect()
    }

    /// libpq (OpenSSL 3's default order), then its TLS 1.2 suites.
    const LIBPQ: &[u16] = &[0x1302, 0x1303, 0x1301, 0xc02c, 0xc030, 0xc02b];

    #[test]
    fn the_servers_order_decides_between_aes_suites() {
        assert_eq!(choose(DEFAULT, &hello(LIBPQ)), Some(Aes128GcmSha256));
        let aes256_first = [Aes256GcmSha384, Aes128GcmSha256];
        assert_eq!(
            choose(&aes256_first, &hello(&[0x1301, 0x1302])),
            Some(Aes256GcmSha384)
        );
        // Only what the client offers, and only what the list allows.
        assert_eq!(choose(DEFAULT, &hello(&[0x1302])), Some(Aes256GcmSha384));
        assert_eq!(
            choose(&[Aes256GcmSha384], &hello(LIBPQ)),
            Some(Aes256GcmSha384)
        );
        assert_eq!(choose(&[Aes256GcmSha384], &hello(&[0x1301, 0x1303])), None);
    }

    #[test]
    fn a_client_that_puts_chacha_first_gets_it_if_allowed() {
        let mobile = hello(&[0x1303, 0x1301, 0x1302]);
        assert_eq!(choose(DEFAULT, &mobile), Some(Chacha20Poly1305Sha256));
        // Not when the list leaves ChaCha20 out: the server's order among the rest.
        let no_chacha = [Aes256GcmSha384, Aes128GcmSha256];
        assert_eq!(choose(&no_chacha, &mobile), Some(Aes256GcmSha384));
        // ChaCha20 second in the client's list is just another suite.
        let later = hello(&[0x1302, 0x1303]);
        assert_eq!(choose(DEFAULT, &later), Some(Aes256GcmSha384));
    }

    #[test]
    fn tls12_grease_and_malformed_lists_choose_nothing_or_skip() {
        // A TLS 1.2 client offers no TLS 1.3 suite.
        assert_eq!(choose(DEFAULT, &hello(&[0xc02b, 0xc02f, 0x00ff])), None);
        assert_eq!(choose(DEFAULT, &[]), None);
        // GREASE values (RFC 8701) and unknown suites are passed over.
        let greased = hello(&[0x0a0a, 0x1304, 0x1302, 0x1301]);
        assert_eq!(choose(DEFAULT, &greased), Some(Aes128GcmSha256));
        // An odd trailing byte is not half a suite.
        let mut odd = hello(&[0x1302]);
        odd.push(0x13);
        assert_eq!(choose(DEFAULT, &odd), Some(Aes256GcmSha384));
        assert_eq!(choose(DEFAULT, &[0x13]), None);
        // Pairs are read on even boundaries only: 0x01 0x13 0x02 is not 0x1302.
        assert_eq!(choose(DEFAULT, &[0x01, 0x13, 0x02, 0x00]), None);
    }
}
