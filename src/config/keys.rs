//! The one table of config keys, in the spirit of PgBouncer's `CF_ABS`
//! table: for each key its section, name, kind (type, unit and range),
//! default, what a RELOAD does with a new value, a one-line doc, and how
//! SHOW CONFIG reads the running value.
//!
//! Everything else follows from it: validation takes each key's default and
//! range from its row (`values`), SHOW CONFIG lists the rows, and the tests
//! hold the serde mirror in `raw`, `conf/pgharbor.toml` and the README's key
//! reference to it. Adding a key means a row here, the field that holds its
//! parsed value (in `raw` and in the validated type, which the tests check
//! against the table) and the line that reads it through its row.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use super::{Config, ConfigError, DatabaseConfig, UserConfig};

mod front;
mod pools;
mod values;

#[cfg(test)]
mod tests;

/// A table of the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `[listen]`
    Listen,
    /// `[tls]`
    Tls,
    /// `[auth]`
    Auth,
    /// `[pool]`
    Pool,
    /// `[admin]`
    Admin,
    /// `[service]`
    Service,
    /// `[databases.NAME]`, one table per database.
    Database,
    /// `[users.NAME]`, one table per role.
    User,
    /// `[peers]`: instance id = conninfo, one line per peer.
    Peers,
}

impl Section {
    /// The table's name in dotted keys; `databases.*` and `users.*` stand for every name.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Listen => "listen",
            Section::Tls => "tls",
            Section::Auth => "auth",
            Section::Pool => "pool",
            Section::Admin => "admin",
            Section::Service => "service",
            Section::Database => "databases.*",
            Section::User => "users.*",
            Section::Peers => "peers",
        }
    }
}

/// What a RELOAD (or SIGHUP) does with a new value of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Nothing: the start-up value stays until a restart.
    Restart,
    /// Pools created after the reload use it; existing pools keep theirs.
    NewPools,
    /// Clients that connect or log in after the reload get it.
    NewLogins,
    /// Everyone, at once (checked on every use).
    Immediate,
}

impl Reload {
    /// How SHOW CONFIG_RELOAD's `reload` column and the README spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reload::Restart => "restart",
            Reload::NewPools => "new pools",
            Reload::NewLogins => "new logins",
            Reload::Immediate => "immediate",
        }
    }

    /// PgBouncer's `changeable`: whether a reload can change the key at all.
    pub fn changeable(self) -> bool {
        self != Reload::Restart
    }
}

/// The type of a key's value, with its unit and range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer from `min` to `max`.
    Count {
        /// Smallest value accepted.
        min: i64,
        /// Largest value accepted.
        max: i64,
    },
    /// A duration with a unit (`"15s"`, `"500ms"`); `zero` says whether
    /// `"0s"` is accepted (its meaning is in the key's doc).
    Duration {
        /// `"0s"` is a valid value.
        zero: bool,
    },
    /// Whole seconds, as a duration string, up to `max`; `"0s"` = the system default.
    Seconds {
        /// Largest number of seconds accepted.
        max: u64,
    },
    /// A size (`"256MiB"`, `"4MB"`; a bare number is bytes), greater than zero.
    Bytes,
    /// `true` or `false`.
    Bool,
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// Free text (an SQL statement, a user name).
    Text,
    /// A file or directory, relative to the config file's directory.
    Path,
    /// A list of names.
    Names,
    /// A list of IP addresses, `"*"` or `"localhost"`.
    Addresses,
    /// A list of CIDR blocks (`"10.0.0.0/8"`) or single addresses.
    Cidrs,
    /// Permission bits as an octal string.
    Mode,
    /// `"address:port"`.
    SocketAddr,
    /// A libpq connection string or `postgresql://` URI.
    ConnInfo,
    /// Some of these strings, `:`-separated, in order of preference.
    Ordered(&'static [&'static str]),
}

impl Kind {
    /// The type and unit in a few words, for the README's key reference.
    pub fn describe(self) -> String {
        match self {
            Kind::Count { min, max: i64::MAX } => format!("integer ≥ {min}"),
            Kind::Count { min, max } => format!("integer {min} to {max}"),
            Kind::Duration { zero: true } => "duration".into(),
            Kind::Duration { zero: false } => "duration > 0".into(),
            Kind::Seconds { max } => format!("whole seconds ≤ {max}s"),
            Kind::Bytes => "size".into(),
            Kind::Bool => "boolean".into(),
            Kind::Choice(names) => quoted(names),
            Kind::Text => "text".into(),
            Kind::Path => "path".into(),
            Kind::Names => "list of names".into(),
            Kind::Addresses => "list of addresses".into(),
            Kind::Cidrs => "list of CIDRs".into(),
            Kind::Mode => "octal mode".into(),
            Kind::SocketAddr => "address:port".into(),
            Kind::ConnInfo => "conninfo".into(),
            Kind::Ordered(names) => {
                format!("`:`-separated, in order of preference: {}", quoted(names))
            }
        }
    }
}

/// Names as code, comma-separated.
fn quoted(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    quoted.join(", ")
}

/// A key's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// An integer.
    Int(i64),
    /// A string, as written in the file (`"120s"`, `"DISCARD ALL"`).
    Str(&'static str),
    /// A boolean.
    Bool(bool),
    /// A list of strings.
    List(&'static [&'static str]),
    /// Not set: the feature it names is off.
    Unset,
    /// Must be given.
    Required,
    /// The value of another key, by dotted name (a database's `pool_size`
    /// is `pool.default_pool_size` unless given).
    Inherit(&'static str),
    /// `with` when `tls.cert_file` is set, else `without`.
    IfCertificate {
        /// With a certificate.
        with: &'static str,
        /// Without one.
        without: &'static str,
    },
}

/// How SHOW CONFIG reads a key's running value.
#[derive(Clone, Copy)]
pub enum Get {
    /// A key of `[listen]`, `[tls]`, `[auth]`, `[pool]` or `[admin]`.
    Global(fn(&Config) -> String),
    /// A key of each `[databases.NAME]`.
    Database(fn(&DatabaseConfig) -> String),
    /// A key of each `[users.NAME]`.
    User(fn(&UserConfig) -> String),
}

impl fmt::Debug for Get {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Get::Global(_) => "Global",
            Get::Database(_) => "Database",
            Get::User(_) => "User",
        })
    }
}

/// One config key: a row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The table it belongs to.
    pub section: Section,
    /// Its name inside the table.
    pub name: &'static str,
    /// Type, unit and range.
    pub kind: Kind,
    /// What it is when not given.
    pub default: DefaultValue,
    /// What a reload does with a new value.
    pub reload: Reload,
    /// What it means, in one line.
    pub doc: &'static str,
    /// Its running value as SHOW CONFIG shows it.
    pub get: Get,
}

/// Every key, in the order of `conf/pgharbor.toml`.
pub fn all() -> impl Iterator<Item = &'static Key> {
    front::KEYS.iter().chain(pools::KEYS.iter())
}

/// The keys a reload cannot change (`Reload::Restart`) whose values differ
/// between `old` and `new`, as dotted names with the database or user
/// filled in (`databases.app.max_db_connections`); entries only one of the
/// two has are left out (a new entry gets its values when first used).
pub fn restart_changes(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for key in all().filter(|k| k.reload == Reload::Restart) {
        match key.get {
            Get::Global(get) if get(old) != get(new) => out.push(key.dotted()),
            Get::Global(_) => {}
            Get::Database(get) => {
                for (name, db) in &new.databases {
                    if old.databases.get(name).is_some_and(|o| get(o) != get(db)) {
                        out.push(format!("databases.{name}.{}", key.name));
                    }
                }
            }
            Get::User(get) => {
                for (name, user) in &new.users {
                    if old.users.get(name).is_some_and(|o| get(o) != get(user)) {
                        out.push(format!("users.{name}.{}", key.name));
                    }
                }
            }
        }
    }
    out
}

/// The name of `[peers]`'s one row: each line's name is an instance id.
pub const PEER_KEY: &str = "*";

/// The key written `name` in `section`.
pub fn find(section: Section, name: &str) -> Option<&'static Key> {
    all().find(|k| k.section == section && k.name == name)
}

/// The key with dotted name `dotted` (`pool.mode`, `databases.*.pool_size`).
pub fn by_dotted(dotted: &str) -> Option<&'static Key> {
    all().find(|k| k.dotted() == dotted)
}

/// The key a path of the file names (`pool.mode`, `databases.app.pool_size`).
pub fn for_path(path: &str) -> Option<&'static Key> {
    let (table, rest) = path.split_once('.')?;
    let name = match table {
        // The database or user name sits between: the key is the last part.
        "databases" | "users" => rest.rsplit_once('.').map(|(_, n)| n)?,
        // Every line of `[peers]` is the one row `peers.*`.
        "peers" => PEER_KEY,
        _ => rest,
    };
    all().find(|k| k.section.as_str().split('.').next() == Some(table) && k.name == name)
}

impl Key {
    /// Whether the value is a duration string (`"15s"`).
    pub fn is_duration(&self) -> bool {
        matches!(self.kind, Kind::Duration { .. } | Kind::Seconds { .. })
    }
}

/// What to write instead of a duration given as a plain number: PgBouncer
/// writes seconds without a unit, pgharbor wants the unit spelled out.
pub fn duration_hint(number: &str) -> String {
    format!(
        "a duration needs a unit: write \"{number}s\" for {number} seconds (PgBouncer's unit) or \"{number}ms\" for milliseconds"
    )
}

/// Like [`find`], for validation: a key missing from the table is a bug,
/// reported as an error rather than a panic.
pub(super) fn key(section: Section, name: &str) -> Result<&'static Key, ConfigError> {
    find(section, name).ok_or_else(|| {
        ConfigError::invalid(
            format!("{}.{name}", section.as_str()),
            "not in the key table (a bug in pgharbor)",
        )
    })
}

impl Key {
    /// `listen.port`, `databases.*.pool_size`.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.section.as_str(), self.name)
    }

    /// The default as `conf/pgharbor.toml`'s `Default:` lines write it: a
    /// TOML value, `unset`, `none (required)`, or the key it is inherited from.
    pub fn default_doc(&self) -> String {
        match self.default {
            DefaultValue::Int(n) => n.to_string(),
            DefaultValue::Str(s) => format!("{s:?}"),
            DefaultValue::Bool(b) => b.to_string(),
            DefaultValue::List(items) => {
                let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
                format!("[{}]", quoted.join(", "))
            }
            DefaultValue::Unset => "unset".into(),
            DefaultValue::Required => "none (required)".into(),
            DefaultValue::Inherit(key) => key.into(),
            DefaultValue::IfCertificate { with, without } => {
                format!("{with:?} with tls.cert_file, else {without:?}")
            }
        }
    }

    /// The default in the form SHOW CONFIG shows values (durations as
    /// humantime writes them, sizes in bytes); inherited defaults are the
    /// running value of the key they come from.
    pub fn default_value(&self, config: &Config) -> String {
        match self.default {
            DefaultValue::Int(n) => n.to_string(),
            DefaultValue::Bool(b) => b.to_string(),
            DefaultValue::List(items) => items.join(", "),
            DefaultValue::Str(s) => self.show_literal(s),
            DefaultValue::IfCertificate { with, without } => {
                let s = if config.tls.has_certificate() {
                    with
                } else {
                    without
                };
                self.show_literal(s)
            }
            DefaultValue::Unset | DefaultValue::Required => String::new(),
            DefaultValue::Inherit(from) => match by_dotted(from).map(|k| k.get) {
                Some(Get::Global(get)) => get(config),
                _ => String::new(),
            },
        }
    }

    /// A string default as SHOW CONFIG shows a value of this key's kind.
    fn show_literal(&self, s: &str) -> String {
        let shown = match self.kind {
            Kind::Duration { .. } | Kind::Seconds { .. } => {
                humantime::parse_duration(s).ok().map(dur)
            }
            Kind::Bytes => s
                .parse::<bytesize::ByteSize>()
                .ok()
                .map(|b| b.as_u64().to_string()),
            _ => None,
        };
        shown.unwrap_or_else(|| s.to_string())
    }
}

/// A duration as SHOW CONFIG shows it (`"2m"`, `"0s"`).
pub(super) fn dur(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// An optional duration; unset is `"0s"`, as the keys that allow it write it.
pub(super) fn opt_dur(d: Option<Duration>) -> String {
    d.map(dur).unwrap_or_else(|| "0s".into())
}

/// An optional path; unset is `""`.
pub(super) fn opt_path(p: Option<&Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
}

/// Any optional value; unset is `""`.
pub(super) fn opt<T: fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}
