//! A fixed set of PostgreSQL connections, each shared by every request that lands on it.
//!
//! tokio-postgres pipelines the queries of concurrent callers on one connection: each is sent at
//! once, without waiting for the previous answer, and answers come back in order. A pool that
//! lends a connection to one caller at a time (deadpool, bb8) would give that up and make every
//! durable statement a round trip of its own; here a few connections per replica carry all of
//! its traffic, which also keeps several replicas far below the server's `max_connections`.
//!
//! A connection that broke (the server restarted, the network dropped it) is replaced on its
//! next use; until the server answers again, every use fails fast with the connect error, which
//! the request path turns into a 503. Statements are prepared once per connection.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls, Statement};

/// How long connecting (and preparing the statements) may take before the attempt fails.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// One live connection and its prepared statements.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) statements: Vec<Statement>,
}

/// The connections of one store.
#[derive(Debug)]
pub(super) struct Pool {
    config: tokio_postgres::Config,
    statements: &'static [&'static str],
    slots: Vec<Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    closed: AtomicBool,
}

impl Pool {
    /// A pool of `size` connections to `config`, each preparing `statements` when it connects.
    pub(super) fn new(
        config: tokio_postgres::Config,
        size: usize,
        statements: &'static [&'static str],
    ) -> Self {
        Self {
            config,
            statements,
            slots: (0..size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// Opens every connection now, so the first requests do not pay for connecting and a
    /// database that cannot serve this store fails the start, not a request.
    pub(super) async fn connect_all(&self) -> anyhow::Result<()> {
        futures::future::try_join_all((0..self.slots.len()).map(|_| self.get())).await?;
        Ok(())
    }

    /// A live connection, round-robin over the slots; reconnects a slot whose connection broke.
    pub(super) async fn get(&self) -> anyhow::Result<Arc<Conn>> {
        if self.closed.load(Ordering::Acquire) {
            bail!("the store is closed");
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.client.is_closed()) {
            return Ok(Arc::clone(conn));
        }
        *slot = None;
        let conn = Arc::new(
            tokio::time::timeout(CONNECT_TIMEOUT, self.connect())
                .await
                .map_err(|_| anyhow::anyhow!("connecting to PostgreSQL timed out"))??,
        );
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    async fn connect(&self) -> anyhow::Result<Conn> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .context("connecting to PostgreSQL")?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(cause = %e, "PostgreSQL connection lost");
            }
        });
        // Explicit, whatever the server's default: a commit returns only once its WAL is
        // flushed, so an acknowledged 201 survives a crash of the database server.
        client
            .batch_execute("SET synchronous_commit = on")
            .await
            .context("setting synchronous_commit")?;
        let statements =
            futures::future::try_join_all(self.statements.iter().map(|sql| client.prepare(sql)))
                .await
                .context("preparing statements")?;
        Ok(Conn { client, statements })
    }

    /// Drops every connection; later uses fail.
    pub(super) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for slot in &self.slots {
            slot.lock().await.take();
        }
    }
}
