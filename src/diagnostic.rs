//! Errors in suite and target files, pointing at `file:line:col` with a caret under the
//! rejected value (the shape of rustc and hurl diagnostics), so a user fixes them without
//! guessing; and where each value of a target description came from ([`Origins`]), so an error
//! found later, once file and flags are merged, still points at the flag or the file's line.

use std::collections::BTreeMap;
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

/// Where the values of a target description came from, by the flag that sets each one and the
/// item's index (0 for a flag given once): a target-file key, named as the file writes it
/// (`[counter] url`), at its place in the file. A value not recorded here came from its flag,
/// or from code (the reference server's description), and errors name the flag.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Origins(BTreeMap<(&'static str, usize), (String, FileError)>);

/// Each value's flag and where the file said it, without the file's line: the line can hold a
/// credential written into the file.
impl std::fmt::Debug for Origins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|((flag, index), (key, at))| {
                (
                    format!("{flag}[{index}]"),
                    format!("{key} at {}:{}:{}", at.path, at.line, at.col),
                )
            }))
            .finish()
    }
}

impl Origins {
    /// Item `index` of `flag` came from the target-file key `key`, located by `at`.
    pub fn file(&mut self, flag: &'static str, index: usize, key: &str, at: FileError) {
        self.0.insert((flag, index), (key.to_string(), at));
    }

    /// `flag` was given on the command line and replaced what the file said.
    pub fn flag(&mut self, flag: &'static str) {
        self.0.retain(|(f, _), _| *f != flag);
    }

    /// The value of `flag` as errors cite it.
    pub fn input(&self, flag: &'static str) -> Input<'_> {
        self.item(flag, 0)
    }

    /// Item `index` of a repeated `flag` as errors cite it.
    pub fn item(&self, flag: &'static str, index: usize) -> Input<'_> {
        match self.0.get(&(flag, index)) {
            Some((key, at)) => Input {
                name: key,
                at: Some(at),
            },
            None => Input {
                name: flag,
                at: None,
            },
        }
    }
}

/// One value of a target description as an error cites it: by its flag, or by its target-file
/// key at `FILE:LINE:COL`.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// `--count-url`, or `[counter] url`.
    pub name: &'a str,
    at: Option<&'a FileError>,
}

impl Input<'_> {
    /// An error about this value: located in its file, an input-file error (exit 2), when the
    /// value came from one; the flag's usage error (exit 1) otherwise.
    pub fn error(&self, message: impl Into<String>) -> anyhow::Error {
        match self.at {
            Some(at) => FileError {
                message: message.into(),
                ..at.clone()
            }
            .into(),
            None => anyhow::anyhow!(message.into()),
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
