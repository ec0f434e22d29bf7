//! What the fuzz targets share: a runtime to drive async entry points, a byte source that
//! hands its bytes over in the splits the input chooses, and the checks on error text.

use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// One single-threaded runtime for every input: building one per input would dominate the
/// time of a run.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime builds")
    })
}

/// Bytes handed to a reader in pieces whose sizes cycle through `splits` (each 1 or more),
/// then the end of the stream: the reader must not care where a read boundary falls.
pub struct Split<'a> {
    bytes: &'a [u8],
    splits: Vec<usize>,
    next: usize,
}

impl<'a> Split<'a> {
    /// `seed` chooses the piece sizes (each byte one size, 1 to 64); no seed is one piece.
    pub fn new(bytes: &'a [u8], seed: &[u8]) -> Self {
        let splits = seed.iter().map(|b| usize::from(b % 64) + 1).collect();
        Split {
            bytes,
            splits,
            next: 0,
        }
    }
}

impl AsyncRead for Split<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let piece = if self.splits.is_empty() {
            self.bytes.len()
        } else {
            let i = self.next % self.splits.len();
            self.next += 1;
            self.splits[i]
        };
        let n = piece.min(self.bytes.len()).min(buf.remaining());
        buf.put_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Poll::Ready(Ok(()))
    }
}

/// Panics when `text` (an error shown to a user) holds `secret`.
pub fn assert_shown_safely(text: &str, secret: &str) {
    assert!(
        secret.is_empty() || !text.contains(secret),
        "the secret {secret:?} is in the error text {text:?}"
    );
}

/// Panics unless `text` (an error) says something on its first line and names `what` (the
/// file or flag it is about; empty when nothing needs naming).
pub fn assert_names(text: &str, what: &str) {
    let first = text.lines().next().unwrap_or_default();
    assert!(
        !first.trim().is_empty(),
        "an error that says nothing: {text:?}"
    );
    assert!(
        text.contains(what),
        "an error that does not name {what}: {text:?}"
    );
}
