//! The OpenSSL client every row uses, driven a flight at a time, and what it
//! negotiated.

use std::ffi::CStr;

use openssl::ssl::{
    HandshakeError, SslConnector, SslMethod, SslSessionCacheMode, SslStream, SslVerifyMode,
};

use crate::link::Duplex;
use crate::server::Version;
use crate::ALPN_WIRE;

/// The OpenSSL client every row uses: the library's defaults (offered
/// groups, cipher suites), ALPN "postgresql", one protocol version, no
/// session cache, no verification (as libpq's sslmode=require).
pub fn openssl_client(version: Version) -> SslConnector {
    let mut b = SslConnector::builder(SslMethod::tls_client()).expect("SslConnector::builder");
    b.set_verify(SslVerifyMode::NONE);
    b.set_alpn_protos(ALPN_WIRE).expect("client ALPN");
    b.set_min_proto_version(Some(version.openssl()))
        .expect("client min version");
    b.set_max_proto_version(Some(version.openssl()))
        .expect("client max version");
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    b.build()
}

enum ClientState {
    Mid(openssl::ssl::MidHandshakeSslStream<Duplex>),
    Done(SslStream<Duplex>),
}

/// The OpenSSL client's side of one handshake.
pub struct Client(Option<ClientState>);

impl Client {
    /// Starts a handshake over LINK: the ClientHello is written.
    pub fn start(connector: &SslConnector, link: Duplex) -> Client {
        let mut cfg = connector.configure().expect("client configure");
        cfg.set_verify_hostname(false);
        let ssl = cfg.into_ssl("localhost").expect("client Ssl");
        Client(Some(Self::state(ssl.connect(link))))
    }
    fn state(r: Result<SslStream<Duplex>, HandshakeError<Duplex>>) -> ClientState {
        match r {
            Ok(s) => ClientState::Done(s),
            Err(HandshakeError::WouldBlock(m)) => ClientState::Mid(m),
            Err(e) => panic!("client handshake: {e}"),
        }
    }
    /// Runs the client until it waits for the server (or is done).
    pub fn turn(&mut self) {
        self.0 = match self.0.take() {
            Some(ClientState::Mid(m)) => Some(Self::state(m.handshake())),
            done => done,
        };
    }
    /// The finished connection; panics when the handshake is not done.
    pub fn done(&self) -> &SslStream<Duplex> {
        match &self.0 {
            Some(ClientState::Done(s)) => s,
            _ => panic!("client handshake did not finish"),
        }
    }
}

/// The group the client's connection negotiated, by its OpenSSL short name.
pub fn negotiated_group(ssl: &openssl::ssl::SslRef) -> String {
    use foreign_types_shared::ForeignTypeRef;
    const SSL_CTRL_GET_NEGOTIATED_GROUP: libc::c_int = 134;
    // SAFETY: a live SSL*; SSL_get_negotiated_group is this SSL_ctrl (a macro in ssl.h).
    let nid = unsafe {
        openssl_sys::SSL_ctrl(
            ssl.as_ptr(),
            SSL_CTRL_GET_NEGOTIATED_GROUP,
            0,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: OBJ_nid2sn returns NULL or a static string.
    let sn = unsafe { openssl_sys::OBJ_nid2sn(nid as libc::c_int) };
    if sn.is_null() {
        format!("nid {nid}")
    } else {
        // SAFETY: non-NULL static C string.
        unsafe { CStr::from_ptr(sn) }.to_string_lossy().into_owned()
    }
}
