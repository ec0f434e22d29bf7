//! How the burst release threads ask the kernel not to be interrupted while they release.
//!
//! Two ways, best first:
//!
//! - **Real-time priority** (`SCHED_FIFO` 1, the lowest real-time priority): no ordinary thread
//!   can preempt it. Needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO` of at least 1.
//! - **A short time slice** (an ordinary thread whose `sched_setattr(2)` runtime is 100 µs, the
//!   smallest the kernel accepts): since Linux 6.12 the scheduler (EEVDF) lets a thread with a
//!   shorter slice preempt longer-sliced ones when it wakes, and protects a running thread from
//!   being preempted by longer-sliced wakers until its slice is used up. A release (~40 µs) fits
//!   in one slice. No privilege needed: the slice does not change the thread's share of the CPU.
//!
//! The slice is set with `sched_setattr(2)`, which no maintained crate wraps for ordinary
//! threads; that one system call is this module's (and the crate's) only unsafe code.
//!
//! Both ways are Linux's: on other systems no thread is raised, the release runs on the calling
//! thread, and the burst evidence says why (the rest of the engine is portable).

#![cfg_attr(target_os = "linux", allow(unsafe_code))]

#[cfg(target_os = "linux")]
use thread_priority::unix::{
    set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy,
    ThreadSchedulePolicy,
};

#[cfg(target_os = "linux")]
/// The slice asked for, in nanoseconds: the kernel's minimum (0.1 ms).
const SHORT_SLICE_NS: u64 = 100_000;

/// How a release thread is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduling {
    /// `SCHED_FIFO` 1.
    RealTime,
    /// An ordinary thread with a 100 µs slice.
    ShortSlice,
}

impl Scheduling {
    /// As the burst evidence names it: "real-time" or "short-slice".
    pub fn label(self) -> &'static str {
        match self {
            Scheduling::RealTime => "real-time",
            Scheduling::ShortSlice => "short-slice",
        }
    }
}

/// Why a release thread was not raised; the burst evidence shows it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRaised {
    /// Outside Linux neither way exists.
    #[error("real-time priority and short time slices are only set on Linux")]
    NotLinux,
    /// Both ways were refused, each for its reason.
    #[error("{realtime}; {slice}")]
    Refused {
        realtime: RealtimeRefused,
        slice: SliceRefused,
    },
}

/// Why real-time priority was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RealtimeRefused {
    #[error("real-time priority not permitted (needs CAP_SYS_NICE or ulimit -r 1)")]
    NotPermitted,
    /// Any other refusal, as the system said it.
    #[error("real-time priority refused: {0}")]
    Other(String),
}

/// Why a short time slice was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SliceRefused {
    /// The thread's scheduling could not be read (the system's words).
    #[error("cannot read the thread's scheduling: {0}")]
    Unreadable(String),
    #[error("short time slice not applicable to this thread's policy")]
    NotApplicable,
    /// `sched_setattr(2)` refused it (the system's words).
    #[error("short time slice refused: {0}")]
    Refused(String),
    /// Accepted and ignored: kernels before 6.12.
    #[error("no custom time slices in this kernel (Linux 6.12 or later)")]
    Unsupported,
}

/// Raises the calling thread to real-time priority, or else gives it a short slice; the error
/// says why neither was possible.
#[cfg(target_os = "linux")]
pub fn raise_current_thread() -> Result<Scheduling, NotRaised> {
    let realtime = match set_realtime() {
        Ok(()) => return Ok(Scheduling::RealTime),
        Err(e) => e,
    };
    set_short_slice()
        .map(|()| Scheduling::ShortSlice)
        .map_err(|slice| NotRaised::Refused { realtime, slice })
}

/// Outside Linux neither way exists: the error says so, and the release stays on the calling
/// thread.
#[cfg(not(target_os = "linux"))]
pub fn raise_current_thread() -> Result<Scheduling, NotRaised> {
    Err(NotRaised::NotLinux)
}

/// Two CPUs this process may run on, for the two release threads, so a woken follower never
/// lands behind its leader on one core; `None` with fewer than two.
#[cfg(target_os = "linux")]
pub fn two_cpus() -> Option<[usize; 2]> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let allowed = sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let mut cpus = (0..CpuSet::count()).filter(|&c| allowed.is_set(c).unwrap_or(false));
    Some([cpus.next()?, cpus.next()?])
}

/// Outside Linux the threads are never raised, so no CPUs are chosen for them.
#[cfg(not(target_os = "linux"))]
pub fn two_cpus() -> Option<[usize; 2]> {
    None
}

/// Keeps the calling thread on `cpu` (best effort: a refusal leaves it where the kernel puts it).
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

/// Outside Linux a thread stays where the system puts it.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpu: usize) {}

/// `SCHED_FIFO` at its lowest priority, which outranks every ordinary thread and no real-time
/// one.
#[cfg(target_os = "linux")]
fn set_realtime() -> Result<(), RealtimeRefused> {
    set_thread_priority_and_policy(
        thread_native_id(),
        thread_priority::ThreadPriority::Min,
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| match e {
        thread_priority::Error::OS(1) => RealtimeRefused::NotPermitted,
        other => RealtimeRefused::Other(other.to_string()),
    })
}

#[cfg(target_os = "linux")]
/// `struct sched_attr` of `<linux/sched/types.h>` (its first version, 56 bytes, which every
/// kernel since 3.14 accepts).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

#[cfg(target_os = "linux")]
/// Keeps the thread's policy and nice value and sets its slice to [`SHORT_SLICE_NS`]; checks
/// that the kernel kept it (kernels before 6.12 accept and ignore it).
fn set_short_slice() -> Result<(), SliceRefused> {
    let mut attr = get_attr().map_err(|e| SliceRefused::Unreadable(e.to_string()))?;
    if attr.sched_policy != libc::SCHED_OTHER as u32
        && attr.sched_policy != libc::SCHED_BATCH as u32
    {
        return Err(SliceRefused::NotApplicable);
    }
    attr.sched_runtime = SHORT_SLICE_NS;
    attr.sched_flags = 0;
    set_attr(&mut attr).map_err(|e| SliceRefused::Refused(e.to_string()))?;
    let kept = get_attr().map(|a| a.sched_runtime).unwrap_or(0);
    if kept != SHORT_SLICE_NS {
        return Err(SliceRefused::Unsupported);
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn get_attr() -> std::io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: `attr` is a live, writable `sched_attr` of `size` bytes for the whole call; pid 0
    // is the calling thread and flags must be 0. The kernel writes at most `size` bytes.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            size,
            0,
        )
    };
    if rc == 0 {
        Ok(attr)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(target_os = "linux")]
fn set_attr(attr: &mut SchedAttr) -> std::io::Result<()> {
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: `attr` is a live, initialised `sched_attr` whose `size` field is its own size;
    // pid 0 is the calling thread and flags must be 0. The kernel only reads it.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &*attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn sched_attr_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
    }

    /// On a thread of its own (the setting dies with it): either way of raising works or says
    /// why, and the short slice, when granted, is what the kernel reports back.
    #[test]
    fn a_thread_is_raised_or_told_why() {
        let result = std::thread::spawn(|| {
            let slice = set_short_slice();
            let reported = get_attr().map(|a| a.sched_runtime).unwrap_or(0);
            (slice, reported)
        })
        .join()
        .unwrap();
        match result {
            (Ok(()), reported) => assert_eq!(reported, SHORT_SLICE_NS),
            (Err(why), _) => assert!(why.to_string().contains("slice"), "{why}"),
        }
        let raised = std::thread::spawn(raise_current_thread).join().unwrap();
        match raised {
            Ok(s) => assert!(["real-time", "short-slice"].contains(&s.label())),
            Err(why) => assert!(
                matches!(why, NotRaised::Refused { .. } | NotRaised::NotLinux),
                "{why}"
            ),
        }
    }
}
