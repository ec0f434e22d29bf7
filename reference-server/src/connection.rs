//! Accepting connections and serving HTTP/1.1 and HTTP/2 on them, with the time limits of
//! [`Limits`] enforced on the socket itself.
//!
//! A connection is in one of three states, and each has its own clock:
//!
//! - **idle**: no request in flight and no byte of a new one received; it may stay so for
//!   [`Limits::idle`] (the wait for a kept-alive client's next request);
//! - **reading a head**: bytes of a request arrived but the request has not reached a handler;
//!   the head must be complete within [`Limits::header_read`] of its first byte;
//! - **in flight**: a handler runs; the body must arrive within [`Limits::body_read`]
//!   ([`crate::edge`] enforces that, since only the handler reads the body), and a handler that
//!   holds a request (the test hooks) is never cut off.
//!
//! When a clock runs out the socket read fails with `TimedOut` and hyper closes the connection.
//!
//! At most [`Limits::max_connections`] connections are served at once ([`Slots`]), each reading
//! a head of at most [`MAX_HEAD_BYTES`], so what clients make the server hold is bounded however
//! many connect. At the limit, the connection idle the longest is closed for the newcomer (an
//! idle connection costs its client nothing to open again); when none is idle, the newcomer
//! waits until one ends, which its clock bounds.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use crate::key_names::KeyNames;
use crate::limits::{Limits, MAX_HEAD_BYTES};

/// What the socket guard needs to know about the requests on its connection.
#[derive(Debug)]
struct ConnState {
    in_flight: usize,
    /// When the first byte of the next request head arrived.
    head_started: Option<Instant>,
    /// When the connection last became idle (opened, or its last request finished).
    idle_since: Instant,
}

type Shared = Arc<Mutex<ConnState>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, ConnState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The deadline for the pending read, if any.
fn deadline(state: &Shared, limits: &Limits) -> Option<Instant> {
    let s = lock(state);
    if s.in_flight > 0 {
        None
    } else if let Some(start) = s.head_started {
        Some(start + limits.header_read)
    } else {
        Some(s.idle_since + limits.idle)
    }
}

/// A TCP stream whose reads fail once the connection's current clock runs out (and pass
/// through the `key-name-spellings` fault's rewriting).
struct Guarded {
    tcp: TcpStream,
    key_names: KeyNames,
    state: Shared,
    limits: Limits,
    sleep: Pin<Box<Sleep>>,
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                self.key_names.after_read(buf.filled_mut(), before);
                if buf.filled().len() > before {
                    let mut s = lock(&self.state);
                    if s.in_flight == 0 && s.head_started.is_none() {
                        s.head_started = Some(Instant::now());
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let Some(at) = deadline(&self.state, &self.limits) else {
                    return Poll::Pending;
                };
                self.sleep.as_mut().reset(at);
                match self.sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client was too slow (header read or idle timeout)",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// Marks a request in flight for as long as it lives (its handler runs).
struct InFlight(Shared);

impl InFlight {
    fn start(state: &Shared) -> Self {
        let mut s = lock(state);
        s.in_flight += 1;
        s.head_started = None;
        InFlight(Arc::clone(state))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.in_flight -= 1;
        if s.in_flight == 0 {
            s.idle_since = Instant::now();
        }
    }
}

/// The places for connections: a permit per open connection, and each one's state and the
/// token that closes it, so that an idle one can give its place up.
struct Slots {
    permits: Arc<Semaphore>,
    open: Mutex<HashMap<u64, (Shared, CancellationToken)>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// How often a newcomer waiting for a place looks again for an idle connection to close.
const IDLE_RECHECK: Duration = Duration::from_millis(50);

/// A connection's place: returned, and forgotten, when the connection ends.
struct Slot {
    slots: Arc<Slots>,
    id: u64,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl Slots {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(Slots {
            permits: Arc::new(Semaphore::new(max)),
            open: Mutex::new(HashMap::new()),
            next_id: Default::default(),
        })
    }

    /// A place for a new connection: a free one, else the place of the connection idle the
    /// longest (closed for it), else the first one to come free. While it waits, a connection
    /// that becomes idle (its request answered) gives its place up too, within
    /// [`IDLE_RECHECK`].
    async fn take(self: &Arc<Self>, state: &Shared, close: &CancellationToken) -> Slot {
        let permit = loop {
            if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
                break permit;
            }
            self.close_longest_idle();
            let freed = Arc::clone(&self.permits).acquire_owned();
            if let Ok(permit) = tokio::time::timeout(IDLE_RECHECK, freed).await {
                break permit.expect("the semaphore is never closed");
            }
        };
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, (Arc::clone(state), close.clone()));
        Slot {
            slots: Arc::clone(self),
            id,
            _permit: permit,
        }
    }

    /// Closes the connection that has waited longest with no request in flight and no byte of
    /// a new one, if there is one.
    fn close_longest_idle(&self) {
        let open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let idle = open
            .values()
            .filter_map(|(state, close)| {
                let s = lock(state);
                (s.in_flight == 0 && s.head_started.is_none() && !close.is_cancelled())
                    .then_some((s.idle_since, close))
            })
            .min_by_key(|(since, _)| *since);
        if let Some((_, close)) = idle {
            close.cancel();
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits for
/// the open connections to finish their requests; once `killed`, it stops at once and every
/// open connection is dropped mid-request, as a dead process's are.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    (limits, key_name_spellings): (Limits, bool),
    shutdown: impl Future<Output = ()> + Send + 'static,
    killed: CancellationToken,
) -> io::Result<()> {
    let stop = CancellationToken::new();
    let connections = TaskTracker::new();
    let slots = Slots::new(limits.max_connections);
    tokio::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            () = &mut shutdown => break,
            () = killed.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(cause = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Responses are small and written whole; don't let Nagle hold them back.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(cause = %e, "could not set TCP_NODELAY");
        }
        let state = new_state();
        let close = stop.child_token();
        let slot = tokio::select! {
            () = &mut shutdown => break,
            () = killed.cancelled() => break,
            slot = slots.take(&state, &close) => slot,
        };
        let key_names = KeyNames::new(key_name_spellings);
        let one = serve_one(tcp, key_names, router.clone(), limits, (state, close, slot));
        let killed = killed.clone();
        connections.spawn(async move { killed.run_until_cancelled(one).await });
    }
    stop.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

fn new_state() -> Shared {
    Arc::new(Mutex::new(ConnState {
        in_flight: 0,
        head_started: None,
        idle_since: Instant::now(),
    }))
}

/// Serves one connection until it ends or `stop` (the server's shutdown, or its eviction as
/// the longest idle) closes it gracefully; its `Slot` is given back as it ends.
async fn serve_one(
    tcp: TcpStream,
    key_names: KeyNames,
    router: Router,
    limits: Limits,
    (state, stop, _slot): (Shared, CancellationToken, Slot),
) {
    let io = Guarded {
        tcp,
        key_names,
        state: Arc::clone(&state),
        limits,
        sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
    };
    // The request counts as in flight from its parsed head until its response is ready.
    let service = tower::service_fn(move |req: axum::http::Request<hyper::body::Incoming>| {
        let guard = InFlight::start(&state);
        let response = router.clone().oneshot(req.map(axum::body::Body::new));
        async move {
            let response = response.await;
            drop(guard);
            response
        }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().max_buf_size(MAX_HEAD_BYTES);
    let conn =
        builder.serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(service));
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(cause = %e, "connection ended");
                }
                return;
            }
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
