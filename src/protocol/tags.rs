//! Message type bytes, named per direction. The same byte means different
//! messages in each direction (`C` is Close from a client and
//! CommandComplete from a server), so each direction has its own module and
//! code says `fe::CLOSE` or `be::COMMAND_COMPLETE`, never `b'C'`.
//!
//! The other bytes and codes with a meaning on the wire live here too, one
//! module per kind: [`auth`] (authentication request codes), [`field`]
//! (ErrorResponse / NoticeResponse field codes), [`target`] (what Describe
//! and Close name), [`tx`] (ReadyForQuery's transaction status) and
//! [`encryption`] (the one-byte answers to SSLRequest and GSSENCRequest).

/// What a client (frontend) sends after the startup packet.
pub mod fe {
    /// Bind: parameters for a prepared statement, making a portal.
    pub const BIND: u8 = b'B';
    /// Close a statement or portal.
    pub const CLOSE: u8 = b'C';
    /// CopyData.
    pub const COPY_DATA: u8 = b'd';
    /// CopyDone.
    pub const COPY_DONE: u8 = b'c';
    /// CopyFail.
    pub const COPY_FAIL: u8 = b'f';
    /// Describe a statement or portal.
    pub const DESCRIBE: u8 = b'D';
    /// Execute a portal.
    pub const EXECUTE: u8 = b'E';
    /// Flush: send what is buffered.
    pub const FLUSH: u8 = b'H';
    /// FunctionCall (fast path).
    pub const FUNCTION_CALL: u8 = b'F';
    /// Parse: prepare a statement.
    pub const PARSE: u8 = b'P';
    /// PasswordMessage, SASLInitialResponse and SASLResponse.
    pub const PASSWORD: u8 = b'p';
    /// Query (simple protocol).
    pub const QUERY: u8 = b'Q';
    /// Sync: end of an extended-protocol batch.
    pub const SYNC: u8 = b'S';
    /// Terminate.
    pub const TERMINATE: u8 = b'X';

    /// Message types a client may send once logged in: PostgreSQL answers
    /// any other first byte with FATAL 08P01 before it reads a length.
    pub const AFTER_LOGIN: &[u8] = &[
        BIND,
        CLOSE,
        COPY_DATA,
        COPY_DONE,
        COPY_FAIL,
        DESCRIBE,
        EXECUTE,
        FLUSH,
        FUNCTION_CALL,
        PARSE,
        QUERY,
        SYNC,
        TERMINATE,
    ];

    /// True for a type a logged-in client may send.
    #[inline]
    pub fn valid_after_login(tag: u8) -> bool {
        matches!(
            tag,
            BIND | CLOSE
                | COPY_DATA
                | COPY_DONE
                | COPY_FAIL
                | DESCRIBE
                | EXECUTE
                | FLUSH
                | FUNCTION_CALL
                | PARSE
                | QUERY
                | SYNC
                | TERMINATE
        )
    }
}

/// What a server (backend) sends.
pub mod be {
    /// Authentication request of any kind.
    pub const AUTHENTICATION: u8 = b'R';
    /// BackendKeyData: the cancel key.
    pub const BACKEND_KEY_DATA: u8 = b'K';
    /// BindComplete.
    pub const BIND_COMPLETE: u8 = b'2';
    /// CloseComplete.
    pub const CLOSE_COMPLETE: u8 = b'3';
    /// CommandComplete.
    pub const COMMAND_COMPLETE: u8 = b'C';
    /// CopyBothResponse (replication).
    pub const COPY_BOTH_RESPONSE: u8 = b'W';
    /// CopyData.
    pub const COPY_DATA: u8 = b'd';
    /// CopyDone.
    pub const COPY_DONE: u8 = b'c';
    /// CopyInResponse: the server now reads COPY data.
    pub const COPY_IN_RESPONSE: u8 = b'G';
    /// CopyOutResponse: COPY data follows.
    pub const COPY_OUT_RESPONSE: u8 = b'H';
    /// DataRow.
    pub const DATA_ROW: u8 = b'D';
    /// EmptyQueryResponse.
    pub const EMPTY_QUERY_RESPONSE: u8 = b'I';
    /// ErrorResponse.
    pub const ERROR_RESPONSE: u8 = b'E';
    /// FunctionCallResponse.
    pub const FUNCTION_CALL_RESPONSE: u8 = b'V';
    /// NegotiateProtocolVersion.
    pub const NEGOTIATE_PROTOCOL_VERSION: u8 = b'v';
    /// NoData.
    pub const NO_DATA: u8 = b'n';
    /// NoticeResponse.
    pub const NOTICE_RESPONSE: u8 = b'N';
    /// NotificationResponse (LISTEN/NOTIFY).
    pub const NOTIFICATION_RESPONSE: u8 = b'A';
    /// ParameterDescription.
    pub const PARAMETER_DESCRIPTION: u8 = b't';
    /// ParameterStatus.
    pub const PARAMETER_STATUS: u8 = b'S';
    /// ParseComplete.
    pub const PARSE_COMPLETE: u8 = b'1';
    /// PortalSuspended.
    pub const PORTAL_SUSPENDED: u8 = b's';
    /// ReadyForQuery.
    pub const READY_FOR_QUERY: u8 = b'Z';
    /// RowDescription.
    pub const ROW_DESCRIPTION: u8 = b'T';

    /// True for the messages a server may send at any time, whatever it
    /// owes (the protocol's "asynchronous operations").
    #[inline]
    pub fn is_async(tag: u8) -> bool {
        matches!(
            tag,
            NOTICE_RESPONSE | NOTIFICATION_RESPONSE | PARAMETER_STATUS
        )
    }
}

/// A set of message types, tested with one shift: the relay asks of every
/// server message whether it may pass unaccounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagSet(u128);

impl TagSet {
    /// No message type.
    pub const EMPTY: TagSet = TagSet(0);

    /// The set of `tags` (every message type is ASCII).
    pub const fn of(tags: &[u8]) -> TagSet {
        let mut bits = 0u128;
        let mut i = 0;
        while i < tags.len() {
            bits |= 1 << (tags[i] & 127);
            i += 1;
        }
        TagSet(bits)
    }

    /// Whether `tag` is in the set.
    #[inline]
    pub const fn contains(self, tag: u8) -> bool {
        tag < 128 && (self.0 >> tag) & 1 == 1
    }

    /// The set without `tag`.
    pub const fn without(self, tag: u8) -> TagSet {
        TagSet(self.0 & !(1 << (tag & 127)))
    }
}

/// Authentication request codes: the 32-bit word that starts the body of
/// an Authentication message ([`be::AUTHENTICATION`]).
pub mod auth {
    /// AuthenticationOk.
    pub const OK: u32 = 0;
    /// AuthenticationKerberosV5 (no longer sent by PostgreSQL).
    pub const KERBEROS_V5: u32 = 2;
    /// AuthenticationCleartextPassword.
    pub const CLEARTEXT_PASSWORD: u32 = 3;
    /// AuthenticationMD5Password; a 4-byte salt follows.
    pub const MD5_PASSWORD: u32 = 5;
    /// AuthenticationGSS.
    pub const GSS: u32 = 7;
    /// AuthenticationGSSContinue.
    pub const GSS_CONTINUE: u32 = 8;
    /// AuthenticationSSPI.
    pub const SSPI: u32 = 9;
    /// AuthenticationSASL; the mechanism names follow.
    pub const SASL: u32 = 10;
    /// AuthenticationSASLContinue; the mechanism's data follows.
    pub const SASL_CONTINUE: u32 = 11;
    /// AuthenticationSASLFinal; the mechanism's outcome data follows.
    pub const SASL_FINAL: u32 = 12;
}

/// Field codes of an ErrorResponse or NoticeResponse (PostgreSQL's
/// `PG_DIAG_*`); each is followed by a NUL-terminated value.
pub mod field {
    /// Severity, possibly localised.
    pub const SEVERITY: u8 = b'S';
    /// Severity, never localised (PostgreSQL 9.6 and later).
    pub const SEVERITY_NONLOCALIZED: u8 = b'V';
    /// SQLSTATE code.
    pub const SQLSTATE: u8 = b'C';
    /// Primary message.
    pub const MESSAGE: u8 = b'M';
    /// Detail.
    pub const DETAIL: u8 = b'D';
    /// Hint.
    pub const HINT: u8 = b'H';
    /// Cursor position in the query string.
    pub const POSITION: u8 = b'P';
    /// Cursor position in an internally generated command.
    pub const INTERNAL_POSITION: u8 = b'p';
    /// The internally generated command.
    pub const INTERNAL_QUERY: u8 = b'q';
    /// Context (call stack).
    pub const WHERE: u8 = b'W';
    /// Schema name.
    pub const SCHEMA_NAME: u8 = b's';
    /// Table name.
    pub const TABLE_NAME: u8 = b't';
    /// Column name.
    pub const COLUMN_NAME: u8 = b'c';
    /// Data type name.
    pub const DATA_TYPE_NAME: u8 = b'd';
    /// Constraint name.
    pub const CONSTRAINT_NAME: u8 = b'n';
    /// Source file.
    pub const FILE: u8 = b'F';
    /// Source line.
    pub const LINE: u8 = b'L';
    /// Source routine.
    pub const ROUTINE: u8 = b'R';
}

/// The subtype byte of Describe and Close (see `messages::Target`).
pub mod target {
    /// A prepared statement.
    pub const STATEMENT: u8 = b'S';
    /// A portal.
    pub const PORTAL: u8 = b'P';
}

/// ReadyForQuery's transaction status byte (see `messages::TxStatus`).
pub mod tx {
    /// Not in a transaction block.
    pub const IDLE: u8 = b'I';
    /// In a transaction block.
    pub const IN_TRANSACTION: u8 = b'T';
    /// In a failed transaction block.
    pub const FAILED: u8 = b'E';
}

/// The single byte a server answers SSLRequest or GSSENCRequest with. A
/// server too old for the request answers with an ErrorResponse instead,
/// whose first byte is [`be::ERROR_RESPONSE`].
pub mod encryption {
    /// SSLRequest accepted: the TLS handshake follows.
    pub const SSL_ACCEPTED: u8 = b'S';
    /// GSSENCRequest accepted: GSSAPI negotiation follows.
    pub const GSS_ACCEPTED: u8 = b'G';
    /// Request declined: the connection goes on unencrypted.
    pub const DECLINED: u8 = b'N';
    /// First byte of a TLS handshake record: a client that starts TLS at once
    /// (PostgreSQL 17's direct SSL); no startup packet begins with it, as its
    /// length would be hundreds of megabytes.
    pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_login_list_and_predicate_agree() {
        for t in 0..=255u8 {
            assert_eq!(
                fe::AFTER_LOGIN.contains(&t),
                fe::valid_after_login(t),
                "{t}"
            );
        }
        assert!(!fe::valid_after_login(0), "a StartupMessage's first byte");
        assert!(!fe::valid_after_login(fe::PASSWORD));
    }

    #[test]
    fn a_tag_set_holds_what_it_was_made_of_and_nothing_else() {
        let set = TagSet::of(&[be::DATA_ROW, be::COMMAND_COMPLETE]);
        for t in 0..=255u8 {
            let member = t == be::DATA_ROW || t == be::COMMAND_COMPLETE;
            assert_eq!(set.contains(t), member, "{t}");
            // A byte past ASCII is never in a set, even one that aliases a member.
            assert!(!set.contains(t | 128), "{t} | 128");
        }
        let less = set.without(be::COMMAND_COMPLETE);
        assert!(less.contains(be::DATA_ROW) && !less.contains(be::COMMAND_COMPLETE));
        assert!((0..=255u8).all(|t| !TagSet::EMPTY.contains(t)));
    }
}
