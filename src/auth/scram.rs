//! The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677), behaving as
//! PostgreSQL's auth-scram.c does toward a client: no I/O, one exchange per
//! [`ScramServer`], every input checked and nothing able to panic.

use std::{fmt, mem};

use rand::RngCore;

use super::crypto::{self, KEY_LEN};
use super::secret::{ScramSecret, SCRAM_DEFAULT_ITERATIONS, SCRAM_DEFAULT_SALT_LEN};

/// Longest SCRAM message accepted, checked before any parsing. Real ones are
/// about 100 bytes; PostgreSQL user names are at most 63 bytes.
pub const MAX_SCRAM_MESSAGE_LEN: usize = 1024;
/// Random bytes in the server nonce, as PostgreSQL's SCRAM_RAW_NONCE_LEN.
const SERVER_NONCE_LEN: usize = 18;

/// A failed SCRAM exchange, on either side. The texts never quote the peer's
/// input, so they are safe to log and to send in an ErrorResponse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// The message breaks the SCRAM grammar (SQLSTATE 08P01).
    #[error("malformed SCRAM message ({0})")]
    Malformed(&'static str),
    /// A valid SCRAM feature PostgreSQL does not support (SQLSTATE 0A000).
    #[error("{0}")]
    Unsupported(&'static str),
    /// The nonce in the message is not the one of this exchange (SQLSTATE 08P01).
    #[error("invalid SCRAM response (nonce does not match)")]
    NonceMismatch,
    /// Wrong password, or unknown user (SQLSTATE 28P01).
    #[error("password authentication failed")]
    InvalidProof,
    /// A message arrived in the wrong step, or after the exchange ended (SQLSTATE 08P01).
    #[error("SCRAM message out of order")]
    OutOfOrder,
    /// Client side: the server asked for more PBKDF2 iterations than we accept.
    #[error("server requested {0} SCRAM iterations, more than the limit")]
    TooManyIterations(u32),
    /// Client side: the stored keys belong to another salt or iteration count,
    /// i.e. the password was changed in PostgreSQL after the auth file was written.
    #[error("SCRAM secret in the auth file does not match the server's salt or iteration count")]
    KeysMismatch,
    /// Client side: the server could not prove it knows the secret.
    #[error("server sent an invalid SCRAM signature")]
    InvalidServerSignature,
    /// Client side: the server ended the exchange with `e=`.
    #[error("server reported a SCRAM error: {0}")]
    ServerError(String),
}

impl ScramError {
    /// The SQLSTATE for reporting this error to a client; client-side errors
    /// (toward PostgreSQL) map to 08006, the pooler could not log in.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            ScramError::Malformed(_) | ScramError::NonceMismatch | ScramError::OutOfOrder => {
                "08P01"
            }
            ScramError::Unsupported(_) => "0A000",
            ScramError::InvalidProof => "28P01",
            ScramError::TooManyIterations(_)
            | ScramError::KeysMismatch
            | ScramError::InvalidServerSignature
            | ScramError::ServerError(_) => "08006",
        }
    }
}

/// Checks the length cap, UTF-8 and NUL bytes before any parsing.
pub(super) fn message_text(message: &[u8]) -> Result<&str, ScramError> {
    if message.is_empty() {
        return Err(ScramError::Malformed("the message is empty"));
    }
    if message.len() > MAX_SCRAM_MESSAGE_LEN {
        return Err(ScramError::Malformed("message longer than 1024 bytes"));
    }
    // PostgreSQL reads SCRAM messages as C strings, so an embedded NUL
    // would silently truncate there; refuse it here.
    if message.contains(&0) {
        return Err(ScramError::Malformed("message contains a NUL byte"));
    }
    std::str::from_utf8(message).map_err(|_| ScramError::Malformed("message is not valid UTF-8"))
}

/// Reads `attr=value` pairs separated by commas, left to right.
pub(super) struct Attributes<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Attributes<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Attributes { text, pos: 0 }
    }

    /// Byte offset of the next attribute.
    pub(super) fn position(&self) -> usize {
        self.pos
    }

    /// True once the last attribute has been read.
    pub(super) fn at_end(&self) -> bool {
        self.pos > self.text.len()
    }

    /// The next `x=value`, whatever its letter.
    pub(super) fn next_any(&mut self) -> Result<(u8, &'a str), ScramError> {
        let rest = self
            .text
            .get(self.pos..)
            .ok_or(ScramError::Malformed("unexpected end of message"))?;
        let item = rest.split(',').next().unwrap_or("");
        self.pos += item.len() + 1;
        match item.as_bytes() {
            [name, b'=', ..] if name.is_ascii_alphabetic() => Ok((*name, &item[2..])),
            _ => Err(ScramError::Malformed(
                "expected an attribute of the form x=value",
            )),
        }
    }

    /// The next attribute, which must be `name`; `missing` is the error detail.
    pub(super) fn expect(
        &mut self,
        name: u8,
        missing: &'static str,
    ) -> Result<&'a str, ScramError> {
        match self.next_any() {
            Ok((found, value)) if found == name => Ok(value),
            _ => Err(ScramError::Malformed(missing)),
        }
    }
}

/// A nonce per RFC 5802: printable ASCII except ',', at least one character.
pub(super) fn is_valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// A fresh per-process seed for [`ScramServer::new`]'s mock salts.
pub fn new_mock_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut seed);
    seed
}

/// The result of a successful exchange.
pub struct ScramSuccess {
    /// `v=<ServerSignature>`, for AuthenticationSASLFinal.
    pub server_final: Vec<u8>,
    /// The client's ClientKey, recovered from its proof: lets the pooler log
    /// in to PostgreSQL as this user with no plaintext password.
    pub client_key: [u8; KEY_LEN],
}

impl fmt::Debug for ScramSuccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramSuccess").finish_non_exhaustive()
    }
}

enum State {
    AwaitingClientFirst,
    AwaitingClientFinal {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        /// base64 of the gs2 header the client sent: "biws" for "n,,", "eSws" for "y,,".
        cbind: &'static str,
    },
    Finished,
}

/// One SCRAM-SHA-256 exchange, server side.
pub struct ScramServer {
    secret: ScramSecret,
    /// Unknown user: the exchange runs to the end and then fails, so a client
    /// cannot tell unknown users from wrong passwords.
    doomed: bool,
    server_nonce: String,
    state: State,
}

impl fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramServer").finish_non_exhaustive()
    }
}

impl ScramServer {
    /// Starts an exchange for `user`; `secret` None runs a mock exchange that
    /// fails at the end, with a salt derived from `user` and `mock_seed` (see [`new_mock_seed`]).
    pub fn new(user: &str, secret: Option<ScramSecret>, mock_seed: &[u8; 32]) -> ScramServer {
        // ThreadRng is a CSPRNG seeded from the OS; it spares a getrandom
        // syscall per login.
        let mut raw = [0u8; SERVER_NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut raw);
        Self::with_server_nonce(user, secret, mock_seed, crypto::b64_encode(&raw))
    }

    /// Test hook: a chosen server nonce (tests reproduce RFC 7677's exchange).
    pub(super) fn with_server_nonce(
        user: &str,
        secret: Option<ScramSecret>,
        mock_seed: &[u8; 32],
        server_nonce: String,
    ) -> ScramServer {
        let doomed = secret.is_none();
        let secret = secret.unwrap_or_else(|| mock_secret(user, mock_seed));
        ScramServer {
            secret,
            doomed,
            server_nonce,
            state: State::AwaitingClientFirst,
        }
    }

    /// Parses client-first-message and returns server-first-message.
    pub fn handle_client_first(&mut self, client_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        // Any error ends the exchange: the state stays Finished.
        if !matches!(
            mem::replace(&mut self.state, State::Finished),
            State::AwaitingClientFirst
        ) {
            return Err(ScramError::OutOfOrder);
        }
        let text = message_text(client_first)?;
        let (cbind, rest) = if let Some(rest) = text.strip_prefix("n,") {
            ("biws", rest)
        } else if let Some(rest) = text.strip_prefix("y,") {
            // "y": the client could do channel binding but thinks we cannot.
            // That is true: we never offer SCRAM-SHA-256-PLUS.
            ("eSws", rest)
        } else if text.starts_with("p=") {
            return Err(ScramError::Malformed(
                "the client selected SCRAM-SHA-256 without channel binding, \
                 but the message includes channel binding data",
            ));
        } else {
            return Err(ScramError::Malformed("unexpected channel-binding flag"));
        };
        if rest.starts_with('a') {
            return Err(ScramError::Unsupported(
                "client uses authorization identity, but it is not supported",
            ));
        }
        let client_first_bare = rest.strip_prefix(',').ok_or(ScramError::Malformed(
            "unexpected attribute in client-first-message",
        ))?;
        if client_first_bare.starts_with('m') {
            return Err(ScramError::Unsupported(
                "client requires an unsupported SCRAM extension",
            ));
        }
        let mut attrs = Attributes::new(client_first_bare);
        // The user name is ignored, as PostgreSQL does: the startup packet's counts.
        attrs.expect(b'n', "expected attribute \"n\"")?;
        let client_nonce = attrs.expect(b'r', "expected attribute \"r\"")?;
        if !is_valid_nonce(client_nonce) {
            return Err(ScramError::Malformed(
                "non-printable characters in SCRAM nonce",
            ));
        }
        // Optional extensions after the nonce are ignored, but must be well-formed.
        while !attrs.at_end() {
            attrs.next_any()?;
        }
        let nonce = format!("{client_nonce}{}", self.server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            crypto::b64_encode(&self.secret.salt),
            self.secret.iterations
        );
        let reply = server_first.clone().into_bytes();
        self.state = State::AwaitingClientFinal {
            client_first_bare: client_first_bare.to_string(),
            server_first,
            nonce,
            cbind,
        };
        Ok(reply)
    }

    /// Parses client-final-message, checks the proof and returns server-final-message.
    pub fn handle_client_final(&mut self, client_final: &[u8]) -> Result<ScramSuccess, ScramError> {
        let State::AwaitingClientFinal {
            client_first_bare,
            server_first,
            nonce,
            cbind,
        } = mem::replace(&mut self.state, State::Finished)
        else {
            return Err(ScramError::OutOfOrder);
        };
        let text = message_text(client_final)?;
        let mut attrs = Attributes::new(text);
        if attrs.expect(b'c', "expected attribute \"c\"")? != cbind {
            return Err(ScramError::Malformed(
                "unexpected channel-binding attribute in client-final-message",
            ));
        }
        if attrs.expect(b'r', "expected attribute \"r\"")? != nonce {
            return Err(ScramError::NonceMismatch);
        }
        // Extensions may precede the proof, which must be the last attribute.
        let (without_proof, proof) = loop {
            if attrs.at_end() {
                return Err(ScramError::Malformed(
                    "could not find proof in client-final-message",
                ));
            }
            let start = attrs.position();
            if let (b'p', proof) = attrs.next_any()? {
                // `start` follows a comma, so `start - 1` is that comma.
                break (&text[..start - 1], proof);
            }
        };
        if !attrs.at_end() {
            return Err(ScramError::Malformed(
                "garbage found at the end of client-final-message",
            ));
        }
        let proof = crypto::b64_decode_key(proof).ok_or(ScramError::Malformed(
            "malformed proof in client-final-message",
        ))?;

        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = crypto::hmac(&self.secret.stored_key, &[auth_message.as_bytes()]);
        let client_key = crypto::xor(&proof, &client_signature);
        let stored_key = crypto::sha256(&[&client_key]);
        // The doomed check comes after the same work, so timing does not
        // reveal whether the user exists.
        if !crypto::ct_eq(&stored_key, &self.secret.stored_key) | self.doomed {
            return Err(ScramError::InvalidProof);
        }
        let server_signature = crypto::hmac(&self.secret.server_key, &[auth_message.as_bytes()]);
        Ok(ScramSuccess {
            server_final: format!("v={}", crypto::b64_encode(&server_signature)).into_bytes(),
            client_key,
        })
    }
}

/// PostgreSQL's scram_mock_salt: H(user + per-process seed), so probing the
/// same unknown user twice gives the same salt, as for a real user.
fn mock_secret(user: &str, seed: &[u8; 32]) -> ScramSecret {
    let digest = crypto::sha256(&[user.as_bytes(), seed]);
    let mut stored_key = [0u8; KEY_LEN];
    rand::rngs::OsRng.fill_bytes(&mut stored_key);
    ScramSecret {
        iterations: SCRAM_DEFAULT_ITERATIONS,
        salt: digest[..SCRAM_DEFAULT_SALT_LEN].to_vec(),
        stored_key,
        server_key: [0; KEY_LEN],
    }
}
