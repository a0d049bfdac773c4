//! A futex wait that completes into a file descriptor: a small `io_uring` (Linux 6.7 and later)
//! whose only requests are `IORING_OP_FUTEX_WAIT` on one word, optionally linked to a timeout.
//! Its descriptor turns readable when a wait completes, so an event loop that polls the
//! descriptor (an async runtime's I/O driver) is woken by the peer's own `FUTEX_WAKE`, with no
//! thread in between.
//!
//! The kernel reads the word once, when the wait is submitted (a value other than the expected
//! one completes the wait at once), and afterwards keeps only its address as a key: nothing
//! here or in the kernel touches the word's memory after [`FutexRing::wait`] returns.
//!
//! # Why not a ring for one thread
//!
//! A ring only one thread enters could be made with `IORING_SETUP_DEFER_TASKRUN`, its
//! completions posted by that thread's next enter and an eventfd registered with the ring
//! polled in its place. On Linux 6.18 that eventfd was signalled some 15.6 ms after the peer's
//! `FUTEX_WAKE` (`strace -tt` of a ping-pong between two current-thread runtimes: every round
//! trip waited that long on each side, while an ordinary ring's descriptor turned readable at
//! once), so every ring here is an ordinary one, which any thread may enter.
//!
//! # Descriptors
//!
//! Each ring holds a descriptor for as long as its waiter lives. So that rings never take the descriptors the rest of the
//! process needs, the rings of a process hold at most a quarter of its soft `RLIMIT_NOFILE`
//! (and never more than [`MAX_RING_FDS`]): past that, [`FutexRing::new`] says `None` and the
//! waiter sleeps another way; [`held`] and [`over_limit`] say how many descriptors rings hold
//! and how often one was refused.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use io_uring::{opcode, squeue, types, IoUring};

/// `FUTEX2_SIZE_U32`: a 32-bit word, shared between processes (no `FUTEX2_PRIVATE`).
const FUTEX2_SIZE_U32: u32 = 0x02;
/// `FUTEX_BITSET_MATCH_ANY`: woken by any wake-up of the word (the peer's `FUTEX_WAKE`).
const MATCH_ANY: u64 = 0xffff_ffff;
/// Submission entries: a cancel of the previous wait, the wait, its timeout.
const ENTRIES: u32 = 4;

/// `user_data` of a completion: the low two bits say what completed, the rest which wait.
const KIND_WAIT: u64 = 0;
const KIND_TIMEOUT: u64 = 1;
const KIND_CANCEL: u64 = 2;
const KIND_BITS: u32 = 2;

/// Set once this process learnt that it cannot have such a ring (no `io_uring`, or one
/// without futex waits, or one a sandbox refuses): later calls do not ask again.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// The share of the soft `RLIMIT_NOFILE` the process's rings may hold: one part in this many.
const RING_SHARE: u64 = 4;
/// The most descriptors the process's rings hold, whatever the limit.
const MAX_RING_FDS: usize = 2048;
/// Descriptors held by the process's rings now (see the module docs).
static RING_FDS: AtomicUsize = AtomicUsize::new(0);
/// Rings alive now.
static RINGS: AtomicUsize = AtomicUsize::new(0);
/// Rings refused because the rings held their share of descriptors.
static OVER_LIMIT: AtomicU64 = AtomicU64::new(0);

/// How many descriptors the process's rings may hold: a quarter of the soft `RLIMIT_NOFILE`
/// (read again each time: the process may change it), at most [`MAX_RING_FDS`].
pub(crate) fn ring_descriptor_limit() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit; getrlimit only writes it.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    };
    usize::try_from(soft / RING_SHARE).map_or(MAX_RING_FDS, |share| share.min(MAX_RING_FDS))
}

/// Takes `fds` descriptors of the rings' share; `false` (nothing taken) if that would pass
/// [`ring_descriptor_limit`].
fn take_descriptors(fds: usize) -> bool {
    let limit = ring_descriptor_limit();
    // Relaxed: a count; nothing is published through it.
    RING_FDS
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
            (held + fds <= limit).then_some(held + fds)
        })
        .is_ok()
}

/// Gives back `fds` descriptors taken with [`take_descriptors`].
fn give_back_descriptors(fds: usize) {
    // Relaxed: a count (see `take_descriptors`).
    RING_FDS.fetch_sub(fds, Ordering::Relaxed);
}

/// Descriptors the process's rings hold now.
pub(crate) fn held() -> usize {
    // Relaxed: a count (see `take_descriptors`).
    RING_FDS.load(Ordering::Relaxed)
}

/// How many rings the process holds now.
pub(crate) fn rings() -> usize {
    // Relaxed: a count.
    RINGS.load(Ordering::Relaxed)
}

/// How many rings [`FutexRing::new`] refused because the rings held their share of the
/// process's descriptors.
pub(crate) fn over_limit() -> u64 {
    // Relaxed: a count.
    OVER_LIMIT.load(Ordering::Relaxed)
}

/// Whether this process learnt that it cannot have a ring at all (or a test hook says so).
pub(crate) fn unsupported() -> bool {
    #[cfg(feature = "test-hooks")]
    if crate::hooks::pretend_missing(crate::hooks::Missing::IoUring) {
        return true;
    }
    UNSUPPORTED.load(Ordering::Relaxed)
}

/// A ring for one waiter's futex waits, one wait at a time.
pub(crate) struct FutexRing {
    ring: IoUring,
    /// Numbers the waits; a completion's `user_data` carries the number of its wait.
    generation: u64,
    /// Whether the wait numbered `generation` was submitted and has not completed.
    in_flight: bool,
}

impl FutexRing {
    /// A new ring, or `None` when this kernel (or a sandbox around it) cannot give one that
    /// waits on futexes; the caller then waits another way.
    ///
    /// `None` too when the process's rings hold their share of its descriptors (see the
    /// module docs), counted in [`over_limit`].
    pub(crate) fn new() -> Option<FutexRing> {
        if unsupported() {
            return None;
        }
        if !take_descriptors(1) {
            // Relaxed: a count.
            OVER_LIMIT.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let ring = FutexRing::ordinary();
        if ring.is_none() {
            give_back_descriptors(1);
        }
        ring
    }

    /// A ring any thread may enter, its descriptor already counted.
    fn ordinary() -> Option<FutexRing> {
        let ring = match IoUring::new(ENTRIES) {
            Ok(ring) => ring,
            Err(e) => {
                // Out of descriptors or memory is this moment's problem; anything else
                // (ENOSYS, EPERM from a sandbox or `kernel.io_uring_disabled`) will not change.
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
                ) {
                    UNSUPPORTED.store(true, Ordering::Relaxed);
                }
                return None;
            }
        };
        if !waits_on_futexes(&ring) {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            return None;
        }
        Some(FutexRing::around(ring))
    }

    /// `ring`, no wait submitted yet.
    fn around(ring: IoUring) -> FutexRing {
        // Relaxed: a count.
        RINGS.fetch_add(1, Ordering::Relaxed);
        FutexRing {
            ring,
            generation: 0,
            in_flight: false,
        }
    }

    /// Submits a wait on `word` while it holds `expected`, ended after `timeout` if given; a
    /// wait still in flight is cancelled first. Its completion (woken, the word had changed, or
    /// the timeout) makes the descriptor readable and [`reap`](FutexRing::reap) return `true`.
    pub(crate) fn wait(
        &mut self,
        word: &AtomicU32,
        expected: u32,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        // Completions already posted.
        self.reap();
        let previous = self.generation;
        let cancel = self.in_flight;
        self.generation += 1;
        let id = self.generation << KIND_BITS;
        let wait = opcode::FutexWait::new(
            word.as_ptr().cast_const(),
            u64::from(expected),
            MATCH_ANY,
            FUTEX2_SIZE_U32,
        )
        .build()
        .user_data(id | KIND_WAIT);
        let ts = timeout.map(|t| {
            types::Timespec::new()
                .sec(t.as_secs())
                .nsec(t.subsec_nanos())
        });
        let mut entries = [None, None, None];
        if cancel {
            entries[0] = Some(
                opcode::AsyncCancel::new((previous << KIND_BITS) | KIND_WAIT)
                    .build()
                    .user_data(id | KIND_CANCEL),
            );
        }
        match &ts {
            Some(ts) => {
                entries[1] = Some(wait.flags(squeue::Flags::IO_LINK));
                entries[2] = Some(
                    opcode::LinkTimeout::new(ts)
                        .build()
                        .user_data(id | KIND_TIMEOUT),
                );
            }
            None => entries[1] = Some(wait),
        }
        {
            let mut sq = self.ring.submission();
            for entry in entries.iter().flatten() {
                // SAFETY: the entries reference two things: the futex word, which the kernel
                // reads (and, if it differs from `expected`, completes at once) while it
                // prepares the wait during `submit` below, and afterwards uses only as a key,
                // never as memory; and `ts`, which it copies while it prepares the timeout, also
                // during `submit`. Both outlive that call. The queue has room: at most three
                // entries, every earlier one submitted.
                unsafe { sq.push(entry) }
                    .map_err(|_| io::Error::other("futex ring submission queue full"))?;
            }
        }
        // `ts` lives until here.
        self.ring.submit()?;
        self.in_flight = true;
        Ok(())
    }

    /// Takes every completion posted in the ring, without entering the kernel; `true` when the
    /// latest wait completed (it was woken, found the word changed, or timed out), so its
    /// waiter should look again.
    pub(crate) fn reap(&mut self) -> bool {
        let mut latest = false;
        for cqe in self.ring.completion() {
            let data = cqe.user_data();
            if data & ((1 << KIND_BITS) - 1) != KIND_WAIT {
                continue;
            }
            if data >> KIND_BITS == self.generation {
                self.in_flight = false;
                latest = true;
            }
        }
        latest
    }
}

impl Drop for FutexRing {
    fn drop(&mut self) {
        // Relaxed: a count.
        RINGS.fetch_sub(1, Ordering::Relaxed);
        give_back_descriptors(1);
    }
}

/// Whether the kernel offers futex waits and linked timeouts on an `io_uring`, asked on a ring
/// made for the question alone, with none of [`FutexRing::new`]'s code: where this says yes,
/// the tests require that `FutexRing::new` makes rings.
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn kernel_has_futex_ring_ops() -> bool {
    let Ok(ring) = IoUring::new(2) else {
        return false;
    };
    let mut probe = io_uring::Probe::new();
    if ring.submitter().register_probe(&mut probe).is_err() {
        return false;
    }
    [opcode::FutexWait::CODE, opcode::LinkTimeout::CODE]
        .into_iter()
        .all(|code| probe.is_supported(code))
}

/// Whether `ring`'s kernel has the futex wait and the linked timeout.
fn waits_on_futexes(ring: &IoUring) -> bool {
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe).is_ok()
        && probe.is_supported(opcode::FutexWait::CODE)
        && probe.is_supported(opcode::LinkTimeout::CODE)
}

/// The descriptor to poll: readable when a wait completed.
impl AsRawFd for FutexRing {
    fn as_raw_fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether the tests accept that this machine refuses `io_uring` on purpose: the variable
    /// `SHMLINK_TEST_NO_IO_URING` (see `crate::testing::NO_IO_URING_ENV`), which CI does not set.
    fn refused_on_purpose() -> bool {
        std::env::var_os("SHMLINK_TEST_NO_IO_URING").is_some_and(|v| !v.is_empty() && v != "0")
    }

    /// Says why there is nothing to test, or fails: where the kernel has `io_uring` futex
    /// waits (asked apart from `FutexRing::new`), a ring must be had, unless
    /// `SHMLINK_TEST_NO_IO_URING` says it is refused on purpose.
    pub(crate) fn no_ring_here(what: &str) {
        let required = kernel_has_futex_ring_ops() && !refused_on_purpose();
        assert!(
            !required,
            "this kernel has io_uring futex waits (IORING_REGISTER_PROBE says so), yet no {what} \
             was made; set SHMLINK_TEST_NO_IO_URING=1 if this machine refuses io_uring on purpose"
        );
        eprintln!(
            "no {what} here (SHMLINK_TEST_NO_IO_URING or no io_uring futex waits); nothing to test"
        );
    }

    /// A ring, or `None` after [`no_ring_here`] let the test off.
    fn ring() -> Option<FutexRing> {
        let ring = FutexRing::new();
        if ring.is_none() {
            no_ring_here("futex ring");
        }
        ring
    }

    #[test]
    fn a_wait_completes_when_the_word_is_woken_or_had_changed_or_times_out() {
        let Some(mut ring) = ring() else {
            return;
        };
        let word = AtomicU32::new(7);
        // The word no longer holds the expected value: complete at once.
        ring.wait(&word, 6, None).unwrap();
        assert!(ring.reap());
        // Holds it: pending until woken.
        ring.wait(&word, 7, None).unwrap();
        assert!(!ring.reap());
        word.store(8, Ordering::Release);
        crate::sys::futex_wake(&word);
        assert!(ring.reap(), "a wake-up completes the wait");
        // A timeout ends a wait nobody wakes.
        ring.wait(&word, 8, Some(Duration::from_millis(5))).unwrap();
        let start = std::time::Instant::now();
        while !ring.reap() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the timeout never came"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // A wait left in flight is cancelled by the next one, whose completion alone counts.
        ring.wait(&word, 8, None).unwrap();
        ring.wait(&word, 8, None).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            !ring.reap(),
            "the cancelled wait's completion is not the latest wait's"
        );
        crate::sys::futex_wake(&word);
        assert!(ring.reap());
        assert!(!ring.in_flight);
    }

    /// Whether `fd` is readable within `within`.
    fn readable(fd: RawFd, within: Duration) -> bool {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(within.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid `pollfd`, for the length of the call.
        unsafe { libc::poll(&mut poll, 1, ms) == 1 }
    }

    #[test]
    fn the_descriptor_turns_readable_for_a_peers_wake_up_and_a_timeout_and_only_then() {
        let Some(mut ring) = ring() else {
            return;
        };
        let fd = ring.as_raw_fd();
        let word = std::sync::Arc::new(AtomicU32::new(7));
        let quiet = Duration::from_millis(20);
        for round in 0..3 {
            ring.wait(&word, word.load(Ordering::Acquire), None)
                .unwrap();
            assert!(!ring.reap());
            assert!(!readable(fd, quiet), "round {round}: readable for nothing");
            let peer = std::sync::Arc::clone(&word);
            std::thread::spawn(move || {
                peer.fetch_add(1, Ordering::Release);
                crate::sys::futex_wake(&peer);
            })
            .join()
            .unwrap();
            assert!(
                readable(fd, Duration::from_secs(10)),
                "round {round}: a peer's wake-up left the descriptor unreadable"
            );
            assert!(ring.reap());
            assert!(
                !readable(fd, quiet),
                "round {round}: still readable once reaped"
            );
        }
        ring.wait(
            &word,
            word.load(Ordering::Acquire),
            Some(Duration::from_millis(5)),
        )
        .unwrap();
        assert!(
            readable(fd, Duration::from_secs(10)),
            "the timeout never came"
        );
        assert!(ring.reap());
        assert!(!ring.in_flight);
    }
}
