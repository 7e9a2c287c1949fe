//! The hba rules at login (`auth.hba_file`): which exchange a connection
//! gets, the `reject` and no-match refusals in PostgreSQL's words, `peer`
//! on the Unix socket, and the client-certificate checks of `cert` and
//! `clientcert=` (in `super::cert`). Without an hba file, `auth.method`
//! decides.

use std::ffi::CStr;

use super::authenticate::Exchange;
use super::cert::{self, CnCheck};
use super::ClientError;
use crate::auth::hba::{self, ConnFacts, Hba, Method, Rule};
use crate::listener::{ConnContext, Transport};
use crate::pooler::Snapshot;
use crate::protocol::PgError;
use crate::stream::Stream;

/// What the rules decided for one login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Choice {
    /// The exchange to run.
    pub exchange: Exchange,
    /// `clientcert=verify-full`'s CN check, run once the exchange passed.
    pub cn_check: Option<CnCheck>,
}

/// The exchange `user` on `database` gets over this connection; a peer
/// or `cert` check is done here, so it leaves nothing to exchange.
pub(super) fn choose(
    snapshot: &Snapshot,
    ctx: &ConnContext,
    stream: &Stream,
    user: &str,
    database: &str,
) -> Result<Choice, ClientError> {
    let Some(rules) = snapshot.hba.as_deref() else {
        return Ok(Choice {
            exchange: snapshot.config.auth.method.into(),
            cn_check: None,
        });
    };
    let tls = stream.is_tls();
    let transport = match (ctx.transport, ctx.peer_ip()) {
        (Transport::Unix, _) => hba::Transport::Local { tls },
        (_, Some(addr)) => hba::Transport::Tcp { addr, tls },
        (_, None) => return Err(refused("XX000", "TCP client without a peer address")),
    };
    let facts = ConnFacts {
        transport,
        database,
        user,
    };
    let rule = match rules.decide(&facts) {
        Ok(rule) => rule,
        Err(refusal) => {
            let (file, line) = match &refusal.rejected_by {
                Some((file, line)) => (file.display().to_string(), *line),
                None => (String::new(), 0),
            };
            tracing::info!(file = %file, line, "login refused by the hba rules");
            return Err(ClientError::Refused(refusal.to_pg_error()));
        }
    };
    tracing::debug!(
        file = %rule.file.display(),
        line = rule.line,
        method = rule.method.keyword(),
        "hba rule matched"
    );
    // As PostgreSQL: the certificate's presence before the method.
    let cn_check = cert::before_method(rule, stream)?;
    let exchange = match rule.method {
        Method::Trust => Exchange::Trust,
        Method::Md5 => Exchange::Md5,
        Method::ScramSha256 => Exchange::ScramSha256,
        Method::Password => Exchange::Password,
        Method::Peer => {
            peer(rules, rule, stream, ctx.accepted_at, user)?;
            Exchange::Peer
        }
        Method::Cert => {
            cert::cert_method(rules, rule, stream, user)?;
            Exchange::Cert
        }
        // decide() turns reject into a refusal.
        Method::Reject => return Err(refused("28000", "connection rejected by the hba rules")),
    };
    Ok(Choice { exchange, cn_check })
}

fn refused(code: &'static str, message: &str) -> ClientError {
    ClientError::Refused(PgError::fatal(code, message.to_owned()))
}

/// `peer`: the OS user of the process at the other end of the socket
/// (SO_PEERCRED), mapped by the rule's `map=` (or equal to `user`), as
/// PostgreSQL's `auth_peer`. No password, no cryptography. The uid's name
/// is looked up as of the connection's accept, through the rules' cache
/// ([`hba::OsNames`]).
fn peer(
    rules: &Hba,
    rule: &Rule,
    stream: &Stream,
    accepted_at: std::time::Instant,
    user: &str,
) -> Result<(), ClientError> {
    let failed = || {
        ClientError::Refused(PgError::fatal(
            "28000",
            format!("Peer authentication failed for user \"{user}\""),
        ))
    };
    let uid = match stream.peer_uid() {
        Some(Ok(uid)) => uid,
        Some(Err(e)) => {
            tracing::info!(error = %e, "could not get peer credentials");
            return Err(failed());
        }
        // The parser allows peer on local lines only.
        None => return Err(failed()),
    };
    let Some(system_user) = rules.os_names().name(uid, accepted_at, user_name) else {
        tracing::info!(uid, "could not look up local user ID");
        return Err(failed());
    };
    if !rules.usermap_allows(rule.map.as_deref(), &system_user, user) {
        tracing::info!(
            system_user = %system_user,
            map = rule.map.as_deref().unwrap_or(""),
            "no ident map line allows the peer's OS user"
        );
        return Err(failed());
    }
    Ok(())
}

/// The name of `uid`, from getpwuid_r (thread-safe, unlike getpwuid).
fn user_name(uid: u32) -> Option<String> {
    // glibc suggests 1 KiB (_SC_GETPW_R_SIZE_MAX), which every ordinary
    // entry fits: on the stack, a peer login zeroes no heap buffer. A
    // larger entry is asked for again with more room, as getpwuid_r's
    // ERANGE says to.
    let mut small = [0 as libc::c_char; 1024];
    let mut found = lookup_user(uid, &mut small);
    let mut len = 16 * 1024;
    while found == Err(libc::ERANGE) && len <= 1 << 20 {
        found = lookup_user(uid, &mut vec![0; len]);
        len *= 4;
    }
    found.ok().flatten()
}

/// One getpwuid_r call with `buf` for its strings: the name, `Ok(None)`
/// when there is no such user, or the error number (ERANGE: `buf` is too
/// small).
fn lookup_user(uid: u32, buf: &mut [libc::c_char]) -> Result<Option<String>, i32> {
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r fills it
    // with pointers into `buf`, which outlives every use below.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the sizes given.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 {
        return Err(rc);
    }
    if found.is_null() || pw.pw_name.is_null() {
        return Ok(None);
    }
    // SAFETY: on success pw_name points at a NUL-terminated string in `buf`.
    let name = unsafe { CStr::from_ptr(pw.pw_name) };
    Ok(Some(name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_uid_zero() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }

    /// A buffer too small for the entry is ERANGE, which `user_name`
    /// answers with a larger one; an unknown uid is no name, not an error.
    #[test]
    fn a_lookup_reports_a_buffer_too_small() {
        assert_eq!(lookup_user(0, &mut [0; 4]), Err(libc::ERANGE));
        assert_eq!(lookup_user(0, &mut [0; 1024]), Ok(Some("root".into())));
        assert_eq!(lookup_user(u32::MAX - 7, &mut [0; 1024]), Ok(None));
        assert_eq!(user_name(u32::MAX - 7), None);
    }
}
