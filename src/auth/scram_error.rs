//! What can go wrong in a SCRAM exchange, on either side, and the SQLSTATE
//! a client is told.

/// SQLSTATE protocol_violation.
const PROTOCOL_VIOLATION: &str = "08P01";
/// SQLSTATE feature_not_supported.
const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// SQLSTATE invalid_password.
const INVALID_PASSWORD: &str = "28P01";
/// SQLSTATE invalid_authorization_specification.
const INVALID_AUTHORIZATION: &str = "28000";
/// SQLSTATE internal_error.
const INTERNAL_ERROR: &str = "XX000";
/// SQLSTATE connection_failure.
const CONNECTION_FAILURE: &str = "08006";

/// A failed SCRAM exchange, on either side. The texts quote the peer's
/// input at most sanitized (printable ASCII, 30 characters, as PostgreSQL's
/// sanitize_str), so they are safe to log and to send in an ErrorResponse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// The message breaks the SCRAM grammar (SQLSTATE 08P01).
    #[error("malformed SCRAM message ({0})")]
    Malformed(&'static str),
    /// A valid SCRAM feature PostgreSQL does not support (SQLSTATE 0A000).
    #[error("{0}")]
    Unsupported(&'static str),
    /// SASLInitialResponse names a mechanism we did not offer (SQLSTATE 08P01).
    #[error("client selected an invalid SASL authentication mechanism")]
    InvalidMechanism,
    /// `p=` names a channel-binding type other than tls-server-end-point
    /// (SQLSTATE 08P01); the name is sanitized.
    #[error("unsupported SCRAM channel-binding type \"{0}\"")]
    UnsupportedBindingType(String),
    /// `y` over TLS, where -PLUS was offered: a downgrade (SQLSTATE 28000).
    #[error("SCRAM channel binding negotiation error")]
    BindingNegotiation,
    /// `c=` does not carry our certificate's hash (SQLSTATE 28000).
    #[error("SCRAM channel binding check failed")]
    BindingCheckFailed,
    /// Our own certificate could not be hashed (SQLSTATE XX000).
    #[error("could not get server certificate hash: {0}")]
    CertificateHash(String),
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
            ScramError::Malformed(_)
            | ScramError::NonceMismatch
            | ScramError::OutOfOrder
            | ScramError::InvalidMechanism
            | ScramError::UnsupportedBindingType(_) => PROTOCOL_VIOLATION,
            ScramError::Unsupported(_) => FEATURE_NOT_SUPPORTED,
            ScramError::InvalidProof => INVALID_PASSWORD,
            ScramError::BindingNegotiation | ScramError::BindingCheckFailed => {
                INVALID_AUTHORIZATION
            }
            ScramError::CertificateHash(_) => INTERNAL_ERROR,
            ScramError::TooManyIterations(_)
            | ScramError::KeysMismatch
            | ScramError::InvalidServerSignature
            | ScramError::ServerError(_) => CONNECTION_FAILURE,
        }
    }

    /// PostgreSQL's DETAIL line for this error, where it has one.
    pub fn detail(&self) -> Option<&'static str> {
        match self {
            ScramError::BindingNegotiation => Some(
                "The client supports SCRAM channel binding but thinks the server does not.  \
                 However, this server does support channel binding.",
            ),
            _ => None,
        }
    }
}
