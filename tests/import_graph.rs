//! The import graph between src/'s top-level modules: no cycle, and none of
//! the arrows the module map forbids (issue 13). Read from the source text,
//! so a new `use crate::…` that closes a cycle fails here, not in review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the top-level modules it names through `crate::`.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Arrows the module map rules out: (from, to), `*` meaning any module.
/// config may depend only on its own values; protocol on nothing above it;
/// the lower layers never reach back up into client.
const FORBIDDEN: &[(&str, &str)] = &[
    ("protocol", "*"),
    ("config", "*"),
    ("pool", "client"),
    ("backend", "client"),
    ("stats", "client"),
    ("tls", "client"),
];

/// Modules every module may use without it counting as an arrow: the crate
/// root itself re-exports nothing upward.
const NOT_MODULES: &[&str] = &["self", "super"];

/// Unit-test helpers (`test_waker`, `test_dir`): compiled only for the
/// tests, holding nothing of the running pooler, so not part of the map.
const TEST_SUPPORT_PREFIX: &str = "test_";

#[test]
fn no_cycle_and_no_forbidden_arrow_between_top_level_modules() {
    let graph = crate_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        graph.len() >= 10,
        "read too few modules to mean anything: {graph:?}"
    );
    let problems = check(&graph);
    assert!(
        problems.is_empty(),
        "import graph problems:\n  {}\n\ngraph:\n{}",
        problems.join("\n  "),
        render(&graph)
    );
}

#[test]
fn the_check_finds_a_planted_cycle() {
    let mut graph = graph_of(&[("client", "pool"), ("pool", "backend")]);
    assert!(check(&graph).is_empty());
    graph
        .entry("backend".into())
        .or_default()
        .insert("client".into());
    let problems = check(&graph);
    assert!(
        problems.iter().any(|p| p.contains("cycle")
            && p.contains("backend")
            && p.contains("client")
            && p.contains("pool")),
        "{problems:?}"
    );
}

#[test]
fn the_check_finds_planted_forbidden_arrows() {
    let graph = graph_of(&[("protocol", "stream"), ("stats", "client")]);
    let problems = check(&graph);
    assert!(
        problems.iter().any(|p| p.contains("protocol -> stream")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("stats -> client")),
        "{problems:?}"
    );
}

#[test]
fn references_are_read_from_code_not_comments_or_strings() {
    let src = r#"
        //! Unlike crate::admin, this ...
        use crate::{pool::Pool, stats::{self, Class}, tls as t};
        use crate::backend;
        /* crate::client in a block comment */
        fn f() { let s = "crate::listener"; let q = '"'; crate::sockopt::apply(); }
        fn g<'a>(x: &'a str) -> char { let _ = "a \" crate::client"; '\'' }
        fn h() { crate::stream::x(); }
    "#;
    let names = references(src);
    let want: BTreeSet<String> = ["pool", "stats", "tls", "backend", "sockopt", "stream"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, want);
}

/// Reads every `.rs` file under `src` into the top-level module graph.
fn crate_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        let Some(top) = top_level(rel) else { continue };
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let deps = graph.entry(top.clone()).or_default();
        deps.extend(references(&text).into_iter().filter(|m| *m != top));
    }
    graph
}

/// The top-level module a file under src/ belongs to; None for the crate
/// roots, which wire modules together rather than belong to one.
fn top_level(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The top-level modules named by `crate::name` paths and by the first level
/// of `use crate::{…}` groups, outside comments and string literals.
fn references(text: &str) -> BTreeSet<String> {
    let code = strip_comments_and_strings(text);
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let preceded_by_ident = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_ident {
            continue;
        }
        let after = rest.trim_start();
        if let Some(group) = after.strip_prefix('{') {
            out.extend(group_heads(group));
        } else if let Some(name) = ident_at(after) {
            out.insert(name);
        }
    }
    out.retain(|m| !NOT_MODULES.contains(&m.as_str()) && !m.starts_with(TEST_SUPPORT_PREFIX));
    out
}

/// The first path segment of each item in a `{…}` group (text after the `{`).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut expect_head = true;
    let mut chars = group.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => expect_head = true,
            c if expect_head && depth == 0 && (c.is_alphabetic() || c == '_') => {
                if let Some(name) = ident_at(&group[i..]) {
                    for _ in 1..name.chars().count() {
                        chars.next();
                    }
                    heads.push(name);
                }
                expect_head = false;
            }
            _ => {}
        }
    }
    heads
}

fn ident_at(text: &str) -> Option<String> {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| text[..end].to_string())
}

/// Blanks out comments and string/char literals so only code is searched.
/// Raw strings are handled for the `r"…"` and `r#"…"#` forms the crate uses.
fn strip_comments_and_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if let Some(len) = char_literal_len(rest) {
            i += len;
            out.push_str("' '");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The byte length of a char literal at the start of `rest` (`'x'`, `'\''`,
/// `'\u{..}'`); None for a lifetime or anything else.
fn char_literal_len(rest: &str) -> Option<usize> {
    let body = rest.strip_prefix('\'')?;
    if let Some(escaped) = body.strip_prefix('\\') {
        let skip = escaped.chars().next()?.len_utf8();
        return escaped[skip..].find('\'').map(|e| 3 + skip + e);
    }
    let c = body.chars().next()?;
    body[c.len_utf8()..]
        .starts_with('\'')
        .then(|| 2 + c.len_utf8())
}

/// `Some(n)` when `rest` opens a raw string with n hashes (`r"`, `r#"`, …),
/// and `r` is not the tail of an identifier.
fn raw_string_start(rest: &str) -> Option<usize> {
    let tail = rest.strip_prefix('r')?;
    let hashes = tail.len() - tail.trim_start_matches('#').len();
    tail[hashes..].starts_with('"').then_some(hashes)
}

/// Every forbidden arrow and every cycle, as readable lines.
fn check(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for (from, deps) in graph {
        for to in deps {
            let banned = FORBIDDEN
                .iter()
                .any(|(f, t)| f == from && (*t == "*" || t == to));
            if banned {
                problems.push(format!("forbidden arrow {from} -> {to}"));
            }
        }
    }
    for cycle in cycles(graph) {
        problems.push(format!("cycle between {}", cycle.join(", ")));
    }
    problems
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|m| *m == v).expect("on stack");
                let mut comp: Vec<String> = self.stack.drain(at..).map(String::from).collect();
                if comp.len() > 1 {
                    comp.sort();
                    self.found.push(comp);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn graph_of(arrows: &[(&str, &str)]) -> Graph {
    let mut graph = Graph::new();
    for (from, to) in arrows {
        graph
            .entry(from.to_string())
            .or_default()
            .insert(to.to_string());
        graph.entry(to.to_string()).or_default();
    }
    graph
}

fn render(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(m, deps)| {
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            format!("  {m} -> {}", deps.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
