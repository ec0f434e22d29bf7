//! SQLite: the webhook dedupe record and effects. Each function runs in the writer's
//! `BEGIN IMMEDIATE` transaction, so a claim's read-decide-write and a completion's update and
//! insert are atomic across threads and processes.

use rusqlite::{params, Connection, OptionalExtension};

use super::SqliteStore;
use crate::clock::millis;
use crate::store::webhooks::{Claim, EventKey, WebhookStore};
use crate::store::Owner;
use crate::store::StoreFuture;

const WHERE_KEY: &str = "scheme = ?1 AND source = ?2 AND event_id = ?3";

fn claim(
    conn: &Connection,
    now: i64,
    lease_ms: i64,
    key: &EventKey,
    forget_before: Option<i64>,
) -> rusqlite::Result<Claim> {
    let row: Option<(String, i64, i64)> = conn
        .prepare_cached(&format!(
            "SELECT status, lease_until, processed_at FROM webhook_events WHERE {WHERE_KEY}"
        ))?
        .query_row(params![key.scheme, key.source, key.event_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    match row {
        Some((status, lease_until, _)) if status == "processing" && lease_until > now => {
            return Ok(Claim::Processing)
        }
        Some((status, _, processed_at))
            if status == "processed" && forget_before.is_none_or(|t| processed_at > t) =>
        {
            return Ok(Claim::Processed)
        }
        _ => {}
    }
    let owner = Owner::new();
    conn.prepare_cached(
        "INSERT OR REPLACE INTO webhook_events \
         (scheme, source, event_id, status, owner, lease_until, processed_at) \
         VALUES (?1, ?2, ?3, 'processing', ?4, ?5, 0)",
    )?
    .execute(params![
        key.scheme,
        key.source,
        key.event_id,
        owner.token(),
        now.saturating_add(lease_ms)
    ])?;
    Ok(Claim::Acquired(owner))
}

fn complete(
    conn: &Connection,
    now: i64,
    key: &EventKey,
    owner: &Owner,
    kind: Option<&str>,
) -> rusqlite::Result<bool> {
    let done =
        conn.prepare_cached(&format!(
            "UPDATE webhook_events SET status = 'processed', lease_until = 0, processed_at = ?5 \
             WHERE {WHERE_KEY} AND owner = ?4 AND status = 'processing'"
        ))?
        .execute(params![
            key.scheme,
            key.source,
            key.event_id,
            owner.token(),
            now
        ])? == 1;
    if let (true, Some(kind)) = (done, kind) {
        apply(conn, now, key, kind)?;
    }
    Ok(done)
}

fn apply(conn: &Connection, now: i64, key: &EventKey, kind: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO webhook_effects (scheme, source, event_id, event_type, applied_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![key.scheme, key.source, key.event_id, kind, now])?;
    Ok(())
}

impl WebhookStore for SqliteStore {
    fn claim_event<'a>(
        &'a self,
        key: &'a EventKey,
        forget_after: Option<std::time::Duration>,
    ) -> StoreFuture<'a, Claim> {
        let key = key.clone();
        Box::pin(self.call(move |conn, policy, now| {
            let forget_before = forget_after.map(|ttl| now.saturating_sub(millis(ttl)));
            claim(conn, now, policy.webhook_lease_ms, &key, forget_before)
        }))
    }

    fn complete_event<'a>(
        &'a self,
        key: &'a EventKey,
        owner: &'a Owner,
        kind: Option<&'a str>,
    ) -> StoreFuture<'a, bool> {
        let (key, owner, kind) = (key.clone(), owner.clone(), kind.map(str::to_owned));
        Box::pin(self.call(move |conn, _, now| complete(conn, now, &key, &owner, kind.as_deref())))
    }

    fn release_event<'a>(&'a self, key: &'a EventKey, owner: &'a Owner) -> StoreFuture<'a, bool> {
        let (key, owner) = (key.clone(), owner.clone());
        Box::pin(self.call(move |conn, _, _| {
            conn.prepare_cached(&format!(
                "DELETE FROM webhook_events \
                 WHERE {WHERE_KEY} AND owner = ?4 AND status = 'processing'"
            ))?
            .execute(params![key.scheme, key.source, key.event_id, owner.token()])
            .map(|n| n == 1)
        }))
    }

    fn mark_event<'a>(&'a self, key: &'a EventKey) -> StoreFuture<'a, bool> {
        let key = key.clone();
        Box::pin(self.call(move |conn, _, now| {
            conn.prepare_cached(
                "INSERT INTO webhook_events \
                 (scheme, source, event_id, status, owner, lease_until, processed_at) \
                 VALUES (?1, ?2, ?3, 'processed', '', 0, ?4) ON CONFLICT DO NOTHING",
            )?
            .execute(params![key.scheme, key.source, key.event_id, now])
            .map(|n| n == 1)
        }))
    }

    fn forget_event<'a>(&'a self, key: &'a EventKey) -> StoreFuture<'a, bool> {
        let key = key.clone();
        Box::pin(self.call(move |conn, _, _| {
            conn.prepare_cached(&format!("DELETE FROM webhook_events WHERE {WHERE_KEY}"))?
                .execute(params![key.scheme, key.source, key.event_id])
                .map(|n| n == 1)
        }))
    }

    fn apply_event<'a>(&'a self, key: &'a EventKey, kind: &'a str) -> StoreFuture<'a, ()> {
        let (key, kind) = (key.clone(), kind.to_owned());
        Box::pin(self.call(move |conn, _, now| apply(conn, now, &key, &kind)))
    }

    fn processed_events(&self) -> StoreFuture<'_, Vec<EventKey>> {
        Box::pin(self.call(|conn, _, _| {
            conn.prepare_cached(
                "SELECT scheme, source, event_id FROM webhook_events WHERE status = 'processed'",
            )?
            .query_map([], |row| {
                Ok(EventKey {
                    scheme: row.get(0)?,
                    source: row.get(1)?,
                    event_id: row.get(2)?,
                })
            })?
            .collect()
        }))
    }

    fn count_effects(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.call(|conn, _, _| {
            conn.query_row("SELECT count(*) FROM webhook_effects", [], |row| row.get(0))
        }))
    }
}
