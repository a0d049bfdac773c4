//! A futex wait that completes into a file descriptor: a small `io_uring` (Linux 6.7 and later)
//! whose only requests are `IORING_OP_FUTEX_WAIT` on one word, optionally linked to a timeout.
//! Its descriptor turns readable when a wait completes, so an event loop that polls the
//! descriptor (an async runtime's I/O driver) is woken by the peer's own `FUTEX_WAKE`, with no
//! thread in between.
//!
//! The kernel reads the word once, when the wait is submitted (a value other than the expected
//! one completes the wait at once), and afterwards keeps only its address as a key: nothing
//! here or in the kernel touches the word's memory after [`FutexRing::wait`] returns.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
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
    pub(crate) fn new() -> Option<FutexRing> {
        if UNSUPPORTED.load(Ordering::Relaxed) {
            return None;
        }
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
        let mut probe = io_uring::Probe::new();
        if ring.submitter().register_probe(&mut probe).is_err()
            || !probe.is_supported(opcode::FutexWait::CODE)
            || !probe.is_supported(opcode::LinkTimeout::CODE)
        {
            UNSUPPORTED.store(true, Ordering::Relaxed);
            return None;
        }
        Some(FutexRing {
            ring,
            generation: 0,
            in_flight: false,
        })
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

    /// Takes every completion; `true` when the latest wait completed (it was woken, found the
    /// word changed, or timed out), so its waiter should look again.
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

impl AsRawFd for FutexRing {
    fn as_raw_fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_completes_when_the_word_is_woken_or_had_changed_or_times_out() {
        let Some(mut ring) = FutexRing::new() else {
            eprintln!("no io_uring futex waits here; nothing to test");
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
}
