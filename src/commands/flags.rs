//! The target flags laid over a target description: over a target file's, an API
//! description's operation or the bundled reference server's, each flag recorded as its value's
//! origin so errors name it. Only the command side reads options; [`idem_check::target`] reads the
//! file.

use std::collections::BTreeMap;

use anyhow::Context as _;

use crate::cli::{ConnectionArgs, InputFlags, OpenApiArgs, TargetArgs};
use idem_check::carrier::{field_of, set_field, Place};
use idem_check::diagnostic::Origins;
use idem_check::discover::Operation;
use idem_check::exit::AppError;
use idem_check::http::net::NetOptions;
use idem_check::http::Connector;
use idem_check::inputs::{self, Input};
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
/// flags laid over it; `--key-in-body` replaces the key header the document names.
pub fn from_operation(
    op: &Operation,
    url: &str,
    args: &TargetArgs,
) -> Result<TargetSpec, AppError> {
    let mut document = from_document(op, url, &args.headers);
    if args.inputs.key_in_body.is_some() {
        // The user moved the key into the body: the document's header no longer carries it.
        document.key_header = None;
    }
    let spec = apply_flags(document, args)?;
    Ok(with_secret_flags(spec, args))
}

/// The bundled reference server's target description `spec` (which names the key header it
/// was started with): of the target flags, `--http2`, `--key-syntax`, `--key-shape`, the
/// connection flags and the secrets apply here (the inputs whose row says `reference true`);
/// see [`refused_with_reference`] for the others.
pub fn reference(mut spec: TargetSpec, args: &TargetArgs) -> TargetSpec {
    lay_inputs(&mut spec, &args.inputs, |input| input.with_reference);
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
        inputs: input_flags,
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
        ("--base-url", base_url.is_some()),
        ("--operation", !operations.is_empty()),
        ("--path-param", !path_param.is_empty()),
    ];
    let declared = given_inputs(input_flags)
        .into_iter()
        .filter(|input| !input.with_reference)
        .map(|input| (input.flag, true));
    let refused: Vec<&str> = given
        .into_iter()
        .chain(declared)
        .filter(|(_, given)| *given)
        .map(|(flag, _)| flag)
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
    lay_inputs(&mut t, &args.inputs, |_| true);
    if let Some(d) = &args.inputs.invalid_body {
        t.invalid_body = Some(body_arg(d, "--invalid-body @FILE")?);
    }
    t.headers.extend(args.headers.iter().cloned());
    connection_from_args(&args.connection, &mut t);
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

/// [`lay_inputs`] and [`given_inputs`] over every `plain` input of the table.
macro_rules! lay_inputs {
    ({} by_hand { $($hand:tt)* } plain { $(
        $(#[$doc:meta])*
        $name:ident: $flag:literal $home:tt $key:literal => $field:ident: $ty:ident $(<$inner:ident>)?,
            shown $shown:ident, value $value:literal, reference $reference:literal, help $help:literal;
    )* }) => {
        /// The flags of the inputs `which` picks laid over `t`: a flag's value replaces the
        /// description's and becomes its origin, a repeated flag adds to its list, a switch
        /// turns it on.
        fn lay_inputs(t: &mut TargetSpec, flags: &InputFlags, which: impl Fn(&Input) -> bool) {
            $(
                if which(&inputs::$name) && t.$field.lay(&flags.$field) {
                    t.origins.flag(inputs::$name.flag);
                }
            )*
        }

        /// The inputs whose flag was given.
        fn given_inputs(flags: &InputFlags) -> Vec<Input> {
            let mut given = Vec::new();
            $(
                if flags.$field.given() {
                    given.push(inputs::$name);
                }
            )*
            given
        }
    };
}

idem_check::with_inputs!(lay_inputs);

/// A flag's value laid over the description's, by its type.
trait Lay {
    /// Lays `flag` over `self`; whether it replaced the value (so the flag is its origin).
    fn lay(&mut self, flag: &Self) -> bool;
    fn given(&self) -> bool;
}

impl<T: Clone> Lay for Option<T> {
    fn lay(&mut self, flag: &Self) -> bool {
        if flag.is_some() {
            self.clone_from(flag);
        }
        flag.is_some()
    }

    fn given(&self) -> bool {
        self.is_some()
    }
}

impl<T: Clone> Lay for Vec<T> {
    fn lay(&mut self, flag: &Self) -> bool {
        self.extend(flag.iter().cloned());
        false
    }

    fn given(&self) -> bool {
        !self.is_empty()
    }
}

impl Lay for bool {
    fn lay(&mut self, flag: &Self) -> bool {
        *self |= flag;
        false
    }

    fn given(&self) -> bool {
        *self
    }
}

/// A flag's value, when given, in place of `slot`'s.
pub fn over<T: Clone, U: Clone + Into<T>>(
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
        body: op
            .body
            .text
            .as_deref()
            .map(|text| with_key_field(text, &op.key)),
        id_pointer: op.id_pointer.clone(),
        key_header: op.key.header().map(str::to_string),
        key_in_body: match &op.key {
            Place::Body(field) => Some(field.clone()),
            Place::Header(_) => None,
        },
        notes: op.notes.clone(),
        ..TargetSpec::default()
    }
}

/// The generated body `text` with the key's field present, for the probes to set: an example
/// holds required properties only, and a key the document marks optional is still the key.
fn with_key_field(text: &str, key: &Place) -> String {
    let Place::Body(field) = key else {
        return text.to_string();
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(mut json) if field_of(&json, field).is_none() => {
            set_field(
                &mut json,
                field,
                Some(serde_json::Value::String(String::new())),
            );
            json.to_string()
        }
        Ok(_) => text.to_string(),
        Err(_) if url::form_urlencoded::parse(text.as_bytes()).any(|(n, _)| n == *field) => {
            text.to_string()
        }
        Err(_) => format!("{text}{}{field}=", if text.is_empty() { "" } else { "&" }),
    }
}

/// TLS and route flags, over the target file's `[tls]`, `proxy` and `resolve`.
pub fn connection_from_args(args: &ConnectionArgs, t: &mut TargetSpec) {
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
    let t = connection_spec(args, env);
    Connector::new(&t.tls, &t.net)
}

/// A target description holding only the connection flags and the proxy variables of `env`:
/// what a command that is not `run` starts its shared inputs from.
pub fn connection_spec(args: &ConnectionArgs, env: &dyn Fn(&str) -> Option<String>) -> TargetSpec {
    let mut t = TargetSpec::default();
    connection_from_args(args, &mut t);
    t.net.proxy_env = NetOptions::proxy_environment(env);
    t
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
