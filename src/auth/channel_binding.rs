//! `channel_binding` toward PostgreSQL, decided as libpq decides it
//! (fe-auth.c: pg_SASL_init and check_expected_areq; fe-auth-scram.c for
//! the gs2 header). Pure: the caller brings the server's offer, whether the
//! connection is TLS, and the certificate hash.
//!
//! Under `require` a login must end in a SCRAM-SHA-256-PLUS exchange whose
//! server signature checked out: that is what proves the server knows the
//! password *and* holds the certificate's key, so a man in the middle with
//! another certificate cannot relay the login. Any other way in (trust,
//! md5, cleartext, SCRAM without -PLUS, plain text) is refused, with
//! libpq's messages.

use crate::config::ChannelBinding;

/// The SASL mechanism without channel binding.
pub const SCRAM: &str = "SCRAM-SHA-256";
/// The SASL mechanism with tls-server-end-point channel binding.
pub const SCRAM_PLUS: &str = "SCRAM-SHA-256-PLUS";

/// Whether the connection to the server is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Plain text.
    Plain,
    /// TLS.
    Tls,
}

/// What the client-first-message's gs2 header says (RFC 5802 section 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gs2 {
    /// `n`: no channel binding (disabled, or no TLS).
    No,
    /// `y`: the client could bind but the server did not offer -PLUS; a
    /// server that does support it then knows the offer was stripped.
    NotOffered,
    /// `p=tls-server-end-point` with the server certificate's hash.
    ServerEndPoint(Vec<u8>),
}

impl Gs2 {
    /// The header, `n,,` / `y,,` / `p=tls-server-end-point,,`.
    pub fn header(&self) -> &'static str {
        match self {
            Gs2::No => "n,,",
            Gs2::NotOffered => "y,,",
            Gs2::ServerEndPoint(_) => "p=tls-server-end-point,,",
        }
    }

    /// The mechanism to name in SASLInitialResponse.
    pub fn mechanism(&self) -> &'static str {
        match self {
            Gs2::ServerEndPoint(_) => SCRAM_PLUS,
            Gs2::No | Gs2::NotOffered => SCRAM,
        }
    }

    /// The `c=` input before base64: the header plus the binding data.
    pub fn cbind_input(&self) -> Vec<u8> {
        let mut input = self.header().as_bytes().to_vec();
        if let Gs2::ServerEndPoint(hash) = self {
            input.extend_from_slice(hash);
        }
        input
    }
}

/// Which SCRAM to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// SCRAM-SHA-256-PLUS: the caller hashes the server certificate.
    Plus,
    /// SCRAM-SHA-256 with `n` or `y` (never carries data).
    Plain(PlainGs2),
}

/// The gs2 flag of a SCRAM exchange without binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainGs2 {
    /// `n`.
    No,
    /// `y`.
    NotOffered,
}

impl From<PlainGs2> for Gs2 {
    fn from(g: PlainGs2) -> Gs2 {
        match g {
            PlainGs2::No => Gs2::No,
            PlainGs2::NotOffered => Gs2::NotOffered,
        }
    }
}

/// Picks the mechanism among the server's `offered` ones, as libpq's
/// pg_SASL_init; the error is libpq's message.
pub fn select(
    policy: ChannelBinding,
    offered: &[&str],
    channel: Channel,
) -> Result<Choice, &'static str> {
    if policy == ChannelBinding::Require && channel == Channel::Plain {
        return Err("channel binding required, but SSL not in use");
    }
    let mut plus = false;
    let mut plain = false;
    for m in offered {
        if *m == SCRAM_PLUS {
            // Stripped TLS, or a confused server: the server would refuse a
            // login without binding now that both sides said they can bind.
            if channel == Channel::Plain {
                return Err(
                    "server offered SCRAM-SHA-256-PLUS authentication over a non-SSL connection",
                );
            }
            plus = true;
        } else if *m == SCRAM {
            plain = true;
        }
    }
    let bind = policy != ChannelBinding::Disable;
    if plus && bind {
        return Ok(Choice::Plus);
    }
    if !plain && !plus {
        return Err("none of the server's SASL authentication mechanisms are supported");
    }
    if policy == ChannelBinding::Require {
        return Err("channel binding is required, but server did not offer an authentication method that supports channel binding");
    }
    if !plain {
        // Only -PLUS offered and binding disabled.
        return Err("none of the server's SASL authentication mechanisms are supported");
    }
    Ok(Choice::Plain(if bind && channel == Channel::Tls {
        PlainGs2::NotOffered
    } else {
        PlainGs2::No
    }))
}

/// What the server asks at one step of the login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// AuthenticationSASL, SASLContinue or SASLFinal.
    Sasl,
    /// AuthenticationOk.
    Ok,
    /// Cleartext, md5, GSS or anything else.
    Other,
}

/// Whether the exchange so far ended in a verified SCRAM-SHA-256-PLUS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Yes: the server's signature over the bound exchange checked out.
    Yes,
    /// No.
    No,
}

/// libpq's check_expected_areq: under `require`, only SASL may be
/// answered, and AuthenticationOk only after a bound exchange.
pub fn check_request(
    policy: ChannelBinding,
    request: Request,
    bound: Bound,
) -> Result<(), &'static str> {
    if policy != ChannelBinding::Require {
        return Ok(());
    }
    match (request, bound) {
        (Request::Sasl, _) | (Request::Ok, Bound::Yes) => Ok(()),
        (Request::Ok, Bound::No) => {
            Err("channel binding required, but server authenticated client without channel binding")
        }
        (Request::Other, _) => {
            Err("channel binding required but not supported by server's authentication request")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChannelBinding::{Disable, Prefer, Require};

    /// (policy, offered mechanisms, channel, expected choice).
    type Case = (
        ChannelBinding,
        &'static [&'static str],
        Channel,
        Result<Choice, &'static str>,
    );

    const BOTH: &[&str] = &[SCRAM_PLUS, SCRAM];
    const ONLY_PLAIN: &[&str] = &[SCRAM];

    #[test]
    fn selection_follows_pg_sasl_init() {
        let plain = |g| Ok(Choice::Plain(g));
        let cases: &[Case] = &[
            (Prefer, BOTH, Channel::Tls, Ok(Choice::Plus)),
            (Require, BOTH, Channel::Tls, Ok(Choice::Plus)),
            (Disable, BOTH, Channel::Tls, plain(PlainGs2::No)),
            (Prefer, ONLY_PLAIN, Channel::Tls, plain(PlainGs2::NotOffered)),
            (Prefer, ONLY_PLAIN, Channel::Plain, plain(PlainGs2::No)),
            (Disable, ONLY_PLAIN, Channel::Tls, plain(PlainGs2::No)),
            (
                Require,
                ONLY_PLAIN,
                Channel::Tls,
                Err("channel binding is required, but server did not offer an authentication method that supports channel binding"),
            ),
            (
                Require,
                ONLY_PLAIN,
                Channel::Plain,
                Err("channel binding required, but SSL not in use"),
            ),
            (
                Prefer,
                BOTH,
                Channel::Plain,
                Err("server offered SCRAM-SHA-256-PLUS authentication over a non-SSL connection"),
            ),
            (
                Disable,
                BOTH,
                Channel::Plain,
                Err("server offered SCRAM-SHA-256-PLUS authentication over a non-SSL connection"),
            ),
            (
                Prefer,
                &["OAUTHBEARER"],
                Channel::Tls,
                Err("none of the server's SASL authentication mechanisms are supported"),
            ),
        ];
        for (policy, offered, channel, want) in cases {
            assert_eq!(
                select(*policy, offered, *channel),
                *want,
                "{policy:?} {offered:?} {channel:?}"
            );
        }
    }

    #[test]
    fn require_accepts_only_a_bound_sasl_login() {
        for policy in [Disable, Prefer] {
            for r in [Request::Sasl, Request::Ok, Request::Other] {
                assert_eq!(check_request(policy, r, Bound::No), Ok(()));
            }
        }
        assert_eq!(check_request(Require, Request::Sasl, Bound::No), Ok(()));
        assert_eq!(check_request(Require, Request::Ok, Bound::Yes), Ok(()));
        assert!(check_request(Require, Request::Ok, Bound::No)
            .unwrap_err()
            .contains("authenticated client without channel binding"));
        assert!(check_request(Require, Request::Other, Bound::No)
            .unwrap_err()
            .contains("not supported by server's authentication request"));
    }

    #[test]
    fn gs2_headers_are_rfc_5802s() {
        assert_eq!(Gs2::No.cbind_input(), b"n,,");
        assert_eq!(Gs2::NotOffered.cbind_input(), b"y,,");
        assert_eq!(
            Gs2::ServerEndPoint(vec![1, 2]).cbind_input(),
            b"p=tls-server-end-point,,\x01\x02"
        );
        assert_eq!(Gs2::ServerEndPoint(vec![]).mechanism(), SCRAM_PLUS);
        assert_eq!(Gs2::NotOffered.mechanism(), SCRAM);
    }
}
