//! The pooler as a SCRAM-SHA-256 client toward PostgreSQL. Unlike
//! postgres-protocol's `ScramSha256`, it works from precomputed keys: either
//! derived from a password once and cached, or the ClientKey recovered from
//! the client's own SCRAM proof, so no plaintext password need exist.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rand::RngCore;

use super::channel_binding::Gs2;
use super::crypto::{self, KEY_LEN};
use super::scram::{is_valid_nonce, message_text, Attributes, ScramError};
use super::secret::ScramSecret;

/// Most PBKDF2 iterations we run for a password, as postgres-protocol's
/// limit, so a server (or an impostor) cannot make a login burn CPU without bound.
pub const MAX_PASSWORD_ITERATIONS: u32 = 100_000;
/// Random bytes in our nonce (base64-encoded on the wire), as libpq.
const CLIENT_NONCE_LEN: usize = 18;

/// ClientKey and ServerKey for one salt and iteration count.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ScramKeys {
    /// HMAC(SaltedPassword, "Client Key").
    pub client_key: [u8; KEY_LEN],
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: [u8; KEY_LEN],
}

impl ScramKeys {
    /// Derives both keys from a password (runs PBKDF2).
    pub fn from_password(password: &str, salt: &[u8], iterations: u32) -> ScramKeys {
        let salted = crypto::salted_password(password, salt, iterations);
        ScramKeys {
            client_key: crypto::client_key(&salted),
            server_key: crypto::server_key(&salted),
        }
    }
}

impl fmt::Debug for ScramKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScramKeys(<redacted>)")
    }
}

/// What the pooler proves its identity to PostgreSQL with.
#[derive(Clone)]
pub enum ScramCredential {
    /// A plaintext password from the auth file.
    Password(String),
    /// Keys valid only for this salt and iteration count.
    Keys {
        /// The salt the keys were derived with.
        salt: Vec<u8>,
        /// The iteration count the keys were derived with.
        iterations: u32,
        /// The keys.
        keys: ScramKeys,
    },
}

impl ScramCredential {
    /// SCRAM passthrough: the ClientKey from a client's successful exchange
    /// against `secret` (a pg_authid copy) plus that secret's ServerKey.
    pub fn passthrough(secret: &ScramSecret, client_key: [u8; KEY_LEN]) -> ScramCredential {
        ScramCredential::Keys {
            salt: secret.salt.clone(),
            iterations: secret.iterations,
            keys: ScramKeys {
                client_key,
                server_key: *secret.server_key.bytes(),
            },
        }
    }

    /// Keys for the salt and count the server asked for. For a password this
    /// may run PBKDF2 (on a `cache` miss): call it in spawn_blocking.
    pub fn keys(
        &self,
        user: &str,
        server: &ServerFirst,
        cache: &SaltedPasswordCache,
    ) -> Result<ScramKeys, ScramError> {
        match self {
            ScramCredential::Password(password) => {
                if server.iterations > MAX_PASSWORD_ITERATIONS {
                    return Err(ScramError::TooManyIterations(server.iterations));
                }
                Ok(cache.keys(user, password, &server.salt, server.iterations))
            }
            ScramCredential::Keys {
                salt,
                iterations,
                keys,
            } => {
                if *salt != server.salt || *iterations != server.iterations {
                    return Err(ScramError::KeysMismatch);
                }
                Ok(*keys)
            }
        }
    }
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScramCredential::Password(_) => f.write_str("ScramCredential::Password(<redacted>)"),
            ScramCredential::Keys { iterations, .. } => f
                .debug_struct("ScramCredential::Keys")
                .field("iterations", iterations)
                .finish_non_exhaustive(),
        }
    }
}

/// The parameters from server-first-message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFirst {
    /// The user's salt.
    pub salt: Vec<u8>,
    /// The user's PBKDF2 iteration count.
    pub iterations: u32,
}

enum State {
    AwaitingServerFirst,
    HaveServerFirst {
        server_first: String,
        nonce: String,
    },
    AwaitingServerFinal {
        server_signature: [u8; KEY_LEN],
    },
    /// The server's signature checked out.
    Verified,
    Finished,
}

/// One SCRAM-SHA-256(-PLUS) exchange, client side.
pub struct ScramClient {
    client_nonce: String,
    client_first_bare: String,
    gs2: Gs2,
    state: State,
}

impl fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramClient").finish_non_exhaustive()
    }
}

impl ScramClient {
    /// Starts an exchange with the gs2 header `gs2` (see
    /// [`super::channel_binding::select`]); returns the client-first-message,
    /// e.g. `n,,n=,r=<nonce>`. Name it with [`ScramClient::mechanism`].
    pub fn new(gs2: Gs2) -> (ScramClient, Vec<u8>) {
        let mut raw = [0u8; CLIENT_NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut raw);
        // Empty user name, as libpq: PostgreSQL takes it from the startup packet.
        Self::with_nonce("", crypto::b64_encode(&raw), gs2)
    }

    /// Test hook: a chosen user name (already SASL-escaped) and nonce.
    pub(super) fn with_nonce(user: &str, client_nonce: String, gs2: Gs2) -> (ScramClient, Vec<u8>) {
        let client_first_bare = format!("n={user},r={client_nonce}");
        let message = format!("{}{client_first_bare}", gs2.header()).into_bytes();
        let client = ScramClient {
            client_nonce,
            client_first_bare,
            gs2,
            state: State::AwaitingServerFirst,
        };
        (client, message)
    }

    /// The SASL mechanism this exchange is: SCRAM-SHA-256 or -PLUS.
    pub fn mechanism(&self) -> &'static str {
        self.gs2.mechanism()
    }

    /// Whether the exchange was channel-bound and the server's signature
    /// over it checked out (libpq's pg_fe_scram_channel_bound).
    pub fn channel_bound(&self) -> bool {
        matches!(self.gs2, Gs2::ServerEndPoint(_)) && matches!(self.state, State::Verified)
    }

    /// Parses server-first-message; returns the salt and iteration count to derive keys for.
    pub fn handle_server_first(&mut self, server_first: &[u8]) -> Result<ServerFirst, ScramError> {
        if !matches!(mem_take(&mut self.state), State::AwaitingServerFirst) {
            return Err(ScramError::OutOfOrder);
        }
        let text = message_text(server_first)?;
        if text.starts_with('m') {
            return Err(ScramError::Unsupported(
                "server requires an unsupported SCRAM extension",
            ));
        }
        let mut attrs = Attributes::new(text);
        let nonce = attrs.expect(b'r', "expected attribute \"r\"")?;
        let salt = attrs.expect(b's', "expected attribute \"s\"")?;
        let iterations = attrs.expect(b'i', "expected attribute \"i\"")?;
        while !attrs.at_end() {
            attrs.next_any()?;
        }
        // The server's nonce must extend ours, or this is a replay.
        if !is_valid_nonce(nonce)
            || nonce.len() <= self.client_nonce.len()
            || !nonce.starts_with(&self.client_nonce)
        {
            return Err(ScramError::NonceMismatch);
        }
        let salt =
            crypto::b64_decode(salt)
                .filter(|s| !s.is_empty())
                .ok_or(ScramError::Malformed(
                    "invalid salt in server-first-message",
                ))?;
        let iterations =
            iterations
                .parse::<u32>()
                .ok()
                .filter(|&i| i > 0)
                .ok_or(ScramError::Malformed(
                    "invalid iteration count in server-first-message",
                ))?;
        self.state = State::HaveServerFirst {
            server_first: text.to_string(),
            nonce: nonce.to_string(),
        };
        Ok(ServerFirst { salt, iterations })
    }

    /// Builds client-final-message with the proof made from `keys`.
    pub fn client_final(&mut self, keys: &ScramKeys) -> Result<Vec<u8>, ScramError> {
        let State::HaveServerFirst {
            server_first,
            nonce,
        } = mem_take(&mut self.state)
        else {
            return Err(ScramError::OutOfOrder);
        };
        // c= carries the gs2 header (and, for -PLUS, the certificate hash)
        // into the signed AuthMessage: "biws" is base64 of "n,,".
        let cbind = crypto::b64_encode(&self.gs2.cbind_input());
        let without_proof = format!("c={cbind},r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let stored_key = crypto::sha256(&[&keys.client_key]);
        let client_signature = crypto::hmac(&stored_key, &[auth_message.as_bytes()]);
        let proof = crypto::xor(&keys.client_key, &client_signature);
        self.state = State::AwaitingServerFinal {
            server_signature: crypto::hmac(&keys.server_key, &[auth_message.as_bytes()]),
        };
        Ok(format!("{without_proof},p={}", crypto::b64_encode(&proof)).into_bytes())
    }

    /// Checks server-final-message: `v=` must carry the ServerSignature; `e=` is the server's error.
    pub fn verify_server_final(&mut self, server_final: &[u8]) -> Result<(), ScramError> {
        let State::AwaitingServerFinal { server_signature } = self.state else {
            return Err(ScramError::OutOfOrder);
        };
        let text = message_text(server_final)?;
        let mut attrs = Attributes::new(text);
        match attrs.next_any()? {
            (b'e', error) => Err(ScramError::ServerError(error.to_string())),
            (b'v', verifier) => {
                let verifier = crypto::b64_decode_key(verifier).ok_or(ScramError::Malformed(
                    "invalid signature in server-final-message",
                ))?;
                if crypto::ct_eq(&verifier, &server_signature) {
                    self.state = State::Verified;
                    Ok(())
                } else {
                    Err(ScramError::InvalidServerSignature)
                }
            }
            _ => Err(ScramError::Malformed("expected attribute \"v\" or \"e\"")),
        }
    }
}

/// Takes the state, leaving Finished, so any error ends the exchange.
fn mem_take(state: &mut State) -> State {
    std::mem::replace(state, State::Finished)
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    user: String,
    salt: Vec<u8>,
    iterations: u32,
    /// HMAC of the password under a per-cache random key: a changed password
    /// misses, and the map holds no plain hash of any password.
    password_tag: [u8; KEY_LEN],
}

#[derive(Default)]
struct CacheInner {
    map: HashMap<CacheKey, ScramKeys>,
    /// Insertion order, for evicting the oldest entry when full.
    order: VecDeque<CacheKey>,
}

/// PBKDF2 results per (user, salt, iterations, password), so a pool that
/// opens many backends for one user pays for PBKDF2 once.
pub struct SaltedPasswordCache {
    cap: usize,
    tag_key: [u8; KEY_LEN],
    inner: Mutex<CacheInner>,
    computations: AtomicU64,
}

impl fmt::Debug for SaltedPasswordCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaltedPasswordCache")
            .field("cap", &self.cap)
            .field("computations", &self.computations())
            .finish_non_exhaustive()
    }
}

impl SaltedPasswordCache {
    /// An empty cache holding at most `cap` entries (0 disables caching).
    pub fn new(cap: usize) -> Self {
        let mut tag_key = [0u8; KEY_LEN];
        rand::rngs::OsRng.fill_bytes(&mut tag_key);
        SaltedPasswordCache {
            cap,
            tag_key,
            inner: Mutex::new(CacheInner::default()),
            computations: AtomicU64::new(0),
        }
    }

    fn key(&self, user: &str, password: &str, salt: &[u8], iterations: u32) -> CacheKey {
        CacheKey {
            user: user.to_string(),
            salt: salt.to_vec(),
            iterations,
            password_tag: crypto::hmac(&self.tag_key, &[password.as_bytes()]),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // A panic elsewhere cannot leave the map half-updated in a way that
        // matters (worst case a missing entry), so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The keys if cached; never runs PBKDF2.
    pub fn get_cached(
        &self,
        user: &str,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Option<ScramKeys> {
        let key = self.key(user, password, salt, iterations);
        self.lock().map.get(&key).copied()
    }

    /// The keys, running PBKDF2 on a miss (call in spawn_blocking; bound
    /// `iterations` first, as [`ScramCredential::keys`] does).
    pub fn keys(&self, user: &str, password: &str, salt: &[u8], iterations: u32) -> ScramKeys {
        let key = self.key(user, password, salt, iterations);
        if let Some(keys) = self.lock().map.get(&key) {
            return *keys;
        }
        // PBKDF2 runs without the lock so other users are not held up; two
        // concurrent misses for one user may both compute, which is harmless.
        let keys = ScramKeys::from_password(password, salt, iterations);
        self.computations.fetch_add(1, Ordering::Relaxed);
        if self.cap == 0 {
            return keys;
        }
        let mut inner = self.lock();
        if inner.map.insert(key.clone(), keys).is_none() {
            inner.order.push_back(key);
            while inner.order.len() > self.cap {
                if let Some(oldest) = inner.order.pop_front() {
                    inner.map.remove(&oldest);
                }
            }
        }
        keys
    }

    /// How many times PBKDF2 ran (cache misses), for statistics.
    pub fn computations(&self) -> u64 {
        self.computations.load(Ordering::Relaxed)
    }
}
