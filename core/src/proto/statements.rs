//! A bounded, least-recently-used map from SQL text to a per-connection prepared statement.
//!
//! Lookups by `&str` never allocate. Eviction scans for the oldest evictable entry: it only runs
//! when a new SQL text arrives at a full cache, which a steady workload does not do.

use std::collections::HashMap;

use foldhash::fast::RandomState;

struct Slot<V> {
    value: V,
    used: u64,
}

/// The statement cache of one connection.
pub struct StatementCache<V> {
    map: HashMap<Box<str>, Slot<V>, RandomState>,
    clock: u64,
    capacity: usize,
}

impl<V> StatementCache<V> {
    /// A cache holding at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        StatementCache {
            map: HashMap::default(),
            clock: 0,
            capacity: capacity.max(1),
        }
    }

    /// Looks up `sql` and marks it most recently used.
    pub fn get(&mut self, sql: &str) -> Option<&V> {
        self.clock += 1;
        let now = self.clock;
        self.map.get_mut(sql).map(|s| {
            s.used = now;
            &s.value
        })
    }

    /// Mutable access without touching recency.
    pub fn get_mut(&mut self, sql: &str) -> Option<&mut V> {
        self.map.get_mut(sql).map(|s| &mut s.value)
    }

    /// Inserts `sql`. When full, first removes and returns the least recently used entry for
    /// which `evictable` holds (entries still being prepared are not evictable). If none is
    /// evictable the cache grows past capacity rather than fail the caller.
    pub fn insert(
        &mut self,
        sql: &str,
        value: V,
        evictable: impl Fn(&V) -> bool,
    ) -> Option<(Box<str>, V)> {
        let mut evicted = None;
        if self.map.len() >= self.capacity && !self.map.contains_key(sql) {
            let oldest = self
                .map
                .iter()
                .filter(|(_, s)| evictable(&s.value))
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                evicted = self.map.remove_entry(&k).map(|(k, s)| (k, s.value));
            }
        }
        self.clock += 1;
        self.map.insert(
            sql.into(),
            Slot {
                value,
                used: self.clock,
            },
        );
        evicted
    }

    /// Removes `sql` (a failed prepare is not cached).
    pub fn remove(&mut self, sql: &str) -> Option<V> {
        self.map.remove(sql).map(|s| s.value)
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.map.iter().map(|(k, s)| (&**k, &s.value))
    }

    /// Entries held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }

    /// Removes every entry, returning the values (used when a connection is replaced).
    pub fn drain(&mut self) -> impl Iterator<Item = V> + '_ {
        self.map.drain().map(|(_, s)| s.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_evictable() {
        let mut c = StatementCache::new(2);
        assert!(c.insert("a", 1, |_| true).is_none());
        assert!(c.insert("b", 2, |_| true).is_none());
        assert_eq!(c.get("a"), Some(&1)); // a is now newer than b
        let ev = c.insert("c", 3, |_| true).unwrap();
        assert_eq!((&*ev.0, ev.1), ("b", 2));
        // Nothing evictable: grows instead of failing.
        assert!(c.insert("d", 4, |_| false).is_none());
        assert_eq!(c.len(), 3);
        assert_eq!(c.remove("a"), Some(1));
        assert!(c.get("a").is_none());
    }
}
