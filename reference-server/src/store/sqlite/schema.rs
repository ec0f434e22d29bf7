//! Opening the SQLite database: durability pragmas and the tables.
//!
//! `journal_mode=WAL` lets readers in other processes proceed while one writer commits;
//! `synchronous=FULL` makes every commit fsync the WAL, so a 201 that was acknowledged after its
//! commit survives `kill -9` and power loss. `busy_timeout` makes a writer that finds another
//! process mid-transaction wait instead of failing, which is what lets several server processes
//! share one file safely.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rusqlite::Connection;

use crate::config::DbLocation;
use crate::store::tables::{PROVIDER_REF, SQLITE};

/// How long a transaction waits for another process's writer before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the write connection and creates the schema. With `records_in_memory` (the
/// `memory-store` fault) the idempotency records go to a connection-private TEMP table that
/// shadows the durable one: lost on restart, invisible to other processes.
pub(super) fn open(location: &DbLocation, records_in_memory: bool) -> anyhow::Result<Connection> {
    let conn = match location {
        DbLocation::File(path) => {
            let conn = Connection::open(path)
                .with_context(|| format!("opening database {}", path.display()))?;
            // Before anything else: another process may be mid-transaction (or switching the
            // file to WAL) right now, and every statement below should wait for it, not fail.
            conn.busy_timeout(BUSY_TIMEOUT)
                .context("setting busy_timeout")?;
            enable_wal(&conn, path)?;
            conn.pragma_update(None, "synchronous", "FULL")
                .context("setting synchronous=FULL")?;
            conn
        }
        DbLocation::Memory => Connection::open_in_memory().context("opening in-memory database")?,
        DbLocation::Postgres(_) => bail!("a PostgreSQL URL is not a SQLite database"),
    };
    conn.execute_batch(&SQLITE.payments())
        .context("creating the payments table")?;
    let has_provider_ref: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('payments') \
             WHERE name = 'provider_ref')",
            [],
            |row| row.get(0),
        )
        .context("reading the payments table's columns")?;
    if !has_provider_ref {
        conn.execute_batch(PROVIDER_REF)
            .context("adding provider_ref to the payments table")?;
    }
    let schema = if records_in_memory { "temp." } else { "" };
    conn.execute_batch(&SQLITE.records(schema))
        .context("creating the idempotency_records table")?;
    conn.execute_batch(&SQLITE.webhooks())
        .context("creating the webhook tables")?;
    Ok(conn)
}

/// Switches the file to WAL, retrying while another process holds the lock it needs. SQLite
/// does not call the busy handler for every lock of that switch (it answers SQLITE_BUSY at once
/// where waiting could deadlock), so two processes opening a new file at the same moment would
/// otherwise fail now and then.
fn enable_wal(conn: &Connection, path: &std::path::Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| {
            row.get::<_, String>(0)
        }) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => bail!("database {} refused WAL mode (got {mode})", path.display()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e).context("enabling WAL mode"),
        }
    }
}
