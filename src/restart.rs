//! The user's restart hook: run a shell command, then poll a readiness URL until it answers 2xx.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::config::{CommandRestart, RestartHook};

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
            let status = tokio::time::timeout(
                self.timeout,
                tokio::process::Command::new("sh")
                    .arg("-c")
                    .arg(&self.command)
                    .kill_on_drop(true)
                    .status(),
            )
            .await
            .with_context(|| {
                format!(
                    "`{}` did not finish within {:?}",
                    self.command, self.timeout
                )
            })?
            .with_context(|| format!("could not run `{}`", self.command))?;
            if !status.success() {
                bail!("`{}` exited with {status}", self.command);
            }
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
