//! The checks of `idem-check webhook`: what each sends and how it is judged. Each plays
//! against two narrow collaborators, the [`Sender`] and the [`Settler`], and records into its
//! own [`Trial`]; the verdict is decided from the trial's checks as for `run`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::check::{self, Check, CheckSpec, Severity, Symptom};
use crate::config::RestartHook;
use crate::http::exchange::{Exchange, Header};
use crate::outcome::Stop;

use super::sender::{Sender, Signer, Trial};
use super::settle::Settler;

/// The group every webhook check is listed under.
pub const GROUP: &str = "webhook";

/// What a check is, for reports, `idem-check list` and `idem-check explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookCheck {
    pub id: &'static str,
    /// Where the requirement comes from.
    pub section: &'static str,
    pub stimulus: &'static str,
    pub requirement: &'static str,
    /// What it judges, each with the severity of a failure (the reports' checks; a test keeps
    /// the two in step).
    pub judged: &'static [Judged],
    /// The options without which it SKIPs.
    pub needs: Option<&'static str>,
}

/// One judged point of a check: its id in the report, how grave its failure is, what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judged {
    pub severity: Severity,
    pub id: &'static str,
    pub what: &'static str,
}

const fn j(severity: Severity, id: &'static str, what: &'static str) -> Judged {
    Judged { severity, id, what }
}

const fn check(
    id: &'static str,
    stimulus: &'static str,
    requirement: &'static str,
    judged: &'static [Judged],
    needs: Option<&'static str>,
) -> WebhookCheck {
    WebhookCheck {
        id,
        section: "webhook delivery",
        stimulus,
        requirement,
        judged,
        needs,
    }
}

/// Every check, in the order they run. `wh-first-delivery` calibrates: if it does not pass,
/// the others SKIP naming it.
pub const CATALOG: &[WebhookCheck] = &[
    check(
        "wh-first-delivery",
        "Sends one validly signed event.",
        "A valid delivery is acknowledged 2xx and applied once.",
        &[
            j(Severity::Required, "acknowledged", "a valid delivery is acknowledged 2xx"),
            j(Severity::Critical, "applied-once", "the event is applied once"),
        ],
        None,
    ),
    check(
        "wh-redelivery",
        "Sends the same event again, re-signed one second later.",
        "A redelivered event is acknowledged 2xx and not applied again.",
        &[
            j(Severity::Required, "first-acknowledged", "the first delivery is acknowledged 2xx"),
            j(Severity::Critical, "applied-once", "the event is applied once"),
            j(Severity::Recommended, "redelivery-acknowledged", "the redelivery is acknowledged 2xx (else the sender retries it)"),
        ],
        None,
    ),
    check(
        "wh-byte-replay",
        "Sends the first delivery again, byte for byte.",
        "A replayed delivery is not applied again.",
        &[
            j(Severity::Required, "first-acknowledged", "the first delivery is acknowledged 2xx"),
            j(Severity::Critical, "applied-once", "a replayed delivery is not applied again"),
        ],
        None,
    ),
    check(
        "wh-bad-signature",
        "Sends a tampered body, a delivery signed with a wrong secret and one without signature, each a new event.",
        "Forgeries are refused 4xx and never applied.",
        &[
            j(Severity::Critical, "refused", "every forgery is refused 4xx (a 2xx is an accepted forgery)"),
            j(Severity::Critical, "not-applied", "no forgery is applied"),
        ],
        None,
    ),
    check(
        "wh-distinct-events",
        "Sends two events with different ids and identical bodies.",
        "Two events are two effects, whatever their bodies.",
        &[
            j(Severity::Required, "acknowledged", "both events are acknowledged 2xx"),
            j(Severity::Critical, "both-applied", "two events with identical bodies are two effects (one lost is an event dropped)"),
        ],
        None,
    ),
    check(
        "wh-concurrent-duplicates",
        "Sends 8 freshly signed deliveries of one new event as one synchronised burst: every copy staged but its last byte, then the last bytes released together.",
        "Overlapping deliveries of one event apply it once.",
        &[
            j(Severity::Critical, "applied-once", "overlapping deliveries apply the event once"),
        ],
        None,
    ),
    check(
        "wh-forgery-no-poison",
        "Sends a forged delivery carrying event id X (wrong secret), then the genuine X.",
        "A forgery cannot make the genuine event a duplicate.",
        &[
            j(Severity::Required, "genuine-acknowledged", "the genuine event is acknowledged 2xx"),
            j(Severity::Critical, "genuine-applied", "the genuine event is applied once after a forgery carried its id"),
        ],
        None,
    ),
    check(
        "wh-stale-timestamp",
        "Sends a valid signature over a timestamp older than the scheme's tolerance.",
        "A delivery signed too long ago is refused 4xx and not applied.",
        &[
            j(Severity::Required, "refused", "a delivery outside the tolerance is refused 4xx"),
            j(Severity::Critical, "not-applied", "a delivery outside the tolerance is not applied"),
        ],
        None,
    ),
    check(
        "wh-future-timestamp",
        "Sends a valid signature over a timestamp beyond the tolerance in the future.",
        "A delivery signed in the future is refused 4xx.",
        &[
            j(Severity::Recommended, "refused", "a delivery outside the tolerance is refused 4xx"),
            j(Severity::Recommended, "not-applied", "a delivery outside the tolerance is not applied"),
        ],
        None,
    ),
    check(
        "wh-rotated-secret",
        "Sends two events with two signatures each: an unknown secret's first, then the valid one first.",
        "Any one valid signature is enough, as during a secret rotation.",
        &[
            j(Severity::Required, "acknowledged", "a delivery with any one valid signature is acknowledged 2xx"),
            j(Severity::Critical, "applied", "both events are applied (one refused is an event lost)"),
        ],
        None,
    ),
    check(
        "wh-raw-body",
        "Sends a valid signature over non-canonical JSON (spaces, a \\u escape, a trailing newline).",
        "The signature is verified over the bytes received, not a re-encoding.",
        &[
            j(Severity::Required, "acknowledged", "a signature over the bytes sent is accepted (2xx)"),
            j(Severity::Critical, "applied", "the event is applied once"),
        ],
        None,
    ),
    check(
        "wh-unknown-type",
        "Sends a valid event of a type no consumer handles.",
        "An unknown type is acknowledged 2xx and changes nothing.",
        &[
            j(Severity::Recommended, "acknowledged", "an unknown type is acknowledged 2xx (else the sender retries and disables the endpoint)"),
            j(Severity::Required, "no-effect", "an unknown type changes nothing"),
        ],
        None,
    ),
    check(
        "wh-lost-ack",
        "Sends an event held by --hold-header, drops the connection before the answer, releases the hold (--hold-release), then redelivers it.",
        "An event whose acknowledgement was lost is applied once: its id is recorded with the work, not when the answer is written.",
        &[
            j(Severity::Required, "redelivery-acknowledged", "the redelivery is acknowledged 2xx"),
            j(Severity::Critical, "applied-once", "the event is applied once in all"),
        ],
        Some("--hold-header and --hold-release"),
    ),
    check(
        "wh-retry-after-failure",
        "Sends an event with --crash-header (the consumer fails after taking it), then the clean redelivery.",
        "A delivery that failed is applied by its retry: exactly once, never lost.",
        &[
            j(Severity::Required, "retry-acknowledged", "the redelivery is acknowledged 2xx"),
            j(Severity::Critical, "applied-once", "the event is applied exactly once (0 is an event lost)"),
        ],
        Some("--crash-header"),
    ),
    check(
        "wh-late-redelivery",
        "Sends an event, restarts the consumer with --restart-cmd and redelivers it, then redelivers it again --late-after its first delivery (default 6 minutes), each re-signed when sent.",
        "An event is deduplicated for as long as senders retry it (hours to days) and across restarts: a late redelivery is acknowledged 2xx and not applied again.",
        &[
            j(Severity::Required, "first-acknowledged", "the first delivery is acknowledged 2xx"),
            j(Severity::Required, "first-applied", "the first delivery is applied once"),
            j(Severity::Recommended, "acknowledged-after-restart", "the redelivery after the restart is acknowledged 2xx (else the sender retries it)"),
            j(Severity::Critical, "not-applied-after-restart", "the redelivery after the restart is not applied again"),
            j(Severity::Recommended, "acknowledged-late", "the late redelivery is acknowledged 2xx (else the sender retries it)"),
            j(Severity::Critical, "not-applied-late", "the late redelivery is not applied again"),
        ],
        Some("--late-after longer than 0s, or --restart-cmd"),
    ),
    check(
        "wh-cross-replica",
        "Sends an event, then its redelivery to --replica.",
        "Deduplication is shared by every instance.",
        &[
            j(Severity::Critical, "applied-once", "the event is applied once across instances"),
        ],
        Some("--replica"),
    ),
    check(
        "wh-ack-latency",
        "Sends one event and times its acknowledgement.",
        "A delivery is acknowledged within the scheme's budget (Slack 3 s, Shopify 5 s, GitHub 10 s, Standard Webhooks, Svix and Stripe 15 s), else the sender counts it failed and retries.",
        &[
            j(Severity::Required, "in-budget", "the delivery is acknowledged 2xx within the scheme's budget"),
            j(Severity::Recommended, "clear-of-budget", "the acknowledgement leaves a fifth of the budget spare"),
            j(Severity::Info, "applied", "the event is applied once"),
        ],
        None,
    ),
    check(
        "wh-source-isolation",
        "Sends one event id from the source of --secret, then from the source of --source-b-secret.",
        "Event ids are deduplicated per source: two sources' events are two effects.",
        &[
            j(Severity::Required, "acknowledged", "both sources' events are acknowledged 2xx"),
            j(Severity::Critical, "both-applied", "the same id from two sources is two effects"),
        ],
        Some("--source-b-secret"),
    ),
];

/// The checks for `idem-check list`: each id, what it needs, and what it judges with the
/// severity of each point, as `run`'s probes are listed.
pub fn listing() -> String {
    let mut out = String::from(
        "\nwebhook checks (idem-check webhook URL --scheme SCHEME)\n\n\
         check                      needs\n",
    );
    for c in CATALOG {
        out.push_str(&format!("{:<26} {}\n", c.id, c.needs.unwrap_or("-")));
        for p in c.judged {
            out.push_str(&format!("    {:<12} {}\n", p.severity.as_str(), p.what));
        }
    }
    out
}

/// One check in full, for `idem-check explain`.
pub fn explanation(c: &WebhookCheck) -> String {
    let mut out = format!(
        "{}  ({GROUP}, {})\nstimulus:    {}\nrequirement: {}\nchecks:\n",
        c.id, c.section, c.stimulus, c.requirement
    );
    for p in c.judged {
        out.push_str(&format!(
            "  {:<12} {:<26} {}\n",
            p.severity.as_str(),
            p.id,
            p.what
        ));
    }
    if let Some(needs) = c.needs {
        out.push_str(&format!("needs: {needs}\n"));
    }
    out
}

/// Looks a check up by id.
pub fn find(id: &str) -> Option<&'static WebhookCheck> {
    CATALOG.iter().find(|c| c.id == id)
}

/// What the checks need besides the sender and the meter.
pub struct Extras {
    /// `--crash-header`, as a header line.
    pub crash: Option<Header>,
    /// `--replica`.
    pub replica: Option<url::Url>,
    /// `--hold-header` (its value holds `{{hold}}`) and `--hold-release` (a URL with
    /// `{{hold}}`): how a delivery is held in the consumer, and released.
    pub hold: Option<(Header, String)>,
    /// `--ack-budget`: the acknowledgement budget instead of the scheme's.
    pub ack_budget: Option<Duration>,
    /// `--late-after`: how long after its delivery an event is redelivered late (zero: not).
    pub late_after: Duration,
    /// `--restart-cmd` (with `--ready-url`), or the reference server's in-process restart.
    pub restart: Option<Arc<dyn RestartHook>>,
}

/// The collaborators a check plays with.
pub struct Env {
    pub sender: Sender,
    pub settler: Settler,
    pub extras: Extras,
}

fn spec(id: &'static str, what: &'static str, severity: Severity) -> CheckSpec {
    CheckSpec {
        id,
        what,
        severity,
        expect: Vec::new(),
    }
}

fn two_xx(
    trial: &mut Trial,
    id: &'static str,
    what: &'static str,
    sev: Severity,
    ex: &[&Exchange],
) {
    trial
        .checks
        .push(check::statuses_within(&spec(id, what, sev), ex, 200, 299));
}

fn four_xx(
    trial: &mut Trial,
    id: &'static str,
    what: &'static str,
    sev: Severity,
    ex: &[&Exchange],
) {
    trial
        .checks
        .push(check::statuses_within(&spec(id, what, sev), ex, 400, 499));
}

/// How many freshly signed copies `wh-concurrent-duplicates` releases together.
const COPIES: u32 = 8;

/// How long the held delivery's connection stays open before it is dropped: long enough for
/// the consumer to read it, the hold keeping it from answering.
const LOST_ACK_WAIT: Duration = Duration::from_millis(200);

/// How many times `wh-lost-ack` redelivers to a consumer that asks it to come back later.
const MAX_REDELIVERIES: u32 = 10;

/// The wait a 409 or 503 with `Retry-After: SECONDS` asks for (at most 5 s): the event is
/// still being worked on, and a sender comes back later.
fn come_back_after(ex: &Exchange) -> Option<Duration> {
    let r = ex.response()?;
    if !matches!(r.status, 409 | 503) {
        return None;
    }
    let secs: u64 = r.header("retry-after")?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(5)))
}

/// The share of the budget past which an acknowledgement is a WARN: a loaded consumer or a
/// slower network takes it over.
const NEAR_BUDGET: f64 = 0.8;

/// `ex` was answered 2xx within `limit`: the check `id` with `severity`.
fn acknowledged_within(
    ex: &Exchange,
    limit: Duration,
    id: &str,
    what: &str,
    severity: Severity,
) -> Check {
    let ms = ex.duration_ms;
    let ok = ex.response().is_some_and(|r| r.is_success());
    Check {
        id: id.into(),
        what: what.into(),
        severity,
        passed: ok && ms <= limit.as_secs_f64() * 1000.0,
        expected: vec![format!("2xx within {} ms", limit.as_millis())],
        actual: format!("{} after {ms:.0} ms", ex.status_text()),
        exchanges: vec![ex.n],
        symptom: Symptom::Other,
    }
}

/// A counted window: the settled count before the check's deliveries.
struct Window(u64);

impl Window {
    async fn open(env: &Env, trial: &mut Trial) -> Result<Window, Stop> {
        env.settler
            .count(trial, "count before")
            .await
            .map(Window)
            .map_err(|e| Stop::Error(e.into()))
    }

    /// Closes the window and judges how many effects it saw against `expected`.
    #[allow(clippy::too_many_arguments)]
    async fn judge(
        self,
        env: &Env,
        trial: &mut Trial,
        id: &'static str,
        what: &'static str,
        sev: Severity,
        expected: u64,
        exchanges: &[&Exchange],
    ) -> Result<(), Stop> {
        self.judge_then(env, trial, id, what, sev, expected, exchanges)
            .await
            .map(drop)
    }

    /// [`Window::judge`], returning the next window, opened at the count this one closed on.
    #[allow(clippy::too_many_arguments)]
    async fn judge_then(
        self,
        env: &Env,
        trial: &mut Trial,
        id: &'static str,
        what: &'static str,
        sev: Severity,
        expected: u64,
        exchanges: &[&Exchange],
    ) -> Result<Window, Stop> {
        let after = env
            .settler
            .count(trial, "count after")
            .await
            .map_err(|e| Stop::Error(e.into()))?;
        let Some(moved) = after.checked_sub(self.0) else {
            return Err(Stop::Error(format!(
                "the effect counter went back from {} to {after}: it does not count this consumer's effects",
                self.0
            ).into()));
        };
        let basis = format!(
            "{} ({} before, {after} after)",
            env.settler.describe(),
            self.0
        );
        trial.checks.push(check::executions(
            &spec(id, what, sev),
            &basis,
            expected,
            moved,
            exchanges.iter().map(|e| e.n).collect(),
        ));
        Ok(Window(after))
    }
}

/// Plays the check `id`.
pub async fn play(id: &str, env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let scheme = s.scheme;
    let t = Sender::now();
    match id {
        "wh-first-delivery" => {
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let ex = s.send(trial, "delivery", &s.signed(&e, t, 0)).await;
            if ex.response().is_none() {
                return Err(Stop::Error(format!(
                    "the consumer did not answer a valid delivery ({}): check the URL, or raise --timeout",
                    ex.error().map(ToString::to_string).unwrap_or_default()
                ).into()));
            }
            two_xx(
                trial,
                "acknowledged",
                "a valid delivery is acknowledged 2xx",
                Severity::Required,
                &[&ex],
            );
            w.judge(
                env,
                trial,
                "applied-once",
                "the event is applied once",
                Severity::Critical,
                1,
                &[&ex],
            )
            .await
        }
        "wh-redelivery" => {
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let first = s.send(trial, "delivery", &s.signed(&e, t, 0)).await;
            let again = s
                .send(
                    trial,
                    "redelivery, re-signed 1 s later",
                    &s.signed(&e, t, 1),
                )
                .await;
            two_xx(
                trial,
                "first-acknowledged",
                "the first delivery is acknowledged 2xx",
                Severity::Required,
                &[&first],
            );
            w.judge(
                env,
                trial,
                "applied-once",
                "the event is applied once",
                Severity::Critical,
                1,
                &[&first, &again],
            )
            .await?;
            two_xx(
                trial,
                "redelivery-acknowledged",
                "the redelivery is acknowledged 2xx (else the sender retries it)",
                Severity::Recommended,
                &[&again],
            );
            Ok(())
        }
        "wh-byte-replay" => {
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let req = s.signed(&e, t, 0);
            let first = s.send(trial, "delivery", &req).await;
            let replay = s.send(trial, "the same bytes again", &req).await;
            two_xx(
                trial,
                "first-acknowledged",
                "the first delivery is acknowledged 2xx",
                Severity::Required,
                &[&first],
            );
            w.judge(
                env,
                trial,
                "applied-once",
                "a replayed delivery is not applied again",
                Severity::Critical,
                1,
                &[&first, &replay],
            )
            .await
        }
        "wh-bad-signature" => {
            let w = Window::open(env, trial).await?;
            let (e1, e2, e3) = (s.event(), s.event(), s.event());
            let tampered = s.signed(&e1, t, 0).with_body(e1.tampered_body());
            let wrong = s.delivery(&e2, &e2.body, t, &[Signer::Wrong], 0);
            let unsigned = scheme
                .signature_headers()
                .iter()
                .fold(s.signed(&e3, t, 0), |r, h| r.without_header(h));
            let a = s.send(trial, "tampered body", &tampered).await;
            let b = s.send(trial, "signed with a wrong secret", &wrong).await;
            let c = s.send(trial, "without signature", &unsigned).await;
            four_xx(
                trial,
                "refused",
                "every forgery is refused 4xx (a 2xx is an accepted forgery)",
                Severity::Critical,
                &[&a, &b, &c],
            );
            w.judge(
                env,
                trial,
                "not-applied",
                "no forgery is applied",
                Severity::Critical,
                0,
                &[&a, &b, &c],
            )
            .await
        }
        "wh-distinct-events" => {
            if s.template.holds_id() {
                return Err(Stop::Skip(format!(
                    "the body holds the event id ({} keeps it there, or the --event template does), so two events never share a body",
                    scheme.name()
                ).into()));
            }
            let w = Window::open(env, trial).await?;
            let e1 = s.event();
            let mut e2 = e1.clone();
            e2.meta.id = scheme.new_event_id();
            let a = s.send(trial, "event A", &s.signed(&e1, t, 0)).await;
            let b = s
                .send(trial, "event B, same body", &s.signed(&e2, t, 0))
                .await;
            two_xx(
                trial,
                "acknowledged",
                "both events are acknowledged 2xx",
                Severity::Required,
                &[&a, &b],
            );
            w.judge(
                env,
                trial,
                "both-applied",
                "two events with identical bodies are two effects (one lost is an event dropped)",
                Severity::Critical,
                2,
                &[&a, &b],
            )
            .await
        }
        "wh-concurrent-duplicates" => {
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let copies: Vec<_> = (0..COPIES).map(|i| s.signed(&e, t, i)).collect();
            let exs = s
                .burst(trial, "delivery", &copies)
                .await
                .map_err(|e| Stop::Error(e.into()))?;
            let refs: Vec<&Exchange> = exs.iter().collect();
            // Released together, the copies raced only if the consumer had two of them at
            // once: two answered, and neither answered before the other was released.
            let answered: Vec<&&Exchange> =
                refs.iter().filter(|e| e.response().is_some()).collect();
            let released = |e: &Exchange| e.release_us.map_or(e.start_ms, |us| us / 1000.0);
            let overlapped = answered.iter().enumerate().any(|(i, a)| {
                answered[i + 1..]
                    .iter()
                    .any(|b| released(a) < b.end_ms() && released(b) < a.end_ms())
            });
            w.judge(
                env,
                trial,
                "applied-once",
                "overlapping deliveries apply the event once",
                Severity::Critical,
                1,
                &refs,
            )
            .await?;
            if !overlapped && trial.checks.iter().all(|c| c.passed) {
                return Err(Stop::Inconclusive(
                    "no two deliveries were in flight together: the consumer answered each before the next arrived".into(),
                ));
            }
            Ok(())
        }
        "wh-forgery-no-poison" => {
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let forged = s.delivery(&e, &e.body, t, &[Signer::Wrong], 0);
            let f = s.send(trial, "forgery with the event's id", &forged).await;
            let g = s
                .send(trial, "the genuine event", &s.signed(&e, t, 1))
                .await;
            two_xx(
                trial,
                "genuine-acknowledged",
                "the genuine event is acknowledged 2xx",
                Severity::Required,
                &[&g],
            );
            w.judge(
                env,
                trial,
                "genuine-applied",
                "the genuine event is applied once after a forgery carried its id",
                Severity::Critical,
                1,
                &[&f, &g],
            )
            .await
        }
        "wh-stale-timestamp" | "wh-future-timestamp" => {
            if !scheme.signs_timestamp() {
                return Err(Stop::Skip(
                    format!(
                        "{} signs no timestamp: a replay cannot be dated",
                        scheme.name()
                    )
                    .into(),
                ));
            }
            let off = i64::try_from((scheme.tolerance() + Duration::from_secs(60)).as_secs())
                .unwrap_or(i64::MAX);
            let (ts, role, sev) = if id == "wh-stale-timestamp" {
                (t - off, "signed 6 minutes ago", Severity::Required)
            } else {
                (t + off, "signed 6 minutes ahead", Severity::Recommended)
            };
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let ex = s
                .send(
                    trial,
                    role,
                    &s.delivery(&e, &e.body, ts, &[Signer::Genuine], 0),
                )
                .await;
            four_xx(
                trial,
                "refused",
                "a delivery outside the tolerance is refused 4xx",
                sev,
                &[&ex],
            );
            let eff = if sev == Severity::Required {
                Severity::Critical
            } else {
                sev
            };
            w.judge(
                env,
                trial,
                "not-applied",
                "a delivery outside the tolerance is not applied",
                eff,
                0,
                &[&ex],
            )
            .await
        }
        "wh-rotated-secret" => {
            if !scheme.signs_several() {
                return Err(Stop::Skip(
                    format!(
                        "{} carries one signature per delivery: there is no rotation to check",
                        scheme.name()
                    )
                    .into(),
                ));
            }
            let w = Window::open(env, trial).await?;
            let (e1, e2) = (s.event(), s.event());
            let a = s
                .send(
                    trial,
                    "valid signature second",
                    &s.delivery(&e1, &e1.body, t, &[Signer::Wrong, Signer::Genuine], 0),
                )
                .await;
            let b = s
                .send(
                    trial,
                    "valid signature first",
                    &s.delivery(&e2, &e2.body, t, &[Signer::Genuine, Signer::Wrong], 0),
                )
                .await;
            two_xx(
                trial,
                "acknowledged",
                "a delivery with any one valid signature is acknowledged 2xx",
                Severity::Required,
                &[&a, &b],
            );
            w.judge(
                env,
                trial,
                "applied",
                "both events are applied (one refused is an event lost)",
                Severity::Critical,
                2,
                &[&a, &b],
            )
            .await
        }
        "wh-raw-body" => {
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let body = e.loosened_body();
            let ex = s
                .send(
                    trial,
                    "non-canonical JSON",
                    &s.delivery(&e, &body, t, &[Signer::Genuine], 0),
                )
                .await;
            two_xx(
                trial,
                "acknowledged",
                "a signature over the bytes sent is accepted (2xx)",
                Severity::Required,
                &[&ex],
            );
            w.judge(
                env,
                trial,
                "applied",
                "the event is applied once",
                Severity::Critical,
                1,
                &[&ex],
            )
            .await
        }
        "wh-unknown-type" => {
            let w = Window::open(env, trial).await?;
            let e = s.event().of_unknown_type(scheme);
            let ex = s.send(trial, "unknown type", &s.signed(&e, t, 0)).await;
            two_xx(trial, "acknowledged", "an unknown type is acknowledged 2xx (else the sender retries and disables the endpoint)", Severity::Recommended, &[&ex]);
            w.judge(
                env,
                trial,
                "no-effect",
                "an unknown type changes nothing",
                Severity::Required,
                0,
                &[&ex],
            )
            .await
        }
        "wh-lost-ack" => {
            let Some((hold, release)) = &env.extras.hold else {
                return Err(Stop::Skip(
                    "needs a way to hold a delivery in the consumer: pass --hold-header and --hold-release".into(),
                ));
            };
            let name = uuid::Uuid::new_v4().simple().to_string();
            let value = hold.value_str().replace("{{hold}}", &name);
            let release = url::Url::parse(&release.replace("{{hold}}", &name)).map_err(|e| {
                Stop::Error(format!("--hold-release is not a URL once filled ({e})").into())
            })?;
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let held = s.signed(&e, t, 0).with_header(&hold.name, value);
            let lost = s
                .send_and_drop(
                    trial,
                    "held delivery, connection dropped",
                    &held,
                    LOST_ACK_WAIT,
                )
                .await;
            let freed = s.post(trial, "release the hold", &release).await;
            if !freed.response().is_some_and(|r| r.is_success()) {
                return Err(Stop::Error(
                    format!(
                        "releasing the hold answered {}: check --hold-release",
                        freed.status_text()
                    )
                    .into(),
                ));
            }
            // The held work finishes once released: settled before the redelivery is sent,
            // as a sender's retry comes after its timeout.
            env.settler
                .count(trial, "count after the release")
                .await
                .map_err(|e| Stop::Error(e.into()))?;
            // A sender retries until it sees a 2xx: a consumer still working on the dropped
            // delivery may ask it to come back later (Retry-After), as a real sender would.
            let mut retry = 1;
            let mut again = s.send(trial, "redelivery", &s.signed(&e, t, retry)).await;
            while let Some(wait) = come_back_after(&again).filter(|_| retry < MAX_REDELIVERIES) {
                trial.timeline.push(format!(
                    "#{} asked to come back after {} s: redelivered then",
                    again.n,
                    wait.as_secs()
                ));
                tokio::time::sleep(wait).await;
                retry += 1;
                again = s.send(trial, "redelivery", &s.signed(&e, t, retry)).await;
            }
            two_xx(
                trial,
                "redelivery-acknowledged",
                "the redelivery is acknowledged 2xx",
                Severity::Required,
                &[&again],
            );
            w.judge(
                env,
                trial,
                "applied-once",
                "the event is applied once in all",
                Severity::Critical,
                1,
                &[&lost, &again],
            )
            .await
        }
        "wh-retry-after-failure" => {
            let Some(crash) = &env.extras.crash else {
                return Err(Stop::Skip("needs a way to make the consumer fail after taking a delivery: pass --crash-header".into()));
            };
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let failing = s
                .signed(&e, t, 0)
                .with_header(&crash.name, crash.value.clone());
            let f = s.send(trial, "delivery that fails", &failing).await;
            let r = s.send(trial, "clean redelivery", &s.signed(&e, t, 1)).await;
            if f.status().is_some_and(|st| (200..300).contains(&st)) {
                return Err(Stop::Inconclusive(
                    format!(
                    "the delivery with {} did not fail ({}): the consumer ignores --crash-header",
                    crash.name,
                    f.status_text()
                )
                    .into(),
                ));
            }
            two_xx(
                trial,
                "retry-acknowledged",
                "the redelivery is acknowledged 2xx",
                Severity::Required,
                &[&r],
            );
            w.judge(
                env,
                trial,
                "applied-once",
                "the event is applied exactly once (0 is an event lost)",
                Severity::Critical,
                1,
                &[&f, &r],
            )
            .await
        }
        "wh-late-redelivery" => late_redelivery(env, trial).await,
        "wh-cross-replica" => {
            let Some(replica) = &env.extras.replica else {
                return Err(Stop::Skip(
                    "needs a second instance of the consumer: pass --replica URL".into(),
                ));
            };
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let a = s.send(trial, "delivery", &s.signed(&e, t, 0)).await;
            let b = s
                .send_to(
                    trial,
                    "redelivery to the replica",
                    &s.signed(&e, t, 1),
                    replica,
                )
                .await;
            w.judge(
                env,
                trial,
                "applied-once",
                "the event is applied once across instances",
                Severity::Critical,
                1,
                &[&a, &b],
            )
            .await
        }
        "wh-ack-latency" => {
            let budget = env.extras.ack_budget.unwrap_or(scheme.ack_budget());
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let ex = s.send(trial, "delivery", &s.signed(&e, t, 0)).await;
            // Over the budget the sender counts the delivery failed and retries work that was
            // done; near it, a loaded moment takes it over.
            trial.checks.push(acknowledged_within(
                &ex,
                budget,
                "in-budget",
                "the delivery is acknowledged 2xx within the scheme's budget",
                Severity::Required,
            ));
            trial.checks.push(acknowledged_within(
                &ex,
                budget.mul_f64(NEAR_BUDGET),
                "clear-of-budget",
                "the acknowledgement leaves a fifth of the budget spare",
                Severity::Recommended,
            ));
            w.judge(
                env,
                trial,
                "applied",
                "the event is applied once",
                Severity::Info,
                1,
                &[&ex],
            )
            .await
        }
        "wh-source-isolation" => {
            if !s.has_source_b() {
                return Err(Stop::Skip(
                    "needs a second source: pass --source-b-secret".into(),
                ));
            }
            let w = Window::open(env, trial).await?;
            let e = s.event();
            let a = s.send(trial, "source A", &s.signed(&e, t, 0)).await;
            let b = s
                .send(
                    trial,
                    "source B, same event id",
                    &s.delivery(&e, &e.body, t, &[Signer::SourceB], 0),
                )
                .await;
            two_xx(
                trial,
                "acknowledged",
                "both sources' events are acknowledged 2xx",
                Severity::Required,
                &[&a, &b],
            );
            w.judge(
                env,
                trial,
                "both-applied",
                "the same id from two sources is two effects",
                Severity::Critical,
                2,
                &[&a, &b],
            )
            .await
        }
        other => Err(Stop::Error(
            format!("{other} is not a webhook check").into(),
        )),
    }
}

/// How long, after the restart hook, the idle connection may take to show it was closed.
const CLOSE_WAIT: Duration = Duration::from_millis(300);

/// `wh-late-redelivery`: an event, then its redelivery after the restart (if there is a
/// hook), then again once `--late-after` has passed since the first delivery (if not zero),
/// each re-signed when it is sent, as a sender's retry is. Each redelivery is judged in its own
/// window, so the verdict says which one a consumer applied again: the restart (a dedupe kept
/// in memory) or the wait (a dedupe window shorter than the sender's retries).
async fn late_redelivery(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let late = env.extras.late_after;
    let restart = env.extras.restart.as_ref();
    if late.is_zero() && restart.is_none() {
        return Err(Stop::Skip(
            "--late-after 0s and no --restart-cmd: there is no late redelivery to send".into(),
        ));
    }
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let mut signed_at = Sender::now();
    let first = s.send(trial, "delivery", &s.signed(&e, signed_at, 0)).await;
    let answered = Instant::now();
    two_xx(
        trial,
        "first-acknowledged",
        "the first delivery is acknowledged 2xx",
        Severity::Required,
        &[&first],
    );
    let mut w = w
        .judge_then(
            env,
            trial,
            "first-applied",
            "the first delivery is applied once",
            Severity::Required,
            1,
            &[&first],
        )
        .await?;
    let mut retry = 0;
    let mut restarted = None;
    if let Some(hook) = restart {
        let proof = restart_seen(env, trial, hook.as_ref()).await?;
        retry += 1;
        signed_at = resigned_at(signed_at);
        let again = s
            .send(
                trial,
                "redelivery after the restart",
                &s.delivery(&e, &e.body, signed_at, &[Signer::Genuine], retry),
            )
            .await;
        two_xx(
            trial,
            "acknowledged-after-restart",
            "the redelivery after the restart is acknowledged 2xx (else the sender retries it)",
            Severity::Recommended,
            &[&again],
        );
        w = w
            .judge_then(
                env,
                trial,
                "not-applied-after-restart",
                "the redelivery after the restart is not applied again",
                Severity::Critical,
                0,
                &[&first, &again],
            )
            .await?;
        restarted = Some(proof);
    }
    if !late.is_zero() {
        let wake = answered + late;
        trial.timeline.push(format!(
            "waiting until {} after the first delivery was answered (--late-after)",
            humantime::format_duration(late)
        ));
        tokio::time::sleep_until(wake.into()).await;
        retry += 1;
        signed_at = resigned_at(signed_at);
        let again = s
            .send(
                trial,
                format!("redelivery {} later", humantime::format_duration(late)),
                &s.delivery(&e, &e.body, signed_at, &[Signer::Genuine], retry),
            )
            .await;
        two_xx(
            trial,
            "acknowledged-late",
            "the late redelivery is acknowledged 2xx (else the sender retries it)",
            Severity::Recommended,
            &[&again],
        );
        w.judge(
            env,
            trial,
            "not-applied-late",
            "the late redelivery is not applied again",
            Severity::Critical,
            0,
            &[&first, &again],
        )
        .await?;
    }
    match restarted {
        Some(Err(why)) if trial.checks.iter().all(|c| c.passed) => Err(Stop::Inconclusive(format!(
            "the consumer was not seen to go down: {why}; check that --restart-cmd really restarts it (and pass --ready-url)"
        ).into())),
        _ => Ok(()),
    }
}

/// When a redelivery is signed: now, as a sender's retry is, and never in the same second as
/// the delivery before it (`previous`), so its signature differs from that one's even when
/// the restart took less than a second.
fn resigned_at(previous: i64) -> i64 {
    Sender::now().max(previous + 1)
}

/// Runs the restart hook and says whether the consumer was seen to go down: what the hook saw
/// (the ready URL failing), or a keep-alive connection opened before it that the consumer
/// closed. A hook that restarts nothing must not make a dedupe kept in memory PASS.
async fn restart_seen(
    env: &Env,
    trial: &mut Trial,
    hook: &dyn RestartHook,
) -> Result<Result<String, String>, Stop> {
    let idle = env.sender.idle_connection().await;
    let t0 = Instant::now();
    let seen_by_hook = hook
        .restart()
        .await
        .map_err(|e| Stop::Error(format!("the restart hook failed: {e:#}").into()))?;
    trial.timeline.push(format!(
        "restarted by {} in {:.0} ms",
        hook.describe(),
        t0.elapsed().as_secs_f64() * 1000.0
    ));
    let closed = match idle {
        Ok(mut conn) => {
            if conn.closed(CLOSE_WAIT).await {
                Ok(
                    "an idle connection opened before the restart was closed by the consumer"
                        .into(),
                )
            } else {
                Err("an idle connection opened before the restart stayed open".to_string())
            }
        }
        Err(e) => Err(format!("no idle connection could be kept open ({e})")),
    };
    let proof = match (seen_by_hook, closed) {
        (Some(seen), _) | (None, Ok(seen)) => Ok(seen),
        (None, Err(why)) => Err(why),
    };
    if let Ok(seen) = &proof {
        trial
            .timeline
            .push(format!("the consumer went down: {seen}"));
    }
    Ok(proof)
}
