//! The user's hooks: the restart hook runs a shell command, then polls a readiness URL until it
//! answers 2xx; the store-outage hook runs one command to take the store down and another to
//! bring it back.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::config::{CommandOutage, CommandRestart, OutageHook, RestartHook};

impl RestartHook for CommandRestart {
    fn describe(&self) -> String {
        match &self.ready_url {
            Some(u) => format!("`{}` (ready when GET {u} answers 2xx)", self.command),
            None => format!("`{}`", self.command),
        }
    }

    fn restart(&self) -> BoxFuture<'_, Result<Option<String>>> {
        async move {
            let deadline = Instant::now() + self.timeout;
            run_command(&self.command, self.timeout).await?;
            let Some(url) = &self.ready_url else {
                return Ok(None);
            };
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()?;
            let mut last = String::from("no attempt");
            let mut failures = 0;
            while Instant::now() < deadline {
                match client.get(url.clone()).send().await {
                    Ok(r) if r.status().is_success() => {
                        return Ok((failures > 0).then(|| {
                            format!(
                                "GET {url} failed {failures} time{} after the command (last: {last}) before answering {}",
                                if failures == 1 { "" } else { "s" },
                                r.status()
                            )
                        }))
                    }
                    Ok(r) => last = format!("status {}", r.status()),
                    Err(e) => last = e.to_string(),
                }
                failures += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            bail!(
                "{url} was not ready within {:?} (last: {last})",
                self.timeout
            )
        }
        .boxed()
    }
}

impl OutageHook for CommandOutage {
    fn describe(&self) -> String {
        format!("`{}`, then `{}`", self.down, self.up)
    }

    fn down(&self) -> BoxFuture<'_, Result<()>> {
        run_command(&self.down, self.timeout).boxed()
    }

    fn up(&self) -> BoxFuture<'_, Result<()>> {
        run_command(&self.up, self.timeout).boxed()
    }
}

/// Runs `command` with `sh -c`; an error unless it exits 0 within `timeout`.
async fn run_command(command: &str, timeout: Duration) -> Result<()> {
    let status = tokio::time::timeout(
        timeout,
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .kill_on_drop(true)
            .status(),
    )
    .await
    .with_context(|| format!("`{command}` did not finish within {timeout:?}"))?
    .with_context(|| format!("could not run `{command}`"))?;
    if !status.success() {
        bail!("`{command}` exited with {status}");
    }
    Ok(())
}
