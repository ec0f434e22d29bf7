//! The pictures of one probe: the arrival spread of each burst, and the timeline of its
//! exchanges.
//!
//! A burst is what the race engine released together: consecutive exchanges that carry a
//! release time and share a role apart from its `i/N` suffix (`burst 3/10 1/16` …
//! `burst 3/10 16/16`). Its chart puts one mark per duplicate on a µs axis, from the first
//! release, coloured by the answer; the caption is the probe's own timeline fact about that burst
//! (how it was released and how tightly), so picture and text say the same thing.
//!
//! The timeline has one row per exchange on a ms axis from the start of the probe: a bar from
//! its first byte to its end, coloured by the answer, a tick where a burst released its final
//! byte, a diamond for an effect-counter read, and a shaded band while a held request was in
//! flight, so the duplicates that arrived during the hold line up under it.

use std::fmt::Write as _;

use super::markup::{esc, line, short};
use super::svg::{self, px, Scale, WIDTH};
use crate::http::exchange::Exchange;
use crate::redact::Secrets;
use crate::report::ProbeReport;

/// Rows drawn in one timeline; the exchanges after them are in the table only.
pub const MAX_BARS: usize = 300;

/// Characters of a row label (`#12 duplicate 3, wave 2/5`).
const LABEL_CHARS: usize = 30;

/// Exchanges the race engine released together.
pub struct Burst<'a> {
    /// The role without its `i/N` suffix: `burst 3/10`.
    pub label: String,
    pub exchanges: Vec<&'a Exchange>,
}

/// The bursts of a probe, in order. A member the engine never released (its connection failed
/// first, so it has no release time) stays in its burst by its role, so one burst is one chart
/// with the unanswered request drawn on it, not three charts around it.
pub fn bursts(exchanges: &[Exchange]) -> Vec<Burst<'_>> {
    let mut out: Vec<Burst> = Vec::new();
    let mut open = false;
    for e in exchanges {
        let label = &e.role.label;
        let positioned = e.role.position.is_some();
        match out.last_mut() {
            Some(b) if open && positioned && &b.label == label => b.exchanges.push(e),
            _ if e.release_us.is_some() => out.push(Burst {
                label: label.to_string(),
                exchanges: vec![e],
            }),
            _ => {
                open = false;
                continue;
            }
        }
        open = true;
    }
    out
}

/// Whether `e` read the effect counter (drawn as a point: its value is what matters).
fn is_counter_read(e: &Exchange) -> bool {
    e.role.reads_counter
}

/// Whether `e` was held in flight on purpose (`original (held)`).
fn is_held(e: &Exchange) -> bool {
    e.role.held
}

/// What an exchange got, in a few characters: `201`, `no answer`.
fn answer(e: &Exchange) -> String {
    match e.status() {
        Some(s) => s.to_string(),
        None => "no answer".into(),
    }
}

/// The arrival spread of burst `b` of probe `p`, as a figure.
pub fn arrival(p: &ProbeReport, b: &Burst, secrets: &Secrets) -> String {
    let releases: Vec<f64> = b.exchanges.iter().filter_map(|e| e.release_us).collect();
    let first_us = releases.iter().copied().fold(f64::INFINITY, f64::min);
    let spread = releases.iter().map(|r| r - first_us).fold(0.0, f64::max);
    let (lo, hi) = (
        b.exchanges.first().map_or(0, |e| e.n),
        b.exchanges.last().map_or(0, |e| e.n),
    );
    let range = format!("#{lo}–#{hi}");
    let caption = match p.timeline.iter().find(|t| t.contains(&format!("{range} "))) {
        Some(fact) => line(fact, secrets),
        None => format!(
            "{} · {range} released within {spread:.0} µs",
            line(&b.label, secrets)
        ),
    };
    let n = b.exchanges.len();
    let h = if n <= 32 {
        12.0
    } else {
        (384.0 / n as f64).max(2.0)
    };
    let (top, x0, x1) = (6.0, 56.0, WIDTH - 24.0);
    let bottom = top + n as f64 * h;
    let scale = Scale::zero_to(spread.max(1.0), x0, x1, 8);
    let mut out = String::new();
    let _ = write!(
        out,
        "<figure class=\"burst\"><figcaption>{caption}</figcaption>{}",
        svg::open(
            "arrival",
            bottom + 20.0,
            &format!("arrival of {range}, µs after the first release")
        )
    );
    out.push_str(&scale.axis(top, bottom, "µs"));
    for (i, e) in b.exchanges.iter().enumerate() {
        let y = top + (i as f64 + 0.5) * h;
        let r = (h * 0.4).min(4.0);
        match e.release_us {
            Some(released) => {
                let _ = write!(
                    out,
                    "<g><title>#{} {}: released +{:.0} µs → {}</title><circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\"/>",
                    e.n,
                    short(&e.role.to_string(), LABEL_CHARS, secrets),
                    released - first_us,
                    esc(&answer(e)),
                    svg::exchange_class(e),
                    px(scale.at(released - first_us)),
                    px(y),
                    px(r),
                );
            }
            // Never released: a cross on the axis's start, in the row it would have had.
            None => {
                let x = x0;
                let _ = write!(
                    out,
                    "<g><title>#{} {}: not released → {}</title><path class=\"{}\" d=\"M{} {}L{} {}M{} {}L{} {}\"/>",
                    e.n,
                    short(&e.role.to_string(), LABEL_CHARS, secrets),
                    esc(&answer(e)),
                    svg::exchange_class(e),
                    px(x - r),
                    px(y - r),
                    px(x + r),
                    px(y + r),
                    px(x - r),
                    px(y + r),
                    px(x + r),
                    px(y - r),
                );
            }
        }
        if h >= 12.0 {
            let _ = write!(
                out,
                "<text class=\"n\" x=\"{}\" y=\"{}\" text-anchor=\"end\">#{}</text>",
                px(x0 - 8.0),
                px(y + 3.5),
                e.n
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out.push_str(&svg::legend(&classes(b.exchanges.iter().copied(), &[])));
    out.push_str("</figure>\n");
    out
}

/// The legend entries for the answers among `exchanges`, then `extra`.
fn classes<'a>(
    exchanges: impl Iterator<Item = &'a Exchange>,
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut seen: Vec<&'static str> = exchanges.map(svg::exchange_class).collect();
    seen.sort_unstable();
    seen.dedup();
    let order = ["s2", "s3", "s409", "s4", "s5", "sn"];
    let mut out: Vec<(&str, &str)> = order
        .iter()
        .filter(|c| seen.contains(c))
        .map(|c| (*c, svg::class_name(c)))
        .collect();
    out.extend_from_slice(extra);
    out
}

/// The timeline of `p`'s exchanges, as a figure (`None` without exchanges).
pub fn timeline(p: &ProbeReport, secrets: &Secrets) -> Option<String> {
    if p.exchanges.is_empty() {
        return None;
    }
    let shown = &p.exchanges[..p.exchanges.len().min(MAX_BARS)];
    let n = shown.len();
    let h = if n <= 40 {
        16.0
    } else {
        (640.0 / n as f64).max(3.0)
    };
    let labelled = h >= 12.0;
    let (top, x0, x1) = (4.0, if labelled { 210.0 } else { 40.0 }, WIDTH - 64.0);
    let bottom = top + n as f64 * h;
    let end = shown
        .iter()
        .map(|e| e.end_ms().max(e.release_us.unwrap_or(0.0) / 1000.0))
        .fold(0.0, f64::max);
    let scale = Scale::zero_to(end, x0, x1, 8);
    let mut out = String::new();
    let _ = write!(
        out,
        "<figure class=\"timeline\">{}",
        svg::open(
            "timeline",
            bottom + 20.0,
            "each exchange from its first byte to its end, ms from the start of the probe"
        )
    );
    out.push_str(&scale.axis(top, bottom, "ms"));
    for e in shown.iter().filter(|e| is_held(e)) {
        let _ = write!(
            out,
            "<rect class=\"hold\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(scale.at(e.start_ms)),
            px(top),
            px(scale.len(e.duration_ms).max(1.0)),
            px(bottom - top)
        );
    }
    for (i, e) in shown.iter().enumerate() {
        let y = top + i as f64 * h;
        let _ = write!(
            out,
            "<g><title>#{} {}: +{:.1} ms, {:.1} ms → {}</title>",
            e.n,
            short(&e.role.to_string(), 80, secrets),
            e.start_ms.max(0.0),
            e.duration_ms.max(0.0),
            esc(&answer(e))
        );
        let class = svg::exchange_class(e);
        if is_counter_read(e) {
            let (cx, cy, r) = (
                scale.at(e.start_ms + e.duration_ms / 2.0),
                y + h / 2.0,
                (h * 0.4).min(5.0),
            );
            let _ = write!(
                out,
                "<polygon class=\"cnt\" points=\"{},{} {},{} {},{} {},{}\"/>",
                px(cx - r),
                px(cy),
                px(cx),
                px(cy - r),
                px(cx + r),
                px(cy),
                px(cx),
                px(cy + r)
            );
        } else {
            let held = if is_held(e) { " held" } else { "" };
            let _ = write!(
                out,
                "<rect class=\"{class}{held}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
                px(scale.at(e.start_ms)),
                px(y + h * 0.15),
                px(scale.len(e.duration_ms).max(1.5)),
                px(h * 0.7)
            );
        }
        if let Some(r) = e.release_us {
            let x = px(scale.at(r / 1000.0));
            let _ = write!(
                out,
                "<line class=\"rel\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
                px(y),
                px(y + h)
            );
        }
        if labelled {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">#{} {}</text><text class=\"a\" x=\"{}\" y=\"{}\">{}</text>",
                px(x0 - 6.0),
                px(y + h * 0.72),
                e.n,
                short(&e.role.to_string(), LABEL_CHARS, secrets),
                px(scale.at(e.end_ms()) + 4.0),
                px(y + h * 0.72),
                esc(&answer(e))
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    let mut extra = Vec::new();
    if shown.iter().any(is_held) {
        extra.push(("hold", "held in flight"));
    }
    if shown.iter().any(|e| e.release_us.is_some()) {
        extra.push(("rel", "final byte released"));
    }
    if shown.iter().any(is_counter_read) {
        extra.push(("cnt", "effect counter read"));
    }
    let drawn = shown.iter().filter(|e| !is_counter_read(e));
    out.push_str(&svg::legend(&classes(drawn, &extra)));
    if p.exchanges.len() > n {
        let _ = write!(
            out,
            "<p class=\"note\">the first {n} of {} exchanges are drawn</p>",
            p.exchanges.len()
        );
    }
    out.push_str("</figure>\n");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Role;

    #[test]
    fn consecutive_released_exchanges_of_one_role_make_a_burst() {
        let mut ex: Vec<Exchange> = (1..=7)
            .map(|n| crate::check::test_exchange(n, 201, "{}"))
            .collect();
        for (i, e) in ex.iter_mut().enumerate() {
            e.role = match i {
                0 | 3 => "count".into(),
                1 | 2 => Role::nth("burst 1/2", i, 2),
                _ => Role::nth("burst 2/2", i - 3, 3),
            };
            if !matches!(i, 0 | 3) {
                e.release_us = Some(100.0 + i as f64);
            }
        }
        let b = bursts(&ex);
        let shape: Vec<(&str, Vec<usize>)> = b
            .iter()
            .map(|b| (b.label.as_str(), b.exchanges.iter().map(|e| e.n).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![("burst 1/2", vec![2, 3]), ("burst 2/2", vec![5, 6, 7])]
        );
    }

    #[test]
    fn an_unreleased_member_stays_in_its_burst_and_is_drawn_on_its_chart() {
        let mut ex: Vec<Exchange> = (1..=5)
            .map(|n| crate::check::test_exchange(n, 201, "{}"))
            .collect();
        for (i, e) in ex.iter_mut().enumerate() {
            e.role = Role::nth("duplicate", i + 1, 5);
            e.release_us = (i != 2).then_some(100.0 + i as f64);
        }
        ex[2].outcome = Err(crate::http::HttpError::ClosedMidResponse(
            "connection reset".into(),
        ));
        let b = bursts(&ex);
        assert_eq!(b.len(), 1, "one burst, one chart");
        assert_eq!(b[0].exchanges.len(), 5);
        let who = crate::report::Identity {
            id: "concurrent-duplicates",
            group: "enforcement",
            section: "draft-07 §2.6",
            stimulus: "s",
            requirement: "r",
        };
        let p = crate::report::ProbeReport {
            exchanges: ex.clone(),
            ..crate::report::ProbeReport::verdict_only(who, crate::outcome::Outcome::Pass, "")
        };
        let chart = arrival(&p, &b[0], &Secrets::default());
        assert!(
            chart.contains("#3 duplicate 3/5: not released → no answer"),
            "{chart}"
        );
        assert!(chart.contains("#1–#5"), "{chart}");
    }
}
