//! A payment provider stand-in on 127.0.0.1:0 that records every call the server makes and
//! answers as the profile's provider does: a new key creates a charge in its ledger, a known key
//! replays the first answer (GoCardless: 409 naming the resource). A test scripts what the next
//! calls meet instead — a 503, the in-progress conflict, a reset before any byte, a hang, a
//! charge committed and then the connection closed unanswered — and waits on the recorded calls,
//! never on time.
//!
//! One request per connection, spoken in raw HTTP/1.1, so that a reset or a commit-then-close
//! is exactly that on the wire.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_reference_server::ProviderProfile;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use super::TIMEOUT;

/// One call as the stand-in received it.
#[derive(Clone, Debug)]
pub struct Call {
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Call {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The form body's pairs, decoded.
    pub fn form(&self) -> Vec<(String, String)> {
        serde_urlencoded::from_bytes(&self.body).unwrap_or_default()
    }

    /// The provider key in the profile's carrier, as the provider reads it (the generic
    /// profile's RFC 8941 String unquoted).
    pub fn key(&self, profile: ProviderProfile) -> Option<String> {
        match profile {
            ProviderProfile::Square => self.json()["idempotency_key"].as_str().map(str::to_owned),
            ProviderProfile::Paypal => self.header("paypal-request-id").map(str::to_owned),
            ProviderProfile::Checkout => self.header("cko-idempotency-key").map(str::to_owned),
            ProviderProfile::Generic => self.header("idempotency-key").map(|v| {
                v.strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v)
                    .to_owned()
            }),
            _ => self.header("idempotency-key").map(str::to_owned),
        }
    }
}

/// What one call meets instead of the provider's normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// 503, with `Retry-After: 0` (an attempt budget, not a wait, is what the tests exercise).
    Unavailable,
    /// The profile's in-progress conflict.
    InProgress,
    /// The connection is closed before any byte of an answer; nothing is charged.
    Reset,
    /// The connection is held open without an answer until [`FakeProvider::release_hangs`].
    Hang,
    /// The charge is committed to the ledger, then the connection closed unanswered.
    CommitThenClose,
    /// A definitive refusal: 400 (Stripe: an `invalid_request_error`).
    Refuse,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    script: VecDeque<Step>,
    /// The first answer per provider key and path.
    ledger: HashMap<(String, String), Value>,
    charges: usize,
}

/// The stand-in.
pub struct FakeProvider {
    pub url: String,
    pub profile: ProviderProfile,
    state: Arc<Mutex<State>>,
    recorded: Arc<Notify>,
    hangs: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeProvider {
    /// Starts a stand-in playing `profile`.
    pub async fn start(profile: ProviderProfile) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let recorded = Arc::new(Notify::new());
        let (hangs, released) = watch::channel(false);
        let task = tokio::spawn({
            let (state, recorded) = (state.clone(), recorded.clone());
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let served = Served {
                        profile,
                        state: state.clone(),
                        recorded: recorded.clone(),
                        released: released.clone(),
                    };
                    tokio::spawn(served.serve(stream));
                }
            }
        });
        Self {
            url,
            profile,
            state,
            recorded,
            hangs,
            task,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next calls meet `steps`, in order; the calls after them are answered normally.
    pub fn script(&self, steps: impl IntoIterator<Item = Step>) {
        self.state().script.extend(steps);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// How many charges (or payouts) the ledger holds.
    pub fn charges(&self) -> usize {
        self.state().charges
    }

    /// Waits until at least `n` calls were recorded (bounded) and returns them all.
    pub async fn wait_calls(&self, n: usize) -> Vec<Call> {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let notified = self.recorded.notified();
            let calls = self.calls();
            if calls.len() >= n {
                return calls;
            }
            assert!(
                tokio::time::timeout_at(deadline, notified).await.is_ok(),
                "{} provider calls after {TIMEOUT:?}, expected {n}",
                calls.len()
            );
        }
    }

    /// Ends every hang: the held calls are answered normally.
    pub fn release_hangs(&self) {
        let _ = self.hangs.send(true);
    }

    /// The keys of every call, in order.
    pub fn keys(&self) -> Vec<Option<String>> {
        self.calls().iter().map(|c| c.key(self.profile)).collect()
    }
}

/// The provider key the contract derives (computed here independently of the server's code).
pub fn derived_key(tenant: &str, operation: &str, client_key: &str) -> String {
    let digest = Sha256::digest(format!("{tenant}\0{operation}\0{client_key}"));
    format!("ik_{}", &hex::encode(digest)[..40])
}

/// One accepted connection.
struct Served {
    profile: ProviderProfile,
    state: Arc<Mutex<State>>,
    recorded: Arc<Notify>,
    released: watch::Receiver<bool>,
}

impl Served {
    async fn serve(mut self, mut stream: TcpStream) {
        let Some(call) = read_request(&mut stream).await else {
            return;
        };
        let step = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.calls.push(call.clone());
            state.script.pop_front()
        };
        self.recorded.notify_waiters();
        let answer = match step {
            Some(Step::Reset) => return,
            Some(Step::Unavailable) => (
                503,
                vec![("Retry-After", "0".to_owned())],
                json!({"error": "unavailable"}),
            ),
            Some(Step::InProgress) => in_progress(self.profile),
            Some(Step::Refuse) => (
                400,
                Vec::new(),
                json!({"error": {"type": "invalid_request_error", "message": "refused"}}),
            ),
            Some(Step::CommitThenClose) => {
                self.charge(&call);
                return;
            }
            Some(Step::Hang) => {
                let _ = self.released.wait_for(|released| *released).await;
                self.charge(&call)
            }
            None => self.charge(&call),
        };
        let (status, headers, body) = answer;
        let body = body.to_string();
        let mut head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(body.as_bytes()).await;
        let _ = stream.shutdown().await;
    }

    /// The provider's normal answer: a new key charges; a known key replays (GoCardless: 409
    /// naming the resource); no key always charges.
    fn charge(&self, call: &Call) -> (u16, Vec<(&'static str, String)>, Value) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let key = call.key(self.profile);
        let known = key
            .as_ref()
            .and_then(|k| state.ledger.get(&(k.clone(), call.path.clone())))
            .cloned();
        if let Some(first) = known {
            if self.profile == ProviderProfile::Gocardless {
                let id = first
                    .pointer(ref_pointer(self.profile, &call.path))
                    .cloned();
                return (
                    409,
                    Vec::new(),
                    json!({"error": {"type": "invalid_state", "code": 409, "errors": [
                        {"reason": "idempotent_creation_conflict",
                         "links": {"conflicting_resource_id": id}}]}}),
                );
            }
            return (200, vec![("Idempotent-Replayed", "true".into())], first);
        }
        state.charges += 1;
        let id = format!("prov_{}", state.charges);
        let answer = nested(ref_pointer(self.profile, &call.path), &id);
        if let Some(key) = key {
            state
                .ledger
                .insert((key, call.path.clone()), answer.clone());
        }
        (201, Vec::new(), answer)
    }
}

/// Where the profile's answer to `path` holds the id.
pub fn ref_pointer(profile: ProviderProfile, path: &str) -> &'static str {
    match (profile, path) {
        (ProviderProfile::Adyen, "/v71/payments") => "/pspReference",
        (ProviderProfile::Square, "/v2/payments") => "/payment/id",
        (ProviderProfile::Square, "/v2/refunds") => "/refund/id",
        (ProviderProfile::Paypal, "/v1/payments/payouts") => "/batch_header/payout_batch_id",
        (ProviderProfile::Gocardless, "/payments") => "/payments/id",
        (ProviderProfile::Gocardless, "/refunds") => "/refunds/id",
        _ => "/id",
    }
}

/// `{"a":{"b":id}}` for `/a/b`.
fn nested(pointer: &str, id: &str) -> Value {
    pointer.rsplit('/').filter(|s| !s.is_empty()).fold(
        Value::String(id.to_owned()),
        |inner, name| json!({ name: inner }),
    )
}

fn in_progress(profile: ProviderProfile) -> (u16, Vec<(&'static str, String)>, Value) {
    match profile {
        ProviderProfile::Stripe => (
            409,
            Vec::new(),
            json!({"error": {"type": "idempotency_error", "code": "idempotency_key_in_use",
                             "message": "in use"}}),
        ),
        ProviderProfile::Adyen => (
            422,
            Vec::new(),
            json!({"status": 422, "errorCode": "704",
                   "message": "request already processed or in progress",
                   "errorType": "validation"}),
        ),
        ProviderProfile::Checkout => (
            409,
            Vec::new(),
            json!({"error_type": "request_in_progress"}),
        ),
        _ => (409, Vec::new(), json!({"title": "request in progress"})),
    }
}

/// Reads one request: its head and a `Content-Length` body.
async fn read_request(stream: &mut TcpStream) -> Option<Call> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Call {
        path,
        headers,
        body,
    })
}

/// How long the server gives one provider attempt in tests that make an attempt time out:
/// short, yet long enough for an answered attempt on a loaded machine.
pub const SHORT_ATTEMPT: Duration = Duration::from_millis(500);

/// An https front for a stand-in: a CA made here, a certificate for 127.0.0.1 it signed, each
/// connection decrypted and passed on to the stand-in. The CA's PEM file is what
/// `--provider-ca` takes.
pub struct TlsFront {
    pub url: String,
    pub ca: std::path::PathBuf,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFront {
    pub async fn start(backend: &FakeProvider) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        use tokio_rustls::rustls::{self, pki_types::PrivateKeyDer, ServerConfig};

        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA");
        let key = KeyPair::generate().expect("key");
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .expect("leaf params")
            .signed_by(&key, &ca)
            .expect("leaf");
        let dir = tempfile::tempdir().expect("temp dir");
        let ca_path = dir.path().join("provider-ca.pem");
        std::fs::write(&ca_path, ca.pem()).expect("write the CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivateKeyDer::try_from(key.serialize_der()).expect("key DER"),
            )
            .expect("certificate and key");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("https://{}", listener.local_addr().expect("addr"));
        let upstream = backend.url.trim_start_matches("http://").to_owned();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        });
        Self {
            url,
            ca: ca_path,
            _dir: dir,
            task,
        }
    }
}
