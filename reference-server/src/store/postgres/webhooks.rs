//! PostgreSQL: the webhook dedupe record and effects, each operation one statement. The claim is
//! an `INSERT … ON CONFLICT … DO UPDATE … WHERE <replaceable> RETURNING`, atomic across replicas
//! by the row lock of the conflict; the completion updates the record fenced by the owner and
//! inserts the effect from that update's result, so both commit together or not at all.

use std::time::Duration;

use anyhow::Context;

use super::{PgStore, Sql};
use crate::clock::millis;
use crate::store::webhooks::{Claim, EventKey, WebhookStore};
use crate::store::{Owner, StoreFuture};

/// $4 owner, $5 lease_until, $6 now, $7 the processed_at at or before which a processed row is
/// forgotten (the `dedupe-ttl` fault; `i64::MIN` otherwise).
pub(super) const CLAIM: &str = "INSERT INTO webhook_events AS e \
       (scheme, source, event_id, status, owner, lease_until, processed_at) \
     VALUES ($1, $2, $3, 'processing', $4, $5, 0) \
     ON CONFLICT (scheme, source, event_id) DO UPDATE SET status = 'processing', \
       owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, processed_at = 0 \
     WHERE (e.status = 'processing' AND e.lease_until <= $6::bigint) \
        OR (e.status = 'processed' AND e.processed_at <= $7::bigint) \
     RETURNING 1";
pub(super) const STATUS: &str =
    "SELECT status FROM webhook_events WHERE scheme = $1 AND source = $2 AND event_id = $3";
/// $4 owner, $5 now, $6 the event type (NULL: no effect).
pub(super) const COMPLETE: &str = "WITH done AS (UPDATE webhook_events \
       SET status = 'processed', lease_until = 0, processed_at = $5 \
       WHERE scheme = $1 AND source = $2 AND event_id = $3 AND owner = $4 \
         AND status = 'processing' RETURNING scheme, source, event_id), \
     applied AS (INSERT INTO webhook_effects (scheme, source, event_id, event_type, applied_at) \
       SELECT scheme, source, event_id, $6::text, $5::bigint FROM done WHERE $6::text IS NOT NULL) \
     SELECT count(*) FROM done";
pub(super) const RELEASE: &str = "DELETE FROM webhook_events \
     WHERE scheme = $1 AND source = $2 AND event_id = $3 AND owner = $4 AND status = 'processing'";
pub(super) const MARK: &str = "INSERT INTO webhook_events \
       (scheme, source, event_id, status, owner, lease_until, processed_at) \
     VALUES ($1, $2, $3, 'processed', '', 0, $4) ON CONFLICT DO NOTHING";
pub(super) const FORGET: &str =
    "DELETE FROM webhook_events WHERE scheme = $1 AND source = $2 AND event_id = $3";
pub(super) const APPLY: &str = "INSERT INTO webhook_effects \
       (scheme, source, event_id, event_type, applied_at) VALUES ($1, $2, $3, $4, $5)";
pub(super) const PROCESSED: &str =
    "SELECT scheme, source, event_id FROM webhook_events WHERE status = 'processed'";
pub(super) const COUNT: &str = "SELECT count(*) FROM webhook_effects";

/// How often a claim retries when the row it conflicted with vanished before it was read.
const CLAIM_ATTEMPTS: usize = 3;

impl WebhookStore for PgStore {
    fn claim_event<'a>(
        &'a self,
        key: &'a EventKey,
        forget_after: Option<Duration>,
    ) -> StoreFuture<'a, Claim> {
        Box::pin(async move {
            let k = [&key.scheme, &key.source, &key.event_id];
            for _ in 0..CLAIM_ATTEMPTS {
                let now = self.now();
                let owner = Owner::new();
                let forget_before =
                    forget_after.map_or(i64::MIN, |ttl| now.saturating_sub(millis(ttl)));
                let rows = self
                    .query(
                        Sql::EventClaim,
                        &[
                            k[0],
                            k[1],
                            k[2],
                            &owner.token(),
                            &now.saturating_add(self.webhook_lease_ms),
                            &now,
                            &forget_before,
                        ],
                    )
                    .await?;
                if !rows.is_empty() {
                    return Ok(Claim::Acquired(owner));
                }
                let rows = self.query(Sql::EventStatus, &[k[0], k[1], k[2]]).await?;
                match rows
                    .first()
                    .map(|row| row.try_get::<_, String>(0))
                    .transpose()?
                {
                    Some(status) if status == "processing" => return Ok(Claim::Processing),
                    Some(_) => return Ok(Claim::Processed),
                    None => continue,
                }
            }
            anyhow::bail!("the webhook record kept changing under {CLAIM_ATTEMPTS} claim attempts")
        })
    }

    fn complete_event<'a>(
        &'a self,
        key: &'a EventKey,
        owner: &'a Owner,
        kind: Option<&'a str>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let rows = self
                .query(
                    Sql::EventComplete,
                    &[
                        &key.scheme,
                        &key.source,
                        &key.event_id,
                        &owner.token(),
                        &self.now(),
                        &kind,
                    ],
                )
                .await?;
            let done: i64 = rows.first().context("no row from completion")?.try_get(0)?;
            Ok(done == 1)
        })
    }

    fn release_event<'a>(&'a self, key: &'a EventKey, owner: &'a Owner) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                [&key.scheme, &key.source, &key.event_id, &owner.token()];
            Ok(self.execute(Sql::EventRelease, &params).await? == 1)
        })
    }

    fn mark_event<'a>(&'a self, key: &'a EventKey) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                [&key.scheme, &key.source, &key.event_id, &self.now()];
            Ok(self.execute(Sql::EventMark, &params).await? == 1)
        })
    }

    fn forget_event<'a>(&'a self, key: &'a EventKey) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&key.scheme, &key.source, &key.event_id];
            Ok(self.execute(Sql::EventForget, &params).await? == 1)
        })
    }

    fn apply_event<'a>(&'a self, key: &'a EventKey, kind: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&key.scheme, &key.source, &key.event_id, &kind, &self.now()];
            self.execute(Sql::EventApply, &params).await?;
            Ok(())
        })
    }

    fn processed_events(&self) -> StoreFuture<'_, Vec<EventKey>> {
        Box::pin(async move {
            self.query(Sql::EventsProcessed, &[])
                .await?
                .iter()
                .map(|row| {
                    Ok(EventKey {
                        scheme: row.try_get(0)?,
                        source: row.try_get(1)?,
                        event_id: row.try_get(2)?,
                    })
                })
                .collect()
        })
    }

    fn count_effects(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let rows = self.query(Sql::EffectsCount, &[]).await?;
            let n: i64 = rows.first().context("no row from count")?.try_get(0)?;
            Ok(u64::try_from(n).unwrap_or_default())
        })
    }
}
