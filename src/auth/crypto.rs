//! The SCRAM-SHA-256 primitives shared by the server side ([`super::scram`]),
//! the client side ([`super::scram_client`]) and secret loading
//! ([`super::secret`]), so the formulas of RFC 5802 section 3 live in one place.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Length of every SCRAM-SHA-256 key, signature and proof.
pub(crate) const KEY_LEN: usize = 32;

/// HMAC-SHA-256 over the concatenation of `parts`.
pub(crate) fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; KEY_LEN] {
    finish(keyed(key), parts)
}

/// An HMAC-SHA-256 state keyed with `key`.
fn keyed(key: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length (long keys are hashed), so this cannot fail.
    <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length")
}

/// Hashes `parts` into a keyed state and returns the MAC.
fn finish(mut mac: Hmac<Sha256>, parts: &[&[u8]]) -> [u8; KEY_LEN] {
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// A SCRAM key together with its HMAC-SHA-256 state, the key's two pads
/// already hashed: a secret's StoredKey and ServerKey sign an AuthMessage
/// at every login, and this spares two of the compression rounds of each
/// signature (the pads do not depend on the message).
#[derive(Clone)]
pub struct MacKey {
    key: [u8; KEY_LEN],
    keyed: Hmac<Sha256>,
}

impl MacKey {
    /// Keys the HMAC state once.
    pub fn new(key: [u8; KEY_LEN]) -> MacKey {
        MacKey {
            key,
            keyed: keyed(&key),
        }
    }

    /// The key itself.
    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// HMAC-SHA-256 under this key over the concatenation of `parts`; the
    /// same as [`hmac`] with [`MacKey::bytes`].
    pub fn sign(&self, parts: &[&[u8]]) -> [u8; KEY_LEN] {
        finish(self.keyed.clone(), parts)
    }
}

impl PartialEq for MacKey {
    fn eq(&self, other: &MacKey) -> bool {
        ct_eq(&self.key, &other.key)
    }
}

impl Eq for MacKey {}

/// SHA-256, the H() of RFC 5802.
pub(crate) fn sha256(parts: &[&[u8]]) -> [u8; KEY_LEN] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part);
    }
    hash.finalize().into()
}

/// Bytewise XOR of two keys.
pub(crate) fn xor(a: &[u8; KEY_LEN], b: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    std::array::from_fn(|i| a[i] ^ b[i])
}

/// Constant-time equality, so a comparison does not leak how many leading
/// bytes of a proof or signature were right.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// SASLprep the password as PostgreSQL and libpq do (pg_saslprep): if it
/// contains characters SASLprep prohibits, the raw bytes are used instead,
/// because PostgreSQL passwords are arbitrary strings. This is what
/// postgres-protocol's (private) `normalize` does, with the same crate.
pub(crate) fn normalize_password(password: &str) -> Vec<u8> {
    match stringprep::saslprep(password) {
        Ok(prepared) => prepared.into_owned().into_bytes(),
        Err(_) => password.as_bytes().to_vec(),
    }
}

/// SaltedPassword = Hi(Normalize(password), salt, i), Hi being PBKDF2-HMAC-SHA-256.
/// This is the expensive step (4096 HMACs by default): callers run it off the
/// async executor.
pub(crate) fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; KEY_LEN] {
    let mut out = [0u8; KEY_LEN];
    pbkdf2::pbkdf2_hmac::<Sha256>(&normalize_password(password), salt, iterations, &mut out);
    out
}

/// ClientKey = HMAC(SaltedPassword, "Client Key").
pub(crate) fn client_key(salted_password: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    hmac(salted_password, &[b"Client Key"])
}

/// ServerKey = HMAC(SaltedPassword, "Server Key").
pub(crate) fn server_key(salted_password: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    hmac(salted_password, &[b"Server Key"])
}

/// Standard base64 with padding, as SCRAM and pg_authid use.
pub(crate) fn b64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// [`b64_encode`] appended to `out`.
pub(crate) fn b64_encode_into(bytes: &[u8], out: &mut String) {
    STANDARD.encode_string(bytes, out)
}

/// Decodes standard base64; `None` on any error, so that no caller can echo
/// the offending (possibly secret) character into an error message.
pub(crate) fn b64_decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

/// Decodes base64 that must hold exactly one 32-byte key.
pub(crate) fn b64_decode_key(text: &str) -> Option<[u8; KEY_LEN]> {
    // 44 characters of padded base64 hold exactly 32 bytes; anything else
    // is refused before decoding (no allocation for a key).
    if text.len() != 44 {
        return None;
    }
    let mut key = [0u8; KEY_LEN];
    match STANDARD.decode_slice(text, &mut key) {
        Ok(KEY_LEN) => Some(key),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore};

    /// A keyed state signs as HMAC from scratch does, for messages cut into
    /// parts anywhere (empty parts and block boundaries included), and a
    /// state signs any number of times without carrying anything over.
    #[test]
    fn a_mac_key_signs_as_hmac_from_scratch() {
        let mut rng = rand::thread_rng();
        for _ in 0..200 {
            let mut key = [0u8; KEY_LEN];
            rng.fill_bytes(&mut key);
            let k = MacKey::new(key);
            assert_eq!(k.bytes(), &key);
            for _ in 0..3 {
                let mut msg = vec![0u8; rng.gen_range(0..300)];
                rng.fill_bytes(&mut msg);
                let cut = rng.gen_range(0..=msg.len());
                let parts: [&[u8]; 3] = [&msg[..cut], b"", &msg[cut..]];
                assert_eq!(k.sign(&parts), hmac(&key, &parts));
            }
        }
        // RFC 4231 test case 2: HMAC zero-pads a short key, so "Jefe" and
        // "Jefe" followed by zeros up to 32 bytes are the same key.
        let mut jefe = [0u8; KEY_LEN];
        jefe[..4].copy_from_slice(b"Jefe");
        let want: [u8; KEY_LEN] = [
            0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95,
            0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9,
            0x64, 0xec, 0x38, 0x43,
        ];
        assert_eq!(
            MacKey::new(jefe).sign(&[b"what do ya ", b"want for nothing?"]),
            want
        );
        assert!(MacKey::new([1; KEY_LEN]) != MacKey::new([2; KEY_LEN]));
    }

    /// A key decodes from exactly the base64 of 32 bytes, as the general
    /// decoder reads it; every other length, padding or alphabet is refused.
    #[test]
    fn a_key_decodes_only_from_the_base64_of_32_bytes() {
        let mut rng = rand::thread_rng();
        for len in 0..48 {
            let mut raw = vec![0u8; len];
            rng.fill_bytes(&mut raw);
            let text = b64_encode(&raw);
            let want: Option<[u8; KEY_LEN]> = raw.clone().try_into().ok();
            assert_eq!(b64_decode_key(&text), want, "{len} bytes");
            // Padding dropped or doubled: never a key.
            let unpadded = text.trim_end_matches('=');
            if unpadded.len() != text.len() {
                assert_eq!(b64_decode_key(unpadded), None);
            }
            assert_eq!(b64_decode_key(&format!("{text}=")), None);
        }
        let key = b64_encode(&[7u8; KEY_LEN]);
        for bad in [
            key.replace('=', "A"),
            format!("{}*{}", &key[..10], &key[11..]),
            format!(" {}", &key[1..]),
            key[..43].to_string(),
        ] {
            assert_eq!(b64_decode_key(&bad), None, "{bad}");
        }
        // The general decoder agrees on every edit of one character.
        for at in 0..key.len() {
            for c in [b'A', b'/', b'+', b'=', b'-', b'\0', 0xff] {
                let mut edited = key.clone().into_bytes();
                edited[at] = c;
                let Ok(text) = String::from_utf8(edited) else {
                    continue;
                };
                let general = b64_decode(&text).and_then(|v| <[u8; KEY_LEN]>::try_from(v).ok());
                assert_eq!(b64_decode_key(&text), general, "{text:?}");
            }
        }
    }
}
