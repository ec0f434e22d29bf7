//! The statements behind the claim state machine. Each function runs inside a transaction the
//! writer thread opened with `BEGIN IMMEDIATE`, so "read the record, then decide, then write"
//! is atomic across threads *and* processes: that is where the correctness of the claim comes
//! from, not from any in-process lock.

use std::sync::Arc;

use axum::body::Bytes;
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{ClaimOutcome, Completion, NewPayment, Owner, Scope, StoredResponse};
use crate::clock::from_unix_millis;
use crate::config::Fault;
use crate::payments::PaymentRecord;

/// The timing policy and the fault, as the statements need them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    pub(super) lease_ms: i64,
    pub(super) ttl_ms: i64,
    pub(super) fault: Option<Fault>,
}

impl Policy {
    fn is(&self, fault: Fault) -> bool {
        self.fault == Some(fault)
    }
}

/// A stored record.
struct Record {
    fingerprint: String,
    completed: bool,
    lease_until: i64,
    expires_at: i64,
    response: Option<StoredResponse>,
}

impl Record {
    /// Expired records are treated as absent even before the purge task deletes them. A
    /// processing record is never expired while its lease is valid.
    fn expired(&self, now: i64) -> bool {
        self.expires_at <= now && (self.completed || self.lease_until <= now)
    }
}

const SELECT_RECORD: &str = "SELECT fingerprint, status, lease_until, expires_at, \
     response_status, content_type, location, body \
     FROM idempotency_records WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3";

fn record_from_row(row: &Row<'_>) -> rusqlite::Result<Record> {
    let status: String = row.get(1)?;
    let response_status: Option<u16> = row.get(4)?;
    let response = match response_status {
        Some(status) => Some(StoredResponse {
            status,
            content_type: row.get::<_, Option<String>>(5)?.unwrap_or_default(),
            location: row.get(6)?,
            body: Bytes::from(row.get::<_, Option<Vec<u8>>>(7)?.unwrap_or_default()),
        }),
        None => None,
    };
    Ok(Record {
        fingerprint: row.get(0)?,
        completed: status == "completed",
        lease_until: row.get(2)?,
        expires_at: row.get(3)?,
        response,
    })
}

fn read(conn: &Connection, scope: &Scope) -> rusqlite::Result<Option<Record>> {
    conn.prepare_cached(SELECT_RECORD)?
        .query_row(
            params![scope.tenant, scope.operation, scope.key],
            record_from_row,
        )
        .optional()
}

/// What the state machine decided for a claim, before anything is written.
pub(super) enum Decision {
    /// Nobody owns the key (absent, expired, or its owner's lease ran out): execute it.
    Execute { taken_over: bool },
    /// Answer without executing.
    Answer(ClaimOutcome),
}

/// The claim state machine (the article's five cases), plus the faults that corrupt it.
pub(super) fn decide(
    conn: &Connection,
    policy: &Policy,
    now: i64,
    scope: &Scope,
    fingerprint: &str,
) -> rusqlite::Result<Decision> {
    let Some(record) = read(conn, scope)?.filter(|r| !r.expired(now)) else {
        if policy.is(Fault::FingerprintDedupe) {
            if let Some(outcome) = completed_with_fingerprint(conn, now, scope, fingerprint)? {
                return Ok(Decision::Answer(outcome));
            }
        }
        return Ok(Decision::Execute { taken_over: false });
    };
    let replay = |record: Record| match record.response {
        Some(response) => Decision::Answer(ClaimOutcome::Replay {
            response: Arc::new(response),
            expires_at: from_unix_millis(record.expires_at),
        }),
        // A completed record always has a response; treat a damaged one as absent.
        None => Decision::Execute { taken_over: true },
    };
    if record.fingerprint != fingerprint && !policy.is(Fault::NoFingerprint) {
        let stored_error = record.response.as_ref().is_some_and(|r| r.status == 400);
        if policy.is(Fault::CacheValidationError) && record.completed && stored_error {
            return Ok(replay(record));
        }
        return Ok(Decision::Answer(ClaimOutcome::Mismatch));
    }
    if record.completed {
        if policy.is(Fault::ReplayReexecute) {
            return Ok(Decision::Execute { taken_over: true });
        }
        return Ok(replay(record));
    }
    if record.lease_until > now || policy.is(Fault::WedgeOnCrash) {
        return Ok(Decision::Answer(ClaimOutcome::InProgress));
    }
    Ok(Decision::Execute { taken_over: true })
}

/// The `fingerprint-dedupe` fault: any completed record of this tenant and operation with the
/// same payload.
fn completed_with_fingerprint(
    conn: &Connection,
    now: i64,
    scope: &Scope,
    fingerprint: &str,
) -> rusqlite::Result<Option<ClaimOutcome>> {
    let mut stmt = conn.prepare_cached(
        "SELECT response_status, content_type, location, body, expires_at \
         FROM idempotency_records WHERE tenant = ?1 AND operation = ?2 AND fingerprint = ?3 \
         AND status = 'completed' AND expires_at > ?4 LIMIT 1",
    )?;
    stmt.query_row(
        params![scope.tenant, scope.operation, fingerprint, now],
        |row| {
            Ok(ClaimOutcome::Replay {
                response: Arc::new(StoredResponse {
                    status: row.get(0)?,
                    content_type: row.get(1)?,
                    location: row.get(2)?,
                    body: Bytes::from(row.get::<_, Vec<u8>>(3)?),
                }),
                expires_at: from_unix_millis(row.get(4)?),
            })
        },
    )
    .optional()
}

/// Writes a `processing` claim for `owner`, replacing whatever row was there (the decision to
/// do so was taken by [`decide`] in the same transaction, or not at all under `race`).
pub(super) fn write_claim(
    conn: &Connection,
    policy: &Policy,
    now: i64,
    scope: &Scope,
    fingerprint: &str,
    owner: &Owner,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO idempotency_records \
           (tenant, operation, idem_key, fingerprint, status, owner, lease_until, created_at, \
            expires_at, response_status, content_type, location, body) \
         VALUES (?1, ?2, ?3, ?4, 'processing', ?5, ?6, ?7, ?8, NULL, NULL, NULL, NULL) \
         ON CONFLICT (tenant, operation, idem_key) DO UPDATE SET \
           fingerprint = excluded.fingerprint, status = 'processing', owner = excluded.owner, \
           lease_until = excluded.lease_until, created_at = excluded.created_at, \
           expires_at = excluded.expires_at, response_status = NULL, content_type = NULL, \
           location = NULL, body = NULL",
    )?
    .execute(params![
        scope.tenant,
        scope.operation,
        scope.key,
        fingerprint,
        owner.0,
        now.saturating_add(policy.lease_ms),
        now,
        now.saturating_add(policy.ttl_ms),
    ])?;
    Ok(())
}

/// What an owner hands in when its execution is done.
pub(super) struct Finish {
    pub(super) scope: Scope,
    pub(super) owner: Owner,
    pub(super) fingerprint: String,
    pub(super) payment: Option<NewPayment>,
    pub(super) response: StoredResponse,
}

/// Stores the response (and the payment, if any) — fenced by the owner token, so an owner whose
/// lease was taken over cannot complete. `race` and `expiring-lock` skip the fence.
pub(super) fn complete(
    conn: &Connection,
    policy: &Policy,
    now: i64,
    finish: &Finish,
) -> rusqlite::Result<Completion> {
    let Finish {
        scope,
        owner,
        fingerprint,
        payment,
        response,
    } = finish;
    let expires_at = now.saturating_add(policy.ttl_ms);
    let fenced = !(policy.is(Fault::Race) || policy.is(Fault::ExpiringLock));
    let changed = if fenced {
        conn.prepare_cached(
            "UPDATE idempotency_records SET status = 'completed', lease_until = 0, \
               expires_at = ?5, response_status = ?6, content_type = ?7, location = ?8, body = ?9 \
             WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3 AND owner = ?4 \
               AND status = 'processing'",
        )?
        .execute(params![
            scope.tenant,
            scope.operation,
            scope.key,
            owner.0,
            expires_at,
            response.status,
            response.content_type,
            response.location,
            response.body.as_ref(),
        ])?
    } else {
        conn.prepare_cached(
            "INSERT INTO idempotency_records \
               (tenant, operation, idem_key, fingerprint, status, owner, lease_until, created_at, \
                expires_at, response_status, content_type, location, body) \
             VALUES (?1, ?2, ?3, ?4, 'completed', ?5, 0, ?6, ?6 + ?7, ?8, ?9, ?10, ?11) \
             ON CONFLICT (tenant, operation, idem_key) DO UPDATE SET \
               status = 'completed', owner = excluded.owner, lease_until = 0, \
               expires_at = excluded.expires_at, response_status = excluded.response_status, \
               content_type = excluded.content_type, location = excluded.location, \
               body = excluded.body",
        )?
        .execute(params![
            scope.tenant,
            scope.operation,
            scope.key,
            fingerprint,
            owner.0,
            now,
            policy.ttl_ms,
            response.status,
            response.content_type,
            response.location,
            response.body.as_ref(),
        ])?
    };
    if changed != 1 {
        return Ok(Completion::Fenced);
    }
    if let Some(payment) = payment {
        insert_payment(conn, Some(&scope.key), payment)?;
    }
    Ok(Completion::Completed {
        expires_at: from_unix_millis(expires_at),
    })
}

/// Extends the owner's lease (the heartbeat). False if the owner no longer holds the claim.
pub(super) fn renew(
    conn: &Connection,
    policy: &Policy,
    now: i64,
    scope: &Scope,
    owner: &Owner,
) -> rusqlite::Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE idempotency_records SET lease_until = ?5 \
             WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3 AND owner = ?4 \
               AND status = 'processing'",
        )?
        .execute(params![
            scope.tenant,
            scope.operation,
            scope.key,
            owner.0,
            now.saturating_add(policy.lease_ms)
        ])?;
    Ok(changed == 1)
}

/// Gives up the owner's claim after a failed execution, so a retry can execute at once.
pub(super) fn release(conn: &Connection, scope: &Scope, owner: &Owner) -> rusqlite::Result<bool> {
    let changed = conn
        .prepare_cached(
            "DELETE FROM idempotency_records \
             WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3 AND owner = ?4 \
               AND status = 'processing'",
        )?
        .execute(params![scope.tenant, scope.operation, scope.key, owner.0])?;
    Ok(changed == 1)
}

/// Deletes a record whatever its state or owner (only faults do this).
pub(super) fn forget(conn: &Connection, scope: &Scope) -> rusqlite::Result<bool> {
    let changed = conn
        .prepare_cached(
            "DELETE FROM idempotency_records WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3",
        )?
        .execute(params![scope.tenant, scope.operation, scope.key])?;
    Ok(changed == 1)
}

/// Replaces a completed record's fingerprint and response (the `mismatch-overwrite` fault).
pub(super) fn overwrite(
    conn: &Connection,
    scope: &Scope,
    fingerprint: &str,
    response: &StoredResponse,
) -> rusqlite::Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE idempotency_records SET fingerprint = ?4, response_status = ?5, \
               content_type = ?6, location = ?7, body = ?8 \
             WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3 AND status = 'completed'",
        )?
        .execute(params![
            scope.tenant,
            scope.operation,
            scope.key,
            fingerprint,
            response.status,
            response.content_type,
            response.location,
            response.body.as_ref(),
        ])?;
    Ok(changed == 1)
}

/// Deletes every record that [`Record::expired`] would treat as absent.
pub(super) fn purge(conn: &Connection, now: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM idempotency_records \
         WHERE expires_at <= ?1 AND (status = 'completed' OR lease_until <= ?1)",
    )?
    .execute(params![now])
}

/// Inserts the effect.
pub(super) fn insert_payment(
    conn: &Connection,
    key: Option<&str>,
    payment: &NewPayment,
) -> rusqlite::Result<()> {
    let NewPayment {
        tenant,
        operation,
        record,
    } = payment;
    conn.prepare_cached(
        "INSERT INTO payments (id, tenant, operation, idem_key, amount_cents, currency, \
           reference, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        record.id,
        tenant,
        operation,
        key,
        record.amount_cents,
        record.currency,
        record.reference,
        record.created_at,
    ])?;
    Ok(())
}

/// How many times `operation` executed for `tenant`: the effect counter the checker reads.
pub(super) fn count(conn: &Connection, tenant: &str, operation: &str) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT COUNT(*) FROM payments WHERE tenant = ?1 AND operation = ?2")?
        .query_row(params![tenant, operation], |row| row.get(0))
}

/// One of the tenant's resources.
pub(super) fn payment(
    conn: &Connection,
    tenant: &str,
    operation: &str,
    id: &str,
) -> rusqlite::Result<Option<PaymentRecord>> {
    conn.prepare_cached(
        "SELECT id, amount_cents, currency, reference, created_at FROM payments \
         WHERE id = ?1 AND tenant = ?2 AND operation = ?3",
    )?
    .query_row(params![id, tenant, operation], |row| {
        Ok(PaymentRecord {
            id: row.get(0)?,
            amount_cents: row.get(1)?,
            currency: row.get(2)?,
            reference: row.get(3)?,
            created_at: row.get(4)?,
        })
    })
    .optional()
}
