//! Errors in suite and target files, pointing at `file:line:col` with a caret under the
//! rejected value (the shape of rustc and hurl diagnostics), so a user fixes them without
//! guessing.

use std::ops::Range;

/// A located error in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct FileError {
    pub path: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
    /// The source line and the caret line under it.
    pub snippet: Option<(String, String)>,
}

impl FileError {
    /// Locates `span` (byte offsets) in `src`.
    pub fn at(
        path: &str,
        src: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let Some(span) = span else {
            return FileError {
                path: path.into(),
                line: 0,
                col: 0,
                message,
                snippet: None,
            };
        };
        let start = span.start.min(src.len());
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let line = src[..start].matches('\n').count() + 1;
        let col = src[line_start..start].chars().count() + 1;
        let text = src[line_start..line_end].trim_end_matches('\r').to_string();
        let width = src[start..span.end.clamp(start, line_end)]
            .chars()
            .count()
            .max(1);
        let caret = format!("{}{}", " ".repeat(col - 1), "^".repeat(width));
        FileError {
            path: path.into(),
            line,
            col,
            message,
            snippet: Some((text, caret)),
        }
    }

    fn render(&self) -> String {
        match &self.snippet {
            None => format!("{}\n  --> {}", self.message, self.path),
            Some((text, caret)) => {
                let n = self.line.to_string();
                let pad = " ".repeat(n.len());
                format!(
                    "{}\n{pad}--> {}:{}:{}\n{pad} |\n{n} | {text}\n{pad} | {caret}",
                    self.message, self.path, self.line, self.col
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_line_and_column() {
        let src = "a = 1\nurl = \"nope\"\n";
        let start = src.find("\"nope\"").unwrap();
        let e = FileError::at("t.toml", src, Some(start..start + 6), "not a URL");
        assert_eq!((e.line, e.col), (2, 7));
        assert_eq!(
            e.to_string(),
            "not a URL\n --> t.toml:2:7\n  |\n2 | url = \"nope\"\n  |       ^^^^^^"
        );
    }
}
