//! The value parsers `Config::build` validates its inputs with: the key carrier, URLs, JSON
//! pointers, header lines, the `--auth-cmd` credential, and errors kept free of secrets.

use std::sync::Arc;

use anyhow::Result;

use super::*;

/// `--key-in-body`, `--key-syntax` and `--key-shape` around the key header `header`: one
/// carrier, its body field checked against the body it must travel in, before anything is
/// sent. An RFC 8941 String is a header field's syntax, so a body key is always a token.
pub(super) fn key_carrier(target: &TargetSpec, header: &str) -> Result<KeyCarrier> {
    let at = |flag| target.origins.input(flag);
    let syntax: Option<Syntax> = parse_as(&target.key_syntax, at(inputs::KEY_SYNTAX.flag))?;
    let shape: Option<KeyShape> = parse_as(&target.key_shape, at(inputs::KEY_SHAPE.flag))?;
    // A header the suite names keeps the suite's own syntax (suites describe the draft's
    // field under any name); one named by --key-header is a provider's token by default.
    let syntax = syntax
        .or((target.key_header.is_none() && target.key_in_body.is_none()).then_some(Syntax::Ietf));
    let mut put_into_body = false;
    let place = match &target.key_in_body {
        None => Place::Header(header.to_string()),
        Some(pointer) => {
            let input = at(inputs::KEY_IN_BODY.flag);
            if target.key_header.is_some() {
                let header = at(inputs::KEY_HEADER.flag);
                return Err(input.error(format!(
                    "give either {} or {}, not both",
                    header.name, input.name
                )));
            }
            if syntax == Some(Syntax::Ietf) {
                let flag = at(inputs::KEY_SYNTAX.flag);
                return Err(flag.error(format!(
                    "{} ietf: an RFC 8941 String is the syntax of a header field; a key in the \
                     body ({} {pointer}) is a token",
                    flag.name, input.name
                )));
            }
            let body = at(inputs::BODY.flag);
            match body_has_field(target.body.as_deref(), pointer, body.name) {
                Ok(field) => put_into_body = field == BodyField::Added,
                Err(why) => return Err(input.error(format!("{} {pointer:?}: {why}", input.name))),
            }
            Place::Body(pointer.clone())
        }
    };
    Ok(KeyCarrier {
        shape: shape.unwrap_or_default(),
        required: target.key_required,
        put_into_body,
        ..KeyCarrier::new(place, syntax)
    })
}

/// `value` parsed, its error naming `input`.
pub(super) fn parse_as<T: std::str::FromStr<Err = String>>(
    value: &Option<String>,
    input: Input,
) -> Result<Option<T>> {
    value
        .as_deref()
        .map(|v| {
            v.parse()
                .map_err(|e| input.error(format!("{}: {e}", input.name)))
        })
        .transpose()
}

/// Where a body key goes: a member the body holds, or one put into its parent object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyField {
    Held,
    Added,
}

/// Whether the request body `body` can carry the field `pointer`: a JSON pointer into a JSON
/// body, whose member is put into its parent object when the body lacks it (users write the
/// payload without the key, as they send it without one), or the name of a form body's field
/// (with or without a leading `/`). `Err` says why not, naming the body by `given` (`-d`, or
/// the target file's `body`).
pub(super) fn body_has_field(
    body: Option<&str>,
    pointer: &str,
    given: &str,
) -> std::result::Result<BodyField, String> {
    let Some(text) = body.filter(|b| !b.trim().is_empty()) else {
        return Err(format!(
            "there is no request body to carry the key; give one with {given}"
        ));
    };
    let rendered = BodyTemplate::new(text).render("k", 0);
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(&rendered) {
        if !pointer.starts_with('/') {
            return Err(format!(
                "the request body ({given}) is JSON, so the key's place is a JSON pointer \
                 starting with '/', e.g. /idempotency_key"
            ));
        }
        if json.pointer(pointer).is_some() {
            return Ok(BodyField::Held);
        }
        let parent = pointer.rsplit_once('/').map_or("", |(parent, _)| parent);
        return match json.pointer(parent) {
            Some(serde_json::Value::Object(_)) => Ok(BodyField::Added),
            _ => Err(format!(
                "the request body ({given}) is JSON with no object at {:?} to put the key's \
                 member into",
                if parent.is_empty() { "/" } else { parent }
            )),
        };
    }
    let rendered = String::from_utf8_lossy(&rendered);
    let names: Option<Vec<String>> = rendered
        .trim()
        .split('&')
        .map(|pair| {
            let (name, _) = pair.split_once('=')?;
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.[]%+".contains(&b));
            name_ok
                .then(|| url::form_urlencoded::parse(pair.as_bytes()).next())?
                .map(|(n, _)| n.into_owned())
        })
        .collect();
    let Some(names) = names else {
        return Err(format!(
            "the request body ({given}) is neither JSON nor a form (name=value&…)"
        ));
    };
    let field = pointer.strip_prefix('/').unwrap_or(pointer);
    if names.iter().any(|n| n == field) {
        Ok(BodyField::Held)
    } else {
        Err(format!(
            "the request body ({given}) is a form without a field {field:?} (it has {})",
            names.join(", ")
        ))
    }
}

pub(super) fn parse_url(text: &str, input: Input) -> Result<url::Url> {
    let what = input.name;
    let url = url::Url::parse(text)
        .map_err(|e| input.error(format!("{what} {text:?} is not a URL: {e}")))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(input.error(format!(
                "{what} {text:?}: scheme {other:?} is not supported (use http or https)"
            )))
        }
    }
    if url.host_str().is_none() {
        return Err(input.error(format!("{what} {text:?} has no host")));
    }
    Ok(url)
}

/// `e` with every secret masked: a located error keeps its place in the file (and so its exit
/// code), any other error becomes its masked text.
pub(super) fn masked(e: anyhow::Error, secrets: &Secrets) -> anyhow::Error {
    match e.downcast::<FileError>() {
        Ok(mut located) => {
            located.message = secrets.redact(&located.message);
            located.into()
        }
        Err(e) => {
            let text = format!("{e:#}");
            let shown = secrets.redact(&text);
            if shown == text {
                e
            } else {
                anyhow::anyhow!(shown)
            }
        }
    }
}

pub(super) fn check_pointer(p: &str, input: Input) -> Result<String> {
    if !p.is_empty() && !p.starts_with('/') {
        return Err(input.error(format!(
            "{} {p:?} is not a JSON pointer (it must start with '/', e.g. /id)",
            input.name
        )));
    }
    Ok(p.to_string())
}

/// Parses `Name: value`, the curl form; errors cite `input`.
pub fn parse_header(line: &str, input: Input) -> Result<Header> {
    let what = input.name;
    let Some((name, value)) = line.split_once(':') else {
        return Err(input.error(format!("{what} {line:?} is not of the form 'Name: value'")));
    };
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err(input.error(format!(
            "{what} {line:?}: {name:?} is not a valid header name"
        )));
    }
    Ok(Header::new(name, value.trim().as_bytes().to_vec()))
}

/// Runs `--auth-cmd` and adds the header line it prints to tenant A's, in place of a same-named
/// `-H`; its value becomes a secret, masked in every output even where no header name says so.
/// Returns the credential, which the run fetches again on a 401 ([`crate::auth_cmd`]).
pub(super) fn add_auth_header(target: &mut TargetSpec, cmd: &str) -> Result<Arc<Credential>> {
    let input = target.origins.input(inputs::AUTH_CMD.flag);
    let fail = |why: AuthError| input.error(format!("{} {why}", input.name));
    let line = auth_cmd::run(cmd).map_err(fail)?;
    // Not parse_header's own error: it would quote the line, credential and all.
    let header = auth_cmd::header_of(&line).map_err(fail)?;
    let name = header.name.clone();
    target.headers.retain(|h| {
        h.split_once(':')
            .is_none_or(|(n, _)| !n.trim().eq_ignore_ascii_case(&name))
    });
    target.headers.push(line.clone());
    target.secrets.push(header.value_str());
    Ok(Credential::new(cmd, header))
}

pub(super) fn parse_headers(
    lines: &[String],
    flag: &'static str,
    origins: &Origins,
) -> Result<Vec<Header>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| parse_header(l, origins.item(flag, i)))
        .collect()
}

pub(super) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
