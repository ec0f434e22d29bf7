//! The `idem-check` binary: parse, run, print an error once, exit with a documented code.

#![forbid(unsafe_code)]

use clap::Parser;
use idem_check::exit::ExitCode;

fn main() {
    let opts = match idem_check::cli::Opts::try_parse() {
        Ok(opts) => opts,
        Err(e) if e.use_stderr() => {
            // A usage error is exit 1 (documented), not clap's default 2, which means a bad file.
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
    let code = match runtime.block_on(idem_check::commands::run(opts)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("idem-check: error: {err}");
            err.code()
        }
    };
    std::process::exit(code.into());
}
