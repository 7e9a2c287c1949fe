//! One admin console session: the login reply, then simple queries until the
//! client leaves.
//!
//! Privileges are checked per command, at the time it runs, against the
//! configuration in force then (CVE-2026-6667 was a command path that
//! skipped the check): every command handler takes an [`Authorized`] proof,
//! which only [`Authorized::check`] can make (called by
//! `Console::authorize`), so a handler that forgot the check would not
//! compile.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::commands::{self, Command, USAGE};
use super::rows::{command_complete, empty_query_response};
use super::{control, overhead, show, sockets};
use super::{is_admin, AdminError, Authorized};
use crate::config::Config;
use crate::pooler::Pooler;
use crate::protocol::messages::TxStatus;
use crate::protocol::tags::fe;
use crate::protocol::{server, FrameBuf, PgError, Severity, Violation};
use crate::stream::{read_tagged, ReadError, Stream};

/// Longest message the console reads (the length word's value). A console
/// query is short; the cap only has to stay within the client's read buffer.
const MAX_CONSOLE_MESSAGE: usize = 64 * 1024 - 1;

/// What the session does after a command.
enum After {
    /// Wait for the next message.
    Continue,
    /// SHUTDOWN was accepted: close the session (FATAL 57P01).
    Shutdown,
}

/// An authenticated console session.
struct Console<'a> {
    pooler: &'a Arc<Pooler>,
    user: &'a str,
}

/// Runs an admin console session for `user`, authenticated under
/// `login_config` (the login's snapshot, also the one `admin.users` is
/// checked against at entry). `reply` holds
/// what must precede AuthenticationOk (a SCRAM server-final message). A user
/// not in `admin.users` gets FATAL 28000, which the caller sends.
pub async fn run(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    pooler: &Arc<Pooler>,
    login_config: &Config,
    user: &str,
    reply: BytesMut,
) -> Result<(), AdminError> {
    if !is_admin(login_config, user) {
        return Err(AdminError::Refused(
            PgError::fatal("28000", "not allowed to connect to the admin console")
                .with_hint(format!("Add \"{user}\" to admin.users to use the console.")),
        ));
    }
    // A registered key whose slot stays empty: cancel requests for it are
    // dropped, and no client's real key can collide with it.
    let cancel_key = pooler.cancels.issue(None);
    let mut out = reply;
    server::auth_ok(&mut out);
    let version = format!("15.0 ({})", show::version_string());
    for (name, value) in [
        ("server_version", version.as_str()),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("application_name", ""),
    ] {
        server::parameter_status(&mut out, name, value);
    }
    server::backend_key_data(&mut out, cancel_key.pid, cancel_key.secret);
    server::ready_for_query(&mut out, TxStatus::Idle);
    stream.write_all(&out).await?;
    tracing::info!(user, "admin console session started");
    Console { pooler, user }.serve(stream, buf).await
}

impl Console<'_> {
    /// Reads and answers messages until Terminate, EOF or shutdown.
    async fn serve(&self, stream: &mut Stream, buf: &mut FrameBuf) -> Result<(), AdminError> {
        let terminate = self.pooler.terminate_token();
        // Set after an extended-protocol message was refused: everything up
        // to the next Sync is skipped, as PostgreSQL does after an error.
        let mut skipping_to_sync = false;
        let mut out = BytesMut::new();
        loop {
            let read = tokio::select! {
                r = read_tagged(stream, buf, MAX_CONSOLE_MESSAGE) => r,
                _ = terminate.cancelled() => return Err(AdminError::Shutdown),
            };
            let frame = match read {
                Ok(f) => f,
                Err(ReadError::Eof) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let tag = frame.tag;
            let query = (tag == fe::QUERY).then(|| query_text(buf.body(&frame)));
            buf.consume(frame.total);
            out.clear();
            match tag {
                fe::TERMINATE => return Ok(()),
                fe::SYNC => {
                    skipping_to_sync = false;
                    server::ready_for_query(&mut out, TxStatus::Idle);
                }
                _ if skipping_to_sync => continue,
                fe::QUERY => {
                    let sql = query.unwrap_or_else(|| Err(Violation::new("no query")))?;
                    // PAUSE may wait a long time; a shutdown must not.
                    let executed = tokio::select! {
                        r = self.execute(&sql, &mut out) => r,
                        _ = terminate.cancelled() => return Err(AdminError::Shutdown),
                    };
                    let after = match executed {
                        Ok(after) => after,
                        Err(e) => {
                            tracing::info!(user = self.user, error = %e, "admin command failed");
                            e.encode(&mut out);
                            After::Continue
                        }
                    };
                    server::ready_for_query(&mut out, TxStatus::Idle);
                    if let After::Shutdown = after {
                        let _ = stream.write_all(&out).await;
                        return Err(AdminError::Shutdown);
                    }
                }
                fe::PARSE | fe::BIND | fe::EXECUTE | fe::DESCRIBE | fe::CLOSE => {
                    simple_protocol_only().encode(&mut out);
                    skipping_to_sync = true;
                }
                fe::FUNCTION_CALL => {
                    simple_protocol_only().encode(&mut out);
                    server::ready_for_query(&mut out, TxStatus::Idle);
                }
                // Flush, and COPY messages outside COPY, which PostgreSQL ignores too.
                fe::FLUSH | fe::COPY_DATA | fe::COPY_DONE | fe::COPY_FAIL => continue,
                other => {
                    return Err(AdminError::Protocol(Violation::new(format!(
                        "invalid frontend message type {other}"
                    ))))
                }
            }
            stream.write_all(&out).await?;
        }
    }

    /// Checks that the user is still in `admin.users` of the configuration in
    /// force now, so a RELOAD that removes them takes effect on their next command.
    fn authorize(&self, cmd: &Command) -> Result<Authorized, PgError> {
        if let Some(proof) = Authorized::check(&self.pooler.config(), self.user) {
            return Ok(proof);
        }
        Err(PgError::error(
            "42501",
            format!(
                "permission denied for {}: user \"{}\" is not in admin.users",
                cmd.name(),
                self.user
            ),
        ))
    }

    /// Runs one query string, appending its answer (without ReadyForQuery) to `out`.
    async fn execute(&self, sql: &str, out: &mut BytesMut) -> Result<After, PgError> {
        let cmd = commands::parse(sql)?;
        if cmd == Command::Empty {
            empty_query_response(out);
            return Ok(After::Continue);
        }
        let auth = self.authorize(&cmd)?;
        tracing::info!(user = self.user, command = cmd.name(), "admin command");
        let pooler = self.pooler.as_ref();
        let rows = match cmd {
            Command::Empty => return Ok(After::Continue),
            Command::ShowHelp => {
                help().encode(out);
                command_complete(out, "SHOW");
                return Ok(After::Continue);
            }
            Command::ShowVersion => show::version(&auth),
            Command::ShowConfig => show::config(pooler, &auth),
            Command::ShowDatabases => show::databases(pooler, &auth),
            Command::ShowPools => show::pools(pooler, &auth),
            Command::ShowClients => sockets::clients(pooler, &auth),
            Command::ShowServers => sockets::servers(pooler, &auth),
            Command::ShowStats => show::stats(pooler, &auth),
            Command::ShowStatsTotals => show::stats_totals(pooler, &auth),
            Command::ShowTotals => show::totals(pooler, &auth),
            Command::ShowOverhead => overhead::overhead(pooler, &auth),
            Command::Pause(db) => {
                control::pause(pooler, db.as_deref(), &auth).await?;
                command_complete(out, "PAUSE");
                return Ok(After::Continue);
            }
            Command::Resume(db) => {
                control::resume(pooler, db.as_deref(), &auth)?;
                command_complete(out, "RESUME");
                return Ok(After::Continue);
            }
            Command::Kill(db) => {
                control::kill(pooler, &db, &auth).await?;
                command_complete(out, "KILL");
                return Ok(After::Continue);
            }
            Command::Reload => {
                reload(pooler, &auth).await?;
                command_complete(out, "RELOAD");
                return Ok(After::Continue);
            }
            Command::Shutdown => {
                shutdown(&auth)?;
                command_complete(out, "SHUTDOWN");
                return Ok(After::Shutdown);
            }
        };
        rows.encode(out, "SHOW");
        Ok(After::Continue)
    }
}

/// The query string of a Query message: one NUL-terminated string and nothing
/// after it (PostgreSQL's "invalid message format" otherwise). Invalid UTF-8
/// is replaced, which can only make an unknown command.
fn query_text(body: &[u8]) -> Result<String, Violation> {
    match body.split_last() {
        Some((0, text)) if !text.contains(&0) => Ok(String::from_utf8_lossy(text).into_owned()),
        _ => Err(Violation::new("invalid message format")),
    }
}

fn simple_protocol_only() -> PgError {
    PgError::error(
        "0A000",
        "the admin console supports the simple query protocol only",
    )
    .with_hint("Send console commands as simple queries (psql does; drivers may need a \"simple\" or \"exec\" mode).")
}

/// The `SHOW HELP` notice, as PgBouncer sends it.
fn help() -> PgError {
    PgError {
        severity: Severity::Notice,
        code: "00000",
        message: "Console usage".to_string(),
        detail: Some(format!("\n\t{}", USAGE.replace('\n', "\n\t"))),
        hint: None,
    }
}

/// RELOAD: the config file and auth file again, as on SIGHUP; a broken file
/// keeps the old configuration and says why.
async fn reload(pooler: &Pooler, _: &Authorized) -> Result<(), PgError> {
    // First, so log rotation works even while the config file is broken.
    crate::service::logfile::reopen();
    let failed = |e: String| {
        PgError::error("F0000", format!("RELOAD failed: {e}"))
            .with_hint("The old configuration stays in use; fix the file and RELOAD again.")
    };
    let path = pooler.config().path.clone();
    let config = Config::load(&path).map_err(|e| failed(e.to_string()))?;
    pooler
        .reload(config)
        .await
        .map_err(|e| failed(e.to_string()))?;
    tracing::info!("configuration reloaded (admin console RELOAD)");
    Ok(())
}

/// SHUTDOWN: sends this process SIGTERM, so the one graceful path in `main`
/// runs (stop accepting, let sessions finish within `shutdown_timeout`).
fn shutdown(_: &Authorized) -> Result<(), PgError> {
    tracing::info!("SHUTDOWN from the admin console");
    let pid = libc::pid_t::try_from(std::process::id())
        .map_err(|_| PgError::error("XX000", "process id out of range"))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(PgError::error(
            "XX000",
            format!("cannot signal shutdown: {e}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_text_needs_exactly_one_terminating_nul() {
        assert_eq!(query_text(b"SHOW POOLS\0").as_deref(), Ok("SHOW POOLS"));
        assert_eq!(query_text(b"\0").as_deref(), Ok(""));
        assert!(query_text(b"").is_err());
        assert!(query_text(b"SHOW POOLS").is_err());
        assert!(query_text(b"SHOW\0POOLS\0").is_err());
        assert_eq!(query_text(b"SHOW \xff\0").as_deref(), Ok("SHOW \u{fffd}"));
    }
}
