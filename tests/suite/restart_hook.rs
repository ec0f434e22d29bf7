//! The restart hook's output never goes straight to the terminal (where it would break the
//! progress bar's line): a failing hook's output is quoted in the probe's ERROR.

use crate::common;

use idem_check::config::Config;
use idem_check::outcome::Outcome;
use idem_check::reference::Reference;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_restart_command_is_quoted_in_the_error() {
    let reference = Reference::start(None)
        .await
        .expect("reference server starts");
    let mut target = reference.target();
    target.restart_cmd = Some("echo 'store: connection refused' >&2; exit 3".into());
    let config = Config::build(target, &common::run_options(), None).expect("valid target");
    let report = common::run_quietly(config, &["restart-persistence"]).await;
    reference.stop().await.expect("reference server stops");
    let p = report
        .probes
        .iter()
        .find(|p| p.id == "restart-persistence")
        .expect("the probe ran");
    assert_eq!(p.outcome, Outcome::Error, "{}", p.reason);
    assert!(
        p.reason.contains("exited with exit status: 3")
            && p.reason.contains("it printed: store: connection refused"),
        "{}",
        p.reason
    );
}
