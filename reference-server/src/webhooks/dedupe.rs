//! What the consumer deduplicates on: the key an event is recorded under (scheme + source +
//! event id, unless a fault says otherwise), and, for the faults that keep ids in process
//! memory, that memory. The record itself is in the store (`crate::store::webhooks`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use super::faults::{Consumer, KeyedBy};
use super::schemes::Scheme;
use super::verify::{self, Source};
use crate::store::webhooks::{Claim, EventKey};
use crate::store::Owner;

/// What the event is deduplicated on: scheme + source + event id, unless a fault says
/// otherwise.
pub(crate) fn event_key(
    consumer: &Consumer,
    scheme: Scheme,
    source: Source,
    id: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> EventKey {
    let event_id = match consumer.keyed_by {
        KeyedBy::EventId => id.to_owned(),
        KeyedBy::BodyHash => crate::idempotency::fingerprint::hex(&Sha256::digest(body)),
        KeyedBy::Signature => verify::header(headers, scheme.signature_header())
            .unwrap_or_default()
            .to_owned(),
    };
    EventKey {
        scheme: scheme.name().to_owned(),
        source: if consumer.per_source {
            source.name()
        } else {
            "*"
        }
        .to_owned(),
        event_id,
    }
}

/// Claims kept in this process's memory (the `dedupe-in-memory` and `local-dedupe` faults): the
/// same states as the store's rows, without durability or sharing.
#[derive(Debug, Default)]
pub(crate) struct MemoryIds {
    ids: Mutex<HashMap<EventKey, bool>>,
}

impl MemoryIds {
    /// Starts with `keys` processed.
    pub(crate) fn loaded(keys: Vec<EventKey>) -> Self {
        Self {
            ids: Mutex::new(keys.into_iter().map(|k| (k, true)).collect()),
        }
    }

    /// Claims `key` if it is unknown.
    pub(crate) fn claim(&self, key: &EventKey) -> Claim {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        match ids.get(key) {
            Some(true) => Claim::Processed,
            Some(false) => Claim::Processing,
            None => {
                ids.insert(key.clone(), false);
                Claim::Acquired(Owner::new())
            }
        }
    }

    /// Marks a claimed `key` processed.
    pub(crate) fn complete(&self, key: &EventKey) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.insert(key.clone(), true);
    }

    /// Forgets a claimed `key` after a failure.
    pub(crate) fn release(&self, key: &EventKey) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.remove(key);
    }
}
