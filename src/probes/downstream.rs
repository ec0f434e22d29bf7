//! The provider side of a `downstream` probe: the fake provider ([`crate::provider`]) as one
//! probe sees it — its calls (those holding the probe's token), recorded into the probe's
//! evidence beside the client's exchanges once they settled, its charges, its script — and
//! the client that retries as a real one does until the API answers definitively.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::check;
use crate::config::Downstream;
use crate::http::exchange::{Exchange, Role};
use crate::http::Request;
use crate::outcome::Stop;
use crate::probes::{CheckDecl, ProbeCtx, Provider};
use crate::provider::ledger::{Call, Charge};
use crate::provider::profile::Profile;
use crate::provider::script::Script;

use super::kit::session::Streak;

/// The longest a client waits on a `Retry-After` before it tries again.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(2);

/// The pause between a client's tries when the API names none.
const BACKOFF: Duration = Duration::from_millis(100);

/// A real client gives up after this many tries of one request.
const MAX_TRIES: usize = 12;

/// A provider call as the probe's evidence holds it: the call and its exchange number.
#[derive(Debug, Clone)]
pub struct Seen {
    pub call: Call,
    pub n: usize,
}

/// One probe's view of the fake provider.
pub struct ProviderSide {
    pub down: Downstream,
    pub token: String,
    /// When the probe opened it: calls since then without a token are named in the evidence.
    since: Instant,
    /// The calls recorded so far.
    seen: Vec<Seen>,
}

impl ProviderSide {
    /// The fake provider the probe declared it needs, playing normally for its token.
    pub fn open(ctx: &ProbeCtx) -> Result<ProviderSide, Stop> {
        let down = ctx.need::<Provider>()?;
        let token = ctx.unique().to_string();
        down.fake.arm(&token, Script::normal());
        Ok(ProviderSide {
            down,
            token,
            since: Instant::now(),
            seen: Vec::new(),
        })
    }

    pub fn profile(&self) -> &'static Profile {
        self.down.fake.profile()
    }

    /// Plays `script` on the probe's calls from now on.
    pub fn arm(&self, script: Script) {
        self.down.fake.arm(&self.token, script);
    }

    /// Ends the holds of the probe's calls.
    pub fn release(&self) {
        self.down.fake.release(&self.token);
    }

    /// Later calls are answered normally.
    pub fn disarm(&self) {
        self.down.fake.disarm(&self.token);
    }

    /// The calls that reached the fake so far, recorded or not.
    pub fn calls_now(&self) -> Vec<Call> {
        self.down.fake.calls(&self.token)
    }

    /// Waits (bounded by the run's timeout) until `done` holds for the probe's calls.
    pub async fn wait_until(&self, ctx: &ProbeCtx, done: impl Fn(&[Call]) -> bool) -> bool {
        self.down
            .fake
            .wait_for(&self.token, ctx.config.timeout, done)
            .await
    }

    /// Waits until the probe's calls settled (all answered, none new for the quiet window),
    /// records the new ones as exchanges, and returns every call seen so far.
    pub async fn settle(&mut self, ctx: &mut ProbeCtx) -> Vec<Seen> {
        let quiet = ctx.config.quiet_window;
        let settled = self
            .down
            .fake
            .settle(&self.token, quiet, ctx.config.timeout * 2)
            .await;
        if !settled {
            ctx.note("the provider calls had not settled within twice the timeout; counted as they stood");
        }
        self.record(ctx)
    }

    /// Records the calls not yet in the evidence and returns every call seen so far.
    pub fn record(&mut self, ctx: &mut ProbeCtx) -> Vec<Seen> {
        for call in self.calls_now() {
            if let Some(s) = self.seen.iter_mut().find(|s| s.call.n == call.n) {
                s.call = call;
                continue;
            }
            let n = record_call(ctx, &self.down, &call);
            self.seen.push(Seen { call, n });
        }
        for stray in self.down.fake.unattributed_since(self.since) {
            let line = format!(
                "provider call {} {} {} holds no probe's token: not counted here (pass --provider-correlate if the API sends the reference elsewhere)",
                stray.n, stray.method, stray.path
            );
            if !ctx.record.timeline.contains(&line) {
                ctx.note(line);
            }
        }
        self.seen.clone()
    }

    /// The charges the probe's calls committed.
    pub fn charges(&self) -> Vec<Charge> {
        self.down.fake.charges(&self.token)
    }

    /// The exchange numbers of the calls that committed `charges`.
    pub fn cite(&self, charges: &[Charge]) -> Vec<usize> {
        charges
            .iter()
            .filter_map(|c| self.seen.iter().find(|s| s.call.n == c.call).map(|s| s.n))
            .collect()
    }

    /// Judges the number of charges the probe's calls committed, counted in the ledger.
    pub fn expect_charges(&self, ctx: &mut ProbeCtx, decl: &CheckDecl, expected: u64) {
        let charges = self.charges();
        let spec = ctx.spec(decl);
        ctx.push(check::executions(
            &spec,
            "charges in the fake provider's ledger",
            expected,
            charges.len() as u64,
            self.cite(&charges),
        ));
    }

    /// Judges the charges of one client request whose tries ended with `last`: one when it
    /// was answered 2xx (the API said it charged), at most one otherwise — a request answered
    /// as not (or not yet) charged is as right with no charge as with one; two never are.
    pub fn expect_request_charges(
        &self,
        ctx: &mut ProbeCtx,
        decl: &CheckDecl,
        last: Option<&Exchange>,
    ) {
        if last.is_some_and(|e| e.response().is_some_and(|r| r.is_success())) {
            return self.expect_charges(ctx, decl, 1);
        }
        let charges = self.charges();
        let spec = ctx.spec(decl);
        ctx.push(check::executions_at_most(
            &spec,
            "charges in the fake provider's ledger",
            1,
            charges.len() as u64,
            self.cite(&charges),
        ));
    }

    /// Judges that `calls` all carry one key (`same`) or each another; unjudged without a call.
    /// When none carries a key there is nothing to compare: `prov-key-present` judges that,
    /// and the timeline says why this check is absent.
    pub fn expect_keys(&self, ctx: &mut ProbeCtx, decl: &CheckDecl, calls: &[Seen], same: bool) {
        if calls.is_empty() {
            ctx.unjudged(decl.id, "no provider call to compare");
            return;
        }
        if calls.iter().all(|s| s.call.key.is_none()) {
            ctx.note(format!(
                "{}: not compared, no provider call carried a key (prov-key-present judges that)",
                decl.id
            ));
            return;
        }
        let spec = ctx.spec(decl);
        ctx.push(check::values_relation(
            &spec,
            "provider key",
            &keys(calls),
            same,
        ));
    }

    /// SKIPs the probe when the fake turned the API's connections away since the probe opened
    /// and no call got through: the API is pointed at the fake but its client does not trust
    /// the CA `--provider-tls` wrote, or speaks plain HTTP to it.
    pub fn unless_refused(&self, client: &[&Exchange]) -> Result<(), Stop> {
        if !self.calls_now().is_empty() {
            return Ok(());
        }
        let Some(refused) = self.down.fake.refusals_line(self.since) else {
            return Ok(());
        };
        Err(
            Stop::Skip(format!("no provider call got through: {refused}").into())
                .citing(client.iter().map(|e| e.n)),
        )
    }

    /// SKIPs the probe when its client requests were answered and no call reached the fake:
    /// the API is not pointed at it.
    pub fn unless_reached(&self, client: &[&Exchange]) -> Result<(), Stop> {
        self.unless_refused(client)?;
        if !self.seen.is_empty() || !client.iter().any(|e| e.response().is_some()) {
            return Ok(());
        }
        Err(Stop::Skip(
            format!(
                "the API did not call the fake provider at {} ({} profile): point the API's provider base URL at it (e.g. stripe.api_base, or the SDK's host/port setting) and run again",
                self.down.fake.url(),
                self.profile().name
            )
            .into(),
        )
        .citing(client.iter().map(|e| e.n)))
    }

    /// Notes, for each client exchange, the provider calls that arrived while it was in
    /// flight and their keys: how many attempts each client request caused.
    pub fn note_attempts(&self, ctx: &mut ProbeCtx, client: &[&Exchange]) {
        for ex in client {
            let start = ctx.instant_of(ex);
            let end = start + Duration::from_secs_f64(ex.duration_ms / 1000.0);
            let during: Vec<&Seen> = self
                .seen
                .iter()
                .filter(|s| s.call.at >= start && s.call.at <= end)
                .collect();
            let keys: Vec<String> = during
                .iter()
                .map(|s| format!("#{} {}", s.n, s.call.key().unwrap_or("(no key)")))
                .collect();
            ctx.note(format!(
                "client request #{} caused {} provider call{}{}{}",
                ex.n,
                during.len(),
                if during.len() == 1 { "" } else { "s" },
                if keys.is_empty() { "" } else { ": " },
                keys.join(", ")
            ));
        }
    }
}

/// Records one provider call as an exchange of the probe.
fn record_call(ctx: &mut ProbeCtx, down: &Downstream, call: &Call) -> usize {
    let mut label = format!("provider call {}", call.n);
    if let Some(what) = &call.scripted {
        label.push_str(&format!(", {what}"));
    }
    let finished = call.finished.unwrap_or_else(Instant::now);
    ctx.record
        .record_at_provider(
            Role::at_provider(label),
            call.request(&down.fake.url()),
            call.outcome(),
            (call.at, finished),
        )
        .n
}

/// Whether an answer settles the request for a client: a 2xx, or a 4xx other than the
/// retryable ones (408, 409 in progress, 425, 429).
pub fn definitive(ex: &Exchange) -> bool {
    match ex.status() {
        Some(s) if (200..300).contains(&s) => true,
        Some(408 | 409 | 425 | 429) => false,
        Some(s) => (400..500).contains(&s),
        None => false,
    }
}

/// How long a client waits after `ex` before it tries again: the answer's `Retry-After`
/// (seconds, capped), else a short backoff.
fn pause_after(ex: &Exchange) -> Duration {
    ex.response()
        .and_then(|r| r.header("retry-after"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s).min(RETRY_AFTER_CAP))
        .unwrap_or(BACKOFF)
}

/// Sends `req` as a real client does: again with the same key while the answer is not
/// definitive, honouring `Retry-After`, within twice the run's timeout and [`MAX_TRIES`].
pub async fn until_definitive(ctx: &mut ProbeCtx, role: &str, req: &Request) -> Vec<Exchange> {
    keep_trying(ctx, role, req, Vec::new()).await
}

/// [`until_definitive`] for a request already tried as `tries`: first the pause the last try
/// asks for (none when there is no try yet), then the client's next tries.
pub async fn keep_trying(
    ctx: &mut ProbeCtx,
    role: &str,
    req: &Request,
    mut tries: Vec<Exchange>,
) -> Vec<Exchange> {
    let deadline = Instant::now() + ctx.config.timeout * 2;
    loop {
        if let Some(last) = tries.last() {
            let pause = pause_after(last);
            if definitive(last) || tries.len() >= MAX_TRIES || Instant::now() + pause >= deadline {
                break;
            }
            tokio::time::sleep(pause).await;
        }
        let label = match tries.len() {
            0 => role.to_string(),
            n => format!("{role}, try {}", n + 1),
        };
        let ex = ctx.send(label, req.clone()).await;
        tries.push(ex);
    }
    tries
}

/// Resolves once the request [`send_while`] sends was answered (or failed): what `meanwhile`
/// can wait on besides the provider's calls.
pub struct Answered(watch::Receiver<bool>);

impl Answered {
    /// Waits until the request was answered.
    pub async fn wait(&mut self) {
        // The sender is dropped only after it sent `true`.
        let _ = self.0.wait_for(|answered| *answered).await;
    }
}

/// How [`send_while`] sends its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// The ordinary client, on a kept-alive connection.
    KeptAlive,
    /// Exact bytes on a connection of its own: a target that dies mid-request is seen dying,
    /// where the ordinary client would take the closed connection for a stale one and send the
    /// request again.
    Fresh,
}

/// Sends `req` while `meanwhile` runs on the probe (a second request, a restart), told when
/// `req` was answered, then records it: its exchange is numbered after what `meanwhile`
/// recorded, its offsets say when it really went.
pub async fn send_while<T>(
    ctx: &mut ProbeCtx,
    (role, connection): (&str, Connection),
    req: Request,
    meanwhile: impl AsyncFnOnce(&mut ProbeCtx, Answered) -> T,
) -> (Exchange, T) {
    let t = match connection {
        Connection::KeptAlive => ctx.transports.ordinary.clone(),
        Connection::Fresh => ctx.transports.exact.clone(),
    };
    let (answered, seen) = watch::channel(false);
    let send = async {
        let attempts = t.send(&req).await;
        answered.send_replace(true);
        attempts
    };
    let (attempts, out) = tokio::join!(send, meanwhile(ctx, Answered(seen)));
    let mut last = None;
    for a in attempts {
        let ex = ctx.record.record_attempt(role, a);
        ctx.session.saw(&ex, Streak::Counts);
        last = Some(ex);
    }
    (
        last.unwrap_or_else(|| unreachable!("a request is sent at least once")),
        out,
    )
}

/// The provider reference the API's answer carries, at `--provider-ref-pointer`.
pub fn provider_ref(down: &Downstream, ex: &Exchange) -> Option<String> {
    let body = ex.response()?.json()?;
    match body.pointer(&down.ref_pointer)? {
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The keys of `calls` with their exchange numbers, as a value check compares them.
pub fn keys(calls: &[Seen]) -> Vec<(usize, Option<String>)> {
    calls.iter().map(|s| (s.n, s.call.key.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpError;
    use crate::probes::kit::fake;

    #[test]
    fn a_client_retries_what_is_not_definitive_and_honours_retry_after() {
        let ex = |status| fake::exchange(&fake::answered(status));
        for settled in [200, 201, 400, 402, 422] {
            assert!(definitive(&ex(settled)), "{settled}");
        }
        for retried in [409, 425, 429, 500, 502, 503] {
            assert!(!definitive(&ex(retried)), "{retried}");
        }
        assert!(!definitive(&fake::exchange(&fake::failed(
            HttpError::ClosedBeforeAnyByte("reset".into())
        ))));
        let mut unavailable = fake::answered(503);
        if let Ok(r) = &mut unavailable.result {
            r.headers
                .push(crate::http::exchange::Header::new("Retry-After", "30"));
        }
        assert_eq!(pause_after(&fake::exchange(&unavailable)), RETRY_AFTER_CAP);
        assert_eq!(pause_after(&ex(429)), Duration::ZERO);
        assert_eq!(pause_after(&ex(502)), BACKOFF);
    }
}
