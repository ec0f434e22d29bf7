//! The matrix as GitHub-flavoured Markdown.

use super::{symbol, Matrix};
use crate::redact::sanitize_line;

/// Renders the table, then one footnote per FAIL, WARN, INCONCLUSIVE or ERROR.
pub fn render(m: &Matrix) -> String {
    let esc = |s: &str| sanitize_line(s).replace('|', "\\|");
    let mut out = String::from("# Idempotency-Key conformance\n\n| probe |");
    for (c, base) in m.columns.iter().zip(&m.baseline) {
        out.push_str(&format!(
            " {}{} |",
            esc(c),
            if *base { " (baseline)" } else { "" }
        ));
    }
    out.push_str("\n| --- |");
    out.push_str(&" :---: |".repeat(m.columns.len()));
    out.push('\n');
    for (id, cells) in &m.rows {
        out.push_str(&format!("| `{id}` |"));
        for cell in cells {
            if cell.outcome.is_empty() {
                out.push_str(" |");
                continue;
            }
            out.push_str(&format!(" {} {}", symbol(&cell.outcome), cell.outcome));
            if let Some(s) = &cell.severity {
                out.push_str(&format!(" ({s})"));
            }
            if let Some(n) = cell.note {
                out.push_str(&format!(" [{n}]"));
            }
            out.push_str(" |");
        }
        out.push('\n');
    }
    out.push_str("\n✔ PASS · ✘ FAIL · ⚠ WARN · – SKIP · ? INCONCLUSIVE · ! ERROR\n");
    if !m.notes.is_empty() {
        out.push('\n');
        for (i, (col, id, reason)) in m.notes.iter().enumerate() {
            out.push_str(&format!(
                "{}. {} · `{id}`: {}\n",
                i + 1,
                esc(col),
                esc(reason)
            ));
        }
    }
    out
}
