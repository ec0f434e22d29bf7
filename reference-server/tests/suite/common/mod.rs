//! Shared by the integration tests: start the server in-process on 127.0.0.1:0, and a tiny
//! raw HTTP/1.1 client that can send what a well-behaved client library would refuse to
//! (two `Idempotency-Key` lines, non-ASCII bytes) and can hang up before the answer.

pub mod pg;
pub mod provider;
pub mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use idem_reference_server::{run_announcing, Config, DbLocation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Every request and every server run gets at most this long.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// Which store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

/// A fresh, empty database of one kind; dropping it removes the SQLite folder, or releases the
/// shared PostgreSQL cluster.
pub struct TestDb {
    pub location: DbLocation,
    _dir: Option<tempfile::TempDir>,
    pub cluster: Option<&'static pg::PgCluster>,
}

impl TestDb {
    pub fn new(kind: StoreKind) -> Self {
        match kind {
            StoreKind::Sqlite => {
                let (dir, path) = temp_db();
                Self {
                    location: DbLocation::File(path),
                    _dir: Some(dir),
                    cluster: None,
                }
            }
            StoreKind::Postgres => {
                let cluster = pg::shared();
                Self {
                    location: DbLocation::Postgres(cluster.create_database()),
                    _dir: None,
                    cluster: Some(cluster),
                }
            }
        }
    }

    /// Asserts that no server holds the database open: SQLite's WAL file is gone (removed by the
    /// last connection to close), or PostgreSQL has no other session on the database (its
    /// backends exit a moment after their clients hang up, so this waits a little).
    pub fn assert_closed(&self) {
        match (&self.location, &self.cluster) {
            (DbLocation::File(path), _) => {
                assert!(
                    !path.with_extension("db-wal").exists(),
                    "the store was left open"
                );
            }
            (DbLocation::Postgres(url), Some(cluster)) => {
                let name = url.rsplit('/').next().unwrap_or_default();
                let sql = format!(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = '{name}' AND pid <> pg_backend_pid()"
                );
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while cluster.query(url, &sql) != ["0"] {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "connections to the database were left open"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            (location, _) => panic!("nothing to check for {location:?}"),
        }
    }

    /// Runs `sql` on the database and returns each row as its columns joined by `|`.
    pub fn query(&self, sql: &str) -> Vec<String> {
        match (&self.location, &self.cluster) {
            (DbLocation::File(path), _) => {
                use rusqlite::types::Value;
                let conn = rusqlite::Connection::open_with_flags(
                    path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .expect("open the database read-only");
                let mut stmt = conn.prepare(sql).expect("prepare");
                let columns = stmt.column_count();
                stmt.query_map([], |row| {
                    (0..columns)
                        .map(|i| {
                            Ok(match row.get::<_, Value>(i)? {
                                Value::Null => String::new(),
                                Value::Integer(n) => n.to_string(),
                                Value::Real(x) => x.to_string(),
                                Value::Text(t) => t,
                                Value::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
                            })
                        })
                        .collect::<rusqlite::Result<Vec<_>>>()
                        .map(|cols| cols.join("|"))
                })
                .expect("query")
                .collect::<rusqlite::Result<_>>()
                .expect("rows")
            }
            (DbLocation::Postgres(url), Some(cluster)) => cluster.query(url, sql),
            (location, _) => panic!("cannot query {location:?}"),
        }
    }

    /// The SQLite file or the PostgreSQL URL, as `--db` takes it.
    pub fn arg(&self) -> String {
        match &self.location {
            DbLocation::File(path) => path.display().to_string(),
            DbLocation::Postgres(url) => url.clone(),
            DbLocation::Memory => ":memory:".into(),
        }
    }
}

/// Runs each named `async fn NAME(kind: StoreKind)` once per store, as tests `sqlite::NAME` and
/// `postgres::NAME` with the given test attribute.
#[macro_export]
macro_rules! on_both_stores {
    (#[$test:meta] $($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[$test] async fn $name() { super::$name($crate::common::StoreKind::Sqlite).await } )*
        }
        mod postgres {
            $( #[$test] async fn $name() { super::$name($crate::common::StoreKind::Postgres).await } )*
        }
    };
}

/// A server running in this process.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl TestServer {
    /// Stops the server and waits until it has closed its store.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(TIMEOUT, &mut self.task)
            .await
            .expect("server did not stop in time")
            .expect("server task panicked");
        result.expect("server returned an error");
    }

    pub fn client(&self) -> Client {
        Client { addr: self.addr }
    }
}

/// A fresh temporary directory for a database file; keep it alive for the test's duration.
pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("test.db");
    (dir, path)
}

/// Starts a server on `db` with `configure` applied to the defaults.
pub async fn start_on(db: &TestDb, configure: impl FnOnce(&mut Config)) -> TestServer {
    let mut config = Config::new(db.location.clone());
    configure(&mut config);
    start_with(config).await
}

/// Starts a server with exactly `config` and returns once it serves: once `run` says its
/// store is open. A test that acts on the store right away (crashes its database, say) must not
/// race that start; a server that stops instead fails the test with its error.
pub async fn start_with(config: Config) -> TestServer {
    let db = config.db.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let (ready_tx, ready) = oneshot::channel::<()>();
    let task = tokio::spawn(run_announcing(
        listener,
        config,
        async {
            let _ = stopped.await;
        },
        move || {
            let _ = ready_tx.send(());
            Ok(())
        },
    ));
    match tokio::time::timeout(TIMEOUT, ready).await {
        Ok(Ok(())) => {}
        // `run` returned before its store was open.
        Ok(Err(_)) => {
            let why = match task.await {
                Ok(Err(e)) => format!("{e:#}"),
                Ok(Ok(())) => "it stopped".to_owned(),
                Err(e) => format!("its task failed: {e}"),
            };
            panic!("the server on {db} did not start: {why}");
        }
        Err(_) => panic!("the store {db} did not open within {TIMEOUT:?}"),
    }
    TestServer {
        addr,
        stop: Some(stop),
        task,
    }
}

/// A request, kept as raw header lines so that tests can send anything.
#[derive(Clone, Debug)]
pub struct Req {
    method: &'static str,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Req {
    pub fn get(path: &str) -> Self {
        Self {
            method: "GET",
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn post(path: &str) -> Self {
        Self {
            method: "POST",
            ..Self::get(path)
        }
    }

    /// A payment creation by `token`, with `key` as the raw header value.
    pub fn payment(token: &str, key: &str, body: &str) -> Self {
        Self::post("/api/payments").token(token).key(key).json(body)
    }

    /// The second idempotent operation, with the same shape as a payment.
    pub fn payout(token: &str, key: &str, body: &str) -> Self {
        Self::post("/api/payouts").token(token).key(key).json(body)
    }

    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers
            .push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    pub fn token(self, token: &str) -> Self {
        self.header("Authorization", format!("Bearer {token}"))
    }

    /// Adds one `Idempotency-Key` line with exactly this text.
    pub fn key(self, raw: &str) -> Self {
        self.header("Idempotency-Key", raw)
    }

    pub fn json(mut self, body: &str) -> Self {
        self.body = body.as_bytes().to_vec();
        self.header("Content-Type", "application/json")
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    pub fn to_bytes(&self, close: bool) -> Vec<u8> {
        let mut out =
            format!("{} {} HTTP/1.1\r\nHost: test\r\n", self.method, self.path).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.body.len()).as_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

/// A parsed response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `id` of a JSON body.
    pub fn id(&self) -> String {
        self.json()["id"].as_str().unwrap_or_default().to_owned()
    }

    /// Asserts the RFC 9457 shape and returns the problem's `type`.
    pub fn assert_problem(&self, status: u16) -> String {
        assert_eq!(self.status, status, "body: {}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let body = self.json();
        assert_eq!(body["status"], status);
        assert!(body["title"].is_string() && body["detail"].is_string());
        body["type"].as_str().expect("type").to_owned()
    }

    /// Asserts a problem about the idempotency contract: problem+json and `Link` describedby.
    pub fn assert_idempotency_problem(&self, status: u16) {
        self.assert_problem(status);
        let link = self.header("link").expect("Link header");
        assert!(link.contains("rel=\"describedby\""), "{link}");
    }
}

/// Sends requests to one server, one connection per request.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    pub addr: SocketAddr,
}

impl Client {
    pub async fn send(&self, req: &Req) -> Resp {
        tokio::time::timeout(TIMEOUT, self.exchange(req.to_bytes(true)))
            .await
            .expect("request timed out")
            .expect("request failed")
    }

    /// Like [`Client::send`], but a transport failure is returned instead of failing the test
    /// (for tests that kill the server mid-request).
    pub async fn try_send(&self, req: &Req) -> std::io::Result<Resp> {
        tokio::time::timeout(TIMEOUT, self.exchange(req.to_bytes(true)))
            .await
            .map_err(|_| std::io::Error::other("request timed out"))?
    }

    async fn exchange(&self, raw: Vec<u8>) -> std::io::Result<Resp> {
        let mut stream = TcpStream::connect(self.addr).await?;
        stream.write_all(&raw).await?;
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await?;
        parse_response(&buf)
            .ok_or_else(|| std::io::Error::other(format!("unparseable response: {buf:?}")))
    }

    /// Sends `req` until `done` accepts its answer (bounded by [`TIMEOUT`]), for a state the
    /// server reaches on its own: a claim released, a record forgotten.
    pub async fn send_until(&self, req: &Req, done: impl Fn(&Resp) -> bool) -> Resp {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let resp = self.send(req).await;
            if done(&resp) {
                return resp;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "still {} after {TIMEOUT:?}: {}",
                resp.status,
                resp.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends `req` under a fresh named hold (`X-Test-Hold`, which needs `--test-hooks`) and
    /// returns once the server has claimed its key and waits in the hold, so that duplicates
    /// sent next meet it in flight however busy the machine is.
    pub async fn send_held(&self, req: &Req) -> Held {
        self.send_held_by(HOLD_HEADER, req).await
    }

    /// [`Client::send_held`] with the hold named in `header`: [`HOLD_HEADER`], or
    /// [`RACE_HOLD_HEADER`] to hold the request between its lookup and its claim.
    pub async fn send_held_by(&self, header: &str, req: &Req) -> Held {
        let name = hold_name();
        let held = req.clone().header(header, &name);
        let client = *self;
        let answer = tokio::spawn(async move { client.send(&held).await });
        self.wait_held(&name, || answer.is_finished()).await;
        Held {
            client,
            name,
            answer,
        }
    }

    /// Sends `req` under a fresh named hold on a connection of its own and hangs up once the
    /// server holds it, before any answer; returns the hold's name, not yet released. Returns
    /// only once the server has closed that connection without answering: it does so as it
    /// drops the request's handler, so the server has seen the hang-up before the held
    /// execution can finish.
    pub async fn send_held_and_hang_up(&self, req: &Req) -> String {
        let name = hold_name();
        let held = req.clone().header(HOLD_HEADER, &name);
        let mut stream = TcpStream::connect(self.addr).await.expect("connect");
        stream
            .write_all(&held.to_bytes(false))
            .await
            .expect("write");
        self.wait_held(&name, || false).await;
        stream.shutdown().await.expect("hang up");
        let mut rest = Vec::new();
        tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut rest))
            .await
            .expect("the server never closed the connection")
            .expect("read");
        assert!(
            rest.is_empty(),
            "answered after the hang-up: {}",
            String::from_utf8_lossy(&rest)
        );
        name
    }

    /// Waits until a request is held under `name` (bounded by [`TIMEOUT`]); `answered` says
    /// whether the request already got its answer, which means it never will be held.
    async fn wait_held(&self, name: &str, answered: impl Fn() -> bool) {
        let state = Req::get(&format!("/test-hooks/holds/{name}?wait=held"));
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let resp = self.send(&state).await;
            assert_eq!(resp.status, 200, "hold state: {}", resp.text());
            match resp.json()["state"].as_str() {
                Some("held") => return,
                Some("pending") => {}
                other => panic!("the hold {name} is {other:?} before the test released it"),
            }
            assert!(
                !answered(),
                "the held request was answered without reaching its hold"
            );
            assert!(
                tokio::time::Instant::now() < deadline,
                "the held request never reached its hold"
            );
        }
    }

    /// Releases the named hold `name` (in advance, if no request reached it yet).
    pub async fn release(&self, name: &str) {
        let resp = self
            .send(&Req::post(&format!("/test-hooks/holds/{name}/release")))
            .await;
        assert_eq!(resp.status, 200, "release {name}: {}", resp.text());
    }

    /// The caller's payment count (the effect counter).
    pub async fn count(&self, token: &str) -> u64 {
        let resp = self
            .send(&Req::get("/api/payments/count").token(token))
            .await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json()["count"].as_u64().expect("count")
    }
}

/// The header that holds a claimed request under a name (a test hook).
pub const HOLD_HEADER: &str = "X-Test-Hold";

/// The header that holds a request inside the `race` fault's window, between its lookup and its
/// claim (a test hook).
pub const RACE_HOLD_HEADER: &str = "X-Test-Race-Hold";

/// A fresh hold name.
pub fn hold_name() -> String {
    format!("hold-{}", uuid::Uuid::new_v4().simple())
}

/// A request the server holds in flight after claiming its key (see [`Client::send_held`]).
pub struct Held {
    client: Client,
    name: String,
    answer: JoinHandle<Resp>,
}

impl Held {
    /// Ends the hold and returns the held request's answer.
    pub async fn release(self) -> Resp {
        self.client.release(&self.name).await;
        self.answer.await.expect("the held request's task")
    }
}

/// Parses a complete `Connection: close` response.
pub fn parse_response(buf: &[u8]) -> Option<Resp> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Some(Resp {
        status,
        headers,
        body: buf[end + 4..].to_vec(),
    })
}

/// A valid payment body, unique per `reference`.
pub fn body(reference: &str) -> String {
    format!(r#"{{"amountCents":1250,"currency":"EUR","reference":"{reference}"}}"#)
}

/// A fresh quoted key.
pub fn fresh_key() -> String {
    format!("\"{}\"", uuid::Uuid::new_v4())
}

/// Starts the server binary on port 0 with `--db DB` and `extra` flags, and reads the address it
/// prints. The child is killed if dropped.
pub async fn spawn_server(
    db: impl AsRef<std::ffi::OsStr>,
    extra: &[&str],
) -> (tokio::process::Child, Client) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_idem-reference-server"))
        .args(["--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the server binary");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("server printed its address in time")
    .expect("read stdout");
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .expect("address");
    (child, Client { addr })
}
