//! The statements behind the claim state machine. Each function runs inside a transaction the
//! writer thread opened with `BEGIN IMMEDIATE`, so "read the record, then decide, then write"
//! is atomic across threads *and* processes: that is where the correctness of the claim comes
//! from, not from any in-process lock.

use rusqlite::{params, Connection, OptionalExtension, Row, ToSql};

use crate::clock::from_unix_millis;
use crate::payments::PaymentRecord;
use crate::store::tables::{self, payment_columns, record_columns, Columns, Value};
use crate::store::{Claimed, Completion, Finish, NewPayment, Owner, Record, Scope, TakeOver};

/// The timing policy, as the statements need it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    pub(super) lease_ms: i64,
    pub(super) ttl_ms: i64,
    /// A webhook claim's lease (`Config::webhook_lease`).
    pub(super) webhook_lease_ms: i64,
}

const SELECT_RECORD: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM idempotency_records WHERE tenant = ?1 AND operation = ?2 AND idem_key = ?3"
);

impl Columns for Row<'_> {
    type Error = rusqlite::Error;

    fn value<T: Value>(&self, index: usize) -> rusqlite::Result<T> {
        self.get(index)
    }

    fn status(&self, index: usize) -> rusqlite::Result<Option<u16>> {
        self.get(index)
    }
}

/// The record of `scope`, if any.
pub(super) fn read(conn: &Connection, scope: &Scope) -> rusqlite::Result<Option<Record>> {
    conn.prepare_cached(SELECT_RECORD)?
        .query_row(params![scope.tenant, scope.operation, scope.key], |row| {
            tables::record(row)
        })
        .optional()
}

/// The atomic claim: read, decide with [`TakeOver::replaces`], write — all inside the writer's
/// `BEGIN IMMEDIATE` transaction, so no other process can come between the read and the write.
pub(super) fn claim(
    conn: &Connection,
    policy: &Policy,
    now: i64,
    scope: &Scope,
    fingerprint: &str,
    take_over: TakeOver,
) -> rusqlite::Result<Claimed> {
    let taken_over = match read(conn, scope)? {
        None => false,
        Some(record) => match take_over.replaces(&record, fingerprint, now) {
            Some(taken_over) => taken_over,
            None => return Ok(Claimed::Held(record)),
        },
    };
    let owner = Owner::new();
    write_claim(conn, policy, now, scope, fingerprint, &owner)?;
    Ok(Claimed::Acquired { owner, taken_over })
}

/// Writes a `processing` claim for `owner`, replacing whatever row was there (the decision to
/// do so was taken by [`claim`] in the same transaction).
fn write_claim(
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
        owner.token(),
        now.saturating_add(policy.lease_ms),
        now,
        now.saturating_add(policy.ttl_ms),
    ])?;
    Ok(())
}

/// The fence of every write by a claim's owner: the record of the scope (`?1` to `?3`) is still
/// a processing claim, held by the owner token `?4`. Once a claim is taken over, its old owner's
/// writes match nothing.
macro_rules! held_by_owner {
    () => {
        "tenant = ?1 AND operation = ?2 AND idem_key = ?3 AND owner = ?4 AND status = 'processing'"
    };
}

/// Runs `statement`, fenced by [`held_by_owner!`], for `owner`'s claim on `scope`, with `more`
/// bound from `?5` on. Whether it changed the record: false once `owner` no longer holds it.
fn by_owner(
    conn: &Connection,
    statement: &str,
    scope: &Scope,
    owner: &Owner,
    more: &[&dyn ToSql],
) -> rusqlite::Result<bool> {
    let token = owner.token();
    let mut params: Vec<&dyn ToSql> = vec![&scope.tenant, &scope.operation, &scope.key, &token];
    params.extend_from_slice(more);
    Ok(conn.prepare_cached(statement)?.execute(params.as_slice())? == 1)
}

/// Stores the response (and the payment, if any) — fenced by the owner token, so an owner whose
/// lease was taken over cannot complete. An unfenced completion (faults only) upserts.
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
        fenced,
        ttl,
    } = finish;
    let ttl_ms = ttl.map_or(policy.ttl_ms, crate::clock::millis);
    let expires_at = now.saturating_add(ttl_ms);
    let changed = if *fenced {
        by_owner(
            conn,
            concat!(
                "UPDATE idempotency_records SET status = 'completed', lease_until = 0, \
                   expires_at = ?5, response_status = ?6, content_type = ?7, location = ?8, \
                   body = ?9 WHERE ",
                held_by_owner!()
            ),
            scope,
            owner,
            &[
                &expires_at,
                &response.status,
                &response.content_type,
                &response.location,
                &response.body.as_ref(),
            ],
        )?
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
            owner.token(),
            now,
            ttl_ms,
            response.status,
            response.content_type,
            response.location,
            response.body.as_ref(),
        ])? == 1
    };
    if !changed {
        return Ok(Completion::Fenced);
    }
    if let Some(payment) = payment {
        insert_payment(conn, &scope.key, payment)?;
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
    by_owner(
        conn,
        concat!(
            "UPDATE idempotency_records SET lease_until = ?5 WHERE ",
            held_by_owner!()
        ),
        scope,
        owner,
        &[&now.saturating_add(policy.lease_ms)],
    )
}

/// Gives up the owner's claim after a failed execution, so a retry can execute at once.
pub(super) fn release(conn: &Connection, scope: &Scope, owner: &Owner) -> rusqlite::Result<bool> {
    by_owner(
        conn,
        concat!("DELETE FROM idempotency_records WHERE ", held_by_owner!()),
        scope,
        owner,
        &[],
    )
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

/// Deletes every record that [`Record::expired`] treats as absent.
pub(super) fn purge(conn: &Connection, now: i64) -> rusqlite::Result<u64> {
    let deleted = conn
        .prepare_cached(
            "DELETE FROM idempotency_records \
             WHERE expires_at <= ?1 AND (status = 'completed' OR lease_until <= ?1)",
        )?
        .execute(params![now])?;
    Ok(deleted as u64)
}

/// Inserts the effect.
fn insert_payment(conn: &Connection, key: &str, payment: &NewPayment) -> rusqlite::Result<()> {
    let NewPayment {
        tenant,
        operation,
        record,
    } = payment;
    conn.prepare_cached(
        "INSERT INTO payments (id, tenant, operation, idem_key, amount_cents, currency, \
           reference, created_at, provider_ref) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        record.provider_ref,
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
    conn.prepare_cached(concat!(
        "SELECT ",
        payment_columns!(),
        " FROM payments WHERE id = ?1 AND tenant = ?2 AND operation = ?3"
    ))?
    .query_row(params![id, tenant, operation], |row| tables::payment(row))
    .optional()
}
