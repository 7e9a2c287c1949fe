//! `password` (cleartext) authentication: checking a password the client
//! sent in the clear against any kind of auth-file secret, as PostgreSQL's
//! `plain_crypt_verify` does.

use super::crypto;
use super::secret::{md5_password_hash, ScramSecret, Secret};

/// Whether `password` is `user`'s password under `secret`. A SCRAM secret
/// costs one PBKDF2 (call it off the async workers); the comparisons are
/// constant-time.
pub fn cleartext_verify(secret: &Secret, user: &str, password: &str) -> bool {
    match secret {
        Secret::Plain { password: want, .. } => {
            want.len() == password.len() && crypto::ct_eq(want.as_bytes(), password.as_bytes())
        }
        Secret::Md5 { hash } => {
            let got = md5_password_hash(user, password);
            got.len() == hash.len() && crypto::ct_eq(got.as_bytes(), hash.as_bytes())
        }
        Secret::Scram(scram) => {
            let got = ScramSecret::from_password(password, &scram.salt, scram.iterations);
            crypto::ct_eq(got.stored_key.bytes(), scram.stored_key.bytes())
                && crypto::ct_eq(got.server_key.bytes(), scram.server_key.bytes())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_secret_checks_a_cleartext_password() {
        let plain = Secret::parse("s3cret").unwrap();
        let md5 = Secret::parse(&md5_password_hash("alice", "s3cret")).unwrap();
        let scram = Secret::Scram(ScramSecret::generate("s3cret"));
        for secret in [&plain, &md5, &scram] {
            assert!(cleartext_verify(secret, "alice", "s3cret"));
            assert!(!cleartext_verify(secret, "alice", "s3cret!"));
            assert!(!cleartext_verify(secret, "alice", ""));
        }
        // An md5 secret is salted with its user name.
        assert!(!cleartext_verify(&md5, "bob", "s3cret"));
    }
}
