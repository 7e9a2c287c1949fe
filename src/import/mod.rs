//! `pgharbor import-pgbouncer`: a PgBouncer configuration as an equivalent
//! pgharbor.toml, with a note for every key that could not be carried over.
//!
//! Pure text to text: the caller loads the result with `Config::parse` to
//! check it. Keys PgBouncer leaves at a default that differs from
//! pgharbor's are written out with PgBouncer's value, so the imported
//! pooler behaves as the PgBouncer did, not as a fresh pgharbor would.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod entries;
mod ini;
mod out;
mod settings;
#[cfg(test)]
mod tests;

use out::{Doc, Value};
use settings::Rule;

/// PgBouncer's settings that are the same integer in pgharbor, as
/// (PgBouncer name, pgharbor dotted key): SHOW CONFIG lists them under
/// PgBouncer's name too, for tools that read them by that name.
pub fn same_integer_settings() -> impl Iterator<Item = (&'static str, String)> {
    settings::SETTINGS
        .iter()
        .filter_map(|(name, rule)| match rule {
            Rule::To {
                table,
                key,
                conv: settings::Conv::Int,
                ..
            } => Some((*name, format!("{table}.{key}"))),
            _ => None,
        })
}

/// Why a PgBouncer file could not be imported at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file (or an `%include`d one) could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line that is not ini syntax.
    #[error("{at}: {reason}")]
    Syntax {
        /// `file:line`.
        at: String,
        /// What is wrong.
        reason: String,
    },
}

/// Whether a key left out changes what the pooler does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Impact {
    /// pgharbor behaves differently from the PgBouncer that had this setting.
    Differs,
    /// No equivalent is needed: pgharbor behaves this way anyway.
    Same,
}

/// One key not carried over as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Whether behaviour differs.
    pub impact: Impact,
    /// `file:line` of the key.
    pub at: String,
    /// The key, e.g. `auth_query` or `[databases] app: connect_query`.
    pub key: String,
    /// Why it was not carried over, or what pgharbor does instead.
    pub reason: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.impact {
            Impact::Differs => "not imported",
            Impact::Same => "not needed",
        };
        write!(f, "{}: {tag}: {}: {}", self.at, self.key, self.reason)
    }
}

/// The notes of one import, in file order.
#[derive(Debug, Default)]
pub struct Notes(Vec<Note>);

impl Notes {
    fn push(&mut self, impact: Impact, at: &str, key: &str, reason: impl Into<String>) {
        self.0.push(Note {
            impact,
            at: at.to_string(),
            key: key.to_string(),
            reason: reason.into(),
        });
    }

    /// A key whose absence changes behaviour.
    pub fn differs(&mut self, at: &str, key: &str, reason: impl Into<String>) {
        self.push(Impact::Differs, at, key, reason);
    }

    /// A key pgharbor needs no equivalent of.
    pub fn same(&mut self, at: &str, key: &str, reason: impl Into<String>) {
        self.push(Impact::Same, at, key, reason);
    }
}

/// The result of an import.
#[derive(Debug)]
pub struct Imported {
    /// The pgharbor.toml text.
    pub toml: String,
    /// Every key not carried over as it was, those that change behaviour first.
    pub notes: Vec<Note>,
}

/// An import and whether pgharbor loads it.
#[derive(Debug)]
pub struct Translation {
    /// The import.
    pub imported: Imported,
    /// Why pgharbor would refuse it, if it would.
    pub refused: Option<crate::config::ConfigError>,
}

/// [`import`], checked by loading the result as pgharbor would from
/// `output` (relative file names resolve against its directory).
pub fn translate(
    ini: &Path,
    userlist: Option<&Path>,
    output: Option<&Path>,
) -> Result<Translation, ImportError> {
    let imported = import(ini, userlist)?;
    let target = output.map_or_else(|| PathBuf::from("pgharbor.toml"), Path::to_path_buf);
    let refused = crate::config::Config::parse(&imported.toml, &target).err();
    Ok(Translation { imported, refused })
}

/// Imports `ini` (PgBouncer's pgbouncer.ini); `userlist` replaces its auth_file.
pub fn import(ini: &Path, userlist: Option<&Path>) -> Result<Imported, ImportError> {
    let entries = ini::read(ini)?;
    let mut doc = Doc::default();
    let mut notes = Notes::default();
    // PgBouncer keeps the last of repeated keys; so does this map.
    let mut general: BTreeMap<String, (String, String)> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.section == "pgbouncer") {
        general.insert(e.key.to_ascii_lowercase(), (e.value.clone(), e.at.clone()));
    }
    for (key, (value, at)) in &general {
        setting(&mut doc, &mut notes, key, value, at);
    }
    absent_defaults(&mut doc, &general);
    if let Some(path) = userlist {
        doc.set(
            &["auth"],
            "auth_file",
            Value::Str(path.display().to_string()),
            "--userlist",
        );
    }
    // PgBouncer reads [peers] only when peer_id names this instance.
    let peering = general
        .get("peer_id")
        .is_some_and(|(v, _)| !matches!(v.trim(), "" | "0"));
    let backend = entries::backend_pairs(|k| general.get(k).cloned(), &mut notes);
    for e in &entries {
        match e.section.as_str() {
            "pgbouncer" => {}
            "databases" => {
                entries::database(&mut doc, &mut notes, &e.key, &e.value, &backend, &e.at)
            }
            "users" => entries::user(&mut doc, &mut notes, &e.key, &e.value, &e.at),
            "peers" => entries::peer(&mut doc, &mut notes, peering, &e.key, &e.value, &e.at),
            other => notes.differs(
                &e.at,
                &format!("[{other}] {}", e.key),
                "not a section pgharbor has",
            ),
        }
    }
    let mut notes = notes.0;
    notes.sort_by_key(|n| n.impact);
    let mut header = vec![
        format!(
            "Imported from {} by `pgharbor import-pgbouncer`.",
            ini.display()
        ),
        "Each key's comment names the PgBouncer line it came from.".to_string(),
    ];
    let differs: Vec<&Note> = notes
        .iter()
        .filter(|n| n.impact == Impact::Differs)
        .collect();
    if !differs.is_empty() {
        header.push(format!("Not imported ({}):", differs.len()));
        header.extend(
            differs
                .iter()
                .map(|n| format!("  {}: {}: {}", n.at, n.key, n.reason)),
        );
    }
    Ok(Imported {
        toml: doc.render(&header),
        notes,
    })
}

/// One `[pgbouncer]` key.
fn setting(doc: &mut Doc, notes: &mut Notes, key: &str, value: &str, at: &str) {
    match settings::rule(key) {
        Some(Rule::To { conv, .. }) if conv == settings::Conv::Unset && value.trim().is_empty() => {
            notes.same(at, key, "empty: unset, as pgharbor's default");
        }
        Some(Rule::To {
            table,
            key: to,
            conv,
            ..
        }) => match settings::convert(conv, value) {
            Ok(v) => doc.set(&[table], to, v, format!("{at}: {key} = {value}")),
            Err(reason) => notes.differs(at, key, format!("{reason}; pgharbor's default applies")),
        },
        Some(Rule::Backend) => {}
        Some(Rule::None { same, reason }) => {
            let harmless = same
                .iter()
                .any(|s| *s == settings::ANY || s.eq_ignore_ascii_case(value.trim()));
            if harmless {
                notes.same(at, key, reason);
            } else {
                notes.differs(at, key, reason);
            }
        }
        None => notes.differs(at, key, "not a PgBouncer setting this importer knows"),
    }
}

/// PgBouncer's defaults that differ from pgharbor's, for keys the file
/// leaves unset.
fn absent_defaults(doc: &mut Doc, general: &BTreeMap<String, (String, String)>) {
    for (key, rule) in settings::SETTINGS {
        let Rule::To {
            table,
            key: to,
            conv,
            absent: Some(default),
        } = *rule
        else {
            continue;
        };
        if general.contains_key(*key) {
            continue;
        }
        if let Ok(v) = settings::convert(conv, default) {
            doc.set(
                &[table],
                to,
                v,
                format!("PgBouncer's default: {key} = {default}"),
            );
        }
    }
}
