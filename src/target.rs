//! Target files: the same description as the `run` flags, in TOML, for CI jobs.
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

use crate::cli::TargetArgs;
use crate::config::TargetSpec;
use crate::diagnostic::FileError;
use crate::discover::Operation;
use crate::exit::AppError;

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
    let mut secrets = Vec::new();
    let mut sub = |s: &Spanned<String>| -> Result<String, FileError> {
        substitute(s.get_ref(), env, &mut secrets)
            .map_err(|m| FileError::at(path, text, Some(s.span()), m))
    };
    let mut spec = TargetSpec {
        url: sub(&file.url)?,
        ..TargetSpec::default()
    };
    spec.method = file.method.as_ref().map(&mut sub).transpose()?;
    spec.key_header = file.key_header.as_ref().map(&mut sub).transpose()?;
    spec.headers = file
        .headers
        .iter()
        .map(&mut sub)
        .collect::<Result<_, _>>()?;
    spec.body = match (&file.body, &file.body_file) {
        (Some(_), Some(f)) => {
            return Err(FileError::at(
                path,
                text,
                Some(f.span()),
                "give either body or body-file, not both",
            ))
        }
        (Some(b), None) => Some(sub(b)?),
        (None, Some(f)) => {
            let p = base.join(sub(f)?);
            Some(std::fs::read_to_string(&p).map_err(|e| {
                FileError::at(
                    path,
                    text,
                    Some(f.span()),
                    format!("cannot read {}: {e}", p.display()),
                )
            })?)
        }
        (None, None) => None,
    };
    spec.id_pointer = file.id_pointer.as_ref().map(&mut sub).transpose()?;
    spec.hold_header = file.hold_header.as_ref().map(&mut sub).transpose()?;
    spec.hold_release = file.hold_release.as_ref().map(&mut sub).transpose()?;
    spec.hold_at_least = file
        .hold_at_least
        .as_ref()
        .map(|t| duration(path, text, t))
        .transpose()?;
    spec.key_ttl_header = file.key_ttl_header.as_ref().map(&mut sub).transpose()?;
    spec.quiet_window = file
        .quiet_window
        .as_ref()
        .map(|t| duration(path, text, t))
        .transpose()?;
    spec.invalid_body = file.invalid_body.as_ref().map(&mut sub).transpose()?;
    spec.second_url = file.second_url.as_ref().map(&mut sub).transpose()?;
    spec.replicas = file
        .replicas
        .iter()
        .map(&mut sub)
        .collect::<Result<_, _>>()?;
    spec.http2 = file.http2;
    spec.read_url = file.read_url.as_ref().map(&mut sub).transpose()?;
    spec.key_ttl = file
        .key_ttl
        .as_ref()
        .map(|t| duration(path, text, t))
        .transpose()?;
    if let Some(o) = &file.store_outage {
        spec.store_down_cmd = Some(sub(&o.down_command)?);
        spec.store_up_cmd = Some(sub(&o.up_command)?);
    }
    spec.net.proxy = file.proxy.as_ref().map(&mut sub).transpose()?;
    for r in &file.resolve {
        let entry = sub(r)?;
        if let Err(e) = entry.parse::<crate::http::net::Resolve>() {
            return Err(FileError::at(path, text, Some(r.span()), e));
        }
        spec.net.resolve.push(entry);
    }
    if let Some(t) = &file.tls {
        let mut file_path = |p: &Option<Spanned<String>>| -> Result<_, FileError> {
            p.as_ref().map(|p| sub(p).map(|p| base.join(p))).transpose()
        };
        spec.tls.cacert = file_path(&t.cacert)?;
        spec.tls.cert = file_path(&t.cert)?;
        spec.tls.key = file_path(&t.key)?;
        spec.tls.insecure = t.insecure;
        if let (Some(k), None) = (&t.key, &t.cert) {
            return Err(FileError::at(
                path,
                text,
                Some(k.span()),
                "key needs cert (the client certificate it belongs to)",
            ));
        }
    }
    if let Some(c) = &file.crash {
        spec.crash_header = Some(sub(&c.header)?);
        spec.lease_wait = c
            .lease_wait
            .as_ref()
            .map(|t| duration(path, text, t))
            .transpose()?;
    }
    if let Some(c) = &file.counter {
        spec.count_url = c.url.as_ref().map(&mut sub).transpose()?;
        spec.count_pointer = c.pointer.as_ref().map(&mut sub).transpose()?;
        spec.count_cmd = c.command.as_ref().map(&mut sub).transpose()?;
    }
    if let Some(b) = &file.tenant_b {
        spec.tenant_b_headers = b.headers.iter().map(&mut sub).collect::<Result<_, _>>()?;
    }
    if let Some(r) = &file.restart {
        spec.restart_cmd = Some(sub(&r.command)?);
        spec.ready_url = r.ready_url.as_ref().map(&mut sub).transpose()?;
        spec.restart_timeout = r
            .timeout
            .as_ref()
            .map(|t| duration(path, text, t))
            .transpose()?;
    }
    // Check the shapes the config builder would reject, here where the span is known.
    for h in file
        .headers
        .iter()
        .chain(file.tenant_b.iter().flat_map(|b| b.headers.iter()))
    {
        if !h.get_ref().contains(':') {
            return Err(FileError::at(
                path,
                text,
                Some(h.span()),
                "a header is written 'Name: value'",
            ));
        }
    }
    if let Some(hint) = scheme_hint(&spec.url) {
        return Err(FileError::at(path, text, Some(file.url.span()), hint));
    }
    if url::Url::parse(&spec.url).is_err() {
        return Err(FileError::at(
            path,
            text,
            Some(file.url.span()),
            format!("{:?} is not a URL", spec.url),
        ));
    }
    spec.secret_vars = secrets;
    spec.target_file = Some(path.to_string());
    Ok(spec)
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
    match o.key_header.as_slice() {
        [] => {}
        [name] => t.key_header = Some(name.clone()),
        names => {
            return Err(anyhow::anyhow!(
                "--key-header is given {} times: without --openapi it names the one header that \
                 carries the key, as a target file's key-header does (several names are for \
                 --openapi, which recognises the key header among them)",
                names.len()
            )
            .into())
        }
    }
    Ok(with_secret_flags(apply_flags(t, args)?, args))
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

/// The bundled reference server's target description `spec`: of the target flags, only
/// `--http2`, the connection flags and the secrets apply.
pub fn reference(mut spec: TargetSpec, args: &TargetArgs) -> TargetSpec {
    spec.http2 = args.http2;
    connection_from_args(args, &mut spec);
    with_secret_flags(spec, args)
}

/// `t` with the target flags laid over it.
fn apply_flags(mut t: TargetSpec, args: &TargetArgs) -> Result<TargetSpec, AppError> {
    if let Some(url) = &args.url {
        t.url = url.clone();
    }
    if args.method.is_some() {
        t.method = args.method.clone();
    }
    t.headers.extend(args.headers.iter().cloned());
    if let Some(d) = &args.data {
        t.body = Some(body_arg(d, "-d @FILE")?);
    }
    if let Some(d) = &args.invalid_body {
        t.invalid_body = Some(body_arg(d, "--invalid-body @FILE")?);
    }
    let set = |slot: &mut Option<String>, v: &Option<String>| {
        if v.is_some() {
            slot.clone_from(v);
        }
    };
    set(&mut t.id_pointer, &args.id_pointer);
    set(&mut t.count_url, &args.count_url);
    set(&mut t.count_pointer, &args.count_pointer);
    set(&mut t.count_cmd, &args.count_cmd);
    set(&mut t.hold_header, &args.hold_header);
    set(&mut t.hold_release, &args.hold_release);
    if args.hold_at_least.is_some() {
        t.hold_at_least = args.hold_at_least;
    }
    set(&mut t.key_ttl_header, &args.key_ttl_header);
    if args.quiet_window.is_some() {
        t.quiet_window = args.quiet_window;
    }
    set(&mut t.restart_cmd, &args.restart_cmd);
    set(&mut t.ready_url, &args.ready_url);
    set(&mut t.second_url, &args.second_url);
    set(&mut t.crash_header, &args.crash_header);
    if args.lease_wait.is_some() {
        t.lease_wait = args.lease_wait;
    }
    set(&mut t.read_url, &args.read_url);
    set(&mut t.store_down_cmd, &args.store_down_cmd);
    set(&mut t.store_up_cmd, &args.store_up_cmd);
    if args.key_ttl.is_some() {
        t.key_ttl = args.key_ttl;
    }
    t.http2 |= args.http2;
    connection_from_args(args, &mut t);
    t.replicas.extend(args.replica.iter().cloned());
    t.tenant_b_headers
        .extend(args.tenant_b_header.iter().cloned());
    if t.restart_timeout.is_none() {
        t.restart_timeout = Some(args.restart_timeout);
    }
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
        ..TargetSpec::default()
    }
}

/// TLS and route flags, over the target file's `[tls]`, `proxy` and `resolve`.
fn connection_from_args(args: &TargetArgs, t: &mut TargetSpec) {
    if args.cacert.is_some() {
        t.tls.cacert.clone_from(&args.cacert);
    }
    if args.cert.is_some() {
        t.tls.cert.clone_from(&args.cert);
        t.tls.key.clone_from(&args.key);
    }
    t.tls.insecure |= args.insecure;
    if args.proxy.is_some() {
        t.net.proxy.clone_from(&args.proxy);
    }
    t.net.resolve.extend(args.resolve.iter().cloned());
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

/// Where each key of a target file goes: the table (`""` for the top level) and its keys, as in
/// fixtures/targets/README.md.
const KEYS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "url",
            "method",
            "headers",
            "body",
            "body-file",
            "id-pointer",
            "hold-header",
            "hold-release",
            "hold-at-least",
            "key-ttl-header",
            "quiet-window",
            "invalid-body",
            "second-url",
            "replicas",
            "http2",
            "proxy",
            "resolve",
        ],
    ),
    ("counter", &["url", "pointer", "command"]),
    ("tenant-b", &["headers"]),
    ("restart", &["command", "ready-url", "timeout"]),
    ("crash", &["header", "lease-wait"]),
    ("tls", &["cacert", "cert", "key", "insecure"]),
];

/// For an "unknown field" error, where that key belongs (" — `ready-url` belongs in the
/// [restart] table"); empty when the key belongs nowhere or the error is another one.
fn misplaced(message: &str) -> String {
    let Some(key) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    else {
        return String::new();
    };
    let homes: Vec<String> = KEYS
        .iter()
        .filter(|(_, keys)| keys.contains(&key))
        .map(|(table, _)| match *table {
            "" => "at the top level, before the first [table]".to_string(),
            t => format!("in the [{t}] table"),
        })
        .collect();
    if homes.is_empty() {
        String::new()
    } else {
        format!(
            " — `{key}` belongs {} (see fixtures/targets/README.md)",
            homes.join(" or ")
        )
    }
}

/// A humantime duration ("30s", "1m"), located on error.
fn duration(path: &str, text: &str, t: &Spanned<String>) -> Result<Duration, FileError> {
    humantime::parse_duration(t.get_ref()).map_err(|e| {
        FileError::at(
            path,
            text,
            Some(t.span()),
            format!("{:?} is not a duration: {e}", t.get_ref()),
        )
    })
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

    #[test]
    fn unknown_key_is_located() {
        let text = "url = \"http://127.0.0.1:1/p\"\nmethd = \"POST\"\n";
        let e = parse("t.toml", text, &env(), Path::new(".")).unwrap_err();
        assert_eq!(e.line, 2);
    }
}
