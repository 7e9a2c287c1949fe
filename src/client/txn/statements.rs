//! Protocol-level prepared statements in transaction pooling: each client's
//! names map to pooler statements, one per distinct (query, parameter types)
//! across all clients, which every backend prepares under its own name the
//! first time a client needs it there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Distinct statement texts remembered before the map starts over; ids are
/// never reused, so starting over only costs backends a re-Parse.
const REGISTRY_LIMIT: usize = 100_000;

/// One statement as the client defined it.
#[derive(Debug)]
pub struct Statement {
    /// Pooler-wide id; the backend name is `PGHARBOR_<id>`.
    pub id: u64,
    /// The Parse body after the statement name: query text and parameter types.
    pub definition: Bytes,
}

/// Pooler-wide map from statement definition to id.
#[derive(Default)]
pub struct StatementRegistry {
    ids: Mutex<HashMap<Bytes, Arc<Statement>>>,
    next: AtomicU64,
}

impl StatementRegistry {
    /// The statement for `definition`, registering it if new.
    pub fn intern(&self, definition: &[u8]) -> Arc<Statement> {
        let mut ids = match self.ids.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(s) = ids.get(definition) {
            return s.clone();
        }
        if ids.len() >= REGISTRY_LIMIT {
            ids.clear();
        }
        let definition = Bytes::copy_from_slice(definition);
        let s = Arc::new(Statement {
            id: self.next.fetch_add(1, Ordering::Relaxed) + 1,
            definition: definition.clone(),
        });
        ids.insert(definition, s.clone());
        s
    }

    /// Distinct statements known now.
    pub fn len(&self) -> usize {
        self.ids.lock().map(|g| g.len()).unwrap_or(0)
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

    /// Defines `name`; false if the client already has a statement by that name.
    pub fn define(&mut self, name: &[u8], s: Arc<Statement>) -> bool {
        if self.by_name.contains_key(name) {
            return false;
        }
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
        self.by_name.remove(name).is_some()
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_definition_same_id_across_clients() {
        let r = StatementRegistry::default();
        let a = r.intern(b"SELECT 1\0\0\0");
        let b = r.intern(b"SELECT 1\0\0\0");
        let c = r.intern(b"SELECT 2\0\0\0");
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, c.id);
        let mut mine = ClientStatements::default();
        assert!(mine.define(b"s1", a.clone()));
        assert!(!mine.define(b"s1", c));
        assert_eq!(mine.get(b"s1").map(|s| s.id), Some(a.id));
        assert!(mine.close(b"s1"));
        assert!(!mine.close(b"s1"));
    }
}
