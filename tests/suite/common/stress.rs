//! `idem-check stress` as the tests run it: against a reference server they started, with no
//! progress output, and the server stopped afterwards.

use std::sync::Arc;

use idem_check::config::{Config, TargetSpec};
use idem_check::reference::Reference;
use idem_check::report::terminal::Progress;
use idem_check::stress::{self, StressOptions, StressReport};

/// Runs `stress` with `opts` against `reference` (every replica it has), then stops it.
pub async fn stress_reference(reference: Reference, opts: &StressOptions) -> StressReport {
    let target = reference.target();
    stress_reference_as(reference, target, opts).await
}

/// [`stress_reference`] against `target`: the reference server's own description, changed
/// (`--http2`, …).
pub async fn stress_reference_as(
    reference: Reference,
    target: TargetSpec,
    opts: &StressOptions,
) -> StressReport {
    let config =
        Config::build(target, &super::run_options(), None).expect("reference target is valid");
    let report = stress::run(
        Arc::new(config),
        opts,
        Arc::new(Progress::new(0, false)),
        std::future::pending(),
    )
    .await
    .expect("stress run completes");
    reference.stop().await.expect("reference server stops");
    report
}
