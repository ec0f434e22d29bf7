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

/// Entries kept at most; past that new completions are simply not cached (replays of them go
/// to the database, which is slower but still right).
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
        if entries.len() < CAPACITY || entries.contains_key(&scope) {
            entries.insert(
                scope,
                Entry {
                    fingerprint,
                    response,
                    expires_at,
                },
            );
        }
    }

    /// Drops expired entries.
    pub(super) fn purge(&self, now: i64) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, e| e.expires_at > now);
    }
}
