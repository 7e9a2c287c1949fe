//! Credentials as the auth file holds them: plaintext passwords, md5 hashes
//! and SCRAM-SHA-256 secrets in PostgreSQL's `pg_authid` format, plus the md5
//! challenge-response arithmetic.

use std::fmt;

use md5::{Digest, Md5};
use rand::RngCore;

use super::crypto::{self, MacKey, KEY_LEN};

/// Salt length PostgreSQL uses for new SCRAM secrets (SCRAM_DEFAULT_SALT_LEN).
pub const SCRAM_DEFAULT_SALT_LEN: usize = 16;
/// Iteration count PostgreSQL uses for new SCRAM secrets (scram_iterations).
pub const SCRAM_DEFAULT_ITERATIONS: u32 = 4096;

pub(super) const SCRAM_PREFIX: &str = "SCRAM-SHA-256$";

/// Why a stored secret could not be parsed; never contains the secret itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The SCRAM secret does not have the `SCRAM-SHA-256$<iter>:<salt>$<stored>:<server>` shape.
    #[error("invalid SCRAM secret: {0}")]
    InvalidScram(&'static str),
}

/// A SCRAM-SHA-256 verifier: what `pg_authid.rolpassword` stores.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramSecret {
    /// PBKDF2 iteration count.
    pub iterations: u32,
    /// The salt, raw bytes.
    pub salt: Vec<u8>,
    /// StoredKey = H(ClientKey), keyed for the ClientSignature.
    pub stored_key: MacKey,
    /// ServerKey = HMAC(SaltedPassword, "Server Key"), keyed for the
    /// ServerSignature.
    pub server_key: MacKey,
}

impl ScramSecret {
    /// Whether `client_key` is this secret's (StoredKey = H(ClientKey)).
    pub fn proves(&self, client_key: &[u8; KEY_LEN]) -> bool {
        crypto::ct_eq(&crypto::sha256(&[client_key]), self.stored_key.bytes())
    }

    /// Parses `SCRAM-SHA-256$<iter>:<base64 salt>$<base64 StoredKey>:<base64 ServerKey>`.
    pub fn parse(text: &str) -> Result<ScramSecret, SecretError> {
        let bad = SecretError::InvalidScram;
        let rest = text
            .strip_prefix(SCRAM_PREFIX)
            .ok_or(bad("missing \"SCRAM-SHA-256$\" prefix"))?;
        let (iter_salt, keys) = rest
            .split_once('$')
            .ok_or(bad("missing '$' before the keys"))?;
        let (iterations, salt) = iter_salt
            .split_once(':')
            .ok_or(bad("missing ':' between iterations and salt"))?;
        let (stored_key, server_key) = keys
            .split_once(':')
            .ok_or(bad("missing ':' between StoredKey and ServerKey"))?;
        // PostgreSQL stores the count as a positive int.
        let iterations = iterations
            .parse::<u32>()
            .ok()
            .filter(|i| (1..=i32::MAX as u32).contains(i))
            .ok_or(bad("iteration count is not a positive integer"))?;
        let salt = crypto::b64_decode(salt)
            .filter(|s| !s.is_empty())
            .ok_or(bad("salt is not valid base64"))?;
        let stored_key =
            crypto::b64_decode_key(stored_key).ok_or(bad("StoredKey is not 32 bytes of base64"))?;
        let server_key =
            crypto::b64_decode_key(server_key).ok_or(bad("ServerKey is not 32 bytes of base64"))?;
        Ok(ScramSecret {
            iterations,
            salt,
            stored_key: MacKey::new(stored_key),
            server_key: MacKey::new(server_key),
        })
    }

    /// Derives the secret PostgreSQL would store for `password` with this salt and count.
    /// Runs PBKDF2: keep it off the async executor.
    pub fn from_password(password: &str, salt: &[u8], iterations: u32) -> ScramSecret {
        let salted = crypto::salted_password(password, salt, iterations);
        ScramSecret {
            iterations,
            salt: salt.to_vec(),
            stored_key: MacKey::new(crypto::sha256(&[&crypto::client_key(&salted)])),
            server_key: MacKey::new(crypto::server_key(&salted)),
        }
    }

    /// Like [`ScramSecret::from_password`] with a fresh random salt and PostgreSQL's defaults.
    pub fn generate(password: &str) -> ScramSecret {
        let mut salt = [0u8; SCRAM_DEFAULT_SALT_LEN];
        rand::rngs::OsRng.fill_bytes(&mut salt);
        ScramSecret::from_password(password, &salt, SCRAM_DEFAULT_ITERATIONS)
    }

    /// The `pg_authid` text form; deliberately not `Display`, so it cannot end up in a log by accident.
    pub fn to_pg_format(&self) -> String {
        format!(
            "{SCRAM_PREFIX}{}:{}${}:{}",
            self.iterations,
            crypto::b64_encode(&self.salt),
            crypto::b64_encode(self.stored_key.bytes()),
            crypto::b64_encode(self.server_key.bytes())
        )
    }
}

impl fmt::Debug for ScramSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramSecret")
            .field("iterations", &self.iterations)
            .field("salt_len", &self.salt.len())
            .finish_non_exhaustive()
    }
}

/// One user's credential from the auth file.
#[derive(Clone)]
pub enum Secret {
    /// A plaintext password, with the SCRAM secret derived from it once at load,
    /// so a SCRAM login never runs PBKDF2 on the pooler.
    Plain {
        /// The password as written in the auth file.
        password: String,
        /// Derived with a random salt and PostgreSQL's default iteration count.
        scram: ScramSecret,
    },
    /// `"md5" + hex(md5(password + user))`, as PostgreSQL's md5 passwords.
    Md5 {
        /// The hash including its `md5` prefix.
        hash: String,
    },
    /// A SCRAM-SHA-256 secret copied from `pg_authid`.
    Scram(ScramSecret),
}

impl Secret {
    /// Classifies an auth-file secret as PostgreSQL's get_password_type does; runs PBKDF2 for plaintext.
    ///
    /// Unlike PostgreSQL, a value that starts with `SCRAM-SHA-256$` but does
    /// not parse is an error rather than a plaintext password: it is almost
    /// certainly a damaged copy of a pg_authid secret, and accepting it as a
    /// password would fail every login with no hint why.
    pub fn parse(text: &str) -> Result<Secret, SecretError> {
        if text.starts_with(SCRAM_PREFIX) {
            return ScramSecret::parse(text).map(Secret::Scram);
        }
        if is_md5_hash(text) {
            return Ok(Secret::Md5 {
                hash: text.to_string(),
            });
        }
        Ok(Secret::Plain {
            password: text.to_string(),
            scram: ScramSecret::generate(text),
        })
    }

    /// The SCRAM secret to authenticate a client with, if this credential has one.
    pub fn scram(&self) -> Option<&ScramSecret> {
        match self {
            Secret::Plain { scram, .. } | Secret::Scram(scram) => Some(scram),
            Secret::Md5 { .. } => None,
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Plain { .. } => f.write_str("Secret::Plain(<redacted>)"),
            Secret::Md5 { .. } => f.write_str("Secret::Md5(<redacted>)"),
            Secret::Scram(s) => f.debug_tuple("Secret::Scram").field(s).finish(),
        }
    }
}

/// PostgreSQL's test: "md5" followed by exactly 32 lowercase hex digits.
fn is_md5_hash(text: &str) -> bool {
    text.len() == 35
        && text.starts_with("md5")
        && text[3..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What [`md5_verify`] concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md5Outcome {
    /// The client proved it knows the password.
    Accepted,
    /// Wrong password (or a response that is not an md5 response at all).
    Rejected,
    /// The secret is SCRAM-only, so md5 cannot be checked: run SCRAM instead,
    /// as PostgreSQL does when pg_hba says md5 and the role has a SCRAM secret.
    UseScram,
}

/// `"md5" + hex(md5(password + user))`: the md5 secret PostgreSQL stores.
pub fn md5_password_hash(user: &str, password: &str) -> String {
    postgres_protocol::password::md5(password.as_bytes(), user)
}

/// `"md5" + hex(md5(hex_hash + salt))`: the PasswordMessage answering an md5
/// challenge, computed from the stored hash (with or without its `md5` prefix).
/// The same formula serves the client side (checking a client) and the
/// backend side (answering PostgreSQL with an md5 secret from the auth file).
pub fn md5_salted_response(md5_hash: &str, salt: [u8; 4]) -> String {
    let hex_hash = md5_hash.strip_prefix("md5").unwrap_or(md5_hash);
    let mut md5 = Md5::new();
    md5.update(hex_hash.as_bytes());
    md5.update(salt);
    let digest = md5.finalize();
    let mut out = String::with_capacity(35);
    out.push_str("md5");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Checks a client's md5 PasswordMessage (a trailing NUL is tolerated) against `secret`;
/// `user` salts a plaintext password (an md5 secret already contains its user).
pub fn md5_verify(
    secret: &Secret,
    user: &str,
    salt: [u8; 4],
    client_response: &[u8],
) -> Md5Outcome {
    let expected = match secret {
        Secret::Plain { password, .. } => {
            postgres_protocol::authentication::md5_hash(user.as_bytes(), password.as_bytes(), salt)
        }
        Secret::Md5 { hash } => md5_salted_response(hash, salt),
        Secret::Scram(_) => return Md5Outcome::UseScram,
    };
    let response = client_response
        .strip_suffix(&[0])
        .unwrap_or(client_response);
    // The lengths are public (always 35 for a real response); only the
    // content comparison needs to be constant-time.
    if response.len() == expected.len() && crypto::ct_eq(response, expected.as_bytes()) {
        Md5Outcome::Accepted
    } else {
        Md5Outcome::Rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md5_hex(data: &[u8]) -> String {
        Md5::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    // Taken from pg_authid of a PostgreSQL 15 cluster (single-user mode):
    // CREATE ROLE u1 PASSWORD 'pencil' and
    // CREATE ROLE u2 PASSWORD E'p\u00e9ncil\u00a0x\u2163' (SASLprep maps the
    // no-break space to a space and NFKC turns U+2163 into "IV").
    const PG_PENCIL: &str = "SCRAM-SHA-256$4096:0MwDgaBhIMXfEgnbO43uIA==$EH3Rgdgpzu/FT8zQme2q2eCkaVtglxbLEtRVFtO3nio=:7AgzEj4xiOQTQBt+wxu96eb+XpJIZOAnAKp9PDfEMy8=";
    const PG_UNICODE: &str = "SCRAM-SHA-256$4096:9V8kU8aQXMO3XuL4KNNKdg==$J+nqBgRc3HV0IIMSKSyW+IoSeR9AbMZkkVPgMDar8H8=:4z2e9qjI2Xncu4A24kXt15y0PiZEbxcvpXaBTeXyAw4=";
    // CREATE ROLE u3 PASSWORD 'pencil' with password_encryption = md5.
    const PG_MD5_U3: &str = "md59be8ca6530942872ce7292e98ad64683";

    #[test]
    fn scram_secret_matches_postgresql_and_round_trips() {
        for (text, password) in [
            (PG_PENCIL, "pencil"),
            (PG_UNICODE, "p\u{e9}ncil\u{a0}x\u{2163}"),
            (PG_UNICODE, "p\u{e9}ncil xIV"),
        ] {
            let secret = ScramSecret::parse(text).unwrap();
            assert_eq!(secret.iterations, 4096);
            assert_eq!(secret.salt.len(), 16);
            assert_eq!(
                ScramSecret::from_password(password, &secret.salt, 4096),
                secret
            );
            assert_eq!(secret.to_pg_format(), text);
        }
        let generated = postgres_protocol::password::scram_sha_256(b"pencil");
        let secret = ScramSecret::parse(&generated).unwrap();
        assert_eq!(
            ScramSecret::from_password("pencil", &secret.salt, 4096),
            secret
        );
    }

    #[test]
    fn rejects_bad_scram_secrets_without_echoing_them() {
        let (head, keys) = PG_PENCIL.rsplit_once('$').unwrap();
        let (stored, server) = keys.split_once(':').unwrap();
        let cases = [
            String::new(),
            "SCRAM-SHA-256$".to_string(),
            PG_PENCIL.replace("$4096:", "$0:"),
            PG_PENCIL.replace("$4096:", "$-1:"),
            PG_PENCIL.replace("$4096:", "$x:"),
            PG_PENCIL.replace("$4096:0MwDgaBhIMXfEgnbO43uIA==", "$4096:"),
            format!("{head}${stored}"),
            format!("{head}${stored}:{}", &server[4..]),
            format!("{head}${stored}:{server}AAAA"),
            format!("{head}$!{}:{server}", &stored[1..]),
            PG_PENCIL.replace('$', "#"),
        ];
        for case in cases {
            let err = ScramSecret::parse(&case).unwrap_err().to_string();
            for part in ["0MwDgaBhIMXfEgnbO43uIA", &stored[1..], &server[4..]] {
                assert!(!err.contains(part), "{err}");
            }
        }
    }

    #[test]
    fn classifies_secrets() {
        let md5 = md5_password_hash("user", "pencil");
        assert!(matches!(Secret::parse(&md5).unwrap(), Secret::Md5 { .. }));
        assert!(matches!(
            Secret::parse(&md5.to_uppercase()).unwrap(),
            Secret::Plain { .. }
        ));
        let scram = ScramSecret::generate("pencil").to_pg_format();
        assert!(matches!(Secret::parse(&scram).unwrap(), Secret::Scram(_)));
        assert!(Secret::parse("SCRAM-SHA-256$broken").is_err());
        let Secret::Plain { password, scram } = Secret::parse("pencil").unwrap() else {
            panic!("expected a plaintext password");
        };
        assert_eq!(password, "pencil");
        assert_eq!(
            ScramSecret::from_password("pencil", &scram.salt, 4096),
            scram
        );
    }

    #[test]
    fn debug_output_is_redacted() {
        let secrets = [
            Secret::parse("hunter2-password").unwrap(),
            Secret::parse(&md5_password_hash("u", "hunter2")).unwrap(),
            Secret::parse(&ScramSecret::generate("hunter2").to_pg_format()).unwrap(),
        ];
        for secret in &secrets {
            let debug = format!("{secret:?}");
            assert!(!debug.contains("hunter2"));
            assert!(!debug.contains("md5") || debug.contains("Md5"));
            if let Some(scram) = secret.scram() {
                assert!(!debug.contains(&crypto::b64_encode(scram.stored_key.bytes())));
                assert!(!debug.contains(&format!("{:?}", scram.stored_key.bytes())));
            }
        }
    }

    #[test]
    fn md5_hash_and_response() {
        let hash = md5_password_hash("user", "pencil");
        assert_eq!(hash, format!("md5{}", md5_hex(b"penciluser")));
        assert_eq!(md5_password_hash("u3", "pencil"), PG_MD5_U3);
        let salt = [1, 2, 3, 4];
        let mut inner = hash.as_bytes()[3..].to_vec();
        inner.extend_from_slice(&salt);
        let expected = format!("md5{}", md5_hex(&inner));
        assert_eq!(md5_salted_response(&hash, salt), expected);
        assert_eq!(md5_salted_response(&hash[3..], salt), expected);
        // The client library computes the same response from the password.
        let client = postgres_protocol::authentication::md5_hash(b"user", b"pencil", salt);
        assert_eq!(client, expected);
    }

    #[test]
    fn md5_verify_outcomes() {
        let salt = [9, 8, 7, 6];
        let right = postgres_protocol::authentication::md5_hash(b"user", b"pencil", salt);
        let wrong = postgres_protocol::authentication::md5_hash(b"user", b"pencil2", salt);
        let plain = Secret::parse("pencil").unwrap();
        let md5 = Secret::parse(&md5_password_hash("user", "pencil")).unwrap();
        for secret in [&plain, &md5] {
            assert_eq!(
                md5_verify(secret, "user", salt, right.as_bytes()),
                Md5Outcome::Accepted
            );
            let mut with_nul = right.clone().into_bytes();
            with_nul.push(0);
            assert_eq!(
                md5_verify(secret, "user", salt, &with_nul),
                Md5Outcome::Accepted
            );
            assert_eq!(
                md5_verify(secret, "user", salt, wrong.as_bytes()),
                Md5Outcome::Rejected
            );
            assert_eq!(
                md5_verify(secret, "user", [0; 4], right.as_bytes()),
                Md5Outcome::Rejected
            );
            assert_eq!(md5_verify(secret, "user", salt, b""), Md5Outcome::Rejected);
            assert_eq!(
                md5_verify(secret, "user", salt, &[0xff; 35]),
                Md5Outcome::Rejected
            );
        }
        // A plaintext secret is hashed with the login name; an md5 secret
        // already contains the name it was made for.
        assert_eq!(
            md5_verify(&plain, "other", salt, right.as_bytes()),
            Md5Outcome::Rejected
        );
        let scram = Secret::Scram(ScramSecret::generate("pencil"));
        assert_eq!(
            md5_verify(&scram, "user", salt, right.as_bytes()),
            Md5Outcome::UseScram
        );
    }
}
