//! The user's restart hook: run a shell command, then poll a readiness URL until it answers 2xx.
//! What the command prints is shown above the progress bar, or in the error when it fails.

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

    fn restart(&self) -> BoxFuture<'_, Result<()>> {
        async move {
            let deadline = Instant::now() + self.timeout;
            // Captured, not inherited: output written straight to the terminal would land in
            // the middle of the progress bar's line.
            let output = tokio::time::timeout(
                self.timeout,
                tokio::process::Command::new("sh")
                    .arg("-c")
                    .arg(&self.command)
                    .stdin(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .with_context(|| {
                format!(
                    "`{}` did not finish within {:?}",
                    self.command, self.timeout
                )
            })?
            .with_context(|| format!("could not run `{}`", self.command))?;
            let said = said(&output.stdout, &output.stderr);
            if !output.status.success() {
                bail!(
                    "`{}` exited with {}{}",
                    self.command,
                    output.status,
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!("; it printed: {}", said.join(" / "))
                    }
                );
            }
            for line in &said {
                crate::report::terminal::above_progress(&format!("restart hook: {line}"));
            }
            let Some(url) = &self.ready_url else {
                return Ok(());
            };
            let client = crate::http::client::builder()?
                .timeout(Duration::from_secs(2))
                .build()?;
            let mut last = String::from("no attempt");
            while Instant::now() < deadline {
                match client.get(url.clone()).send().await {
                    Ok(r) if r.status().is_success() => return Ok(()),
                    Ok(r) => last = format!("status {}", r.status()),
                    Err(e) => last = e.to_string(),
                }
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

/// The restart command's output, at most [`SAID_LINES`] lines (the last ones), each sanitised
/// for the terminal.
fn said(stdout: &[u8], stderr: &[u8]) -> Vec<String> {
    let text = [stdout, stderr]
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let lines: Vec<String> = text
        .lines()
        .map(crate::redact::sanitize_line)
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(SAID_LINES)..].to_vec()
}

/// How many lines of the restart command's output are shown.
const SAID_LINES: usize = 20;
