//! How many times did the operation really execute? The one effects meter of a run.
//!
//! A black-box checker cannot see the server's database, so it counts effects with the strongest
//! basis the user gave (CONTRACT "Observing effects"): an effect counter read before and after
//! (`--count-url` + `--count-pointer`, or `--count-cmd`), else the distinct resource ids in the
//! 2xx bodies (`--id-pointer`), else the distinct 2xx bodies themselves. A basis is only trusted
//! once it has been seen to tell two executions apart ([`Meter::calibrate`], at the pre-flight):
//! identical bodies cannot tell one execution from five, so a *blind* basis makes every check
//! that counts executions INCONCLUSIVE instead of a PASS nobody observed. Counter readings are
//! checked for sanity too: a counter that goes backwards, or jumps by more than the requests
//! sent, is not counting this probe's executions.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::http::client::Client;
use crate::http::exchange::{Exchange, Header, SentRequest};
use crate::http::raw::RawResponse;
use crate::http::Request;
use crate::redact::Masked;

/// Why a blind basis cannot judge executions; the reason every such check is INCONCLUSIVE.
pub const BLIND: &str =
    "responses do not reveal executions: pass --count-url, --count-cmd or --id-pointer";

/// Why resource identities cannot be compared without ids when the bodies do not differ.
pub const NO_IDENTITY: &str =
    "responses do not tell created resources apart: pass --id-pointer (or a body template with {{unique}})";

/// Where effects are counted (CONTRACT "Observing effects").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counter {
    /// A GET whose JSON body holds the count at `pointer`.
    Url { url: url::Url, pointer: String },
    /// A shell command that prints the count (shown masked, see [`Masked`]).
    Command(Masked),
}

impl Counter {
    /// How the counter is named in evidence.
    pub fn describe(&self) -> String {
        match self {
            Counter::Url { url, pointer } => format!("GET {url} at {pointer}"),
            Counter::Command(cmd) => format!("command `{}`", cmd.text()),
        }
    }

    /// The option that configures this counter, for errors.
    fn option(&self) -> &'static str {
        match self {
            Counter::Url { .. } => "--count-url and --count-pointer",
            Counter::Command(_) => "--count-cmd",
        }
    }
}

/// What tells two created resources apart in the responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The value at this JSON pointer in 2xx bodies (`--id-pointer`).
    Ids(String),
    /// The 2xx bodies themselves: weak, a body may carry nothing per execution.
    Bodies,
    /// Nothing: two executions answer the same bytes.
    Blind,
}

/// An execution count and the basis it was computed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executions {
    pub count: u64,
    /// "counter GET http://…/count at /count (4 before, 5 after)", "distinct ids at /id", …
    pub basis: String,
    /// The exchanges the count was computed from.
    pub exchanges: Vec<usize>,
}

/// One reading of the counter (no value when the run has no counter), with how many requests
/// had been sent when it was taken, so a jump larger than the traffic can be told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    value: Option<u64>,
    sent: usize,
}

impl Reading {
    /// A reading of `value` taken after `sent` requests to the operation.
    pub fn new(value: Option<u64>, sent: usize) -> Self {
        Reading { value, sent }
    }

    /// The counter's value, when there is a counter.
    pub fn value(&self) -> Option<u64> {
        self.value
    }
}

/// One read of the counter, for the caller to record: the exchange (a `--count-url` GET) or a
/// timeline line (a `--count-cmd` run), and the value or why there is none.
pub struct CounterRead {
    pub exchange: Option<(SentRequest, RawResponse)>,
    pub note: Option<String>,
    pub value: Result<u64, String>,
}

impl CounterRead {
    /// Whether the counter's URL gave no answer at all (a timeout, a reset): the target
    /// stopped answering, which no counter option explains.
    pub fn unanswered(&self) -> bool {
        self.exchange
            .as_ref()
            .is_some_and(|(_, raw)| raw.result.is_err())
    }
}

/// The effect basis of a run: the counter (if any) and what tells resources apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meter {
    counter: Option<Counter>,
    identity: Identity,
    /// Tenant A's headers, which the counter GET carries (its credentials).
    headers: Vec<Header>,
    timeout: Duration,
}

impl Meter {
    /// The basis as configured, before calibration: the counter, and ids when a pointer is
    /// given, else bodies.
    pub fn configured(
        counter: Option<Counter>,
        id_pointer: Option<&str>,
        headers: Vec<Header>,
        timeout: Duration,
    ) -> Self {
        let identity = match id_pointer {
            Some(p) => Identity::Ids(p.to_string()),
            None => Identity::Bodies,
        };
        Meter {
            counter,
            identity,
            headers,
            timeout,
        }
    }

    /// The basis in one phrase, as the header line and every report name it: "counter GET …
    /// at /count", "ids at /id", "bodies (weak)", "blind".
    pub fn describe(&self) -> String {
        match (&self.counter, &self.identity) {
            (Some(c), _) => format!("counter {}", c.describe()),
            (None, Identity::Ids(p)) => format!("ids at {p}"),
            (None, Identity::Bodies) => "bodies (weak)".into(),
            (None, Identity::Blind) => "blind".into(),
        }
    }

    pub fn has_counter(&self) -> bool {
        self.counter.is_some()
    }

    /// Reads the counter once. `None` without a counter.
    pub async fn read(&self, client: &Client) -> Option<CounterRead> {
        match self.counter.as_ref()? {
            Counter::Url { url, pointer } => {
                let req = Request::get(url, &self.headers);
                let (sent, raw) = client.send(&req).await;
                let value = match &raw.result {
                    Ok(r) => parse_counter_response(r, pointer),
                    Err(e) => Err(e.to_string()),
                };
                Some(CounterRead {
                    exchange: Some((sent, raw)),
                    note: None,
                    value,
                })
            }
            Counter::Command(cmd) => {
                let (value, line) = run_count_cmd(cmd.text(), self.timeout).await;
                Some(CounterRead {
                    exchange: None,
                    note: Some(line),
                    value,
                })
            }
        }
    }

    /// The error for a counter that could not be read: naming the options to check when the
    /// counter answered with something unusable, and the target when its URL did not answer
    /// (a server that froze mid-run is not a wrong --count-url).
    pub fn unreadable(&self, detail: &str, unanswered: bool) -> String {
        if unanswered {
            return format!(
                "the effect counter did not answer ({detail}): the target stopped answering, or raise --timeout if it is only slow"
            );
        }
        let option = self.counter.as_ref().map_or("", Counter::option);
        format!("the effect counter could not be read ({detail}); check {option}")
    }

    /// How many executions `attempts` caused between two readings, on top of `earlier`
    /// exchanges that had already executed (their ids or bodies are not new). `Err` says why
    /// the count cannot be trusted: a blind basis, or a counter that went backwards or jumped.
    pub fn count(
        &self,
        before: &Reading,
        after: &Reading,
        earlier: &[&Exchange],
        attempts: &[&Exchange],
    ) -> Result<Executions, String> {
        if let (Some(c), Some(b), Some(a)) = (&self.counter, before.value, after.value) {
            let count = sane_delta(b, a, after.sent.saturating_sub(before.sent))?;
            return Ok(Executions {
                count,
                basis: format!("counter {} ({b} before, {a} after)", c.describe()),
                exchanges: attempts.iter().map(|e| e.n).collect(),
            });
        }
        self.count_by_identity(earlier, attempts, "")
    }

    /// [`Meter::count`] across a restart of the target: a counter kept in memory starts again
    /// from zero, so when it went backwards and ids are available, the probe is judged by ids
    /// (the same id after the restart is the replay, a new id a new execution) and the basis
    /// says so. Without ids the backwards counter leaves the probe unjudged, as `count` does.
    pub fn count_across_restart(
        &self,
        before: &Reading,
        after: &Reading,
        earlier: &[&Exchange],
        attempts: &[&Exchange],
    ) -> Result<Executions, String> {
        let went_back = matches!((before.value, after.value), (Some(b), Some(a)) if a < b);
        if self.counter.is_none() || !went_back || !matches!(self.identity, Identity::Ids(_)) {
            return self.count(before, after, earlier, attempts);
        }
        let (b, a) = (before.value.unwrap_or(0), after.value.unwrap_or(0));
        let why = format!(
            " (judged by ids: the counter reset across the restart, {b} before, {a} after)"
        );
        self.count_by_identity(earlier, attempts, &why)
    }

    /// Executions counted by ids or bodies: the `attempts`' distinct identities not already
    /// seen on `earlier`; `why` is appended to the basis (why the counter was not used).
    fn count_by_identity(
        &self,
        earlier: &[&Exchange],
        attempts: &[&Exchange],
        why: &str,
    ) -> Result<Executions, String> {
        let exchanges: Vec<usize> = attempts.iter().map(|e| e.n).collect();
        let basis = match &self.identity {
            Identity::Ids(p) => format!("distinct resource ids at {p} in 2xx bodies{why}"),
            Identity::Bodies => {
                "distinct 2xx bodies (weak basis: give --id-pointer or --count-url)".into()
            }
            Identity::Blind => return Err(BLIND.into()),
        };
        let seen = |list: &[&Exchange]| -> BTreeSet<String> {
            list.iter()
                .filter(|e| e.response().is_some_and(|r| r.is_success()))
                .filter_map(|e| self.identity_of(e))
                .collect()
        };
        let old = seen(earlier);
        let count = seen(attempts).difference(&old).count() as u64;
        Ok(Executions {
            count,
            basis,
            exchanges,
        })
    }

    /// What identifies the resource an exchange created: its id, or its body. `Err` when the
    /// basis cannot tell resources apart.
    pub fn identity(&self, ex: &Exchange) -> Result<Option<String>, String> {
        match &self.identity {
            Identity::Blind => Err(NO_IDENTITY.into()),
            _ => Ok(self.identity_of(ex)),
        }
    }

    fn identity_of(&self, ex: &Exchange) -> Option<String> {
        match &self.identity {
            Identity::Ids(p) => resource_id(ex, Some(p)),
            Identity::Bodies => ex
                .response()
                .as_ref()
                .map(|r| String::from_utf8_lossy(&r.body).into_owned()),
            Identity::Blind => None,
        }
    }

    /// What a replay must give back, and its name: the resource id with `--id-pointer`, else
    /// the body (even a blind basis can see that a different body is no replay).
    pub fn replay_identity(&self, ex: &Exchange) -> (Option<String>, &'static str) {
        match &self.identity {
            Identity::Ids(p) => (resource_id(ex, Some(p)), "resource id"),
            _ => (
                ex.response()
                    .as_ref()
                    .map(|r| String::from_utf8_lossy(&r.body).into_owned()),
                "body",
            ),
        }
    }

    /// The resource id in a response, via `--id-pointer` (`None` without one).
    pub fn resource_id(&self, ex: &Exchange) -> Option<String> {
        match &self.identity {
            Identity::Ids(p) => resource_id(ex, Some(p)),
            _ => None,
        }
    }

    /// Checks that this basis tells two executions apart, from two accepted requests `a` and
    /// `b` with different keys and payloads sent between `before` and `after`. Returns the
    /// calibrated meter: bodies that do not differ make it blind. `Err` names the option to fix
    /// when the configured basis is broken (a counter that does not move, an id pointer that
    /// finds nothing or the same id twice).
    pub fn calibrate(
        &self,
        before: &Reading,
        after: &Reading,
        a: &Exchange,
        b: &Exchange,
    ) -> Result<Meter, String> {
        let mut out = self.clone();
        if let (Some(c), Some(x), Some(y)) = (&self.counter, before.value, after.value) {
            let moved = sane_delta(x, y, after.sent.saturating_sub(before.sent))
                .map_err(|e| format!("{e}; check {}", c.option()))?;
            if moved != 2 {
                return Err(format!(
                    "the effect counter went from {x} to {y} for two accepted requests (#{} #{}), not up by 2: check {}",
                    a.n,
                    b.n,
                    c.option()
                ));
            }
        }
        match &self.identity {
            Identity::Ids(p) => {
                let (ia, ib) = (resource_id(a, Some(p)), resource_id(b, Some(p)));
                match (ia, ib) {
                    (None, _) | (_, None) => {
                        let missing = if resource_id(a, Some(p)).is_none() {
                            a
                        } else {
                            b
                        };
                        return Err(format!(
                            "nothing at {p} in the 2xx body of #{}: check --id-pointer",
                            missing.n
                        ));
                    }
                    (Some(x), Some(y)) if x == y => {
                        return Err(format!(
                            "two different requests (#{} #{}) got the same {p} {x:?}: --id-pointer does not point at the created resource's id",
                            a.n, b.n
                        ));
                    }
                    _ => {}
                }
            }
            Identity::Bodies => {
                let body = |e: &Exchange| e.response().map(|r| r.body.clone());
                if body(a) == body(b) {
                    out.identity = Identity::Blind;
                }
            }
            Identity::Blind => {}
        }
        Ok(out)
    }
}

/// `after - before`, unless the counter went backwards or rose by more than the `sent` requests
/// could have caused.
fn sane_delta(before: u64, after: u64, sent: usize) -> Result<u64, String> {
    if after < before {
        return Err(format!(
            "the counter went from {before} to {after}: it is not counting this probe's executions"
        ));
    }
    let delta = after - before;
    if delta > sent as u64 {
        return Err(format!(
            "the counter went from {before} to {after} (+{delta}) while {sent} request{} were sent: it is not counting this probe's executions alone",
            if sent == 1 { "" } else { "s" }
        ));
    }
    Ok(delta)
}

/// The resource id in a 2xx JSON body at `pointer`, as text.
pub fn resource_id(ex: &Exchange, pointer: Option<&str>) -> Option<String> {
    let value = ex.response()?.json()?;
    match value.pointer(pointer?)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Reads a counter response: a 2xx whose JSON body has a non-negative integer at `pointer`.
fn parse_counter_response(
    r: &crate::http::exchange::ReceivedResponse,
    pointer: &str,
) -> Result<u64, String> {
    if !r.is_success() {
        return Err(format!("status {}", r.status));
    }
    let json = r.json().ok_or("the body is not JSON")?;
    let v = json
        .pointer(pointer)
        .ok_or_else(|| format!("nothing at {pointer} in the body"))?;
    parse_count(v).ok_or_else(|| format!("{v} at {pointer} is not a non-negative integer"))
}

fn parse_count(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Runs `--count-cmd` through the shell and parses the number it prints. Returns the value and
/// a one-line description for the timeline.
async fn run_count_cmd(cmd: &str, timeout: Duration) -> (Result<u64, String>, String) {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(timeout, child).await {
        Err(_) => {
            let e = format!("timed out after {} s", timeout.as_secs_f64());
            return (Err(e.clone()), format!("count command {e}"));
        }
        Ok(Err(e)) => {
            let e = format!("could not start sh: {e}");
            return (Err(e.clone()), e);
        }
        Ok(Ok(out)) => out,
    };
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        let e = format!(
            "exited with {} ({})",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return (Err(e.clone()), format!("count command {e}"));
    }
    match text.parse::<u64>() {
        Ok(n) => (Ok(n), format!("count command printed {n}")),
        Err(_) => {
            let e = format!("printed {text:?}, not a number");
            (Err(e.clone()), format!("count command {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::test_exchange as ex;

    fn meter(counter: bool, ids: bool) -> Meter {
        Meter::configured(
            counter.then(|| Counter::Url {
                url: "http://127.0.0.1/count".parse().unwrap(),
                pointer: "/count".into(),
            }),
            ids.then_some("/id"),
            Vec::new(),
            Duration::from_secs(1),
        )
    }

    fn r(value: Option<u64>, sent: usize) -> Reading {
        Reading::new(value, sent)
    }

    #[test]
    fn ids_beat_bodies_and_ignore_errors() {
        let a = ex(1, 201, r#"{"id":"p1","t":1}"#);
        let b = ex(2, 201, r#"{"id":"p1","t":2}"#);
        let c = ex(3, 409, r#"{"id":"p2"}"#);
        let none = r(None, 0);
        let by_id = meter(false, true).count(&none, &none, &[], &[&a, &b, &c]);
        assert_eq!(by_id.unwrap().count, 1);
        let by_body = meter(false, false).count(&none, &none, &[], &[&a, &b, &c]);
        assert_eq!(by_body.unwrap().count, 2);
        let later_only = meter(false, true).count(&none, &none, &[&a], &[&b]);
        assert_eq!(later_only.unwrap().count, 0);
    }

    #[test]
    fn counter_delta_is_the_strongest_basis() {
        let a = ex(1, 201, r#"{"id":"p1"}"#);
        let e = meter(true, true)
            .count(&r(Some(4), 0), &r(Some(6), 3), &[], &[&a])
            .unwrap();
        assert_eq!(e.count, 2);
        assert!(e.basis.starts_with("counter"));
    }

    #[test]
    fn an_insane_counter_counts_nothing() {
        let a = ex(1, 201, r#"{"id":"p1"}"#);
        let m = meter(true, true);
        let back = m.count(&r(Some(5), 0), &r(Some(3), 2), &[], &[&a]);
        assert!(back.unwrap_err().contains("from 5 to 3"));
        let jump = m.count(&r(Some(5), 0), &r(Some(u64::MAX), 2), &[], &[&a]);
        assert!(jump.unwrap_err().contains("while 2 requests were sent"));
    }

    /// A counter that went backwards across a restart (kept in memory) is replaced by ids for
    /// that probe: the same id after the restart is the replay (1 execution), a new id a second
    /// one. Without ids the probe stays unjudged; a counter that did not go back is still used.
    #[test]
    fn a_counter_reset_by_the_restart_falls_back_to_ids() {
        let original = ex(1, 201, r#"{"id":"p1"}"#);
        let replay = ex(2, 201, r#"{"id":"p1"}"#);
        let again = ex(3, 201, r#"{"id":"p2"}"#);
        let (before, reset) = (r(Some(7), 0), r(Some(0), 2));
        let m = meter(true, true);
        let e = m
            .count_across_restart(&before, &reset, &[], &[&original, &replay])
            .unwrap();
        assert_eq!(e.count, 1);
        assert!(
            e.basis
                .contains("judged by ids: the counter reset across the restart, 7 before, 0 after"),
            "{}",
            e.basis
        );
        let e = m
            .count_across_restart(&before, &reset, &[], &[&original, &again])
            .unwrap();
        assert_eq!(e.count, 2);
        let blind = meter(true, false).count_across_restart(&before, &reset, &[], &[&original]);
        assert!(blind.unwrap_err().contains("from 7 to 0"));
        let kept = m
            .count_across_restart(&before, &r(Some(8), 2), &[], &[&original, &replay])
            .unwrap();
        assert!(kept.basis.starts_with("counter"), "{}", kept.basis);
    }

    #[test]
    fn calibration_finds_a_blind_basis_and_broken_options() {
        let none = r(None, 0);
        let same_a = ex(1, 202, r#"{"status":"accepted"}"#);
        let same_b = ex(2, 202, r#"{"status":"accepted"}"#);
        let bodies = meter(false, false);
        let blind = bodies.calibrate(&none, &none, &same_a, &same_b).unwrap();
        assert_eq!(blind.describe(), "blind");
        assert_eq!(
            blind.count(&none, &none, &[], &[&same_a]).unwrap_err(),
            BLIND
        );
        let ids = meter(false, true).calibrate(&none, &none, &same_a, &same_b);
        assert!(ids.unwrap_err().contains("check --id-pointer"));
        let counter =
            meter(true, false).calibrate(&r(Some(7), 0), &r(Some(7), 2), &same_a, &same_b);
        assert!(counter.unwrap_err().contains("--count-url"));
        let differ = bodies
            .calibrate(
                &none,
                &none,
                &ex(1, 201, "{\"n\":1}"),
                &ex(2, 201, "{\"n\":2}"),
            )
            .unwrap();
        assert_eq!(differ.describe(), "bodies (weak)");
    }

    #[test]
    fn counter_reads_are_strict() {
        let read = |status, body: &str| {
            parse_counter_response(ex(1, status, body).response().unwrap(), "/count")
        };
        assert_eq!(read(200, r#"{"count":7}"#), Ok(7));
        assert!(read(200, r#"{"count":-1}"#).is_err());
        assert!(read(500, r#"{"count":7}"#).is_err());
        assert!(read(200, "seven").is_err());
    }
}
