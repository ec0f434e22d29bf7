//! `idem-check list` and `idem-check explain ID`: the catalog as a suite sets it, every probe
//! on a few lines or one probe in full.

use std::fmt::Write as _;

use clap::Args;

use super::{emit, Result};
use idem_check::catalog::load_suite;
use idem_check::exit::ExitCode;
use idem_check::probes;

/// `idem-check list`.
#[derive(Args)]
pub struct ListArgs {
    /// The suite whose expectations to show.
    #[arg(long, default_value = idem_check::suite::DEFAULT_SUITE, value_name = "NAME|FILE")]
    pub suite: String,
}

pub(super) fn list(args: &ListArgs) -> Result<ExitCode> {
    let suite = load_suite(&args.suite)?;
    let mut out = String::new();
    let _ = writeln!(out, "suite {}: {}\n", suite.name, suite.description);
    let _ = writeln!(
        out,
        "{:<26} {:<12} {:<32} needs",
        "probe", "group", "section"
    );
    for p in probes::catalog() {
        let m = p.meta;
        let needs = if m.needs.is_empty() {
            "-".to_string()
        } else {
            m.needs
                .iter()
                .map(|n| n.option())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let off = if suite.enabled(m.id) {
            ""
        } else {
            "  (not in this suite)"
        };
        let _ = writeln!(
            out,
            "{:<26} {:<12} {:<32} {needs}{off}",
            m.id,
            m.group.as_str(),
            m.section
        );
        for c in m.checks {
            let (sev, expect) = suite
                .check(m.id, c.id)
                .map(|s| (s.severity.as_str(), s.expect.clone()))
                .unwrap_or(("-", Vec::new()));
            let expect = if expect.is_empty() {
                String::new()
            } else {
                format!(
                    " (expects {})",
                    expect
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" or ")
                )
            };
            let _ = writeln!(out, "    {sev:<12} {}{expect}", c.what);
        }
    }
    out.push_str(&idem_check::client::checks::listing());
    out.push_str(&idem_check::webhook::checks::listing());
    emit(&out)?;
    Ok(ExitCode::Ok)
}

pub(super) fn explain(id: &str, suite: &str) -> Result<ExitCode> {
    if let Some(c) = idem_check::webhook::checks::find(id) {
        emit(&idem_check::webhook::checks::explanation(c))?;
        return Ok(ExitCode::Ok);
    }
    let Some(p) = probes::find(id) else {
        let known: Vec<&str> = probes::catalog()
            .iter()
            .map(|p| p.meta.id)
            .chain(idem_check::webhook::checks::CATALOG.iter().map(|c| c.id))
            .collect();
        let hint = idem_check::suggest::closest(id, known.iter().copied())
            .map(|near| format!(" (did you mean {near:?}?)"))
            .unwrap_or_default();
        return Err(anyhow::anyhow!(
            "unknown probe {id:?}{hint}; known probes: {}",
            known.join(", ")
        )
        .into());
    };
    let suite = load_suite(suite)?;
    let m = p.meta;
    let mut out = String::new();
    let _ = writeln!(out, "{}  ({}, {})", m.id, m.group.as_str(), m.section);
    let _ = writeln!(out, "stimulus:    {}", m.stimulus);
    let _ = writeln!(out, "requirement: {}", m.requirement);
    let _ = writeln!(out, "checks in suite {}:", suite.name);
    for c in m.checks {
        if let Some(s) = suite.check(m.id, c.id) {
            let expect = s
                .expect
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(" or ");
            let _ = writeln!(
                out,
                "  {:<12} {:<20} {}{}",
                s.severity.as_str(),
                c.id,
                c.what,
                if expect.is_empty() {
                    String::new()
                } else {
                    format!(" (expects {expect})")
                }
            );
        }
    }
    for n in m.needs {
        let _ = writeln!(out, "needs: {} ({})", n.what(), n.option());
    }
    emit(&out)?;
    Ok(ExitCode::Ok)
}
