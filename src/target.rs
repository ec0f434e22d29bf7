//! The target description, assembled once: a target file (the same description as the `run`
//! flags, in TOML, for CI jobs) or an API description's operation, with the target flags laid
//! over it. Each value remembers where it came from ([`Origins`]), so the config's checks can
//! blame the flag or the file's line.
//!
//! ```toml
//! url = "https://api.example.com/v1/payments"
//! method = "POST"
//! headers = ["Authorization: Bearer ${PAYMENTS_TOKEN}", "Content-Type: application/json"]
//! body = '{"amountCents":1250,"currency":"EUR","reference":"{{unique}}"}'
//! id-pointer = "/id"
//! hold-header = "X-Test-Delay-Ms: 300"
//! invalid-body = '{"amountCents":-1,"currency":"EUR","reference":"{{unique}}"}'
//! second-url = "https://api.example.com/v1/payouts"
//! replicas = ["https://eu-2.api.example.com/v1/payments"]
//! http2 = true   # the target speaks HTTP/2 (h2c with prior knowledge for http://)
//! read-url = "https://api.example.com/v1/payments/count"
//! key-ttl = "1m"  # when the API sends no Idempotency-Key-Expires-At
//! key-header = "X-Idempotency-Key"   # when it is not the suite's (Idempotency-Key)
//! proxy = "http://proxy.internal:3128"
//! resolve = ["api.example.com:443:10.0.0.7"]
//! [tls]
//! cacert = "certs/staging-ca.pem"   # paths are relative to the target file
//! cert = "certs/client.pem"
//! key = "certs/client-key.pem"
//! insecure = false
//! [counter]
//! url = "https://api.example.com/v1/payments/count"
//! pointer = "/count"
//! [tenant-b]
//! headers = ["Authorization: Bearer ${PAYMENTS_TOKEN_B}"]
//! [restart]
//! command = "systemctl restart payments"
//! crash-command = "systemctl kill --signal=KILL payments"
//! ready-url = "https://api.example.com/healthz"
//! timeout = "30s"
//! [crash]
//! header = "X-Test-Crash: 1"
//! lease-wait = "45s"
//! [store-outage]
//! down-command = "docker stop payments-redis"
//! up-command = "docker start payments-redis"
//! ```
//!
//! `${VAR}` is replaced from the environment in every string; the substituted values are
//! treated as secrets and masked in every report. Errors point at `file:line:col`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use std::sync::Arc;

use anyhow::Result;
use futures::future::BoxFuture;

use crate::diagnostic::{FileError, Origins};
use crate::inputs::{self, Input};
use crate::redact::{SecretSources, Secrets};

/// The target file's top level: the keys read by hand, and one field per top-level `plain`
/// input of the table (tables' inputs are read from their table's struct below). A tt-muncher
/// keeps the rows whose home is `top`, then writes the struct and the code that reads them.
macro_rules! target_file {
    ({} by_hand { $($hand:tt)* } plain { $($rows:tt)* }) => {
        target_file!(@keep [] $($rows)*);
    };
    (@keep [$($kept:tt)*]
        $(#[$doc:meta])*
        $name:ident: $flag:literal top $key:literal => $field:ident: $ty:ident $(<$inner:ident>)?,
            shown $shown:ident, value $value:literal, reference $reference:literal, help $help:literal;
        $($rest:tt)*
    ) => {
        target_file!(@keep [$($kept)* $name $key $field ($ty $(<$inner>)?);] $($rest)*);
    };
    (@keep [$($kept:tt)*]
        $(#[$doc:meta])*
        $name:ident: $flag:literal [$table:literal] $key:literal => $field:ident: $ty:ident $(<$inner:ident>)?,
            shown $shown:ident, value $value:literal, reference $reference:literal, help $help:literal;
        $($rest:tt)*
    ) => {
        target_file!(@keep [$($kept)*] $($rest)*);
    };
    (@keep [$($name:ident $key:literal $field:ident ($($ty:tt)*);)*]) => {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        struct TargetFile {
            url: Spanned<String>,
            method: Option<Spanned<String>>,
            #[serde(default)]
            headers: Vec<Spanned<String>>,
            body: Option<Spanned<String>>,
            body_file: Option<Spanned<String>>,
            key_header: Option<Spanned<String>>,
            proxy: Option<Spanned<String>>,
            #[serde(default)]
            resolve: Vec<Spanned<String>>,
            $(
                #[serde(default, rename = $key)]
                $field: <$($ty)* as FromFile>::Raw,
            )*
            tls: Option<TlsTable>,
            counter: Option<CounterTable>,
            tenant_b: Option<TenantTable>,
            restart: Option<RestartTable>,
            crash: Option<CrashTable>,
            store_outage: Option<StoreOutageTable>,
            provider: Option<ProviderTable>,
        }

        impl TargetFile {
            /// The top-level `plain` inputs, read into `spec`.
            fn read_plain(&self, r: &mut Reader, spec: &mut TargetSpec) -> Result<(), FileError> {
                $( spec.$field = FromFile::read(&self.$field, r, inputs::$name)?; )*
                Ok(())
            }
        }
    };
}

crate::with_inputs!(target_file);

/// How a `plain` input's value is written in a target file and read from it.
trait FromFile: Sized {
    /// What the file holds: the value with where it stands.
    type Raw: Default;
    fn read(raw: &Self::Raw, r: &mut Reader, input: Input) -> Result<Self, FileError>;
}

impl FromFile for Option<String> {
    type Raw = Option<Spanned<String>>;
    fn read(raw: &Self::Raw, r: &mut Reader, input: Input) -> Result<Self, FileError> {
        r.opt(raw, input)
    }
}

impl FromFile for Option<Duration> {
    type Raw = Option<Spanned<String>>;
    fn read(raw: &Self::Raw, r: &mut Reader, input: Input) -> Result<Self, FileError> {
        r.duration(raw, input)
    }
}

impl FromFile for Vec<String> {
    type Raw = Vec<Spanned<String>>;
    fn read(raw: &Self::Raw, r: &mut Reader, input: Input) -> Result<Self, FileError> {
        r.list(raw, input)
    }
}

impl FromFile for bool {
    type Raw = bool;
    fn read(raw: &Self::Raw, _: &mut Reader, _: Input) -> Result<Self, FileError> {
        Ok(*raw)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct StoreOutageTable {
    down_command: Spanned<String>,
    up_command: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ProviderTable {
    listen: Option<Spanned<String>>,
    profile: Option<Spanned<String>>,
    key_header: Option<Spanned<String>>,
    key_in_body: Option<Spanned<String>>,
    ref_pointer: Option<Spanned<String>>,
    correlate: Option<Spanned<String>>,
    tls: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct CrashTable {
    header: Spanned<String>,
    lease_wait: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TlsTable {
    cacert: Option<Spanned<String>>,
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    #[serde(default)]
    insecure: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct CounterTable {
    url: Option<Spanned<String>>,
    pointer: Option<Spanned<String>>,
    command: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TenantTable {
    headers: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RestartTable {
    command: Spanned<String>,
    crash_command: Option<Spanned<String>>,
    ready_url: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
}

/// Kills the target at once, as a crash would, so that its restart hook brings it back; used
/// by `prov-crash-after-call` while the fake provider holds the target's call.
pub trait KillHook: Send + Sync + std::fmt::Debug {
    /// One line for the evidence ("`kill -9 …`").
    fn describe(&self) -> String;
    fn kill(&self) -> BoxFuture<'_, Result<()>>;
}

/// Takes the target's idempotency store down and brings it back; used by `store-outage`.
pub trait OutageHook: Send + Sync + std::fmt::Debug {
    /// One line for the evidence ("`systemctl stop redis`, then `systemctl start redis`").
    fn describe(&self) -> String;
    fn down(&self) -> BoxFuture<'_, Result<()>>;
    fn up(&self) -> BoxFuture<'_, Result<()>>;
}

/// [`TargetSpec`]: the fields of the `by_hand` inputs and of what is not an input, written
/// in the call below, then one field per `plain` input of the table; and its `Debug`, which
/// shows each field as its row (or the call) says, masking every secret.
macro_rules! target_spec {
    (
        { $(
            $(#[$xdoc:meta])*
            $xfield:ident: $xty:ty, shown $xshown:ident;
        )* }
        by_hand { $($hand:tt)* }
        plain { $(
            $(#[$doc:meta])*
            $name:ident: $flag:literal $home:tt $key:literal => $field:ident: $ty:ident $(<$inner:ident>)?,
                shown $shown:ident, value $value:literal, reference $reference:literal, help $help:literal;
        )* }
    ) => {
        /// Everything the user described about the target, before validation. Its `Debug`
        /// masks every secret (see [`Mask`]).
        #[derive(Clone, Default)]
        pub struct TargetSpec {
            $( $(#[$xdoc])* pub $xfield: $xty, )*
            $(
                #[doc = $help]
                pub $field: $ty $(<$inner>)?,
            )*
        }

        /// Every value as the reports show it: header credentials, URL userinfo and secret query
        /// parameters, proxy credentials, `--secret` values and the target file's `${VAR}`
        /// values masked wherever they stand (a command, a body). A `{:?}` can end up in a log
        /// or a panic message; the description holds the run's credentials. Each field is shown
        /// as declared, so a new one cannot be shown without deciding how.
        impl std::fmt::Debug for TargetSpec {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mask = Mask(self.secrets(self.key_header.as_deref().unwrap_or_default()));
                f.debug_struct("TargetSpec")
                    $( .field(stringify!($xfield), &mask.$xshown(&self.$xfield)) )*
                    $( .field(stringify!($field), &mask.$shown(&self.$field)) )*
                    .finish()
            }
        }
    };
}

crate::with_inputs!(target_spec {
    url: String, shown url;
    method: Option<String>, shown plain;
    /// `Name: value` lines for tenant A.
    headers: Vec<String>, shown header;
    /// Body text (already read from a file for `-d @FILE`).
    body: Option<String>, shown text;
    /// The key header's name when the target's differs from the suite's (an API description
    /// declares it, e.g. `X-Idempotency-Key`).
    key_header: Option<String>, shown plain;
    /// An outage hook of the target's own (the in-process reference server's), used instead of
    /// the commands.
    store_outage_hook: Option<Arc<dyn OutageHook>>, shown plain;
    /// A kill of the target's own (the in-process reference server's), used instead of
    /// `--crash-cmd`.
    kill_hook: Option<Arc<dyn KillHook>>, shown plain;
    /// A fake provider already started for the target (`run --reference --provider`, whose
    /// server must know its URL before it starts), used instead of `--provider-listen`.
    provider_started: Option<Arc<crate::provider::FakeProvider>>, shown plain;
    /// The URL (with `{{hold}}`) that answers once the held request of that name is in its hold
    /// (the in-process reference server's test hook): held probes send their duplicates then,
    /// instead of after a head start that a loaded machine can outrun.
    hold_reached: Option<String>, shown plain;
    /// `(VAR, value)` for every `${VAR}` a target file took from the environment: masked in
    /// every report, and named `$VAR` in reproduce lines.
    secret_vars: Vec<(String, String)>, shown names;
    /// `--secret` values, in the order given.
    secrets: Vec<String>, shown hidden;
    /// `--redact-header` names: their values are masked like credentials.
    redact_headers: Vec<String>, shown plain;
    /// Trust, client certificate, `--insecure`: applied to the whole run by its
    /// [`crate::config::Config::connector`], not per request.
    tls: crate::http::tls::TlsOptions, shown plain;
    /// Proxy (given or from the environment) and fixed addresses, applied by
    /// [`crate::config::Config::connector`].
    net: crate::http::net::NetOptions, shown plain;
    /// The target file this came from, so hints name its keys instead of flags.
    target_file: Option<String>, shown plain;
    /// What the API description could not say about the request: each `$ref` left out of the
    /// body, and why ([`crate::discover::Operation::notes`]).
    notes: Vec<String>, shown plain;
    /// Where each value came from, by its flag: errors cite the flag or the target file's line.
    origins: Origins, shown plain;
});

/// How [`TargetSpec`]'s `Debug` shows a field, by the name its row gives: as it is, or with
/// the run's secrets masked.
struct Mask(Secrets);

impl Mask {
    fn plain<'v, T: std::fmt::Debug>(&self, value: &'v T) -> &'v T {
        value
    }

    /// Secrets replaced wherever they stand (a command, a body).
    fn text<T: Texts>(&self, value: &T) -> T {
        value.map(|t| self.0.redact(t))
    }

    /// Userinfo and secret query parameters masked.
    fn url<T: Texts>(&self, value: &T) -> T {
        value.map(|t| self.0.url_for_text(t))
    }

    /// `Name: value` with the value masked when the name says it is a credential.
    fn header<T: Texts>(&self, value: &T) -> T {
        value.map(|line| match line.split_once(':') {
            Some((name, value)) => match self.0.mask_header(name.trim(), value.trim().as_bytes()) {
                Some(masked) => format!("{name}: {masked}"),
                None => self.0.redact(line),
            },
            None => self.0.redact(line),
        })
    }

    /// Only how many there are.
    fn hidden(&self, values: &[String]) -> Vec<&'static str> {
        vec![crate::redact::REDACTED; values.len()]
    }

    /// The names, each value masked.
    fn names<'v>(&self, pairs: &'v [(String, String)]) -> Vec<(&'v str, &'static str)> {
        pairs
            .iter()
            .map(|(name, _)| (name.as_str(), crate::redact::REDACTED))
            .collect()
    }
}

/// One text or several, each shown through the same mask.
trait Texts {
    fn map(&self, f: impl Fn(&str) -> String) -> Self;
}

impl Texts for String {
    fn map(&self, f: impl Fn(&str) -> String) -> Self {
        f(self)
    }
}

impl Texts for Option<String> {
    fn map(&self, f: impl Fn(&str) -> String) -> Self {
        self.as_deref().map(f)
    }
}

impl Texts for Vec<String> {
    fn map(&self, f: impl Fn(&str) -> String) -> Self {
        self.iter().map(|t| f(t)).collect()
    }
}

impl TargetSpec {
    /// Every secret of this description, named by role, with `key_header` the header that
    /// carries the key (never a secret): what the run masks in every output.
    pub fn secrets(&self, key_header: &str) -> Secrets {
        let urls: Vec<&str> = [&self.count_url, &self.ready_url, &self.second_url]
            .into_iter()
            .flatten()
            .chain(std::iter::once(&self.url))
            .chain(&self.replicas)
            .map(String::as_str)
            .collect();
        Secrets::for_target(&SecretSources {
            tenant_a: &self.headers,
            tenant_b: &self.tenant_b_headers,
            given: &self.secrets,
            urls: &urls,
            file_vars: &self.secret_vars,
            redact_headers: &self.redact_headers,
            key_header,
        })
    }
}

/// Reads a target file; `env` supplies `${VAR}` values (the process environment in the CLI).
pub fn load(path: &Path, env: &BTreeMap<String, String>) -> Result<TargetSpec, FileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        FileError::at(
            &shown,
            "",
            None,
            format!("cannot read the target file: {e}"),
        )
    })?;
    parse(&shown, &text, env, path.parent().unwrap_or(Path::new(".")))
}

/// Parses target file text; `base` resolves `body-file`.
pub fn parse(
    path: &str,
    text: &str,
    env: &BTreeMap<String, String>,
    base: &Path,
) -> Result<TargetSpec, FileError> {
    let file: TargetFile = toml::from_str(text).map_err(|e| {
        FileError::at(
            path,
            text,
            e.span(),
            format!(
                "invalid target file: {}{}",
                e.message(),
                misplaced(e.message())
            ),
        )
    })?;
    let mut r = Reader {
        path,
        text,
        env,
        secrets: Vec::new(),
        origins: Origins::default(),
    };
    let url = r.string(&file.url, inputs::URL)?;
    let method = r.opt(&file.method, inputs::METHOD)?;
    let key_header = r.opt(&file.key_header, inputs::KEY_HEADER)?;
    let headers = r.list(&file.headers, inputs::HEADERS)?;
    let body = match (&file.body, &file.body_file) {
        (Some(_), Some(f)) => return Err(r.at(f, "give either body or body-file, not both")),
        (Some(b), None) => Some(r.string(b, inputs::BODY)?),
        (None, Some(f)) => {
            let p = base.join(r.string(f, inputs::BODY_FILE)?);
            Some(
                std::fs::read_to_string(&p)
                    .map_err(|e| r.at(f, format!("cannot read {}: {e}", p.display())))?,
            )
        }
        (None, None) => None,
    };
    let mut spec = TargetSpec {
        url,
        method,
        key_header,
        headers,
        body,
        ..TargetSpec::default()
    };
    file.read_plain(&mut r, &mut spec)?;
    if let Some(o) = &file.store_outage {
        spec.store_down_cmd = Some(r.string(&o.down_command, inputs::STORE_DOWN_CMD)?);
        spec.store_up_cmd = Some(r.string(&o.up_command, inputs::STORE_UP_CMD)?);
    }
    spec.net.proxy = r.opt(&file.proxy, inputs::PROXY)?;
    spec.net.resolve = r.list(&file.resolve, inputs::RESOLVE)?;
    for (entry, at) in spec.net.resolve.iter().zip(&file.resolve) {
        if let Err(e) = entry.parse::<crate::http::net::Resolve>() {
            return Err(r.at(at, e));
        }
    }
    if let Some(t) = &file.tls {
        let mut file_path = |p: &Option<Spanned<String>>, input| -> Result<_, FileError> {
            Ok(r.opt(p, input)?.map(|p| base.join(p)))
        };
        spec.tls.cacert = file_path(&t.cacert, inputs::CACERT)?;
        spec.tls.cert = file_path(&t.cert, inputs::CERT)?;
        spec.tls.key = file_path(&t.key, inputs::CERT_KEY)?;
        spec.tls.insecure = t.insecure;
        if let (Some(k), None) = (&t.key, &t.cert) {
            return Err(r.at(k, "key needs cert (the client certificate it belongs to)"));
        }
    }
    if let Some(c) = &file.crash {
        spec.crash_header = Some(r.string(&c.header, inputs::CRASH_HEADER)?);
        spec.lease_wait = r.duration(&c.lease_wait, inputs::LEASE_WAIT)?;
    }
    if let Some(p) = &file.provider {
        spec.provider_listen = r.opt(&p.listen, inputs::PROVIDER_LISTEN)?;
        spec.provider = r.opt(&p.profile, inputs::PROVIDER)?;
        spec.provider_key_header = r.opt(&p.key_header, inputs::PROVIDER_KEY_HEADER)?;
        spec.provider_key_in_body = r.opt(&p.key_in_body, inputs::PROVIDER_KEY_IN_BODY)?;
        spec.provider_ref_pointer = r.opt(&p.ref_pointer, inputs::PROVIDER_REF_POINTER)?;
        spec.provider_correlate = r.opt(&p.correlate, inputs::PROVIDER_CORRELATE)?;
        // Written where the target file says, as its other paths are read: relative to it.
        spec.provider_tls = r
            .opt(&p.tls, inputs::PROVIDER_TLS)?
            .map(|f| base.join(f).display().to_string());
    }
    if let Some(c) = &file.counter {
        spec.count_url = r.opt(&c.url, inputs::COUNT_URL)?;
        spec.count_pointer = r.opt(&c.pointer, inputs::COUNT_POINTER)?;
        spec.count_cmd = r.opt(&c.command, inputs::COUNT_CMD)?;
    }
    if let Some(b) = &file.tenant_b {
        spec.tenant_b_headers = r.list(&b.headers, inputs::TENANT_B_HEADER)?;
    }
    if let Some(t) = &file.restart {
        spec.restart_cmd = Some(r.string(&t.command, inputs::RESTART_CMD)?);
        spec.crash_cmd = r.opt(&t.crash_command, inputs::CRASH_CMD)?;
        spec.ready_url = r.opt(&t.ready_url, inputs::READY_URL)?;
        spec.restart_timeout = r.duration(&t.timeout, inputs::RESTART_TIMEOUT)?;
    }
    // Check the shapes the config builder would reject, here where the span is known.
    for h in file
        .headers
        .iter()
        .chain(file.tenant_b.iter().flat_map(|b| b.headers.iter()))
    {
        if !h.get_ref().contains(':') {
            return Err(r.at(h, "a header is written 'Name: value'"));
        }
    }
    if let Some(hint) = scheme_hint(&spec.url) {
        return Err(r.at(&file.url, hint));
    }
    if url::Url::parse(&spec.url).is_err() {
        return Err(r.at(&file.url, format!("{:?} is not a URL", spec.url)));
    }
    spec.secret_vars = r.secrets;
    spec.origins = r.origins;
    spec.target_file = Some(path.to_string());
    Ok(spec)
}

/// Reads the values of one target file: `${VAR}` substituted (the values collected as
/// secrets), durations parsed, and where each value stands recorded by the flag it stands for.
struct Reader<'a> {
    path: &'a str,
    text: &'a str,
    env: &'a BTreeMap<String, String>,
    secrets: Vec<(String, String)>,
    origins: Origins,
}

impl Reader<'_> {
    /// An error at `value` in the file.
    /// An error at `value`. Its message may quote a value the file took from the environment,
    /// which is a secret: it is shown as the `${VAR}` the file wrote instead.
    fn at(&self, value: &Spanned<String>, message: impl Into<String>) -> FileError {
        let mut message = message.into();
        for (var, secret) in self.secrets.iter().filter(|(_, s)| !s.is_empty()) {
            message = message.replace(secret.as_str(), &format!("${{{var}}}"));
        }
        FileError::at(self.path, self.text, Some(value.span()), message)
    }

    /// Item `index` of `input` is written at `value`.
    fn record(&mut self, value: &Spanned<String>, input: Input, index: usize) {
        let at = self.at(value, "");
        self.origins.file(input.flag, index, &input.file_key(), at);
    }

    /// `value` with `${VAR}` substituted, standing for `input`.
    fn string(&mut self, value: &Spanned<String>, input: Input) -> Result<String, FileError> {
        self.record(value, input, 0);
        substitute(value.get_ref(), self.env, &mut self.secrets).map_err(|m| self.at(value, m))
    }

    fn opt(
        &mut self,
        value: &Option<Spanned<String>>,
        input: Input,
    ) -> Result<Option<String>, FileError> {
        value.as_ref().map(|v| self.string(v, input)).transpose()
    }

    /// The items of a list, each standing for one use of a repeatable flag.
    fn list(&mut self, values: &[Spanned<String>], input: Input) -> Result<Vec<String>, FileError> {
        let mut out = Vec::new();
        for (i, v) in values.iter().enumerate() {
            self.record(v, input, i);
            out.push(
                substitute(v.get_ref(), self.env, &mut self.secrets).map_err(|m| self.at(v, m))?,
            );
        }
        Ok(out)
    }

    /// A humantime duration ("30s", "1m").
    fn duration(
        &mut self,
        value: &Option<Spanned<String>>,
        input: Input,
    ) -> Result<Option<Duration>, FileError> {
        let Some(v) = value else {
            return Ok(None);
        };
        self.record(v, input, 0);
        humantime::parse_duration(v.get_ref())
            .map(Some)
            .map_err(|e| self.at(v, format!("{:?} is not a duration: {e}", v.get_ref())))
    }
}

/// For a URL written without its scheme (`api.example.com/v1/payments`), what to write
/// instead; `None` for anything else.
pub fn scheme_hint(url: &str) -> Option<String> {
    if url.contains("://") || url.is_empty() {
        return None;
    }
    Some(format!(
        "{url:?} has no scheme: write https://{url} (or http:// for a plain-HTTP target)"
    ))
}

/// For an "unknown field" error, where that key belongs (" — `ready-url` belongs in the
/// \[restart\] table"); empty when the key belongs nowhere or the error is another one.
fn misplaced(message: &str) -> String {
    let Some(key) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    else {
        return String::new();
    };
    let homes = inputs::homes_of(key);
    if homes.is_empty() {
        String::new()
    } else {
        format!(
            " — `{key}` belongs {} (see fixtures/targets/README.md)",
            homes.join(" or ")
        )
    }
}

/// Replaces `${VAR}` with its value, collecting `(VAR, value)` as secrets.
fn substitute(
    s: &str,
    env: &BTreeMap<String, String>,
    secrets: &mut Vec<(String, String)>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "unterminated ${…}".to_string())?;
        let name = &after[..end];
        let value = env
            .get(name)
            .ok_or_else(|| format!("environment variable {name} is not set"))?;
        secrets.push((name.to_string(), value.clone()));
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

// The tests sit beside this file rather than under src/target/, a folder name that reads as
// build output to tools that look for one.
#[cfg(test)]
#[path = "target_file_tests.rs"]
mod tests;
