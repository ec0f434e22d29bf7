//! `run --reference`: the bundled reference server, in-process, as a target.
//!
//! It binds 127.0.0.1:0 once and keeps the socket for the whole run; a restart shuts the server
//! down (its SQLite store really closed) and serves again from the same file on the same socket,
//! so `restart-persistence` exercises real durability without a second process.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::future::BoxFuture;
use futures::FutureExt;
use idem_reference_server::{Config as ServerConfig, DbLocation, Fault};
use tokio::sync::{oneshot, Mutex};
use tokio::task::JoinHandle;

use crate::config::{RestartHook, TargetSpec};

/// The hold the concurrency probes ask of the reference server, in milliseconds.
pub const HOLD_MS: u64 = 600;

/// The lease the reference server runs with here: shorter than [`HOLD_MS`], so a server that
/// does not renew its lease while working is caught by the duplicate waves.
pub const LEASE: Duration = Duration::from_millis(250);

/// A running in-process reference server. Dropping it stops the server.
pub struct Reference {
    pub base: String,
    server: Arc<Server>,
    _dir: tempfile::TempDir,
}

struct Server {
    listener: std::net::TcpListener,
    config: ServerConfig,
    running: Mutex<Option<(oneshot::Sender<()>, JoinHandle<Result<()>>)>>,
}

impl Server {
    async fn start(&self) -> Result<()> {
        let std_listener = self
            .listener
            .try_clone()
            .context("could not share the reference server's socket")?;
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let (tx, rx) = oneshot::channel();
        let handle = tokio::spawn(idem_reference_server::run(
            listener,
            self.config.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        *self.running.lock().await = Some((tx, handle));
        Ok(())
    }

    async fn stop(&self) -> Result<()> {
        if let Some((tx, handle)) = self.running.lock().await.take() {
            let _ = tx.send(());
            handle
                .await
                .context("the reference server task panicked")?
                .context("the reference server stopped with an error")?;
        }
        Ok(())
    }
}

impl Reference {
    /// Starts the reference server with a temporary database, optionally with a fault.
    pub async fn start(fault: Option<Fault>) -> Result<Reference> {
        let dir = tempfile::tempdir().context("could not create a temporary directory")?;
        let db = if fault == Some(Fault::MemoryStore) {
            DbLocation::Memory
        } else {
            DbLocation::File(dir.path().join("reference.db"))
        };
        let mut config = ServerConfig::new(db);
        config.test_hooks = true;
        config.fault = fault;
        config.lease = LEASE;
        if fault == Some(Fault::Race) {
            config.race_window_us = 100;
        }
        config
            .validate()
            .context("invalid reference server configuration")?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("could not bind 127.0.0.1:0 for the reference server")?;
        listener.set_nonblocking(true)?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = Arc::new(Server {
            listener,
            config,
            running: Mutex::new(None),
        });
        server.start().await?;
        Ok(Reference {
            base,
            server,
            _dir: dir,
        })
    }

    /// The target description of the reference server's payments operation.
    pub fn target(&self) -> TargetSpec {
        TargetSpec {
            url: format!("{}/api/payments", self.base),
            method: Some("POST".into()),
            headers: vec![
                "Authorization: Bearer token-a".into(),
                "Content-Type: application/json".into(),
            ],
            body: Some(r#"{"amountCents":1250,"currency":"EUR","reference":"{{unique}}"}"#.into()),
            id_pointer: Some("/id".into()),
            count_url: Some(format!("{}/api/payments/count", self.base)),
            count_pointer: Some("/count".into()),
            tenant_b_headers: vec!["Authorization: Bearer token-b".into()],
            hold_header: Some(format!("X-Test-Delay-Ms: {HOLD_MS}")),
            secrets: vec!["token-a".into(), "token-b".into()],
            ..TargetSpec::default()
        }
    }

    /// The restart hook: stop (store closed), then serve again from the same file.
    pub fn restart_hook(&self) -> Arc<dyn RestartHook> {
        Arc::new(InProcessRestart(self.server.clone()))
    }

    /// Stops the server and waits until its store is closed.
    pub async fn stop(self) -> Result<()> {
        self.server.stop().await
    }
}

struct InProcessRestart(Arc<Server>);

impl RestartHook for InProcessRestart {
    fn describe(&self) -> String {
        "an in-process restart of the reference server (store closed and reopened)".into()
    }

    fn restart(&self) -> BoxFuture<'_, Result<()>> {
        async move {
            self.0.stop().await?;
            self.0.start().await
        }
        .boxed()
    }
}
