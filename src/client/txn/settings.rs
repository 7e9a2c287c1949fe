//! A transaction-pooled client's session settings, and making whichever
//! backend it gets match them. Parameters the server reports follow the
//! client through ParameterStatus (its shown set); the others are its
//! startup options and the SETs the pooler followed, replayed as written.

use std::sync::Arc;

use postgres_protocol::escape::escape_identifier;

use crate::backend::{push_set_config, Applied, BackendError, Link, ParamSet};
use crate::protocol::sql::Setting;

/// The settings of one client that no ParameterStatus reports.
#[derive(Debug, Default)]
pub struct ClientSettings {
    /// None while both lists are empty, as for most clients: boxed, since
    /// every idle client keeps its settings.
    lists: Option<Box<Lists>>,
}

#[derive(Debug, Default)]
struct Lists {
    /// Startup options, by lower-case name, given as a startup packet gives them.
    startup: Vec<(String, String)>,
    /// The client's own SETs that lasted, by lower-case name: `SET <sql>`.
    session: Vec<(String, String)>,
}

/// What one parameter should be given, borrowed from [`ClientSettings`].
#[derive(Clone, Copy)]
enum Want<'a> {
    Startup(&'a str),
    Sql(&'a str),
}

impl Want<'_> {
    fn is(self, applied: &Applied) -> bool {
        match (self, applied) {
            (Want::Startup(a), Applied::Startup(b)) | (Want::Sql(a), Applied::Sql(b)) => a == b,
            _ => false,
        }
    }

    fn to_applied(self) -> Applied {
        match self {
            Want::Startup(v) => Applied::Startup(v.to_string()),
            Want::Sql(v) => Applied::Sql(v.to_string()),
        }
    }
}

impl ClientSettings {
    /// A client whose startup packet asked for `startup` (parameters the
    /// server does not report).
    pub fn new(startup: Vec<(String, String)>) -> Self {
        let mut settings = ClientSettings { lists: None };
        if !startup.is_empty() {
            settings.lists_mut().startup = lower_case_names(startup);
        }
        settings
    }

    /// The startup options and the lasting SETs, to hand the client over.
    pub fn parts(&self) -> [&[(String, String)]; 2] {
        match &self.lists {
            Some(l) => [&l.startup, &l.session],
            None => [&[], &[]],
        }
    }

    /// A handed-over client's lasting SETs (lower-case name, `SET <sql>`).
    pub fn with_session(mut self, session: Vec<(String, String)>) -> Self {
        if !session.is_empty() {
            self.lists_mut().session = lower_case_names(session);
        }
        self
    }

    fn lists_mut(&mut self) -> &mut Lists {
        self.lists.get_or_insert_with(Box::default)
    }

    /// Records the client's SETs and RESETs that lasted. A RESET returns a
    /// parameter to the client's startup value (or the default), as on
    /// PostgreSQL.
    pub fn commit(&mut self, settings: &[Setting]) {
        for s in settings {
            match s {
                Setting::Set { name, sql } => {
                    let session = &mut self.lists_mut().session;
                    match session.iter_mut().find(|(k, _)| k == name) {
                        Some((_, v)) => v.clone_from(sql),
                        None => session.push((name.clone(), sql.clone())),
                    }
                }
                Setting::Reset { name } => self.forget(|k| k == name),
                Setting::ResetAll => self.forget(|_| true),
            }
        }
    }

    /// Drops the lasting SETs of the names `which` picks, and the lists
    /// once both are empty.
    fn forget(&mut self, which: impl Fn(&str) -> bool) {
        if let Some(l) = &mut self.lists {
            l.session.retain(|(k, _)| !which(k));
            if l.startup.is_empty() && l.session.is_empty() {
                self.lists = None;
            }
        }
    }

    /// Every parameter the client wants given, and how.
    fn wanted(&self) -> impl Iterator<Item = (&str, Want<'_>)> {
        let [startup, session] = self.parts();
        let startup = startup
            .iter()
            .filter(move |(k, _)| !session.iter().any(|(s, _)| s == k))
            .map(|(k, v)| (k.as_str(), Want::Startup(v)));
        startup.chain(session.iter().map(|(k, v)| (k.as_str(), Want::Sql(v))))
    }

    fn wants(&self, name: &str) -> bool {
        self.wanted().any(|(k, _)| k == name)
    }
}

fn lower_case_names(list: Vec<(String, String)>) -> Vec<(String, String)> {
    list.into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

/// Makes `backend` look like the client's own session: SETs the reported
/// parameters it follows where the backend's values differ (`tracked` says
/// which), gives it the client's other settings, and resets what another
/// client left. The statements are queued to go out with the client's first
/// message; every value was accepted by PostgreSQL before, so none fails.
pub fn sync(
    backend: &mut Link,
    (shown, settings): (&Arc<ParamSet>, &ClientSettings),
    tracked: &dyn Fn(&str) -> bool,
) -> Result<(), BackendError> {
    let mut sql = String::new();
    // The usual case, a backend last used by a client shown the same
    // values, costs one comparison instead of a lookup per parameter; and
    // once the backend shares the client's set, a pointer's.
    let params = backend.ledger_ref().params();
    let shared = Arc::ptr_eq(params, shown);
    let same = shared || params == shown;
    if same && !shared {
        backend.ledger().share_params(shown);
    }
    for (name, value) in shown.iter().filter(|_| !same) {
        if tracked(name) && backend.param(name) != Some(value) {
            push_set_config(&mut sql, name, value);
        }
    }
    let reported = sql.len();
    let applied = backend.ledger().applied();
    for (name, want) in settings.wanted() {
        if applied.get(name).is_some_and(|a| want.is(a)) {
            continue;
        }
        match want {
            Want::Startup(v) => push_set_config(&mut sql, name, v),
            Want::Sql(s) => {
                sql.push_str("SET ");
                sql.push_str(s);
                sql.push(';');
            }
        }
    }
    for name in applied.names().filter(|n| !settings.wants(n)) {
        sql.push_str("RESET ");
        sql.push_str(&escape_identifier(name));
        sql.push(';');
    }
    if sql.is_empty() {
        return Ok(());
    }
    let others = sql.len() > reported;
    backend.queue_queries(&[&sql])?;
    for (name, value) in shown.iter() {
        // Only a changed value copies a set the backend shares.
        if tracked(name) && backend.param(name) != Some(value) {
            backend.ledger().params_mut().set(name, value);
        }
    }
    if others {
        let applied = backend.ledger().applied();
        applied.clear();
        for (name, want) in settings.wanted() {
            applied.set(name, want.to_applied());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_brings_back_the_startup_value() {
        let mut c = ClientSettings::new(vec![("Work_Mem".into(), "8MB".into())]);
        let wanted = |c: &ClientSettings| {
            c.wanted()
                .map(|(k, w)| (k.to_string(), w.to_applied()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            wanted(&c),
            vec![("work_mem".into(), Applied::Startup("8MB".into()))]
        );
        c.commit(&[Setting::Set {
            name: "work_mem".into(),
            sql: "work_mem = '16MB'".into(),
        }]);
        assert_eq!(
            wanted(&c),
            vec![("work_mem".into(), Applied::Sql("work_mem = '16MB'".into()))]
        );
        c.commit(&[Setting::Reset {
            name: "work_mem".into(),
        }]);
        assert_eq!(
            wanted(&c),
            vec![("work_mem".into(), Applied::Startup("8MB".into()))]
        );
        c.commit(&[
            Setting::Set {
                name: "search_path".into(),
                sql: "search_path = a".into(),
            },
            Setting::ResetAll,
        ]);
        assert_eq!(wanted(&c).len(), 1);
    }

    #[test]
    fn a_client_without_settings_keeps_no_lists_and_a_reset_all_frees_them() {
        let mut c = ClientSettings::new(Vec::new());
        assert!(c.lists.is_none());
        c.commit(&[Setting::Set {
            name: "work_mem".into(),
            sql: "work_mem = '16MB'".into(),
        }]);
        assert_eq!(c.parts()[1].len(), 1);
        c.commit(&[Setting::ResetAll]);
        assert!(c.lists.is_none(), "nothing left to keep");
        assert!(c.wanted().next().is_none());
        let handed = ClientSettings::new(Vec::new())
            .with_session(vec![("DateStyle".into(), "DateStyle = ISO".into())]);
        assert_eq!(
            handed.parts()[1],
            [("datestyle".to_string(), "DateStyle = ISO".to_string())]
        );
        assert!(handed.parts()[0].is_empty());
    }
}
