//! One probe as every renderer shows it, built once: which exchanges are evidence (cited by a
//! failed check, or the one an ERROR stopped on) and which of them are printed in full, the
//! summary table's runs, how keys are shortened, and the reproduce lines. The terminal block,
//! JUnit (which embeds it), Markdown and HTML read a [`ProbeView`] and decide nothing about
//! evidence themselves, so no two formats can cite different exchanges. The JSON report is the
//! data itself and needs no view.

use std::collections::BTreeSet;

use super::exchange_line::{key_values, Keys};
use super::replay_lines::Reproduce;
use super::verdict::failed;
use super::{ProbeReport, RenderOptions};
use crate::carrier::Place;
use crate::http::exchange::Exchange;
use crate::outcome::Outcome;

/// A probe's evidence, as every format shows it.
pub struct ProbeView<'a> {
    pub probe: &'a ProbeReport,
    /// The exchanges printed in full, in order ([`cited_exchanges`]).
    pub cited: Vec<usize>,
    /// Of those, the first of each kind, with the numbers of the cited ones it stands for.
    pub shown: Vec<(&'a Exchange, Vec<usize>)>,
    /// The summary table: runs of exchanges of one kind, a run of one being a plain row.
    pub runs: Vec<Vec<&'a Exchange>>,
    /// How the table shortens keys (their shared prefix left out).
    pub keys: Keys<'a>,
    /// The reproduce lines of the exchanges shown in full; empty when nothing is cited.
    pub reproduce: Reproduce,
}

impl<'a> ProbeView<'a> {
    pub fn of(p: &'a ProbeReport, opts: &'a RenderOptions) -> ProbeView<'a> {
        let cited = cited_exchanges(p, &opts.key);
        let shown = representatives(p, &cited);
        let reproduce = if shown.is_empty() {
            Reproduce::default()
        } else {
            Reproduce::of(&shown, &opts.secrets, &opts.key, opts.resigner.as_deref())
        };
        ProbeView {
            probe: p,
            runs: fold(&p.exchanges, &opts.key),
            keys: Keys::of(&p.exchanges, &opts.key, &opts.secrets),
            cited,
            shown,
            reproduce,
        }
    }

    /// The exchanges that keep only their summary line.
    pub fn others(&self) -> Vec<usize> {
        self.probe
            .exchanges
            .iter()
            .filter(|e| !self.cited.contains(&e.n))
            .map(|e| e.n)
            .collect()
    }
}

/// Consecutive exchanges of one kind fold into one table row from this many on.
const FOLD_MIN: usize = 3;

/// The numbers of the exchanges printed in full: those cited by failed checks, except small
/// successful reads (an effect counter's `{"count":17}`), whose value the check already quotes and
/// whose summary line suffices. An ERROR that no check explains shows the exchange it stopped
/// on instead ([`error_cause`]).
pub(crate) fn cited_exchanges(p: &ProbeReport, key: &Place) -> Vec<usize> {
    let mut cited: BTreeSet<usize> = failed(p)
        .flat_map(|c| c.exchanges.iter().copied())
        .filter(|n| p.exchange(*n).is_some_and(|e| !is_small_read(e, key)))
        .collect();
    if cited.is_empty() && p.outcome == Outcome::Error {
        cited.extend(error_cause(p));
    }
    // A request whose answer idem-check dropped on purpose is how the failure began: it is
    // shown, and reproduced, with the exchanges that failed after it.
    if !cited.is_empty() {
        cited.extend(p.exchanges.iter().filter(|e| e.dropped()).map(|e| e.n));
    }
    cited.into_iter().collect()
}

/// The exchanges an ERROR stopped on: those its reason speaks of ("the second request (#3) got
/// 500", [`ProbeReport::reason_cites`]), else the last one without a 2xx, else the last one.
/// The last exchange alone is often the counter read that followed the request that failed, and
/// its curl line reproduces nothing.
fn error_cause(p: &ProbeReport) -> Vec<usize> {
    let named: Vec<usize> = p
        .reason_cites
        .iter()
        .copied()
        .filter(|n| p.exchange(*n).is_some())
        .collect();
    if !named.is_empty() {
        return named;
    }
    let unsuccessful = p
        .exchanges
        .iter()
        .rev()
        .find(|e| !e.response().is_some_and(|r| r.is_success()));
    unsuccessful
        .or(p.exchanges.last())
        .map(|e| e.n)
        .into_iter()
        .collect()
}

/// Bodies up to this size on a successful keyless GET count as a "small read".
const SMALL_READ_MAX: usize = 64;

fn is_small_read(e: &Exchange, key: &Place) -> bool {
    e.request.method == "GET"
        && key_values(&e.request, key).is_empty()
        && e.response()
            .as_ref()
            .is_some_and(|r| r.is_success() && r.body.len() <= SMALL_READ_MAX)
}

/// Consecutive exchanges of one kind ([`crate::http::role::Role::same_kind`], method, URL, key) grouped into runs; a run
/// shorter than [`FOLD_MIN`] is split back into single exchanges.
pub(crate) fn fold<'a>(exchanges: &'a [Exchange], key: &Place) -> Vec<Vec<&'a Exchange>> {
    let same = |a: &Exchange, b: &Exchange| {
        a.role.same_kind(&b.role)
            && a.request.method == b.request.method
            && a.request.url == b.request.url
            && key_values(&a.request, key) == key_values(&b.request, key)
    };
    let mut runs: Vec<Vec<&Exchange>> = Vec::new();
    for e in exchanges {
        match runs.last_mut() {
            Some(run) if same(run[0], e) => run.push(e),
            _ => runs.push(vec![e]),
        }
    }
    runs.into_iter()
        .flat_map(|run| {
            if run.len() >= FOLD_MIN {
                vec![run]
            } else {
                run.into_iter().map(|e| vec![e]).collect()
            }
        })
        .collect()
}

/// The cited exchanges printed in full: the first of each kind (role kind, request, status).
/// Returns each shown exchange with the numbers of the cited ones it stands for.
fn representatives<'a>(p: &'a ProbeReport, cited: &[usize]) -> Vec<(&'a Exchange, Vec<usize>)> {
    let mut reps: Vec<(&Exchange, Vec<usize>)> = Vec::new();
    for e in cited.iter().filter_map(|&n| p.exchange(n)) {
        let same = |r: &Exchange| {
            r.role.same_kind(&e.role)
                && r.request == e.request
                && r.status() == e.status()
                && r.error() == e.error()
        };
        match reps.iter_mut().find(|(r, _)| same(r)) {
            Some((_, also)) => also.push(e.n),
            None => reps.push((e, Vec::new())),
        }
    }
    reps
}
