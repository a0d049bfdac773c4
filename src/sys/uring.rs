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
//! # A ring for one thread
//!
//! A ring that only one thread ever enters (a current-thread runtime's) is made with
//! `IORING_SETUP_DEFER_TASKRUN`: the kernel then leaves the work of posting a completion to
//! that thread's next `io_uring_enter`, instead of interrupting whatever the thread is doing
//! (its `epoll_wait` returns `EINTR`, and the runtime calls it again to see the ring's
//! descriptor readable). The descriptor polled is then an eventfd registered with the ring,
//! which the kernel signals when it first owes the thread a completion; the next
//! [`FutexRing::wait`] posts it in the same `io_uring_enter` that submits the new wait. The
//! kernel also signals the eventfd whenever it posts completions, as it does then; so the
//! eventfd is muted around this thread's own enters, or each wait would wake its task once
//! for nothing. What the kernel came to owe while it was muted is seen in the ring's
//! `IORING_SQ_TASKRUN` flag and taken by another enter (see [`FutexRing::enter`]).
//!
//! # Descriptors
//!
//! Each ring holds a descriptor (a ring for one thread, two: the ring's and its eventfd), for
//! as long as its waiter lives. So that rings never take the descriptors the rest of the
//! process needs, the rings of a process hold at most a quarter of its soft `RLIMIT_NOFILE`
//! (and never more than [`MAX_RING_FDS`]): past that, [`FutexRing::new`] says `None` and the
//! waiter sleeps another way; [`held`] and [`over_limit`] say how many descriptors rings hold
//! and how often one was refused.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use io_uring::{opcode, squeue, types, EnterFlags, IoUring};

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
    /// For a ring made for one thread (see the module docs): the eventfd the kernel signals
    /// when it owes that thread a completion, polled in place of the ring's descriptor.
    owed: Option<OwnedFd>,
    /// Numbers the waits; a completion's `user_data` carries the number of its wait.
    generation: u64,
    /// Whether the wait numbered `generation` was submitted and has not completed.
    in_flight: bool,
    /// The descriptors it holds (1, or 2 with `owed`), counted in the rings' share.
    fds: usize,
}

impl FutexRing {
    /// A new ring, or `None` when this kernel (or a sandbox around it) cannot give one that
    /// waits on futexes; the caller then waits another way. With `one_thread`, a ring that
    /// only the calling thread may enter (see the module docs) where the kernel and the
    /// processor allow one, else one that any thread may enter: entered from another thread,
    /// a ring for one thread fails its [`wait`](FutexRing::wait) with `EEXIST`.
    ///
    /// `None` too when the process's rings hold their share of its descriptors (see the
    /// module docs), counted in [`over_limit`].
    pub(crate) fn new(one_thread: bool) -> Option<FutexRing> {
        if unsupported() {
            return None;
        }
        // A ring for one thread holds two descriptors; with one left in the share, an
        // ordinary ring serves that thread too.
        let one_thread = one_thread && take_descriptors(2);
        if !one_thread && !take_descriptors(1) {
            // Relaxed: a count.
            OVER_LIMIT.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if one_thread {
            if let Some(ring) = FutexRing::for_one_thread() {
                return Some(ring);
            }
            give_back_descriptors(1);
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
        Some(FutexRing::around(ring, None))
    }

    /// `ring` (with `owed`, its eventfd, for a ring for one thread), no wait submitted yet.
    fn around(ring: IoUring, owed: Option<OwnedFd>) -> FutexRing {
        // Relaxed: a count.
        RINGS.fetch_add(1, Ordering::Relaxed);
        FutexRing {
            ring,
            fds: 1 + usize::from(owed.is_some()),
            owed,
            generation: 0,
            in_flight: false,
        }
    }

    /// A ring with deferred completions and its eventfd, or `None` (the caller makes an
    /// ordinary ring, which also finds out whether futex waits exist at all).
    ///
    /// Only on x86-64: [`enter`](FutexRing::enter) relies on the kernel setting
    /// `IORING_SQ_TASKRUN` before it reads whether the eventfd is muted, and on the locked
    /// instruction that sets it ordering the two, which x86-64 guarantees and weaker
    /// processors do not.
    fn for_one_thread() -> Option<FutexRing> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        // Kernels before 6.1 refuse these flags; futex waits need 6.7 anyway.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .build(ENTRIES)
            .ok()?;
        if !waits_on_futexes(&ring) {
            return None;
        }
        // SAFETY: `eventfd` takes no pointers; a non-negative result is a new descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just opened, and nothing else owns it.
        let owed = unsafe { OwnedFd::from_raw_fd(fd) };
        ring.submitter().register_eventfd(owed.as_raw_fd()).ok()?;
        Some(FutexRing::around(ring, Some(owed)))
    }

    /// Submits what is queued. On a ring for one thread, also posts every completion the
    /// kernel owes this thread, with the eventfd muted meanwhile (see the module docs); one it
    /// came to owe while muted is posted by a second enter, heard. From then on, a completion
    /// owed signals the eventfd.
    fn enter(&mut self) -> io::Result<()> {
        if self.owed.is_none() {
            self.ring.submit()?;
            return Ok(());
        }
        let to_submit = self.ring.submission().len() as u32;
        self.ring.completion().disable_eventfd();
        let entered = self.enter_for_completions(to_submit);
        self.ring.completion().enable_eventfd();
        // SeqCst: the store that unmutes comes before the flag's load below. Pairs with the
        // kernel's locked `IORING_SQ_TASKRUN` set (a full barrier on x86-64, the only processor
        // this ring is made on), made before it reads whether the eventfd is muted when it
        // comes to owe a completion: either the kernel saw the eventfd heard and signals it, or
        // the load below sees the flag.
        fence(Ordering::SeqCst);
        entered?;
        if self.ring.submission().taskrun() {
            // Owed while muted; or the flag was set late, for work the enter above already ran
            // (the kernel clears it only when it finds work to run, so it may stay set): one
            // more enter, heard, and no more.
            self.enter_for_completions(0)?;
        }
        Ok(())
    }

    /// `io_uring_enter` that submits `to_submit` entries and posts the completions owed.
    fn enter_for_completions(&self, to_submit: u32) -> io::Result<()> {
        // SAFETY: no argument struct is passed; the queued entries are valid (see `wait`).
        unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                to_submit,
                0,
                EnterFlags::GETEVENTS.bits(),
                None,
            )
        }
        .map(drop)
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
        // Completions already posted; on a ring for one thread, one still owed is posted by
        // the enter below, after the wait it completes is cancelled to no effect.
        self.take_completions();
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
        self.enter()?;
        self.in_flight = true;
        Ok(())
    }

    /// Whether it is a ring for one thread (see the module docs).
    #[cfg(test)]
    pub(crate) fn is_for_one_thread(&self) -> bool {
        self.owed.is_some()
    }

    /// Takes every completion; `true` when the latest wait completed (it was woken, found the
    /// word changed, or timed out), so its waiter should look again.
    pub(crate) fn reap(&mut self) -> bool {
        if self.owed.is_some() && self.ring.submission().taskrun() {
            // Failing only as its `wait` would, and the next `wait` reports that.
            let _ = self.enter();
        }
        self.take_completions()
    }

    /// The completions posted in the ring, without entering the kernel: `true` when the
    /// latest wait's is among them. Right after [`wait`](FutexRing::wait) that is all there is
    /// to take: its enter posted what was owed, and a completion owed later signals the
    /// eventfd.
    pub(crate) fn take_completions(&mut self) -> bool {
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
        give_back_descriptors(self.fds);
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

/// The descriptor to poll: readable when a wait completed (or, for a ring for one thread, when
/// the kernel owes a completion).
impl AsRawFd for FutexRing {
    fn as_raw_fd(&self) -> RawFd {
        match &self.owed {
            Some(owed) => owed.as_raw_fd(),
            None => self.ring.as_raw_fd(),
        }
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
    /// waits (asked apart from `FutexRing::new`), a ring (`one_thread`: one for one thread, on
    /// x86-64) must be had, unless `SHMLINK_TEST_NO_IO_URING` says it is refused on purpose.
    pub(crate) fn no_ring_here(what: &str, one_thread: bool) {
        let required = kernel_has_futex_ring_ops()
            && (!one_thread || cfg!(target_arch = "x86_64"))
            && !refused_on_purpose();
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
    fn ring(one_thread: bool) -> Option<FutexRing> {
        let ring = FutexRing::new(one_thread);
        if ring.is_none() {
            no_ring_here("futex ring", false);
        }
        let ring = ring?;
        if one_thread && ring.owed.is_none() {
            no_ring_here("ring for one thread", true);
            return None;
        }
        Some(ring)
    }

    #[test]
    fn a_wait_completes_when_the_word_is_woken_or_had_changed_or_times_out() {
        let Some(mut ring) = ring(false) else {
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

    /// Empties an eventfd's count.
    fn drain(fd: RawFd) {
        let mut count = 0u64;
        // SAFETY: eight writable bytes; the eventfd is non-blocking.
        unsafe { libc::read(fd, std::ptr::addr_of_mut!(count).cast(), 8) };
    }

    #[test]
    fn a_ring_for_one_thread_signals_its_eventfd_for_a_peers_wake_up_and_never_for_its_own_enters()
    {
        let Some(mut ring) = ring(true) else {
            return;
        };
        let owed = ring.owed.as_ref().map(AsRawFd::as_raw_fd).unwrap();
        assert_eq!(ring.as_raw_fd(), owed, "the eventfd stands for the ring");
        let word = std::sync::Arc::new(AtomicU32::new(7));
        let quiet = Duration::from_millis(20);
        for round in 0..3 {
            // Woken by another thread: the eventfd is signalled before this thread enters, and
            // the completion is posted by its next look.
            ring.wait(&word, word.load(Ordering::Acquire), None)
                .unwrap();
            assert!(!ring.reap());
            assert!(
                !readable(owed, quiet),
                "round {round}: signalled for nothing"
            );
            let peer = std::sync::Arc::clone(&word);
            std::thread::spawn(move || {
                peer.fetch_add(1, Ordering::Release);
                crate::sys::futex_wake(&peer);
            })
            .join()
            .unwrap();
            assert!(
                readable(owed, Duration::from_secs(10)),
                "round {round}: not signalled"
            );
            drain(owed);
            // The next wait posts the owed completion (and cancels its wait, to no effect)
            // without signalling: a task would otherwise be woken once for nothing per wait.
            ring.wait(&word, word.load(Ordering::Acquire), None)
                .unwrap();
            assert!(
                !ring.reap(),
                "round {round}: an earlier wait's completion counted"
            );
            assert!(
                !readable(owed, quiet),
                "round {round}: the thread's own enter signalled the eventfd"
            );
            // Leave the wait in flight for the next round's wait to cancel.
        }
        // A wait that finds the word changed completes in its submission, also unsignalled.
        ring.wait(&word, word.load(Ordering::Acquire) + 1, None)
            .unwrap();
        assert!(ring.reap());
        assert!(!readable(owed, quiet));
        // A timeout signals it too.
        ring.wait(
            &word,
            word.load(Ordering::Acquire),
            Some(Duration::from_millis(5)),
        )
        .unwrap();
        assert!(
            readable(owed, Duration::from_secs(10)),
            "the timeout never came"
        );
        assert!(ring.reap());
        assert!(!ring.in_flight);
    }

    #[test]
    fn a_ring_for_one_thread_refuses_another_thread() {
        let Some(mut ring) = ring(true) else {
            return;
        };
        let word = AtomicU32::new(0);
        ring.wait(&word, 0, None).unwrap();
        let err = std::thread::scope(|s| s.spawn(|| ring.wait(&word, 0, None)).join().unwrap())
            .expect_err("another thread entered a ring for one thread");
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    }
}
