//! What every chart of the page shares: a linear scale with round ticks, the axis drawn from it,
//! the colour class of an answer, and coordinates written compactly.
//!
//! Charts are inline SVG styled by the page's CSS classes (no `style` attributes, no script);
//! each mark carries a `<title>`, which a browser shows on hover, with the exchange it stands
//! for.

use std::fmt::Write as _;

use crate::http::exchange::Exchange;

/// Width of every chart's view box; the page scales it to the column.
pub const WIDTH: f64 = 900.0;

/// A linear map from `[0, max]` onto the pixels `[x0, x1]`, with `max` rounded up to a tick.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    max: f64,
    x0: f64,
    x1: f64,
    step: f64,
}

impl Scale {
    /// About `ticks` round steps (1, 2 or 5 × 10ⁿ) covering `[0, max]`.
    pub fn zero_to(max: f64, x0: f64, x1: f64, ticks: usize) -> Scale {
        let max = if max.is_finite() && max > 0.0 {
            max
        } else {
            1.0
        };
        let step = nice_step(max, ticks.max(1));
        Scale {
            max: (max / step).ceil() * step,
            x0,
            x1,
            step,
        }
    }

    /// The pixel of `v` (clamped to the scale).
    pub fn at(&self, v: f64) -> f64 {
        let v = if v.is_finite() {
            v.clamp(0.0, self.max)
        } else {
            0.0
        };
        self.x0 + v / self.max * (self.x1 - self.x0)
    }

    /// The length in pixels of a span of `v`.
    pub fn len(&self, v: f64) -> f64 {
        self.at(v) - self.x0
    }

    /// Vertical grid lines from `top` to `bottom`, each tick labelled under `bottom` with its
    /// value and, on the last one, `unit`.
    pub fn axis(&self, top: f64, bottom: f64, unit: &str) -> String {
        let mut out = String::from("<g class=\"axis\">");
        let decimals = decimals(self.step);
        let n = (self.max / self.step).round() as usize;
        for i in 0..=n {
            let v = i as f64 * self.step;
            let x = self.at(v);
            let label = format!("{v:.decimals$}");
            let unit = if i == n {
                format!(" {unit}")
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "<line x1=\"{x}\" y1=\"{t}\" x2=\"{x}\" y2=\"{b}\"/><text x=\"{x}\" y=\"{ly}\" text-anchor=\"middle\">{label}{unit}</text>",
                x = px(x),
                t = px(top),
                b = px(bottom),
                ly = px(bottom + 13.0),
            );
        }
        out.push_str("</g>");
        out
    }
}

/// 1, 2 or 5 × 10ⁿ, the one nearest to `span / ticks`.
fn nice_step(span: f64, ticks: usize) -> f64 {
    let raw = span / ticks as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let f = raw / magnitude;
    let m = if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    };
    m * magnitude
}

/// Decimals a tick label of `step` needs (0 for whole steps).
fn decimals(step: f64) -> usize {
    if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    }
}

/// A coordinate with at most one decimal, without a trailing `.0`.
pub fn px(v: f64) -> String {
    // `+ 0.0` turns a negative zero into a zero.
    let v = (v * 10.0).round() / 10.0 + 0.0;
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The opening tag of a chart `height` pixels tall, with its class and an accessible name.
pub fn open(class: &str, height: f64, label: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart {class}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{label}\">",
        px(WIDTH),
        px(height),
        px(WIDTH),
        px(height)
    )
}

/// The colour class of an answer: 2xx, 409, another 4xx, 5xx, another status, or none.
pub fn status_class(status: Option<u16>) -> &'static str {
    match status {
        None => "sn",
        Some(200..=299) => "s2",
        Some(409) => "s409",
        Some(400..=499) => "s4",
        Some(500..=599) => "s5",
        Some(_) => "s3",
    }
}

/// The status of `e` as [`status_class`] reads it.
pub fn exchange_class(e: &Exchange) -> &'static str {
    status_class(e.status())
}

/// What each colour class means, for legends.
pub fn class_name(class: &str) -> &'static str {
    match class {
        "s2" => "2xx",
        "s409" => "409",
        "s4" => "other 4xx",
        "s5" => "5xx",
        "s3" => "other status",
        _ => "no answer",
    }
}

/// A legend of `items` (colour class, label), in the order given.
pub fn legend(items: &[(&str, &str)]) -> String {
    let mut out = String::from("<p class=\"legend\">");
    for (class, label) in items {
        let _ = write!(out, "<span class=\"key {class}\"></span>{label} ");
    }
    out.truncate(out.trim_end().len());
    out.push_str("</p>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let s = Scale::zero_to(51.0, 0.0, 100.0, 5);
        assert_eq!(s.step, 10.0);
        assert_eq!(s.max, 60.0);
        assert_eq!(px(s.at(30.0)), "50");
        let s = Scale::zero_to(0.37, 0.0, 100.0, 4);
        assert_eq!((s.step, decimals(s.step)), (0.1, 1));
        assert_eq!(s.at(f64::NAN), 0.0);
        assert_eq!(Scale::zero_to(0.0, 0.0, 10.0, 4).max, 1.0);
    }

    #[test]
    fn coordinates_are_short() {
        assert_eq!(px(12.0), "12");
        assert_eq!(px(12.345), "12.3");
        assert_eq!(px(-0.04), "0");
    }
}
