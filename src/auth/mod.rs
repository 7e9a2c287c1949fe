//! Client authentication and credential sources. Pure computation: the
//! caller (the `client` and `backend` modules) does the I/O.
//!
//! # Authenticating a client
//!
//! The auth file ([`AuthFile`], PgBouncer's `userlist.txt` format) gives each
//! user a [`Secret`]: a plaintext password, an md5 hash, or a SCRAM-SHA-256
//! secret copied from `pg_authid`. A plaintext password is turned into a
//! SCRAM secret once, at load, so a SCRAM login never runs PBKDF2 on the
//! pooler; loading therefore belongs in `spawn_blocking`.
//!
//! - `trust`: no exchange.
//! - `md5`: [`md5_verify`] checks the client's salted response against a
//!   plaintext or md5 secret. For a SCRAM-only secret md5 cannot be checked,
//!   and it answers [`Md5Outcome::UseScram`]: run SCRAM instead, exactly as
//!   PostgreSQL does when pg_hba says md5 and the role has a SCRAM secret.
//! - `password` (an hba rule): [`cleartext_verify`] checks a password sent
//!   in the clear against any kind of secret.
//! - `scram-sha-256`: a [`ScramServer`] per login. For a user missing from
//!   the auth file (or with only an md5 secret) it runs a mock exchange with
//!   a salt derived from the user name and a per-process seed
//!   ([`new_mock_seed`]), which fails only at the end, so probing cannot tell
//!   unknown users from wrong passwords. Over TLS SCRAM-SHA-256-PLUS is
//!   offered first ([`scram_mechanisms`]); the client's pick becomes a
//!   [`ServerBinding`], and under -PLUS the exchange checks that the client
//!   bound it to our own certificate (tls-server-end-point).
//!
//! # Logging in to PostgreSQL
//!
//! The pooler is a SCRAM client ([`ScramClient`]) toward PostgreSQL, with a
//! [`ScramCredential`]:
//!
//! - a plaintext password: keys derived by PBKDF2 for the server's salt and
//!   cached in a [`SaltedPasswordCache`], so a pool of N backends pays once;
//! - SCRAM passthrough: when the auth file holds only a pg_authid SCRAM
//!   secret, a successful client exchange yields the client's ClientKey
//!   ([`ScramSuccess::client_key`]); with the secret's ServerKey it logs in
//!   to PostgreSQL as that user ([`ScramCredential::passthrough`]), so no
//!   plaintext password exists anywhere. It works only while the auth file's
//!   secret matches PostgreSQL's (same salt and iteration count).
//!
//! An md5 secret answers PostgreSQL's md5 challenge with
//! [`md5_salted_response`].

mod auth_file;
pub mod channel_binding;
mod cleartext;
mod crypto;
pub mod hba;
mod scram;
mod scram_client;
mod scram_error;
mod scram_plus;
mod secret;

#[cfg(test)]
mod scram_plus_tests;
#[cfg(test)]
mod scram_tests;

pub use auth_file::{AuthFile, AuthFileError, Entry as AuthFileEntry};
pub use cleartext::cleartext_verify;
pub use scram::{new_mock_seed, ScramError, ScramServer, ScramSuccess, MAX_SCRAM_MESSAGE_LEN};
pub use scram_client::{
    SaltedPasswordCache, ScramClient, ScramCredential, ScramKeys, ServerFirst,
    MAX_PASSWORD_ITERATIONS,
};
pub use scram_plus::{mechanisms as scram_mechanisms, ServerBinding};
pub use secret::{
    md5_password_hash, md5_salted_response, md5_verify, Md5Outcome, ScramSecret, Secret,
    SecretError, SCRAM_DEFAULT_ITERATIONS, SCRAM_DEFAULT_SALT_LEN,
};
