//! How an endpoint waits when the ring is empty (or full).
//!
//! * [`WaitStrategy::Spin`] busy-polls with `spin_loop` hints: the lowest latency, one core at
//!   100% while waiting. After 20 us without data it also yields the core between batches of
//!   polls, so two spinning processes on an oversubscribed machine do not wait out each other's
//!   time slices.
//! * [`WaitStrategy::SpinYield`] backs off with [`crossbeam_utils::Backoff`] and then yields the
//!   core to other threads between polls.
//! * [`WaitStrategy::Block`] spins for a short while, then sleeps in the kernel on a futex word
//!   inside the mapping (Linux) until the peer wakes it.
//!
//! Every wait checks, every few milliseconds, whether the peer closed or died, and honours an
//! optional deadline, so no wait can hang on a peer that is gone.
//!
//! # The sleep/wake handshake
//!
//! ```text
//! sleeper                                   waker
//! s = futex.load()                          publish data (Release store)
//! sleepers += 1                             fence(SeqCst)            <- F2
//! fence(SeqCst)                 <- F1       if sleepers != 0 {
//! if data is there: sleepers -= 1, return       futex += 1
//! futex_wait(futex, s, timeout)                 futex_wake(futex)
//! sleepers -= 1                             }
//! ```
//!
//! F1 and F2 are SeqCst fences, so the two "store then load" sequences cannot both read the old
//! value: either the sleeper sees the data, or the waker sees `sleepers != 0`. In the second case
//! the waker changes the futex word after the sleeper read `s`, so `futex_wait` returns at once
//! or is woken: a wake-up cannot be lost. The waker pays for F2 only when the peer announced
//! that it may sleep (its wait mode is not `Spin`).

use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::error::{Error, Result};
use crate::layout::WaitCell;
use crate::ring::full_fence;

/// How an endpoint waits for data or for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WaitStrategy {
    /// Busy-poll with `spin_loop` hints. Lowest latency; burns a core while waiting.
    Spin,
    /// Exponential backoff, then `yield` between polls.
    SpinYield,
    /// Spin briefly, then sleep in the kernel until woken. Costs a wake-up syscall on the
    /// sending side when the receiver is asleep.
    #[default]
    Block,
}

impl WaitStrategy {
    /// The name used on command lines: `spin`, `yield` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitStrategy::Spin => "spin",
            WaitStrategy::SpinYield => "yield",
            WaitStrategy::Block => "block",
        }
    }

    /// Every strategy, in order of increasing politeness.
    pub const ALL: [WaitStrategy; 3] = [
        WaitStrategy::Spin,
        WaitStrategy::SpinYield,
        WaitStrategy::Block,
    ];
}

impl std::fmt::Display for WaitStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the names [`as_str`](WaitStrategy::as_str) prints and the variant names, in any case:
///
/// ```
/// use shmlink::WaitStrategy;
/// assert_eq!("block".parse::<WaitStrategy>()?, WaitStrategy::Block);
/// assert_eq!("Block".parse::<WaitStrategy>()?, WaitStrategy::Block);
/// assert_eq!("SpinYield".parse::<WaitStrategy>()?, WaitStrategy::SpinYield);
/// assert_eq!("spin-yield".parse::<WaitStrategy>()?, WaitStrategy::SpinYield);
/// assert!("nap".parse::<WaitStrategy>().is_err());
/// # Ok::<(), shmlink::Error>(())
/// ```
impl FromStr for WaitStrategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "spin" => Ok(WaitStrategy::Spin),
            "yield" | "spin-yield" | "spinyield" | "spin_yield" => Ok(WaitStrategy::SpinYield),
            "block" => Ok(WaitStrategy::Block),
            _ => Err(Error::InvalidConfig(format!(
                "unknown wait strategy {s:?} (expected spin, yield or block)"
            ))),
        }
    }
}

/// How often a waiting side checks whether its peer closed or died.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(5);
/// Polls between two looks at the clock while spinning.
const SPINS_PER_CLOCK_READ: u32 = 128;
/// How long `Block` spins before it sleeps.
const BLOCK_SPIN: Duration = Duration::from_micros(50);
/// After spinning this long without data, `Spin` yields the core once per batch of polls, so a
/// peer that shares the core (an oversubscribed machine) gets to run instead of waiting for the
/// end of our time slice. A message that arrives sooner never pays for it.
const SPIN_POLITE_AFTER: Duration = Duration::from_micros(20);

/// Waits until `ready()` returns true.
///
/// `check()` is called every [`CHECK_INTERVAL`]; when it fails, `ready()` is tried once more
/// (so data sent just before a close is still delivered) and the error is returned.
/// `cell` is where `Block` sleeps. Returns [`Error::Timeout`] past `deadline`.
#[inline]
pub(crate) fn wait_until(
    strategy: WaitStrategy,
    cell: &WaitCell,
    deadline: Option<Instant>,
    mut ready: impl FnMut() -> bool,
    check: impl FnMut() -> Result<()>,
) -> Result<()> {
    if ready() {
        return Ok(());
    }
    wait_slow(strategy, cell, deadline, ready, check)
}

/// The waiting loop, monomorphised per caller so the poll is an inline load, not a call.
fn wait_slow(
    strategy: WaitStrategy,
    cell: &WaitCell,
    deadline: Option<Instant>,
    mut ready: impl FnMut() -> bool,
    mut check: impl FnMut() -> Result<()>,
) -> Result<()> {
    let started = Instant::now();
    let mut next_check = started + CHECK_INTERVAL;
    let backoff = Backoff::new();
    loop {
        // Spin (or back off) for a batch of polls between looks at the clock.
        let mut slept = false;
        for _ in 0..SPINS_PER_CLOCK_READ {
            if ready() {
                return Ok(());
            }
            match strategy {
                WaitStrategy::Spin => std::hint::spin_loop(),
                WaitStrategy::SpinYield => {
                    if backoff.is_completed() {
                        std::thread::yield_now();
                    } else {
                        backoff.snooze();
                    }
                }
                WaitStrategy::Block => std::hint::spin_loop(),
            }
        }
        let now = Instant::now();
        if strategy == WaitStrategy::Spin && now.duration_since(started) >= SPIN_POLITE_AFTER {
            std::thread::yield_now();
        }
        if strategy == WaitStrategy::Block && now.duration_since(started) >= BLOCK_SPIN {
            let mut until = next_check;
            if let Some(d) = deadline {
                until = until.min(d);
            }
            if until > now {
                sleep(cell, until - now, &mut ready);
                slept = true;
            }
        }
        let now = if slept { Instant::now() } else { now };
        if now >= next_check {
            if let Err(e) = check() {
                return if ready() { Ok(()) } else { Err(e) };
            }
            next_check = now + CHECK_INTERVAL;
        }
        if let Some(d) = deadline {
            if now >= d {
                return if ready() { Ok(()) } else { Err(Error::Timeout) };
            }
        }
    }
}

/// Sleeps on `cell` for at most `timeout`, unless `ready()` turns true after announcing.
fn sleep(cell: &WaitCell, timeout: Duration, ready: &mut dyn FnMut() -> bool) {
    // Acquire: pairs with the Release increment in `wake_if_sleeping`.
    let seen = cell.futex.load(Ordering::Acquire);
    // Relaxed RMW, ordered by the SeqCst fence F1 right after it.
    cell.sleepers.fetch_add(1, Ordering::Relaxed);
    // F1: see the module docs; pairs with F2 in `wake_if_sleeping`.
    full_fence();
    if !ready() {
        futex_wait(&cell.futex, seen, timeout);
    }
    cell.sleepers.fetch_sub(1, Ordering::Relaxed);
}

/// Wakes whoever sleeps on `cell`, if anyone announced it. Called after publishing.
#[inline]
pub(crate) fn wake_if_sleeping(cell: &WaitCell) {
    // F2: see the module docs; pairs with F1 in `sleep`.
    full_fence();
    // Relaxed: ordered by F2.
    if cell.sleepers.load(Ordering::Relaxed) != 0 {
        wake(cell);
    }
}

/// Wakes every sleeper on `cell` unconditionally (used on close).
pub(crate) fn wake(cell: &WaitCell) {
    // Release: pairs with the Acquire load of the futex word in `sleep`.
    cell.futex.fetch_add(1, Ordering::Release);
    futex_wake(&cell.futex);
}

#[cfg(target_os = "linux")]
fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned 4-byte atomic for the duration of the call. FUTEX_WAIT
    // without FUTEX_PRIVATE_FLAG keys the wait on the physical page, so it works across
    // processes that map the same object. The kernel only reads `word` and `ts`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

#[cfg(target_os = "linux")]
fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: as in `futex_wait`; FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

// Elsewhere, `Block` sleeps in short slices; the waker has nothing to do.
#[cfg(not(target_os = "linux"))]
fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: Duration) {
    let until = Instant::now() + timeout;
    while word.load(Ordering::Acquire) == expected && Instant::now() < until {
        std::thread::sleep(Duration::from_micros(50));
    }
}

#[cfg(not(target_os = "linux"))]
fn futex_wake(_word: &std::sync::atomic::AtomicU32) {}
