//! `store-outage` driven by the user's shell commands (`--store-down-cmd`, `--store-up-cmd`)
//! rather than the in-process switch: the commands call the reference server's test-hook
//! routes, and the probe PASSes on the correct server and FAILs under `fail-open`.

use crate::common;

use idem_check::config::{Config, RunOptions};
use idem_check::outcome::Outcome;
use idem_check::reference::Reference;
use idem_check::report::ProbeReport;
use idem_reference_server::Fault;

/// A shell command that POSTs to `url` (Python is on every CI machine; curl may not be).
fn post(url: &str) -> String {
    format!(
        "{} -c \"import urllib.request as u; u.urlopen(u.Request('{url}', method='POST'), timeout=5)\""
,
        common::python::interpreter_in_shell()
    )
}

async fn store_outage(fault: Option<Fault>) -> ProbeReport {
    let reference = Reference::start(fault).await.expect("reference starts");
    let mut target = reference.target();
    target.store_outage_hook = None;
    target.store_down_cmd = Some(post(&format!("{}/test-hooks/store/down", reference.base)));
    target.store_up_cmd = Some(post(&format!("{}/test-hooks/store/up", reference.base)));
    let opts = RunOptions {
        strict: true,
        ..common::run_options()
    };
    let config = Config::build(target, &opts, None).expect("valid target");
    let report = common::run_quietly(config, &["store-outage"]).await;
    reference.stop().await.expect("reference stops");
    report
        .probes
        .into_iter()
        .find(|p| p.id == "store-outage")
        .expect("the probe ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_take_the_store_down_and_back() {
    let correct = store_outage(None).await;
    assert_eq!(correct.outcome, Outcome::Pass, "{}", correct.reason);
    let open = store_outage(Some(Fault::FailOpen)).await;
    assert_eq!(open.outcome, Outcome::Fail, "{}", open.reason);
}
