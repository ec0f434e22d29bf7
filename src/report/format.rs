//! The report formats as data, and the one routine that writes them, shared by `run` and
//! `stress` (and by any command that produces a report later).
//!
//! Writing is careful because a report is what a CI job keeps: missing parent folders are
//! created, every path is checked for writability *before* the run (so an hour-long run does not
//! end in "permission denied"), and a report that fails to write never stops the others from
//! being written. Which exit code wins is documented in [`crate::exit`].

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::report::{file, markdown, RenderOptions};

/// An output format of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// What is printed on stdout.
    Terminal,
    /// `--report-junit`
    Junit,
    /// `--report-json`
    Json,
    /// `--report-markdown`, and the GitHub step summary.
    Markdown,
    /// `--report-html`: one self-contained page.
    Html,
}

impl Format {
    /// How the format is named in messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Terminal => "terminal",
            Format::Junit => "JUnit",
            Format::Json => "JSON",
            Format::Markdown => "Markdown",
            Format::Html => "HTML",
        }
    }

    /// How many bytes of each body the format keeps unless `--max-body-bytes` says otherwise.
    /// Small where people read (a terminal, a step summary), larger where tools read and the
    /// evidence is the point (JUnit, JSON, and the HTML page, whose bodies are folded away until
    /// opened); never whole, so a server sending 1 MiB bodies cannot turn a report into
    /// hundreds of megabytes.
    pub fn default_max_body(self) -> usize {
        match self {
            Format::Terminal => 2 * 1024,
            Format::Markdown => 1024,
            Format::Junit | Format::Html => 8 * 1024,
            Format::Json => 16 * 1024,
        }
    }

    /// Every format.
    pub const ALL: [Format; 5] = [
        Format::Terminal,
        Format::Junit,
        Format::Json,
        Format::Markdown,
        Format::Html,
    ];
}

/// How many bytes of each response body a run keeps in memory: as many as the report that shows
/// the most can show (`--max-body-bytes`, else the largest default), and never fewer than that
/// default, since the probes read ids and compare replays on the kept bytes. The rest of a
/// longer body is not kept (the exchange is marked cut): a run holds hundreds of exchanges, and
/// keeping a mebibyte of each from a server that streams endless bodies took hundreds of
/// megabytes for bytes no report shows.
pub fn kept_body_bytes(max_body_bytes: Option<usize>) -> usize {
    let largest = Format::ALL
        .iter()
        .map(|f| f.default_max_body())
        .max()
        .unwrap_or_default();
    max_body_bytes.unwrap_or_default().max(largest)
}

/// A report to write: its format and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFile {
    pub format: Format,
    pub path: PathBuf,
}

impl ReportFile {
    /// The files asked for, leaving out the formats without a path.
    pub fn list(asked: &[(Format, &Option<PathBuf>)]) -> Vec<ReportFile> {
        asked
            .iter()
            .filter_map(|(format, path)| {
                path.as_ref().map(|p| ReportFile {
                    format: *format,
                    path: p.clone(),
                })
            })
            .collect()
    }
}

/// Something that can be rendered in every file format: a run, a stress run.
pub trait Reportable {
    /// The document in `format`.
    fn render(&self, format: Format, opts: &RenderOptions) -> anyhow::Result<String>;
}

/// Creates the parent folders of every report and checks that each can be written, before any
/// work is done. The check creates and removes a temporary file next to the report, which is
/// exactly what writing it will need.
pub fn prepare(files: &[ReportFile]) -> anyhow::Result<()> {
    for f in files {
        let dir = parent(&f.path);
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the folder {} for the {} report",
                dir.display(),
                f.format.name()
            )
        })?;
        if f.path.is_dir() {
            anyhow::bail!(
                "the {} report path {} is a folder; name a file",
                f.format.name(),
                f.path.display()
            );
        }
        tempfile::Builder::new()
            .prefix(".idem-check-")
            .tempfile_in(dir)
            .with_context(|| {
                format!(
                    "cannot write the {} report {}: the folder {} is not writable",
                    f.format.name(),
                    f.path.display(),
                    dir.display()
                )
            })?;
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes every report, and appends the Markdown summary to `$GITHUB_STEP_SUMMARY` when GitHub
/// Actions set it. A failure does not stop the others; the failures are returned, one error
/// each, for the caller to print and to fold into the exit code.
pub fn write_reports(
    report: &dyn Reportable,
    files: &[ReportFile],
    opts: &RenderOptions,
    max_body: Option<usize>,
) -> Vec<anyhow::Error> {
    let mut failures = Vec::new();
    for f in files {
        let written = report
            .render(f.format, &opts.for_format(f.format, max_body))
            .and_then(|text| file::write_atomically(&f.path, &text))
            .with_context(|| {
                format!(
                    "could not write the {} report {}",
                    f.format.name(),
                    f.path.display()
                )
            });
        if let Err(e) = written {
            failures.push(e);
        }
    }
    if let Some(path) = markdown::step_summary_path() {
        let summary = report
            .render(
                Format::Markdown,
                &opts.for_format(Format::Markdown, max_body),
            )
            .and_then(|md| markdown::append_to_step_summary(&path, &md));
        if let Err(e) = summary {
            failures.push(e);
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;

    impl Reportable for Fixed {
        fn render(&self, format: Format, _: &RenderOptions) -> anyhow::Result<String> {
            Ok(format!("{}\n", format.name()))
        }
    }

    #[test]
    fn missing_folders_are_created_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![ReportFile {
            format: Format::Json,
            path: dir.path().join("new/deeper/r.json"),
        }];
        prepare(&files).unwrap();
        assert!(dir.path().join("new/deeper").is_dir());
        assert!(write_reports(&Fixed, &files, &RenderOptions::default(), None).is_empty());
        assert_eq!(std::fs::read_to_string(&files[0].path).unwrap(), "JSON\n");
    }

    #[test]
    fn one_failing_report_does_not_lose_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("a-folder");
        std::fs::create_dir(&blocked).unwrap();
        let files = vec![
            ReportFile {
                format: Format::Junit,
                path: blocked.clone(),
            },
            ReportFile {
                format: Format::Json,
                path: dir.path().join("r.json"),
            },
        ];
        assert!(prepare(&files).is_err());
        let failures = write_reports(&Fixed, &files, &RenderOptions::default(), None);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(format!("{:#}", failures[0]).contains("JUnit report"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("r.json")).unwrap(),
            "JSON\n"
        );
    }
}
