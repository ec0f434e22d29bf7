//! A fixed set of PostgreSQL connections, each shared by every request that lands on it.
//!
//! tokio-postgres pipelines the queries of concurrent callers on one connection: each is sent at
//! once, without waiting for the previous answer, and answers come back in order. A pool that
//! lends a connection to one caller at a time (deadpool, bb8) would give that up and make every
//! durable statement wait for a free connection; here a fixed set per replica carries all of its
//! traffic and no request ever waits for a checkout. PostgreSQL still runs one connection's
//! statements one after another, each with its own commit, so the set's size is how many commits
//! can share one WAL flush: that, not round trips, bounds durable throughput (`--db-pool`).
//!
//! A connection that broke (the server restarted, the network dropped it) is replaced on its
//! next use; until the server answers again, every use fails with the connect error, which the
//! request path turns into a 503. One attempt per slot is made at a time, and every request
//! that needs the slot meanwhile shares its outcome: were each to wait for the slot and then
//! try again, a database that does not answer would make the n-th of them wait n connect
//! timeouts. Statements are prepared once per connection.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::{BoxFuture, Shared};
use futures::FutureExt as _;
use tokio_postgres::{Client, NoTls, Statement};

/// How long connecting (and preparing the statements) may take before the attempt fails.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// One live connection and its prepared statements.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) statements: Vec<Statement>,
}

/// A connect attempt that every request needing its slot awaits; the error is shared as text.
type Attempt = Shared<BoxFuture<'static, Result<Arc<Conn>, Arc<str>>>>;

/// What one slot holds.
#[derive(Default)]
enum Slot {
    #[default]
    Empty,
    Live(Arc<Conn>),
    Connecting(Attempt),
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Slot::Empty => "Empty",
            Slot::Live(_) => "Live",
            Slot::Connecting(_) => "Connecting",
        })
    }
}

/// The connections of one store.
#[derive(Debug)]
pub(super) struct Pool {
    config: tokio_postgres::Config,
    statements: &'static [&'static str],
    slots: Vec<Mutex<Slot>>,
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
            slots: (0..size.max(1)).map(|_| Mutex::default()).collect(),
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

    /// A live connection, round-robin over the slots; reconnects a slot whose connection broke,
    /// or joins the attempt already under way there.
    pub(super) async fn get(&self) -> anyhow::Result<Arc<Conn>> {
        if self.closed.load(Ordering::Acquire) {
            bail!("the store is closed");
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let attempt = {
            let mut slot = self.lock(i);
            match &*slot {
                Slot::Live(conn) if !conn.client.is_closed() => return Ok(Arc::clone(conn)),
                Slot::Connecting(attempt) => attempt.clone(),
                Slot::Live(_) | Slot::Empty => {
                    let attempt = connect(self.config.clone(), self.statements)
                        .boxed()
                        .shared();
                    *slot = Slot::Connecting(attempt.clone());
                    attempt
                }
            }
        };
        let outcome = attempt.clone().await;
        let mut slot = self.lock(i);
        // The first of the attempt's waiters to get here records its outcome, unless the pool
        // was closed meanwhile (its connections are dropped for good).
        if matches!(&*slot, Slot::Connecting(a) if a.ptr_eq(&attempt)) {
            *slot = match &outcome {
                Ok(conn) if !self.closed.load(Ordering::Acquire) => Slot::Live(Arc::clone(conn)),
                _ => Slot::Empty,
            };
        }
        outcome.map_err(|e| anyhow::anyhow!("{e}"))
    }

    fn lock(&self, i: usize) -> std::sync::MutexGuard<'_, Slot> {
        self.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops every connection; later uses fail.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for i in 0..self.slots.len() {
            *self.lock(i) = Slot::Empty;
        }
    }
}

/// Opens one connection to `config` and prepares `statements` on it, within
/// [`CONNECT_TIMEOUT`].
async fn connect(
    config: tokio_postgres::Config,
    statements: &'static [&'static str],
) -> Result<Arc<Conn>, Arc<str>> {
    let attempt = async {
        let (client, connection) = config
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
            futures::future::try_join_all(statements.iter().map(|sql| client.prepare(sql)))
                .await
                .context("preparing statements")?;
        anyhow::Ok(Arc::new(Conn { client, statements }))
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(format!("{e:#}").into()),
        Err(_) => Err("connecting to PostgreSQL timed out".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four requests that need a slot while the database accepts connections but never
    /// answers share one connect attempt and its timeout: one connection is opened, and all
    /// four fail after one timeout rather than one after another.
    #[tokio::test]
    async fn requests_share_one_attempt_at_a_database_that_does_not_answer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(conn);
            }
        });
        let mut config = tokio_postgres::Config::new();
        config.host("127.0.0.1").port(port).user("u").dbname("d");
        let pool = Pool::new(config, 1, &[]);
        let outcomes = futures::future::join_all((0..4).map(|_| pool.get())).await;
        for outcome in outcomes {
            let error = outcome.map(|_| ()).unwrap_err().to_string();
            assert!(error.contains("timed out"), "{error}");
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "one attempt for four requests"
        );
        silent.abort();
    }
}
