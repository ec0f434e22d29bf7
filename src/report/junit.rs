//! The JUnit XML report, for CI test tabs (written with quick-xml).
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
//! | target, versions, context | the testsuite's `<properties>` (`target`, `tool`, `context`, and `interrupted` when Ctrl-C stopped the run) and the same line in its `<system-out>` |
//! | what an API description left out of the request (`run --openapi`, `stress --openapi`) | one `<property name="note">` per `$ref` left out, on the operation's testsuite, and `note: …` in the same `<system-out>` line |
//!
//! The document validates against the Jenkins/Ant `junit-10.xsd` (as shipped with pytest; a
//! test checks every golden file with a schema validator): times have at most three decimals,
//! the testsuite counts `tests`, `failures`, `errors` and `skipped` (SKIP and INCONCLUSIVE).
//!
//! ```xml
//! <testsuites>
//!   <testsuite name="ietf-draft-07" tests="3" failures="1" errors="0" skipped="1" time="2.415" …>
//!     <properties>
//!       <property name="target" value="POST http://127.0.0.1:41873/api/payments"/>
//!       …
//!     </properties>
//!     <testcase name="replay-identity" classname="idem-check.ietf-draft-07.enforcement" time="0.134">
//!       <failure type="critical" message="effect count unchanged by retries: expected 1 execution (counter), got 3 executions">replay-identity  FAIL (critical) …</failure>
//!     </testcase>
//!     <testcase name="tenant-isolation" classname="idem-check.ietf-draft-07.scope" time="0.000">
//!       <skipped type="skip" message="needs a second tenant: add [tenant-b] headers to the target file"/>
//!     </testcase>
//!     <testcase name="missing-key" classname="idem-check.ietf-draft-07.key-syntax" time="0.020">
//!       <system-out>WARN: problem+json or Link: expected …, got …</system-out>
//!     </testcase>
//!     <system-out>target POST http://127.0.0.1:41873/api/payments · idem-check 0.1.0 · 2 tenants</system-out>
//!   </testsuite>
//! </testsuites>
//! ```
//!
//! Text is made safe before it is written: XML cannot hold most C0 controls even as character
//! references, so they are written as `\x00` text (see [`crate::redact`]); everything else is
//! escaped by the XML writer. Messages are one line and cut at
//! [`crate::report::evidence::QUOTE_MAX`] characters, bodies at the format's body cap.

use quick_xml::escape::partial_escape;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

use crate::outcome::{first_line, Outcome};
use crate::redact::{cut_line, sanitize_line, sanitize_text};
use crate::report::evidence::{block, QUOTE_MAX};
use crate::report::verdict::first_failed;
use crate::report::{ProbeReport, RenderOptions, RunReport};

/// The JUnit document for `report`, with the `notes` of its target (what its API description
/// left out of the request). `strict` turns WARN into `<failure>` (it already turned the
/// outcome into FAIL when the run itself was strict).
pub fn render(
    report: &RunReport,
    notes: &[String],
    opts: &RenderOptions,
    strict: bool,
) -> anyhow::Result<String> {
    document(&[(None, notes, report)], opts, strict)
}

/// One document for a run over several operations (`run --openapi`): one `<testsuite>` per
/// operation (its id, notes and report), named `<suite>.<operation>`, whose testcases'
/// classnames carry the operation too (`idem-check.<suite>.<operation>.<group>`), so CI history
/// keeps operations apart.
pub fn render_operations(
    reports: &[(&str, &[String], &RunReport)],
    opts: &RenderOptions,
    strict: bool,
) -> anyhow::Result<String> {
    let suites: Vec<(Option<&str>, &[String], &RunReport)> = reports
        .iter()
        .map(|(op, notes, r)| (Some(*op), *notes, *r))
        .collect();
    document(&suites, opts, strict)
}

fn document(
    suites: &[(Option<&str>, &[String], &RunReport)],
    opts: &RenderOptions,
    strict: bool,
) -> anyhow::Result<String> {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.write_event(Event::Start(BytesStart::new("testsuites")))?;
    for (id, (operation, notes, report)) in suites.iter().enumerate() {
        testsuite(&mut w, id, *operation, notes, report, opts, strict)?;
    }
    w.write_event(Event::End(BytesEnd::new("testsuites")))?;
    let mut out = String::from_utf8(w.into_inner())?;
    out.push('\n');
    Ok(out)
}

fn testsuite(
    w: &mut XmlWriter,
    id: usize,
    operation: Option<&str>,
    notes: &[String],
    report: &RunReport,
    opts: &RenderOptions,
    strict: bool,
) -> anyhow::Result<()> {
    let s = &report.summary;
    let name = match operation {
        Some(op) => format!("{}.{op}", report.suite),
        None => report.suite.clone(),
    };
    let suite_name = attr(&name, opts);
    let mut suite = BytesStart::new("testsuite");
    for (k, v) in [
        ("name", suite_name.as_str()),
        ("package", "idem-check"),
        ("id", &id.to_string()),
        ("tests", &s.probes.to_string()),
        (
            "failures",
            &(s.failed + if strict { s.warned } else { 0 }).to_string(),
        ),
        ("errors", &s.errors.to_string()),
        ("skipped", &(s.skipped + s.inconclusive).to_string()),
        ("time", &seconds(report.duration_ms)),
        ("timestamp", &report.started_at),
    ] {
        suite.push_attribute((k, v));
    }
    w.write_event(Event::Start(suite))?;
    let mut facts = vec![
        ("target", opts.secrets.url_for_text(&report.target)),
        (
            "tool",
            format!("{} {}", report.tool.name, report.tool.version),
        ),
    ];
    facts.extend(report.context.iter().map(|c| ("context", c.clone())));
    facts.extend(notes.iter().map(|n| ("note", n.clone())));
    if report.interrupted {
        facts.push(("interrupted", crate::report::INTERRUPTED.into()));
    }
    w.write_event(Event::Start(BytesStart::new("properties")))?;
    for (name, value) in &facts {
        let mut prop = BytesStart::new("property");
        prop.push_attribute(("name", *name));
        prop.push_attribute(("value", attr(value, opts).as_str()));
        w.write_event(Event::Empty(prop))?;
    }
    w.write_event(Event::End(BytesEnd::new("properties")))?;
    for p in &report.probes {
        testcase(w, report, &name, p, opts, strict)?;
    }
    let line: Vec<String> = facts
        .iter()
        .map(|(name, v)| match *name {
            "target" => format!("target {v}"),
            "note" => format!("note: {v}"),
            _ => v.clone(),
        })
        .collect();
    text_element(w, "system-out", &[], &body(&line.join(" · "), opts))?;
    w.write_event(Event::End(BytesEnd::new("testsuite")))?;
    Ok(())
}

/// Seconds with three decimals, as the schema's `SUREFIRE_TIME` allows.
fn seconds(ms: f64) -> String {
    format!("{:.3}", ms.max(0.0) / 1000.0)
}

type XmlWriter = Writer<Vec<u8>>;

/// `<name attrs…>text</name>`, or `<name attrs…/>` when there is no text.
fn text_element(
    w: &mut XmlWriter,
    name: &str,
    attrs: &[(&str, &str)],
    text: &str,
) -> anyhow::Result<()> {
    let mut start = BytesStart::new(name);
    for a in attrs {
        start.push_attribute(*a);
    }
    if text.is_empty() {
        w.write_event(Event::Empty(start))?;
    } else {
        w.write_event(Event::Start(start))?;
        // Only `<`, `>` and `&` need escaping in element text; quotes stay readable.
        w.write_event(Event::Text(BytesText::from_escaped(partial_escape(text))))?;
        w.write_event(Event::End(BytesEnd::new(name)))?;
    }
    Ok(())
}

fn testcase(
    w: &mut XmlWriter,
    report: &RunReport,
    suite: &str,
    p: &ProbeReport,
    opts: &RenderOptions,
    strict: bool,
) -> anyhow::Result<()> {
    let evidence = || body(&block(p, &report.suite, opts), opts);
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
    let mut start = BytesStart::new("testcase");
    start.push_attribute(("name", p.id));
    start.push_attribute((
        "classname",
        attr(&format!("idem-check.{suite}.{}", p.group), opts).as_str(),
    ));
    start.push_attribute(("time", seconds(p.duration_ms).as_str()));
    if p.outcome == Outcome::Pass {
        w.write_event(Event::Empty(start))?;
        return Ok(());
    }
    w.write_event(Event::Start(start))?;
    match p.outcome {
        Outcome::Pass => {}
        Outcome::Warn if !strict => {
            let text = format!("WARN: {}\n\n{}", message(), block(p, &report.suite, opts));
            text_element(w, "system-out", &[], &body(&text, opts))?;
        }
        Outcome::Warn | Outcome::Fail => {
            let (t, m) = (severity(), message());
            text_element(w, "failure", &[("type", &t), ("message", &m)], &evidence())?;
        }
        Outcome::Error => {
            let m = attr(&p.reason, opts);
            text_element(
                w,
                "error",
                &[("type", "error"), ("message", &m)],
                &evidence(),
            )?;
        }
        Outcome::Skip => {
            let m = attr(&p.reason, opts);
            text_element(w, "skipped", &[("type", "skip"), ("message", &m)], "")?;
        }
        Outcome::Inconclusive => {
            let m = attr(&p.reason, opts);
            text_element(
                w,
                "skipped",
                &[("type", "inconclusive"), ("message", &m)],
                &evidence(),
            )?;
        }
    }
    w.write_event(Event::End(BytesEnd::new("testcase")))?;
    Ok(())
}

/// One-line text for an attribute: no controls, no line breaks, no secrets, at most
/// [`QUOTE_MAX`] characters (the writer escapes `<`, `&` and quotes).
fn attr(text: &str, opts: &RenderOptions) -> String {
    cut_line(&opts.secrets.redact(&sanitize_line(text)), QUOTE_MAX)
}

/// Multi-line text for an element: no controls, no secrets.
fn body(text: &str, opts: &RenderOptions) -> String {
    opts.secrets.redact(&sanitize_text(text))
}
