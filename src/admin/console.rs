//! One admin console session: the login reply, then simple queries until the
//! client leaves.
//!
//! Privileges are checked per command, at the time it runs, against the
//! configuration in force then (CVE-2026-6667 was a command path that
//! skipped the check): every SHOW handler takes an [`Authorized`] proof and
//! every other handler an [`Admin`] proof, which only their `check` can make
//! (called by `Console::authorize` and `Console::authorize_admin`), so a
//! handler that forgot the check, or asked for the weaker one, would not
//! compile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;

use super::commands::{self, Command, USAGE};
use super::rows::{command_complete, empty_query_response};
use super::{control, overhead, set, show, sockets};
use super::{may_show, Admin, AdminError, Authorized};
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

/// Counts a console session in [`Pooler::console_sessions`] while it lives.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(count: &'a AtomicUsize) -> Counted<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Counted(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
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
/// in neither `admin.users` nor `admin.stats_users` gets FATAL 28000, which
/// the caller sends.
pub async fn run(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    pooler: &Arc<Pooler>,
    login_config: &Config,
    user: &str,
    reply: BytesMut,
) -> Result<(), AdminError> {
    if !may_show(login_config, user) {
        return Err(AdminError::Refused(
            PgError::fatal("28000", "not allowed to connect to the admin console").with_hint(
                format!("Add \"{user}\" to admin.users (or admin.stats_users, to SHOW only) to use the console."),
            ),
        ));
    }
    let _counted = Counted::new(&pooler.console_sessions);
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

    /// The proof that the user may SHOW, checked against the configuration
    /// in force now, so a RELOAD that removes them takes effect on their
    /// next command.
    fn authorize(&self, cmd: &Command) -> Result<Authorized, PgError> {
        if let Some(proof) = Authorized::check(&self.pooler.config(), self.user) {
            return Ok(proof);
        }
        Err(PgError::error(
            "42501",
            format!(
                "permission denied for {}: user \"{}\" is not in admin.users or admin.stats_users",
                cmd.name(),
                self.user
            ),
        ))
    }

    /// The proof that the user may change the pooler's state, checked the
    /// same way: `admin.stats_users` may only SHOW.
    fn authorize_admin(&self, cmd: &Command) -> Result<Admin, PgError> {
        if let Some(proof) = Admin::check(&self.pooler.config(), self.user) {
            return Ok(proof);
        }
        Err(PgError::error(
            "42501",
            format!(
                "permission denied for {}: user \"{}\" is not in admin.users",
                cmd.name(),
                self.user
            ),
        )
        .with_hint("Users in admin.stats_users may run SHOW commands only."))
    }

    /// Runs one query string, appending its answer (without ReadyForQuery) to `out`.
    async fn execute(&self, sql: &str, out: &mut BytesMut) -> Result<After, PgError> {
        let cmd = commands::parse(sql)?;
        if cmd == Command::Empty {
            empty_query_response(out);
            return Ok(After::Continue);
        }
        let read = self.authorize(&cmd)?;
        tracing::info!(user = self.user, command = cmd.name(), "admin command");
        if cmd.only_reads() {
            show(self.pooler, cmd, &read, out)?;
            return Ok(After::Continue);
        }
        let admin = self.authorize_admin(&cmd)?;
        let (tag, after) = control(self.pooler, cmd, &admin).await?;
        command_complete(out, tag);
        Ok(after)
    }
}

/// Answers a SHOW command.
fn show(
    pooler: &Pooler,
    cmd: Command,
    auth: &Authorized,
    out: &mut BytesMut,
) -> Result<(), PgError> {
    let rows = match cmd {
        Command::ShowHelp => {
            help().encode(out);
            command_complete(out, "SHOW");
            return Ok(());
        }
        Command::ShowVersion => show::version(auth),
        Command::ShowConfig => show::config(pooler, auth),
        Command::ShowConfigReload => show::config_reload(pooler, auth),
        Command::ShowDatabases => show::databases(pooler, auth),
        Command::ShowPools => show::pools(pooler, auth),
        Command::ShowClients => sockets::clients(pooler, auth),
        Command::ShowServers => sockets::servers(pooler, auth),
        Command::ShowUsers => show::users(pooler, auth),
        Command::ShowStats => show::stats(pooler, auth),
        Command::ShowStatsTotals => show::stats_totals(pooler, auth),
        Command::ShowTotals => show::totals(pooler, auth),
        Command::ShowLists => show::lists(pooler, auth),
        Command::ShowMem => show::mem(pooler, auth),
        Command::ShowState => show::state(pooler, auth),
        Command::ShowOverhead => overhead::overhead(pooler, auth),
        other => return Err(not_here(&other)),
    };
    rows.encode(out, "SHOW");
    Ok(())
}

/// Runs a command that changes the pooler's state; its CommandComplete tag.
async fn control(
    pooler: &Pooler,
    cmd: Command,
    admin: &Admin,
) -> Result<(&'static str, After), PgError> {
    let tag = cmd.name();
    match cmd {
        Command::Pause(db) => control::pause(pooler, db.as_deref(), admin).await?,
        Command::Resume(db) => control::resume(pooler, db.as_deref(), admin)?,
        Command::Kill(db) => control::kill(pooler, &db, admin).await?,
        Command::KillClient(id) => control::kill_client(pooler, id, admin)?,
        Command::Disable(db) => control::set_disabled(pooler, &db, true, admin)?,
        Command::Enable(db) => control::set_disabled(pooler, &db, false, admin)?,
        Command::Reconnect(db) => control::reconnect(pooler, db.as_deref(), admin)?,
        Command::WaitClose(db) => control::wait_close(pooler, db.as_deref(), admin).await?,
        Command::Set { key, value } => set::set(pooler, &key, &value, admin).await?,
        Command::Reload => control::reload(pooler, admin).await?,
        Command::Shutdown => {
            control::shutdown(admin)?;
            return Ok((tag, After::Shutdown));
        }
        other => return Err(not_here(&other)),
    }
    Ok((tag, After::Continue))
}

/// A command dispatched to the wrong half (a bug, reported rather than a panic).
fn not_here(cmd: &Command) -> PgError {
    PgError::error("XX000", format!("{} is not handled here", cmd.name()))
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
