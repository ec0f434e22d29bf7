//! What a server instance is told at start: where its store lives, who its tenants are, its
//! timing policy, and which single fault (if any) it should exhibit.
//!
//! The binary builds a [`Config`] from flags; the checker builds one directly to run the server
//! in-process. Both go through [`Config::validate`], so the two paths cannot disagree about what
//! a valid configuration is.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
pub use crate::faults::{Fault, UnknownFault, UnknownWebhookFault, WebhookFault};
use crate::provider::{ProviderConfigError, ProviderProfile};

/// Where the store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbLocation {
    /// A PostgreSQL database (`postgres://USER@HOST:PORT/DB`), shared by any number of
    /// replicas: the claim is one atomic statement, not an in-process lock.
    Postgres(String),
    /// A database file (WAL mode). Several server processes may share one file: the claim is a
    /// SQLite transaction, not an in-process lock.
    File(PathBuf),
    /// A private in-memory database, lost when the server stops. Only meaningful with
    /// [`Fault::MemoryStore`], because it breaks restart persistence by design.
    Memory,
}

/// A tenant and the bearer token that authenticates it. The tenant is always derived from the
/// token, never from a header the client names, so one client cannot read another's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// The tenant's name: part of every idempotency scope and every payment row.
    pub name: String,
    /// The secret sent as `Authorization: Bearer <token>`.
    pub token: String,
}

impl DbLocation {
    /// `postgres://…` or `postgresql://…` selects PostgreSQL, `:memory:` an in-memory SQLite
    /// database, anything else is a SQLite file path.
    pub fn parse(s: &str) -> Self {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            DbLocation::Postgres(s.to_owned())
        } else if s == ":memory:" {
            DbLocation::Memory
        } else {
            DbLocation::File(PathBuf::from(s))
        }
    }
}

impl fmt::Display for DbLocation {
    /// Without any password a PostgreSQL URL carries, so the location can be logged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbLocation::Postgres(url) => f.write_str(&redact_url(url)),
            DbLocation::File(path) => write!(f, "{}", path.display()),
            DbLocation::Memory => f.write_str(":memory:"),
        }
    }
}

/// `url` with the password of its user info (if any) replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info
                .split_once(':')
                .map_or(user_info, |(user, _)| user);
            let masked = if user == user_info { "" } else { ":***" };
            format!("{scheme}://{user}{masked}@{host}{}", &rest[authority_end..])
        }
        None => url.to_owned(),
    }
}

impl Tenant {
    /// A tenant with its token.
    pub fn new(name: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            token: token.into(),
        }
    }
}

/// Everything a server instance needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where records and payments are stored.
    pub db: DbLocation,
    /// Who may call the API; at least one.
    pub tenants: Vec<Tenant>,
    /// How long a completed key is remembered (and replayed) after completion. Published on
    /// every idempotent response as `Idempotency-Key-Expires-At` (draft §2.3).
    pub key_ttl: Duration,
    /// How long a claim stays valid without a heartbeat. An owner renews it every `lease / 3`
    /// while it works, so only a dead owner loses its claim.
    pub lease: Duration,
    /// Honour `X-Test-Delay-Ms` and `X-Test-Crash`. Off by default: a client must not be able to
    /// make a production-like server hold or fail requests.
    pub test_hooks: bool,
    /// The one deliberate defect this instance exhibits, if any (requires `test_hooks`).
    pub fault: Option<Fault>,
    /// For [`Fault::Race`]: microseconds between the unlocked lookup and the insert.
    pub race_window_us: u64,
    /// Batch concurrent store writes into one transaction and one fsync. Off means one
    /// transaction per operation, which exists to show what group commit buys.
    pub group_commit: bool,
    /// The time source for leases, expiry and `createdAt`.
    pub clock: Arc<dyn Clock>,
    /// PostgreSQL only: how many connections this instance keeps. Each is shared by every
    /// request (statements are pipelined), and their number is how many commits can
    /// share one WAL flush; replicas × this must stay below the server's `max_connections`.
    pub db_pool: usize,
    /// Header-read, body-read and idle timeouts.
    pub limits: crate::limits::Limits,
    /// The test hook that takes the idempotency store down (with `test_hooks`). Clones share
    /// it, so every instance built from one config (replicas of one store) goes down together.
    pub outage: Outage,
    /// The header that carries the key, as the API description declares it:
    /// [`DEFAULT_KEY_HEADER`], or the name an API uses instead (`X-Idempotency-Key`), so a
    /// checker set up for that name has a correct server to compare with. Compared without
    /// regard to case, as HTTP does.
    pub key_header: String,
    /// The key travels in the JSON body at this pointer (`/idempotency_key`, Square's layout)
    /// instead of `key_header`: an opaque token (a non-empty JSON string, no control
    /// characters), taken out of the body before the payload is validated and fingerprinted,
    /// so a retry with another key is still the same payload. The faults about the header's
    /// RFC 8941 syntax and its lines cannot apply and change nothing.
    pub key_in_body: Option<String>,
    /// The webhook consumer's secret (`whsec_<base64>`): `POST /webhooks/{scheme}` serves only
    /// with one. How each scheme turns it into an HMAC key is in [`crate::WebhookScheme`].
    pub webhook_secret: Option<String>,
    /// A second source's secret: a delivery it verifies belongs to source `b`, and event ids
    /// are deduplicated per source.
    pub webhook_secret_b: Option<String>,
    /// The webhook consumer's one deliberate defect, if any (requires `test_hooks`).
    pub webhook_fault: Option<WebhookFault>,
    /// Under [`WebhookFault::DedupeTtl`]: how long a processed event id is remembered.
    pub webhook_dedupe_ttl: Duration,
    /// Under [`WebhookFault::SlowSyncHandler`]: how long each event's work takes before the
    /// answer. Longer than every scheme's acknowledgement budget by default.
    pub webhook_slow_handler: Duration,
    /// The payment provider's base URL (`--provider-url`, http or https): with one, a payment
    /// is charged there and a payout paid out there (see [`crate::provider`]); without one,
    /// nothing is called and the `provider_*` settings are unused.
    pub provider_url: Option<String>,
    /// Which provider's API the base URL serves (`--provider-profile`).
    pub provider_profile: ProviderProfile,
    /// One provider attempt's budget, from sending to the whole answer (`--provider-timeout-ms`).
    pub provider_timeout: Duration,
    /// Attempts per client request before its outcome counts as unknown
    /// (`--provider-attempts`).
    pub provider_attempts: u32,
    /// A PEM file of extra root certificates for an https provider (`--provider-ca`).
    pub provider_ca: Option<PathBuf>,
    /// How long a webhook claim holds without its owner completing or releasing it: a delivery
    /// to a consumer that died mid-event waits this long before it can apply the event (60 s by
    /// default). Shorter only for tests that kill the consumer over and over.
    pub webhook_lease: Duration,
}

/// The key header of the draft, and of this server unless told otherwise.
pub const DEFAULT_KEY_HEADER: &str = "Idempotency-Key";

/// A simulated outage of the idempotency store: while it is down, no key can be claimed, so
/// every keyed request is answered 503 (the algorithm sees the store fail, whichever store it
/// is). Switched by `POST /test-hooks/store/down` and `/up` with `--test-hooks`, or directly by
/// a process that runs the server in-process.
#[derive(Debug, Clone, Default)]
pub struct Outage(Arc<AtomicBool>);

impl Outage {
    /// Takes the store down (`true`) or brings it back (`false`).
    pub fn set_down(&self, down: bool) {
        self.0.store(down, Ordering::SeqCst);
    }

    /// Whether the store is down.
    pub fn is_down(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Config {
    /// The defaults: 24 h key TTL, 30 s lease, group commit on, no hooks, no fault, the system
    /// clock, and two demo tenants (`tenant-a`/`token-a`, `tenant-b`/`token-b`) so that the
    /// tenant-isolation probe has someone to isolate.
    pub fn new(db: DbLocation) -> Self {
        Self {
            db,
            tenants: demo_tenants(),
            key_ttl: Duration::from_secs(24 * 60 * 60),
            lease: Duration::from_secs(30),
            test_hooks: false,
            fault: None,
            race_window_us: 0,
            group_commit: true,
            limits: crate::limits::Limits::default(),
            clock: Arc::new(SystemClock),
            db_pool: 16,
            outage: Outage::default(),
            key_header: DEFAULT_KEY_HEADER.to_owned(),
            key_in_body: None,
            webhook_secret: None,
            webhook_secret_b: None,
            webhook_fault: None,
            webhook_dedupe_ttl: Duration::from_secs(5 * 60),
            webhook_slow_handler: Duration::from_secs(16),
            provider_url: None,
            provider_profile: ProviderProfile::default(),
            provider_timeout: Duration::from_secs(1),
            provider_attempts: 3,
            provider_ca: None,
            webhook_lease: DEFAULT_WEBHOOK_LEASE,
        }
    }

    /// Rejects combinations that would make the server lie about what it is: a fault without
    /// test hooks, an in-memory store without the fault that admits it, timing that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.fault.is_some() && !self.test_hooks {
            return Err(ConfigError::FaultWithoutTestHooks);
        }
        if self.db == DbLocation::Memory && self.fault != Some(Fault::MemoryStore) {
            return Err(ConfigError::MemoryWithoutFault);
        }
        if matches!(self.db, DbLocation::Postgres(_)) && self.fault == Some(Fault::MemoryStore) {
            return Err(ConfigError::MemoryStoreOnPostgres);
        }
        if self.db_pool == 0 {
            return Err(ConfigError::NoConnections);
        }
        if self.tenants.is_empty() {
            return Err(ConfigError::NoTenants);
        }
        for (i, tenant) in self.tenants.iter().enumerate() {
            if tenant.name.is_empty() || tenant.token.is_empty() {
                return Err(ConfigError::EmptyTenant);
            }
            if let Some(other) = self.tenants[..i].iter().find(|t| t.token == tenant.token) {
                return Err(ConfigError::SharedToken(
                    other.name.clone(),
                    tenant.name.clone(),
                ));
            }
            if self.tenants[..i].iter().any(|t| t.name == tenant.name) {
                return Err(ConfigError::DuplicateTenant(tenant.name.clone()));
            }
        }
        if self.lease < MIN_LEASE {
            return Err(ConfigError::LeaseTooShort(self.lease));
        }
        if self.key_ttl < self.lease {
            return Err(ConfigError::TtlShorterThanLease {
                ttl: self.key_ttl,
                lease: self.lease,
            });
        }
        if axum::http::HeaderName::from_bytes(self.key_header.as_bytes()).is_err() {
            return Err(ConfigError::InvalidKeyHeader(self.key_header.clone()));
        }
        if let Some(pointer) = self
            .key_in_body
            .as_ref()
            .filter(|p| !p.starts_with('/') || p.len() < 2)
        {
            return Err(ConfigError::InvalidKeyPointer(pointer.clone()));
        }
        if self.fault == Some(Fault::KeyNameSpellings)
            && !self.key_header.eq_ignore_ascii_case(DEFAULT_KEY_HEADER)
        {
            return Err(ConfigError::SpellingsOfAnotherKeyHeader(
                self.key_header.clone(),
            ));
        }
        self.validate_webhooks()?;
        crate::provider::validate_settings(
            self.provider_url.as_deref(),
            self.provider_attempts,
            self.provider_timeout,
            self.fault.filter(|f| f.needs_provider()).map(Fault::name),
        )?;
        Ok(())
    }

    /// The webhook consumer's part of [`Config::validate`].
    fn validate_webhooks(&self) -> Result<(), ConfigError> {
        for (flag, secret) in [
            ("--webhook-secret", &self.webhook_secret),
            ("--webhook-secret-b", &self.webhook_secret_b),
        ] {
            if let Some(secret) = secret {
                if decode_whsec(secret).is_none() {
                    return Err(ConfigError::WebhookSecretFormat(flag));
                }
            }
        }
        if self.webhook_secret_b.is_some() {
            if self.webhook_secret.is_none() {
                return Err(ConfigError::WebhookSecretBAlone);
            }
            if self.webhook_secret_b == self.webhook_secret {
                return Err(ConfigError::WebhookSecretsEqual);
            }
        }
        if self.webhook_fault.is_some() && !self.test_hooks {
            return Err(ConfigError::FaultWithoutTestHooks);
        }
        if self.webhook_fault.is_some() && self.webhook_secret.is_none() {
            return Err(ConfigError::WebhookFaultWithoutSecret);
        }
        if self.webhook_lease < MIN_LEASE {
            return Err(ConfigError::WebhookLeaseTooShort(self.webhook_lease));
        }
        if self.webhook_slow_handler > MAX_SLOW_HANDLER {
            return Err(ConfigError::WebhookSlowHandler(self.webhook_slow_handler));
        }
        Ok(())
    }
}

/// How long a webhook claim holds without its owner completing or releasing it, unless
/// `--webhook-lease` says otherwise. There is no heartbeat: it is longer than anything a
/// delivery waits for here (a named hold ends after 10 s, the `slow-sync-handler` fault sleeps
/// 16 s by default), and a sender retries a dead consumer's event minutes later at the earliest.
pub const DEFAULT_WEBHOOK_LEASE: Duration = Duration::from_secs(60);

/// The longest `webhook_slow_handler`: well within a webhook claim's lease, so the slow work
/// keeps its claim.
const MAX_SLOW_HANDLER: Duration = Duration::from_secs(40);

/// The shortest lease accepted: heartbeats run every `lease / 3`, and a lease shorter than this
/// would turn heartbeats into a busy loop.
const MIN_LEASE: Duration = Duration::from_millis(30);

fn demo_tenants() -> Vec<Tenant> {
    vec![
        Tenant::new("tenant-a", "token-a"),
        Tenant::new("tenant-b", "token-b"),
    ]
}

/// Why a [`Config`] was rejected; each message says how to fix it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// Faults exist to prove the checker can fail; they must never be switched on by accident.
    #[error("a fault requires test hooks (add --test-hooks)")]
    FaultWithoutTestHooks,
    /// Memory storage loses records on restart, which is itself a fault.
    #[error("an in-memory database is only allowed with --fault memory-store (use --db PATH)")]
    MemoryWithoutFault,
    /// The `memory-store` fault keeps records in a SQLite connection's private memory.
    #[error("--fault memory-store needs a SQLite database (--db PATH), not PostgreSQL")]
    MemoryStoreOnPostgres,
    /// A PostgreSQL store needs at least one connection.
    #[error("the PostgreSQL pool needs at least one connection (--db-pool N)")]
    NoConnections,
    /// Nobody could authenticate.
    #[error("at least one tenant is required (--token TENANT=SECRET)")]
    NoTenants,
    /// A tenant needs both a name and a secret.
    #[error("a tenant name and its token must both be non-empty (--token TENANT=SECRET)")]
    EmptyTenant,
    /// A token must identify exactly one tenant.
    #[error("tenants {0:?} and {1:?} share a token; each tenant needs its own secret")]
    SharedToken(String, String),
    /// Tenant names are scopes and must be unique.
    #[error("tenant {0:?} is listed twice")]
    DuplicateTenant(String),
    /// Heartbeats run every `lease / 3`; a lease under 30ms would turn them into a busy loop.
    #[error("lease {0:?} is too short; use at least 30ms")]
    LeaseTooShort(Duration),
    /// A completed key must outlive the claim that produced it.
    #[error("key TTL {ttl:?} is shorter than the lease {lease:?}; raise --key-ttl")]
    TtlShorterThanLease {
        /// The configured TTL.
        ttl: Duration,
        /// The configured lease.
        lease: Duration,
    },
    /// The key is read from this header, so it must be one.
    #[error("--key-header {0:?} is not a valid header name")]
    InvalidKeyHeader(String),
    /// The key is read from the body field this JSON pointer names.
    #[error("--key-in-body {0:?} is not a JSON pointer to a field (e.g. /idempotency_key)")]
    InvalidKeyPointer(String),
    /// The fault renames the spellings of `Idempotency-Key` it does not know.
    #[error(
        "the key-name-spellings fault hides unusual spellings of Idempotency-Key, which is not \
         the key header here ({0:?}): leave out --key-header"
    )]
    SpellingsOfAnotherKeyHeader(String),
    /// Every scheme's key is derived from a `whsec_` secret.
    #[error("{0} must be whsec_ followed by base64 (e.g. whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw)")]
    WebhookSecretFormat(&'static str),
    /// Source B is the second source.
    #[error("--webhook-secret-b needs --webhook-secret")]
    WebhookSecretBAlone,
    /// Two sources with one secret cannot be told apart.
    #[error("--webhook-secret-b must differ from --webhook-secret")]
    WebhookSecretsEqual,
    /// A webhook fault changes the consumer, which runs only with a secret.
    #[error("--webhook-fault needs the webhook consumer (add --webhook-secret)")]
    WebhookFaultWithoutSecret,
    /// The slow work must finish within the claim's lease.
    #[error("--webhook-slow-handler {0:?} is too long; use at most 40s")]
    WebhookSlowHandler(Duration),
    /// The provider settings do not fit.
    #[error(transparent)]
    Provider(#[from] ProviderConfigError),
    /// A claim's lease is compared with the clock in milliseconds.
    #[error("--webhook-lease {0:?} is too short; use at least 30ms")]
    WebhookLeaseTooShort(Duration),
}

/// The key bytes of a webhook secret, `whsec_` followed by base64, or `None` if it is not one.
/// Standard Webhooks and Svix sign with these bytes; the other schemes with the whole string.
pub(crate) fn decode_whsec(secret: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let encoded = secret.strip_prefix("whsec_")?;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .filter(|key| !key.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_hide_passwords() {
        let pg = DbLocation::parse("postgres://app:s3cret@127.0.0.1:5432/payments");
        assert_eq!(pg.to_string(), "postgres://app:***@127.0.0.1:5432/payments");
        assert_eq!(
            DbLocation::parse("postgresql://app@db/x").to_string(),
            "postgresql://app@db/x"
        );
        assert_eq!(DbLocation::parse(":memory:"), DbLocation::Memory);
        assert_eq!(
            DbLocation::parse("x.db"),
            DbLocation::File(PathBuf::from("x.db"))
        );
        let mut config = Config::new(pg);
        config.test_hooks = true;
        config.fault = Some(Fault::MemoryStore);
        assert_eq!(config.validate(), Err(ConfigError::MemoryStoreOnPostgres));
    }

    /// Another key header is any valid header name, but not under the fault that models the
    /// spellings of `Idempotency-Key`.
    #[test]
    fn the_key_header_is_a_header_name() {
        let mut config = Config::new(DbLocation::Memory);
        config.test_hooks = true;
        config.fault = Some(Fault::MemoryStore);
        config.key_header = "X-Idempotency-Key".into();
        assert_eq!(config.validate(), Ok(()));
        config.key_header = "no spaces".into();
        assert_eq!(
            config.validate(),
            Err(ConfigError::InvalidKeyHeader("no spaces".into()))
        );
        config.db = DbLocation::File(PathBuf::from("x.db"));
        config.fault = Some(Fault::KeyNameSpellings);
        config.key_header = "idempotency-KEY".into();
        assert_eq!(config.validate(), Ok(()));
        config.key_header = "X-Idempotency-Key".into();
        assert_eq!(
            config.validate(),
            Err(ConfigError::SpellingsOfAnotherKeyHeader(
                "X-Idempotency-Key".into()
            ))
        );
    }

    #[test]
    fn validate_rejects_inconsistent_configs() {
        let mut config = Config::new(DbLocation::Memory);
        assert_eq!(config.validate(), Err(ConfigError::MemoryWithoutFault));
        config.fault = Some(Fault::MemoryStore);
        assert_eq!(config.validate(), Err(ConfigError::FaultWithoutTestHooks));
        config.test_hooks = true;
        assert_eq!(config.validate(), Ok(()));
        config.tenants.push(Tenant::new("tenant-c", "token-a"));
        assert!(matches!(
            config.validate(),
            Err(ConfigError::SharedToken(..))
        ));
        let mut config = Config::new(DbLocation::File("x.db".into()));
        config.lease = Duration::from_millis(1);
        assert!(matches!(
            config.validate(),
            Err(ConfigError::LeaseTooShort(_))
        ));
        config.lease = Duration::from_secs(30);
        config.key_ttl = Duration::from_secs(1);
        assert!(matches!(
            config.validate(),
            Err(ConfigError::TtlShorterThanLease { .. })
        ));
    }
}
