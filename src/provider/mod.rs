//! The fake provider of the `downstream` probes: an HTTP server on `--provider-listen` that
//! plays one payment provider's API (`--provider PROFILE`), records every call the API under
//! test makes to it and every charge it commits (the [`ledger`], the probes' meter), and does to
//! each probe's calls what that probe's [`script`] says (hold, drop, refuse) — so duplicates, a
//! lost provider answer, a lease expiry or a crash mid-call happen without a test hook in the
//! API.
//!
//! | part | holds |
//! |---|---|
//! | [`profile`] | the providers, one declaration each |
//! | [`ledger`] | calls, charges, the keys the provider remembers |
//! | [`script`] | what is done to a probe's calls, step by step |
//! | [`server`] | the HTTP side and the profile's rules |
//! | [`tls`] | `--provider-tls`: the CA made at start, the HTTPS side |
//!
//! A call is tied to the probe whose unique token it holds (anywhere in its path or body, or
//! at `--provider-correlate`): never to another probe.

pub mod ledger;
pub mod profile;
pub mod script;
pub mod server;
pub mod tls;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use ledger::{Call, Charge, Ledger};
use profile::{KeyCarrier, Profile};
use script::{Script, Scripts};

/// Why the fake provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("the fake provider needs a running async runtime")]
    NoRuntime,
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// A connection the fake turned away before any call: a TLS handshake the API's client broke
/// off (it does not trust the CA), or plain HTTP on the HTTPS port. Kept so the calibration
/// can say why nothing reached the fake.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub at: Instant,
    pub why: String,
}

/// How every probe's and stress key's unique token begins.
const TOKEN_PREFIX: &str = "idem-check-";

/// Refusals kept: enough to name the cause, bounded under load.
const KEPT_REFUSALS: usize = 64;

/// How the fake plays: the profile, where it reads keys (the profile's carrier unless
/// overridden), and where a call's token sits when it is not found anywhere in it.
#[derive(Debug, Clone)]
pub struct Settings {
    pub profile: &'static Profile,
    pub carrier: KeyCarrier,
    pub correlate: Option<String>,
}

impl Settings {
    pub fn of(profile: &'static Profile) -> Settings {
        Settings {
            profile,
            carrier: profile.carrier(),
            correlate: None,
        }
    }
}

/// One token's calls and charges at the fake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub calls: usize,
    pub charges: usize,
}

/// What the server shares between connections.
pub(crate) struct State {
    settings: Settings,
    inner: Mutex<Inner>,
    /// Bumped on every change of the ledger or of a hold, so waiters wake.
    version: watch::Sender<u64>,
}

type Shared = Arc<State>;

#[derive(Default)]
struct Inner {
    ledger: Ledger,
    scripts: Scripts,
    /// Other values that stand for a token at `--provider-correlate` (the API's resource id).
    aliases: HashMap<String, String>,
    released: HashSet<String>,
    refused: Vec<Refusal>,
}

impl Inner {
    /// The token a call holds: an armed token found in its path or body, else the value at
    /// the correlate pointer when it is a token or one's alias.
    fn attribute(
        &self,
        path: &str,
        body: &[u8],
        correlate: Option<&str>,
        profile: &Profile,
    ) -> Option<String> {
        let text = String::from_utf8_lossy(body);
        // Tokens start with `idem-check-`: the armed ones found where that stands are looked
        // up, so a stress run's thousands of tokens cost each call a few lookups, not a scan.
        let found = [path, text.as_ref()]
            .into_iter()
            .flat_map(|t| t.match_indices(TOKEN_PREFIX).map(move |(i, _)| &t[i..]))
            .flat_map(|from| {
                let end = from
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.~".contains(c)))
                    .unwrap_or(from.len());
                (TOKEN_PREFIX.len()..=end).map(move |n| &from[..n])
            })
            .filter(|candidate| self.scripts.is_armed(candidate))
            .max_by_key(|t| t.len())
            .map(str::to_string)
            .or_else(|| {
                self.scripts
                    .tokens()
                    .filter(|t| !t.starts_with(TOKEN_PREFIX))
                    .filter(|t| text.contains(t.as_str()) || path.contains(t.as_str()))
                    .max_by_key(|t| t.len())
                    .cloned()
            });
        if found.is_some() {
            return found;
        }
        let pointer = correlate?;
        let parsed = profile.parse_body(body)?;
        let value = match parsed.pointer(pointer) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return None,
        };
        self.scripts
            .tokens()
            .find(|t| value.contains(t.as_str()))
            .cloned()
            .or_else(|| self.aliases.get(&value).cloned())
    }
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Records a connection turned away before any call.
    fn refuse(&self, why: String) {
        let mut inner = self.lock();
        if inner.refused.len() < KEPT_REFUSALS {
            inner.refused.push(Refusal {
                at: Instant::now(),
                why,
            });
        }
    }

    fn charge_id(&self, n: usize) -> Option<String> {
        let inner = self.lock();
        inner
            .ledger
            .charges
            .get(n.checked_sub(1)?)
            .map(|c| c.id.clone())
    }

    /// Waits until `token` is released or `deadline` passes.
    async fn held(&self, token: Option<&str>, deadline: Instant) {
        let Some(token) = token else {
            return;
        };
        loop {
            let mut rx = self.subscribe();
            if self.lock().released.contains(token) {
                return;
            }
            if tokio::time::timeout_at(deadline.into(), rx.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

/// A running fake provider. Dropped, it stops serving.
pub struct FakeProvider {
    addr: SocketAddr,
    /// `--provider-tls`: served over HTTPS with the CA written there.
    tls: Option<tls::Tls>,
    state: Shared,
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FakeProvider({} at {})",
            self.state.settings.profile.name, self.addr
        )
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = stop.send(());
        }
    }
}

impl FakeProvider {
    /// Listens on `addr` and serves plain HTTP on the current runtime.
    pub fn bind(addr: &str, settings: Settings) -> Result<Arc<FakeProvider>, ProviderError> {
        Self::listen(addr, settings, None)
    }

    /// Listens on `addr` and serves HTTPS with a CA made now, its certificate written to
    /// `ca_file` (PEM) for the API under test to trust.
    pub fn bind_tls(
        addr: &str,
        settings: Settings,
        ca_file: &Path,
    ) -> Result<Arc<FakeProvider>, ProviderError> {
        Self::listen(addr, settings, Some(ca_file))
    }

    fn listen(
        addr: &str,
        settings: Settings,
        ca_file: Option<&Path>,
    ) -> Result<Arc<FakeProvider>, ProviderError> {
        let bind_error = |source| ProviderError::Bind {
            addr: addr.to_string(),
            source,
        };
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| ProviderError::NoRuntime)?;
        let listener = std::net::TcpListener::bind(addr).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(bind_error)?
        };
        let tls = ca_file
            .map(|path| tls::generate(tls::names(addr), path))
            .transpose()?;
        let state = Arc::new(State {
            settings,
            inner: Mutex::new(Inner::default()),
            version: watch::channel(0).0,
        });
        let (tx, rx) = oneshot::channel();
        let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
        runtime.spawn(server::serve(listener, acceptor, state.clone(), rx));
        Ok(Arc::new(FakeProvider {
            addr: local,
            tls,
            state,
            stop: Mutex::new(Some(tx)),
        }))
    }

    /// The base URL the API under test is pointed at.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Where `--provider-tls` wrote the CA certificate, when the fake serves HTTPS.
    pub fn ca_file(&self) -> Option<&Path> {
        self.tls.as_ref().map(|t| t.ca_file.as_path())
    }

    /// What the connections turned away since `since` say, one line, when there were any:
    /// how many, the first one's cause, and over HTTPS the CA file the API must trust.
    pub fn refusals_line(&self, since: Instant) -> Option<String> {
        let refused = self.refused_since(since);
        let first = refused.first()?;
        let trust = match self.ca_file() {
            Some(ca) => format!(
                ": make the API trust the CA certificate in {} (e.g. SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, or its SDK's CA setting) and call {}",
                ca.display(),
                self.url()
            ),
            None => String::new(),
        };
        Some(format!(
            "the fake provider at {} turned away {} connection{}, first: {}{trust}",
            self.url(),
            refused.len(),
            if refused.len() == 1 { "" } else { "s" },
            first.why
        ))
    }

    /// The connections turned away since `since` (handshakes broken off, plain HTTP on HTTPS).
    pub fn refused_since(&self, since: Instant) -> Vec<Refusal> {
        self.state
            .lock()
            .refused
            .iter()
            .filter(|r| r.at >= since)
            .cloned()
            .collect()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn settings(&self) -> &Settings {
        &self.state.settings
    }

    pub fn profile(&self) -> &'static Profile {
        self.state.settings.profile
    }

    /// Plays `script` on the calls that hold `token` from now on.
    pub fn arm(&self, token: &str, script: Script) {
        let mut inner = self.state.lock();
        inner.released.remove(token);
        inner.scripts.arm(token, script);
    }

    /// Calls holding `value` at the correlate pointer belong to `token` too.
    pub fn alias(&self, token: &str, value: &str) {
        self.state
            .lock()
            .aliases
            .insert(value.to_string(), token.to_string());
    }

    /// Ends the holds of `token`'s calls, and lets later ones through at once.
    pub fn release(&self, token: &str) {
        self.state.lock().released.insert(token.to_string());
        self.state.changed();
    }

    /// Stops scripting `token`'s calls: later ones are answered normally (still attributed).
    pub fn disarm(&self, token: &str) {
        let mut inner = self.state.lock();
        inner.scripts.disarm(token);
        inner.scripts.arm(token, Script::normal());
    }

    /// The calls holding `token`, in arrival order.
    pub fn calls(&self, token: &str) -> Vec<Call> {
        self.state.lock().ledger.calls_of(token)
    }

    /// The charges committed by calls holding `token`.
    pub fn charges(&self, token: &str) -> Vec<Charge> {
        self.state.lock().ledger.charges_of(token)
    }

    /// The calls since `since` that no probe's token is found in.
    pub fn unattributed_since(&self, since: Instant) -> Vec<Call> {
        self.state.lock().ledger.unattributed_since(since)
    }

    /// Writes into the ledger, by hand, a call the API under test made for `body` (attributed
    /// as a real one is, by the token in it) with `key`, answered 200, and a charge it committed
    /// when `charge`: the probes' unit tests play an API this way without a socket. Returns the
    /// charge's id.
    #[cfg(test)]
    pub(crate) fn seen_by_hand(
        &self,
        body: &[u8],
        key: Option<&str>,
        charge: bool,
    ) -> Option<String> {
        let profile = self.profile();
        let path = profile.charge.path.to_string();
        let mut inner = self.state.lock();
        let token = inner.attribute(&path, body, None, profile);
        let n = inner.ledger.calls.len() + 1;
        let id = format!("ch_by_hand_{n}");
        inner.ledger.calls.push(Call {
            n,
            at: Instant::now(),
            finished: Some(Instant::now()),
            method: "POST".into(),
            path,
            headers: Vec::new(),
            body: body.to_vec(),
            key: key.map(str::to_string),
            key_problem: None,
            operation: Some(profile::Operation::Charge),
            params: None,
            token,
            scripted: None,
            answered: ledger::Answered::Status {
                status: 200,
                headers: Vec::new(),
                body: format!(r#"{{"id":"{id}"}}"#).into_bytes(),
            },
            committed: None,
        });
        let charged = charge.then(|| {
            inner.ledger.commit(
                n,
                id.clone(),
                "acct".into(),
                profile::Operation::Charge,
                profile.params(profile::Operation::Charge, body),
            );
            id
        });
        drop(inner);
        self.state.changed();
        charged
    }

    /// Every call so far (tests).
    pub fn all_calls(&self) -> Vec<Call> {
        self.state.lock().ledger.calls.clone()
    }

    /// Waits until `done` holds for `token`'s calls, or `bound` passes; whether it held.
    pub async fn wait_for(
        &self,
        token: &str,
        bound: Duration,
        done: impl Fn(&[Call]) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let mut rx = self.state.subscribe();
            if done(&self.calls(token)) {
                return true;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return done(&self.calls(token));
            }
        }
    }

    /// Per token, how many calls held it and how many charges they committed, over the whole
    /// ledger in one pass: a stress run's count.
    pub fn tally(&self) -> HashMap<String, Tally> {
        let inner = self.state.lock();
        let mut tally: HashMap<String, Tally> = HashMap::new();
        for call in &inner.ledger.calls {
            if let Some(t) = &call.token {
                tally.entry(t.clone()).or_default().calls += 1;
            }
        }
        for charge in &inner.ledger.charges {
            if let Some(t) = &charge.token {
                tally.entry(t.clone()).or_default().charges += 1;
            }
        }
        tally
    }

    /// How many calls reached the fake in all, and how many of them held no armed token.
    pub fn call_counts(&self) -> (usize, usize) {
        let inner = self.state.lock();
        let calls = &inner.ledger.calls;
        (
            calls.len(),
            calls.iter().filter(|c| c.token.is_none()).count(),
        )
    }

    /// Waits until every call is answered and none arrived for `quiet`, within `bound`: a
    /// stress run counts after it. Whether it settled.
    pub async fn settle_all(&self, quiet: Duration, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let mut rx = self.state.subscribe();
            let busy = self.state.lock().ledger.calls.iter().any(|c| !c.finished());
            if !busy {
                match tokio::time::timeout(quiet, rx.changed()).await {
                    Err(_) => return true,
                    Ok(_) if tokio::time::Instant::now() >= deadline => return false,
                    Ok(_) => continue,
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return false;
            }
        }
    }

    /// Waits until every call of `token` is answered and none arrived for `quiet`, within
    /// `bound`: what is counted after it is settled. Whether it settled.
    pub async fn settle(&self, token: &str, quiet: Duration, bound: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let mut rx = self.state.subscribe();
            let calls = self.calls(token);
            let busy = calls.iter().any(|c| !c.finished());
            if !busy {
                match tokio::time::timeout(quiet, rx.changed()).await {
                    Err(_) => return true,
                    Ok(_) if tokio::time::Instant::now() >= deadline => return false,
                    Ok(_) => continue,
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests;
