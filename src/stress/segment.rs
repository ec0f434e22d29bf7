//! One stress run split across processes or machines: `stress --segment I/N` runs the I-th of
//! N disjoint parts of the keys (k6's execution segments), and `idem-check merge` judges the
//! segments' JSON reports as one run.
//!
//! A segment takes every N-th key index, starting at I − 1, so the segments of one run never
//! share a key whatever `--keys` is, and together they send every key once. Each judges its own
//! keys as usual, but not the effect counter: the other segments' executions land in its window.
//! It records what the merge needs instead ([`SegmentRecord`]): the counter's value and wall-clock
//! time at its start and end, and how many keys it completed. The merge then judges the counter
//! over the union of the windows, from the earliest start reading to the latest end reading,
//! against the sum of the completed keys, and refuses reports that are not the segments of one
//! run (another target, tool version, run id or split, or a segment twice).

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::check::{self, CheckSpec, Severity};
use crate::outcome::{decide, Stop};
use crate::report::{ProbeReport, RunReport, Summary, ToolInfo, SCHEMA};

/// `--segment I/N`: the I-th (1-based) of N parts of the keys, and the run they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub index: usize,
    pub count: usize,
    /// `--run-id`: the same for every segment of a run, so the merge can tell runs apart.
    pub run_id: String,
}

/// `I/N` as typed: both at least 1, I at most N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSpec {
    pub index: usize,
    pub count: usize,
}

impl FromStr for SegmentSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not I/N (the I-th of N segments, e.g. 2/3)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "{s:?}: I must be between 1 and N, and N at least 1"
            ));
        }
        Ok(SegmentSpec { index, count })
    }
}

/// A run id a segment can carry into file names and keys: 1–64 of `[A-Za-z0-9_.-]`.
pub fn valid_run_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--run-id {id:?}: 1 to 64 letters, digits, '-', '_' or '.'"
        ))
    }
}

impl Segment {
    /// Whether key index `idx` (0-based, below `--keys`) is this segment's.
    pub fn owns(&self, idx: usize) -> bool {
        idx % self.count == self.index - 1
    }
}

/// A counter reading with the wall-clock time it was taken, in milliseconds since the Unix
/// epoch: segments on different machines are ordered by it, so their clocks must agree to
/// within the gap between one segment's end and another's start (NTP does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedReading {
    pub value: u64,
    pub at_ms: u64,
}

/// What a segment's JSON report carries for the merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRecord {
    pub run_id: String,
    pub index: usize,
    pub count: usize,
    /// `--keys` of the whole run; this segment owns every `count`-th index below it.
    pub keys_total: usize,
    pub duplicates: usize,
    pub keys_sent: usize,
    pub keys_completed: usize,
    pub violating_keys: usize,
    /// The counter at the segment's start and end (absent without `--count-url`/`--count-cmd`).
    pub counter_before: Option<TimedReading>,
    pub counter_after: Option<TimedReading>,
}

/// The part of a segment's JSON report the merge reads.
#[derive(Debug, Clone, Deserialize)]
pub struct SegmentReport {
    pub schema: String,
    pub tool: ToolVersion,
    pub target: String,
    pub interrupted: bool,
    pub segment: Option<SegmentRecord>,
    pub violations: Vec<ViolationRow>,
    pub result: ResultRow,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ToolVersion {
    pub version: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ViolationRow {
    pub key: String,
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ResultRow {
    pub outcome: String,
    pub reason: String,
}

/// Why reports cannot be merged into one run; each names the files involved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    #[error("{0}: not a stress report with a segment (run it with stress --segment I/N --run-id ID --report-json FILE)")]
    NotASegment(PathBuf),
    #[error(
        "{first} and {second} are not segments of one run: their {what} differ ({a:?} and {b:?})"
    )]
    Mismatch {
        first: PathBuf,
        second: PathBuf,
        what: &'static str,
        a: String,
        b: String,
    },
    #[error("{first} and {second} are both segment {index}/{count}: their keys overlap")]
    Overlap {
        first: PathBuf,
        second: PathBuf,
        index: usize,
        count: usize,
    },
    #[error("segment{} {} of {count} missing: a run is judged on every key (merge every segment's report)", if .missing.len() == 1 { "" } else { "s" }, .missing.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "))]
    Missing { missing: Vec<usize>, count: usize },
}

const KEYS: CheckSpec = CheckSpec {
    id: "keys",
    what: "every key of every segment executes exactly once",
    severity: Severity::Critical,
    expect: Vec::new(),
};

const EFFECTS: CheckSpec = CheckSpec {
    id: "effects",
    what: "the effect counter grew by exactly the completed keys of all segments, over the union of their windows",
    severity: Severity::Critical,
    expect: Vec::new(),
};

/// Judges `reports` (path, parsed report) as the segments of one run: a one-probe
/// [`RunReport`] named `stress`, so every report format renders it.
pub fn merge(reports: &[(PathBuf, SegmentReport)]) -> Result<RunReport, MergeError> {
    let segments = check_one_run(reports)?;
    let first = &reports[0].1;
    let keys_sent: usize = segments.iter().map(|(_, s)| s.keys_sent).sum();
    let completed: usize = segments.iter().map(|(_, s)| s.keys_completed).sum();
    let violating: usize = segments.iter().map(|(_, s)| s.violating_keys).sum();
    let mut checks = Vec::new();
    let mut timeline: Vec<String> = segments
        .iter()
        .map(|(path, s)| {
            format!(
                "segment {}/{} ({}): {} keys sent, {} completed, {} violating",
                s.index,
                s.count,
                path.display(),
                s.keys_sent,
                s.keys_completed,
                s.violating_keys
            )
        })
        .collect();
    let listed: Vec<&ViolationRow> = reports.iter().flat_map(|(_, r)| &r.violations).collect();
    let named: Vec<String> = listed.iter().take(10).map(|v| v.key.clone()).collect();
    checks.push(check::no_violating_keys(&KEYS, violating, &named));
    timeline.extend(
        listed
            .iter()
            .take(10)
            .map(|v| format!("violating key {}: {}", v.key, v.reason)),
    );
    let mut stop = None;
    let mut window = None;
    let readings: Option<Vec<(TimedReading, TimedReading)>> = segments
        .iter()
        .map(|(_, s)| s.counter_before.zip(s.counter_after))
        .collect();
    match readings {
        Some(readings) if !readings.is_empty() => {
            let before = readings.iter().map(|(b, _)| *b).min_by_key(|r| r.at_ms);
            let after = readings.iter().map(|(_, a)| *a).max_by_key(|r| r.at_ms);
            if let (Some(before), Some(after)) = (before, after) {
                window = Some((before.at_ms, after.at_ms));
                let moved = after.value.saturating_sub(before.value);
                timeline.push(format!(
                    "counter {} at the earliest segment start, {} at the latest segment end",
                    before.value, after.value
                ));
                checks.push(check::executions(
                    &EFFECTS,
                    "the effect counter over the union of the segments' windows",
                    completed as u64,
                    moved,
                    Vec::new(),
                ));
            }
        }
        _ if segments.iter().any(|(_, s)| s.counter_before.is_some()) => {
            stop = Some(Stop::Inconclusive(
                "a segment has no counter reading at its start or end, so the counter cannot be judged over the union of the windows".into(),
            ));
        }
        _ => timeline.push("no counter: every key was judged by its segment".into()),
    }
    let not_judged: Vec<String> = reports
        .iter()
        .filter(|(_, r)| !matches!(r.result.outcome.as_str(), "PASS" | "FAIL"))
        .map(|(path, r)| {
            format!(
                "{}: {} ({})",
                path.display(),
                r.result.outcome,
                r.result.reason
            )
        })
        .collect();
    if stop.is_none() && !not_judged.is_empty() {
        stop = Some(Stop::Inconclusive(
            format!("not every segment was judged: {}", not_judged.join("; ")).into(),
        ));
    }
    if stop.is_none() && reports.iter().any(|(_, r)| r.interrupted) {
        stop = Some(Stop::Inconclusive(
            "a segment was interrupted, so its keys were not all sent".into(),
        ));
    }
    let verdict = decide(&checks, stop.as_ref(), false);
    let result = ProbeReport {
        stimulus: "Merges the segments of one stress run, each a part of the keys sent from its own process",
        requirement: "Under load every key still executes exactly once, across all segments, and the counter agrees",
        reason: verdict.reason,
        ..super::stress_probe(verdict.outcome, checks, timeline, Vec::new())
    };
    let probes = vec![result];
    Ok(RunReport {
        schema: SCHEMA,
        tool: ToolInfo::default(),
        label: "merge".into(),
        reference: false,
        target: first.target.clone(),
        suite: "stress".into(),
        strict: false,
        started_at: window
            .map(|(from, _)| {
                let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(from);
                humantime::format_rfc3339_seconds(at).to_string()
            })
            .unwrap_or_default(),
        duration_ms: window.map_or(0.0, |(from, to)| to.saturating_sub(from) as f64),
        interrupted: false,
        context: vec![format!(
            "{} segments of run {}: {keys_sent} keys",
            segments.len(),
            segments[0].1.run_id
        )],
        summary: Summary::of(&probes),
        probes,
        replay: None,
    })
}

/// The segment records of `reports`, in segment order, once they are known to be the
/// segments of one run, each once and all of them.
fn check_one_run(
    reports: &[(PathBuf, SegmentReport)],
) -> Result<Vec<(PathBuf, SegmentRecord)>, MergeError> {
    let mut segments: Vec<(PathBuf, SegmentRecord)> = Vec::new();
    for (path, r) in reports {
        let s = match (&r.segment, r.schema.as_str()) {
            (Some(s), crate::stress::STRESS_SCHEMA) => s.clone(),
            _ => return Err(MergeError::NotASegment(path.clone())),
        };
        if let Some((first_path, first)) = segments.first() {
            let first_report = &reports[0].1;
            let pairs: [(&'static str, String, String); 5] = [
                ("targets", first_report.target.clone(), r.target.clone()),
                (
                    "idem-check versions",
                    first_report.tool.version.clone(),
                    r.tool.version.clone(),
                ),
                ("run ids", first.run_id.clone(), s.run_id.clone()),
                (
                    "splits (I/N, --keys, --duplicates)",
                    format!(
                        "N={} keys={} duplicates={}",
                        first.count, first.keys_total, first.duplicates
                    ),
                    format!(
                        "N={} keys={} duplicates={}",
                        s.count, s.keys_total, s.duplicates
                    ),
                ),
                ("schemas", first_report.schema.clone(), r.schema.clone()),
            ];
            for (what, a, b) in pairs {
                if a != b {
                    return Err(MergeError::Mismatch {
                        first: first_path.clone(),
                        second: path.clone(),
                        what,
                        a,
                        b,
                    });
                }
            }
        }
        if let Some((other, _)) = segments.iter().find(|(_, o)| o.index == s.index) {
            return Err(MergeError::Overlap {
                first: other.clone(),
                second: path.clone(),
                index: s.index,
                count: s.count,
            });
        }
        segments.push((path.clone(), s));
    }
    let count = segments.first().map_or(0, |(_, s)| s.count);
    let missing: Vec<usize> = (1..=count)
        .filter(|i| !segments.iter().any(|(_, s)| s.index == *i))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing, count });
    }
    segments.sort_by_key(|(_, s)| s.index);
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    fn report(index: usize, count: usize, run_id: &str, violating: usize) -> SegmentReport {
        SegmentReport {
            schema: crate::stress::STRESS_SCHEMA.into(),
            tool: ToolVersion {
                version: "1".into(),
            },
            target: "POST http://127.0.0.1:1/p".into(),
            interrupted: false,
            segment: Some(SegmentRecord {
                run_id: run_id.into(),
                index,
                count,
                keys_total: 9,
                duplicates: 8,
                keys_sent: 3,
                keys_completed: 3,
                violating_keys: violating,
                counter_before: Some(TimedReading {
                    value: 10 + index as u64,
                    at_ms: 1000 + index as u64,
                }),
                counter_after: Some(TimedReading {
                    value: 19,
                    at_ms: 2000 + index as u64,
                }),
            }),
            violations: (0..violating)
                .map(|i| ViolationRow {
                    key: format!("k{index}-{i}"),
                    reason: "2 executions".into(),
                })
                .collect(),
            result: ResultRow {
                outcome: if violating > 0 { "FAIL" } else { "PASS" }.into(),
                reason: String::new(),
            },
        }
    }

    fn paths(reports: Vec<SegmentReport>) -> Vec<(PathBuf, SegmentReport)> {
        reports
            .into_iter()
            .enumerate()
            .map(|(i, r)| (PathBuf::from(format!("seg{i}.json")), r))
            .collect()
    }

    #[test]
    fn segments_split_the_key_indices_without_overlap_or_gap() {
        let segs: Vec<Segment> = (1..=3)
            .map(|index| Segment {
                index,
                count: 3,
                run_id: "r".into(),
            })
            .collect();
        for idx in 0..100 {
            assert_eq!(segs.iter().filter(|s| s.owns(idx)).count(), 1, "key {idx}");
        }
        assert_eq!("2/3".parse(), Ok(SegmentSpec { index: 2, count: 3 }));
        assert!("0/3".parse::<SegmentSpec>().is_err());
        assert!("4/3".parse::<SegmentSpec>().is_err());
        assert!("x".parse::<SegmentSpec>().is_err());
        assert!(valid_run_id("gh-123.4").is_ok());
        assert!(valid_run_id("a b").is_err());
    }

    #[test]
    fn the_counter_is_judged_over_the_union_of_the_windows() {
        // 11 at the earliest start, 19 at the latest end: 8 executions for 9 completed keys.
        let merged = merge(&paths(vec![
            report(1, 3, "r", 0),
            report(2, 3, "r", 0),
            report(3, 3, "r", 0),
        ]))
        .unwrap();
        let p = &merged.probes[0];
        assert_eq!(p.outcome, Outcome::Fail, "{:?}", p.checks);
        assert!(p.reason.contains("9 executions"), "{}", p.reason);
    }

    #[test]
    fn violating_keys_of_any_segment_fail_the_run_and_are_named() {
        let mut reports = vec![report(1, 2, "r", 0), report(2, 2, "r", 2)];
        for r in &mut reports {
            let s = r.segment.as_mut().unwrap();
            s.counter_before = Some(TimedReading { value: 0, at_ms: 1 });
            s.counter_after = Some(TimedReading { value: 6, at_ms: 5 });
        }
        let merged = merge(&paths(reports)).unwrap();
        let p = &merged.probes[0];
        assert_eq!(p.outcome, Outcome::Fail);
        let keys = &p.checks[0];
        assert!(!keys.passed && keys.actual.contains("k2-0"), "{keys:?}");
        assert!(p
            .timeline
            .iter()
            .any(|t| t == "violating key k2-1: 2 executions"));
    }

    #[test]
    fn reports_of_other_runs_overlapping_or_missing_segments_are_refused() {
        let overlap = merge(&paths(vec![report(1, 2, "r", 0), report(1, 2, "r", 0)]));
        assert!(matches!(overlap, Err(MergeError::Overlap { index: 1, .. })));
        let other_run = merge(&paths(vec![report(1, 2, "r", 0), report(2, 2, "s", 0)]));
        assert!(matches!(
            other_run,
            Err(MergeError::Mismatch {
                what: "run ids",
                ..
            })
        ));
        let other_split = merge(&paths(vec![report(1, 2, "r", 0), report(2, 3, "r", 0)]));
        assert!(matches!(other_split, Err(MergeError::Mismatch { .. })));
        let missing = merge(&paths(vec![report(1, 3, "r", 0), report(3, 3, "r", 0)]));
        assert_eq!(
            missing.err(),
            Some(MergeError::Missing {
                missing: vec![2],
                count: 3
            })
        );
        let mut plain = report(1, 1, "r", 0);
        plain.segment = None;
        assert!(matches!(
            merge(&paths(vec![plain])),
            Err(MergeError::NotASegment(_))
        ));
    }
}
