//! The server side of SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802,
//! RFC 7677), behaving as PostgreSQL's auth-scram.c does toward a client:
//! no I/O, one exchange per [`ScramServer`], every input checked and nothing
//! able to panic. Channel binding is in [`super::scram_plus`].

use std::fmt::{self, Write as _};
use std::mem;
use std::ops::Deref;

use rand::RngCore;

use super::channel_binding::Gs2;
use super::crypto::{self, MacKey, KEY_LEN};
pub use super::scram_error::ScramError;
use super::scram_plus::{self, ServerBinding};
use super::secret::{ScramSecret, SCRAM_DEFAULT_ITERATIONS, SCRAM_DEFAULT_SALT_LEN};

/// Longest SCRAM message accepted, checked before any parsing. Real ones are
/// about 100 bytes; PostgreSQL user names are at most 63 bytes.
pub const MAX_SCRAM_MESSAGE_LEN: usize = 1024;
/// Random bytes in the server nonce, as PostgreSQL's SCRAM_RAW_NONCE_LEN.
const SERVER_NONCE_LEN: usize = 18;

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
    /// in to PostgreSQL as this user with no plaintext password. Binding
    /// does not change it (only the AuthMessage the proof signs), so
    /// passthrough works after -PLUS too.
    pub client_key: [u8; KEY_LEN],
    /// True when the exchange was SCRAM-SHA-256-PLUS (channel-bound).
    pub channel_binding: bool,
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
        /// `r=<nonce>,s=<salt>,i=<iterations>`, the reply sent.
        server_first: String,
        /// How long the combined nonce after `r=` is.
        nonce_len: usize,
        /// The gs2 header the client sent, which `c=` must repeat.
        gs2: Gs2,
    },
    Finished,
}

/// The secret an exchange checks against: the user's, borrowed (a login
/// need not copy its keyed HMAC states), or a mock one for an unknown
/// user, boxed so that the exchange stays small either way.
enum Against<'s> {
    Known(&'s ScramSecret),
    Mock(Box<ScramSecret>),
}

impl Deref for Against<'_> {
    type Target = ScramSecret;

    fn deref(&self) -> &ScramSecret {
        match self {
            Against::Known(s) => s,
            Against::Mock(s) => s,
        }
    }
}

/// One SCRAM-SHA-256 exchange, server side.
pub struct ScramServer<'s> {
    secret: Against<'s>,
    /// Unknown user: the exchange runs to the end and then fails, so a client
    /// cannot tell unknown users from wrong passwords.
    doomed: bool,
    binding: ServerBinding,
    server_nonce: String,
    state: State,
}

impl fmt::Debug for ScramServer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramServer").finish_non_exhaustive()
    }
}

impl<'s> ScramServer<'s> {
    /// Starts an exchange for `user` with the channel binding the client's
    /// mechanism chose ([`ServerBinding::select`]); `secret` None runs a mock
    /// exchange that fails at the end, with a salt derived from `user` and
    /// `mock_seed` (see [`new_mock_seed`]). A mock exchange checks the
    /// binding as a real one does, so -PLUS does not tell users apart either.
    pub fn new(
        user: &str,
        secret: Option<&'s ScramSecret>,
        mock_seed: &[u8; 32],
        binding: ServerBinding,
    ) -> ScramServer<'s> {
        // ThreadRng is a CSPRNG seeded from the OS; it spares a getrandom
        // syscall per login.
        let mut raw = [0u8; SERVER_NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut raw);
        Self::with_server_nonce(user, secret, mock_seed, binding, crypto::b64_encode(&raw))
    }

    /// Test hook: a chosen server nonce (tests reproduce RFC 7677's exchange).
    pub(super) fn with_server_nonce(
        user: &str,
        secret: Option<&'s ScramSecret>,
        mock_seed: &[u8; 32],
        binding: ServerBinding,
        server_nonce: String,
    ) -> ScramServer<'s> {
        let doomed = secret.is_none();
        let secret = match secret {
            Some(s) => Against::Known(s),
            None => Against::Mock(Box::new(mock_secret(user, mock_seed))),
        };
        ScramServer {
            secret,
            doomed,
            binding,
            server_nonce,
            state: State::AwaitingClientFirst,
        }
    }

    /// Parses client-first-message and returns server-first-message.
    pub fn handle_client_first(&mut self, client_first: &[u8]) -> Result<&[u8], ScramError> {
        // Any error ends the exchange: the state stays Finished.
        if !matches!(
            mem::replace(&mut self.state, State::Finished),
            State::AwaitingClientFirst
        ) {
            return Err(ScramError::OutOfOrder);
        }
        let text = message_text(client_first)?;
        let (gs2, rest) = scram_plus::read_cbind_flag(text, &self.binding)?;
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
        // Built in one string: the reply, and (after `r=`) the nonce the
        // client-final-message must repeat.
        let mut server_first = String::with_capacity(
            48 + client_nonce.len() + self.server_nonce.len() + 4 * self.secret.salt.len() / 3,
        );
        server_first.push_str("r=");
        server_first.push_str(client_nonce);
        server_first.push_str(&self.server_nonce);
        let nonce_len = server_first.len() - 2;
        server_first.push_str(",s=");
        crypto::b64_encode_into(&self.secret.salt, &mut server_first);
        // Writing to a String cannot fail.
        let _ = write!(server_first, ",i={}", self.secret.iterations);
        self.state = State::AwaitingClientFinal {
            client_first_bare: client_first_bare.to_string(),
            server_first,
            nonce_len,
            gs2,
        };
        match &self.state {
            State::AwaitingClientFinal { server_first, .. } => Ok(server_first.as_bytes()),
            _ => Err(ScramError::OutOfOrder),
        }
    }

    /// Parses client-final-message, checks the proof and returns server-final-message.
    pub fn handle_client_final(&mut self, client_final: &[u8]) -> Result<ScramSuccess, ScramError> {
        let State::AwaitingClientFinal {
            client_first_bare,
            server_first,
            nonce_len,
            gs2,
        } = mem::replace(&mut self.state, State::Finished)
        else {
            return Err(ScramError::OutOfOrder);
        };
        let text = message_text(client_final)?;
        let mut attrs = Attributes::new(text);
        scram_plus::check_c(attrs.expect(b'c', "expected attribute \"c\"")?, &gs2)?;
        if server_first.get(2..2 + nonce_len)
            != Some(attrs.expect(b'r', "expected attribute \"r\"")?)
        {
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

        // AuthMessage = client-first-bare "," server-first "," client-final-without-proof,
        // signed in parts rather than joined into a string first.
        let auth_message: [&[u8]; 5] = [
            client_first_bare.as_bytes(),
            b",",
            server_first.as_bytes(),
            b",",
            without_proof.as_bytes(),
        ];
        let client_signature = self.secret.stored_key.sign(&auth_message);
        let client_key = crypto::xor(&proof, &client_signature);
        let stored_key = crypto::sha256(&[&client_key]);
        // The doomed check comes after the same work, so timing does not
        // reveal whether the user exists.
        if !crypto::ct_eq(&stored_key, self.secret.stored_key.bytes()) | self.doomed {
            return Err(ScramError::InvalidProof);
        }
        let server_signature = self.secret.server_key.sign(&auth_message);
        Ok(ScramSuccess {
            server_final: {
                let mut v = String::with_capacity(48);
                v.push_str("v=");
                crypto::b64_encode_into(&server_signature, &mut v);
                v.into_bytes()
            },
            client_key,
            channel_binding: self.binding.in_use(),
        })
    }
}

/// PostgreSQL's scram_mock_salt: H(user + per-process seed), so probing the
/// same unknown user twice gives the same salt, as for a real user.
fn mock_secret(user: &str, seed: &[u8; 32]) -> ScramSecret {
    let digest = crypto::sha256(&[user.as_bytes(), seed]);
    let (stored_key, server_key) = MOCK_KEYS
        .get_or_init(|| {
            let mut stored_key = [0u8; KEY_LEN];
            rand::rngs::OsRng.fill_bytes(&mut stored_key);
            (MacKey::new(stored_key), MacKey::new([0; KEY_LEN]))
        })
        .clone();
    ScramSecret {
        iterations: SCRAM_DEFAULT_ITERATIONS,
        salt: digest[..SCRAM_DEFAULT_SALT_LEN].to_vec(),
        stored_key,
        server_key,
    }
}

/// The keys of every mock exchange, keyed once as a real secret's are, so
/// an unknown user's exchange costs what a known user's does. A random
/// StoredKey no proof can match (the exchange is doomed anyway).
static MOCK_KEYS: std::sync::OnceLock<(MacKey, MacKey)> = std::sync::OnceLock::new();
