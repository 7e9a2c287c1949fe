//! The key table against everything that must agree with it: the typed
//! defaults validation produces, the serde mirror's field names,
//! `conf/pgharbor.toml` and the README's key reference.

use std::collections::BTreeSet;
use std::path::Path;

use super::*;

const PATH: &str = "/etc/pgharbor/pgharbor.toml";
/// The least config that validates (an auth file for the default
/// scram-sha-256) plus one database and one user with nothing set, so their
/// keys' unset values can be read too.
const MINIMAL: &str = "[auth]\nauth_file = \"users.txt\"\n\
                       [databases.app]\nconninfo = \"\"\n[users.u]\n";
/// Keys [`MINIMAL`] has to set.
const SET_BY_MINIMAL: [&str; 2] = ["auth.auth_file", "databases.*.conninfo"];

const CONF: &str = include_str!("../../../conf/pgharbor.toml");
const README: &str = include_str!("../../../README.md");

fn parse(text: &str) -> Config {
    Config::parse(text, Path::new(PATH)).unwrap_or_else(|e| panic!("{text}\n=> {e}"))
}

/// A key's value in `c` as SHOW CONFIG shows it.
fn shown(key: &Key, c: &Config) -> String {
    match key.get {
        Get::Global(get) => get(c),
        Get::Database(get) => get(&c.databases["app"]),
        Get::User(get) => get(&c.users["u"]),
    }
}

#[test]
fn an_empty_config_gets_every_table_default() {
    let c = parse(MINIMAL);
    let mut checked = 0;
    for key in all().filter(|k| !SET_BY_MINIMAL.contains(&k.dotted().as_str())) {
        // An unset key shows as "" whatever it falls back to.
        let want = match key.default {
            DefaultValue::Unset | DefaultValue::Inherit(_) => String::new(),
            _ => key.default_value(&c),
        };
        assert_eq!(shown(key, &c), want, "{}", key.dotted());
        checked += 1;
    }
    assert!(checked > 40, "only {checked} keys");
    // The one default that depends on another key.
    let with_cert = parse(&format!(
        "{MINIMAL}[tls]\ncert_file = \"a.crt\"\nkey_file = \"a.key\"\n"
    ));
    let sslmode = find(Section::Tls, "sslmode").expect("tls.sslmode");
    assert_eq!(
        shown(sslmode, &with_cert),
        sslmode.default_value(&with_cert)
    );
    assert_eq!(sslmode.default_value(&with_cert), "prefer");
}

#[test]
fn each_default_written_out_parses_to_the_same_config() {
    let mut text = String::new();
    let mut section = None;
    for key in all() {
        let value = match key.default {
            DefaultValue::Int(_)
            | DefaultValue::Str(_)
            | DefaultValue::Bool(_)
            | DefaultValue::List(_) => key.default_doc(),
            _ => continue,
        };
        if section != Some(key.section) {
            let header = match key.section {
                Section::Database => "databases.app".to_string(),
                Section::User => "users.u".to_string(),
                other => other.as_str().to_string(),
            };
            text.push_str(&format!("[{header}]\n"));
            if key.section == Section::Auth {
                text.push_str("auth_file = \"users.txt\"\n");
            }
            section = Some(key.section);
        }
        text.push_str(&format!("{} = {value}\n", key.name));
    }
    text.push_str("[databases.app]\nconninfo = \"\"\n[users.u]\n");
    let written = parse(&text);
    assert_eq!(written, parse(MINIMAL), "{text}");
}

#[test]
fn inherited_defaults_name_a_key_of_the_same_kind() {
    for key in all() {
        if let DefaultValue::Inherit(from) = key.default {
            let source =
                by_dotted(from).unwrap_or_else(|| panic!("{}: no key {from}", key.dotted()));
            assert!(matches!(source.get, Get::Global(_)), "{from}");
            let same = match (key.kind, source.kind) {
                (Kind::Count { .. }, Kind::Count { .. }) => true,
                (a, b) => a == b,
            };
            assert!(same, "{} inherits {from} of another kind", key.dotted());
        }
    }
}

#[test]
fn keys_are_unique_and_documented_in_one_line() {
    let mut seen = BTreeSet::new();
    for key in all() {
        assert!(seen.insert(key.dotted()), "{} twice", key.dotted());
        assert!(
            !key.doc.is_empty() && !key.doc.contains('\n'),
            "{}",
            key.dotted()
        );
        assert!(
            key.doc.ends_with('.'),
            "{}: doc ends without a period",
            key.dotted()
        );
    }
}

/// The field names serde lists when it refuses an unknown key in `table`.
fn serde_fields(table: Option<&str>) -> BTreeSet<String> {
    let text = match table {
        // serde refuses the key before validation asks for anything else.
        Some(t) => format!("[{t}]\nzzz_unknown = 1\n"),
        None => "zzz_unknown = 1\n".to_string(),
    };
    let e = match Config::parse(&text, Path::new(PATH)) {
        Ok(_) => panic!("unknown key accepted in {table:?}"),
        Err(e) => e.to_string(),
    };
    let expected = e.split_once("expected").unwrap_or_else(|| panic!("{e}")).1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_table_and_the_serde_mirror_name_the_same_keys() {
    let tables = [
        (Section::Listen, "listen"),
        (Section::Tls, "tls"),
        (Section::Auth, "auth"),
        (Section::Pool, "pool"),
        (Section::Admin, "admin"),
        (Section::Service, "service"),
        (Section::Database, "databases.app"),
        (Section::User, "users.u"),
    ];
    for (section, table) in tables {
        let in_table: BTreeSet<String> = all()
            .filter(|k| k.section == section)
            .map(|k| k.name.to_string())
            .collect();
        assert_eq!(serde_fields(Some(table)), in_table, "[{table}]");
    }
    let top: BTreeSet<String> = [
        "listen",
        "tls",
        "auth",
        "pool",
        "admin",
        "service",
        "databases",
        "users",
        "peers",
    ]
    .map(String::from)
    .into();
    assert_eq!(serde_fields(None), top);
}

/// The section a `[header]` line of the reference file opens.
fn section_of(header: &str) -> Section {
    match header {
        "listen" => Section::Listen,
        "tls" => Section::Tls,
        "auth" => Section::Auth,
        "pool" => Section::Pool,
        "admin" => Section::Admin,
        "service" => Section::Service,
        h if h.starts_with("databases.") => Section::Database,
        h if h.starts_with("users.") => Section::User,
        "peers" => Section::Peers,
        h => panic!("conf/pgharbor.toml: unknown table [{h}]"),
    }
}

/// `name` of a line `name = ...` or `# name = ...`.
fn key_line(line: &str, section: Option<Section>) -> Option<&str> {
    let line = line.strip_prefix('#').map_or(line, str::trim_start);
    let (name, _) = line.split_once(" = ")?;
    // A `[peers]` line is named by an instance id; all are the row `peers.*`.
    let id = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
    if id && section == Some(Section::Peers) {
        return Some(crate::config::keys::PEER_KEY);
    }
    let bare = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    bare.then_some(name)
}

#[test]
fn the_reference_file_documents_every_key_with_its_default() {
    // It parses (so it names no key the parser refuses) ...
    parse(CONF);
    let mut section = None;
    let mut comments: Vec<&str> = Vec::new();
    let mut documented = BTreeSet::new();
    for line in CONF.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(section_of(header));
            comments.clear();
            continue;
        }
        let Some(name) = key_line(line, section) else {
            match line.strip_prefix('#') {
                Some(comment) => comments.push(comment),
                None => comments.clear(),
            }
            continue;
        };
        // ... names no key the table lacks, even in a comment ...
        let Some(section) = section else {
            panic!("conf/pgharbor.toml: {name} outside a table");
        };
        let key = find(section, name).unwrap_or_else(|| {
            panic!(
                "conf/pgharbor.toml: {}.{name} is not in the key table",
                section.as_str()
            )
        });
        // ... and says each key's default in the comment right above it (a
        // key shown again, in a second database, may say nothing).
        let said = comments
            .iter()
            .rev()
            .find_map(|c| c.split_once("Default: ").map(|(_, d)| d));
        let want = key.default_doc();
        let agrees = said.is_some_and(|d| {
            d.strip_prefix(&want)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', ' ', ',', ';']))
        });
        let again = said.is_none() && documented.contains(&key.dotted());
        assert!(
            agrees || again,
            "conf/pgharbor.toml: {} should say \"Default: {want}\" above it, says {said:?}",
            key.dotted()
        );
        if let (Kind::Choice(choices), false) = (key.kind, again) {
            let text = comments.join(" ");
            for choice in choices {
                assert!(
                    text.contains(choice),
                    "{}: {choice} not documented",
                    key.dotted()
                );
            }
        }
        documented.insert(key.dotted());
        comments.clear();
    }
    for key in all() {
        assert!(
            documented.contains(&key.dotted()),
            "conf/pgharbor.toml does not document {}",
            key.dotted()
        );
    }
}

/// The README's key reference as the table says it should read.
fn reference() -> String {
    let mut out = String::from(
        "| key | type | default | reload | meaning |\n| --- | --- | --- | --- | --- |\n",
    );
    for key in all() {
        let default = match key.default {
            DefaultValue::Unset | DefaultValue::Required => key.default_doc(),
            _ => format!("`{}`", key.default_doc()),
        };
        out.push_str(&format!(
            "| `{}` | {} | {default} | {} | {} |\n",
            key.dotted(),
            key.kind.describe(),
            key.reload.as_str(),
            key.doc.replace('|', "\\|"),
        ));
    }
    out
}

#[test]
fn the_readme_key_reference_is_the_table() {
    const BEGIN: &str = "<!-- config keys: generated from src/config/keys; the test in src/config/keys/tests.rs prints it -->\n";
    const END: &str = "<!-- end of config keys -->";
    let found = README
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(table, _)| table);
    let want = reference();
    assert!(
        found == Some(want.as_str()),
        "README.md's key reference is out of date; between the markers it should read:\n{BEGIN}{want}{END}"
    );
}

#[test]
fn restart_changes_names_the_changed_keys_only_a_restart_applies() {
    let old = parse(
        "[auth]\nauth_file = \"users.txt\"\n[pool]\nmax_client_conn = 10\n\
         [databases.app]\nconninfo = \"\"\nmax_db_connections = 2\npool_size = 4\n\
         [databases.gone]\nconninfo = \"\"\n[users.u]\nmax_user_connections = 1\n",
    );
    let new = parse(
        "[auth]\nauth_file = \"users.txt\"\n[pool]\nmax_client_conn = 20\n\
         [databases.app]\nconninfo = \"\"\nmax_db_connections = 3\npool_size = 1\n\
         [databases.added]\nconninfo = \"\"\nmax_db_connections = 9\n\
         [users.u]\nmax_user_connections = 2\n",
    );
    assert_eq!(
        restart_changes(&old, &new),
        [
            "pool.max_client_conn",
            "databases.app.max_db_connections",
            "users.u.max_user_connections"
        ]
    );
    assert!(restart_changes(&new, &new).is_empty());
}
