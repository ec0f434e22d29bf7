//! What each command does, from parsed options to an exit code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::Arc;

use anyhow::Context;

use crate::cli::{
    Command, ListArgs, MatrixArgs, Opts, ReportArgs, RunArgs, StressArgs, TargetArgs,
};
use crate::config::{Config, RestartHook, RunOptions, TargetSpec};
use crate::exit::{AppError, ExitCode};
use crate::outcome::Outcome;
use crate::probes;
use crate::reference::Reference;
use crate::report::terminal::{self, Progress};
use crate::report::{self, Format, ProbeReport, RenderOptions, ReportFile, Reportable, RunReport};
use crate::runner::{self, Observer};
use crate::suite::Suite;

type Result<T, E = AppError> = std::result::Result<T, E>;

/// Runs the parsed command.
pub async fn run(opts: Opts) -> Result<ExitCode> {
    match opts.command {
        Command::Run(args) => run_probes(*args).await,
        Command::List(args) => list(&args),
        Command::Stress(args) => stress(*args).await,
        Command::Client(args) => crate::client::cli::run(*args).await,
        Command::Matrix(args) => matrix(&args),
        Command::Discover(args) => Ok(crate::discover::commands::discover(&args).await?),
        Command::Init(args) => Ok(crate::discover::commands::init(&args).await?),
        Command::Explain { id, suite } => explain(&id, &suite),
        Command::Completions { shell } => {
            let mut cmd = <Opts as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "idem-check", &mut std::io::stdout());
            Ok(ExitCode::Ok)
        }
        Command::Man { dir } => man(dir.as_deref()),
    }
}

/// The man pages, from the same clap definition as `--help`.
fn man(dir: Option<&std::path::Path>) -> Result<ExitCode> {
    let cmd = <Opts as clap::CommandFactory>::command();
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("could not write the man pages into {}", dir.display()))?;
        }
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("could not print the man page")?,
    }
    Ok(ExitCode::Ok)
}

/// Prints to stdout. A reader that went away (`idem-check list | head -1`) is not an error:
/// the output is simply no longer wanted, so the command ends quietly with its own code.
pub(crate) fn emit(text: &str) -> Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(AppError::runtime(
            anyhow::Error::new(e).context("cannot write to stdout"),
        )),
        _ => Ok(()),
    }
}

/// The report files asked for, checked writable (folders created) before any work is done.
pub(crate) fn report_files(args: &ReportArgs) -> Result<Vec<ReportFile>> {
    let files = ReportFile::list(&[
        (Format::Junit, &args.junit),
        (Format::Json, &args.json),
        (Format::Markdown, &args.markdown),
        (Format::Html, &args.html),
    ]);
    report::format::prepare(&files).map_err(AppError::runtime)?;
    Ok(files)
}

/// Writes every report; each failure is printed, and folded into the exit code as
/// [`ExitCode::with_report_failure`] documents.
pub(crate) fn finish_reports(
    report: &dyn Reportable,
    files: &[ReportFile],
    render: &RenderOptions,
    args: &ReportArgs,
    code: ExitCode,
) -> ExitCode {
    let failures = report::format::write_reports(report, files, render, args.max_body_bytes);
    for e in &failures {
        eprintln!("idem-check: error: {e:#}");
    }
    code.with_report_failure(!failures.is_empty())
}

/// The validated config for the target the user described, starting the bundled reference
/// server when asked (it lives as long as the returned handle).
async fn configure(t: &TargetArgs, opts: RunOptions) -> Result<(Arc<Config>, Option<Reference>)> {
    let mut reference = None;
    let mut hook: Option<Arc<dyn RestartHook>> = None;
    if let (Some(fault), false) = (&t.reference_fault, t.reference) {
        return Err(anyhow::anyhow!(
            "--reference-fault switches a fault on in the bundled reference server, which only \
             --reference starts: idem-check run --reference --reference-fault {fault}"
        )
        .into());
    }
    let target = if t.reference {
        let fault = t
            .reference_fault
            .as_deref()
            .map(|f| f.parse().map_err(|e| anyhow::anyhow!("{e}")))
            .transpose()?;
        let r = Reference::start_with(fault, t.reference_db.as_deref())
            .await
            .context("could not start the bundled reference server")
            .map_err(AppError::runtime)?;
        let mut spec = r.target();
        spec.http2 = t.http2;
        connection_from_args(t, &mut spec);
        hook = Some(r.restart_hook());
        reference = Some(r);
        spec
    } else if t.openapi.is_some() {
        crate::discover::commands::single_target(t).await?
    } else {
        target_from_args(t)?
    };
    let target = with_proxy_environment(with_secret_flags(target, t), t);
    let opts = run_options(t, opts);
    Ok((Arc::new(Config::build(target, &opts, hook)?), reference))
}

/// `target` with the environment's proxy variables, which its run's connector reads. The
/// in-process reference server is on loopback: only an explicit --proxy reaches it through a proxy.
pub(crate) fn with_proxy_environment(mut target: TargetSpec, t: &TargetArgs) -> TargetSpec {
    if !t.reference {
        target.net.proxy_env =
            crate::http::net::NetOptions::proxy_environment(&|name| std::env::var(name).ok());
    }
    target
}

/// `target` with `--secret` and `--redact-header` added.
pub(crate) fn with_secret_flags(mut target: TargetSpec, t: &TargetArgs) -> TargetSpec {
    target.secrets.extend(t.secret.iter().cloned());
    target
        .redact_headers
        .extend(t.redact_header.iter().cloned());
    target
}

/// The run options the target flags set (suite, timeout, label, release threads) over `opts`.
pub(crate) fn run_options(t: &TargetArgs, opts: RunOptions) -> RunOptions {
    RunOptions {
        suite: t.suite.clone(),
        timeout: t.timeout,
        label: t.label.clone().or_else(|| {
            t.reference.then(|| match &t.reference_fault {
                Some(f) => format!("reference+{f}"),
                None => "reference".to_string(),
            })
        }),
        reference: t.reference && t.reference_fault.is_none(),
        release_threads: !t.no_release_threads,
        ..opts
    }
}

/// Resolves on Ctrl-C (never, where the signal cannot be watched).
pub(crate) async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn run_probes(args: RunArgs) -> Result<ExitCode> {
    if args.target.openapi.is_some() {
        return crate::discover::commands::run(&args).await;
    }
    let opts = RunOptions {
        strict: args.strict,
        key_form: args.key_form,
        ..RunOptions::default()
    };
    let files = report_files(&args.report)?;
    let (config, reference) = configure(&args.target, opts).await?;
    let selection = probes::select(
        &config.suite,
        &expand_groups(&args.probe),
        &expand_groups(&args.skip),
    )?;
    let render = RenderOptions {
        color: terminal::use_color(args.report.color),
        secrets: config.secrets.clone(),
        max_body: args
            .report
            .max_body_bytes
            .unwrap_or(Format::Terminal.default_max_body()),
        key_header: config.suite.header.clone(),
    };
    let progress = Progress::new(selection.len() as u64, std::io::stderr().is_terminal());
    // The header and each verdict are printed as they are known; the evidence and the
    // summary once the run is over.
    let op = &config.operation;
    let target = format!("{} {}", op.method, op.url);
    let context = runner::context(&config);
    progress.line(&terminal::header(
        &target,
        &config.suite.name,
        &context,
        &render,
    ));
    progress.line("");
    let observer = ProgressObserver::new(&progress, &render);
    let report = runner::run(config.clone(), selection, &observer, interrupted())
        .await
        .map_err(AppError::runtime)?;
    progress.finish();
    if let Some(r) = reference {
        r.stop().await.map_err(AppError::runtime)?;
    }
    // The header printed before the run could not know what the pre-flight settled (the effect
    // basis, the key form): the whole line again, above the evidence and the summary.
    emit(&format!(
        "{}\n{}\n{}",
        observer.settled(&report),
        terminal::header_line(&report, &render),
        terminal::render_tail(&report, &render, config.strict)
    ))?;
    let code = ExitCode::for_run(&report.summary, report.interrupted);
    Ok(finish_reports(&report, &files, &render, &args.report, code))
}

/// The target description from `--target` and the flags; flags win over the file.
fn target_from_args(args: &TargetArgs) -> Result<TargetSpec> {
    let o = &args.openapi_args;
    if o.base_url.is_some() || !o.operations.is_empty() || !o.path_param.is_empty() {
        return Err(anyhow::anyhow!(
            "--base-url, --operation and --path-param need --openapi SPEC"
        )
        .into());
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut t = match &args.target {
        Some(path) => crate::target::load(path, &env)?,
        None => TargetSpec::default(),
    };
    match o.key_header.as_slice() {
        [] => {}
        [name] => t.key_header = Some(name.clone()),
        names => {
            return Err(anyhow::anyhow!(
                "--key-header is given {} times: without --openapi it names the one header that \
                 carries the key, as a target file's key-header does (several names are for \
                 --openapi, which recognises the key header among them)",
                names.len()
            )
            .into())
        }
    }
    apply_flags(t, args)
}

/// `t` with the target flags laid over it.
pub(crate) fn apply_flags(mut t: TargetSpec, args: &TargetArgs) -> Result<TargetSpec> {
    if let Some(url) = &args.url {
        t.url = url.clone();
    }
    if args.method.is_some() {
        t.method = args.method.clone();
    }
    t.headers.extend(args.headers.iter().cloned());
    if let Some(d) = &args.data {
        t.body = Some(body_arg(d, "-d @FILE")?);
    }
    if let Some(d) = &args.invalid_body {
        t.invalid_body = Some(body_arg(d, "--invalid-body @FILE")?);
    }
    let set = |slot: &mut Option<String>, v: &Option<String>| {
        if v.is_some() {
            slot.clone_from(v);
        }
    };
    set(&mut t.id_pointer, &args.id_pointer);
    set(&mut t.count_url, &args.count_url);
    set(&mut t.count_pointer, &args.count_pointer);
    set(&mut t.count_cmd, &args.count_cmd);
    set(&mut t.hold_header, &args.hold_header);
    set(&mut t.hold_release, &args.hold_release);
    if args.hold_at_least.is_some() {
        t.hold_at_least = args.hold_at_least;
    }
    set(&mut t.key_ttl_header, &args.key_ttl_header);
    if args.quiet_window.is_some() {
        t.quiet_window = args.quiet_window;
    }
    set(&mut t.restart_cmd, &args.restart_cmd);
    set(&mut t.ready_url, &args.ready_url);
    set(&mut t.second_url, &args.second_url);
    set(&mut t.crash_header, &args.crash_header);
    if args.lease_wait.is_some() {
        t.lease_wait = args.lease_wait;
    }
    set(&mut t.read_url, &args.read_url);
    set(&mut t.store_down_cmd, &args.store_down_cmd);
    set(&mut t.store_up_cmd, &args.store_up_cmd);
    if args.key_ttl.is_some() {
        t.key_ttl = args.key_ttl;
    }
    t.http2 |= args.http2;
    connection_from_args(args, &mut t);
    t.replicas.extend(args.replica.iter().cloned());
    t.tenant_b_headers
        .extend(args.tenant_b_header.iter().cloned());
    if t.restart_timeout.is_none() {
        t.restart_timeout = Some(args.restart_timeout);
    }
    if t.url.is_empty() {
        return Err(anyhow::anyhow!(
            "nothing to check: give the operation's URL (idem-check run \
             https://api.example.com/v1/payments …), a target file (--target FILE), an API \
             description (--openapi SPEC), or --reference to check the bundled reference server"
        )
        .into());
    }
    if let Some(hint) = crate::target::scheme_hint(&t.url) {
        return Err(anyhow::anyhow!("{hint}").into());
    }
    Ok(t)
}

/// `--probe`/`--skip` values with group names (`key-syntax`) replaced by their probes' ids;
/// anything else is left for the config to accept or refuse.
fn expand_groups(names: &[String]) -> Vec<String> {
    let catalog = probes::catalog();
    names
        .iter()
        .flat_map(|name| {
            let group: Vec<String> = catalog
                .iter()
                .filter(|p| p.meta.group.as_str() == name)
                .map(|p| p.meta.id.to_string())
                .collect();
            if group.is_empty() {
                vec![name.clone()]
            } else {
                group
            }
        })
        .collect()
}

/// TLS and route flags, over the target file's `[tls]`, `proxy` and `resolve`.
fn connection_from_args(args: &TargetArgs, t: &mut TargetSpec) {
    if args.cacert.is_some() {
        t.tls.cacert.clone_from(&args.cacert);
    }
    if args.cert.is_some() {
        t.tls.cert.clone_from(&args.cert);
        t.tls.key.clone_from(&args.key);
    }
    t.tls.insecure |= args.insecure;
    if args.proxy.is_some() {
        t.net.proxy.clone_from(&args.proxy);
    }
    t.net.resolve.extend(args.resolve.iter().cloned());
}

/// A body given inline or as `@FILE`; `what` names the option in the error.
fn body_arg(arg: &str, what: &str) -> Result<String> {
    match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the body file {path:?} ({what})"))
            .map_err(AppError::input_file),
        None => Ok(arg.to_string()),
    }
}

/// Streams the run to the terminal: the running probe on the bar, each verdict line above it
/// as soon as its probe is done (the probes a failed pre-flight kept from running are one line
/// in the tail instead).
pub(crate) struct ProgressObserver<'a> {
    progress: &'a Progress,
    render: &'a RenderOptions,
    /// The verdict each probe was streamed with, before root causes were settled.
    streamed: std::sync::Mutex<Vec<(&'static str, Outcome)>>,
}

impl<'a> ProgressObserver<'a> {
    pub(crate) fn new(progress: &'a Progress, render: &'a RenderOptions) -> Self {
        ProgressObserver {
            progress,
            render,
            streamed: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The probes whose verdict changed after the run (a FAIL streamed while its prerequisite
    /// had not run yet, or a PASS whose counts missed a late execution), each line again with
    /// its final verdict; empty when none changed.
    pub(crate) fn settled(&self, report: &RunReport) -> String {
        let streamed = self
            .streamed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed: Vec<String> = report
            .probes
            .iter()
            .filter(|p| {
                streamed
                    .iter()
                    .any(|(id, o)| *id == p.id && *o != p.outcome)
            })
            .map(|p| terminal::probe_line(p, self.render))
            .collect();
        if changed.is_empty() {
            return String::new();
        }
        format!(
            "\nsettled after the run (a failure these follow from, or executions that landed after they ended):\n{}\n",
            changed.join("\n")
        )
    }
}

impl Observer for ProgressObserver<'_> {
    fn started(&self, id: &str) {
        self.progress.start_probe(id);
    }
    fn finished(&self, report: &ProbeReport) {
        if !terminal::not_run(report) {
            self.progress
                .line(&terminal::probe_line(report, self.render));
            self.streamed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((report.id, report.outcome));
        }
        self.progress.finish_probe();
    }
}

async fn stress(args: StressArgs) -> Result<ExitCode> {
    if args.keys == 0 || args.duplicates == 0 || args.concurrency == 0 {
        return Err(
            anyhow::anyhow!("--keys, --duplicates and --concurrency must be at least 1").into(),
        );
    }
    let files = report_files(&args.report)?;
    let (config, reference) = configure(&args.target, RunOptions::default()).await?;
    let render = RenderOptions {
        color: terminal::use_color(args.report.color),
        secrets: config.secrets.clone(),
        max_body: args
            .report
            .max_body_bytes
            .unwrap_or(Format::Terminal.default_max_body()),
        key_header: config.suite.header.clone(),
    };
    let progress = Progress::for_stress(
        args.keys as u64,
        args.duration,
        std::io::stderr().is_terminal(),
    );
    let opts = crate::stress::StressOptions {
        keys: args.keys,
        duplicates: args.duplicates,
        concurrency: args.concurrency,
        duration: args.duration,
        rate: args.rate,
    };
    let report = crate::stress::run(config.clone(), &opts, &progress, interrupted())
        .await
        .map_err(AppError::runtime)?;
    progress.finish();
    if let Some(r) = reference {
        r.stop().await.map_err(AppError::runtime)?;
    }
    emit(&crate::stress::render_terminal(&report, &render))?;
    let run = report.as_run_report();
    let code = ExitCode::for_run(&run.summary, report.interrupted);
    Ok(finish_reports(&report, &files, &render, &args.report, code))
}

fn matrix(args: &MatrixArgs) -> Result<ExitCode> {
    let m = crate::matrix::build(crate::matrix::load(&args.reports).map_err(AppError::input_file)?);
    let md = crate::matrix::markdown::render(&m);
    let write = |path: &std::path::Path, text: &str| {
        report::format::prepare(&[ReportFile {
            format: Format::Markdown,
            path: path.to_path_buf(),
        }])
        .and_then(|()| report::file::write_atomically(path, text))
        .with_context(|| format!("could not write {}", path.display()))
        .map_err(AppError::runtime)
    };
    match &args.markdown {
        Some(path) => write(path, &md)?,
        None => emit(&md)?,
    }
    if let Some(path) = &args.html {
        write(path, &crate::matrix::html::render(&m))?;
    }
    Ok(ExitCode::Ok)
}

fn list(args: &ListArgs) -> Result<ExitCode> {
    let suite = Suite::load(&args.suite)?;
    let mut out = String::new();
    let _ = writeln!(out, "suite {}: {}\n", suite.name, suite.description);
    let _ = writeln!(
        out,
        "{:<26} {:<12} {:<32} needs",
        "probe", "group", "section"
    );
    for p in probes::catalog() {
        let m = p.meta;
        let needs = if m.needs.is_empty() {
            "-".to_string()
        } else {
            m.needs
                .iter()
                .map(|n| n.option())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let off = if suite.enabled(m.id) {
            ""
        } else {
            "  (not in this suite)"
        };
        let _ = writeln!(
            out,
            "{:<26} {:<12} {:<32} {needs}{off}",
            m.id,
            m.group.as_str(),
            m.section
        );
        for c in m.checks {
            let (sev, expect) = suite
                .check(m.id, c.id)
                .map(|s| (s.severity.as_str(), s.expect.clone()))
                .unwrap_or(("-", Vec::new()));
            let expect = if expect.is_empty() {
                String::new()
            } else {
                format!(
                    " (expects {})",
                    expect
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" or ")
                )
            };
            let _ = writeln!(out, "    {sev:<12} {}{expect}", c.what);
        }
    }
    out.push_str(&crate::client::checks::listing());
    emit(&out)?;
    Ok(ExitCode::Ok)
}

fn explain(id: &str, suite: &str) -> Result<ExitCode> {
    let Some(p) = probes::find(id) else {
        let known: Vec<&str> = probes::catalog().iter().map(|p| p.meta.id).collect();
        return Err(
            anyhow::anyhow!("unknown probe {id:?}; known probes: {}", known.join(", ")).into(),
        );
    };
    let suite = Suite::load(suite)?;
    let m = p.meta;
    let mut out = String::new();
    let _ = writeln!(out, "{}  ({}, {})", m.id, m.group.as_str(), m.section);
    let _ = writeln!(out, "stimulus:    {}", m.stimulus);
    let _ = writeln!(out, "requirement: {}", m.requirement);
    let _ = writeln!(out, "checks in suite {}:", suite.name);
    for c in m.checks {
        if let Some(s) = suite.check(m.id, c.id) {
            let expect = s
                .expect
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(" or ");
            let _ = writeln!(
                out,
                "  {:<12} {:<20} {}{}",
                s.severity.as_str(),
                c.id,
                c.what,
                if expect.is_empty() {
                    String::new()
                } else {
                    format!(" (expects {expect})")
                }
            );
        }
    }
    for n in m.needs {
        let _ = writeln!(out, "needs: {} ({})", n.what(), n.option());
    }
    emit(&out)?;
    Ok(ExitCode::Ok)
}
