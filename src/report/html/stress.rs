//! The load section of a `stress` page: the numbers of the run, the status counts, a latency
//! histogram per outcome and how the bursts were released.
//!
//! The stress run keeps only aggregates (STYLE: memory stays bounded however many requests are
//! sent), so this section draws them: [`StressView`] is what the stress report hands over.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::markup::{esc, line};
use super::svg::{self, px, Scale, WIDTH};
use crate::redact::Secrets;

/// The aggregates of a stress run, as the page shows them.
#[derive(Debug, Clone)]
pub struct StressView<'a> {
    pub keys: usize,
    pub keys_completed: usize,
    pub duplicates: usize,
    pub concurrency: usize,
    pub requests: u64,
    pub requests_per_second: f64,
    pub duration_ms: f64,
    pub interrupted: bool,
    /// Requests per status (`"201"`, `"409"`, `"no response"`).
    pub statuses: &'a BTreeMap<String, u64>,
    pub latency: Vec<Latency<'a>>,
    /// Bursts per way of releasing them (`"from 2 real-time threads"`).
    pub released: &'a BTreeMap<String, u64>,
    /// Release spread of the bursts in µs: p50, p90, max.
    pub spread_us: [f64; 3],
    pub violating_keys: usize,
    /// (key, why), the first ones.
    pub violations: Vec<(&'a str, &'a str)>,
}

/// The latency of one outcome class (`2xx`, `409`, …), in milliseconds.
#[derive(Debug, Clone)]
pub struct Latency<'a> {
    pub class: &'a str,
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// (upper bound in ms, requests), bounds doubling from the first.
    pub buckets: Vec<(f64, u64)>,
}

/// Violating keys listed on the page (the JSON report lists more).
const LISTED: usize = 20;

/// The load section.
pub fn section(v: &StressView, secrets: &Secrets) -> String {
    let mut out = String::from("<section class=\"overview\"><h2>Load</h2><dl class=\"meta\">");
    let _ = write!(
        out,
        "<dt>keys</dt><dd>{} ({} completed) × {} duplicates, at most {} in flight{}</dd>",
        v.keys,
        v.keys_completed,
        v.duplicates,
        v.concurrency,
        if v.interrupted { " (interrupted)" } else { "" }
    );
    let _ = write!(
        out,
        "<dt>requests</dt><dd>{} in {:.1} s = {:.0} requests/s</dd>",
        v.requests,
        v.duration_ms / 1000.0,
        v.requests_per_second
    );
    let _ = writeln!(
        out,
        "<dt>violating keys</dt><dd>{}</dd></dl>",
        v.violating_keys
    );
    if !v.statuses.is_empty() {
        out.push_str("<h3>Status counts</h3>\n");
        out.push_str(&statuses(v.statuses));
    }
    if !v.latency.is_empty() {
        out.push_str("<h3>Latency per outcome</h3>\n");
        out.push_str(&histograms(&v.latency));
        out.push_str(&percentiles(&v.latency));
    }
    if !v.released.is_empty() {
        out.push_str("<h3>Bursts</h3>\n");
        out.push_str(&release(v));
    }
    if !v.violations.is_empty() {
        out.push_str("<h3>Violating keys</h3>\n<ul class=\"facts\">");
        for (key, why) in v.violations.iter().take(LISTED) {
            let _ = writeln!(
                out,
                "<li><code>{}</code> {}</li>",
                line(key, secrets),
                line(why, secrets)
            );
        }
        if v.violating_keys > LISTED.min(v.violations.len()) {
            let _ = writeln!(
                out,
                "<li>… {} more in the JSON report</li>",
                v.violating_keys - LISTED.min(v.violations.len())
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    out
}

/// The colour class of a status as the stress counts name it.
fn class_of(status: &str) -> &'static str {
    svg::status_class(status.parse().ok())
}

/// One horizontal bar per status, its length the share of requests.
fn statuses(counts: &BTreeMap<String, u64>) -> String {
    let row = 22.0;
    let (x0, x1) = (110.0, WIDTH - 90.0);
    let max = counts.values().copied().max().unwrap_or(1) as f64;
    let scale = Scale::zero_to(max, x0, x1, 6);
    let height = counts.len() as f64 * row + 4.0;
    let mut out = svg::open("statuses", height, "requests per status");
    for (i, (status, n)) in counts.iter().enumerate() {
        let y = 2.0 + i as f64 * row;
        let _ = writeln!(
            out,
            "<g><title>{status}: {n} requests</title><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{status}</text><rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/><text class=\"a\" x=\"{}\" y=\"{}\">{n}</text></g>",
            px(x0 - 8.0),
            px(y + 15.0),
            class_of(status),
            px(x0),
            px(y + 3.0),
            px(scale.len(*n as f64).max(1.0)),
            px(row - 6.0),
            px(x0 + scale.len(*n as f64).max(1.0) + 6.0),
            px(y + 15.0),
            status = esc(status),
        );
    }
    out.push_str("</svg>\n");
    out
}

/// `0.064`, `0.13`, `2.0`, `16`, `1024`: a bucket bound in ms.
fn bound(ms: f64) -> String {
    if ms < 0.1 {
        format!("{ms:.3}")
    } else if ms < 1.0 {
        format!("{ms:.2}")
    } else if ms < 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

/// One histogram per outcome class, stacked, on shared buckets whose bounds double: each bar is
/// the requests of that class whose latency fell in the bucket, scaled to the class's fullest.
fn histograms(rows: &[Latency]) -> String {
    let mut bounds: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.buckets.iter().map(|b| b.0))
        .collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    if bounds.is_empty() {
        return String::new();
    }
    let (x0, x1, band) = (190.0, WIDTH - 10.0, 64.0);
    let slot = (x1 - x0) / bounds.len() as f64;
    let height = rows.len() as f64 * band + 24.0;
    let mut out = svg::open(
        "latency",
        height,
        "latency histogram per outcome, ms, buckets doubling",
    );
    for (i, r) in rows.iter().enumerate() {
        let top = i as f64 * band + 4.0;
        let base = top + band - 12.0;
        let fullest = r.buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64;
        let class = match r.class {
            "2xx" => "s2",
            "409" => "s409",
            "5xx" => "s5",
            "no response" => "sn",
            _ => "s4",
        };
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} ×{}</text><text class=\"a\" x=\"{}\" y=\"{}\" text-anchor=\"end\">p50 {} · p99 {} ms</text><line class=\"base\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            px(x0 - 10.0),
            px(top + 20.0),
            esc(r.class),
            r.count,
            px(x0 - 10.0),
            px(top + 36.0),
            bound(r.p50_ms),
            bound(r.p99_ms),
            px(x0),
            px(base),
            px(x1),
            px(base),
        );
        for (upper, n) in &r.buckets {
            if *n == 0 {
                continue;
            }
            let j = bounds
                .iter()
                .position(|b| (b - upper).abs() < 1e-9)
                .unwrap_or(0);
            let h = (*n as f64 / fullest * (band - 20.0)).max(1.0);
            let _ = writeln!(
                out,
                "<g><title>{}: {n} requests up to {} ms</title><rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></g>",
                esc(r.class),
                bound(*upper),
                px(x0 + j as f64 * slot + 1.0),
                px(base - h),
                px((slot - 2.0).max(1.0)),
                px(h),
            );
        }
    }
    let _ = write!(out, "<g class=\"axis\">");
    let every = bounds.len().div_ceil(12).max(1);
    for (j, b) in bounds.iter().enumerate().filter(|(j, _)| j % every == 0) {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">≤{}</text>",
            px(x0 + (j as f64 + 0.5) * slot),
            px(height - 6.0),
            bound(*b)
        );
    }
    out.push_str("</g></svg>");
    out
}

fn percentiles(rows: &[Latency]) -> String {
    let mut out = String::from(
        "<table class=\"nums\"><thead><tr><th>latency ms</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr></thead><tbody>",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
            esc(r.class),
            r.count,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.max_ms
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

/// How the bursts were released, and their spread on a µs axis (p50, p90, max).
fn release(v: &StressView) -> String {
    let mut out = String::from("<ul class=\"facts\">");
    for (how, n) in v.released {
        let _ = writeln!(out, "<li>{n} released {}</li>", esc(how));
    }
    out.push_str("</ul>\n");
    let [p50, p90, max] = v.spread_us;
    let (x0, x1) = (110.0, WIDTH - 30.0);
    let scale = Scale::zero_to(max.max(1.0), x0, x1, 8);
    let mut svg_out = svg::open("spread", 62.0, "release spread of the bursts, µs");
    svg_out.push_str(&scale.axis(12.0, 42.0, "µs"));
    let _ = write!(
        svg_out,
        "<text x=\"{}\" y=\"31\" text-anchor=\"end\">spread</text><rect class=\"span\" x=\"{}\" y=\"20\" width=\"{}\" height=\"14\"/>",
        px(x0 - 8.0),
        px(x0),
        px(scale.len(p90).max(1.0)),
    );
    for (name, at) in [("p50", p50), ("p90", p90), ("max", max)] {
        let x = px(scale.at(at));
        let _ = write!(
            svg_out,
            "<g><title>{name}: {at:.0} µs</title><line class=\"tick\" x1=\"{x}\" y1=\"16\" x2=\"{x}\" y2=\"38\"/><text class=\"a\" x=\"{x}\" y=\"10\" text-anchor=\"middle\">{name}</text></g>"
        );
    }
    svg_out.push_str("</svg>\n");
    let _ = write!(
        out,
        "<figure><figcaption>release spread: p50 {p50:.0} µs · p90 {p90:.0} µs · max {max:.0} µs (from the first final byte of a burst to its last)</figcaption>{svg_out}</figure>"
    );
    out
}
