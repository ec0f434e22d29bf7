//! The validated run configuration: what probes read, with every default decided here.
//!
//! The binary lays the flags over a target file ([`crate::target`]) or an API description's
//! operation into one [`TargetSpec`] that remembers where each value came from; [`Config::build`] validates it
//! with the run options and their loaded suite, each error naming the flag or pointing at the
//! file's line. Probes never see raw options; which probes run is [`crate::probes::select`]'s
//! business, not the config's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use futures::future::BoxFuture;

use crate::auth_cmd::{self, AuthError, Credential};
use crate::carrier::{KeyCarrier, KeyShape, Place, Syntax};
use crate::diagnostic::{FileError, Input, Origins};
pub use crate::effects::Counter;
use crate::http::exchange::Header;
use crate::http::Connector;
use crate::inputs;
use crate::keys::KeyForm;
use crate::redact::{Masked, Secrets};
use crate::suite::Suite;

mod downstream;
mod operation;
mod parse;
pub use crate::target::{KillHook, OutageHook, TargetSpec};
pub use downstream::{Downstream, DEFAULT_REF_POINTER};
pub use operation::{BodyTemplate, InvalidBody, Operation};
pub use parse::parse_header;
use parse::{
    add_auth_header, check_pointer, is_token_byte, key_carrier, masked, parse_headers, parse_url,
};

/// How a target is made to fail inside the server after claiming a key (`wedged-key-recovery`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashHook {
    /// Added to the first attempt only.
    pub header: Header,
    /// How long retries may keep getting a conflict before the key counts as wedged: longer
    /// than the target's lease, or the probe cannot tell a wedge from a lease still running.
    pub lease_wait: Duration,
}

/// How long `wedged-key-recovery` waits for a crashed claim's lease when `--lease-wait` is not
/// given: more than a typical 30 s lease.
pub const DEFAULT_LEASE_WAIT: Duration = Duration::from_secs(60);

/// The longest `--lease-wait` accepted: the probe must still finish inside the runner's
/// per-probe limit.
pub const MAX_LEASE_WAIT: Duration = Duration::from_secs(150);

/// Restarts the target and waits until it is ready again; used by `restart-persistence`.
pub trait RestartHook: Send + Sync + std::fmt::Debug {
    /// One line for the evidence ("in-process restart of the reference server").
    fn describe(&self) -> String;
    /// Restarts, and says what the hook itself saw of the target going down ("the ready URL
    /// failed 3 times"), if anything: a hook that returns is no proof that anything restarted.
    fn restart(&self) -> BoxFuture<'_, Result<Option<String>>>;
}

/// The user's store-outage hook: one shell command takes the store down, another brings it
/// back (each shown masked, see [`Masked`]).
#[derive(Debug, Clone)]
pub struct CommandOutage {
    pub down: Masked,
    pub up: Masked,
    /// How long each command may take.
    pub timeout: Duration,
}

/// The longest `--key-ttl` accepted: `key-expiry` waits that long, and must still finish inside
/// the runner's per-probe limit.
pub const MAX_KEY_TTL: Duration = Duration::from_secs(150);

/// The user's restart hook: a shell command (shown masked, see [`Masked`]), then polling a
/// readiness URL.
#[derive(Debug, Clone)]
pub struct CommandRestart {
    pub command: Masked,
    pub ready_url: Option<url::Url>,
    pub timeout: Duration,
    /// How the readiness URL is reached: as the run reaches the target.
    pub connector: Arc<Connector>,
}

/// The user's kill: a shell command (shown masked, see [`Masked`]) that ends the target at
/// once; the restart hook brings it back.
#[derive(Debug, Clone)]
pub struct CommandKill {
    pub command: Masked,
    pub timeout: Duration,
}

/// Options that shape the run rather than describe the target.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The suite (`--suite`, loaded by [`crate::catalog::load_suite`]).
    pub suite: Suite,
    pub strict: bool,
    pub timeout: Duration,
    /// The report's label (`--label`); the target's host by default.
    pub label: Option<String>,
    /// The target is the bundled reference server.
    pub reference: bool,
    /// Bursts may use the dedicated release threads (see [`crate::http::release`]).
    pub release_threads: bool,
    /// How keys are written (`--key-form`).
    pub key_form: KeyForm,
    /// Response body bytes kept per exchange ([`crate::report::format::kept_body_bytes`]).
    pub kept_body: usize,
}

impl RunOptions {
    /// The options of a run with `suite` and every other flag at its default: not strict, a
    /// 10 s timeout, the target's host as label, release threads, the suite's key form. The
    /// suite is loaded by the caller, where a suite that cannot be read is the user's error.
    pub fn new(suite: Suite) -> Self {
        RunOptions {
            suite,
            strict: false,
            timeout: Duration::from_secs(10),
            label: None,
            reference: false,
            release_threads: true,
            key_form: KeyForm::Auto,
            kept_body: crate::report::format::kept_body_bytes(None),
        }
    }
}

/// The validated configuration probes run with.
#[derive(Clone)]
pub struct Config {
    pub operation: Operation,
    pub id_pointer: Option<String>,
    pub counter: Option<Counter>,
    /// Tenant B's header lines (replacing A's same-named ones); `None` without a second tenant.
    pub tenant_b: Option<Vec<Header>>,
    /// Added to an original request to hold it in flight on the server.
    pub hold_header: Option<Header>,
    /// Ends a hold early; `None` when holds last as long as the server makes them.
    pub hold_release: Option<HoldRelease>,
    /// Added to `key-expiry`'s original to shorten its key's lifetime.
    pub key_ttl_header: Option<Header>,
    /// How long the basis must stay unchanged after requests a probe left unfinished.
    pub quiet_window: Duration,
    pub restart: Option<Arc<dyn RestartHook>>,
    /// Kills the target mid-request (`--crash-cmd`); only with a restart hook to bring it back.
    pub kill: Option<Arc<dyn KillHook>>,
    /// `None` when neither `--invalid-body` nor a JSON object template provides one.
    pub invalid_body: Option<InvalidBody>,
    /// A second operation taking the same method and payload; `None` without `--second-url`.
    pub second_url: Option<url::Url>,
    /// The operation on other replicas; empty without `--replica`.
    pub replicas: Vec<url::Url>,
    pub crash: Option<CrashHook>,
    /// The API's read operation (GET); `None` without `--read-url`.
    pub read_url: Option<url::Url>,
    /// The key lifetime given by `--key-ttl`.
    pub key_ttl: Option<Duration>,
    /// Takes the idempotency store down and back; `None` without `--store-down-cmd`.
    pub store_outage: Option<Arc<dyn OutageHook>>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Response bodies are kept up to this many bytes.
    pub max_body: usize,
    pub strict: bool,
    pub suite: Suite,
    /// How keys are written: the suite's form, or `--key-form` (see [`KeyForm`]).
    pub key_form: KeyForm,
    /// Where the key travels, its syntax and the keys the API accepts; the header is the
    /// suite's (or `--key-header`).
    pub key_carrier: KeyCarrier,
    /// Everything to mask in reports, named by role for reproduce lines.
    pub secrets: Secrets,
    /// The report's label.
    pub label: String,
    /// The target is the bundled reference server.
    pub reference: bool,
    /// See [`TargetSpec::http2`].
    pub http2: bool,
    /// See [`RunOptions::release_threads`].
    pub release_threads: bool,
    /// See [`TargetSpec::target_file`].
    pub target_file: Option<String>,
    /// See [`TargetSpec::notes`]: what a report of the run shows beside its verdicts.
    pub notes: Vec<String>,
    /// How every connection of the run is opened: [`TargetSpec::tls`] and [`TargetSpec::net`]
    /// made ready, shared by all the run's HTTP clients.
    pub connector: Arc<Connector>,
    /// `--auth-cmd`'s credential, fetched again when the API answers 401.
    pub auth: Option<Arc<Credential>>,
    /// The fake provider of the `downstream` probes; `None` without `--provider-listen`.
    pub provider: Option<Downstream>,
}

impl Config {
    /// Validates a target description and run options into a config. Each error names the
    /// flag or the target-file key the value came from (see [`TargetSpec::origins`]), and is
    /// an input-file error located at its line when the file said it. An error quotes the
    /// value it refuses, which can hold a secret the file took from the environment (`${VAR}`)
    /// or a credential: it is masked like every other output.
    pub fn build(
        target: TargetSpec,
        opts: &RunOptions,
        restart: Option<Arc<dyn RestartHook>>,
    ) -> Result<Config> {
        let key_header = target.key_header.as_deref().unwrap_or(&opts.suite.header);
        let secrets = target.secrets(key_header);
        Self::validate(target, opts, restart).map_err(|e| masked(e, &secrets))
    }

    fn validate(
        mut target: TargetSpec,
        opts: &RunOptions,
        restart: Option<Arc<dyn RestartHook>>,
    ) -> Result<Config> {
        let connector = Arc::new(Connector::new(&target.tls, &target.net)?);
        let auth = match target.auth_cmd.clone() {
            Some(cmd) => Some(add_auth_header(&mut target, &cmd)?),
            None => None,
        };
        let at = |flag| target.origins.input(flag);
        let url = parse_url(&target.url, at(TARGET_URL))?;
        let method = target
            .method
            .clone()
            .unwrap_or_else(|| "POST".into())
            .to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(at(inputs::METHOD.flag).error(format!("{method:?} is not an HTTP method")));
        }
        let headers = parse_headers(&target.headers, inputs::HEADERS.flag, &target.origins)?;
        let tenant_b = if target.tenant_b_headers.is_empty() {
            None
        } else {
            Some(parse_headers(
                &target.tenant_b_headers,
                inputs::TENANT_B_HEADER.flag,
                &target.origins,
            )?)
        };
        let hold_header = target
            .hold_header
            .as_deref()
            .map(|h| parse_header(h, at(inputs::HOLD_HEADER.flag)))
            .transpose()?;
        let hold_release = hold_release(&target, hold_header.as_ref())?;
        let quiet_window = target.quiet_window.unwrap_or(DEFAULT_QUIET_WINDOW);
        if quiet_window.is_zero() || quiet_window > MAX_QUIET_WINDOW {
            let input = at(inputs::QUIET_WINDOW.flag);
            return Err(input.error(format!(
                "{} {} must be more than 0 and at most {} (each probe that left a request unfinished waits it out)",
                input.name,
                humantime::format_duration(quiet_window),
                humantime::format_duration(MAX_QUIET_WINDOW)
            )));
        }
        let key_ttl_header = target
            .key_ttl_header
            .as_deref()
            .map(|h| parse_header(h, at(inputs::KEY_TTL_HEADER.flag)))
            .transpose()?;
        let mut suite = opts.suite.clone();
        if let Some(h) = &target.key_header {
            if h.is_empty() || !h.bytes().all(is_token_byte) {
                return Err(at(inputs::KEY_HEADER.flag)
                    .error(format!("key header {h:?} is not a valid header name")));
            }
            suite.header.clone_from(h);
        }
        let key_carrier = key_carrier(&target, &suite.header)?;
        if key_carrier.syntax == Syntax::Token {
            // A token is sent as it is: no run of it starts from, or falls back to, Strings.
            suite.key_syntax = crate::keys::KeySyntax::Bare;
        }
        // Known before the hooks, whose commands are shown masked.
        let secrets = target.secrets(&suite.header);
        let counter = match (&target.count_url, &target.count_cmd) {
            (Some(_), Some(_)) => {
                let (u, c) = (at(inputs::COUNT_URL.flag), at(inputs::COUNT_CMD.flag));
                return Err(c.error(format!("give either {} or {}, not both", u.name, c.name)));
            }
            (Some(u), None) => Some(Counter::Url {
                url: parse_url(u, at(inputs::COUNT_URL.flag))?,
                pointer: check_pointer(
                    target.count_pointer.as_deref().unwrap_or("/count"),
                    at(inputs::COUNT_POINTER.flag),
                )?,
            }),
            (None, Some(cmd)) => Some(Counter::Command(Masked::new(cmd, &secrets))),
            (None, None) => {
                if target.count_pointer.is_some() {
                    return Err(needs(
                        at(inputs::COUNT_POINTER.flag),
                        at(inputs::COUNT_URL.flag),
                    ));
                }
                None
            }
        };
        let id_pointer = target
            .id_pointer
            .as_deref()
            .map(|p| check_pointer(p, at(inputs::ID_POINTER.flag)))
            .transpose()?;
        let restart = match (restart, &target.restart_cmd) {
            (Some(hook), _) => Some(hook),
            (None, Some(cmd)) => Some(Arc::new(CommandRestart {
                command: Masked::new(cmd, &secrets),
                ready_url: target
                    .ready_url
                    .as_deref()
                    .map(|u| parse_url(u, at(inputs::READY_URL.flag)))
                    .transpose()?,
                timeout: target.restart_timeout.unwrap_or(Duration::from_secs(30)),
                connector: connector.clone(),
            }) as Arc<dyn RestartHook>),
            (None, None) => {
                if target.ready_url.is_some() {
                    return Err(needs(
                        at(inputs::READY_URL.flag),
                        at(inputs::RESTART_CMD.flag),
                    ));
                }
                None
            }
        };
        let kill = match (target.kill_hook.clone(), &target.crash_cmd) {
            (Some(hook), _) => Some(hook),
            (None, Some(_)) if restart.is_none() => {
                return Err(needs(
                    at(inputs::CRASH_CMD.flag),
                    at(inputs::RESTART_CMD.flag),
                ))
            }
            (None, Some(cmd)) => Some(Arc::new(CommandKill {
                command: Masked::new(cmd, &secrets),
                timeout: target.restart_timeout.unwrap_or(Duration::from_secs(30)),
            }) as Arc<dyn KillHook>),
            (None, None) => None,
        };
        let body = BodyTemplate::new(target.body.clone().unwrap_or_default())
            .keeping_key(&key_carrier.place);
        let invalid_body = match &target.invalid_body {
            Some(text) => Some(InvalidBody {
                template: BodyTemplate::new(text.clone()).keeping_key(&key_carrier.place),
                origin: inputs::INVALID_BODY.flag,
            }),
            None => body.invalid_variant().map(|template| InvalidBody {
                template,
                origin: "derived from the body template (its first field given the wrong type)",
            }),
        };
        let second_url = target
            .second_url
            .as_deref()
            .map(|u| parse_url(u, at(inputs::SECOND_URL.flag)))
            .transpose()?;
        if second_url.as_ref() == Some(&url) {
            let input = at(inputs::SECOND_URL.flag);
            return Err(input.error(format!(
                "{} must name another operation than the target URL",
                input.name
            )));
        }
        let mut replicas = Vec::new();
        for (i, u) in target.replicas.iter().enumerate() {
            let input = target.origins.item(inputs::REPLICA.flag, i);
            let replica = parse_url(u, input)?;
            if replica == url {
                return Err(input.error(format!(
                    "{} {u} is the target URL itself; name the other replicas",
                    input.name
                )));
            }
            replicas.push(replica);
        }
        let crash = match (&target.crash_header, target.lease_wait) {
            (Some(h), wait) => {
                let lease_wait = wait.unwrap_or(DEFAULT_LEASE_WAIT);
                if lease_wait.is_zero() || lease_wait > MAX_LEASE_WAIT {
                    let input = at(inputs::LEASE_WAIT.flag);
                    return Err(input.error(format!(
                        "{} {} must be more than 0 and at most {}",
                        input.name,
                        humantime::format_duration(lease_wait),
                        humantime::format_duration(MAX_LEASE_WAIT)
                    )));
                }
                Some(CrashHook {
                    header: parse_header(h, at(inputs::CRASH_HEADER.flag))?,
                    lease_wait,
                })
            }
            (None, Some(_)) => {
                return Err(needs(
                    at(inputs::LEASE_WAIT.flag),
                    at(inputs::CRASH_HEADER.flag),
                ))
            }
            (None, None) => None,
        };
        if opts.timeout.is_zero() {
            bail!("--timeout must be more than 0");
        }
        let provider = downstream::start(&target, &target.origins)?;
        let read_url = target
            .read_url
            .as_deref()
            .map(|u| parse_url(u, at(inputs::READ_URL.flag)))
            .transpose()?;
        if let Some(ttl) = target.key_ttl {
            if ttl.is_zero() || ttl > MAX_KEY_TTL {
                let input = at(inputs::KEY_TTL.flag);
                return Err(input.error(format!(
                    "{} {} must be more than 0 and at most {} (key-expiry waits it out)",
                    input.name,
                    humantime::format_duration(ttl),
                    humantime::format_duration(MAX_KEY_TTL)
                )));
            }
        }
        let store_outage = match (
            target.store_outage_hook.clone(),
            &target.store_down_cmd,
            &target.store_up_cmd,
        ) {
            (Some(hook), _, _) => Some(hook),
            (None, Some(down), Some(up)) => Some(Arc::new(CommandOutage {
                down: Masked::new(down, &secrets),
                up: Masked::new(up, &secrets),
                timeout: target.restart_timeout.unwrap_or(Duration::from_secs(30)),
            }) as Arc<dyn OutageHook>),
            (None, Some(_), None) => {
                return Err(needs(
                    at(inputs::STORE_DOWN_CMD.flag),
                    at(inputs::STORE_UP_CMD.flag),
                ))
            }
            (None, None, Some(_)) => {
                return Err(needs(
                    at(inputs::STORE_UP_CMD.flag),
                    at(inputs::STORE_DOWN_CMD.flag),
                ))
            }
            (None, None, None) => None,
        };
        let label = opts.label.clone().unwrap_or_else(|| match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        });
        Ok(Config {
            label,
            reference: opts.reference,
            operation: Operation {
                method,
                url,
                headers,
                body,
            },
            id_pointer,
            counter,
            tenant_b,
            hold_header,
            hold_release,
            key_ttl_header,
            quiet_window,
            restart,
            kill,
            invalid_body,
            second_url,
            replicas,
            crash,
            read_url,
            key_ttl: target.key_ttl,
            store_outage,
            timeout: opts.timeout,
            max_body: opts.kept_body,
            http2: target.http2,
            release_threads: opts.release_threads,
            target_file: target.target_file.clone(),
            notes: target.notes.clone(),
            strict: opts.strict,
            suite,
            key_form: opts.key_form,
            key_carrier,
            provider,
            secrets,
            connector,
            auth,
        })
    }
}

/// How [`Origins`] names the target URL, which has no flag of its own.
pub const TARGET_URL: &str = inputs::URL.flag;

/// "`input` needs `other`", located where `input` was given.
fn needs(input: Input, other: Input) -> anyhow::Error {
    input.error(format!("{} needs {}", input.name, other.name))
}

/// The quiet window when none is given: long enough for a server on the same network to finish
/// a request whose answer the checker dropped, short enough to pay once per such probe.
pub const DEFAULT_QUIET_WINDOW: Duration = Duration::from_millis(300);

/// The longest `--quiet-window`.
pub const MAX_QUIET_WINDOW: Duration = Duration::from_secs(60);

/// Where the name of each held request goes, in `--hold-header` and `--hold-release`.
pub const HOLD_NAME: &str = "{{hold}}";

/// The longest `--hold-at-least`: past it, the hold is a wait, not a window.
pub const MAX_HOLD_AT_LEAST: Duration = Duration::from_secs(30);

/// How a held request is released early: `url` with [`HOLD_NAME`] replaced by the hold's name,
/// POSTed once the probe has sent what it needs while the request was in flight.
#[derive(Debug, Clone)]
pub struct HoldRelease {
    pub url: String,
    /// `concurrent-duplicates` holds at least this long before releasing (a lock that expires
    /// while the original runs shows only past the server's lease).
    pub at_least: Duration,
    /// The URL (with `{{hold}}`) that answers once a held request is in its hold, when the
    /// target has one (the reference server's test hook).
    pub reached: Option<String>,
}

impl HoldRelease {
    /// The release URL of the hold named `name`.
    pub fn url_for(&self, name: &str) -> String {
        self.url.replace(HOLD_NAME, name)
    }

    /// The URL that answers once the held request `name` is in its hold, when there is one.
    pub fn reached_for(&self, name: &str) -> Option<String> {
        Some(self.reached.as_ref()?.replace(HOLD_NAME, name))
    }
}

/// `--hold-release` and `--hold-at-least`, checked against `--hold-header`: a hold is either
/// time-based (a header alone, such as `X-Test-Delay-Ms: 1500`) or released (a header naming
/// the hold with `{{hold}}`, and a release URL naming it too). `run` and `webhook` both check
/// their hold here.
fn hold_release(target: &TargetSpec, hold: Option<&Header>) -> Result<Option<HoldRelease>> {
    let at = |flag| target.origins.input(flag);
    let (release, hold_header) = (at(inputs::HOLD_RELEASE.flag), at(inputs::HOLD_HEADER.flag));
    let Some(url) = &target.hold_release else {
        if target.hold_at_least.is_some() {
            return Err(needs(at(inputs::HOLD_AT_LEAST.flag), release));
        }
        // A named hold nobody releases would hold every request it is sent with.
        if hold.is_some_and(|h| String::from_utf8_lossy(&h.value).contains(HOLD_NAME)) {
            return Err(hold_header.error(format!(
                "{} with {HOLD_NAME} needs {}, the URL that releases each hold (a header without {HOLD_NAME} is a time-based hold)",
                hold_header.name, release.name
            )));
        }
        return Ok(None);
    };
    let Some(hold) = hold else {
        return Err(needs(release, hold_header));
    };
    if !String::from_utf8_lossy(&hold.value).contains(HOLD_NAME) {
        return Err(hold_header.error(format!(
            "{} needs {HOLD_NAME} in the {} value, so each held request has its own name",
            release.name, hold_header.name
        )));
    }
    if !url.contains(HOLD_NAME) {
        return Err(release.error(format!(
            "{} {url:?} must contain {HOLD_NAME} where the hold's name goes",
            release.name
        )));
    }
    parse_url(&url.replace(HOLD_NAME, "x"), release)?;
    let at_least = target.hold_at_least.unwrap_or_default();
    if at_least > MAX_HOLD_AT_LEAST {
        let input = at(inputs::HOLD_AT_LEAST.flag);
        return Err(input.error(format!(
            "{} {} must be at most {}",
            input.name,
            humantime::format_duration(at_least),
            humantime::format_duration(MAX_HOLD_AT_LEAST)
        )));
    }
    Ok(Some(HoldRelease {
        url: url.clone(),
        at_least,
        reached: target.hold_reached.clone(),
    }))
}

#[cfg(test)]
mod tests;
