//! The release of a staged HTTP/1.1 burst: writing every connection's held-back final bytes, the
//! one moment that decides how close together the duplicates reach the server.
//!
//! Each release is a non-blocking `send(2)` of a few bytes. On a local target that call also runs
//! the server's whole TCP receive path and the wake-up of its threads, ~4 µs on a small VM, so 16
//! releases from one thread cannot arrive closer than ~60 µs. Two threads halve that, but only if
//! neither is interrupted: a server thread woken by the first requests preempts an ordinary
//! release thread on its core, and two ordinary threads end up taking turns (BENCHMARKS.md
//! measured no gain). Two dedicated release threads that ask the kernel not to be preempted (see
//! [`super::sched`]: real-time priority where permitted, else a short time slice) send 16
//! releases within ~35–40 µs.
//!
//! Threads that hold both cores can starve a server under test that shares the machine. The
//! guards: the two release threads sleep between bursts and run only the release itself — a spin
//! of at most 1 ms for each other, then their share of the `send(2)` calls; only one burst uses
//! them at a time (others release on their own thread and say so); they are used only when at
//! least two CPUs are available; a short-slice thread keeps its ordinary share of the CPU, and a
//! real-time one is bounded by the kernel's real-time throttling. Taking both cores of a 2-vCPU
//! machine for ~40 µs delays a local server by as much and then leaves it all the requests at
//! once, which measured as better detection, not worse.
//!
//! When neither way is available (before Linux 6.12 without the permission), the release runs on
//! the calling thread and the burst says why ([`ReleaseMode`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use socket2::{SockRef, Socket};

use super::sched::{pin_current_thread, raise_current_thread, two_cpus, NotRaised, Scheduling};

/// How many threads a parallel release uses: two halve the spread; more would take more of the
/// cores a local server needs, for a few microseconds less.
const PARALLEL_THREADS: usize = 2;

/// The longest a release thread spins for the other to wake up: long enough to cover a wake-up,
/// short enough never to hold a core for long.
const SPIN_LIMIT: Duration = Duration::from_millis(1);

/// The longest a burst waits for the release threads to report back before it writes whatever
/// is left itself.
const POOL_WAIT: Duration = Duration::from_secs(1);

/// How a burst's final bytes went out; every burst reports it, because the spread it achieved
/// depends on it.
#[derive(Debug, Clone, PartialEq)]
pub enum ReleaseMode {
    /// All final HTTP/2 frames in one TCP segment.
    OnePacket,
    /// Final bytes written back to back from `threads` threads: the dedicated release threads
    /// (with how they are scheduled), or the calling thread.
    Threads {
        threads: usize,
        scheduling: Option<Scheduling>,
        /// Why the release did not use the release threads, when it did not.
        why_not: Option<String>,
    },
    /// Released as `mode` at idem-check, into CONNECT tunnels through `proxy`: the spread
    /// measured here is what left this host, and the proxy, forwarding each connection on its
    /// own, may widen it before the server sees the bytes.
    ThroughProxy {
        proxy: String,
        mode: Box<ReleaseMode>,
    },
}

impl ReleaseMode {
    /// This mode, marked as having gone through `proxy` when there was one.
    pub(crate) fn through(self, proxy: Option<String>) -> ReleaseMode {
        match proxy {
            Some(proxy) => ReleaseMode::ThroughProxy {
                proxy,
                mode: Box::new(self),
            },
            None => self,
        }
    }
}

impl std::fmt::Display for ReleaseMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReleaseMode::OnePacket => f.write_str("in one HTTP/2 packet"),
            ReleaseMode::Threads {
                threads,
                scheduling,
                why_not,
            } => {
                let kind = scheduling.map_or(String::new(), |s| format!("{} ", s.label()));
                let plural = if *threads == 1 { "" } else { "s" };
                write!(f, "from {threads} {kind}thread{plural}")?;
                match why_not {
                    Some(why) => write!(f, " ({why})"),
                    None => Ok(()),
                }
            }
            ReleaseMode::ThroughProxy { proxy, mode } => write!(
                f,
                "{mode} at idem-check, then through the proxy {proxy} (which may spread them)"
            ),
        }
    }
}

/// One connection's release: its index in the burst, its socket and the bytes to write.
pub(crate) type Job<'a> = (usize, BorrowedSocket<'a>, &'a [u8]);

/// A connection's socket, borrowed for one release: what `socket2` sends on without taking the
/// connection from its owner (a file descriptor on Unix, a `SOCKET` on Windows).
#[cfg(unix)]
pub(crate) type BorrowedSocket<'a> = std::os::fd::BorrowedFd<'a>;
/// A connection's socket, borrowed for one release (a `SOCKET` on Windows).
#[cfg(windows)]
pub(crate) type BorrowedSocket<'a> = std::os::windows::io::BorrowedSocket<'a>;

/// The socket of `connection`, borrowed for a release.
#[cfg(unix)]
pub(crate) fn socket_of<S: std::os::fd::AsFd>(connection: &S) -> BorrowedSocket<'_> {
    connection.as_fd()
}

/// The socket of `connection`, borrowed for a release.
#[cfg(windows)]
pub(crate) fn socket_of<S: std::os::windows::io::AsSocket>(connection: &S) -> BorrowedSocket<'_> {
    connection.as_socket()
}

/// A written release: index, what `send(2)` returned, and when it returned.
pub(crate) type Outcome = (usize, std::io::Result<usize>, Instant);

/// Who writes a burst's final bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Releasers {
    /// The two release threads, when they can run (see the module documentation); else the
    /// calling thread, and the burst says why.
    Threads,
    /// The calling thread, for the reason given (shown with the burst).
    Caller(&'static str),
}

impl From<bool> for Releasers {
    /// `--no-release-threads` (false) keeps every release on the calling thread.
    fn from(use_threads: bool) -> Releasers {
        if use_threads {
            Releasers::Threads
        } else {
            Releasers::Caller("--no-release-threads")
        }
    }
}

/// Writes every job's bytes, from the release threads when `releasers` asks for them and they
/// can run (see the module documentation), else from the calling thread. Returns the outcomes
/// in job order, and how the release was done.
pub(crate) fn release_all(jobs: &[Job<'_>], releasers: Releasers) -> (Vec<Outcome>, ReleaseMode) {
    let alone = |why: String| {
        let mode = ReleaseMode::Threads {
            threads: 1,
            scheduling: None,
            why_not: Some(why),
        };
        (release_here(jobs), mode)
    };
    if let Releasers::Caller(why) = releasers {
        return alone(why.into());
    }
    if jobs.len() < 2 {
        return alone("one connection".into());
    }
    let cpus = available_cpus();
    if cpus < PARALLEL_THREADS {
        return alone(format!("{cpus} CPU available"));
    }
    let threads = match release_threads() {
        Ok(threads) => threads,
        Err(why) => return alone(why.to_string()),
    };
    let mut pool = match threads.pool.try_lock() {
        Ok(pool) => pool,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return alone("another burst was releasing".into()),
    };
    let (batch, unprepared) = Batch::new(jobs);
    match pool.run(batch) {
        Ok(batch) => {
            let mode = ReleaseMode::Threads {
                threads: PARALLEL_THREADS,
                scheduling: Some(threads.scheduling),
                why_not: None,
            };
            (batch.outcomes(unprepared), mode)
        }
        Err(batch) => {
            batch.drain();
            let mode = ReleaseMode::Threads {
                threads: 1,
                scheduling: None,
                why_not: Some("the release threads stopped".into()),
            };
            (batch.outcomes(unprepared), mode)
        }
    }
}

/// The release loop on the calling thread: one non-blocking `send(2)` per job on the burst's
/// own sockets, back to back. Nothing outlives the call, so, unlike a [`Batch`] handed to the
/// release threads, the sockets need no duplicate descriptors (two system calls per request
/// saved), and the outcomes are allocated before the first send.
fn release_here(jobs: &[Job<'_>]) -> Vec<Outcome> {
    let mut out: Vec<Outcome> = Vec::with_capacity(jobs.len());
    for (i, fd, bytes) in jobs {
        let result = SockRef::from(fd).send(bytes);
        out.push((*i, result, Instant::now()));
    }
    out
}

/// The CPUs this process may use, read once: the answer comes from cgroup files, which cost
/// more to read than a whole release when a stress run asks for every burst.
fn available_cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Where a release thread records one job's `send(2)` result and time. The slots are allocated
/// and touched before the release, so recording never allocates.
type Slot = OnceLock<(std::io::Result<usize>, Instant)>;

/// The connections of one release, owned so the long-lived release threads can write to them:
/// each socket is a duplicate of the burst's (the same connection under a second descriptor).
struct Batch {
    id: u64,
    /// Burst index, socket, bytes.
    jobs: Vec<(usize, Socket, Vec<u8>)>,
    /// The next job to take: every thread takes from this one queue, so a thread that starts
    /// late leaves its share to the other.
    next: AtomicUsize,
    armed: AtomicUsize,
    slots: Vec<Slot>,
}

impl Batch {
    /// The batch, and the jobs whose socket could not be duplicated (with why).
    fn new(jobs: &[Job<'_>]) -> (Batch, Vec<(usize, String)>) {
        let mut owned = Vec::with_capacity(jobs.len());
        let mut unprepared = Vec::new();
        for (i, fd, bytes) in jobs {
            match SockRef::from(fd).try_clone() {
                Ok(socket) => owned.push((*i, socket, bytes.to_vec())),
                Err(e) => unprepared.push((*i, format!("could not prepare the release: {e}"))),
            }
        }
        // Touch every buffer and the clock once so no page fault or first-call cost lands in the
        // loop.
        let warm = owned
            .iter()
            .flat_map(|(_, _, b)| b.iter())
            .fold(0u8, |a, b| a.wrapping_add(*b));
        std::hint::black_box(warm);
        std::hint::black_box(Instant::now());
        let slots = owned.iter().map(|_| OnceLock::new()).collect();
        let batch = Batch {
            id: 0,
            jobs: owned,
            next: AtomicUsize::new(0),
            armed: AtomicUsize::new(0),
            slots,
        };
        (batch, unprepared)
    }

    /// Sends the next unsent job until none is left: the release loop, with no allocation,
    /// await or wake-up between two sends. A release of a few bytes into an idle connection is
    /// accepted whole; the caller finishes any partial write after the loop.
    fn drain(&self) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            let (Some((_, socket, bytes)), Some(slot)) = (self.jobs.get(k), self.slots.get(k))
            else {
                return;
            };
            let result = socket.send(bytes);
            // Each job is taken by exactly one thread, so the slot is always empty here.
            let _ = slot.set((result, Instant::now()));
        }
    }

    /// One release thread's part: say it is here, wait (at most [`SPIN_LIMIT`]) for the other,
    /// then release.
    fn release_from_pool_thread(&self) {
        self.armed.fetch_add(1, Ordering::AcqRel);
        let end = Instant::now() + SPIN_LIMIT;
        while self.armed.load(Ordering::Acquire) < PARALLEL_THREADS && Instant::now() < end {
            std::hint::spin_loop();
        }
        self.drain();
    }

    /// The recorded outcomes in job order, then the jobs that could not be prepared.
    fn outcomes(&self, unprepared: Vec<(usize, String)>) -> Vec<Outcome> {
        let mut out: Vec<Outcome> = self
            .jobs
            .iter()
            .zip(&self.slots)
            .filter_map(|((i, _, _), slot)| {
                slot.get().map(|(r, at)| {
                    let r = match r {
                        Ok(n) => Ok(*n),
                        Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
                    };
                    (*i, r, *at)
                })
            })
            .collect();
        out.extend(
            unprepared
                .into_iter()
                .map(|(i, e)| (i, Err(std::io::Error::other(e)), Instant::now())),
        );
        out
    }
}

/// Two long-lived threads, raised (see [`super::sched`]), that sleep until a burst hands them a
/// batch.
/// Each is kept on its own CPU, and the leader wakes the follower itself; both then release from
/// one queue. (Unpinned, a follower woken by a leader it could not preempt sometimes landed on the
/// leader's core and waited out its spin: a tenth of the bursts released from one thread.)
/// Spawning threads per burst instead cost ~250 µs of CPU per burst (stacks mapped and
/// unmapped, with TLB shoot-downs interrupting the other core).
struct Pool {
    leader: Sender<Arc<Batch>>,
    done: Receiver<u64>,
    next_id: u64,
}

/// The process's release threads: how they are scheduled (fixed once they started), and the
/// pool, which one burst at a time may use.
struct ReleaseThreads {
    scheduling: Scheduling,
    pool: Mutex<Pool>,
}

impl Pool {
    /// Starts both threads; an error says why they cannot be raised.
    fn start() -> Result<ReleaseThreads, NoReleaseThreads> {
        let (ready_tx, ready_rx) = channel::<Result<Scheduling, NotRaised>>();
        let (done_tx, done) = channel::<u64>();
        let (leader, leader_rx) = channel::<Arc<Batch>>();
        let (follower_tx, follower_rx) = channel::<Arc<Batch>>();
        let cpus = two_cpus();
        let threads = [
            ("burst-release-2", cpus.map(|[_, c]| c), follower_rx, None),
            (
                "burst-release-1",
                cpus.map(|[c, _]| c),
                leader_rx,
                Some(follower_tx),
            ),
        ];
        for (name, cpu, inbox, forward) in threads {
            let (ready, done) = (ready_tx.clone(), done_tx.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || serve(cpu, &inbox, forward.as_ref(), &ready, &done))
                .map_err(|e| NoReleaseThreads::Spawn(e.to_string()))?;
        }
        // Both threads must be raised; the weaker of their two ways is the pool's.
        let mut scheduling = Scheduling::RealTime;
        for _ in 0..PARALLEL_THREADS {
            let raised = ready_rx
                .recv_timeout(POOL_WAIT)
                .map_err(|_| NoReleaseThreads::DidNotStart)??;
            if raised == Scheduling::ShortSlice {
                scheduling = raised;
            }
        }
        let pool = Pool {
            leader,
            done,
            next_id: 0,
        };
        Ok(ReleaseThreads {
            scheduling,
            pool: Mutex::new(pool),
        })
    }

    /// Hands `batch` to the threads and waits for both (at most [`POOL_WAIT`]); whatever they
    /// left is written here. An `Err` gives the batch back unreleased: the threads are gone.
    fn run(&mut self, mut batch: Batch) -> Result<Arc<Batch>, Arc<Batch>> {
        self.next_id += 1;
        batch.id = self.next_id;
        let batch = Arc::new(batch);
        if self.leader.send(batch.clone()).is_err() {
            return Err(batch);
        }
        let end = Instant::now() + POOL_WAIT;
        let mut finished = 0;
        while finished < PARALLEL_THREADS {
            let left = end.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                Ok(done) if done == batch.id => finished += 1,
                // A late report of an earlier batch.
                Ok(_) => {}
                Err(_) => break,
            }
        }
        batch.drain();
        Ok(batch)
    }
}

/// A release thread's life: keep to `cpu`, get raised and say how, then release each batch that
/// arrives in `inbox` — handing it first to `forward` (the leader wakes the follower) — and
/// report it done. It ends when it cannot be raised or the pool is gone.
fn serve(
    cpu: Option<usize>,
    inbox: &Receiver<Arc<Batch>>,
    forward: Option<&Sender<Arc<Batch>>>,
    ready: &Sender<Result<Scheduling, NotRaised>>,
    done: &Sender<u64>,
) {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu);
    }
    let raised = raise_current_thread();
    let ok = raised.is_ok();
    let _ = ready.send(raised);
    while let (true, Ok(batch)) = (ok, inbox.recv()) {
        if let Some(follower) = forward {
            let _ = follower.send(batch.clone());
        }
        batch.release_from_pool_thread();
        let id = batch.id;
        drop(batch);
        let _ = done.send(id);
    }
}

/// Why the process has no release threads; the burst evidence shows it.
#[derive(Debug, thiserror::Error)]
pub enum NoReleaseThreads {
    /// The system would not start a thread (its words).
    #[error("no release thread: {0}")]
    Spawn(String),
    /// A thread started but did not say how it was raised in time.
    #[error("the release threads did not start")]
    DidNotStart,
    #[error(transparent)]
    NotRaised(#[from] NotRaised),
}

/// The release threads, started at the first parallel release; an error (kept for the whole
/// run) says why they cannot be raised (see [`super::sched`]).
fn release_threads() -> Result<&'static ReleaseThreads, &'static NoReleaseThreads> {
    static THREADS: OnceLock<Result<ReleaseThreads, NoReleaseThreads>> = OnceLock::new();
    THREADS.get_or_init(Pool::start).as_ref()
}

/// How the release threads of this process are scheduled, or why there are none.
pub fn release_threads_available() -> Result<Scheduling, &'static NoReleaseThreads> {
    release_threads().map(|t| t.scheduling)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn modes_read_as_a_sentence() {
        let rt = ReleaseMode::Threads {
            threads: 2,
            scheduling: Some(Scheduling::RealTime),
            why_not: None,
        };
        assert_eq!(rt.to_string(), "from 2 real-time threads");
        let slice = ReleaseMode::Threads {
            threads: 2,
            scheduling: Some(Scheduling::ShortSlice),
            why_not: None,
        };
        assert_eq!(slice.to_string(), "from 2 short-slice threads");
        let one = ReleaseMode::Threads {
            threads: 1,
            scheduling: None,
            why_not: Some("--no-release-threads".into()),
        };
        assert_eq!(one.to_string(), "from 1 thread (--no-release-threads)");
        assert_eq!(ReleaseMode::OnePacket.to_string(), "in one HTTP/2 packet");
        assert_eq!(
            ReleaseMode::OnePacket
                .through(Some("http://127.0.0.1:3128".into()))
                .to_string(),
            "in one HTTP/2 packet at idem-check, then through the proxy http://127.0.0.1:3128 (which may spread them)"
        );
    }

    /// Connected loopback pairs: (client side, server side).
    fn pairs(n: usize) -> Vec<(std::net::TcpStream, std::net::TcpStream)> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        (0..n)
            .map(|_| {
                let client = std::net::TcpStream::connect(addr).unwrap();
                let (server, _) = listener.accept().unwrap();
                server
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                (client, server)
            })
            .collect()
    }

    fn release(conns: &[(std::net::TcpStream, std::net::TcpStream)], rt: bool) -> ReleaseMode {
        let bytes: Vec<Vec<u8>> = (0..conns.len()).map(|i| vec![b'a' + i as u8; 3]).collect();
        let jobs: Vec<Job<'_>> = conns
            .iter()
            .zip(&bytes)
            .enumerate()
            .map(|(i, ((c, _), b))| (i, socket_of(c), &b[..]))
            .collect();
        let (outcomes, mode) = release_all(&jobs, rt.into());
        assert_eq!(outcomes.len(), conns.len());
        for (i, r, _) in &outcomes {
            assert_eq!(r.as_ref().unwrap(), &3, "job {i}");
        }
        for (i, (_, server)) in conns.iter().enumerate() {
            let mut got = [0u8; 3];
            (&*server).read_exact(&mut got).unwrap();
            assert_eq!(
                got,
                [b'a' + i as u8; 3],
                "each connection got its own bytes"
            );
        }
        mode
    }

    #[test]
    fn every_connection_gets_its_bytes_whichever_way_it_is_released() {
        let conns = pairs(6);
        let mode = release(&conns, true);
        match release_threads_available() {
            // Another test's release may hold the threads at this moment.
            Ok(s) => assert!(
                mode.to_string() == format!("from 2 {} threads", s.label())
                    || mode.to_string().contains("another burst was releasing"),
                "{mode}"
            ),
            Err(why) => assert_eq!(mode.to_string(), format!("from 1 thread ({why})")),
        }
        assert_eq!(
            release(&conns, false).to_string(),
            "from 1 thread (--no-release-threads)"
        );
    }

    #[test]
    fn a_burst_that_finds_the_threads_busy_releases_alone() {
        let Ok(threads) = release_threads() else {
            return; // no release threads here: every release is single anyway
        };
        let conns = pairs(4);
        let held = threads.pool.lock().unwrap_or_else(|e| e.into_inner());
        let mode = release(&conns, true);
        drop(held);
        assert_eq!(
            mode.to_string(),
            "from 1 thread (another burst was releasing)"
        );
    }
}
