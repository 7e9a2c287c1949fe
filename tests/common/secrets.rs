//! Auth-file secrets built the way PostgreSQL builds them, so a test can
//! choose the SCRAM iteration count (PostgreSQL 15 cannot).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use md5::Md5;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(msg);
    mac.finalize().into_bytes().to_vec()
}

/// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` for
/// `password` (ASCII passwords only: no SASLprep).
pub fn scram_secret(password: &str, salt: &[u8], iterations: u32) -> String {
    let mut salted = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut salted);
    let client_key = hmac(&salted, b"Client Key");
    let stored_key = Sha256::digest(&client_key);
    let server_key = hmac(&salted, b"Server Key");
    format!(
        "SCRAM-SHA-256${iterations}:{}${}:{}",
        B64.encode(salt),
        B64.encode(stored_key),
        B64.encode(server_key)
    )
}

/// `md5` + hex(md5(password || user)), as in pg_authid.
pub fn md5_secret(user: &str, password: &str) -> String {
    let digest = Md5::digest(format!("{password}{user}"));
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("md5{hex}")
}
