//! Protocol-level prepared statements in transaction pooling: each client's
//! names map to pooler statements, one per distinct (query, parameter types)
//! across all clients, which every backend prepares under its own name the
//! first time a client needs it there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use crate::protocol::PgError;

/// One statement as the client defined it, shared by every client that
/// defined the same one; freed (and its registry entry with it) when the
/// last client that holds it closes it or leaves.
#[derive(Debug)]
pub struct Statement {
    /// Pooler-wide id; the backend name is `PGHARBOR_<id>`.
    pub id: u64,
    /// The Parse body after the statement name: query text and parameter types.
    pub definition: Bytes,
    registry: Weak<Mutex<Entries>>,
}

impl Drop for Statement {
    fn drop(&mut self) {
        let Some(reg) = self.registry.upgrade() else {
            return;
        };
        let mut e = match reg.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // The entry may already stand for a newer statement of the same text.
        if e.ids
            .get(&self.definition)
            .is_some_and(|(id, _)| *id == self.id)
        {
            e.ids.remove(&self.definition);
            e.bytes -= self.definition.len();
        }
    }
}

/// The registry's map, and the bytes of definitions it holds.
#[derive(Default)]
struct Entries {
    /// Each text's statement, with its id (read without upgrading: a
    /// statement dropped under the lock would deadlock in its Drop).
    ids: HashMap<Bytes, (u64, Weak<Statement>)>,
    bytes: usize,
}

/// Pooler-wide map from statement definition to statement.
#[derive(Default)]
pub struct StatementRegistry {
    entries: Arc<Mutex<Entries>>,
    next: AtomicU64,
}

/// SQLSTATE 53200, out_of_memory: a prepared-statement budget is spent.
const OUT_OF_MEMORY: &str = "53200";

impl StatementRegistry {
    /// The statement for `definition`, registering it if new, within
    /// `budget` bytes of definitions for the whole pooler.
    pub fn intern(&self, definition: &[u8], budget: usize) -> Result<Arc<Statement>, PgError> {
        let mut e = match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(s) = e.ids.get(definition).and_then(|(_, w)| w.upgrade()) {
            return Ok(s);
        }
        if let Some(old) = e.ids.remove(definition) {
            // Its statement is being dropped right now; its Drop finds no entry.
            drop(old);
            e.bytes -= definition.len();
        }
        if e.bytes + definition.len() > budget {
            return Err(PgError::error(
                OUT_OF_MEMORY,
                format!(
                    "out of memory for prepared statements: the pooler's statements use {} bytes, \
                     pool.prepared_statement_bytes is {budget}",
                    e.bytes
                ),
            ));
        }
        let definition = Bytes::copy_from_slice(definition);
        let s = Arc::new(Statement {
            id: self.next.fetch_add(1, Ordering::Relaxed) + 1,
            definition: definition.clone(),
            registry: Arc::downgrade(&self.entries),
        });
        e.bytes += definition.len();
        e.ids.insert(definition, (s.id, Arc::downgrade(&s)));
        Ok(s)
    }

    /// The statement already known for `definition`, if any client holds one.
    pub fn get(&self, definition: &[u8]) -> Option<Arc<Statement>> {
        let e = match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        e.ids.get(definition).and_then(|(_, w)| w.upgrade())
    }

    /// Forgets statement `id`: its holders keep it, and the next Parse of
    /// its text gets a new statement (PostgreSQL refuses to run the old one).
    pub fn retire(&self, id: u64) {
        let mut e = match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let found = e
            .ids
            .iter()
            .find(|(_, (i, _))| *i == id)
            .map(|(k, _)| k.clone());
        if let Some(def) = found {
            e.ids.remove(&def);
            e.bytes -= def.len();
        }
    }

    /// Distinct statements known now.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|g| g.ids.len()).unwrap_or(0)
    }

    /// Bytes of statement definitions held now.
    pub fn bytes(&self) -> usize {
        self.entries.lock().map(|g| g.bytes).unwrap_or(0)
    }

    /// True when no statement is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Stands for the unnamed statement where the books need a statement id.
pub const UNNAMED: u64 = u64::MAX;

/// One client's named statements, and its unnamed one.
#[derive(Default)]
pub struct ClientStatements {
    by_name: HashMap<Box<[u8]>, Named>,
    /// Each definition of a name (by serial): the pooler statement and the
    /// client's name, kept a while after a Close, because a server error
    /// for a message sent before the Close is read after it.
    names: HashMap<u64, (u64, Box<[u8]>)>,
    next_serial: u64,
    /// The unnamed statement's definition (query and parameter types), as
    /// a session of the client's own would still hold it; the buffer is
    /// kept, so redefining it costs no allocation.
    unnamed: Vec<u8>,
    unnamed_live: bool,
    /// The definition is in `unnamed` (false: too large to keep).
    unnamed_kept: bool,
    /// Unnamed Parses so far: which definition a backend holds.
    unnamed_gen: u64,
    /// Bytes of the names and definitions in `by_name`.
    bytes: usize,
}

/// A name the client defined: the pooler statement, and which definition
/// of the name this is.
struct Named {
    stmt: Arc<Statement>,
    serial: u64,
}

impl ClientStatements {
    /// The statement the client named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Arc<Statement>> {
        self.by_name.get(name).map(|n| &n.stmt)
    }

    /// The statement the client named `name`, and which definition of the
    /// name it is (see [`ClientStatements::named`]).
    pub fn get_with_serial(&self, name: &[u8]) -> Option<(&Arc<Statement>, u64)> {
        self.by_name.get(name).map(|n| (&n.stmt, n.serial))
    }

    /// The error a Parse of `name` as `definition` gets when it would take
    /// the client's statements past `budget` bytes.
    pub fn over_budget(&self, name: &[u8], definition: &[u8], budget: usize) -> Option<PgError> {
        let after = self.bytes + name.len() + definition.len();
        (after > budget).then(|| {
            PgError::error(
                OUT_OF_MEMORY,
                format!(
                    "out of memory for prepared statements: this client's statements use {} bytes, \
                     pool.prepared_statement_bytes_per_client is {budget}",
                    self.bytes
                ),
            )
        })
    }

    /// Defines `name`; false if the client already has a statement by that name.
    pub fn define(&mut self, name: &[u8], s: Arc<Statement>) -> bool {
        if self.by_name.contains_key(name) {
            return false;
        }
        self.bytes += name.len() + s.definition.len();
        if self.names.len() > self.by_name.len() + 256 {
            let live = &self.by_name;
            self.names
                .retain(|serial, _| live.values().any(|n| n.serial == *serial));
        }
        self.next_serial += 1;
        let serial = self.next_serial;
        self.names.insert(serial, (s.id, name.into()));
        self.by_name.insert(name.into(), Named { stmt: s, serial });
        true
    }

    /// Forgets `name` (the client closed it).
    pub fn close(&mut self, name: &[u8]) -> bool {
        match self.by_name.remove(name) {
            Some(n) => {
                self.bytes -= name.len() + n.stmt.definition.len();
                true
            }
            None => false,
        }
    }

    /// The pooler statement and the client's name of definition `serial`
    /// (for the server's error texts).
    pub fn named(&self, serial: u64) -> Option<(u64, &[u8])> {
        self.names.get(&serial).map(|(id, n)| (*id, &**n))
    }

    /// The client defined the unnamed statement as `definition`.
    pub fn set_unnamed(&mut self, definition: &[u8]) {
        self.unnamed.clear();
        self.unnamed.extend_from_slice(definition);
        self.unnamed_live = true;
        self.unnamed_kept = true;
        self.unnamed_gen += 1;
    }

    /// The client defined an unnamed statement too large to keep: it lives
    /// on the backend that parsed it only.
    pub fn set_unnamed_unkept(&mut self) {
        self.unnamed.clear();
        self.unnamed_live = true;
        self.unnamed_kept = false;
        self.unnamed_gen += 1;
    }

    /// The client's last unnamed Parse failed or was skipped: whatever the
    /// backend that got it holds now (nothing after a failure, the previous
    /// statement after a skip) is the client's, but it cannot be carried
    /// to another backend.
    pub fn unnamed_unknown(&mut self) {
        self.unnamed_kept = false;
    }

    /// Which of the client's unnamed definitions is current, if any.
    pub fn unnamed_key(&self, client: u64) -> Option<crate::backend::UnnamedKey> {
        self.unnamed_live.then_some((client, self.unnamed_gen))
    }

    /// The client's unnamed statement is gone (a simple Query, a Close, a
    /// failed Parse), or too large to keep.
    pub fn drop_unnamed(&mut self) {
        self.unnamed_live = false;
    }

    /// The client's unnamed statement's definition, if it has one.
    pub fn unnamed(&self) -> Option<&[u8]> {
        (self.unnamed_live && self.unnamed_kept).then_some(self.unnamed.as_slice())
    }

    /// Forgets all (the client ran DEALLOCATE ALL or DISCARD ALL).
    pub fn clear(&mut self) {
        self.by_name.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_definition_same_id_across_clients() {
        let r = StatementRegistry::default();
        let a = r.intern(b"SELECT 1\0\0\0", 100).unwrap();
        let b = r.intern(b"SELECT 1\0\0\0", 100).unwrap();
        let c = r.intern(b"SELECT 2\0\0\0", 100).unwrap();
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, c.id);
        let mut mine = ClientStatements::default();
        assert!(mine.define(b"s1", a.clone()));
        assert!(!mine.define(b"s1", c));
        assert_eq!(mine.get(b"s1").map(|s| s.id), Some(a.id));
        assert!(mine.close(b"s1"));
        assert!(!mine.close(b"s1"));
    }

    #[test]
    fn entries_are_freed_with_their_last_user_and_budgets_hold() {
        let r = StatementRegistry::default();
        let a = r.intern(b"SELECT 1\0\0\0", 30).unwrap();
        let b = r.intern(b"SELECT 22\0\0\0", 30).unwrap();
        assert_eq!((r.len(), r.bytes()), (2, 23));
        let e = r.intern(b"SELECT 333\0\0\0", 30).unwrap_err();
        assert_eq!(e.code, "53200");
        let a2 = r.intern(b"SELECT 1\0\0\0", 30).unwrap();
        assert_eq!(a2.id, a.id, "a known statement costs nothing");
        drop((a, a2));
        assert_eq!((r.len(), r.bytes()), (1, 12));
        let c = r.intern(b"SELECT 333\0\0\0", 30).unwrap();
        drop((b, c));
        assert!(r.is_empty() && r.bytes() == 0);

        let mut mine = ClientStatements::default();
        let s = r.intern(b"SELECT 1\0\0\0", 1000).unwrap();
        assert!(mine.over_budget(b"s1", &s.definition, 13).is_none());
        assert!(mine.define(b"s1", s.clone()));
        assert!(mine.over_budget(b"s2", &s.definition, 13).is_some());
        mine.close(b"s1");
        assert!(mine.over_budget(b"s2", &s.definition, 13).is_none());
    }
}
