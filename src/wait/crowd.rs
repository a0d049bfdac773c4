//! Whether the machine has more runnable threads than CPUs, as this process last saw it: the
//! one signal the `Block` policy shares between all the threads of a process (see
//! [`Policy::plan`](super::Policy::plan)).
//!
//! When runnable threads outnumber CPUs, a wait that spins before it sleeps keeps a CPU from a
//! thread that has work, perhaps the very one that would answer it; sleeping at once leaves the
//! CPU to it, and the kernel's wake-up of a sleeper is quick on such a machine (the scheduler
//! favours threads that slept over those that kept running). The scheduler knows how many
//! threads are runnable: the fourth field of `/proc/loadavg` (`running/total`) counts them at
//! the moment of the read, the reader included. A read costs a few microseconds, so it is made
//! at most every [`LOOK_EVERY`], by whichever wait of the process first finds a look due on a
//! clock read it makes anyway (never on the path that finds data at once), and sooner
//! ([`LOOK_AGAIN_AFTER`]) when a poll lost its CPU, the policy's own sign of a crowd. The
//! readings are smoothed ([`Estimate`]) so that a moment's extra thread does not stop spinning
//! on a quiet machine, and a crowd that leaves is noticed within a few looks.
//!
//! Where `/proc/loadavg` cannot be read, the machine never counts as crowded (the policy's
//! per-thread signals still hold).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How often the process reads the count of runnable threads, at most, while it waits: often
/// enough to notice a crowd within a few milliseconds and its end within tens of them, seldom
/// enough that the reads (a few microseconds each) stay well under a thousandth of a CPU.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(5);
/// The least time between two reads when a poll that lost its CPU asks for one at once.
pub(super) const LOOK_AGAIN_AFTER: Duration = Duration::from_millis(1);
/// One runnable thread, in the fixed point of [`Estimate`].
const THREAD: u32 = 16;
/// More threads or CPUs than any machine has (the estimate clamps its inputs to it).
const MANY: u32 = 1 << 20;

/// The smoothed count of runnable threads and what it says: the decision alone, fed readings
/// (the tests feed it their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Estimate {
    /// Moving average (weight 1/2) of the runnable threads the readings counted, in
    /// sixteenths of a thread; `None` before the first reading.
    runnable: Option<u32>,
}

impl Estimate {
    pub(super) const fn new() -> Estimate {
        Estimate { runnable: None }
    }

    /// Folds a reading of `runnable` threads on a machine of `cpus` CPUs into the estimate,
    /// and says whether the machine is crowded: the average exceeds the CPUs by more than half
    /// a thread. A thread that waits by spinning is runnable, and so is the reader: two
    /// processes spinning in turn on two CPUs count two, and are not crowded; one extra reading
    /// of three from there is not enough (2.5), two in a row are (2.75). A crowd of sixteen
    /// counts at once, and takes five readings of two to leave (9, 5.5, 3.75, 2.9, 2.4).
    pub(super) fn fold(&mut self, runnable: u32, cpus: u32) -> bool {
        // Clamped far beyond any machine, so that nothing below overflows.
        let (runnable, cpus) = (runnable.min(MANY), cpus.min(MANY));
        let sample = runnable * THREAD;
        let average = match self.runnable {
            None => sample,
            Some(a) => a / 2 + sample / 2,
        };
        self.runnable = Some(average);
        average > cpus * THREAD + THREAD / 2
    }
}

/// The count of runnable threads in the text of `/proc/loadavg` (`0.50 0.40 0.30 3/123 4567`:
/// the number before the slash of the fourth field).
pub(super) fn parse_runnable(text: &[u8]) -> Option<u32> {
    let field = text
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(3)?;
    let running = field.split(|&b| b == b'/').next()?;
    std::str::from_utf8(running).ok()?.parse().ok()
}

/// Where the readings come from, set up by the first look.
struct Source {
    /// The instant the times of [`Crowd::last_look`] count from.
    base: Instant,
    /// `/proc/loadavg`, kept open (read with `pread` at offset 0, so threads share it freely);
    /// `None` where it cannot be opened.
    file: Option<File>,
    /// Online CPUs (the count of runnable threads is the whole machine's).
    cpus: u32,
}

/// The process's view, shared by every thread.
struct Crowd {
    /// When the last read was, in nanoseconds after [`Source::base`]: the wait that moves it
    /// forward makes the next read.
    last_look: AtomicU64,
    /// The estimate the reads fold into (packed: `u32::MAX` before the first).
    runnable: AtomicU32,
    /// What the last read said.
    crowded: AtomicBool,
}

static SOURCE: OnceLock<Source> = OnceLock::new();
static CROWD: Crowd = Crowd {
    last_look: AtomicU64::new(0),
    runnable: AtomicU32::new(u32::MAX),
    crowded: AtomicBool::new(false),
};

/// Whether the machine was crowded at the last look (false before the first). One load.
#[inline]
pub(super) fn crowded() -> bool {
    // Relaxed: a hint, read on its own; no other memory is published through it (the look
    // stores it with Relaxed too).
    CROWD.crowded.load(Ordering::Relaxed)
}

/// A clock read a wait made anyway, at `now`: reads the count of runnable threads if the last
/// read was at least `every` ago. Cheap when no read is due (one load and a compare).
#[inline]
pub(super) fn note_time(now: Instant, every: Duration) {
    let Some(source) = SOURCE.get() else {
        return first_look(now);
    };
    let at = nanos(source, now);
    // Relaxed: only the times themselves are at stake; the compare-exchange below makes one
    // of the threads that find a look due the one that reads.
    let last = CROWD.last_look.load(Ordering::Relaxed);
    if at < last.saturating_add(every.as_nanos() as u64) {
        return;
    }
    look(source, last, at);
}

fn nanos(source: &Source, now: Instant) -> u64 {
    now.saturating_duration_since(source.base).as_nanos() as u64
}

/// The process's first look: sets up the source, then reads.
#[cold]
fn first_look(now: Instant) {
    let source = SOURCE.get_or_init(|| Source {
        base: now,
        file: File::open("/proc/loadavg").ok(),
        // SAFETY: sysconf takes no pointer and has no precondition.
        cpus: u32::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) })
            .unwrap_or(1)
            .max(1),
    });
    let at = nanos(source, now);
    look(source, CROWD.last_look.load(Ordering::Relaxed), at);
}

/// Reads the count, if this thread is the one to move the last look from `last` to `at`.
#[cold]
#[inline(never)]
fn look(source: &Source, last: u64, at: u64) {
    let Some(file) = &source.file else {
        return;
    };
    // Relaxed: as in `note_time`; the exchange only picks the reader.
    if CROWD
        .last_look
        .compare_exchange(last, at, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let mut text = [0u8; 128];
    let Some(runnable) = file
        .read_at(&mut text, 0)
        .ok()
        .and_then(|n| parse_runnable(&text[..n]))
    else {
        return;
    };
    // Relaxed: the estimate is this process's hint alone. Two reads at once (a forced one
    // beside a due one) may lose one reading: no matter.
    let packed = CROWD.runnable.load(Ordering::Relaxed);
    let mut estimate = match packed {
        u32::MAX => Estimate::new(),
        runnable => Estimate {
            runnable: Some(runnable),
        },
    };
    let crowded = estimate.fold(runnable, source.cpus);
    CROWD
        .runnable
        .store(estimate.runnable.unwrap_or(u32::MAX), Ordering::Relaxed);
    CROWD.crowded.store(crowded, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runnable_count_is_the_number_before_the_slash_of_the_fourth_field() {
        assert_eq!(parse_runnable(b"0.50 0.40 0.30 3/123 4567\n"), Some(3));
        assert_eq!(parse_runnable(b"13.56 7.89 4.21 13/194 16228\n"), Some(13));
        for bad in [
            &b""[..],
            b"0.50 0.40 0.30",
            b"0.50 0.40 0.30 x/123 4567",
            b"0.50 0.40 0.30 /123 4567",
        ] {
            assert_eq!(parse_runnable(bad), None, "{bad:?}");
        }
    }

    /// Whether the machine counts as crowded after each reading in turn.
    fn verdicts(e: &mut Estimate, readings: &[u32], cpus: u32) -> Vec<bool> {
        readings.iter().map(|&r| e.fold(r, cpus)).collect()
    }

    #[test]
    fn a_quiet_machine_is_not_crowded_by_two_spinners_or_a_moments_extra_thread() {
        let mut e = Estimate::new();
        // Two processes spinning in turn on two CPUs, the reader among them; then one reading
        // of a third thread (a kernel worker, say) among them.
        assert_eq!(verdicts(&mut e, &[2, 2, 2, 3, 2, 1], 2), [false; 6]);
        // Two readings of a third thread in a row: a crowd.
        assert_eq!(verdicts(&mut e, &[3, 3], 2), [false, true]);
    }

    #[test]
    fn a_crowd_counts_at_once_and_leaves_within_a_few_looks() {
        let mut e = Estimate::new();
        assert!(
            e.fold(32, 2),
            "sixteen server threads and sixteen clients on two CPUs"
        );
        let mut e = Estimate::new();
        assert_eq!(
            verdicts(&mut e, &[2, 16, 2, 2, 2, 2, 2, 2], 2),
            [false, true, true, true, true, false, false, false],
            "crowded from the first reading of sixteen, quiet again on the fourth of two after it"
        );
        // One CPU: two spinners are a crowd.
        assert!(Estimate::new().fold(2, 1));
        // Many CPUs: no overflow, no crowd below them.
        assert!(!Estimate::new().fold(100, 128));
        // Absurd readings neither overflow nor stick.
        let mut e = Estimate::new();
        assert!(e.fold(u32::MAX, 2));
        assert!(!Estimate::new().fold(2, u32::MAX));
    }
}
