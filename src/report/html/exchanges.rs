//! The exchange table of one probe: one row per exchange, each opening to its request and
//! response transcript; a burst folds into one row that opens to its members.
//!
//! The cells and transcripts are the other formats' own ([`ExchangeLine`], [`evidence::dump`]):
//! secrets masked by role, bodies cut at the format's cap with their size and digest, control and
//! bidi characters shown as escapes. What a page may hold in all is bounded by a [`Budget`]
//! shared by every probe, spent on failures first (see [`super`]): a row or a transcript that
//! does not fit is replaced by a line saying so, and the JSON report keeps every exchange.

use std::fmt::Write as _;

use super::markup::esc;
use crate::http::exchange::Exchange;
use crate::report::evidence;
use crate::report::exchange_line::ExchangeLine;
use crate::report::view::ProbeView;
use crate::report::RenderOptions;

/// Exchanges listed per probe; a probe that sent more (a long stress sample) lists these.
pub const MAX_LISTED: usize = 400;

/// Bytes of markup a page may spend on exchange rows, transcripts and charts, all probes
/// together: with the page's fixed parts it keeps a report near the size of the JUnit one, even
/// against a server that answers 1 MiB bodies.
pub const PAGE_BUDGET: usize = 768 * 1024;

/// What is left of the page's budget.
#[derive(Debug)]
pub struct Budget {
    left: usize,
    /// Pieces left out because they did not fit.
    pub left_out: usize,
}

impl Budget {
    pub fn new(bytes: usize) -> Self {
        Budget {
            left: bytes,
            left_out: 0,
        }
    }

    /// Whether a piece of at least `bytes` could still fit: lets a caller skip rendering what
    /// would be refused anyway.
    pub fn could_fit(&mut self, bytes: usize) -> bool {
        if bytes <= self.left {
            true
        } else {
            self.left_out += 1;
            false
        }
    }

    /// `piece` if it fits in what is left (and spends it), else `None`.
    pub fn take(&mut self, piece: String) -> Option<String> {
        if piece.len() <= self.left {
            self.left -= piece.len();
            Some(piece)
        } else {
            self.left_out += 1;
            None
        }
    }
}

/// The anchor of exchange `n` of the probe anchored at `probe`.
pub fn anchor(probe: &str, n: usize) -> String {
    format!("{probe}-x{n}")
}

/// The exchange table of the probe `view` shows (empty without exchanges). Rows come before
/// transcripts in the budget, so a page short of room still lists every exchange it can.
pub fn table(
    view: &ProbeView,
    probe_anchor: &str,
    budget: &mut Budget,
    opts: &RenderOptions,
) -> String {
    let p = view.probe;
    if p.exchanges.is_empty() {
        return String::new();
    }
    let listed = &p.exchanges[..p.exchanges.len().min(MAX_LISTED)];
    // The view's runs, up to the last listed exchange.
    let mut left = listed.len();
    let runs: Vec<&[&Exchange]> = view
        .runs
        .iter()
        .map_while(|run| {
            let take = run.len().min(left);
            left -= take;
            (take > 0).then(|| &run[..take])
        })
        .collect();
    // Transcripts: the exchanges failed checks cite first, then the rest in order.
    let cited = &view.cited;
    let mut dumps: Vec<Option<String>> = vec![None; listed.len()];
    let order = listed
        .iter()
        .enumerate()
        .filter(|(_, e)| cited.contains(&e.n))
        .chain(
            listed
                .iter()
                .enumerate()
                .filter(|(_, e)| !cited.contains(&e.n)),
        );
    let keys = &view.keys;
    let mut rows: Vec<Option<String>> = Vec::with_capacity(listed.len());
    for e in listed {
        rows.push(budget.take(cells(&ExchangeLine::of(e, &opts.secrets, keys))));
    }
    for (i, e) in order.collect::<Vec<_>>() {
        if rows[i].is_some() && budget.could_fit(smallest_transcript(e, opts.max_body)) {
            dumps[i] = budget.take(transcript(e, opts));
        }
    }
    let mut out = String::from("<div class=\"xs\">");
    let mut i = 0;
    for run in runs {
        let members = i..i + run.len();
        i += run.len();
        let entries: String = members
            .clone()
            .map(|j| entry(&listed[j], &rows[j], &dumps[j], probe_anchor))
            .collect();
        if run.len() == 1 {
            out.push_str(&entries);
            continue;
        }
        let line = ExchangeLine::folded(run, &opts.secrets, keys);
        let _ = write!(
            out,
            "<details class=\"x fold\"><summary>{}</summary><div class=\"members\">{entries}</div></details>",
            cells(&line)
        );
    }
    if p.exchanges.len() > listed.len() {
        let _ = write!(
            out,
            "<p class=\"note\">{} more exchanges are in the JSON report</p>",
            p.exchanges.len() - listed.len()
        );
    }
    out.push_str("</div>");
    out
}

/// One exchange: its row, opening to its transcript.
fn entry(e: &Exchange, row: &Option<String>, dump: &Option<String>, probe: &str) -> String {
    let id = anchor(probe, e.n);
    match (row, dump) {
        (None, _) => format!(
            "<p class=\"note\" id=\"{id}\">#{} left out: the page keeps within its size bound; the JSON report has it</p>\n",
            e.n
        ),
        (Some(row), Some(dump)) => {
            format!("<details class=\"x\" id=\"{id}\"><summary>{row}</summary>{dump}</details>\n")
        }
        (Some(row), None) => format!(
            "<details class=\"x\" id=\"{id}\"><summary>{row}</summary><p class=\"note\">transcript left out: the page keeps within its size bound; the JSON report has it</p></details>\n"
        ),
    }
}

/// The cells of a row: number, start, duration, role, method, path, key, answer.
fn cells(l: &ExchangeLine) -> String {
    let result_class = match l.error {
        Some(_) => "r err",
        None => "r",
    };
    format!(
        "<span class=\"n\">{}</span><span class=\"tm\">{}</span><span class=\"tm\">{}</span><span class=\"role\">{}</span><span class=\"m\">{}</span><span class=\"path\">{}</span><span class=\"k\">{}</span><span class=\"{result_class}\">{}</span>",
        esc(&l.n),
        esc(&l.start),
        esc(&l.duration),
        esc(&l.role),
        esc(&l.method),
        esc(&l.path),
        esc(&l.key),
        esc(&l.result),
    )
}

/// Fewer bytes than the transcript of `e` can take: half of its bodies as cut (masking can
/// shorten a body, escaping only lengthens it), so that a transcript that cannot fit is not
/// rendered, which for large bodies is most of the work.
fn smallest_transcript(e: &Exchange, max_body: usize) -> usize {
    let body = |b: &[u8]| b.len().min(max_body);
    (body(&e.request.body) + e.response().map_or(0, |r| body(&r.body))) / 2
}

/// The request and response transcript of `e`, as the other formats print it.
fn transcript(e: &Exchange, opts: &RenderOptions) -> String {
    // The first line names the exchange, which its row already does.
    let text = opts.secrets.redact(&evidence::dump(e, opts));
    let (mut request, mut response) = (String::new(), String::new());
    for l in text.lines().skip(1) {
        let part = if l.starts_with('>') {
            &mut request
        } else {
            &mut response
        };
        part.push_str(l);
        part.push('\n');
    }
    format!(
        "<div class=\"dump\"><pre class=\"req\">{}</pre><pre class=\"res\">{}</pre></div>",
        esc(request.trim_end()),
        esc(response.trim_end())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_keeps_what_fits_and_counts_the_rest() {
        let mut b = Budget::new(10);
        assert_eq!(b.take("12345678".into()).as_deref(), Some("12345678"));
        assert_eq!(b.take("123".into()), None);
        assert_eq!(b.take("12".into()).as_deref(), Some("12"));
        assert!(!b.could_fit(1));
        assert_eq!(b.left_out, 2);
    }
}
