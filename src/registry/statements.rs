//! Pooler-wide prepared statements in transaction pooling: one per distinct
//! (query, parameter types) across all clients, which every backend prepares
//! under its own name the first time a client needs it there.

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
pub const OUT_OF_MEMORY: &str = "53200";

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
