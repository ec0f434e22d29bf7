//! `idem-check matrix`: one table across implementations, built from JSON reports.
//!
//! Each report (`--report-json`) becomes a column, titled by its label; each probe a row, in
//! catalog order. A cell shows the outcome and, for FAIL and WARN, the severity that decided it;
//! every FAIL, WARN, INCONCLUSIVE and ERROR has a footnote carrying its one-line reason. The
//! column whose report checked the bundled reference server is the baseline and comes first.
//! Markdown and a self-contained HTML page are rendered from the same [`Matrix`].

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::probes;

pub mod html;
pub mod markdown;

/// The part of a JSON report (schema `idem-check.report/1`) the matrix reads.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportFile {
    pub schema: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub target: String,
    #[serde(default)]
    pub suite: String,
    #[serde(default)]
    pub reference: bool,
    #[serde(default)]
    pub probes: Vec<ProbeEntry>,
}

/// One probe of a report.
#[derive(Debug, Clone, Deserialize)]
pub struct ProbeEntry {
    pub id: String,
    pub outcome: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub checks: Vec<CheckEntry>,
}

/// One check of a probe.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckEntry {
    pub severity: String,
    pub passed: bool,
}

/// A cell of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// PASS, FAIL, … or empty when the implementation's report lacks the probe.
    pub outcome: String,
    /// The severity of the worst failed check, for FAIL and WARN.
    pub severity: Option<String>,
    /// Footnote number, for FAIL, WARN, INCONCLUSIVE and ERROR.
    pub note: Option<usize>,
}

/// The whole table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    /// Column titles, baseline first.
    pub columns: Vec<String>,
    /// Which columns checked the reference server.
    pub baseline: Vec<bool>,
    /// (probe id, cells per column).
    pub rows: Vec<(String, Vec<Cell>)>,
    /// Footnotes in order: (column, probe id, one-line evidence).
    pub notes: Vec<(String, String, String)>,
}

/// The outcome symbol used in both renderings.
pub fn symbol(outcome: &str) -> &'static str {
    match outcome {
        "PASS" => "✔",
        "FAIL" => "✘",
        "WARN" => "⚠",
        "SKIP" => "–",
        "INCONCLUSIVE" => "?",
        "ERROR" => "!",
        _ => " ",
    }
}

/// Expands the inputs (files, or folders holding `*.json`) and reads every report. A name may
/// be given as `NAME=FILE` to title its column.
pub fn load(inputs: &[String]) -> Result<Vec<ReportFile>> {
    let mut files: Vec<(Option<String>, PathBuf)> = Vec::new();
    for input in inputs {
        let (name, path) = match input.split_once('=') {
            Some((n, p)) if !Path::new(input).exists() => (Some(n.to_string()), PathBuf::from(p)),
            _ => (None, PathBuf::from(input)),
        };
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(&path)
                .with_context(|| format!("cannot read the folder {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            found.sort();
            if found.is_empty() {
                bail!("{} holds no .json report", path.display());
            }
            files.extend(found.into_iter().map(|p| (None, p)));
        } else {
            files.push((name, path));
        }
    }
    if files.is_empty() {
        bail!(
            "give at least one JSON report (idem-check run --report-json FILE) or a folder of them"
        );
    }
    files
        .into_iter()
        .map(|(name, path)| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let mut r: ReportFile = serde_json::from_str(&text)
                .with_context(|| format!("{} is not an idem-check JSON report", path.display()))?;
            if !r.schema.starts_with("idem-check.report/") {
                bail!("{}: unknown schema {:?}", path.display(), r.schema);
            }
            if let Some(n) = name {
                r.label = n;
            } else if r.label.is_empty() {
                r.label = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
            }
            Ok(r)
        })
        .collect()
}

/// Builds the table: reference columns first, probes in catalog order (unknown ids last).
pub fn build(mut reports: Vec<ReportFile>) -> Matrix {
    reports.sort_by_key(|r| !r.reference);
    let mut ids: Vec<String> = probes::catalog()
        .iter()
        .map(|p| p.meta.id.to_string())
        .filter(|id| reports.iter().any(|r| r.probes.iter().any(|p| &p.id == id)))
        .collect();
    for r in &reports {
        for p in &r.probes {
            if !ids.contains(&p.id) {
                ids.push(p.id.clone());
            }
        }
    }
    let mut notes = Vec::new();
    let rows = ids
        .into_iter()
        .map(|id| {
            let cells = reports
                .iter()
                .map(|r| match r.probes.iter().find(|p| p.id == id) {
                    None => Cell {
                        outcome: String::new(),
                        severity: None,
                        note: None,
                    },
                    Some(p) => {
                        let decisive = matches!(p.outcome.as_str(), "FAIL" | "WARN");
                        let severity = decisive.then(|| worst_failed(p)).flatten();
                        // SKIP reasons only name a missing option; the others explain a verdict.
                        let explained =
                            decisive || matches!(p.outcome.as_str(), "INCONCLUSIVE" | "ERROR");
                        let note = explained.then(|| {
                            notes.push((r.label.clone(), id.clone(), p.reason.clone()));
                            notes.len()
                        });
                        Cell {
                            outcome: p.outcome.clone(),
                            severity,
                            note,
                        }
                    }
                })
                .collect();
            (id, cells)
        })
        .collect();
    Matrix {
        columns: reports.iter().map(|r| r.label.clone()).collect(),
        baseline: reports.iter().map(|r| r.reference).collect(),
        rows,
        notes,
    }
}

fn worst_failed(p: &ProbeEntry) -> Option<String> {
    const ORDER: [&str; 3] = ["critical", "required", "recommended"];
    ORDER
        .iter()
        .find(|s| p.checks.iter().any(|c| !c.passed && c.severity == **s))
        .map(|s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(label: &str, reference: bool, outcomes: &[(&str, &str)]) -> ReportFile {
        ReportFile {
            schema: "idem-check.report/1".into(),
            label: label.into(),
            target: String::new(),
            suite: "ietf-draft-07".into(),
            reference,
            probes: outcomes
                .iter()
                .map(|(id, o)| ProbeEntry {
                    id: id.to_string(),
                    outcome: o.to_string(),
                    reason: format!("{id} reason"),
                    checks: vec![CheckEntry {
                        severity: "critical".into(),
                        passed: *o != "FAIL",
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn baseline_first_catalog_order_and_footnotes() {
        let m = build(vec![
            report(
                "api",
                false,
                &[("replay-identity", "FAIL"), ("first-request", "PASS")],
            ),
            report(
                "reference",
                true,
                &[("first-request", "PASS"), ("replay-identity", "PASS")],
            ),
        ]);
        assert_eq!(m.columns, vec!["reference", "api"]);
        assert_eq!(m.rows[0].0, "first-request");
        assert_eq!(m.rows[1].1[1].severity.as_deref(), Some("critical"));
        assert_eq!(m.rows[1].1[1].note, Some(1));
        assert_eq!(m.notes[0].2, "replay-identity reason");
    }
}
