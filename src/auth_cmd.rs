//! `--auth-cmd`: a credential a command fetches, for tokens that expire during a run. The
//! command runs before the run, and again whenever the API answers 401: every request built
//! afterwards carries the header it printed last, and the request that got the 401 is sent
//! once more with it (one request, one exchange, whose timeline says so). Every value it ever
//! printed is a secret, masked in every output.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::http::client::Renewable;
use crate::http::exchange::Header;
use crate::http::Request;

/// How long the command may take to print its line.
pub const AUTH_CMD_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the command gave no credential.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("could not be started: {0}")]
    Start(std::io::Error),
    #[error("output could not be read: {0}")]
    Read(std::io::Error),
    #[error(
        "printed nothing within {}",
        humantime::format_duration(AUTH_CMD_TIMEOUT)
    )]
    Silent,
    #[error("failed ({0})")]
    Failed(std::process::ExitStatus),
    #[error("printed no 'Name: value' header line")]
    NoHeader,
}

/// The first line `sh -c cmd` prints on stdout, when it exits 0 within [`AUTH_CMD_TIMEOUT`]
/// (else it is killed); its stderr goes to the user's.
pub fn run(cmd: &str) -> Result<String, AuthError> {
    use std::io::Read as _;
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(AuthError::Start)?;
    let Some(mut stdout) = child.stdout.take() else {
        return Err(AuthError::NoHeader);
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = tx.send(stdout.read_to_end(&mut out).map(|_| out));
    });
    let out = match rx.recv_timeout(AUTH_CMD_TIMEOUT) {
        Ok(read) => read.map_err(AuthError::Read)?,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(AuthError::Silent);
        }
    };
    let status = child.wait().map_err(AuthError::Read)?;
    if !status.success() {
        return Err(AuthError::Failed(status));
    }
    let text = String::from_utf8_lossy(&out);
    Ok(text.lines().next().unwrap_or_default().trim().to_string())
}

/// `line` as a header: `Name: value`, the name a token.
pub fn header_of(line: &str) -> Result<Header, AuthError> {
    let (name, value) = line.split_once(':').ok_or(AuthError::NoHeader)?;
    let name = name.trim();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(AuthError::NoHeader);
    }
    Ok(Header::new(name, value.trim()))
}

/// A run's verdict where `--auth-cmd` gave no new credential after a 401 (`why`): the
/// requests it left refused say nothing of the API.
pub fn refused_reason(why: &str) -> String {
    format!("{why}: the 401s say nothing of the API; fix --auth-cmd")
}

/// The credential of a run whose token `--auth-cmd` fetches.
pub struct Credential {
    cmd: String,
    state: Mutex<State>,
    /// Held while the command runs: many requests in flight meet the expiry together, and one
    /// run of the command renews the credential for all of them.
    renewing: tokio::sync::Mutex<()>,
}

struct State {
    /// The header the command printed last.
    current: Header,
    /// Every value it printed, the first included: all are secrets.
    values: Vec<String>,
    /// Why the last refresh gave nothing, until the runner takes it.
    failure: Option<String>,
}

impl Credential {
    /// The credential `cmd` printed first, as `first`.
    pub fn new(cmd: impl Into<String>, first: Header) -> Arc<Credential> {
        let value = first.value_str();
        Arc::new(Credential {
            cmd: cmd.into(),
            state: Mutex::new(State {
                current: first,
                values: vec![value],
                failure: None,
            }),
            renewing: tokio::sync::Mutex::new(()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `req` carries a credential the command printed (tenant A's, not B's).
    pub fn carried_by(&self, req: &Request) -> bool {
        let state = self.state();
        req.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case(&state.current.name)
                && state
                    .values
                    .iter()
                    .any(|v| v.as_bytes() == h.value.as_slice())
        })
    }

    /// Whether `headers` carry a value the command printed, and which: `Some(true)` when it
    /// is the current one.
    fn carries_current(&self, headers: &[Header]) -> Option<bool> {
        let state = self.state();
        let mut printed = headers.iter().filter(|h| {
            h.name.eq_ignore_ascii_case(&state.current.name)
                && state
                    .values
                    .iter()
                    .any(|v| v.as_bytes() == h.value.as_slice())
        });
        printed.next().map(|h| h.value == state.current.value)
    }

    /// After a 401 to a request sent with `refused` headers: `true` when a credential newer
    /// than the one they carried is current, renewed by this call or by another request's 401
    /// meanwhile (the command runs once for all the requests that met the same expiry);
    /// `false` when they carried none the command printed, or it gave no new one (then
    /// [`Credential::take_failure`] says why).
    pub async fn renew_past(&self, refused: &[Header]) -> bool {
        let _one_at_a_time = self.renewing.lock().await;
        match self.carries_current(refused) {
            None => false,
            Some(false) => true,
            Some(true) => self.refresh().await,
        }
    }

    /// `req` with the current credential in place of an earlier one the command printed;
    /// a request with other credentials (tenant B's) is left as it is.
    pub fn applied(&self, req: &Request) -> Request {
        let mut req = req.clone();
        self.apply(&mut req.headers);
        req
    }

    /// `headers` with the current credential in place of an earlier one the command printed.
    pub fn apply(&self, headers: &mut [Header]) {
        let state = self.state();
        for h in headers.iter_mut().filter(|h| {
            h.name.eq_ignore_ascii_case(&state.current.name)
                && state
                    .values
                    .iter()
                    .any(|v| v.as_bytes() == h.value.as_slice())
        }) {
            h.value = state.current.value.clone();
        }
    }

    /// Runs the command again after a 401: `true` when it printed a new credential, which
    /// every later request carries; `false` when it printed the same one, or failed (then
    /// [`Credential::take_failure`] says why).
    pub async fn refresh(&self) -> bool {
        let cmd = self.cmd.clone();
        let ran = tokio::task::spawn_blocking(move || run(&cmd).and_then(|l| header_of(&l))).await;
        let mut state = self.state();
        match ran {
            Ok(Ok(header)) if header.value != state.current.value => {
                state.values.push(header.value_str());
                state.current = header;
                true
            }
            Ok(Ok(_)) => {
                state.failure = Some(
                    "the API answered 401 and --auth-cmd printed the same credential again".into(),
                );
                false
            }
            Ok(Err(e)) => {
                state.failure = Some(format!("the API answered 401 and --auth-cmd {e}"));
                false
            }
            Err(e) => {
                state.failure = Some(format!("the API answered 401 and --auth-cmd {e}"));
                false
            }
        }
    }

    /// Why the last refresh gave no new credential, once.
    pub fn take_failure(&self) -> Option<String> {
        self.state().failure.take()
    }

    /// Every credential value the command printed, to mask in every output.
    pub fn values(&self) -> Vec<String> {
        self.state().values.clone()
    }
}

impl Renewable for Credential {
    fn applied(&self, req: &Request) -> Request {
        Credential::applied(self, req)
    }

    fn carried_by(&self, req: &Request) -> bool {
        Credential::carried_by(self, req)
    }

    fn renew<'a>(&'a self, refused: &'a [Header]) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(self.renew_past(refused))
    }
}

/// The command is shown, never the credential.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("header", &self.state().current.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refresh_takes_the_new_line_and_remembers_every_value() {
        let dir = tempfile::tempdir().unwrap();
        let n = dir.path().join("n");
        std::fs::write(&n, "1").unwrap();
        let cmd = format!(
            "i=$(cat {0}); echo $((i+1)) > {0}; echo \"Authorization: Bearer tok-$i\"",
            n.display()
        );
        let first = header_of(&run(&cmd).unwrap()).unwrap();
        assert_eq!(first.value_str(), "Bearer tok-1");
        let c = Credential::new(cmd, first);
        assert!(c.refresh().await);
        let mut headers = vec![
            Header::new("authorization", "Bearer tok-1"),
            Header::new("X-Other", "Bearer tok-1"),
        ];
        c.apply(&mut headers);
        assert_eq!(headers[0].value_str(), "Bearer tok-2");
        assert_eq!(
            headers[1].value_str(),
            "Bearer tok-1",
            "only the credential's header"
        );
        let mut tenant_b = vec![Header::new("Authorization", "Bearer b")];
        c.apply(&mut tenant_b);
        assert_eq!(
            tenant_b[0].value_str(),
            "Bearer b",
            "tenant B keeps its own"
        );
        assert_eq!(c.values(), ["Bearer tok-1", "Bearer tok-2"]);
        assert!(c.take_failure().is_none());
    }

    #[tokio::test]
    async fn a_failing_or_unchanged_refresh_says_why() {
        let c = Credential::new("exit 3", Header::new("Authorization", "Bearer a"));
        assert!(!c.refresh().await);
        let why = c.take_failure().unwrap();
        assert!(why.contains("--auth-cmd failed"), "{why}");
        assert!(c.take_failure().is_none());
        let same = Credential::new(
            "echo 'Authorization: Bearer a'",
            Header::new("Authorization", "Bearer a"),
        );
        assert!(!same.refresh().await);
        assert!(same.take_failure().unwrap().contains("the same credential"));
        assert!(header_of("no header").is_err());
    }
}
