//! The channel-binding data of SCRAM-SHA-256-PLUS: tls-server-end-point
//! (RFC 5929), the only type PostgreSQL supports.

use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::x509::X509Ref;

/// The hash of the server's certificate with its signature algorithm's hash
/// function, SHA-256 for MD5 and SHA-1, as RFC 5929 and libpq's
/// pgtls_get_peer_certificate_hash have it.
pub fn server_end_point(cert: &X509Ref) -> Result<Vec<u8>, String> {
    let algorithm = cert.signature_algorithm().object().nid();
    let digest = algorithm
        .signature_algorithms()
        .map(|a| a.digest)
        .ok_or("could not determine server certificate signature algorithm")?;
    let md = match digest {
        Nid::MD5 | Nid::SHA1 => MessageDigest::sha256(),
        other => MessageDigest::from_nid(other).ok_or_else(|| {
            format!(
                "could not find digest for NID {}",
                other.short_name().unwrap_or("?")
            )
        })?,
    };
    cert.digest(md)
        .map(|d| d.to_vec())
        .map_err(|e| format!("could not generate peer certificate hash: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::pkey::PKey;
    use openssl::rsa::Rsa;
    use openssl::x509::{X509Builder, X509NameBuilder};

    fn self_signed(md: MessageDigest, rsa: bool) -> openssl::x509::X509 {
        let key = if rsa {
            PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap()
        } else {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
            PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
        };
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "t").unwrap();
        let name = name.build();
        let mut b = X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        b.sign(&key, md).unwrap();
        b.build()
    }

    #[test]
    fn hash_follows_the_signature_algorithm() {
        let cases = [
            (MessageDigest::sha256(), false, MessageDigest::sha256()),
            (MessageDigest::sha384(), false, MessageDigest::sha384()),
            (MessageDigest::sha512(), true, MessageDigest::sha512()),
            // RFC 5929: MD5 and SHA-1 are replaced by SHA-256.
            (MessageDigest::sha1(), true, MessageDigest::sha256()),
        ];
        for (signed_with, rsa, expected) in cases {
            let cert = self_signed(signed_with, rsa);
            let got = server_end_point(&cert).unwrap();
            assert_eq!(got, cert.digest(expected).unwrap().to_vec());
        }
    }
}
