//! The console's command language: PgBouncer's `WORD [WORD]` form, with
//! surrounding whitespace and trailing semicolons ignored. Command words are
//! case-insensitive; a database argument is taken as written, or in double
//! quotes (`""` for a quote) when it needs them. No I/O; anything that is not
//! a known command is a 42601 error naming the commands there are.

use crate::protocol::PgError;

mod set;

use set::parse_set;

/// The commands the console knows, in the order `SHOW HELP` lists them.
pub const USAGE: &str =
    "SHOW HELP|VERSION|CONFIG|CONFIG_RELOAD|DATABASES|POOLS|CLIENTS|SERVERS|USERS\n\
     SHOW STATS|STATS_TOTALS|TOTALS|LISTS|MEM|STATE|OVERHEAD\n\
     SET key = arg\nRELOAD\nPAUSE [<db>]\nRESUME [<db>]\nDISABLE <db>\nENABLE <db>\n\
     RECONNECT [<db>]\nKILL <db>\nKILL_CLIENT <id>\nWAIT_CLOSE [<db>]\nSHUTDOWN";

/// How much of an unknown command is quoted back in the error.
const QUOTE_MAX_CHARS: usize = 80;

/// A parsed console command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A query string with no command in it (only whitespace and `;`).
    Empty,
    /// `SHOW HELP`: the command list, as a notice.
    ShowHelp,
    /// `SHOW VERSION`
    ShowVersion,
    /// `SHOW CONFIG`
    ShowConfig,
    /// `SHOW DATABASES`
    ShowDatabases,
    /// `SHOW POOLS`
    ShowPools,
    /// `SHOW CLIENTS`
    ShowClients,
    /// `SHOW SERVERS`
    ShowServers,
    /// `SHOW STATS`
    ShowStats,
    /// `SHOW STATS_TOTALS`
    ShowStatsTotals,
    /// `SHOW TOTALS`
    ShowTotals,
    /// `SHOW OVERHEAD`: pgharbor's establishment-versus-transfer report.
    ShowOverhead,
    /// `SHOW CONFIG_RELOAD`: SHOW CONFIG with what a reload does per key.
    ShowConfigReload,
    /// `SHOW USERS`
    ShowUsers,
    /// `SHOW LISTS`: counts of the pooler's objects.
    ShowLists,
    /// `SHOW MEM`: memory held per kind of object.
    ShowMem,
    /// `SHOW STATE`: active, paused, suspended.
    ShowState,
    /// `SET key = value`: change a key of the running configuration.
    Set {
        /// The dotted key, as SHOW CONFIG names it.
        key: String,
        /// The value as written, quotes removed.
        value: String,
    },
    /// `DISABLE db`: refuse new logins to the database.
    Disable(String),
    /// `ENABLE db`: undo DISABLE.
    Enable(String),
    /// `RECONNECT [db]`: close each backend once it is next released.
    Reconnect(Option<String>),
    /// `WAIT_CLOSE [db]`: wait until the backends RECONNECT marked are closed.
    WaitClose(Option<String>),
    /// `KILL_CLIENT id`: end one client (the id of SHOW CLIENTS).
    KillClient(u64),
    /// `PAUSE [db]`: hand out no backends; done when none is lent out.
    Pause(Option<String>),
    /// `RESUME [db]`: undo PAUSE or KILL.
    Resume(Option<String>),
    /// `KILL db`: end every session on the database and pause it.
    Kill(String),
    /// `RELOAD`: re-read the config file and the auth file.
    Reload,
    /// `SHUTDOWN`: the same graceful shutdown as SIGTERM.
    Shutdown,
}

impl Command {
    /// The command as a person would write it, for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Empty => "empty query",
            Command::ShowHelp => "SHOW HELP",
            Command::ShowVersion => "SHOW VERSION",
            Command::ShowConfig => "SHOW CONFIG",
            Command::ShowDatabases => "SHOW DATABASES",
            Command::ShowPools => "SHOW POOLS",
            Command::ShowClients => "SHOW CLIENTS",
            Command::ShowServers => "SHOW SERVERS",
            Command::ShowStats => "SHOW STATS",
            Command::ShowStatsTotals => "SHOW STATS_TOTALS",
            Command::ShowTotals => "SHOW TOTALS",
            Command::ShowOverhead => "SHOW OVERHEAD",
            Command::ShowConfigReload => "SHOW CONFIG_RELOAD",
            Command::ShowUsers => "SHOW USERS",
            Command::ShowLists => "SHOW LISTS",
            Command::ShowMem => "SHOW MEM",
            Command::ShowState => "SHOW STATE",
            Command::Set { .. } => "SET",
            Command::Disable(_) => "DISABLE",
            Command::Enable(_) => "ENABLE",
            Command::Reconnect(_) => "RECONNECT",
            Command::WaitClose(_) => "WAIT_CLOSE",
            Command::KillClient(_) => "KILL_CLIENT",
            Command::Pause(_) => "PAUSE",
            Command::Resume(_) => "RESUME",
            Command::Kill(_) => "KILL",
            Command::Reload => "RELOAD",
            Command::Shutdown => "SHUTDOWN",
        }
    }
}

impl Command {
    /// True for the commands that only read (SHOW): `admin.stats_users` may
    /// run these; every other command needs `admin.users`.
    pub fn only_reads(&self) -> bool {
        self.name().starts_with("SHOW ") || *self == Command::Empty
    }
}

/// Parses one simple-query string (without its terminating NUL).
pub fn parse(sql: &str) -> Result<Command, PgError> {
    let text = sql.trim_matches(|c: char| c.is_ascii_whitespace() || c == ';');
    if text.is_empty() {
        return Ok(Command::Empty);
    }
    // Before the one-command rule: a quoted SET value may hold a ';'.
    if let Some(rest) = strip_word(text, "set") {
        return parse_set(rest);
    }
    if text.contains(';') {
        return Err(
            PgError::error("42601", "the admin console runs one command per query")
                .with_hint("Send the commands one at a time."),
        );
    }
    let Some(words) = words(text) else {
        return Err(unknown(text));
    };
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
    let arg = words.get(1).cloned();
    let command = match lower.as_slice() {
        ["show", what] => match *what {
            "help" => Command::ShowHelp,
            "version" => Command::ShowVersion,
            "config" => Command::ShowConfig,
            "databases" => Command::ShowDatabases,
            "pools" => Command::ShowPools,
            "clients" => Command::ShowClients,
            "servers" => Command::ShowServers,
            "stats" => Command::ShowStats,
            "stats_totals" => Command::ShowStatsTotals,
            "totals" => Command::ShowTotals,
            "overhead" => Command::ShowOverhead,
            "config_reload" => Command::ShowConfigReload,
            "users" => Command::ShowUsers,
            "lists" => Command::ShowLists,
            "mem" => Command::ShowMem,
            "state" => Command::ShowState,
            _ => return Err(unknown(text)),
        },
        ["pause"] | ["pause", _] => Command::Pause(arg),
        ["resume"] | ["resume", _] => Command::Resume(arg),
        ["kill", _] => Command::Kill(arg.unwrap_or_default()),
        ["kill_client", _] => Command::KillClient(client_id(arg.as_deref().unwrap_or(""))?),
        ["disable", _] => Command::Disable(arg.unwrap_or_default()),
        ["enable", _] => Command::Enable(arg.unwrap_or_default()),
        ["reconnect"] | ["reconnect", _] => Command::Reconnect(arg),
        ["wait_close"] | ["wait_close", _] => Command::WaitClose(arg),
        ["reload"] => Command::Reload,
        ["shutdown"] => Command::Shutdown,
        _ => return Err(unknown(text)),
    };
    Ok(command)
}

/// What follows `word` (any case) and whitespace at the start of `text`.
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let head = text.get(..word.len())?;
    let rest = &text[word.len()..];
    (head.eq_ignore_ascii_case(word) && rest.starts_with(|c: char| c.is_ascii_whitespace()))
        .then_some(rest)
}

/// KILL_CLIENT's argument: the `id` column of SHOW CLIENTS.
fn client_id(word: &str) -> Result<u64, PgError> {
    word.parse().map_err(|_| {
        PgError::error("22P02", format!("invalid client id \"{word}\""))
            .with_hint("KILL_CLIENT takes the id column of SHOW CLIENTS, a number.")
    })
}

/// Splits on ASCII whitespace into words: bare (`[A-Za-z0-9_]`, or any
/// non-ASCII letter a database name may hold) or double-quoted. None for
/// anything else (stray quotes, punctuation, control characters).
fn words(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text.trim_start_matches(|c: char| c.is_ascii_whitespace());
    while !rest.is_empty() {
        let (word, tail) = if let Some(quoted) = rest.strip_prefix('"') {
            quoted_word(quoted)?
        } else {
            let end = rest
                .find(|c: char| c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            let word = &rest[..end];
            let bare = word.chars().all(|c| {
                c == '_' || c.is_ascii_alphanumeric() || (!c.is_ascii() && c.is_alphanumeric())
            });
            if !bare {
                return None;
            }
            (word.to_string(), &rest[end..])
        };
        if !tail.is_empty() && !tail.starts_with(|c: char| c.is_ascii_whitespace()) {
            return None;
        }
        out.push(word);
        rest = tail.trim_start_matches(|c: char| c.is_ascii_whitespace());
    }
    Some(out)
}

/// The body of a `"..."` word (after its opening quote) and what follows it.
fn quoted_word(s: &str) -> Option<(String, &str)> {
    let mut word = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' if s[i + 1..].starts_with('"') => {
                word.push('"');
                chars.next();
            }
            '"' => return (!word.is_empty()).then_some((word, &s[i + 1..])),
            c if c.is_control() => return None,
            c => word.push(c),
        }
    }
    None
}

/// 42601 for text that is no command, quoting (the start of) it.
fn unknown(text: &str) -> PgError {
    let mut quoted: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(QUOTE_MAX_CHARS)
        .collect();
    if text
        .chars()
        .filter(|c| !c.is_control())
        .nth(QUOTE_MAX_CHARS)
        .is_some()
    {
        quoted.push_str("...");
    }
    PgError::error("42601", format!("unknown command \"{quoted}\"")).with_hint(format!(
        "The admin console knows: {}.",
        USAGE.replace('\n', ", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQLSTATE `sql` is refused with (the `set` tests use it too).
    pub(super) fn code(sql: &str) -> &'static str {
        match parse(sql) {
            Ok(c) => panic!("{sql:?} parsed as {c:?}"),
            Err(e) => e.code,
        }
    }

    #[test]
    fn known_commands_in_any_case_and_spacing() {
        let cases = [
            ("SHOW VERSION", Command::ShowVersion),
            ("show version;", Command::ShowVersion),
            ("  Show\tPools ;  ", Command::ShowPools),
            ("\r\nSHOW\n\nOVERHEAD;;", Command::ShowOverhead),
            ("sHoW cOnFiG", Command::ShowConfig),
            ("show databases", Command::ShowDatabases),
            ("SHOW STATS", Command::ShowStats),
            ("show Stats_Totals;", Command::ShowStatsTotals),
            ("SHOW TOTALS", Command::ShowTotals),
            ("show help", Command::ShowHelp),
            ("reload;", Command::Reload),
            ("ShutDown", Command::Shutdown),
            ("show clients", Command::ShowClients),
            ("SHOW SERVERS;", Command::ShowServers),
            ("PAUSE", Command::Pause(None)),
            ("pause App_1", Command::Pause(Some("App_1".into()))),
            (
                "RESUME \"my db\"\"x\"",
                Command::Resume(Some("my db\"x".into())),
            ),
            ("resume;", Command::Resume(None)),
            ("KILL app", Command::Kill("app".into())),
            ("kill \"Åsa\"", Command::Kill("Åsa".into())),
            ("kill base_données", Command::Kill("base_données".into())),
            ("show users", Command::ShowUsers),
            ("SHOW LISTS;", Command::ShowLists),
            ("show mem", Command::ShowMem),
            ("SHOW STATE", Command::ShowState),
            ("show config_reload", Command::ShowConfigReload),
            ("DISABLE app", Command::Disable("app".into())),
            ("enable \"my db\"", Command::Enable("my db".into())),
            ("RECONNECT", Command::Reconnect(None)),
            ("reconnect app;", Command::Reconnect(Some("app".into()))),
            ("WAIT_CLOSE", Command::WaitClose(None)),
            ("wait_close app", Command::WaitClose(Some("app".into()))),
            ("KILL_CLIENT 1234", Command::KillClient(1234)),
        ];

        for (sql, want) in cases {
            assert_eq!(parse(sql), Ok(want), "{sql:?}");
        }
    }

    #[test]
    fn only_show_commands_only_read() {
        for sql in [
            "SHOW POOLS",
            "show help",
            "SHOW USERS",
            "SHOW CONFIG_RELOAD",
        ] {
            assert!(parse(sql).unwrap().only_reads(), "{sql}");
        }
        for sql in [
            "PAUSE",
            "RELOAD",
            "SET a.b = 1",
            "KILL_CLIENT 1",
            "DISABLE x",
            "SHUTDOWN",
        ] {
            assert!(!parse(sql).unwrap().only_reads(), "{sql}");
        }
    }

    #[test]
    fn kill_client_needs_a_number() {
        assert_eq!(code("KILL_CLIENT abc"), "22P02");
        assert_eq!(code("KILL_CLIENT 99999999999999999999999"), "22P02");
        assert_eq!(code("KILL_CLIENT"), "42601");
        assert_eq!(code("KILL_CLIENT -1"), "42601");
        assert_eq!(code("DISABLE"), "42601");
        assert_eq!(code("RECONNECT a b"), "42601");
    }

    #[test]
    fn nothing_but_whitespace_and_semicolons_is_an_empty_query() {
        for sql in ["", ";", " ; ;\n", "\t"] {
            assert_eq!(parse(sql), Ok(Command::Empty), "{sql:?}");
        }
    }

    #[test]
    fn malformed_input_is_a_syntax_error_never_a_panic() {
        let long = "SHOW ".to_string() + &"x".repeat(100_000);
        let cases = [
            "SHOW",
            "SHOW POOLS EXTRA",
            "RELOAD now",
            "SELECT 1",
            "SHOW\0POOLS",
            "SHOW POOLS\0",
            "\0",
            "SHOW POOLS; SHOW STATS",
            "SHOW ΠOOLS",
            "SHOW\u{a0}POOLS",
            "KILL",
            "PAUSE a b",
            "PAUSE \"unterminated",
            "PAUSE \"\"",
            "PAUSE \"a\"b",
            "PAUSE a-b",
            "PAUSE \"a\0b\"",
            "RESUME 'app'",
            long.as_str(),
        ];
        for sql in cases {
            assert_eq!(code(sql), "42601", "{sql:?}");
        }
    }

    #[test]
    fn unknown_command_quotes_a_bounded_text_and_lists_the_commands() {
        let e = parse(&("FROB ".to_string() + &"é".repeat(1000))).unwrap_err();
        assert!(
            e.message.starts_with("unknown command \"FROB é"),
            "{}",
            e.message
        );
        assert!(e.message.ends_with("...\""), "{}", e.message);
        assert!(e.message.chars().count() < QUOTE_MAX_CHARS + 30);
        let hint = e.hint.unwrap_or_default();
        assert!(hint.contains("SHOW HELP|VERSION"), "{hint}");
        assert!(
            hint.contains("RELOAD") && hint.contains("SHUTDOWN"),
            "{hint}"
        );

        let e = parse("bogus\0\x01cmd").unwrap_err();
        assert_eq!(e.message, "unknown command \"boguscmd\"");
    }
}
