//! An in-memory cache of COMPLETED records, so that replays never touch the database.
//!
//! A completed record never changes until it expires (the correct server has no statement that
//! modifies one), so a cached copy stays right even when other processes or replicas share the
//! database: they can add records, never alter this one. Entries are dropped at
//! their expiry time. Faults break that immutability, so the cache is used only without a fault.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::ClaimOutcome;
use crate::clock::from_unix_millis;
use crate::store::{Scope, StoredResponse};

/// Entries kept at most. A new completion past that pushes out some other entry: replays
/// mostly follow their completion closely, so the newest records are the ones worth keeping,
/// and a replay of an evicted one goes to the database, which is slower but still right.
const CAPACITY: usize = 100_000;

#[derive(Debug)]
struct Entry {
    fingerprint: String,
    response: Arc<StoredResponse>,
    expires_at: i64,
}

#[derive(Debug, Default)]
pub(super) struct Cache {
    entries: Mutex<HashMap<Scope, Entry>>,
}

impl Cache {
    /// The answer for a claim, if the cache can give it: a replay, or a mismatch.
    pub(super) fn lookup(
        &self,
        scope: &Scope,
        fingerprint: &str,
        now: i64,
    ) -> Option<ClaimOutcome> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.get(scope)?;
        if entry.expires_at <= now {
            entries.remove(scope);
            return None;
        }
        Some(if entry.fingerprint == fingerprint {
            ClaimOutcome::Replay {
                response: Arc::clone(&entry.response),
                expires_at: from_unix_millis(entry.expires_at),
            }
        } else {
            ClaimOutcome::Mismatch
        })
    }

    /// Remembers a completed record.
    pub(super) fn insert(
        &self,
        scope: Scope,
        fingerprint: String,
        response: Arc<StoredResponse>,
        expires_at: i64,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= CAPACITY && !entries.contains_key(&scope) {
            let evicted = entries.keys().next().cloned();
            if let Some(evicted) = evicted {
                entries.remove(&evicted);
            }
        }
        entries.insert(
            scope,
            Entry {
                fingerprint,
                response,
                expires_at,
            },
        );
    }

    /// Drops expired entries.
    pub(super) fn purge(&self, now: i64) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, e| e.expires_at > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(key: usize) -> Scope {
        Scope {
            tenant: "a".into(),
            operation: "payments".into(),
            key: key.to_string(),
        }
    }

    /// A full cache still takes the newest completion (it used to refuse every completion
    /// after the first CAPACITY, so a long-running server stopped caching replays at all).
    #[test]
    fn a_full_cache_keeps_the_newest_completion_and_its_size() {
        let cache = Cache::default();
        let response = Arc::new(StoredResponse {
            status: 201,
            content_type: "application/json".into(),
            location: None,
            body: b"{}".to_vec().into(),
        });
        for key in 0..=CAPACITY {
            cache.insert(scope(key), "fp".into(), Arc::clone(&response), i64::MAX);
        }
        assert!(matches!(
            cache.lookup(&scope(CAPACITY), "fp", 0),
            Some(ClaimOutcome::Replay { .. })
        ));
        let len = cache.entries.lock().unwrap().len();
        assert_eq!(len, CAPACITY);
    }
}
