//! The pgharbor.toml being written: tables in the reference file's order,
//! keys in the order they were set, each with the PgBouncer line it came from.

use crate::config::toml_key;

/// A TOML value of the generated file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string (durations are strings with a unit).
    Str(String),
    /// An integer.
    Int(i64),
    /// true or false.
    Bool(bool),
    /// An array of strings.
    List(Vec<String>),
}

impl Value {
    fn render(&self) -> String {
        match self {
            Value::Str(s) => quote(s),
            Value::Int(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::List(items) => {
                let items: Vec<String> = items.iter().map(|s| quote(s)).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }
}

/// One key of a table, and the comment that says where it came from.
#[derive(Debug, Clone)]
struct Key {
    name: String,
    value: Value,
    from: String,
}

/// The generated document.
#[derive(Debug, Default)]
pub struct Doc {
    /// (table path such as `["databases", "*"]`, keys), in first-use order.
    tables: Vec<(Vec<String>, Vec<Key>)>,
}

/// The order of pgharbor's own sections; databases and users follow.
const SECTION_ORDER: &[&str] = &["listen", "tls", "auth", "pool", "admin", "service", "peers"];

impl Doc {
    /// Sets `table.key`, replacing an earlier value of the same key.
    pub fn set(&mut self, table: &[&str], key: &str, value: Value, from: impl Into<String>) {
        let path: Vec<String> = table.iter().map(|s| s.to_string()).collect();
        let at = match self.tables.iter().position(|(p, _)| *p == path) {
            Some(i) => i,
            None => {
                self.tables.push((path, Vec::new()));
                self.tables.len() - 1
            }
        };
        let keys = &mut self.tables[at].1;
        let key = Key {
            name: key.to_string(),
            value,
            from: from.into(),
        };
        match keys.iter_mut().find(|k| k.name == key.name) {
            Some(old) => *old = key,
            None => keys.push(key),
        }
    }

    /// The TOML text, with `header` as its opening comment lines.
    pub fn render(&self, header: &[String]) -> String {
        let mut tables: Vec<&(Vec<String>, Vec<Key>)> = self.tables.iter().collect();
        // Stable: databases and users keep the PgBouncer file's order.
        tables.sort_by_key(|(path, _)| {
            let first = path.first().map(String::as_str).unwrap_or("");
            SECTION_ORDER
                .iter()
                .position(|s| *s == first)
                .unwrap_or(SECTION_ORDER.len() + usize::from(first == "users"))
        });
        let mut out = String::new();
        for line in header {
            out.push_str(&format!("# {line}\n"));
        }
        for (path, keys) in tables {
            let header: Vec<String> = path.iter().map(|p| toml_key(p)).collect();
            out.push_str(&format!("\n[{}]\n", header.join(".")));
            for key in keys {
                out.push_str(&format!("# {}\n", key.from));
                out.push_str(&format!(
                    "{} = {}\n",
                    toml_key(&key.name),
                    key.value.render()
                ));
            }
        }
        out
    }
}

/// A TOML basic string, escaped by the toml crate's own writer.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_tables_in_order_with_quoted_names_and_parses_back() {
        let mut doc = Doc::default();
        doc.set(
            &["databases", "*"],
            "conninfo",
            Value::Str("host=b".into()),
            "x",
        );
        doc.set(
            &["users", "bob"],
            "pool_mode",
            Value::Str("session".into()),
            "x",
        );
        doc.set(&["pool"], "default_pool_size", Value::Int(5), "x");
        doc.set(&["listen"], "addresses", Value::List(vec!["*".into()]), "a");
        doc.set(&["listen"], "addresses", Value::List(vec![]), "b");
        doc.set(&["databases", "my db"], "pool_size", Value::Int(2), "x");
        doc.set(&["listen"], "tcp_keepalive", Value::Bool(false), "x");
        doc.set(
            &["pool"],
            "server_reset_query",
            Value::Str("a \"q\"\\".into()),
            "x",
        );
        let text = doc.render(&["imported".into()]);
        let order: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
        assert_eq!(
            order,
            [
                "[listen]",
                "[pool]",
                "[databases.\"*\"]",
                "[databases.\"my db\"]",
                "[users.bob]"
            ]
        );
        let parsed: toml::Table = text.parse().expect("valid TOML");
        assert_eq!(
            parsed["listen"]["addresses"].as_array().map(Vec::len),
            Some(0)
        );
        assert_eq!(
            parsed["databases"]["*"]["conninfo"].as_str(),
            Some("host=b")
        );
        assert_eq!(
            parsed["databases"]["my db"]["pool_size"].as_integer(),
            Some(2)
        );
        assert_eq!(
            parsed["pool"]["server_reset_query"].as_str(),
            Some("a \"q\"\\")
        );
    }
}
