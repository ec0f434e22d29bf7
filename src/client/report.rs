//! A client run's report files.

use anyhow::Result;

use super::ClientReport;
use crate::report::{html, json, Format, RenderOptions, Reportable};

/// A client run's files: its own JSON (`idem-check.client/1`), an HTML page with each
/// scenario's attempts drawn above the checks, and JUnit, Markdown and the terminal text of the
/// [`RunReport`](crate::report::RunReport) view, one testcase per check.
impl Reportable for ClientReport {
    fn render(&self, format: Format, opts: &RenderOptions) -> Result<String> {
        match format {
            Format::Json => json::render_value(self, opts),
            Format::Html => {
                let lanes: Vec<&html::Lane> = self.scenarios.iter().map(|s| &s.lane).collect();
                Ok(html::render_client(&self.as_run_report(), &lanes, opts))
            }
            other => self.as_run_report().render(other, opts),
        }
    }
}
