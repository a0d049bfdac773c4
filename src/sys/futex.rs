//! Futexes: sleeping on a 32-bit word of shared memory until another thread (in any process
//! that maps the word) changes it and wakes it.
//!
//! * [`futex_wait`] / [`futex_wake`]: one word, `FUTEX_WAIT` / `FUTEX_WAKE` (shared, not
//!   private: the words live in mappings other processes use). The ring and wait code reach
//!   them through `crate::sync`, which swaps in a stand-in under loom; the services (listener,
//!   selector, async reactor), whose words are standard atomics, call them directly.
//! * [`wait_any`]: many words in one call, `futex_waitv` (Linux 5.16 and later, at most
//!   [`WAITV_MAX`] words), each described by a [`FutexWaitv`]. Where the kernel lacks it the
//!   call reports it and the caller polls in short slices instead.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, for at most `timeout` (`None`: until woken). May return
/// early for no reason (a signal, a wake-up meant for an earlier value); callers re-check
/// their condition.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 4-byte atomic for the duration of the call; `ts_ptr` is
    // null or points to `ts`, alive until the call returns. FUTEX_WAIT without
    // FUTEX_PRIVATE_FLAG keys the wait on the physical page, so it works across processes that
    // map the same object. The kernel only reads `word` and the timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
        );
    }
}

/// Wakes every thread sleeping on `word`, in any process that maps it.
pub(crate) fn futex_wake(word: &AtomicU32) {
    #[cfg(feature = "test-hooks")]
    crate::hooks::count_wake();
    // SAFETY: as in `futex_wait`; FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// Most words one [`wait_any`] call waits on (the kernel's `FUTEX_WAITV_MAX`).
pub(crate) const WAITV_MAX: usize = 128;

/// One word to wait on, and the value it must still hold for the wait to sleep.
///
/// Only the address is kept: the kernel reads the word, never this process. A word whose memory
/// was unmapped since makes the call fail (`EFAULT`) or compare against whatever is mapped there
/// now, which at worst is a spurious wake-up, never a memory access by Rust code.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `FUTEX2_SIZE_U32`: the word is 32 bits wide (shared between processes: no private flag).
const FUTEX2_SIZE_U32: u32 = 0x02;

impl FutexWaitv {
    /// Waits on `word` while it holds `expected`.
    pub(crate) fn new(word: &AtomicU32, expected: u32) -> FutexWaitv {
        FutexWaitv::at(word.as_ptr() as usize, expected)
    }

    /// The value the word must still hold for the wait to sleep.
    pub(crate) fn expected(&self) -> u32 {
        self.val as u32
    }

    /// The address of the word (under loom, of the model's atomic: see `crate::sync`).
    #[cfg(loom)]
    pub(crate) fn addr(&self) -> usize {
        self.uaddr as usize
    }

    /// Waits while the word holds `expected` instead.
    pub(crate) fn set_expected(&mut self, expected: u32) {
        self.val = u64::from(expected);
    }

    /// Waits on the 4-byte word at address `addr` while it holds `expected` (for a word that is
    /// not a standard atomic: see `crate::sync::futex_waitv`).
    pub(crate) fn at(addr: usize, expected: u32) -> FutexWaitv {
        FutexWaitv {
            val: u64::from(expected),
            uaddr: addr as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        }
    }
}

/// What [`wait_any`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitAny {
    /// Woken on the word at this index of the list (the kernel names the word it woke).
    Woken(usize),
    /// A value differed already, the timeout passed or a signal came: look again.
    Returned,
    /// The kernel has no `futex_waitv`: nothing was waited for.
    Unsupported,
}

/// Sleeps until one of `waiters` is woken or no longer holds its value, or `timeout` passes
/// (`None`: no timeout). At most [`WAITV_MAX`] waiters; an empty list sleeps for the timeout.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn wait_any(waiters: &[FutexWaitv], timeout: Option<Duration>) -> WaitAny {
    use std::sync::atomic::{AtomicBool, Ordering};
    static MISSING: AtomicBool = AtomicBool::new(false);
    // Relaxed: a cache of a fact about the kernel; a stale read only costs one failing call.
    if MISSING.load(Ordering::Relaxed) {
        return WaitAny::Unsupported;
    }
    #[cfg(feature = "test-hooks")]
    if crate::hooks::pretend_missing(crate::hooks::Missing::FutexWaitv) {
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
    // the words they name (see `FutexWaitv`).
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
    match usize::try_from(r) {
        Ok(i) if i < n => WaitAny::Woken(i),
        _ => WaitAny::Returned,
    }
}
