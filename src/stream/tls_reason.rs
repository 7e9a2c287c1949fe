//! What a failed TLS handshake is told as: the library's reasons in
//! OpenSSL's words ("wrong version number", "tlsv1 alert unknown ca"), as
//! PostgreSQL's logs show them, not function names and source lines.

use std::io;

use super::TlsError;

/// The useful part of a handshake error, for a log line or an error to a
/// client.
pub(super) fn text(e: &TlsError) -> String {
    reasons(e).unwrap_or_else(|| e.to_string())
}

/// A failed server-side handshake as an I/O error: `UnexpectedEof` when
/// the peer closed without a word (nothing was attempted), otherwise
/// `ConnectionAborted` with the reasons ("http request", "unsupported
/// protocol").
pub(super) fn handshake_failure(e: &TlsError) -> io::Error {
    if let Some(io) = e.io_error() {
        return io::Error::new(io.kind(), io.to_string());
    }
    match reasons(e) {
        Some(text) => io::Error::new(io::ErrorKind::ConnectionAborted, text),
        None if e.code() == openssl::ssl::ErrorCode::SYSCALL => {
            io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the connection")
        }
        None => io::Error::new(io::ErrorKind::ConnectionAborted, e.to_string()),
    }
}

/// The error queue's reasons, joined with ": ", or None when it has none.
fn reasons(e: &TlsError) -> Option<String> {
    let stack = e.ssl_error()?;
    let mut text = String::new();
    for reason in stack.errors().iter().filter_map(|x| x.reason()) {
        if !text.is_empty() {
            text.push_str(": ");
        }
        push_words(&mut text, reason);
    }
    (!text.is_empty()).then_some(text)
}

/// Appends `reason` in OpenSSL's words: AWS-LC names a reason as a constant
/// (`HTTP_REQUEST`, `TLSV1_ALERT_UNKNOWN_CA`), OpenSSL says the same words
/// in lower case with spaces; any other text is kept as it is.
fn push_words(text: &mut String, reason: &str) {
    let constant = reason
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !constant {
        text.push_str(reason);
        return;
    }
    text.extend(reason.chars().map(|c| match c {
        '_' => ' ',
        c => c.to_ascii_lowercase(),
    }));
}

#[cfg(test)]
mod tests {
    use super::push_words;

    fn words(reason: &str) -> String {
        let mut text = String::new();
        push_words(&mut text, reason);
        text
    }

    #[test]
    fn aws_lc_constants_read_as_openssls_words() {
        assert_eq!(words("HTTP_REQUEST"), "http request");
        assert_eq!(words("TLSV1_ALERT_UNKNOWN_CA"), "tlsv1 alert unknown ca");
        assert_eq!(words("WRONG_VERSION_NUMBER"), "wrong version number");
    }

    #[test]
    fn openssls_own_words_and_other_text_are_kept() {
        assert_eq!(words("http request"), "http request");
        assert_eq!(
            words("certificate verify failed"),
            "certificate verify failed"
        );
        assert_eq!(words("Mixed_Case"), "Mixed_Case");
        assert_eq!(words(""), "");
    }
}
