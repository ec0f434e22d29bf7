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

use anyhow::Context as _;

use crate::cli::{ConnectionArgs, OpenApiArgs, TargetArgs};
use crate::config::TargetSpec;
use crate::diagnostic::{FileError, Origins};
use crate::discover::Operation;
use crate::exit::AppError;
use crate::http::net::NetOptions;
use crate::http::Connector;
use crate::inputs::{self, Input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TargetFile {
    url: Spanned<String>,
    method: Option<Spanned<String>>,
    #[serde(default)]
    headers: Vec<Spanned<String>>,
    body: Option<Spanned<String>>,
    body_file: Option<Spanned<String>>,
    id_pointer: Option<Spanned<String>>,
    hold_header: Option<Spanned<String>>,
    hold_release: Option<Spanned<String>>,
    hold_at_least: Option<Spanned<String>>,
    key_ttl_header: Option<Spanned<String>>,
    quiet_window: Option<Spanned<String>>,
    invalid_body: Option<Spanned<String>>,
    second_url: Option<Spanned<String>>,
    #[serde(default)]
    replicas: Vec<Spanned<String>>,
    #[serde(default)]
    http2: bool,
    read_url: Option<Spanned<String>>,
    key_ttl: Option<Spanned<String>>,
    key_header: Option<Spanned<String>>,
    key_in_body: Option<Spanned<String>>,
    key_syntax: Option<Spanned<String>>,
    key_shape: Option<Spanned<String>>,
    proxy: Option<Spanned<String>>,
    #[serde(default)]
    resolve: Vec<Spanned<String>>,
    tls: Option<TlsTable>,
    counter: Option<CounterTable>,
    tenant_b: Option<TenantTable>,
    restart: Option<RestartTable>,
    crash: Option<CrashTable>,
    store_outage: Option<StoreOutageTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct StoreOutageTable {
    down_command: Spanned<String>,
    up_command: Spanned<String>,
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
    ready_url: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
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
        id_pointer: r.opt(&file.id_pointer, inputs::ID_POINTER)?,
        hold_header: r.opt(&file.hold_header, inputs::HOLD_HEADER)?,
        hold_release: r.opt(&file.hold_release, inputs::HOLD_RELEASE)?,
        hold_at_least: r.duration(&file.hold_at_least, inputs::HOLD_AT_LEAST)?,
        key_ttl_header: r.opt(&file.key_ttl_header, inputs::KEY_TTL_HEADER)?,
        quiet_window: r.duration(&file.quiet_window, inputs::QUIET_WINDOW)?,
        invalid_body: r.opt(&file.invalid_body, inputs::INVALID_BODY)?,
        second_url: r.opt(&file.second_url, inputs::SECOND_URL)?,
        replicas: r.list(&file.replicas, inputs::REPLICA)?,
        http2: file.http2,
        read_url: r.opt(&file.read_url, inputs::READ_URL)?,
        key_ttl: r.duration(&file.key_ttl, inputs::KEY_TTL)?,
        key_in_body: r.opt(&file.key_in_body, inputs::KEY_IN_BODY)?,
        key_syntax: r.opt(&file.key_syntax, inputs::KEY_SYNTAX)?,
        key_shape: r.opt(&file.key_shape, inputs::KEY_SHAPE)?,
        ..TargetSpec::default()
    };
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
    fn at(&self, value: &Spanned<String>, message: impl Into<String>) -> FileError {
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

/// The target description from `--target` and the flags; flags win over the file.
pub fn from_flags(
    args: &TargetArgs,
    env: &BTreeMap<String, String>,
) -> Result<TargetSpec, AppError> {
    let o = &args.openapi_args;
    if o.base_url.is_some() || !o.operations.is_empty() || !o.path_param.is_empty() {
        return Err(anyhow::anyhow!(
            "--base-url, --operation and --path-param need --openapi SPEC"
        )
        .into());
    }
    let mut t = match &args.target {
        Some(path) => load(path, env)?,
        None => TargetSpec::default(),
    };
    if let Some(name) = key_header(args)? {
        t.key_header = Some(name.to_string());
        t.origins.flag(inputs::KEY_HEADER.flag);
    }
    Ok(with_secret_flags(apply_flags(t, args)?, args))
}

/// The one `--key-header` of a run without `--openapi`, if given.
pub fn key_header(args: &TargetArgs) -> Result<Option<&str>, AppError> {
    match args.openapi_args.key_header.as_slice() {
        [] => Ok(None),
        [name] => Ok(Some(name)),
        names => Err(anyhow::anyhow!(
            "--key-header is given {} times: without --openapi it names the one header that \
             carries the key, as a target file's key-header does (several names are for \
             --openapi, which recognises the key header among them)",
            names.len()
        )
        .into()),
    }
}

/// The target description of an API description's operation `op` at `url`, with the target
/// flags laid over it.
pub fn from_operation(
    op: &Operation,
    url: &str,
    args: &TargetArgs,
) -> Result<TargetSpec, AppError> {
    let spec = apply_flags(from_document(op, url, &args.headers), args)?;
    Ok(with_secret_flags(spec, args))
}

/// The bundled reference server's target description `spec` (which names the key header it
/// was started with): of the target flags, `--http2`, `--key-syntax`, `--key-shape`, the
/// connection flags and the secrets apply here; see [`refused_with_reference`] for the others.
pub fn reference(mut spec: TargetSpec, args: &TargetArgs) -> TargetSpec {
    spec.http2 = args.http2;
    let o = &mut spec.origins;
    over(
        &mut spec.key_syntax,
        &args.key_syntax,
        inputs::KEY_SYNTAX.flag,
        o,
    );
    over(
        &mut spec.key_shape,
        &args.key_shape,
        inputs::KEY_SHAPE.flag,
        o,
    );
    connection_from_args(&args.connection, &mut spec);
    with_secret_flags(spec, args)
}

/// Refuses the target flags that `--reference` cannot apply, naming them: the bundled reference
/// server describes its own operation, counter, tenants, hold and hooks, and a flag that
/// changed one of them would be ignored or would check something else than what green looks
/// like. Every target flag is sorted here, so a new one cannot be ignored unnoticed: the
/// others apply to the server (`--key-header`, `--reference-fault`, `--reference-db`), to its
/// target description ([`reference`]), or to the run (suite, timeout, label, release threads).
pub fn refused_with_reference(args: &TargetArgs) -> Result<(), AppError> {
    let TargetArgs {
        url: _,
        openapi: _,
        openapi_args,
        reference: _,
        reference_fault: _,
        reference_db: _,
        target: _,
        method,
        headers,
        data,
        id_pointer,
        count_url,
        count_pointer,
        count_cmd,
        tenant_b_header,
        hold_header,
        hold_release,
        hold_at_least,
        restart_cmd,
        ready_url,
        restart_timeout,
        invalid_body,
        second_url,
        replica,
        crash_header,
        lease_wait,
        read_url,
        key_ttl,
        key_ttl_header,
        key_in_body,
        key_syntax: _,
        key_shape: _,
        quiet_window,
        store_down_cmd,
        store_up_cmd,
        http2: _,
        no_release_threads: _,
        connection: _,
        suite: _,
        timeout: _,
        label: _,
        secret: _,
        redact_header: _,
    } = args;
    let OpenApiArgs {
        base_url,
        operations,
        key_header: _,
        path_param,
    } = openapi_args;
    let given = [
        (inputs::METHOD.flag, method.is_some()),
        (inputs::HEADERS.flag, !headers.is_empty()),
        (inputs::BODY.flag, data.is_some()),
        (inputs::ID_POINTER.flag, id_pointer.is_some()),
        (inputs::COUNT_URL.flag, count_url.is_some()),
        (inputs::COUNT_POINTER.flag, count_pointer.is_some()),
        (inputs::COUNT_CMD.flag, count_cmd.is_some()),
        (inputs::TENANT_B_HEADER.flag, !tenant_b_header.is_empty()),
        (inputs::HOLD_HEADER.flag, hold_header.is_some()),
        (inputs::HOLD_RELEASE.flag, hold_release.is_some()),
        (inputs::HOLD_AT_LEAST.flag, hold_at_least.is_some()),
        (inputs::RESTART_CMD.flag, restart_cmd.is_some()),
        (inputs::READY_URL.flag, ready_url.is_some()),
        (inputs::RESTART_TIMEOUT.flag, restart_timeout.is_some()),
        (inputs::INVALID_BODY.flag, invalid_body.is_some()),
        (inputs::SECOND_URL.flag, second_url.is_some()),
        (inputs::REPLICA.flag, !replica.is_empty()),
        (inputs::CRASH_HEADER.flag, crash_header.is_some()),
        (inputs::LEASE_WAIT.flag, lease_wait.is_some()),
        (inputs::READ_URL.flag, read_url.is_some()),
        (inputs::KEY_TTL.flag, key_ttl.is_some()),
        (inputs::KEY_TTL_HEADER.flag, key_ttl_header.is_some()),
        (inputs::KEY_IN_BODY.flag, key_in_body.is_some()),
        (inputs::QUIET_WINDOW.flag, quiet_window.is_some()),
        (inputs::STORE_DOWN_CMD.flag, store_down_cmd.is_some()),
        (inputs::STORE_UP_CMD.flag, store_up_cmd.is_some()),
        ("--base-url", base_url.is_some()),
        ("--operation", !operations.is_empty()),
        ("--path-param", !path_param.is_empty()),
    ];
    let refused: Vec<&str> = given
        .iter()
        .filter(|(_, given)| *given)
        .map(|(flag, _)| *flag)
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(anyhow::anyhow!(
        "--reference checks the bundled reference server, which describes its own operation, \
         counter, tenants, hold and hooks: {} cannot be applied to it. Leave {} out, or give \
         your server's URL or --target FILE instead of --reference",
        refused.join(", "),
        if refused.len() == 1 { "it" } else { "them" }
    )
    .into())
}

/// `t` with the target flags laid over it: a flag replaces what the file or the document said
/// (and becomes the value's origin), a repeated flag adds to its list.
fn apply_flags(mut t: TargetSpec, args: &TargetArgs) -> Result<TargetSpec, AppError> {
    let o = &mut t.origins;
    over(&mut t.url, &args.url, inputs::URL.flag, o);
    over(&mut t.method, &args.method, inputs::METHOD.flag, o);
    if let Some(d) = &args.data {
        over(
            &mut t.body,
            &Some(body_arg(d, "-d @FILE")?),
            inputs::BODY.flag,
            o,
        );
    }
    if let Some(d) = &args.invalid_body {
        let body = Some(body_arg(d, "--invalid-body @FILE")?);
        over(&mut t.invalid_body, &body, inputs::INVALID_BODY.flag, o);
    }
    over(
        &mut t.id_pointer,
        &args.id_pointer,
        inputs::ID_POINTER.flag,
        o,
    );
    over(&mut t.count_url, &args.count_url, inputs::COUNT_URL.flag, o);
    over(
        &mut t.count_pointer,
        &args.count_pointer,
        inputs::COUNT_POINTER.flag,
        o,
    );
    over(&mut t.count_cmd, &args.count_cmd, inputs::COUNT_CMD.flag, o);
    over(
        &mut t.hold_header,
        &args.hold_header,
        inputs::HOLD_HEADER.flag,
        o,
    );
    over(
        &mut t.hold_release,
        &args.hold_release,
        inputs::HOLD_RELEASE.flag,
        o,
    );
    over(
        &mut t.hold_at_least,
        &args.hold_at_least,
        inputs::HOLD_AT_LEAST.flag,
        o,
    );
    over(
        &mut t.key_ttl_header,
        &args.key_ttl_header,
        inputs::KEY_TTL_HEADER.flag,
        o,
    );
    over(
        &mut t.quiet_window,
        &args.quiet_window,
        inputs::QUIET_WINDOW.flag,
        o,
    );
    over(
        &mut t.restart_cmd,
        &args.restart_cmd,
        inputs::RESTART_CMD.flag,
        o,
    );
    over(&mut t.ready_url, &args.ready_url, inputs::READY_URL.flag, o);
    over(
        &mut t.restart_timeout,
        &args.restart_timeout,
        inputs::RESTART_TIMEOUT.flag,
        o,
    );
    over(
        &mut t.second_url,
        &args.second_url,
        inputs::SECOND_URL.flag,
        o,
    );
    over(
        &mut t.crash_header,
        &args.crash_header,
        inputs::CRASH_HEADER.flag,
        o,
    );
    over(
        &mut t.lease_wait,
        &args.lease_wait,
        inputs::LEASE_WAIT.flag,
        o,
    );
    over(&mut t.read_url, &args.read_url, inputs::READ_URL.flag, o);
    over(
        &mut t.store_down_cmd,
        &args.store_down_cmd,
        inputs::STORE_DOWN_CMD.flag,
        o,
    );
    over(
        &mut t.store_up_cmd,
        &args.store_up_cmd,
        inputs::STORE_UP_CMD.flag,
        o,
    );
    over(&mut t.key_ttl, &args.key_ttl, inputs::KEY_TTL.flag, o);
    over(
        &mut t.key_in_body,
        &args.key_in_body,
        inputs::KEY_IN_BODY.flag,
        o,
    );
    over(
        &mut t.key_syntax,
        &args.key_syntax,
        inputs::KEY_SYNTAX.flag,
        o,
    );
    over(&mut t.key_shape, &args.key_shape, inputs::KEY_SHAPE.flag, o);
    t.headers.extend(args.headers.iter().cloned());
    t.http2 |= args.http2;
    connection_from_args(&args.connection, &mut t);
    t.replicas.extend(args.replica.iter().cloned());
    t.tenant_b_headers
        .extend(args.tenant_b_header.iter().cloned());
    if t.url.is_empty() {
        return Err(anyhow::anyhow!(
            "nothing to check: give the operation's URL (idem-check run \
             https://api.example.com/v1/payments …), a target file (--target FILE), an API \
             description (--openapi SPEC), or --reference to check the bundled reference server"
        )
        .into());
    }
    if let Some(hint) = scheme_hint(&t.url) {
        return Err(anyhow::anyhow!("{hint}").into());
    }
    Ok(t)
}

/// A flag's value, when given, in place of `slot`'s.
fn over<T: Clone, U: Clone + Into<T>>(
    slot: &mut T,
    flag: &Option<U>,
    name: &'static str,
    origins: &mut Origins,
) {
    if let Some(v) = flag {
        *slot = v.clone().into();
        origins.flag(name);
    }
}

/// What the document says about `op`; the user's `-H` lines replace same-named ones.
fn from_document(op: &Operation, url: &str, user_headers: &[String]) -> TargetSpec {
    let given = |name: &str| {
        user_headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
    };
    let mut headers = Vec::new();
    if let Some(ct) = &op.body.content_type {
        if !given("Content-Type") {
            headers.push(format!("Content-Type: {ct}"));
        }
    }
    TargetSpec {
        url: url.to_string(),
        method: Some(op.method.clone()),
        headers,
        body: op.body.text.clone(),
        id_pointer: op.id_pointer.clone(),
        key_header: Some(op.header.clone()),
        notes: op.notes.clone(),
        ..TargetSpec::default()
    }
}

/// TLS and route flags, over the target file's `[tls]`, `proxy` and `resolve`.
fn connection_from_args(args: &ConnectionArgs, t: &mut TargetSpec) {
    let o = &mut t.origins;
    over(&mut t.tls.cacert, &args.cacert, inputs::CACERT.flag, o);
    if args.cert.is_some() {
        t.tls.cert.clone_from(&args.cert);
        t.tls.key.clone_from(&args.key);
        o.flag(inputs::CERT.flag);
        o.flag(inputs::CERT_KEY.flag);
    }
    t.tls.insecure |= args.insecure;
    over(&mut t.net.proxy, &args.proxy, inputs::PROXY.flag, o);
    t.net.resolve.extend(args.resolve.iter().cloned());
}

/// How a document named by URL is fetched (`--openapi URL`, `discover URL`, and the remote
/// `$ref`s of either): with the connection flags and the proxy variables of `env`, as a run
/// reaches its target.
pub fn document_connector(
    args: &ConnectionArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Connector> {
    let mut t = TargetSpec::default();
    connection_from_args(args, &mut t);
    t.net.proxy_env = NetOptions::proxy_environment(env);
    Connector::new(&t.tls, &t.net)
}

/// A body given inline or as `@FILE`; `what` names the option in the error.
fn body_arg(arg: &str, what: &str) -> Result<String, AppError> {
    match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the body file {path:?} ({what})"))
            .map_err(AppError::input_file),
        None => Ok(arg.to_string()),
    }
}

/// `target` with `--secret` and `--redact-header` added.
fn with_secret_flags(mut target: TargetSpec, t: &TargetArgs) -> TargetSpec {
    target.secrets.extend(t.secret.iter().cloned());
    target
        .redact_headers
        .extend(t.redact_header.iter().cloned());
    target
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
/// [restart] table"); empty when the key belongs nowhere or the error is another one.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [("TOKEN".to_string(), "s3cr3t".to_string())].into()
    }

    #[test]
    fn substitutes_and_collects_secrets() {
        let text =
            "url = \"http://127.0.0.1:1/p\"\nheaders = [\"Authorization: Bearer ${TOKEN}\"]\n";
        let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
        assert_eq!(t.headers, vec!["Authorization: Bearer s3cr3t"]);
        assert_eq!(
            t.secret_vars,
            vec![("TOKEN".to_string(), "s3cr3t".to_string())]
        );
    }

    #[test]
    fn missing_variable_is_located() {
        let text =
            "url = \"http://127.0.0.1:1/p\"\nheaders = [\"Authorization: Bearer ${NOPE}\"]\n";
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert_eq!((e.line, e.col), (2, 12));
        assert!(e.message.contains("NOPE"));
    }

    #[test]
    fn scope_and_crash_keys_are_read() {
        let text = "url = \"http://127.0.0.1:1/p\"\nsecond-url = \"http://127.0.0.1:1/q\"\nreplicas = [\"http://127.0.0.1:2/p\"]\ninvalid-body = '{}'\n[crash]\nheader = \"X-Test-Crash: 1\"\nlease-wait = \"2s\"\n";
        let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
        assert_eq!(t.second_url.as_deref(), Some("http://127.0.0.1:1/q"));
        assert_eq!(t.replicas, vec!["http://127.0.0.1:2/p"]);
        assert_eq!(t.invalid_body.as_deref(), Some("{}"));
        assert_eq!(t.crash_header.as_deref(), Some("X-Test-Crash: 1"));
        assert_eq!(t.lease_wait, Some(Duration::from_secs(2)));
        let bad = text.replace("\"2s\"", "\"soon\"");
        let e = parse("t.toml", &bad, &env(), Path::new(".")).unwrap_err();
        assert_eq!(e.line, 7);
    }

    #[test]
    fn behaviour_probe_keys_are_read() {
        let text = "url = \"http://127.0.0.1:1/p\"\nread-url = \"http://127.0.0.1:1/p/count\"\nkey-ttl = \"3s\"\n[store-outage]\ndown-command = \"down\"\nup-command = \"up\"\n";
        let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
        assert_eq!(t.read_url.as_deref(), Some("http://127.0.0.1:1/p/count"));
        assert_eq!(t.key_ttl, Some(Duration::from_secs(3)));
        assert_eq!(t.store_down_cmd.as_deref(), Some("down"));
        assert_eq!(t.store_up_cmd.as_deref(), Some("up"));
        let bad = text.replace("up-command = \"up\"\n", "");
        assert!(parse("t.toml", &bad, &env(), Path::new(".")).is_err());
    }

    #[test]
    fn connection_keys_are_read() {
        let text = "url = \"https://api.test/p\"\nproxy = \"http://127.0.0.1:3128\"\nresolve = [\"api.test:443:127.0.0.1\"]\n[tls]\ncacert = \"ca.pem\"\ncert = \"c.pem\"\nkey = \"k.pem\"\ninsecure = true\n";
        let t = parse("t.toml", text, &env(), Path::new("dir")).unwrap();
        assert_eq!(t.net.proxy.as_deref(), Some("http://127.0.0.1:3128"));
        assert_eq!(t.net.resolve, vec!["api.test:443:127.0.0.1"]);
        assert_eq!(t.tls.cacert, Some(Path::new("dir").join("ca.pem")));
        assert_eq!(t.tls.key, Some(Path::new("dir").join("k.pem")));
        assert!(t.tls.insecure);
        let bad = text.replace(":443:127.0.0.1", ":443");
        let e = parse("t.toml", &bad, &env(), Path::new(".")).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("HOST:PORT:ADDR"), "{}", e.message);
    }

    #[test]
    fn a_misplaced_key_is_pointed_to_its_table() {
        let text = "url = \"http://127.0.0.1:1/p\"\nready-url = \"http://127.0.0.1:1/healthz\"\n";
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert!(
            e.message
                .contains("`ready-url` belongs in the [restart] table"),
            "{}",
            e.message
        );
        let text = "url = \"http://127.0.0.1:1/p\"\n[restart]\ncommand = \"true\"\nhold-header = \"X: 1\"\n";
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert!(
            e.message.contains("belongs at the top level"),
            "{}",
            e.message
        );
        let text = "url = \"http://127.0.0.1:1/p\"\nmethd = \"POST\"\n";
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert!(!e.message.contains("belongs"), "{}", e.message);
    }

    /// The keys the old hand-kept list missed are pointed home too, and the key carrier's keys
    /// are read.
    #[test]
    fn every_declared_key_is_pointed_home() {
        for (key, home) in [
            ("read-url", "at the top level"),
            ("key-ttl", "at the top level"),
            ("key-header", "at the top level"),
            ("key-in-body", "at the top level"),
            ("down-command", "in the [store-outage] table"),
        ] {
            let text = format!(
                "url = \"http://127.0.0.1:1/p\"\n[crash]\nheader = \"X: 1\"\n{key} = \"x\"\n"
            );
            let e = parse("t.toml", &text, &env(), Path::new(".")).unwrap_err();
            assert!(
                e.message.contains(&format!("`{key}` belongs {home}")),
                "{}",
                e.message
            );
        }
        let text = "url = \"http://127.0.0.1:1/p\"\nkey-in-body = \"/k\"\nkey-syntax = \"token\"\nkey-shape = \"uuid\"\n";
        let t = parse("t.toml", text, &env(), Path::new(".")).unwrap();
        assert_eq!(t.key_in_body.as_deref(), Some("/k"));
        assert_eq!(t.key_syntax.as_deref(), Some("token"));
        assert_eq!(t.key_shape.as_deref(), Some("uuid"));
    }

    #[test]
    fn unknown_key_is_located() {
        let text = "url = \"http://127.0.0.1:1/p\"\nmethd = \"POST\"\n";
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert_eq!(e.line, 2);
    }
}
