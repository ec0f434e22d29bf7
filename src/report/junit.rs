//! The JUnit XML report, for CI test tabs (written with junit-report 0.9.1).
//!
//! The mapping is fixed, because CI systems key their history on it:
//!
//! | idem-check | JUnit |
//! | --- | --- |
//! | the run | one `<testsuite name="<suite>" package="idem-check">`: the suite name, never the URL (an ephemeral port would break the history) |
//! | a probe | `<testcase name="<probe id>" classname="idem-check.<suite>.<group>" time="<seconds>">`; both names always set |
//! | FAIL | `<failure type="<severity>" message="<first failed check of the worst severity>">`, body = the evidence block |
//! | ERROR | `<error type="error" message="<reason>">`, body = the evidence block |
//! | SKIP | `<skipped type="skip" message="<reason: what to configure>">` |
//! | INCONCLUSIVE | `<skipped type="inconclusive" message="<reason: what to change>">`, body = the evidence block |
//! | WARN | a passing testcase with `<system-out>WARN: …</system-out>` and the evidence; under `--strict`, a `<failure type="recommended">` |
//! | PASS | a passing testcase |
//! | target, versions, context | the testsuite's `<system-out>` (junit-report 0.9.1 writes no `<properties>`) |
//!
//! ```xml
//! <testsuites>
//!   <testsuite id="0" name="ietf-draft-07" package="idem-check" tests="3" errors="0" failures="1" …>
//!     <testcase name="replay-identity" time="0.134" classname="idem-check.ietf-draft-07.enforcement">
//!       <failure type="critical" message="effect count unchanged by retries: expected 1 execution (counter), got 3 executions"><![CDATA[
//! replay-identity  FAIL (critical)   suite ietf-draft-07 · draft-07 §2.6
//! …]]></failure>
//!     </testcase>
//!     <testcase name="tenant-isolation" time="0" classname="idem-check.ietf-draft-07.scope">
//!       <skipped type="skip" message="needs a second tenant: add [tenants.b] to the target file"/>
//!     </testcase>
//!     <testcase name="missing-key" time="0.02" classname="idem-check.ietf-draft-07.key-syntax">
//!       <system-out><![CDATA[WARN: problem+json or Link: expected …, got …]]></system-out>
//!     </testcase>
//!     <system-out><![CDATA[target POST http://127.0.0.1:41873/api/payments · idem-check 0.1.0 · 2 tenants]]></system-out>
//!   </testsuite>
//! </testsuites>
//! ```
//!
//! Text is made safe before the crate sees it. XML cannot hold most C0 controls even as character
//! references, so they are written as `\x00` text (see [`crate::redact`]); and junit-report writes
//! each body raw inside one CDATA section, which a `]]>` in a server's body would close early, so
//! `]]>` is rewritten as `]]]]><![CDATA[>` (the standard split, which a reader joins back).

use junit_report::{Duration, OffsetDateTime, Report, TestCase, TestResult, TestSuite};

use crate::outcome::{first_line, Outcome};
use crate::redact::{redact, sanitize_line, sanitize_text};
use crate::report::evidence::{block, first_failed};
use crate::report::{ProbeReport, RenderOptions, RunReport};

/// The JUnit document for `report`. `strict` turns WARN into `<failure>` (it already turned the
/// outcome into FAIL when the run itself was strict).
pub fn render(report: &RunReport, opts: &RenderOptions, strict: bool) -> anyhow::Result<String> {
    document(vec![testsuite(report, None, opts, strict)])
}

/// One document for a run over several operations (`run --openapi`): one `<testsuite>` per
/// operation, named `<suite>.<operation>`, whose testcases' classnames carry the operation too
/// (`idem-check.<suite>.<operation>.<group>`), so CI history keeps operations apart.
pub fn render_operations(
    reports: &[(&str, &RunReport)],
    opts: &RenderOptions,
    strict: bool,
) -> anyhow::Result<String> {
    document(
        reports
            .iter()
            .map(|(operation, report)| testsuite(report, Some(operation), opts, strict))
            .collect(),
    )
}

fn document(suites: Vec<TestSuite>) -> anyhow::Result<String> {
    let mut doc = Report::new();
    doc.add_testsuites(suites);
    let mut xml = Vec::new();
    doc.write_xml(&mut xml)?;
    let mut out = String::from_utf8(xml)?;
    out.push('\n');
    Ok(out)
}

fn testsuite(
    report: &RunReport,
    operation: Option<&str>,
    opts: &RenderOptions,
    strict: bool,
) -> TestSuite {
    let name = match operation {
        Some(op) => format!("{}.{op}", report.suite),
        None => report.suite.clone(),
    };
    let mut suite = TestSuite::new(&attr(&name, opts));
    suite.package = "idem-check".into();
    // A fixed timestamp for a given report keeps the document a pure function of it.
    suite.set_timestamp(
        OffsetDateTime::parse(
            &report.started_at,
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap_or(OffsetDateTime::UNIX_EPOCH),
    );
    suite.add_testcases(
        report
            .probes
            .iter()
            .map(|p| testcase(report, &name, p, opts, strict)),
    );
    let mut facts = vec![
        format!("target {}", report.target),
        format!("{} {}", report.tool.name, report.tool.version),
    ];
    facts.extend(report.context.iter().cloned());
    if report.interrupted {
        facts.push("interrupted: only finished probes are listed".into());
    }
    suite.set_system_out(&body(&facts.join(" · "), opts));
    suite
}

fn testcase(
    report: &RunReport,
    suite: &str,
    p: &ProbeReport,
    opts: &RenderOptions,
    strict: bool,
) -> TestCase {
    let time = Duration::seconds_f64(p.duration_ms.max(0.0) / 1000.0);
    let evidence = || Some(body(&block(p, &report.suite, opts), opts));
    let message = || {
        attr(
            &first_failed(p).map_or_else(|| p.reason.clone(), first_line),
            opts,
        )
    };
    let severity = || {
        first_failed(p)
            .map_or("fail", |c| c.severity.as_str())
            .to_string()
    };
    let mut tc = TestCase::success(p.id, time);
    tc.set_classname(&attr(&format!("idem-check.{suite}.{}", p.group), opts));
    tc.result = match p.outcome {
        Outcome::Pass => TestResult::Success,
        Outcome::Warn if strict => TestResult::Failure {
            type_: severity(),
            message: message(),
            cause: evidence(),
        },
        Outcome::Warn => {
            tc.set_system_out(&body(
                &format!("WARN: {}\n\n{}", message(), block(p, &report.suite, opts)),
                opts,
            ));
            TestResult::Success
        }
        Outcome::Fail => TestResult::Failure {
            type_: severity(),
            message: message(),
            cause: evidence(),
        },
        Outcome::Error => TestResult::Error {
            type_: "error".into(),
            message: attr(&p.reason, opts),
            cause: evidence(),
        },
        Outcome::Skip => TestResult::SkippedWithCause {
            type_: "skip".into(),
            message: attr(&p.reason, opts),
            cause: None,
        },
        Outcome::Inconclusive => TestResult::SkippedWithCause {
            type_: "inconclusive".into(),
            message: attr(&p.reason, opts),
            cause: evidence(),
        },
    };
    tc
}

/// One-line text for an attribute: no controls, no line breaks, no secrets (the crate escapes
/// `<`, `&` and quotes).
fn attr(text: &str, opts: &RenderOptions) -> String {
    redact(&sanitize_line(text), &opts.secrets)
}

/// Multi-line text for a CDATA section: no controls, no secrets, and no `]]>` that would end the
/// section early.
fn body(text: &str, opts: &RenderOptions) -> String {
    redact(&sanitize_text(text), &opts.secrets).replace("]]>", "]]]]><![CDATA[>")
}
