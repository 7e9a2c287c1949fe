//! Protocol-level prepared statements in transaction pooling: each client's
//! names map to the pooler-wide statements of [`crate::registry::statements`].

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::OnceLock;

use crate::protocol::PgError;
use crate::registry::statements::{Statement, OUT_OF_MEMORY};

/// Stands for the unnamed statement where the books need a statement id.
pub const UNNAMED: u64 = u64::MAX;

/// One client's named statements, and its unnamed one. Boxed, and made
/// at the first Parse: most idle clients never prepare anything, and each
/// of them would otherwise carry the empty book (120 bytes).
#[derive(Default)]
pub struct ClientStatements(Option<Box<Book>>);

/// What [`ClientStatements`] keeps once the client has prepared something.
#[derive(Default)]
struct Book {
    by_name: HashMap<Box<[u8]>, Named, ProcessKeyed>,
    /// Each definition of a name (by serial): the pooler statement and the
    /// client's name, kept a while after a Close, because a server error
    /// for a message sent before the Close is read after it.
    names: HashMap<u64, (u64, Box<[u8]>), ProcessKeyed>,
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

/// std's hasher (SipHash, random keys against crafted collisions) with
/// one key for the process instead of one per map: a map keeps 16 bytes
/// for its key, and every client keeps two maps, idle or not.
#[derive(Clone, Copy, Default)]
struct ProcessKeyed;

impl BuildHasher for ProcessKeyed {
    type Hasher = DefaultHasher;

    fn build_hasher(&self) -> DefaultHasher {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        KEYS.get_or_init(RandomState::new).build_hasher()
    }
}

/// A name the client defined: the pooler statement, and which definition
/// of the name this is.
struct Named {
    stmt: Arc<Statement>,
    serial: u64,
}

impl ClientStatements {
    /// The book, made now if the client had none.
    fn book(&mut self) -> &mut Book {
        self.0.get_or_insert_with(Box::default)
    }

    /// Every named statement, to hand the client over.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Arc<Statement>)> {
        self.0
            .iter()
            .flat_map(|b| b.by_name.iter().map(|(k, n)| (&**k, &n.stmt)))
    }

    /// The statement the client named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Arc<Statement>> {
        self.0.as_ref()?.by_name.get(name).map(|n| &n.stmt)
    }

    /// The statement the client named `name`, and which definition of the
    /// name it is (see [`ClientStatements::named`]).
    pub fn get_with_serial(&self, name: &[u8]) -> Option<(&Arc<Statement>, u64)> {
        let n = self.0.as_ref()?.by_name.get(name)?;
        Some((&n.stmt, n.serial))
    }

    /// The error a Parse of `name` as `definition` gets when it would take
    /// the client's statements past `budget` bytes.
    pub fn over_budget(&self, name: &[u8], definition: &[u8], budget: usize) -> Option<PgError> {
        let bytes = self.0.as_ref().map_or(0, |b| b.bytes);
        let after = bytes + name.len() + definition.len();
        (after > budget).then(|| {
            PgError::error(
                OUT_OF_MEMORY,
                format!(
                    "out of memory for prepared statements: this client's statements use {bytes} bytes, \
                     pool.prepared_statement_bytes_per_client is {budget}"
                ),
            )
        })
    }

    /// Defines `name`; false if the client already has a statement by that name.
    pub fn define(&mut self, name: &[u8], s: Arc<Statement>) -> bool {
        let book = self.book();
        if book.by_name.contains_key(name) {
            return false;
        }
        book.bytes += name.len() + s.definition.len();
        if book.names.len() > book.by_name.len() + 256 {
            let live = &book.by_name;
            book.names
                .retain(|serial, _| live.values().any(|n| n.serial == *serial));
        }
        book.next_serial += 1;
        let serial = book.next_serial;
        book.names.insert(serial, (s.id, name.into()));
        book.by_name.insert(name.into(), Named { stmt: s, serial });
        true
    }

    /// Forgets `name` (the client closed it).
    pub fn close(&mut self, name: &[u8]) -> bool {
        let Some(book) = self.0.as_mut() else {
            return false;
        };
        match book.by_name.remove(name) {
            Some(n) => {
                book.bytes -= name.len() + n.stmt.definition.len();
                true
            }
            None => false,
        }
    }

    /// The pooler statement and the client's name of definition `serial`
    /// (for the server's error texts).
    pub fn named(&self, serial: u64) -> Option<(u64, &[u8])> {
        let (id, n) = self.0.as_ref()?.names.get(&serial)?;
        Some((*id, &**n))
    }

    /// The client defined the unnamed statement as `definition`.
    pub fn set_unnamed(&mut self, definition: &[u8]) {
        let book = self.book();
        book.unnamed.clear();
        book.unnamed.extend_from_slice(definition);
        book.unnamed_live = true;
        book.unnamed_kept = true;
        book.unnamed_gen += 1;
    }

    /// The client defined an unnamed statement too large to keep: it lives
    /// on the backend that parsed it only.
    pub fn set_unnamed_unkept(&mut self) {
        let book = self.book();
        book.unnamed.clear();
        book.unnamed_live = true;
        book.unnamed_kept = false;
        book.unnamed_gen += 1;
    }

    /// The client's last unnamed Parse failed or was skipped: whatever the
    /// backend that got it holds now (nothing after a failure, the previous
    /// statement after a skip) is the client's, but it cannot be carried
    /// to another backend.
    pub fn unnamed_unknown(&mut self) {
        if let Some(book) = self.0.as_mut() {
            book.unnamed_kept = false;
        }
    }

    /// Which of the client's unnamed definitions is current, if any.
    pub fn unnamed_key(&self, client: u64) -> Option<crate::backend::UnnamedKey> {
        let book = self.0.as_ref()?;
        book.unnamed_live.then_some((client, book.unnamed_gen))
    }

    /// The client's unnamed statement is gone (a simple Query, a Close, a
    /// failed Parse), or too large to keep.
    pub fn drop_unnamed(&mut self) {
        if let Some(book) = self.0.as_mut() {
            book.unnamed_live = false;
        }
    }

    /// The client's unnamed statement's definition, if it has one.
    pub fn unnamed(&self) -> Option<&[u8]> {
        let book = self.0.as_ref()?;
        (book.unnamed_live && book.unnamed_kept).then_some(book.unnamed.as_slice())
    }

    /// Forgets all (the client ran DEALLOCATE ALL or DISCARD ALL).
    pub fn clear(&mut self) {
        if let Some(book) = self.0.as_mut() {
            book.by_name.clear();
            book.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::StatementRegistry;

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
