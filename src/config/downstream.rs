//! The fake provider a run's `downstream` probes judge through: `--provider-listen` and its
//! companions validated, and the fake started on that address (or the one `run --reference`
//! started before its server, which must know the fake's URL).

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;

use super::check_pointer;
use crate::diagnostic::Origins;
use crate::inputs;
use crate::provider::profile::{self, KeyCarrier};
use crate::provider::tls::TlsError;
use crate::provider::{FakeProvider, ProviderError, Settings};
use crate::target::TargetSpec;

/// Where the API's answer carries the provider's reference, unless `--provider-ref-pointer`.
pub const DEFAULT_REF_POINTER: &str = "/providerRef";

/// The running fake provider and how the API's answers point at its charges.
#[derive(Debug, Clone)]
pub struct Downstream {
    pub fake: Arc<FakeProvider>,
    /// `--provider-ref-pointer`: the provider's reference in the API's 2xx answer.
    pub ref_pointer: String,
}

/// The fake provider the target description asks for, started; `None` without one.
pub fn start(target: &TargetSpec, origins: &Origins) -> Result<Option<Downstream>> {
    let at = |flag| origins.input(flag);
    let ref_pointer = check_pointer(
        target
            .provider_ref_pointer
            .as_deref()
            .unwrap_or(DEFAULT_REF_POINTER),
        at(inputs::PROVIDER_REF_POINTER.flag),
    )?;
    if let Some(fake) = &target.provider_started {
        return Ok(Some(Downstream {
            fake: fake.clone(),
            ref_pointer,
        }));
    }
    let Some(listen) = &target.provider_listen else {
        let given = [
            (&target.provider, inputs::PROVIDER),
            (&target.provider_key_header, inputs::PROVIDER_KEY_HEADER),
            (&target.provider_key_in_body, inputs::PROVIDER_KEY_IN_BODY),
            (&target.provider_correlate, inputs::PROVIDER_CORRELATE),
            (&target.provider_ref_pointer, inputs::PROVIDER_REF_POINTER),
            (&target.provider_tls, inputs::PROVIDER_TLS),
        ];
        if let Some((_, input)) = given.iter().find(|(v, _)| v.is_some()) {
            let i = at(input.flag);
            return Err(i.error(format!(
                "{} describes the fake provider, which only {} starts (e.g. {} 127.0.0.1:4010)",
                i.name,
                inputs::PROVIDER_LISTEN.flag,
                inputs::PROVIDER_LISTEN.flag
            )));
        }
        return Ok(None);
    };
    let settings = settings(target, origins)?;
    let fake = match &target.provider_tls {
        None => FakeProvider::bind(listen, settings),
        Some(ca_file) => FakeProvider::bind_tls(listen, settings, Path::new(ca_file)),
    }
    .map_err(|e| match e {
        ProviderError::Bind { addr, source } => {
            let i = at(inputs::PROVIDER_LISTEN.flag);
            i.error(format!("{} {addr}: cannot listen there: {source}", i.name))
        }
        ProviderError::Tls(TlsError::Write { path, source }) => {
            let i = at(inputs::PROVIDER_TLS.flag);
            i.error(format!(
                "{} {path}: cannot write the CA certificate there: {source}",
                i.name
            ))
        }
        ProviderError::Tls(other) => {
            let i = at(inputs::PROVIDER_TLS.flag);
            i.error(format!("{}: {other}", i.name))
        }
        other => {
            let i = at(inputs::PROVIDER_LISTEN.flag);
            i.error(format!("{}: {other}", i.name))
        }
    })?;
    Ok(Some(Downstream { fake, ref_pointer }))
}

/// The profile and carrier the flags ask for: an unknown profile names the closest one.
pub fn settings(target: &TargetSpec, origins: &Origins) -> Result<Settings> {
    let at = |flag| origins.input(flag);
    let name = target.provider.as_deref().unwrap_or("generic");
    let profile = profile::named(name).map_err(|e| {
        let i = at(inputs::PROVIDER.flag);
        i.error(format!("{} {e}", i.name))
    })?;
    let mut settings = Settings::of(profile);
    match (&target.provider_key_header, &target.provider_key_in_body) {
        (Some(_), Some(_)) => {
            let i = at(inputs::PROVIDER_KEY_IN_BODY.flag);
            return Err(i.error(format!(
                "{} and {} both say where the provider key travels: give one",
                i.name,
                inputs::PROVIDER_KEY_HEADER.flag
            )));
        }
        (Some(name), None) => {
            settings.carrier = KeyCarrier::Header {
                name: name.clone(),
                sf_string: false,
            }
        }
        (None, Some(pointer)) => {
            let p = check_pointer(pointer, at(inputs::PROVIDER_KEY_IN_BODY.flag))?;
            settings.carrier = KeyCarrier::Body(p);
        }
        (None, None) => {}
    }
    settings.correlate = target
        .provider_correlate
        .as_deref()
        .map(|p| check_pointer(p, at(inputs::PROVIDER_CORRELATE.flag)))
        .transpose()?;
    Ok(settings)
}
