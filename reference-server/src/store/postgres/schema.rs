//! The PostgreSQL schema, created on start by whichever replica comes first.
//!
//! Replicas starting together would race on `CREATE TABLE IF NOT EXISTS` (PostgreSQL can then
//! fail one of them with a unique violation in its catalog), so creation runs in a transaction
//! that first takes a transaction-scoped advisory lock: the second replica waits, then finds the
//! tables there and leaves them alone.

use anyhow::Context;
use tokio_postgres::NoTls;

use super::pool::CONNECT_TIMEOUT;
use crate::store::tables::{POSTGRES, PROVIDER_REF};

/// An arbitrary constant naming this schema's advisory lock.
const SCHEMA_LOCK: i64 = 0x1de_c4ec;

/// Creates the tables if they are missing, on a connection of its own.
pub(super) async fn create(config: &tokio_postgres::Config) -> anyhow::Result<()> {
    let (mut client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
        .await
        .map_err(|_| anyhow::anyhow!("connecting to PostgreSQL timed out"))?
        .context("connecting to PostgreSQL")?;
    let driver = tokio::spawn(connection);
    let created = create_on(&mut client).await.context("creating the schema");
    drop(client);
    let _ = driver.await;
    created
}

/// Under the advisory lock: if the last object of the schema (the webhook effects' index)
/// exists, and the payments table has its latest column, touch nothing. Even `CREATE … IF NOT EXISTS` takes table locks, and a replica running
/// it while another prepares its statements on the same tables can deadlock with it.
async fn create_on(client: &mut tokio_postgres::Client) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    let ready: bool = tx
        .query_one(
            "SELECT to_regclass('webhook_effects_by_event') IS NOT NULL",
            &[],
        )
        .await?
        .try_get(0)?;
    if !ready {
        let schema = POSTGRES.payments() + &POSTGRES.records("") + &POSTGRES.webhooks();
        tx.batch_execute(&schema).await?;
    }
    let has_provider_ref: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'payments' \
               AND column_name = 'provider_ref')",
            &[],
        )
        .await?
        .try_get(0)?;
    if !has_provider_ref {
        tx.batch_execute(PROVIDER_REF).await?;
    }
    tx.commit().await?;
    Ok(())
}
