//! `idem-check stress`: many keys, each a burst of duplicates plus late retries, with many
//! requests in flight, against the same targets as `run`.

use std::io::IsTerminal as _;
use std::time::Duration;

use clap::Args;

use super::target::{run_options, with_target};
use super::{
    finish, interrupted_in_setup, render_options, report_files, with_credentials, Interrupt, Result,
};
use crate::cli::{ReportArgs, TargetArgs};
use idem_check::exit::{AppError, ExitCode};
use idem_check::report::terminal::Progress;
use idem_check::stress::StressOptions;

/// `idem-check stress`.
#[derive(Args)]
pub struct StressArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// How many fresh keys to send (the run also stops at --duration).
    #[arg(long, default_value_t = 2000, value_name = "K")]
    pub keys: usize,

    /// How many times each key is sent: a synchronised burst, then late retries (a quarter).
    #[arg(long, default_value_t = 8, value_name = "D")]
    pub duplicates: usize,

    /// The most requests in flight at once; HTTP/1.1 requests go on at most as many kept-alive
    /// connections to each origin, reused from key to key.
    #[arg(long, default_value_t = 64, value_name = "C")]
    pub concurrency: usize,

    /// The longest the run may take; no new key starts after it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    pub duration: Duration,

    /// Send at most N requests per second (1 to 1000000), on average over the run, to hold a
    /// steady load: keys start D/N seconds apart, and each key's burst still lands at once.
    /// Without it, stress sends as fast as the target answers.
    #[arg(long, value_name = "N", value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Option<u32>,

    /// Run only the I-th of N disjoint parts of the keys (every N-th key), for one run split
    /// across processes or machines; `idem-check merge` judges the segments' JSON reports as one
    /// run (each segment judges its own keys, the merge the counter). Needs --run-id.
    #[arg(long, value_name = "I/N", requires = "run_id")]
    pub segment: Option<idem_check::stress::segment::SegmentSpec>,

    /// With --segment: the run the segment belongs to, the same for every segment (a CI run
    /// id, a Job name); it names the keys, so two runs never share one.
    #[arg(long, value_name = "ID", requires = "segment", value_parser = parse_run_id)]
    pub run_id: Option<String>,

    /// With --provider-listen (or --reference --provider): the fake provider commits each
    /// key's first call and closes the connection without answering, so the API must retry
    /// with the same provider key; one that draws a new key per attempt charges twice.
    #[arg(long)]
    pub provider_lost_answers: bool,

    /// Reports; JUnit holds one testcase, `stress`.
    #[command(flatten)]
    pub report: ReportArgs,
}

/// `--run-id`: refused at parse time, naming the flag, when the keys it goes into could not
/// carry it.
fn parse_run_id(s: &str) -> Result<String, String> {
    idem_check::stress::segment::valid_run_id(s).map(|()| s.to_string())
}

/// `--rate`: a whole number of requests per second, from 1 to [`idem_check::stress::MAX_RATE`].
fn parse_rate(s: &str) -> Result<u32, String> {
    let max = idem_check::stress::MAX_RATE;
    let wanted = format!("expected requests per second, a whole number from 1 to {max}");
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=u64::from(max)).contains(&n) => Ok(n as u32),
        Ok(0) => Err(format!("0 would send nothing; {wanted}")),
        Ok(_) => Err(format!("more than {max} requests per second; {wanted}")),
        Err(_) => Err(wanted),
    }
}

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
