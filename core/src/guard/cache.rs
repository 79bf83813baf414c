//! The verdict cache: bounded, keyed by the SQL text, evicting one entry at a time.

use std::collections::{HashMap, VecDeque};

use foldhash::fast::RandomState;
use std::sync::Arc;

use super::{Reason, MAX_CACHED_LEN};

/// A bounded verdict cache with second-chance (CLOCK) eviction: entries leave one at a time, and
/// an entry hit since its last turn gets another round, so hot statements stay. Clearing the
/// whole cache when full would make every statement pay the uncached cost at once.
pub(super) struct Cache {
    pub(super) cap: usize,
    pub(super) map: HashMap<Arc<str>, Slot, RandomState>,
    /// Insertion order; the front is the next eviction candidate.
    pub(super) ring: VecDeque<Arc<str>>,
    /// The generation of the extension functions the verdicts were taken with.
    generation: u64,
}

pub(super) struct Slot {
    verdict: Option<Reason>,
    hit: bool,
}

impl Cache {
    pub(super) fn new(cap: usize) -> Cache {
        Cache {
            cap,
            map: HashMap::default(),
            ring: VecDeque::new(),
            generation: 0,
        }
    }

    /// Whether the verdicts are those of `generation`.
    pub(super) fn follows(&self, generation: u64) -> bool {
        self.generation == generation
    }

    /// Forgets every verdict if they were taken with another generation of extension functions.
    pub(super) fn follow(&mut self, generation: u64) {
        if self.generation != generation {
            self.generation = generation;
            self.map.clear();
            self.ring.clear();
        }
    }

    /// `Arc<str>: Borrow<str>`, so the lookup needs no owned key.
    pub(super) fn get(&mut self, sql: &str) -> Option<Option<Reason>> {
        let slot = self.map.get_mut(sql)?;
        slot.hit = true;
        Some(slot.verdict.clone())
    }

    pub(super) fn insert(&mut self, sql: &str, verdict: Option<Reason>) {
        // Another thread may have inserted the same text while we were analysing it.
        if self.cap == 0 || sql.len() > MAX_CACHED_LEN || self.map.contains_key(sql) {
            return;
        }
        while self.map.len() >= self.cap {
            self.evict_one();
        }
        let key: Arc<str> = Arc::from(sql);
        self.ring.push_back(Arc::clone(&key));
        self.map.insert(
            key,
            Slot {
                verdict,
                hit: false,
            },
        );
    }

    fn evict_one(&mut self) {
        // Terminates: each pass over a hit entry clears its bit.
        while let Some(key) = self.ring.pop_front() {
            match self.map.get_mut(&key) {
                Some(slot) if slot.hit => {
                    slot.hit = false;
                    self.ring.push_back(key);
                }
                _ => {
                    self.map.remove(&key);
                    return;
                }
            }
        }
    }
}
