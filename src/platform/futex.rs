//! The futex calls the services (listener, selector, async reactor) sleep and wake with.
//!
//! * [`wait`] / [`wake`]: one word, `FUTEX_WAIT` / `FUTEX_WAKE` (shared, not private: the words
//!   live in mappings other processes use).
//! * [`wait_any`]: many words in one call, `futex_waitv` (Linux 5.16 and later, at most
//!   [`WAITV_MAX`] words). Where it is missing (an older kernel, another platform) the call
//!   reports it and the caller polls in short slices instead.
//!
//! [`wait`] and [`wake`] are the platform's single-word calls (elsewhere than Linux, [`wait`]
//! polls the word in short slices and [`wake`] does nothing).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Most words one [`wait_any`] call waits on (the kernel's `FUTEX_WAITV_MAX`).
pub(crate) const WAITV_MAX: usize = 128;

/// One word to wait on, and the value it must still hold for the wait to sleep.
///
/// Only the address is kept: the kernel reads the word, never this process. A word whose memory
/// was unmapped since makes the call fail (`EFAULT`) or compare against whatever is mapped there
/// now, which at worst is a spurious wake-up, never a memory access by Rust code.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waiter {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `FUTEX2_SIZE_U32`: the word is 32 bits wide (shared between processes: no private flag).
const FUTEX2_SIZE_U32: u32 = 0x02;

impl Waiter {
    /// Waits on a wait cell's word (`crate::sync`'s atomic: loom's in loom builds, where this is
    /// never called, so the address of the object stands in for the address of its value, which
    /// for the standard atomic is the same).
    pub(crate) fn cell(word: &crate::sync::AtomicU32, expected: u32) -> Waiter {
        Waiter {
            val: u64::from(expected),
            uaddr: word as *const crate::sync::AtomicU32 as usize as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        }
    }

    /// Waits on `word` while it holds `expected`.
    pub(crate) fn new(word: &AtomicU32, expected: u32) -> Waiter {
        Waiter {
            val: u64::from(expected),
            uaddr: word.as_ptr() as usize as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        }
    }
}

/// What [`wait_any`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitAny {
    /// Woken, a value differed already, the timeout passed or a signal came: look again.
    Returned,
    /// The platform or kernel has no `futex_waitv`: nothing was waited for.
    Unsupported,
}

/// Sleeps until one of `waiters` is woken or no longer holds its value, or `timeout` passes
/// (`None`: no timeout). At most [`WAITV_MAX`] waiters; an empty list sleeps for the timeout.
#[cfg(target_os = "linux")]
pub(crate) fn wait_any(waiters: &[Waiter], timeout: Option<Duration>) -> WaitAny {
    use std::sync::atomic::{AtomicBool, Ordering};
    static MISSING: AtomicBool = AtomicBool::new(false);
    // Relaxed: a cache of a fact about the kernel; a stale read only costs one failing call.
    if MISSING.load(Ordering::Relaxed) {
        return WaitAny::Unsupported;
    }
    if waiters.is_empty() {
        std::thread::sleep(timeout.unwrap_or(Duration::from_secs(3600)));
        return WaitAny::Returned;
    }
    debug_assert!(waiters.len() <= WAITV_MAX);
    let n = waiters.len().min(WAITV_MAX);
    // futex_waitv takes an absolute CLOCK_MONOTONIC deadline.
    let deadline = timeout.map(|t| {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec; clock_gettime only writes it.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let nanos = now.tv_nsec as u64 + u64::from(t.subsec_nanos());
        let secs = (now.tv_sec as u64)
            .saturating_add(t.as_secs())
            .saturating_add(nanos / 1_000_000_000)
            .min(i64::MAX as u64 / 2);
        libc::timespec {
            tv_sec: secs as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
        }
    });
    let ts = deadline
        .as_ref()
        .map_or(std::ptr::null(), |d| d as *const libc::timespec);
    // SAFETY: `waiters` points to `n` initialised `struct futex_waitv` records (same
    // `#[repr(C)]` layout: u64 val, u64 uaddr, u32 flags, u32 reserved = 0) that live for the
    // call; `ts` is null or points to a timespec on our stack. The kernel only reads them and
    // the words they name (see `Waiter`).
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            waiters.as_ptr(),
            n as libc::c_uint,
            0 as libc::c_uint,
            ts,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        MISSING.store(true, Ordering::Relaxed);
        return WaitAny::Unsupported;
    }
    WaitAny::Returned
}

/// Elsewhere there is no multi-word wait: callers poll.
#[cfg(not(target_os = "linux"))]
pub(crate) fn wait_any(_waiters: &[Waiter], _timeout: Option<Duration>) -> WaitAny {
    WaitAny::Unsupported
}

/// Sleeps while `word` holds `expected`, for at most `timeout`.
#[cfg(not(loom))]
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    super::futex_wait(word, expected, Some(timeout));
}

/// Sleeps while `word` holds `expected`, for at most `timeout` (`None`: until woken).
#[cfg(not(loom))]
pub(crate) fn wait_for(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    super::futex_wait(word, expected, timeout);
}

/// Wakes every thread sleeping on `word` (in any process).
#[cfg(not(loom))]
pub(crate) fn wake(word: &AtomicU32) {
    super::futex_wake(word);
}

/// Under loom the platform's calls take loom's atomics, and the services (which keep the
/// standard ones) are not model-checked: poll the word in short slices.
#[cfg(loom)]
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    wait_for(word, expected, Some(timeout));
}

/// Under loom: as `wait`, polling (`None`: until the word changes).
#[cfg(loom)]
pub(crate) fn wait_for(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    use std::sync::atomic::Ordering;
    let until = timeout.map(|t| std::time::Instant::now() + t);
    // Acquire: pairs with the Release increment the waker makes before `wake`.
    while word.load(Ordering::Acquire) == expected
        && until.is_none_or(|u| std::time::Instant::now() < u)
    {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Under loom: nothing to do, sleepers poll.
#[cfg(loom)]
pub(crate) fn wake(_word: &AtomicU32) {}
