//! The user's hooks: the restart hook runs a shell command, then polls a readiness URL until it
//! answers 2xx; the kill runs a shell command that ends the target at once; the store-outage hook runs one command to take the store down and another to
//! bring it back. What a command prints is shown above the progress bar, or in the error when
//! it fails.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::config::{
    CommandKill, CommandOutage, CommandRestart, KillHook, OutageHook, RestartHook,
};

impl RestartHook for CommandRestart {
    fn describe(&self) -> String {
        match &self.ready_url {
            Some(u) => format!("`{}` (ready when GET {u} answers 2xx)", self.command.text()),
            None => format!("`{}`", self.command.text()),
        }
    }

    fn restart(&self) -> BoxFuture<'_, Result<Option<String>>> {
        async move {
            let deadline = Instant::now() + self.timeout;
            for line in run_command(self.command.text(), self.timeout).await? {
                crate::report::terminal::above_progress(&format!("restart hook: {line}"));
            }
            let Some(url) = &self.ready_url else {
                return Ok(None);
            };
            let client = crate::http::client::builder(&self.connector)
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

impl KillHook for CommandKill {
    fn describe(&self) -> String {
        format!("`{}`", self.command.text())
    }

    fn kill(&self) -> BoxFuture<'_, Result<()>> {
        async move {
            for line in run_command(self.command.text(), self.timeout).await? {
                crate::report::terminal::above_progress(&format!("crash command: {line}"));
            }
            Ok(())
        }
        .boxed()
    }
}

impl OutageHook for CommandOutage {
    fn describe(&self) -> String {
        format!("`{}`, then `{}`", self.down.text(), self.up.text())
    }

    fn down(&self) -> BoxFuture<'_, Result<()>> {
        outage_command(self.down.text(), self.timeout).boxed()
    }

    fn up(&self) -> BoxFuture<'_, Result<()>> {
        outage_command(self.up.text(), self.timeout).boxed()
    }
}

/// Runs a store-outage command, showing what it printed above the progress bar.
async fn outage_command(command: &str, timeout: Duration) -> Result<()> {
    for line in run_command(command, timeout).await? {
        crate::report::terminal::above_progress(&format!("store-outage hook: {line}"));
    }
    Ok(())
}

/// Runs `command` with `sh -c` and returns what it printed; an error (quoting that output)
/// unless it exits 0 within `timeout`. Output is captured, not inherited: written straight to
/// the terminal it would land in the middle of the progress bar's line.
async fn run_command(command: &str, timeout: Duration) -> Result<Vec<String>> {
    let output = tokio::time::timeout(
        timeout,
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .with_context(|| format!("`{command}` did not finish within {timeout:?}"))?
    .with_context(|| format!("could not run `{command}`"))?;
    let said = said(&output.stdout, &output.stderr);
    if !output.status.success() {
        bail!(
            "`{command}` exited with {}{}",
            output.status,
            if said.is_empty() {
                String::new()
            } else {
                format!("; it printed: {}", said.join(" / "))
            }
        );
    }
    Ok(said)
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

/// How long, after the restart hook, an idle connection may take to show it was closed.
const CLOSE_WAIT: Duration = Duration::from_millis(300);

/// What a restart showed: how long the hook took, and whether the target was seen to go down
/// (`Ok` saying how) or not (`Err` saying why not).
pub struct Restarted {
    pub took: Duration,
    pub went_down: std::result::Result<String, String>,
}

/// Runs `hook` and says whether `who` (the server, the consumer) was seen to go down: what the
/// hook saw (the ready URL failing), or `idle`, a keep-alive connection opened before it, that
/// `who` closed. A hook that restarts nothing must not make state kept in memory PASS, so
/// `run`'s `restart-persistence` and `webhook`'s `wh-late-redelivery` both ask here. `Err` is
/// the hook's own failure.
pub async fn restart_observed<E: std::fmt::Display>(
    hook: &dyn RestartHook,
    idle: std::result::Result<crate::http::raw::IdleConnection, E>,
    who: &str,
) -> Result<Restarted> {
    let t0 = Instant::now();
    let seen_by_hook = hook.restart().await?;
    let took = t0.elapsed();
    let closed = match idle {
        Ok(mut conn) => {
            if conn.closed(CLOSE_WAIT).await {
                Ok(format!(
                    "an idle connection opened before the restart was closed by the {who}"
                ))
            } else {
                Err("an idle connection opened before the restart stayed open".to_string())
            }
        }
        Err(e) => Err(format!("no idle connection could be kept open ({e})")),
    };
    let went_down = match (seen_by_hook, closed) {
        (Some(seen), _) | (None, Ok(seen)) => Ok(seen),
        (None, Err(why)) => Err(why),
    };
    Ok(Restarted { took, went_down })
}
