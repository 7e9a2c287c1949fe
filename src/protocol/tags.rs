//! Message type bytes, named per direction. The same byte means different
//! messages in each direction (`C` is Close from a client and
//! CommandComplete from a server), so each direction has its own module and
//! code says `fe::CLOSE` or `be::COMMAND_COMPLETE`, never `b'C'`.

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
}
