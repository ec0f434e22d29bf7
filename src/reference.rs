//! `run --reference`: the bundled reference server, in-process, as a target.
//!
//! It binds 127.0.0.1:0 once and keeps the socket for the whole run; a restart shuts the server
//! down (its SQLite store really closed) and serves again from the same file on the same socket,
//! so `restart-persistence` exercises real durability without a second process.
//!
//! A second instance serves the same database on its own socket and is passed as a replica, so
//! `cross-replica` sees two servers that share their store only through the database — and,
//! under the `memory-store` fault, two servers that share nothing but the payments table. With
//! `--reference-db postgres://…` both are replicas on that PostgreSQL database.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::future::BoxFuture;
use futures::FutureExt;
use idem_reference_server::{
    Config as ServerConfig, DbLocation, Fault, Outage, ProviderProfile, Tenant, WebhookFault,
};
use tokio::sync::{oneshot, Mutex};
use tokio::task::JoinHandle;

use crate::carrier::{set_field, Place};
use crate::config::{KillHook, OutageHook, RestartHook, TargetSpec};
use crate::provider::profile::Profile;
use crate::provider::{FakeProvider, ProviderError, Settings};

/// The hold the concurrency probes ask of the reference server: a named hold the checker
/// releases once it has sent its duplicates (the server ends it after 10 s at the latest).
pub const HOLD_HEADER: &str = "X-Test-Hold: {{hold}}";

/// The lease the reference server runs with here: shorter than [`HOLD_AT_LEAST`], so a server
/// that does not renew its lease while working is caught by the duplicate waves.
pub const LEASE: Duration = Duration::from_millis(250);

/// How long `concurrent-duplicates` holds its original at least: past the lease, with room
/// for a duplicate wave after it ran out.
pub const HOLD_AT_LEAST: Duration = Duration::from_millis(350);

/// The quiet window here: the reference server commits an execution before it answers, so the
/// counter settles as soon as a released hold has run.
pub const QUIET_WINDOW: Duration = Duration::from_millis(50);

/// The key lifetime `key-expiry`'s original asks for here, so the probe waits a fraction of a
/// second instead of [`KEY_TTL`].
pub const SHORT_KEY_TTL_HEADER: &str = "X-Test-Key-Ttl-Ms: 200";

/// How long `wedged-key-recovery` retries after a crash here: several leases, so a key that is
/// still refused after it is wedged, not merely waiting for its lease to run out.
pub const LEASE_WAIT: Duration = Duration::from_secs(2);

/// How long the reference server waits for one provider attempt here: the server's own default.
/// Past [`LEASE`], so that when the server calls the provider again after a held call, a lease
/// it did not renew has run out — `prov-lease-fencing` sends its retry at that moment and sees
/// any takeover; and past the half second `prov-concurrent-duplicates` holds a call at most, with
/// room for a loaded machine, where an attempt that times out by itself turns an ordinary
/// payment into an unknown outcome. The probes that hold a call past the server's deadline
/// wait this long once.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the reference server remembers a completed key here: a day, as its own default.
/// A stress key's duplicates and late retries are seconds apart on a loaded machine (each waits
/// its turn among the requests in flight), and a key forgotten between them executes again, as
/// it should once its key expired: stress would count that second execution against exactly-once.
/// `key-expiry` asks for a short lifetime per key ([`SHORT_KEY_TTL_HEADER`]) instead.
pub const KEY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A running in-process reference server and its replica. End it with [`Reference::stop`]:
/// dropped, both instances shut down in the background while its temporary folder is removed,
/// and a process that exits right after may leave the folder behind.
pub struct Reference {
    pub base: String,
    /// The replica's base URL (same database, another socket).
    pub replica_base: String,
    server: Arc<Server>,
    replica: Server,
    /// Where the key is read from, when it is not [`idem_reference_server::DEFAULT_KEY_HEADER`]:
    /// another header, or a body field.
    key: Option<Place>,
    /// The fake provider the server calls, when started with one.
    provider: Option<Arc<FakeProvider>>,
    _dir: tempfile::TempDir,
}

/// A serving instance: the senders that stop it (gracefully) and kill it (at once), and the
/// task that returns once its store is closed.
struct Running {
    stop: oneshot::Sender<()>,
    kill: oneshot::Sender<()>,
    task: JoinHandle<Result<()>>,
}

struct Server {
    listener: std::net::TcpListener,
    config: ServerConfig,
    running: Mutex<Option<Running>>,
}

impl Server {
    /// Binds 127.0.0.1:0 and starts serving; returns the server and its base URL.
    async fn bind(config: ServerConfig) -> Result<(Server, String)> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("could not bind 127.0.0.1:0 for the reference server")?;
        listener.set_nonblocking(true)?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = Server {
            listener,
            config,
            running: Mutex::new(None),
        };
        server.start().await?;
        Ok((server, base))
    }

    /// Serves on the socket and returns once the server's store is open (it then accepts at
    /// once; a request sent earlier would wait in the socket's queue). The replica starts only
    /// after the target is ready: two stores opening one new SQLite file at the same moment can
    /// fail with "database is locked" while switching it to WAL. A store that does not open
    /// within [`START_TIMEOUT`] is abandoned, the half-opened instance dropped with its task.
    async fn start(&self) -> Result<()> {
        let std_listener = self
            .listener
            .try_clone()
            .context("could not share the reference server's socket")?;
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let (stop, stopped) = oneshot::channel();
        let (kill, killed) = oneshot::channel::<()>();
        let (ready_tx, ready) = oneshot::channel::<()>();
        let handle = tokio::spawn(idem_reference_server::run_killable(
            listener,
            self.config.clone(),
            (
                async move {
                    let _ = stopped.await;
                },
                // Only a kill sent kills: the sender dropped by a graceful stop does not.
                async move {
                    if killed.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                },
            ),
            move || {
                let _ = ready_tx.send(());
                Ok(())
            },
        ));
        match tokio::time::timeout(START_TIMEOUT, ready).await {
            Ok(Ok(())) => {}
            // `run` returned before its store was open, dropping the sender.
            Ok(Err(_)) => {
                return match handle.await {
                    Ok(Err(e)) => Err(e.context("the reference server did not start")),
                    _ => anyhow::bail!("the reference server stopped while starting"),
                }
            }
            Err(_) => {
                handle.abort();
                anyhow::bail!("the reference server's store did not open within {START_TIMEOUT:?}");
            }
        }
        *self.running.lock().await = Some(Running {
            stop,
            kill,
            task: handle,
        });
        Ok(())
    }

    /// Stops serving after the requests in flight were answered, their work done.
    async fn stop(&self) -> Result<()> {
        self.end(false).await
    }

    /// Stops serving at once, as a killed process does: requests in flight are dropped
    /// unanswered, their work (a provider call, a commit) where it stood.
    async fn kill(&self) -> Result<()> {
        self.end(true).await
    }

    /// Stops the running instance, `killed` or gracefully, and waits until its store closed.
    async fn end(&self, killed: bool) -> Result<()> {
        if let Some(Running { stop, kill, task }) = self.running.lock().await.take() {
            let _ = if killed { kill.send(()) } else { stop.send(()) };
            task.await
                .context("the reference server task panicked")?
                .context("the reference server stopped with an error")?;
        }
        Ok(())
    }
}

/// How long an instance's store may take to open.
/// The fake provider a reference server calls: the profile it plays and, with `tls_ca`
/// (`--provider-tls`), HTTPS with a CA made at start, its certificate written there and handed
/// to the server as `--provider-ca`.
#[derive(Debug, Clone, Copy)]
pub struct Calling<'a> {
    pub profile: &'static Profile,
    pub tls_ca: Option<&'a Path>,
}

impl From<&'static Profile> for Calling<'static> {
    fn from(profile: &'static Profile) -> Self {
        Calling {
            profile,
            tls_ca: None,
        }
    }
}

const START_TIMEOUT: Duration = Duration::from_secs(10);

impl Reference {
    /// Starts the reference server and its replica with a temporary SQLite database,
    /// optionally with a fault.
    pub async fn start(fault: Option<Fault>) -> Result<Reference> {
        Self::start_with(fault, None, None).await
    }

    /// Starts the reference server and its replica, optionally with a fault, on the PostgreSQL
    /// database `postgres` names, else on a temporary SQLite file, reading the key from
    /// `key` when given (another header, or a body field; else `Idempotency-Key`). Even `memory-store` gets a file: the
    /// fault keeps the idempotency records in each process's memory while the payments stay in
    /// the shared file, which is what makes its lost records show up as extra payments on the
    /// one effect counter. A configuration the server refuses is an
    /// [`idem_reference_server::config::ConfigError`] in the error's chain.
    pub async fn start_with(
        fault: Option<Fault>,
        postgres: Option<&str>,
        key: Option<&Place>,
    ) -> Result<Reference> {
        Self::start_calling(fault, postgres, key, None).await
    }

    /// [`Reference::start_with`], the server calling a fake provider as `provider` says
    /// (started here on 127.0.0.1:0) for every payment and payout: the target then carries
    /// that fake for the `downstream` probes.
    pub async fn start_calling(
        fault: Option<Fault>,
        postgres: Option<&str>,
        key: Option<&Place>,
        provider: Option<Calling<'_>>,
    ) -> Result<Reference> {
        let dir = tempfile::tempdir().context("could not create a temporary directory")?;
        let db = match postgres {
            Some(url) => match DbLocation::parse(url) {
                db @ DbLocation::Postgres(_) => db,
                _ => anyhow::bail!(
                    "--reference-db takes a PostgreSQL URL (postgres://USER@HOST:PORT/DB), got {url:?}"
                ),
            },
            None => DbLocation::File(dir.path().join("reference.db")),
        };
        let mut config = ServerConfig::new(db);
        // Fresh random tokens per run: like real credentials they are long enough to be masked
        // wherever they appear, and no earlier run's token means anything.
        config.tenants = ["tenant-a", "tenant-b"]
            .into_iter()
            .map(|name| Tenant::new(name, format!("ref-{}", uuid::Uuid::new_v4().simple())))
            .collect();
        config.test_hooks = true;
        config.fault = fault;
        config.lease = LEASE;
        config.key_ttl = KEY_TTL;
        if fault == Some(Fault::Race) {
            config.race_window_us = 100;
        }
        match key {
            Some(Place::Header(name)) => config.key_header = name.clone(),
            Some(Place::Body(field)) => config.key_in_body = Some(field.clone()),
            None => {}
        }
        let fake = match provider {
            Some(Calling { profile, tls_ca }) => {
                let settings = Settings::of(profile);
                let fake = match tls_ca {
                    None => FakeProvider::bind("127.0.0.1:0", settings),
                    Some(ca_file) => FakeProvider::bind_tls("127.0.0.1:0", settings, ca_file),
                }
                .map_err(|e| match e {
                    ProviderError::Tls(e) => anyhow::anyhow!("--provider-tls {e}"),
                    other => anyhow::Error::from(other),
                })
                .context("could not start the fake provider")?;
                config.provider_url = Some(fake.url());
                config.provider_timeout = PROVIDER_TIMEOUT;
                // The server trusts the CA the fake wrote, as an API under test is told to.
                config.provider_ca = fake.ca_file().map(Path::to_path_buf);
                config.provider_profile = profile
                    .name
                    .parse::<ProviderProfile>()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                Some(fake)
            }
            None => None,
        };
        let mut reference = Self::serve(config, dir, key.cloned()).await?;
        reference.provider = fake;
        Ok(reference)
    }

    /// Starts the reference server and its replica on a temporary SQLite file with its webhook
    /// consumer on: source A's `secret` and source B's `secret_b` (`whsec_` secrets), with
    /// `fault` switched on. The consumer forgets an id after `dedupe_ttl` only under the
    /// `dedupe-ttl` fault, and the `slow-sync-handler` fault works `slow_handler` long.
    pub async fn start_webhook(
        secret: &str,
        secret_b: &str,
        fault: Option<WebhookFault>,
        slow_handler: Duration,
        dedupe_ttl: Duration,
    ) -> Result<Reference> {
        let dir = tempfile::tempdir().context("could not create a temporary directory")?;
        let mut config = ServerConfig::new(DbLocation::File(dir.path().join("reference.db")));
        config.test_hooks = true;
        config.webhook_secret = Some(secret.into());
        config.webhook_secret_b = Some(secret_b.into());
        config.webhook_fault = fault;
        config.webhook_slow_handler = slow_handler;
        config.webhook_dedupe_ttl = dedupe_ttl;
        Self::serve(config, dir, None).await
    }

    /// Validates `config`, then serves it from the target and its replica.
    async fn serve(
        config: ServerConfig,
        dir: tempfile::TempDir,
        key: Option<Place>,
    ) -> Result<Reference> {
        config
            .validate()
            .context("invalid reference server configuration")?;
        let (server, base) = Server::bind(config.clone()).await?;
        let (replica, replica_base) = match Server::bind(config).await {
            Ok(bound) => bound,
            Err(e) => {
                // Its store closed before `dir` is removed, as `stop` does.
                server.stop().await?;
                return Err(e);
            }
        };
        Ok(Reference {
            base,
            replica_base,
            server: Arc::new(server),
            replica,
            key,
            provider: None,
            _dir: dir,
        })
    }

    /// Tenant `i`'s bearer token (0 = A, 1 = B), random per run.
    pub fn token(&self, i: usize) -> String {
        self.server
            .config
            .tenants
            .get(i)
            .map(|t| t.token.clone())
            .unwrap_or_default()
    }

    /// The target description of the reference server's payments operation.
    pub fn target(&self) -> TargetSpec {
        TargetSpec {
            url: format!("{}/api/payments", self.base),
            method: Some("POST".into()),
            headers: vec![
                format!("Authorization: Bearer {}", self.token(0)),
                "Content-Type: application/json".into(),
            ],
            body: Some(match &self.key {
                Some(Place::Body(field)) => {
                    let mut body = serde_json::json!({
                        "amountCents": 1250, "currency": "EUR", "reference": "{{unique}}"
                    });
                    set_field(
                        &mut body,
                        field,
                        Some(serde_json::Value::String(String::new())),
                    );
                    body.to_string()
                }
                _ => r#"{"amountCents":1250,"currency":"EUR","reference":"{{unique}}"}"#.into(),
            }),
            id_pointer: Some("/id".into()),
            count_url: Some(format!("{}/api/payments/count", self.base)),
            count_pointer: Some("/count".into()),
            tenant_b_headers: vec![format!("Authorization: Bearer {}", self.token(1))],
            hold_header: Some(HOLD_HEADER.into()),
            hold_release: Some(format!(
                "{}/test-hooks/holds/{{{{hold}}}}/release",
                self.base
            )),
            hold_at_least: Some(HOLD_AT_LEAST),
            hold_reached: Some(format!(
                "{}/test-hooks/holds/{{{{hold}}}}?wait=held",
                self.base
            )),
            key_ttl_header: Some(SHORT_KEY_TTL_HEADER.into()),
            quiet_window: Some(QUIET_WINDOW),
            invalid_body: Some(
                r#"{"amountCents":-1,"currency":"EUR","reference":"{{unique}}"}"#.into(),
            ),
            second_url: Some(format!("{}/api/payouts", self.base)),
            replicas: vec![format!("{}/api/payments", self.replica_base)],
            crash_header: Some("X-Test-Crash: 1".into()),
            lease_wait: Some(LEASE_WAIT),
            read_url: Some(format!("{}/api/payments/count", self.base)),
            store_outage_hook: Some(Arc::new(InProcessOutage(self.server.config.outage.clone()))),
            key_header: self
                .key
                .as_ref()
                .and_then(Place::header)
                .map(str::to_string),
            key_in_body: match &self.key {
                Some(Place::Body(field)) => Some(field.clone()),
                _ => None,
            },
            provider_started: self.provider.clone(),
            kill_hook: Some(Arc::new(InProcessKill(self.server.clone()))),
            ..TargetSpec::default()
        }
    }

    /// The restart hook: stop (store closed), then serve again from the same file.
    pub fn restart_hook(&self) -> Arc<dyn RestartHook> {
        Arc::new(InProcessRestart(self.server.clone()))
    }

    /// Stops both instances and waits until their stores are closed.
    pub async fn stop(self) -> Result<()> {
        self.replica.stop().await?;
        self.server.stop().await
    }
}

struct InProcessRestart(Arc<Server>);

/// Names the hook only: the server's configuration holds the tenants' tokens.
impl std::fmt::Debug for InProcessRestart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcessRestart")
    }
}

impl RestartHook for InProcessRestart {
    fn describe(&self) -> String {
        "an in-process restart of the reference server (store closed and reopened)".into()
    }

    fn restart(&self) -> BoxFuture<'_, Result<Option<String>>> {
        async move {
            self.0.stop().await?;
            self.0.start().await?;
            Ok(Some(
                "the in-process server stopped (its store closed) and started again".into(),
            ))
        }
        .boxed()
    }
}

/// Kills the in-process server as `kill -9` would a process: its requests in flight and their
/// work are dropped where they stand; the restart hook serves again from the same store.
struct InProcessKill(Arc<Server>);

impl std::fmt::Debug for InProcessKill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InProcessKill")
    }
}

impl KillHook for InProcessKill {
    fn describe(&self) -> String {
        "an in-process kill of the reference server (requests in flight dropped unanswered)".into()
    }

    fn kill(&self) -> BoxFuture<'_, Result<()>> {
        self.0.kill().boxed()
    }
}

/// The reference server's store-outage test hook, switched directly: both instances share one
/// switch, as they share one store.
#[derive(Debug)]
struct InProcessOutage(Outage);

impl OutageHook for InProcessOutage {
    fn describe(&self) -> String {
        "the reference server's store-outage test hook".into()
    }

    fn down(&self) -> BoxFuture<'_, Result<()>> {
        self.0.set_down(true);
        futures::future::ready(Ok(())).boxed()
    }

    fn up(&self) -> BoxFuture<'_, Result<()>> {
        self.0.set_down(false);
        futures::future::ready(Ok(())).boxed()
    }
}
