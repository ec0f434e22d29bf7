//! Text into markup. Every value of a report reaches the page through [`line()`], [`short`] or
//! [`esc`], so no path can forget a rule.
//!
//! A server's bytes are untrusted (STYLE §9): [`line()`] masks the run's secrets, escapes control,
//! bidi and zero-width characters as visible `\x1B` / `\u{202E}` (the rule every other format
//! follows, [`crate::redact`]), cuts the value at [`crate::report::evidence::QUOTE_MAX`] characters, then escapes the
//! characters markup gives a meaning to. Text the evidence helpers already masked and sanitised
//! (exchange lines, transcripts, reproduce lines) goes through [`esc`], which sanitises again
//! (a no-op on such text) before escaping, so even a value that skipped the helpers cannot put a
//! raw control character or a tag on the page.

use crate::redact::{sanitize_line, sanitize_text, Secrets};
use crate::report::evidence::quoted;

/// `text` made printable (line breaks and tabs kept) and escaped for element text and
/// attribute values alike.
pub fn esc(text: &str) -> String {
    let safe = sanitize_text(text);
    let mut out = String::with_capacity(safe.len());
    for c in safe.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// One line of report text, as every format quotes it: secrets masked, made printable, cut at
/// `QUOTE_MAX` characters with its size and digest, escaped.
pub fn line(text: &str, secrets: &Secrets) -> String {
    esc(&quoted(text, secrets))
}

/// At most `max` characters of one line of report text, for a chart label (the full text is in
/// the table beside it): secrets masked before the cut, made printable, escaped.
pub fn short(text: &str, max: usize, secrets: &Secrets) -> String {
    let safe = secrets.redact(&sanitize_line(text));
    match safe.char_indices().nth(max) {
        None => esc(&safe),
        Some((end, _)) => format!("{}…", esc(&safe[..end])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_controls_and_bidi_come_out_as_text() {
        assert_eq!(
            esc("<b a=\"1\" b='2'>&\u{1b}[31m\u{202E}</b>"),
            "&lt;b a=&quot;1&quot; b=&#39;2&#39;&gt;&amp;\\x1B[31m\\u{202E}&lt;/b&gt;"
        );
        assert_eq!(esc("a\nb\tc\0"), "a\nb\tc\\x00");
    }

    #[test]
    fn labels_are_masked_before_they_are_cut() {
        let secrets = Secrets::from_values(&["s3cr3t-token"]);
        assert_eq!(short("key s3cr3t-token", 8, &secrets), "key [red…");
        assert_eq!(short("<i>", 8, &secrets), "&lt;i&gt;");
        assert_eq!(line("a\nb s3cr3t-token", &secrets), "a\\x0Ab [redacted]");
    }
}
