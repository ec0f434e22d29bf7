//! The `idem-check` binary: parse, run, print an error once, exit with a documented code.

#![forbid(unsafe_code)]

use clap::Parser;
use idem_check::exit::ExitCode;

mod cli;
mod commands;

/// mimalloc instead of the system allocator: a stress run allocates for every request, and
/// glibc's malloc and free took about a fifth of the checker's CPU there (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let opts = match commands::Opts::try_parse() {
        Ok(opts) => opts,
        Err(mut e) if e.use_stderr() => {
            // A usage error is exit 1 (documented), not clap's default 2, which means a bad file.
            suggest_subcommand(&mut e);
            let _ = e.print();
            std::process::exit(ExitCode::Usage.into());
        }
        Err(e) => {
            // --help and --version; a closed pipe is no reason to fail.
            let _ = e.print();
            std::process::exit(ExitCode::Ok.into());
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("idem-check: error: could not start the async runtime: {e}");
            std::process::exit(ExitCode::Error.into());
        }
    };
    let code = match runtime.block_on(commands::run(opts)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("idem-check: error: {err}");
            err.code()
        }
    };
    std::process::exit(code.into());
}

/// Adds a "similar subcommand" tip where clap found none: clap's similarity measure misses a
/// swap of two letters (`rnu` for `run`), [`idem_check::suggest::closest`] counts it as one edit.
fn suggest_subcommand(e: &mut clap::Error) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand || e.get(ContextKind::SuggestedSubcommand).is_some()
    {
        return;
    }
    let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand) else {
        return;
    };
    let command = <commands::Opts as clap::CommandFactory>::command();
    let names = command.get_subcommands().map(|c| c.get_name());
    if let Some(near) = idem_check::suggest::closest(typed, names) {
        let near = near.to_string();
        e.insert(ContextKind::SuggestedSubcommand, ContextValue::String(near));
    }
}
