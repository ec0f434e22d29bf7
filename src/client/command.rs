//! Running the user's client command once: in its own process group, with the fake API's
//! address in its environment, its output captured, and a deadline after which the whole group
//! is killed.
//!
//! The group matters because a client command is often a shell or an interpreter that starts
//! the real client as a child: killing only the direct child would leave the grandchild retrying
//! against the next scenario's server, or holding the output pipes open forever. It is killed
//! however the run ends, also when the future running it is dropped (Ctrl-C, the run loop's
//! time limit: see [`crate::runner::each`]), so the user's command is never left running.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// Bytes of stdout and of stderr kept per run; the rest is counted, not stored.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// How long the output pipes may stay open after the group was killed (a process that left the
/// group, e.g. with setsid, can hold them).
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// How long a run may last past its deadline: the group killed, then each of the two output
/// pipes given [`DRAIN_GRACE`] to close.
pub const PAST_DEADLINE: Duration = Duration::from_secs(2 * DRAIN_GRACE.as_secs() + 1);

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// The deadline passed; the group was killed.
    Timeout,
}

impl Exit {
    /// True for exit status 0: the client says the payment was created.
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }

    /// "exit 0", "killed by signal 9", "killed after the 60 s timeout".
    pub fn describe(self, timeout: Duration) -> String {
        match self {
            Exit::Code(c) => format!("exit {c}"),
            Exit::Signal(s) => format!("ended by signal {s}"),
            Exit::Timeout => format!("killed after the {} s timeout", timeout.as_secs()),
        }
    }
}

/// A captured output stream.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Output {
    /// The first [`OUTPUT_CAP`] bytes, as text (invalid UTF-8 replaced).
    pub text: String,
    /// Bytes left out after the cap.
    pub omitted_bytes: usize,
}

/// One run of the command.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// 1-based within its scenario.
    pub run: usize,
    /// When it started, from the start of the scenario.
    pub start_ms: f64,
    pub duration_ms: f64,
    pub exit: Exit,
    pub stdout: Output,
    pub stderr: Output,
}

/// Runs `argv` with `env` added to the inherited environment, until it exits or `timeout`
/// passes. `origin` is the scenario's start. Dropping the future kills the command's group.
pub async fn run(
    argv: &[String],
    env: &[(&str, String)],
    timeout: Duration,
    origin: Instant,
    run: usize,
) -> Result<RunRecord> {
    let (program, args) = argv.split_first().context("no command given after --")?;
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so that whatever it starts can be ended with it (below).
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("could not start the client command {program:?}"))?;
    let group = Group(child.id());
    let stdout = tokio::spawn(capture(child.stdout.take()));
    let stderr = tokio::spawn(capture(child.stderr.take()));
    let exit = tokio::select! {
        status = child.wait() => {
            let status = status.context("could not wait for the client command")?;
            match (status.code(), signal_of(status)) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                (None, None) => Exit::Signal(0),
            }
        }
        () = tokio::time::sleep(timeout) => Exit::Timeout,
    };
    // Whatever the command left running (a background retry, a timed-out child) ends with it.
    group.end();
    let _ = child.kill().await;
    let _ = child.wait().await;
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(RunRecord {
        run,
        start_ms: started.duration_since(origin).as_secs_f64() * 1000.0,
        duration_ms,
        exit,
        stdout: drained(stdout).await,
        stderr: drained(stderr).await,
    })
}

/// The signal that ended the command, where processes end by signals.
#[cfg(unix)]
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt as _;
    status.signal()
}

/// Windows has no signals: a command always ends with a code.
#[cfg(not(unix))]
fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
    None
}

/// The process group the command leads (its pid): killed when dropped, so that a run whose
/// future is dropped halfway (Ctrl-C, a time limit) leaves nothing running either.
struct Group(Option<u32>);

impl Group {
    /// Kills the group now, once: after this its id may be reused, so dropping does nothing.
    fn end(mut self) {
        end_process_group(self.0.take());
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        end_process_group(self.0.take());
    }
}

/// Kills the process group the command led, so nothing it started outlives it.
#[cfg(unix)]
fn end_process_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Without process groups only the command itself is ended (by `kill_on_drop`, or `kill` after
/// this).
#[cfg(not(unix))]
fn end_process_group(_pid: Option<u32>) {}

async fn drained(task: tokio::task::JoinHandle<Output>) -> Output {
    let abort = task.abort_handle();
    match tokio::time::timeout(DRAIN_GRACE, task).await {
        Ok(Ok(out)) => out,
        _ => {
            abort.abort();
            Output {
                text: "(output still held open by a process outside the group; not read)".into(),
                omitted_bytes: 0,
            }
        }
    }
}

/// Reads a stream to its end, keeping the first [`OUTPUT_CAP`] bytes.
async fn capture(stream: Option<impl AsyncRead + Unpin>) -> Output {
    let Some(mut stream) = stream else {
        return Output::default();
    };
    let mut kept = Vec::new();
    let mut omitted = 0;
    let mut buf = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_CAP.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
        omitted += n - room;
    }
    Output {
        text: String::from_utf8_lossy(&kept).into_owned(),
        omitted_bytes: omitted,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[tokio::test]
    async fn captures_exit_status_output_and_environment() {
        let r = run(
            &sh("echo \"base=$IDEM_CHECK_BASE_URL\"; echo oops >&2; exit 3"),
            &[("IDEM_CHECK_BASE_URL", "http://127.0.0.1:9".into())],
            Duration::from_secs(10),
            Instant::now(),
            1,
        )
        .await
        .unwrap();
        assert_eq!(r.exit, Exit::Code(3));
        assert_eq!(r.stdout.text, "base=http://127.0.0.1:9\n");
        assert_eq!(r.stderr.text, "oops\n");
    }

    /// True while `pid` runs (a zombie waiting for its reaper counts as ended).
    pub(in crate::client) fn running(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|s| !s.starts_with('Z'))
        })
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group_including_grandchildren() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        let script = format!("sleep 30 & echo $! > '{}'; wait", pidfile.to_string_lossy());
        let t = Instant::now();
        let r = run(&sh(&script), &[], Duration::from_millis(500), t, 1)
            .await
            .unwrap();
        assert_eq!(r.exit, Exit::Timeout);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // The shell wrote the grandchild's pid before waiting (unless it never got that far, in
        // which case there is no grandchild to survive).
        if let Ok(pid) = std::fs::read_to_string(&pidfile) {
            let pid = pid.trim();
            for _ in 0..50 {
                if !running(pid) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("the grandchild {pid} outlived the timeout");
        }
    }

    /// Polls (every 10 ms, at most 20 s) until `done` holds.
    pub(in crate::client) async fn until(what: &str, done: impl Fn() -> bool) {
        let bound = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < bound, "{what}: not within 20 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A run whose future is dropped (as the run loop drops it on Ctrl-C) kills the whole group
    /// too: the user's command is never left running.
    #[tokio::test]
    async fn dropping_the_run_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        let script = format!("sleep 30 & echo $! > '{}'; wait", pidfile.to_string_lossy());
        let argv = sh(&script);
        tokio::select! {
            r = run(&argv, &[], Duration::from_secs(60), Instant::now(), 1) => {
                panic!("the run ended by itself: {r:?}")
            }
            () = until("the grandchild's pid", || pidfile.exists()) => {}
        }
        // The pid is written once the file exists but perhaps not yet flushed: wait for a line.
        until("the whole pid", || {
            std::fs::read_to_string(&pidfile).is_ok_and(|p| p.ends_with('\n'))
        })
        .await;
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        until("the grandchild's end", || !running(pid.trim())).await;
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_naming_it() {
        let err = run(
            &["/nonexistent/client".to_string()],
            &[],
            Duration::from_secs(1),
            Instant::now(),
            1,
        )
        .await
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("/nonexistent/client"),
            "{err:#}"
        );
    }
}
