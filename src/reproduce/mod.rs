//! `idem-check reproduce REPORT.json --probe ID [--exchange N]`: one probe's scenario from a
//! JSON report, sent again against the same target, so a reviewer sees the double charge again
//! without writing a script.
//!
//! [`recorded`] reads the report back; [`mod@plan`] picks what to send from the probe's exchanges:
//! its first burst (released again by the race engine, [`crate::http::h2burst`]), or the request
//! whose answer it dropped (held with a fresh hold name, dropped after as long as the probe
//! waited, then its retries at the offsets they were sent at, the hold released after the first),
//! or one exchange exactly as recorded. A burst and a lost response get a fresh key, since the
//! recorded one is used up; a single exchange keeps its own. The effect counter is read before
//! and, once it has been unchanged for the run's quiet window, after, with the same request the
//! probe read it with. Secrets come from the environment or `--var`, as the report's
//! `value_template`s name them; what is printed is masked like any report. A webhook check's
//! deliveries are sent again in order, each signed afresh (`deliveries.rs`).

mod deliveries;
pub mod plan;
pub mod recorded;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::HOLD_NAME;
use crate::effects::{Counter, Meter};
use crate::http::burst::BurstOptions;
use crate::http::client::Client;
use crate::http::exchange::{version_text, Header};
use crate::http::raw::{self, RawResponse};
use crate::http::{h2burst, Connector, HttpError, Request};
use crate::quiet::{self, Settling};
use crate::redact::{Secrets, REDACTED};
use crate::report::ReplayInputs;

pub use plan::{plan, PlanError, Scenario};
pub use recorded::{ReadError, RecordedExchange, RecordedRun};

/// Why a recorded request cannot be sent again.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("exchange #{n}'s {header} needs ${var}: export it or pass --var {var}=VALUE")]
    MissingVar {
        n: usize,
        header: String,
        var: String,
    },
    #[error("exchange #{n}'s {what} was masked in the report and no variable restores it; reproduce cannot send it again")]
    Masked { n: usize, what: String },
    #[error("exchange #{n}'s body was cut in the report ({size} bytes sent); write the report with a larger --max-body-bytes")]
    CutBody { n: usize, size: usize },
    #[error("exchange #{n}'s URL {url} does not parse: {why}")]
    Url { n: usize, url: String, why: String },
    #[error("exchange #{n}'s key ({place}) holds no UUID to replace with a fresh key; send it as recorded with --exchange {n}")]
    NoFreshKey { n: usize, place: String },
    #[error("exchange #{n} is signed again with ${var}, the secret it was signed with: export it or pass --var {var}=VALUE")]
    MissingSecret { n: usize, var: String },
    #[error("${var}: {why}")]
    BadSecret { var: String, why: String },
    #[error(
        "exchange #{n} was signed by the scheme {scheme:?}, which this idem-check does not know"
    )]
    UnknownScheme { n: usize, scheme: String },
}

/// Looks a variable up by name: `--var` first, then the environment.
pub type Variables = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// How the replay runs: where secrets come from and the timing the report recorded.
pub struct Replayer {
    client: Client,
    connector: Arc<Connector>,
    inputs: ReplayInputs,
    vars: Variables,
    /// The values of the variables used, masked in everything printed.
    used: std::sync::Mutex<Vec<(String, String)>>,
}

/// What the replay saw.
pub struct Replayed {
    /// Lines to print, masked.
    pub lines: Vec<String>,
    /// The counter before and after, when the probe read one.
    pub counts: Option<(u64, u64)>,
    /// Whether the scenario is one whose requests share a key (a burst, a lost response): then
    /// a rise of more than one is a duplicated effect.
    pub one_key: bool,
    /// Whether no request got an answer at all.
    pub unanswered: bool,
}

impl Replayed {
    /// How much the counter rose.
    pub fn rise(&self) -> Option<u64> {
        self.counts.map(|(b, a)| a.saturating_sub(b))
    }
}

/// Reads before and after a scenario are this far apart at least, whatever the quiet window.
const MIN_QUIET: Duration = Duration::from_millis(50);

impl Replayer {
    pub fn new(inputs: ReplayInputs, vars: Variables) -> anyhow::Result<Replayer> {
        let connector = Arc::new(Connector::default());
        let timeout = Duration::from_millis(inputs.timeout_ms.max(1));
        let client = Client::new(connector.clone(), timeout, 64 * 1024)?;
        Ok(Replayer {
            client,
            connector,
            inputs,
            vars,
            used: std::sync::Mutex::new(Vec::new()),
        })
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.inputs.timeout_ms.max(1))
    }

    /// The secrets restored so far, to mask output with.
    fn secrets(&self) -> Secrets {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.iter().fold(Secrets::default(), |s, (var, value)| {
            s.with_named(value, var, "a variable reproduce filled in")
        })
    }

    /// `ex`'s request as it can be sent again: secrets filled in from their variables, Host
    /// and Content-Length left to the client, which derives them again.
    pub fn restore(&self, ex: &RecordedExchange) -> Result<Request, RestoreError> {
        let req = &ex.request;
        let n = ex.n;
        if let Some(size) = req.body_size {
            return Err(RestoreError::CutBody { n, size });
        }
        if req.url.contains(REDACTED) {
            return Err(RestoreError::Masked {
                n,
                what: "URL".into(),
            });
        }
        if contains(&req.body.0, REDACTED.as_bytes()) {
            return Err(RestoreError::Masked {
                n,
                what: "body".into(),
            });
        }
        let url = url::Url::parse(&req.url).map_err(|e| RestoreError::Url {
            n,
            url: req.url.clone(),
            why: e.to_string(),
        })?;
        let mut headers = Vec::new();
        for h in &req.headers {
            let lower = h.name.to_ascii_lowercase();
            if lower == "host" || lower == "content-length" {
                continue;
            }
            let value = match &h.value_template {
                Some(template) => self.fill(template, n, &h.name)?.into_bytes(),
                None if contains(&h.value.0, REDACTED.as_bytes()) => {
                    return Err(RestoreError::Masked {
                        n,
                        what: format!("header {}", h.name),
                    })
                }
                None => h.value.0.clone(),
            };
            headers.push(Header::new(h.name.clone(), value));
        }
        Ok(Request {
            method: req.method.clone(),
            url,
            headers,
            body: req.body.0.clone(),
        })
    }

    /// `template` with every `${VAR}` filled in.
    fn fill(&self, template: &str, n: usize, header: &str) -> Result<String, RestoreError> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let var = &rest[start + 2..start + len];
            let value = (self.vars)(var).ok_or_else(|| RestoreError::MissingVar {
                n,
                header: header.to_string(),
                var: var.to_string(),
            })?;
            self.used
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((var.to_string(), value.clone()));
            out.push_str(&rest[..start]);
            out.push_str(&value);
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// `req` with a fresh key: the UUID in the key's value replaced, so quoting and any prefix
    /// stay as the probe wrote them. Returns the request and the new value.
    fn fresh_key(&self, req: Request, n: usize) -> Result<(Request, String), RestoreError> {
        let place = self.inputs.key_place();
        let no_key = || RestoreError::NoFreshKey {
            n,
            place: place.label(),
        };
        let old = place
            .values_in(&req.headers, &req.body)
            .into_iter()
            .next()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .ok_or_else(no_key)?;
        let at = uuid_at(&old).ok_or_else(no_key)?;
        let value = format!(
            "{}{}{}",
            &old[..at],
            uuid::Uuid::new_v4(),
            &old[at + UUID_LEN..]
        );
        Ok((place.put(req, value.as_bytes()), value))
    }

    /// The counter the probe read: its recorded GET, or none.
    fn counter(&self, exchanges: &[RecordedExchange]) -> Result<Option<Meter>, RestoreError> {
        let (Some(url), Some(pointer)) = (&self.inputs.count_url, &self.inputs.count_pointer)
        else {
            return Ok(None);
        };
        let Some(read) = exchanges
            .iter()
            .find(|e| e.request.method == "GET" && &e.request.url == url)
        else {
            return Ok(None);
        };
        let req = self.restore(read)?;
        Ok(Some(Meter::configured(
            Some(Counter::Url {
                url: req.url.clone(),
                pointer: pointer.clone(),
            }),
            None,
            req.headers,
            self.timeout(),
        )))
    }

    /// Reads the counter once.
    async fn count(&self, meter: &Meter) -> Result<u64, String> {
        match meter.read(&self.client).await {
            Some(read) => read.value,
            None => Err("no counter".into()),
        }
    }

    /// The counter once it has been quiet for the run's quiet window ([`quiet::until_quiet`],
    /// the wait every mode counts with), so an execution that lands after its answer is still
    /// counted.
    async fn settled_count(&self, meter: &Meter) -> Result<(u64, String), String> {
        let settling = Settling {
            quiet: Duration::from_millis(self.inputs.quiet_ms).max(MIN_QUIET),
            timeout: self.timeout(),
        };
        quiet::until_quiet(meter, &self.client, settling, None)
            .await
            .map(|s| (s.value, s.describe()))
            .map_err(|u| u.why.to_string())
    }

    /// Sends `scenario` again and says what it saw. `exchanges` are the probe's, for the
    /// counter read.
    pub async fn play(
        &self,
        scenario: &Scenario,
        exchanges: &[RecordedExchange],
        attempts: usize,
    ) -> anyhow::Result<Replayed> {
        let meter = self.counter(exchanges)?;
        let mut lines = Vec::new();
        if meter.is_none() {
            lines.push(match &self.inputs.count_cmd {
                Some(_) => "the run counted with --count-cmd, which reproduce does not run from a report: statuses only",
                None => "no counter read in this probe's exchanges: statuses only",
            }.to_string());
        }
        // A race shows by chance: a burst is sent again, each time with a fresh key, until one
        // key executes twice. The other scenarios do not depend on luck.
        let tries = match scenario {
            Scenario::Burst { .. } if meter.is_some() => attempts.max(1),
            _ => 1,
        };
        let (one_key, mut unanswered, mut counts) = (
            matches!(
                scenario,
                Scenario::Burst { .. } | Scenario::LostResponse { .. }
            ),
            false,
            None,
        );
        for attempt in 1..=tries {
            if tries > 1 {
                lines.push(format!("attempt {attempt} of at most {tries}:"));
            }
            let before = match &meter {
                Some(m) => Some(self.count(m).await.map_err(unreadable)?),
                None => None,
            };
            if let Some(b) = before {
                lines.push(format!("count before: {b}"));
            }
            let start = Instant::now();
            unanswered = match scenario {
                Scenario::Burst { members } => self.burst(members, &mut lines).await?,
                Scenario::LostResponse { original, retries } => {
                    self.lost_response(original, retries, start, &mut lines)
                        .await?
                }
                Scenario::Single { exchange } => self.single(exchange, &mut lines).await?,
                Scenario::Deliveries { members } => self.deliveries(members, &mut lines).await?,
            };
            if let (Some(m), Some(b)) = (&meter, before) {
                let (after, how) = self.settled_count(m).await.map_err(unreadable)?;
                lines.push(format!("count after: {after} ({how})"));
                counts = Some((b, after));
            }
            if unanswered || counts.is_some_and(|(b, a)| a.saturating_sub(b) > 1) {
                break;
            }
        }
        let secrets = self.secrets();
        Ok(Replayed {
            lines: lines.iter().map(|l| secrets.redact(l)).collect(),
            counts,
            one_key,
            unanswered,
        })
    }

    async fn burst(
        &self,
        members: &[RecordedExchange],
        lines: &mut Vec<String>,
    ) -> anyhow::Result<bool> {
        let first = &members[0];
        let (req, key) = self.fresh_key(self.restore(first)?, first.n)?;
        let sent: Vec<_> = (0..members.len()).map(|_| req.prepare()).collect();
        lines.push(format!(
            "burst #{}–#{} of the report: {} copies released together, key ({}): {key}",
            first.n,
            members[members.len() - 1].n,
            members.len(),
            self.inputs.key_place().label()
        ));
        let opts = BurstOptions {
            timeout: self.timeout(),
            max_body: 64 * 1024,
            ..BurstOptions::default()
        };
        let report = h2burst::burst_for_target(&self.connector, &sent, &opts, false).await?;
        lines.push(format!(
            "released within {:.0} µs ({})",
            report.spread_us, report.release
        ));
        lines.push(format!(
            "  {} (the report: {})",
            tally(report.responses.iter().map(status)),
            tally(members.iter().map(RecordedExchange::status_text))
        ));
        Ok(report.responses.iter().all(|r| r.result.is_err()))
    }

    async fn lost_response(
        &self,
        original: &RecordedExchange,
        retries: &[RecordedExchange],
        start: Instant,
        lines: &mut Vec<String>,
    ) -> anyhow::Result<bool> {
        let (mut req, key) = self.fresh_key(self.restore(original)?, original.n)?;
        let hold = self.hold(&mut req);
        let wait = Duration::from_secs_f64(original.duration_ms.max(0.0) / 1000.0);
        lines.push(format!(
            "#{} sent with a fresh key ({}): {key}{}, its connection closed {} ms after it was written",
            original.n,
            self.inputs.key_place().label(),
            hold.as_ref().map_or(String::new(), |h| format!(", held ({h})")),
            wait.as_millis()
        ));
        let dropped =
            raw::send_then_drop(&self.connector, &req.prepare(), wait, self.timeout()).await;
        if !matches!(dropped.result, Err(HttpError::Dropped)) {
            lines.push(format!("  the original was not sent: {}", status(&dropped)));
            return Ok(true);
        }
        let mut answered = false;
        for (i, retry) in retries.iter().enumerate() {
            let offset = retry.start_ms - original.start_ms;
            let at = start + Duration::from_secs_f64(offset.max(0.0) / 1000.0);
            tokio::time::sleep_until(at.into()).await;
            let retry_req = self
                .inputs
                .key_place()
                .put(self.restore(retry)?, key.as_bytes());
            let (_, r) = self.client.send(&retry_req).await;
            answered |= r.result.is_ok();
            lines.push(format!(
                "#{} {} (+{:.0} ms): {} (the report: {})",
                retry.n,
                retry.role,
                start.elapsed().as_secs_f64() * 1000.0,
                status(&r),
                retry.status_text()
            ));
            if i == 0 {
                if let Some(line) = self.release(hold.as_deref()).await {
                    lines.push(line);
                }
            }
        }
        if retries.is_empty() {
            if let Some(line) = self.release(hold.as_deref()).await {
                lines.push(line);
            }
        }
        // The dropped original may still run: wait as long as the probe saw it take (its last
        // retry ended when the original's result was there) before watching the counter.
        if let Some(last) = retries.last() {
            let span = last.end_ms() - original.start_ms;
            tokio::time::sleep_until(
                (start + Duration::from_secs_f64(span.max(0.0) / 1000.0)).into(),
            )
            .await;
        }
        Ok(!answered && !retries.is_empty())
    }

    async fn single(&self, ex: &RecordedExchange, lines: &mut Vec<String>) -> anyhow::Result<bool> {
        let (req, how) = match self.resent(ex)? {
            deliveries::Resent::Ready(req, how) => (req, how),
            deliveries::Resent::Unsignable => {
                lines.push(format!("#{} {}: its signature is over other bytes than those sent, which no key signs again: not sent", ex.n, ex.role));
                return Ok(false);
            }
        };
        let (sent, r) = self.client.send(&req).await;
        lines.push(format!(
            "#{} {} sent again ({how}): {} {}",
            ex.n, ex.role, sent.method, sent.url
        ));
        for h in &sent.headers {
            lines.push(format!("> {}: {}", h.name, h.value_str()));
        }
        match &r.result {
            Ok(resp) => {
                lines.push(format!("< {} {}", version_text(resp.version), resp.status));
                for h in &resp.headers {
                    lines.push(format!("< {}: {}", h.name, h.value_str()));
                }
                lines.push(format!(
                    "< {}",
                    crate::redact::bytes_for_text(&resp.body, 2048)
                ));
            }
            Err(e) => lines.push(format!("no response: {e}")),
        }
        Ok(r.result.is_err())
    }

    /// Puts a fresh hold on `req` when it carries the run's hold header whose value names the
    /// hold; returns the hold's name to release.
    fn hold(&self, req: &mut Request) -> Option<String> {
        let (name, template) = self.inputs.hold_header.as_deref()?.split_once(':')?;
        let (name, template) = (name.trim(), template.trim());
        if !req
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case(name))
        {
            return None;
        }
        if !template.contains(HOLD_NAME) {
            return Some(format!("{name}: {template}"));
        }
        let hold = format!("hold-{}", uuid::Uuid::new_v4().simple());
        *req = req
            .clone()
            .set_header(name, template.replace(HOLD_NAME, &hold));
        Some(hold)
    }

    /// Ends the hold `hold` early with `--hold-release`, as the probe did.
    async fn release(&self, hold: Option<&str>) -> Option<String> {
        let hold = hold?;
        let url = self.inputs.hold_release.as_ref()?.replace(HOLD_NAME, hold);
        let req = Request {
            method: "POST".into(),
            url: url::Url::parse(&url).ok()?,
            headers: Vec::new(),
            body: Vec::new(),
        };
        let (_, r) = self.client.send(&req).await;
        Some(format!("released the hold (POST {url} → {})", status(&r)))
    }
}

/// The error of a counter read that failed.
fn unreadable(e: String) -> anyhow::Error {
    anyhow::anyhow!("the effect counter could not be read: {e}")
}

/// The 36 characters of a hyphenated UUID.
const UUID_LEN: usize = 36;

/// Where the first hyphenated UUID starts in `s`.
fn uuid_at(s: &str) -> Option<usize> {
    (0..s.len().saturating_sub(UUID_LEN - 1)).find(|&i| {
        s.is_char_boundary(i)
            && s.is_char_boundary(i + UUID_LEN)
            && uuid::Uuid::try_parse(&s[i..i + UUID_LEN]).is_ok()
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn status(r: &RawResponse) -> String {
    match &r.result {
        Ok(resp) => resp.status.to_string(),
        Err(e) => format!("no response ({e})"),
    }
}

/// "16 × 201" or "1 × 201, 15 × 409": answers by status, in order of first appearance.
fn tally(statuses: impl Iterator<Item = String>) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in statuses {
        match counts.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => counts.push((s, 1)),
        }
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} × {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_uuid_is_found_inside_quotes() {
        let key = "\"d5177497-3198-4b6f-b222-ba6a42d54c30\"";
        assert_eq!(uuid_at(key), Some(1));
        assert_eq!(uuid_at("abc"), None);
    }

    fn inputs() -> ReplayInputs {
        ReplayInputs {
            key_header: "Idempotency-Key".into(),
            key_in_body: None,
            count_url: None,
            count_pointer: None,
            count_cmd: None,
            hold_header: Some("X-Hold: {{hold}}".into()),
            hold_release: None,
            quiet_ms: 300,
            timeout_ms: 1000,
        }
    }

    pub(super) fn replayer(vars: &[(&str, &str)]) -> Replayer {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Replayer::new(inputs(), Box::new(lookup)).unwrap()
    }

    fn exchange(headers: serde_json::Value, body: serde_json::Value) -> RecordedExchange {
        serde_json::from_value(json!({
            "n": 3, "role": "original", "start_ms": 0.0, "duration_ms": 1.0,
            "request": {"method": "POST", "url": "http://127.0.0.1:1/pay", "headers": headers, "body": body},
        }))
        .unwrap()
    }

    #[test]
    fn a_masked_credential_is_filled_in_from_its_variable() {
        let ex = exchange(
            json!([
                {"name": "host", "value": "127.0.0.1:1"},
                {"name": "authorization", "value": "Bearer [redacted]", "value_template": "Bearer ${IDEM_TOKEN_A}"},
                {"name": "idempotency-key", "value": "\"8e03978e-40d5-43e8-bc93-6894a57f9324\""},
                {"name": "content-length", "value": "2"},
            ]),
            json!("{}"),
        );
        let r = replayer(&[("IDEM_TOKEN_A", "tok-123")]);
        let req = r.restore(&ex).unwrap();
        let names: Vec<&str> = req.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(
            names,
            ["authorization", "idempotency-key"],
            "host and length are derived again"
        );
        assert_eq!(req.headers[0].value, b"Bearer tok-123");
        assert_eq!(r.secrets().redact("Bearer tok-123"), "Bearer [redacted]");
        let (fresh, key) = r.fresh_key(req, 3).unwrap();
        assert!(
            key.starts_with('"') && key.ends_with('"') && key.len() == 38,
            "{key}"
        );
        assert_ne!(key, "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"");
        assert_eq!(
            fresh
                .headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("idempotency-key"))
                .count(),
            1
        );

        assert_eq!(
            replayer(&[]).restore(&ex).unwrap_err(),
            RestoreError::MissingVar {
                n: 3,
                header: "authorization".into(),
                var: "IDEM_TOKEN_A".into()
            }
        );
    }

    #[test]
    fn what_the_report_masked_or_cut_is_refused_naming_the_exchange() {
        let masked = exchange(json!([]), json!("{\"token\":\"[redacted]\"}"));
        assert_eq!(
            replayer(&[]).restore(&masked).unwrap_err(),
            RestoreError::Masked {
                n: 3,
                what: "body".into()
            }
        );
        let mut cut = exchange(json!([]), json!("{"));
        cut.request.body_size = Some(20_000);
        assert_eq!(
            replayer(&[]).restore(&cut).unwrap_err(),
            RestoreError::CutBody { n: 3, size: 20_000 }
        );
        let secret_header = exchange(
            json!([{"name": "x-api-key", "value": "[redacted]"}]),
            json!(""),
        );
        assert!(matches!(
            replayer(&[]).restore(&secret_header),
            Err(RestoreError::Masked { n: 3, .. })
        ));
    }

    #[test]
    fn a_named_hold_gets_a_fresh_name() {
        let r = replayer(&[]);
        let ex = exchange(json!([{"name": "X-Hold", "value": "hold-old"}]), json!(""));
        let mut req = r.restore(&ex).unwrap();
        let name = r
            .hold(&mut req)
            .expect("the request carries the hold header");
        assert!(name.starts_with("hold-") && name != "hold-old");
        assert_eq!(req.headers[0].value_str(), name);
    }
}
