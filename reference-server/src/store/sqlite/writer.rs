//! The single writer thread and its group commit.
//!
//! SQLite allows one writer at a time per database file, and with `synchronous=FULL` every
//! commit costs an fsync. Rather than have each request open its own transaction and wait its
//! turn, requests send their work to one thread that owns the write connection. That thread
//! takes everything queued, runs it inside ONE `BEGIN IMMEDIATE` transaction (each job in its
//! own savepoint, so one failing job does not undo the others), commits once — one fsync for
//! the whole batch — and only then answers each request. Nobody is told "done" before the
//! commit that made it durable.
//!
//! `BEGIN IMMEDIATE` takes the database write lock up front, so a decision made from what a job
//! reads still holds when the transaction commits, even if other processes share the file.

use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

/// Sends a job's result to its caller once the transaction's fate is known; the argument is the
/// commit error, if the commit failed.
type Deliver = Box<dyn FnOnce(Option<&str>) + Send>;

/// A unit of work on the write connection: whether it succeeded (else its savepoint is rolled
/// back), and how to deliver its result.
type Job = Box<dyn FnOnce(&Connection) -> (bool, Deliver) + Send>;

enum Message {
    Job(Job),
    Shutdown,
}

/// How many jobs one transaction takes at most: bounds the latency of the first job in a batch.
const MAX_BATCH: usize = 512;

/// How many jobs may wait for the writer before senders are made to wait too (back-pressure).
const QUEUE: usize = 8192;

/// The handle requests use to reach the writer thread.
#[derive(Debug)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Message>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Message::Job(_) => "Job",
            Message::Shutdown => "Shutdown",
        })
    }
}

impl Writer {
    /// Starts the writer thread on `conn`. Without `group_commit` every job gets a transaction
    /// of its own.
    pub(super) fn start(conn: Connection, group_commit: bool) -> anyhow::Result<Self> {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let thread = std::thread::Builder::new()
            .name("idem-store-writer".into())
            .spawn(move || run(conn, queue, if group_commit { MAX_BATCH } else { 1 }))
            .context("starting the store writer thread")?;
        Ok(Self {
            jobs,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `work` on the write connection inside a transaction and returns its result once
    /// that transaction has committed (or the error that prevented it).
    pub(super) async fn call<T, F>(&self, work: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<anyhow::Result<T>>();
        let job: Job = Box::new(move |conn| {
            let result = work(conn);
            let ok = result.is_ok();
            let deliver: Deliver = Box::new(move |commit_error| {
                let outcome = match (commit_error, result) {
                    (Some(e), _) => Err(anyhow!("committing the transaction failed: {e}")),
                    (None, r) => r.context("store statement failed"),
                };
                // The caller may have gone away (its request was cancelled); nothing to do.
                let _ = reply.send(outcome);
            });
            (ok, deliver)
        });
        self.jobs
            .send(Message::Job(job))
            .await
            .map_err(|_| anyhow!("the store is closed"))?;
        answer
            .await
            .map_err(|_| anyhow!("the store writer dropped the request (see the server log)"))?
    }

    /// Finishes the queued jobs, closes the connection and waits for the thread to exit.
    pub(super) async fn close(&self) -> anyhow::Result<()> {
        // If the queue is already closed the thread is exiting anyway.
        let _ = self.jobs.send(Message::Shutdown).await;
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .context("waiting for the store writer")?
                .map_err(|_| anyhow!("the store writer thread panicked"))?;
        }
        Ok(())
    }
}

/// The writer thread's loop: take a batch, run it in one transaction, answer, repeat.
fn run(conn: Connection, mut queue: mpsc::Receiver<Message>, max_batch: usize) {
    let mut stopping = false;
    while !stopping {
        let Some(first) = queue.blocking_recv() else {
            break;
        };
        let mut batch = Vec::new();
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Job(job) => batch.push(job),
                Message::Shutdown => {
                    stopping = true;
                    break;
                }
            }
            if batch.len() < max_batch {
                next = queue.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            run_batch(&conn, batch);
        }
    }
    queue.close();
    // Jobs that raced with shutdown are answered by dropping them ("store is closed").
    while queue.try_recv().is_ok() {}
    if let Err((_, e)) = conn.close() {
        tracing::error!(cause = %e, "closing the database failed");
    }
}

/// One transaction for the whole batch; a savepoint per job.
fn run_batch(conn: &Connection, batch: Vec<Job>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::error!(cause = %e, jobs = batch.len(), "could not start a write transaction");
        // Dropping the jobs answers their callers with an error.
        return;
    }
    let mut deliveries = Vec::with_capacity(batch.len());
    for job in batch {
        if let Err(e) = conn.execute_batch("SAVEPOINT job") {
            tracing::error!(cause = %e, "could not open a savepoint");
            continue;
        }
        let (ok, deliver) = job(conn);
        let end = if ok {
            "RELEASE job"
        } else {
            "ROLLBACK TO job; RELEASE job"
        };
        if let Err(e) = conn.execute_batch(end) {
            tracing::error!(cause = %e, "could not close a savepoint");
        }
        deliveries.push(deliver);
    }
    let commit_error = conn.execute_batch("COMMIT").err().map(|e| {
        tracing::error!(cause = %e, "commit failed; rolling the batch back");
        let _ = conn.execute_batch("ROLLBACK");
        e.to_string()
    });
    for deliver in deliveries {
        deliver(commit_error.as_deref());
    }
}
