//! The claims of this process that are at the store or executing, so that a duplicate of a
//! request this process is already handling is answered without its own trip to the database.
//!
//! Two states, per scope:
//!
//! - **Claiming**: a request of this process has sent its claim to the store. Duplicates that
//!   arrive meanwhile wait for that claim's result instead of queueing behind it at the store.
//!   The store serialises claims on one key anyway; a duplicate that waited is answered exactly
//!   as if its own claim had run right after the first one: the first acquired, so the record is
//!   its processing claim (409, or 422 for another payload); or the first found a record, which
//!   the duplicate is judged against too. If the first claim fails, the duplicates that waited
//!   for it go to the store themselves.
//! - **Owned**: this process acquired the key and is executing it. The store's record is a
//!   processing claim owned here, which nobody can replace while its lease is valid (only dead
//!   owners' claims are taken over), so the answer to a duplicate is known. The entry is trusted
//!   only until `lease_until`, measured from *before* the store wrote the claim, so it never
//!   outlives the lease the store holds; after that the store decides (heartbeats may have
//!   renewed the lease, or the owner died).
//!
//! Other processes and replicas sharing the database only ever see the store, and nothing here
//! decides whether a key may execute: only the store's atomic claim does. Like the replay cache,
//! this is used only without a fault.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;

use crate::store::{Claimed, Record, Scope};

#[derive(Debug)]
enum Entry {
    /// The first claim's result, once the store gave it.
    Claiming(watch::Receiver<Option<Record>>),
    Owned {
        fingerprint: String,
        lease_until: i64,
    },
}

/// The claims of this process, by scope.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    entries: Mutex<HashMap<Scope, Entry>>,
}

/// What a claim arriving at `now` does, given the claims of this process on its scope.
pub(super) enum Joined<'a> {
    /// No claim here: this one goes to the store and publishes its result for duplicates.
    Lead(Leader<'a>),
    /// A claim here is at the store: wait for its result.
    Follow(Follower),
    /// This process executes the key: the store holds this record.
    Held(Record),
}

/// The first claim of a scope, which tells its duplicates what the store answered. Dropped
/// without [`Leader::settle`] (the claim failed), it lets them go to the store themselves.
pub(super) struct Leader<'a> {
    in_flight: &'a InFlight,
    scope: Scope,
    result: watch::Sender<Option<Record>>,
    settled: bool,
}

/// A duplicate waiting for the first claim's result.
pub(super) struct Follower(watch::Receiver<Option<Record>>);

impl InFlight {
    /// Where a claim on `scope` at `now` stands.
    pub(super) fn join(&self, scope: &Scope, now: i64) -> Joined<'_> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(scope) {
            Some(Entry::Claiming(result)) => return Joined::Follow(Follower(result.clone())),
            Some(Entry::Owned {
                fingerprint,
                lease_until,
            }) if *lease_until > now => {
                return Joined::Held(processing(fingerprint.clone(), *lease_until))
            }
            // Absent, or a lease this process can no longer vouch for.
            _ => {}
        }
        let (result, waiting) = watch::channel(None);
        entries.insert(scope.clone(), Entry::Claiming(waiting));
        Joined::Lead(Leader {
            in_flight: self,
            scope: scope.clone(),
            result,
            settled: false,
        })
    }

    /// Records what the store answered a claim of this process for `fingerprint` on `scope`:
    /// owned until `lease_until` if acquired, else nothing. Returns the record a duplicate is
    /// judged against.
    fn settle(
        &self,
        scope: &Scope,
        claimed: &Claimed,
        fingerprint: &str,
        lease_until: i64,
    ) -> Record {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match claimed {
            Claimed::Acquired { .. } => {
                entries.insert(
                    scope.clone(),
                    Entry::Owned {
                        fingerprint: fingerprint.to_owned(),
                        lease_until,
                    },
                );
                processing(fingerprint.to_owned(), lease_until)
            }
            Claimed::Held(record) => {
                entries.remove(scope);
                record.clone()
            }
        }
    }

    /// Forgets `scope`: this process's claim on it was completed or released.
    pub(super) fn remove(&self, scope: &Scope) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(scope);
    }
}

impl Leader<'_> {
    /// Records the store's answer (see [`InFlight::settle`]) and hands it to the duplicates
    /// waiting for it.
    pub(super) fn settle(mut self, claimed: &Claimed, fingerprint: &str, lease_until: i64) {
        let record = self
            .in_flight
            .settle(&self.scope, claimed, fingerprint, lease_until);
        self.settled = true;
        // Nobody may be waiting; that is fine.
        let _ = self.result.send(Some(record));
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.in_flight.remove(&self.scope);
        }
    }
}

impl Follower {
    /// The record the first claim found or wrote; `None` if that claim failed.
    pub(super) async fn record(mut self) -> Option<Record> {
        let record = self.0.wait_for(Option::is_some).await.ok()?;
        record.clone()
    }
}

/// A processing claim as the store holds it while its lease is valid.
fn processing(fingerprint: String, lease_until: i64) -> Record {
    Record {
        fingerprint,
        completed: false,
        lease_until,
        // A processing record is never expired while its lease is valid.
        expires_at: lease_until,
        response: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Owner;

    fn scope() -> Scope {
        Scope {
            tenant: "a".into(),
            operation: "payments".into(),
            key: "k".into(),
        }
    }

    fn acquired() -> Claimed {
        Claimed::Acquired {
            owner: Owner::new(),
            taken_over: false,
        }
    }

    #[tokio::test]
    async fn a_duplicate_waits_for_the_first_claim_then_sees_its_claim() {
        let in_flight = InFlight::default();
        let Joined::Lead(first) = in_flight.join(&scope(), 0) else {
            panic!("the first claim must go to the store");
        };
        let Joined::Follow(duplicate) = in_flight.join(&scope(), 0) else {
            panic!("a duplicate must wait for the first claim");
        };
        first.settle(&acquired(), "fp", 30_000);
        let record = duplicate.record().await.expect("the first claim settled");
        assert_eq!(record, processing("fp".into(), 30_000));
        // Later duplicates find the key owned here while the lease lasts.
        assert!(matches!(in_flight.join(&scope(), 29_999), Joined::Held(r) if !r.completed));
        // Once the lease this process took may have lapsed, the store decides again.
        assert!(matches!(in_flight.join(&scope(), 30_000), Joined::Lead(_)));
    }

    #[tokio::test]
    async fn a_record_found_by_the_first_claim_is_passed_on_and_not_kept() {
        let in_flight = InFlight::default();
        let Joined::Lead(first) = in_flight.join(&scope(), 0) else {
            panic!("the first claim must go to the store");
        };
        let Joined::Follow(duplicate) = in_flight.join(&scope(), 0) else {
            panic!("a duplicate must wait for the first claim");
        };
        let elsewhere = processing("other".into(), 5_000);
        first.settle(&Claimed::Held(elsewhere.clone()), "fp", 30_000);
        assert_eq!(duplicate.record().await, Some(elsewhere));
        assert!(matches!(in_flight.join(&scope(), 0), Joined::Lead(_)));
    }

    #[tokio::test]
    async fn when_the_first_claim_fails_its_duplicates_go_to_the_store() {
        let in_flight = InFlight::default();
        let first = in_flight.join(&scope(), 0);
        let Joined::Follow(duplicate) = in_flight.join(&scope(), 0) else {
            panic!("a duplicate must wait for the first claim");
        };
        drop(first);
        assert_eq!(duplicate.record().await, None);
        assert!(matches!(in_flight.join(&scope(), 0), Joined::Lead(_)));
    }

    #[test]
    fn a_finished_claim_is_forgotten() {
        let in_flight = InFlight::default();
        let Joined::Lead(first) = in_flight.join(&scope(), 0) else {
            panic!("the first claim must go to the store");
        };
        first.settle(&acquired(), "fp", 30_000);
        in_flight.remove(&scope());
        assert!(matches!(in_flight.join(&scope(), 0), Joined::Lead(_)));
    }
}
