//! Which of the pooler's named statements one backend has prepared, so a
//! client's statement is parsed on a backend only the first time that
//! backend needs it, within `pool.max_prepared_statements`.

use lru::LruCache;

/// Name of the pooler's statement `id` on a backend. One name per distinct
/// (query, parameter types), shared by every client that prepares it.
pub fn statement_name(id: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"PGHARBOR_");
    out.extend_from_slice(id.to_string().as_bytes());
}

/// A backend's prepared statements, least recently used first out.
pub struct PreparedCache {
    /// Statement id → the batch (client Sync-to-Sync span) that last used it.
    entries: LruCache<u64, u64>,
    capacity: usize,
    /// Bumped at every Sync: a statement used in the current batch is never
    /// evicted, because closing it would also close portals bound to it.
    batch: u64,
}

impl PreparedCache {
    /// A cache that keeps about `capacity` statements.
    pub fn new(capacity: usize) -> Self {
        PreparedCache {
            entries: LruCache::unbounded(),
            capacity: capacity.max(1),
            batch: 0,
        }
    }

    /// True if the backend has statement `id`; marks it used.
    pub fn touch(&mut self, id: u64) -> bool {
        let batch = self.batch;
        match self.entries.get_mut(&id) {
            Some(b) => {
                *b = batch;
                true
            }
            None => false,
        }
    }

    /// Records that `id` is being prepared; returns the statements to close
    /// first to stay within capacity (never one used in the current batch).
    pub fn insert(&mut self, id: u64) -> Vec<u64> {
        let mut evicted = Vec::new();
        while self.entries.len() >= self.capacity {
            match self.entries.peek_lru() {
                Some((&old, &used)) if used < self.batch => {
                    self.entries.pop_lru();
                    evicted.push(old);
                }
                _ => break,
            }
        }
        self.entries.put(id, self.batch);
        evicted
    }

    /// Forgets `id` (its Parse failed or was skipped after an error).
    pub fn remove(&mut self, id: u64) {
        self.entries.pop(&id);
    }

    /// Re-records `id` (the Close that was to evict it was skipped).
    pub fn restore(&mut self, id: u64) {
        if !self.entries.contains(&id) {
            self.entries.put(id, self.batch);
        }
    }

    /// Forgets everything (DISCARD ALL or DEALLOCATE ALL ran on the backend).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Starts a new batch (the client sent Sync).
    pub fn next_batch(&mut self) {
        self.batch += 1;
    }

    /// Changes the capacity (the setting can change on reload); takes
    /// effect at the next insert.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
    }

    /// Statements prepared now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is prepared.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_outside_the_batch() {
        let mut c = PreparedCache::new(2);
        assert!(c.insert(1).is_empty());
        assert!(c.insert(2).is_empty());
        c.next_batch();
        assert!(c.touch(1));
        // 2 is older and from an earlier batch: it goes.
        assert_eq!(c.insert(3), vec![2]);
        assert!(!c.touch(2));
        // 1 and 3 were both used in this batch: the cache grows instead.
        assert!(c.insert(4).is_empty());
        assert_eq!(c.len(), 3);
        c.next_batch();
        assert_eq!(c.insert(5).len(), 2);
    }

    #[test]
    fn remove_restore_clear() {
        let mut c = PreparedCache::new(4);
        c.insert(7);
        c.remove(7);
        assert!(!c.touch(7));
        c.restore(7);
        assert!(c.touch(7));
        c.clear();
        assert!(c.is_empty());
        let mut name = Vec::new();
        statement_name(42, &mut name);
        assert_eq!(name, b"PGHARBOR_42");
    }
}
