//! `idem-check init --openapi SPEC --out DIR`: one commented target file per keyed operation,
//! to edit before `run --target FILE`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::discover::{load, FETCH_TIMEOUT};
use super::Result;
use crate::cli::{ConnectionArgs, OpenApiArgs};
use idem_check::exit::ExitCode;

/// `idem-check init`.
#[derive(Args)]
pub struct InitArgs {
    /// The API description (file path or http(s) URL).
    #[arg(long = "openapi", value_name = "SPEC")]
    pub spec: String,

    /// The folder to write the target files to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    #[command(flatten)]
    pub openapi: OpenApiArgs,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

pub(super) async fn init(args: &InitArgs) -> Result<ExitCode> {
    let (spec, found) = load(&args.spec, &args.openapi, &args.connection, FETCH_TIMEOUT).await?;
    let ops = found.select(&args.openapi.operations)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for op in ops {
        let path = args.out.join(idem_check::discover::init::file_name(op));
        idem_check::report::file::write_atomically(
            &path,
            &idem_check::discover::init::target_file(op, &spec.source, &path),
        )
        .with_context(|| format!("could not write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    for s in &found.skipped {
        eprintln!("{}", s.line());
    }
    Ok(ExitCode::Ok)
}
