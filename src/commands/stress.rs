//! `idem-check stress`: many keys, each a burst of duplicates plus late retries, with many
//! requests in flight, against the same targets as `run`.

use std::io::IsTerminal as _;

use super::target::{run_options, with_target};
use super::{
    finish, interrupted_in_setup, render_options, report_files, with_credentials, Interrupt, Result,
};
use crate::cli::StressArgs;
use idem_check::exit::{AppError, ExitCode};
use idem_check::report::terminal::Progress;
use idem_check::stress::StressOptions;

pub(super) async fn stress(args: StressArgs) -> Result<ExitCode> {
    if args.keys == 0 || args.duplicates == 0 || args.concurrency == 0 {
        return Err(
            anyhow::anyhow!("--keys, --duplicates and --concurrency must be at least 1").into(),
        );
    }
    let interrupt = Interrupt::watch();
    let files = report_files(&args.report)?;
    let run_opts = run_options(&args.target)?;
    let done = with_target(&args.target, run_opts, &interrupt, async |config| {
        if args.provider_lost_answers && config.provider.is_none() {
            return Err(anyhow::anyhow!(
                "--provider-lost-answers loses the fake provider's answers, which only \
                 --provider-listen ADDR (or --reference --provider PROFILE) starts"
            )
            .into());
        }
        let mut render = render_options(
            &args.report,
            config.secrets.clone(),
            config.key_carrier.place.clone(),
        );
        let progress = std::sync::Arc::new(Progress::for_stress(
            args.keys as u64,
            args.duration,
            std::io::stderr().is_terminal(),
        ));
        let opts = StressOptions {
            keys: args.keys,
            duplicates: args.duplicates,
            concurrency: args.concurrency,
            duration: args.duration,
            rate: args.rate,
            provider_lost_answers: args.provider_lost_answers,
            segment: args.segment.zip(args.run_id.clone()).map(|(s, run_id)| {
                idem_check::stress::segment::Segment {
                    index: s.index,
                    count: s.count,
                    run_id,
                }
            }),
        };
        let report =
            idem_check::stress::run(config.clone(), &opts, progress.clone(), interrupt.pressed())
                .await
                .map_err(AppError::runtime)?;
        progress.finish();
        render.secrets = with_credentials(render.secrets, &config);
        let text = idem_check::stress::render_terminal(&report, &render);
        let run = report.as_run_report();
        let code = ExitCode::for_run(&run.summary, report.interrupted);
        finish(&text, &report, &files, &render, &args.report, code)
    })
    .await?;
    Ok(done.unwrap_or_else(interrupted_in_setup))
}
