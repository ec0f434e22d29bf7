//! The probe catalog: one file per CONTRACT id, registered here in catalog order.
//!
//! A probe is a [`ProbeDef`]: its identity ([`ProbeMeta`]: id, group, section, stimulus,
//! requirement, the checks it makes and what it needs) plus an async `run` that sends requests
//! through the [`ProbeCtx`] and pushes checks built by [`crate::check`]'s verifiers. Severities
//! and expected statuses come from the suite through [`ProbeCtx::spec`], never from the probe.
//!
//! The authoring API is shaped so the usual mistakes do not compile or cannot reach a verdict:
//! a check is named by its typed [`CheckDecl`] constant (`ctx.spec(&SAME_BODY)`), never by a
//! string; `run` returns `Result<(), Stop>`, so "count before" and "send the original" end the
//! probe with `?`; the runner checks [`ProbeMeta::needs`] before `run` is called, and a probe
//! that ends with neither a check nor a stop is an ERROR, never "0 checks passed"; executions
//! are only counted through the run's one effects meter ([`crate::effects`]).

use anyhow::{bail, Result};
use futures::future::BoxFuture;

pub use crate::check::CheckDecl;
use crate::outcome::Stop;
use crate::suite::Suite;

mod ctx;
pub mod downstream;
pub mod hold;
pub mod kit;
mod need;
#[cfg(test)]
mod prov_judging;
mod shared;
pub use crate::http::Request;
pub use ctx::{ProbeCtx, Session};
pub use need::{typed::*, Need, Precondition};
use shared::accepted_then_recognised;

pub mod bare_token;
pub mod concurrent_duplicates;
pub mod cross_endpoint;
pub mod cross_replica;
pub mod distinct_keys_independent;
pub mod duplicate_header;
pub mod empty_key;
pub mod error_not_cached;
pub mod escaped_key;
pub mod first_request;
pub mod get_ignored;
pub mod header_name_case;
pub mod key_expiry;
pub mod key_parameters;
pub mod loser_does_not_unlock;
pub mod lost_response;
pub mod malformed_key;
pub mod mismatch_no_poison;
pub mod missing_key;
pub mod oversized_key;
pub mod payload_mismatch;
pub mod prov_client_replay;
pub mod prov_concurrent_duplicates;
pub mod prov_correlation;
pub mod prov_crash_after_call;
pub mod prov_distinct_keys;
pub mod prov_in_progress_conflict;
pub mod prov_key_present;
pub mod prov_lease_fencing;
pub mod prov_lost_provider_response;
pub mod prov_mismatch_no_call;
pub mod prov_operation_scope;
pub mod prov_provider_forgets;
pub mod prov_refused_no_call;
pub mod prov_restart_replay;
pub mod prov_same_key_on_provider_retry;
pub mod prov_tenant_scope;
pub mod quoted_key;
pub mod replay_identity;
pub mod reserialized_retry;
pub mod restart_persistence;
pub mod spoofed_marker_headers;
pub mod store_outage;
pub mod tenant_isolation;
pub mod wedged_key_recovery;

/// The catalog's groups (CONTRACT headings); `--group` selects by these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    KeySyntax,
    Enforcement,
    Scope,
    Durability,
    /// What the API passes on to the payment provider it calls.
    Downstream,
}

impl Group {
    pub fn as_str(self) -> &'static str {
        match self {
            Group::KeySyntax => "key-syntax",
            Group::Enforcement => "enforcement",
            Group::Scope => "scope",
            Group::Durability => "durability",
            Group::Downstream => "downstream",
        }
    }
}

/// A probe's identity, as listed by `idem-check list` and written into every report.
#[derive(Debug, Clone, Copy)]
pub struct ProbeMeta {
    /// Stable CONTRACT id: what `--probe` selects and what JUnit testcases are named after.
    pub id: &'static str,
    pub group: Group,
    /// Where the requirement comes from ("draft-07 §2.7").
    pub section: &'static str,
    /// "Sends …".
    pub stimulus: &'static str,
    /// The normative sentence, restated.
    pub requirement: &'static str,
    pub checks: &'static [CheckDecl],
    /// Preconditions; the probe SKIPs when one is missing. Soft needs (a probe that works
    /// without, but less well) are not listed here.
    pub needs: &'static [Need],
    /// Probes whose behaviour this one builds on. When one of them FAILs in the same run, this
    /// probe's non-critical failures are reported as INCONCLUSIVE naming it, instead of a second
    /// FAIL for the same defect; critical failures always stay FAIL.
    pub prerequisites: &'static [&'static str],
}

/// The async body of a probe: sends, pushes checks into the context, and returns how it stopped
/// (`Ok(())` when it judged everything it meant to).
pub type RunFn = for<'a> fn(&'a mut ProbeCtx) -> BoxFuture<'a, Result<(), Stop>>;

/// A catalog entry.
#[derive(Clone, Copy)]
pub struct ProbeDef {
    pub meta: ProbeMeta,
    pub run: RunFn,
}

/// Every probe, in catalog order: the order of reports and of `idem-check list`.
pub fn catalog() -> Vec<ProbeDef> {
    vec![
        first_request::PROBE,
        missing_key::PROBE,
        quoted_key::PROBE,
        escaped_key::PROBE,
        bare_token::PROBE,
        malformed_key::PROBE,
        duplicate_header::PROBE,
        empty_key::PROBE,
        oversized_key::PROBE,
        key_parameters::PROBE,
        replay_identity::PROBE,
        concurrent_duplicates::PROBE,
        payload_mismatch::PROBE,
        mismatch_no_poison::PROBE,
        reserialized_retry::PROBE,
        distinct_keys_independent::PROBE,
        lost_response::PROBE,
        error_not_cached::PROBE,
        loser_does_not_unlock::PROBE,
        spoofed_marker_headers::PROBE,
        wedged_key_recovery::PROBE,
        tenant_isolation::PROBE,
        cross_endpoint::PROBE,
        restart_persistence::PROBE,
        cross_replica::PROBE,
        key_expiry::PROBE,
        get_ignored::PROBE,
        header_name_case::PROBE,
        store_outage::PROBE,
        prov_key_present::PROBE,
        prov_same_key_on_provider_retry::PROBE,
        prov_lost_provider_response::PROBE,
        prov_in_progress_conflict::PROBE,
        prov_client_replay::PROBE,
        prov_concurrent_duplicates::PROBE,
        prov_distinct_keys::PROBE,
        prov_tenant_scope::PROBE,
        prov_operation_scope::PROBE,
        prov_mismatch_no_call::PROBE,
        prov_refused_no_call::PROBE,
        prov_correlation::PROBE,
        prov_crash_after_call::PROBE,
        prov_restart_replay::PROBE,
        prov_lease_fencing::PROBE,
        prov_provider_forgets::PROBE,
    ]
}

/// The catalog entry with this id.
pub fn find(id: &str) -> Option<ProbeDef> {
    catalog().into_iter().find(|p| p.meta.id == id)
}

/// The suite's probes, narrowed by `--probe` and `--skip`, in catalog order. A name is a probe
/// id or a group (`key-syntax` stands for its probes); anything else is an error that lists the
/// known names. Every command selects here, so a group means the same to all of them.
pub fn select(suite: &Suite, only: &[String], skip: &[String]) -> Result<Vec<ProbeDef>> {
    let (only, skip) = (expand_groups(only)?, expand_groups(skip)?);
    Ok(catalog()
        .into_iter()
        .filter(|p| suite.enabled(p.meta.id))
        .filter(|p| only.is_empty() || only.contains(&p.meta.id))
        .filter(|p| !skip.contains(&p.meta.id))
        .collect())
}

/// The probe ids `names` stand for: a probe id stands for itself, a group for its probes.
fn expand_groups(names: &[String]) -> Result<Vec<&'static str>> {
    let catalog = catalog();
    let mut ids = Vec::new();
    for name in names {
        let matching: Vec<&'static str> = catalog
            .iter()
            .filter(|p| p.meta.id == name || p.meta.group.as_str() == name)
            .map(|p| p.meta.id)
            .collect();
        if matching.is_empty() {
            let known: Vec<&str> = catalog.iter().map(|p| p.meta.id).collect();
            let mut groups: Vec<&str> = Vec::new();
            for group in catalog.iter().map(|p| p.meta.group.as_str()) {
                if !groups.contains(&group) {
                    groups.push(group);
                }
            }
            let hint = crate::suggest::closest(name, known.iter().chain(&groups).copied())
                .map(|near| format!(" (did you mean {near:?}?)"))
                .unwrap_or_default();
            bail!(
                "unknown probe {name:?}{hint}; known probes: {}; groups: {} (see `idem-check list`)",
                known.join(", "),
                groups.join(", ")
            );
        }
        ids.extend(matching);
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The ids of the CONTRACT catalog, in catalog order; a renamed or reordered probe must be
    /// changed here on purpose.
    const CONTRACT_ORDER: &[&str] = &[
        "first-request",
        "missing-key",
        "quoted-key",
        "escaped-key",
        "bare-token",
        "malformed-key",
        "duplicate-header",
        "empty-key",
        "oversized-key",
        "key-parameters",
        "replay-identity",
        "concurrent-duplicates",
        "payload-mismatch",
        "mismatch-no-poison",
        "reserialized-retry",
        "distinct-keys-independent",
        "lost-response",
        "error-not-cached",
        "loser-does-not-unlock",
        "spoofed-marker-headers",
        "wedged-key-recovery",
        "tenant-isolation",
        "cross-endpoint",
        "restart-persistence",
        "cross-replica",
        "key-expiry",
        "get-ignored",
        "header-name-case",
        "store-outage",
        "prov-key-present",
        "prov-same-key-on-provider-retry",
        "prov-lost-provider-response",
        "prov-in-progress-conflict",
        "prov-client-replay",
        "prov-concurrent-duplicates",
        "prov-distinct-keys",
        "prov-tenant-scope",
        "prov-operation-scope",
        "prov-mismatch-no-call",
        "prov-refused-no-call",
        "prov-correlation",
        "prov-crash-after-call",
        "prov-restart-replay",
        "prov-lease-fencing",
        "prov-provider-forgets",
    ];

    #[test]
    fn every_probe_declares_its_five_things() {
        let mut ids = HashSet::new();
        for p in catalog() {
            let m = p.meta;
            assert!(ids.insert(m.id), "duplicate id {}", m.id);
            assert!(!m.section.is_empty(), "{}: empty section", m.id);
            assert!(m.stimulus.starts_with("Sends"), "{}: stimulus", m.id);
            assert!(!m.requirement.is_empty(), "{}: empty requirement", m.id);
            assert!(!m.checks.is_empty(), "{}: no checks", m.id);
            let mut check_ids = HashSet::new();
            for c in m.checks {
                assert!(check_ids.insert(c.id), "{}: duplicate check {}", m.id, c.id);
                assert!(!c.what.is_empty());
            }
        }
    }

    #[test]
    fn registry_follows_the_contract_catalog_order() {
        let ids: Vec<&str> = catalog().iter().map(|p| p.meta.id).collect();
        assert_eq!(
            ids, CONTRACT_ORDER,
            "the registry must hold every CONTRACT id, in catalog order"
        );
    }
}
