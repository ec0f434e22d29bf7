//! The checks of `idem-check webhook`, one file each, registered in [`CATALOG`] in the order
//! they run.
//!
//! A check is a [`WebhookCheck`]: what it is (id, section, stimulus, requirement), the points
//! it judges as typed [`GradedCheck`] constants, what it [`Need`]s, whether it calibrates the
//! run and how much longer than a probe it may take, plus an async `play` over two narrow
//! collaborators, the [`Sender`] and the [`Counts`]. The body pushes its checks by naming the
//! same constants the declaration lists, so what `idem-check list` prints and what a report
//! judges cannot drift; the runner ([`super::run`]) reads the declaration and never a check's
//! id. A new check is one new file here and its name in the `catalog!` list.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::check::GradedCheck;
use crate::config::RestartHook;
use crate::http::exchange::Header;
use crate::outcome::Stop;

use super::counts::Counts;
use super::event::Template;
use super::sender::{Sender, Trial};

mod parts;

/// The group every webhook check is listed under.
pub const GROUP: &str = "webhook";

/// Where every webhook check's requirement comes from.
const SECTION: &str = "webhook delivery";

/// The async body of a check: sends through the sender, counts through the meter, pushes
/// its checks into the trial, and says how it stopped.
pub type PlayFn = for<'a> fn(&'a Env, &'a mut Trial) -> BoxFuture<'a, Result<(), Stop>>;

/// A webhook check's declaration and body.
#[derive(Clone, Copy)]
pub struct WebhookCheck {
    /// What `--probe` selects and what JUnit testcases are named after.
    pub id: &'static str,
    /// Where the requirement comes from.
    pub section: &'static str,
    pub stimulus: &'static str,
    pub requirement: &'static str,
    /// Every point it judges, each with the severity of a failure: the constants its body
    /// pushes.
    pub judged: &'static [GradedCheck],
    /// The options without which it SKIPs; the runner checks them before `play`.
    pub needs: &'static [Need],
    /// If it does not pass, every other check SKIPs naming it (`wh-first-delivery`: a consumer
    /// that cannot take one valid delivery makes every other verdict meaningless).
    pub calibrates: bool,
    /// How much longer than a probe it may run (a wait it is asked for).
    pub extra_time: fn(&Extras) -> Duration,
    pub play: PlayFn,
}

/// No time beyond a probe's limit.
pub const fn no_extra_time(_: &Extras) -> Duration {
    Duration::ZERO
}

/// An option a check cannot play without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `--hold-header` with `{{hold}}` and `--hold-release`: a delivery held in the consumer
    /// until it is released.
    ReleasedHold,
    /// `--crash-header`.
    Crash,
    /// `--replica`.
    Replica,
    /// `--source-b-secret`.
    SourceB,
    /// `--late-after` longer than 0s, or `--restart-cmd`.
    LateOrRestart,
}

impl Need {
    /// The options, as `idem-check list` shows them.
    pub fn options(self) -> &'static str {
        match self {
            Need::ReleasedHold => "--hold-header and --hold-release",
            Need::Crash => "--crash-header",
            Need::Replica => "--replica",
            Need::SourceB => "--source-b-secret",
            Need::LateOrRestart => "--late-after longer than 0s, or --restart-cmd",
        }
    }

    pub fn met(self, env: &Env) -> bool {
        let x = &env.extras;
        match self {
            Need::ReleasedHold => x.hold.as_ref().is_some_and(|h| h.release.is_some()),
            Need::Crash => x.crash.is_some(),
            Need::Replica => !x.replicas.is_empty(),
            Need::SourceB => env.sender.has_source_b(),
            Need::LateOrRestart => !x.late_after.is_zero() || x.restart.is_some(),
        }
    }

    /// The SKIP of a check that lacks it.
    pub fn skip(self) -> Stop {
        Stop::Skip(self.why_skipped().into())
    }

    /// Why a check that lacks it SKIPs.
    pub fn why_skipped(self) -> &'static str {
        match self {
            Need::ReleasedHold => "needs a way to hold a delivery in the consumer: pass --hold-header and --hold-release",
            Need::Crash => "needs a way to make the consumer fail after taking a delivery: pass --crash-header",
            Need::Replica => "needs a second instance of the consumer: pass --replica URL",
            Need::SourceB => "needs a second source: pass --source-b-secret (or set $IDEM_CHECK_WEBHOOK_SECRET_B)",
            Need::LateOrRestart => "--late-after 0s and no --restart-cmd: there is no late redelivery to send",
        }
    }
}

/// Declares each check's module and lists its `CHECK` in [`CATALOG`], in the order given
/// (the order they run): a new check is its file and one name here.
macro_rules! catalog {
    ($($check:ident),* $(,)?) => {
        $(pub mod $check;)*

        /// Every check, in the order they run.
        pub const CATALOG: &[WebhookCheck] = &[$($check::CHECK),*];
    };
}

catalog! {
    first_delivery,
    redelivery,
    byte_replay,
    bad_signature,
    distinct_events,
    concurrent_duplicates,
    forgery_no_poison,
    stale_timestamp,
    future_timestamp,
    rotated_secret,
    raw_body,
    unknown_type,
    lost_ack,
    retry_after_failure,
    late_redelivery,
    cross_replica,
    ack_latency,
    source_isolation,
}

/// What the checks need besides the sender and the meter.
pub struct Extras {
    /// `--crash-header`, as a header line.
    pub crash: Option<Header>,
    /// `--replica`, each another instance of the consumer.
    pub replicas: Vec<url::Url>,
    /// `--hold-header`, and `--hold-release` when the hold is released rather than timed.
    pub hold: Option<Hold>,
    /// `--ack-budget`: the acknowledgement budget instead of the scheme's.
    pub ack_budget: Option<Duration>,
    /// `--late-after`: how long after its delivery an event is redelivered late (zero: not).
    pub late_after: Duration,
    /// `--restart-cmd` (with `--ready-url`), or the reference server's in-process restart.
    pub restart: Option<Arc<dyn RestartHook>>,
    /// `--unknown-event`: the body `wh-unknown-type` sends instead of the template's.
    pub unknown_event: Option<Template>,
}

/// How a delivery is held in the consumer: a header, and when its value holds `{{hold}}`, the
/// URL (with `{{hold}}`) that releases it; without one the hold ends by itself (a delay).
#[derive(Debug, Clone)]
pub struct Hold {
    pub header: Header,
    pub release: Option<String>,
}

impl Hold {
    /// The header and the release URL of the hold named `name`; `None` for a time-based hold
    /// (nothing to release). The release URL was checked when the options were read.
    pub fn filled(&self, name: &str) -> Option<(Header, url::Url)> {
        let release = self.release.as_ref()?;
        let value = self.header.value_str().replace("{{hold}}", name);
        let url = url::Url::parse(&release.replace("{{hold}}", name)).ok()?;
        Some((Header::new(&self.header.name, value.into_bytes()), url))
    }
}

/// The collaborators a check plays with.
pub struct Env {
    pub sender: Sender,
    pub counts: Counts,
    pub extras: Extras,
}

/// The checks for `idem-check list`: each id, what it needs, and what it judges with the
/// severity of each point, as `run`'s probes are listed.
pub fn listing() -> String {
    let mut out = String::from(
        "\nwebhook checks (idem-check webhook URL --scheme SCHEME)\n\n\
         check                      needs\n",
    );
    for c in CATALOG {
        out.push_str(&format!("{:<26} {}\n", c.id, c.needs_line()));
        for p in c.judged {
            out.push_str(&format!("    {:<12} {}\n", p.severity.as_str(), p.what()));
        }
    }
    out
}

impl WebhookCheck {
    /// What it needs, as `idem-check list` shows it ("-" for nothing).
    pub fn needs_line(&self) -> String {
        if self.needs.is_empty() {
            return "-".into();
        }
        let all: Vec<&str> = self.needs.iter().map(|n| n.options()).collect();
        all.join("; ")
    }

    /// The judged point `id`, if it declares one.
    pub fn point(&self, id: &str) -> Option<&'static GradedCheck> {
        self.judged.iter().find(|p| p.id() == id)
    }
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
            p.id(),
            p.what()
        ));
    }
    if !c.needs.is_empty() {
        out.push_str(&format!("needs: {}\n", c.needs_line()));
    }
    out
}

/// Looks a check up by id.
pub fn find(id: &str) -> Option<&'static WebhookCheck> {
    CATALOG.iter().find(|c| c.id == id)
}

/// A `--probe` or `--skip` name that is no webhook check.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: no webhook check {name:?}{hint} (known: {known})")]
pub struct UnknownCheck {
    pub flag: &'static str,
    pub name: String,
    hint: String,
    known: String,
}

/// The checks `only` (`--probe`, every check when empty) and `skip` (`--skip`) select, in
/// catalog order; a name that is no check is refused with the nearest one.
pub fn select(
    only: &[String],
    skip: &[String],
) -> Result<Vec<&'static WebhookCheck>, UnknownCheck> {
    for (flag, names) in [("--probe", only), ("--skip", skip)] {
        if let Some(bad) = names.iter().find(|n| find(n).is_none()) {
            let ids = CATALOG.iter().map(|c| c.id);
            let hint = crate::suggest::closest(bad, ids.clone())
                .map(|near| format!(" (did you mean {near:?}?)"))
                .unwrap_or_default();
            return Err(UnknownCheck {
                flag,
                name: bad.clone(),
                hint,
                known: ids.collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(CATALOG
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|p| p == c.id))
        .filter(|c| !skip.iter().any(|s| s == c.id))
        .collect())
}

#[cfg(test)]
mod tests;
