//! `auth.ident_file`: pg_ident.conf's `MAPNAME SYSTEM-USERNAME PG-USERNAME`
//! lines, parsed and applied as PostgreSQL's `parse_ident_line` and
//! `check_ident_usermap`.
//!
//! A system name written `/regex` is searched in the system user; then a
//! `\1` in the PostgreSQL name is replaced (once) by the first capture, and
//! the result is compared literally. The PostgreSQL name may be `all`, or a
//! `/regex` of its own. `+group` needs role membership and is refused.
//! Unlike PostgreSQL, which finds out at login, a `\1` whose expression
//! has no capture group is refused when the file is read. Fields after the
//! third are ignored, as in PostgreSQL.

use std::path::Path;
use std::sync::Arc;

use super::rule::NameRegex;
use super::tokens::{self, Line, Token};
use super::{Files, HbaError};

/// The system-user column.
#[derive(Debug, Clone, PartialEq)]
pub enum IdentSystemUser {
    /// Exactly this name.
    Name(String),
    /// A `/regex`, whose first capture may replace `\1`.
    Regex(NameRegex),
}

/// The PostgreSQL-user column.
#[derive(Debug, Clone, PartialEq)]
pub enum IdentPgUser {
    /// `all`: any PostgreSQL user.
    All,
    /// Exactly this name (after `\1` substitution).
    Name(String),
    /// A `/regex`.
    Regex(NameRegex),
}

/// One pg_ident.conf line.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentLine {
    /// The file it is in.
    pub file: Arc<Path>,
    /// Its 1-based line number.
    pub line: usize,
    /// The map it belongs to.
    pub map: String,
    /// Which system (OS or certificate) users it is for.
    pub system_user: IdentSystemUser,
    /// Which PostgreSQL users they may log in as.
    pub pg_user: IdentPgUser,
}

/// The lines of an ident file, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdentMaps {
    lines: Vec<IdentLine>,
}

impl IdentMaps {
    /// Reads and parses `path` (and the files it includes) through `files`.
    pub fn load_from(files: &dyn Files, path: &Path) -> Result<IdentMaps, HbaError> {
        let lines = tokens::tokenize(files, path)?;
        let lines = (lines.iter())
            .map(|l| ident_line(l).map_err(|m| l.error(m)))
            .collect::<Result<_, _>>()?;
        Ok(IdentMaps { lines })
    }

    /// The lines, in file order.
    pub fn lines(&self) -> &[IdentLine] {
        &self.lines
    }

    /// Whether some line belongs to `map`.
    pub fn contains(&self, map: &str) -> bool {
        self.lines.iter().any(|l| l.map == map)
    }

    /// Whether `map` lets `system_user` log in as `pg_user`: the first line
    /// of the map that matches both says yes. A `\1` whose capture group
    /// took no part in the match ends the search with no, as PostgreSQL's
    /// error does.
    pub fn allows(&self, map: &str, system_user: &str, pg_user: &str) -> bool {
        for line in self.lines.iter().filter(|l| l.map == map) {
            match line.check(system_user, pg_user) {
                Check::Yes => return true,
                Check::No => continue,
                Check::Error => return false,
            }
        }
        false
    }
}

/// `ident_allows(maps, map, system_user, pg_user)`: [`IdentMaps::allows`].
pub fn ident_allows(maps: &IdentMaps, map: &str, system_user: &str, pg_user: &str) -> bool {
    maps.allows(map, system_user, pg_user)
}

enum Check {
    Yes,
    No,
    Error,
}

impl IdentLine {
    fn check(&self, system_user: &str, pg_user: &str) -> Check {
        let yes = |ok: bool| if ok { Check::Yes } else { Check::No };
        match &self.system_user {
            IdentSystemUser::Name(name) => yes(name == system_user && self.pg_user.admits(pg_user)),
            IdentSystemUser::Regex(re) => {
                let Some(captures) = re.regex.captures(system_user) else {
                    return Check::No;
                };
                match &self.pg_user {
                    IdentPgUser::Name(name) if name.contains("\\1") => match captures.get(1) {
                        // The substituted name is a literal, never `all`.
                        Some(m) => yes(name.replacen("\\1", m.as_str(), 1) == pg_user),
                        None => Check::Error,
                    },
                    other => yes(other.admits(pg_user)),
                }
            }
        }
    }
}

impl IdentPgUser {
    fn admits(&self, pg_user: &str) -> bool {
        match self {
            IdentPgUser::All => true,
            IdentPgUser::Name(name) => name == pg_user,
            IdentPgUser::Regex(re) => re.regex.is_match(pg_user),
        }
    }
}

fn ident_line(line: &Line) -> Result<IdentLine, String> {
    let mut fields = line.fields.iter();
    let mut next = || -> Result<&Token, String> {
        match fields.next().map(Vec::as_slice) {
            Some([token]) => Ok(token),
            Some(_) => Err("multiple values in ident field".to_owned()),
            None => Err("missing entry at end of line".to_owned()),
        }
    };
    let map = next()?.text.clone();
    let system = next()?;
    let pg = next()?;
    let system_user = match system.text.strip_prefix('/') {
        Some(source) => IdentSystemUser::Regex(NameRegex::new(source)?),
        None => IdentSystemUser::Name(system.text.clone()),
    };
    if !pg.quoted && pg.text.starts_with('+') {
        return Err(format!(
            "role membership (\"{}\") cannot be checked by pgharbor; list the member roles instead",
            pg.text
        ));
    }
    let pg_user = match pg.text.strip_prefix('/') {
        _ if pg.is_keyword("all") => IdentPgUser::All,
        Some(source) => IdentPgUser::Regex(NameRegex::new(source)?),
        None => IdentPgUser::Name(pg.text.clone()),
    };
    if let (IdentSystemUser::Regex(re), IdentPgUser::Name(name)) = (&system_user, &pg_user) {
        if name.contains("\\1") && re.regex.captures_len() < 2 {
            return Err(format!(
                "regular expression \"{}\" has no subexpressions as requested by backreference in \"{name}\"",
                re.source
            ));
        }
    }
    Ok(IdentLine {
        file: line.file.clone(),
        line: line.number,
        map,
        system_user,
        pg_user,
    })
}
