//! The matrix as one self-contained HTML page (inline CSS, no scripts, no external assets), so
//! it can be attached to a CI run or published as is. The output is also well-formed XML, which
//! keeps it checkable by a plain parser.

use super::{symbol, Matrix};
use crate::redact::sanitize_line;

/// Renders the page.
pub fn render(m: &Matrix) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\
<title>Idempotency-Key conformance</title><style>\
body{font-family:system-ui,sans-serif;margin:2rem;color:#1b1f23}\
table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:.35rem .7rem;text-align:center}\
th:first-child,td:first-child{text-align:left;font-family:ui-monospace,monospace}\
thead th{background:#f6f8fa}.PASS{background:#dafbe1}.FAIL{background:#ffebe9;font-weight:600}\
.WARN{background:#fff8c5}.SKIP,.INCONCLUSIVE{background:#f6f8fa;color:#57606a}.ERROR{background:#ffd8b5}\
.base{font-weight:400;color:#57606a}ol{max-width:60rem}</style></head><body>\n\
<h1>Idempotency-Key conformance</h1>\n<table>\n<thead><tr><th>probe</th>",
    );
    for (c, base) in m.columns.iter().zip(&m.baseline) {
        out.push_str(&format!("<th>{}", xml(c)));
        if *base {
            out.push_str(" <span class=\"base\">(baseline)</span>");
        }
        out.push_str("</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (id, cells) in &m.rows {
        out.push_str(&format!("<tr><td>{}</td>", xml(id)));
        for cell in cells {
            if cell.outcome.is_empty() {
                out.push_str("<td></td>");
                continue;
            }
            out.push_str(&format!(
                "<td class=\"{}\">{} {}",
                xml(&cell.outcome),
                symbol(&cell.outcome),
                xml(&cell.outcome)
            ));
            if let Some(s) = &cell.severity {
                out.push_str(&format!(" ({})", xml(s)));
            }
            if let Some(n) = cell.note {
                out.push_str(&format!(" <a href=\"#n{n}\">[{n}]</a>"));
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str(
        "</tbody>\n</table>\n<p>✔ PASS · ✘ FAIL · ⚠ WARN · – SKIP · ? INCONCLUSIVE · ! ERROR</p>\n",
    );
    if !m.notes.is_empty() {
        out.push_str("<ol>\n");
        for (i, (col, id, reason)) in m.notes.iter().enumerate() {
            out.push_str(&format!(
                "<li id=\"n{}\"><b>{}</b> · <code>{}</code>: {}</li>\n",
                i + 1,
                xml(col),
                xml(id),
                xml(reason)
            ));
        }
        out.push_str("</ol>\n");
    }
    out.push_str("</body></html>\n");
    out
}

/// Escapes text for HTML/XML content and attributes, after making it printable.
fn xml(s: &str) -> String {
    sanitize_line(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
