//! The death watcher: one thread per process that holds a pidfd for each watched peer, asks
//! about each peer's end once a second, and wakes the sleepers of a peer whose process exits or
//! whose end is no longer held.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use super::futex::futex_wake;
use super::process::start_time_at;
use super::{Alarm, HoldsEnd};

/// How often the watcher asks whether each watched peer still holds its end. A peer's pidfd
/// reports its exit at once, but the peer chose the pid it recorded: one that recorded a
/// process that lives on (pid 1, say) is found dead by this look.
const LOOK_PERIOD: Duration = Duration::from_secs(1);

/// The epoll data of the watcher's timer (registrations count from 1).
const TIMER_KEY: u64 = 0;

/// A futex word in a mapping, woken by the watcher when the peer may be gone.
struct Target {
    /// Key of the registration, also the epoll data of its pidfd.
    key: u64,
    /// Valid while the registration is in the table (see `DeathWatch`).
    word: *const AtomicU32,
    /// Set when the watcher has news for the sleeper (see `DeathWatch::take_news`).
    news: Arc<AtomicBool>,
    /// Raised with the news, for the registration's owner to look at without sleeping (a
    /// sender, before each send); never lowered here.
    alarm: Option<Arc<Alarm>>,
    /// Whether the peer still holds its end; asked every [`LOOK_PERIOD`], on this thread.
    holds_end: HoldsEnd,
    /// Owns the pidfd; closing it also removes it from the epoll set.
    pidfd: OwnedFd,
}

// SAFETY: `word` is only dereferenced by the watcher while the registration is in the table,
// under the table's lock; the registration's owner removes it (under the same lock) before the
// memory can be unmapped. Everything else is `Send`.
unsafe impl Send for Target {}

impl Target {
    /// Tells the sleeper to look at its peer: records the news, then bumps and wakes the word.
    /// News the sleeper has not taken yet needs no second bump: it takes the news only after
    /// it read the word, so it sees them before its next sleep.
    fn report(&self) {
        if let Some(alarm) = &self.alarm {
            alarm.raise();
        }
        // Release: pairs with the Acquire swap in `DeathWatch::take_news`, so a sleeper that
        // takes the news also sees what the watcher saw (a close the peer recorded before it
        // let go of its end).
        if self.news.swap(true, Ordering::Release) {
            return;
        }
        // SAFETY: the registration is in the table and the caller holds its lock, so the
        // mapping holding the word is still mapped (see `Target`).
        let word = unsafe { &*self.word };
        // Release: pairs with the Acquire load A of the word in `handshake::observe`: a sleeper
        // that reads the new value also sees the news; one that read the old value is woken by
        // the call below or does not sleep at all.
        word.fetch_add(1, Ordering::Release);
        futex_wake(word);
    }
}

struct Watcher {
    /// The process that started the thread: a child forked from it has no watcher thread.
    pid: u32,
    epoll: OwnedFd,
    /// A timer that fires every [`LOOK_PERIOD`] while the table holds a registration.
    timer: OwnedFd,
    targets: Mutex<Vec<Target>>,
}

impl Watcher {
    fn targets(&self) -> MutexGuard<'_, Vec<Target>> {
        // A panic elsewhere cannot leave the table inconsistent (pushes and removals are
        // single calls), so a poisoned lock is still usable.
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// The process's watcher, started on first use; `None` if epoll or the thread is unavailable,
/// or in a child forked from the process that started it (threads do not survive a fork).
fn watcher() -> Option<&'static Watcher> {
    let w = WATCHER
        .get_or_init(|| {
            // SAFETY: plain syscall; the result is checked before use.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return None;
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: plain syscall; the result is checked before use.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
                )
            };
            if fd < 0 {
                return None;
            }
            // SAFETY: as above.
            let timer = unsafe { OwnedFd::from_raw_fd(fd) };
            add_to_epoll(&epoll, &timer, libc::EPOLLIN as u32, TIMER_KEY).ok()?;
            let raw = epoll.as_raw_fd();
            std::thread::Builder::new()
                .name("shmlink-watch".into())
                .spawn(move || watch(raw))
                .ok()?;
            Some(Watcher {
                pid: std::process::id(),
                epoll,
                timer,
                targets: Mutex::new(Vec::new()),
            })
        })
        .as_ref()?;
    (w.pid == std::process::id()).then_some(w)
}

/// Adds `fd` to the epoll set with `events`, reported with `key` as its data.
fn add_to_epoll(epoll: &OwnedFd, fd: &OwnedFd, events: u32, key: u64) -> std::io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: key };
    // SAFETY: both descriptors are open; `ev` is a valid event, only read by the kernel.
    let r = unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd.as_raw_fd(),
            &mut ev,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Starts (`true`) or stops the watcher's periodic timer.
fn set_timer(timer: &OwnedFd, on: bool) {
    let period = libc::timespec {
        tv_sec: LOOK_PERIOD.as_secs() as libc::time_t,
        tv_nsec: LOOK_PERIOD.subsec_nanos() as libc::c_long,
    };
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let spec = libc::itimerspec {
        it_interval: if on { period } else { zero },
        it_value: if on { period } else { zero },
    };
    // SAFETY: the timer descriptor is open; `spec` is a valid itimerspec the kernel only reads,
    // and the old value is not asked for. A failure leaves the timer as it was: at worst the
    // watcher looks at the peers' ends later than it should (their pidfds still work) or
    // wakes once a second with nothing to look at.
    unsafe { libc::timerfd_settime(timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
}

/// The watcher thread: sleeps in `epoll_wait` (no timeout) until a watched process exits or the
/// timer fires. A process that exits, or a peer that no longer holds its end, gets its
/// registrations' news set and their futex words woken. The timer runs only while there are
/// registrations.
fn watch(epoll: RawFd) {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
    loop {
        // SAFETY: `events` is a valid buffer of 16 entries; the epoll descriptor lives in the
        // static watcher, which is never dropped.
        let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        let Some(w) = WATCHER.get().and_then(Option::as_ref) else {
            // The thread starts inside `get_or_init`; an event cannot come before the first
            // registration, which happens after it.
            continue;
        };
        let targets = w.targets();
        for ev in &events[..n as usize] {
            if ev.u64 == TIMER_KEY {
                let mut expirations = [0u8; 8];
                // SAFETY: reads at most 8 bytes into a buffer of 8; the timer is non-blocking.
                unsafe { libc::read(w.timer.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                if targets.is_empty() {
                    // Started again by the next registration, under this lock.
                    set_timer(&w.timer, false);
                }
                for t in targets.iter() {
                    if !(t.holds_end)() {
                        t.report();
                    }
                }
            } else if let Some(t) = targets.iter().find(|t| t.key == ev.u64) {
                t.report();
            }
        }
    }
}

/// A registration with the process's watcher: while it lives, the exit of the peer's process,
/// or a look (every [`LOOK_PERIOD`]) that finds the peer no longer holding its end, sets a flag
/// and wakes whoever sleeps on the futex word it was registered with. The sleeper then asks
/// the peer's end itself: that answer, not the pid, is the verdict.
///
/// The owner must drop it before the memory holding the word is unmapped, and before whatever
/// `holds_end` asks through (the mapping's descriptor) is closed.
pub(crate) struct DeathWatch {
    key: u64,
    news: Arc<AtomicBool>,
    /// The alarm the registration raises, counted in its `watched` while it lives.
    alarm: Option<Arc<Alarm>>,
}

impl DeathWatch {
    /// Watches the process `pid`, which started at `start_time` (clock ticks since boot, as in
    /// `/proc/<pid>/stat`), on behalf of a sleeper on `word`, and asks `holds_end` (on the
    /// watcher's thread) every [`LOOK_PERIOD`]. `None` when that cannot be done: no pidfds
    /// (kernels before 5.3, seccomp), the process is already gone, or `pid` does not name that
    /// process in our pid namespace (a peer in another container). Every report also raises
    /// `alarm`, if given.
    pub(crate) fn register(
        pid: u32,
        start_time: u64,
        word: &AtomicU32,
        holds_end: HoldsEnd,
        alarm: Option<Arc<Alarm>>,
    ) -> Option<DeathWatch> {
        if pid == 0 || pid > i32::MAX as u32 || start_time == 0 {
            return None;
        }
        #[cfg(feature = "test-hooks")]
        if crate::hooks::pretend_missing(crate::hooks::Missing::Pidfd) {
            return None;
        }
        let w = watcher()?;
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a fresh descriptor that nothing else owns (pidfds are close-on-exec).
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // The pidfd names whatever process had `pid` when it was opened. The peer recorded its
        // pid and start time before we could read them, so it had started by then; if the
        // process at `pid` now has the peer's start time, it is the peer, and since two live
        // processes never share a pid, the pidfd opened in between names the peer too. A
        // different start time means pid reuse, or a peer whose pid belongs to another
        // namespace.
        if start_time_at(&format!("/proc/{pid}/stat")) != Some(start_time) {
            return None;
        }
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let news = Arc::new(AtomicBool::new(false));
        let mut targets = w.targets();
        // One report per registration: an exited process stays readable.
        let events = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
        add_to_epoll(&w.epoll, &pidfd, events, key).ok()?;
        if targets.is_empty() {
            set_timer(&w.timer, true);
        }
        if let Some(alarm) = &alarm {
            alarm.watched_by_one_more();
        }
        targets.push(Target {
            key,
            word,
            news: news.clone(),
            alarm: alarm.clone(),
            holds_end,
            pidfd,
        });
        Some(DeathWatch { key, news, alarm })
    }

    /// True if the watcher had news since the last call: the peer's process exited, or the
    /// peer was found not holding its end. Call it after loading the futex word (see
    /// `Waiter::watch`), and on news ask the peer's end.
    pub(crate) fn take_news(&self) -> bool {
        // Relaxed load: most calls find no news and pay no read-modify-write. Acquire swap:
        // pairs with the Release swap in `Target::report`; a swap, so news that comes after it
        // is kept for the next call (and bumps the word again).
        self.news.load(Ordering::Relaxed) && self.news.swap(false, Ordering::Acquire)
    }
}

impl Drop for DeathWatch {
    fn drop(&mut self) {
        if let Some(w) = WATCHER.get().and_then(Option::as_ref) {
            let mut targets = w.targets();
            if let Some(i) = targets.iter().position(|t| t.key == self.key) {
                let t = targets.swap_remove(i);
                // SAFETY: both descriptors are open; DEL ignores the event argument. A failure
                // (already removed) changes nothing: closing the pidfd below removes it too.
                unsafe {
                    libc::epoll_ctl(
                        w.epoll.as_raw_fd(),
                        libc::EPOLL_CTL_DEL,
                        t.pidfd.as_raw_fd(),
                        std::ptr::null_mut(),
                    );
                }
            }
        }
        if let Some(alarm) = &self.alarm {
            alarm.watched_by_one_less();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::futex_wait;
    use std::time::Instant;

    /// Sleeps on `word` (bounded) until it is no longer `seen`.
    fn wait_for_change(word: &AtomicU32, seen: u32, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while word.load(Ordering::Acquire) == seen {
            assert!(Instant::now() < deadline, "{what}: no wake-up within 10 s");
            futex_wait(word, seen, Some(Duration::from_millis(100)));
        }
    }

    #[test]
    fn the_watcher_wakes_the_word_of_a_process_that_dies() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = start_time_at(&format!("/proc/{pid}/stat")).expect("start time");
        let word = AtomicU32::new(0);
        let held = || -> HoldsEnd { Box::new(|| true) };
        assert!(
            DeathWatch::register(pid, start + 1, &word, held(), None).is_none(),
            "another start time is another process"
        );
        let alarm = Arc::new(Alarm::new());
        assert!(
            alarm.take() && !alarm.is_watched(),
            "raised at first, unwatched"
        );
        let watch =
            DeathWatch::register(pid, start, &word, held(), Some(alarm.clone())).expect("register");
        assert!(alarm.is_watched());
        assert!(!watch.take_news());
        assert!(!alarm.is_raised(), "no news, no alarm");
        child.kill().unwrap();
        wait_for_change(&word, 0, "the process exited");
        assert!(alarm.take(), "the alarm is raised before the word changes");
        assert!(watch.take_news());
        assert!(!watch.take_news(), "news is taken once");
        drop(watch);
        assert!(
            !alarm.is_watched() && alarm.take(),
            "the last registration to go raises the alarm"
        );
        child.wait().unwrap();
        // A reaped process cannot be watched.
        assert!(DeathWatch::register(pid, start, &word, held(), None).is_none());
    }

    #[test]
    fn the_watcher_wakes_the_word_of_a_peer_that_no_longer_holds_its_end() {
        // The peer recorded a process that outlives it (here: this one).
        let me = std::process::id();
        let start = start_time_at("/proc/self/stat").expect("start time");
        let holds = Arc::new(AtomicBool::new(true));
        let asked = Arc::new(AtomicU32::new(0));
        let probe: HoldsEnd = {
            let (holds, asked) = (holds.clone(), asked.clone());
            Box::new(move || {
                asked.fetch_add(1, Ordering::Relaxed);
                holds.load(Ordering::Relaxed)
            })
        };
        let word = AtomicU32::new(0);
        let watch = DeathWatch::register(me, start, &word, probe, None).expect("register");
        let deadline = Instant::now() + Duration::from_secs(10);
        while asked.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "the watcher never asked");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(word.load(Ordering::Acquire), 0, "a held end is no news");
        assert!(!watch.take_news());

        holds.store(false, Ordering::Relaxed);
        wait_for_change(&word, 0, "the end was let go");
        assert!(watch.take_news());
        // Asked again a period later, it reports again: a sleeper that found the end held
        // (another process holding it for a moment) hears about it once more.
        wait_for_change(&word, 1, "the end is still free");
        assert!(watch.take_news());
    }
}
