//! The target flags laid over a target description: over a target file's, an API
//! description's operation or the bundled reference server's, each flag recorded as its value's
//! origin so errors name it. Only the command side reads options; [`idem_check::target`] reads the
//! file.

use std::collections::BTreeMap;

use anyhow::Context as _;

use crate::cli::{ConnectionArgs, OpenApiArgs, TargetArgs};
use idem_check::diagnostic::Origins;
use idem_check::discover::Operation;
use idem_check::exit::AppError;
use idem_check::http::net::NetOptions;
use idem_check::http::Connector;
use idem_check::inputs;
use idem_check::target::{load, scheme_hint, TargetSpec};

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
        key_header: op.key.header().map(str::to_string),
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
