//! Linux: futexes on words in shared memory, and one watcher thread per process that holds a
//! pidfd for each watched peer and wakes the sleepers of a peer that dies.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Sleeps while `*word == expected`, for at most `timeout` (`None`: until woken).
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
    // SAFETY: as in `futex_wait`; FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// A futex word in a mapping, woken by the watcher when the peer dies.
struct Target {
    /// Key of the registration, also the epoll data of its pidfd.
    key: u64,
    /// Valid while the registration is in the table (see `DeathWatch`).
    word: *const AtomicU32,
    died: Arc<AtomicBool>,
    /// Owns the pidfd; closing it also removes it from the epoll set.
    pidfd: OwnedFd,
}

// SAFETY: `word` is only dereferenced by the watcher while the registration is in the table,
// under the table's lock; the registration's owner removes it (under the same lock) before the
// memory can be unmapped. Everything else is `Send`.
unsafe impl Send for Target {}

struct Watcher {
    /// The process that started the thread: a child forked from it has no watcher thread.
    pid: u32,
    epoll: OwnedFd,
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
            let raw = epoll.as_raw_fd();
            std::thread::Builder::new()
                .name("shmlink-watch".into())
                .spawn(move || watch(raw))
                .ok()?;
            Some(Watcher {
                pid: std::process::id(),
                epoll,
                targets: Mutex::new(Vec::new()),
            })
        })
        .as_ref()?;
    (w.pid == std::process::id()).then_some(w)
}

/// The watcher thread: sleeps in `epoll_wait` (no timeout) until a watched process exits, then
/// marks its registrations and wakes their futex words.
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
            let key = ev.u64;
            if let Some(t) = targets.iter().find(|t| t.key == key) {
                // Relaxed: ordered before the Release increment below, which the sleeper reads
                // with Acquire before it looks at this flag.
                t.died.store(true, Ordering::Relaxed);
                // SAFETY: the registration is in the table and we hold its lock, so the mapping
                // holding the word is still mapped (see `Target`).
                let word = unsafe { &*t.word };
                // Release: pairs with the Acquire load of the word in `wait::sleep`, so a
                // sleeper that reads the new value also sees `died`; one that read the old value
                // is woken by the call below or does not sleep at all.
                word.fetch_add(1, Ordering::Release);
                futex_wake(word);
            }
        }
    }
}

/// A registration with the process's watcher: while it lives, the death of the peer process
/// sets a flag and wakes whoever sleeps on the futex word it was registered with.
///
/// The owner must drop it before the memory holding the word is unmapped.
pub(crate) struct DeathWatch {
    key: u64,
    died: Arc<AtomicBool>,
}

impl DeathWatch {
    /// Watches the process `pid`, which started at `start_time` (clock ticks since boot, as in
    /// `/proc/<pid>/stat`), on behalf of a sleeper on `word`. `None` when that cannot be done:
    /// no pidfds (kernels before 5.3, seccomp), the process is already gone, or `pid` does not
    /// name that process in our pid namespace (a peer in another container).
    pub(crate) fn register(pid: u32, start_time: u64, word: &AtomicU32) -> Option<DeathWatch> {
        if pid == 0 || pid > i32::MAX as u32 || start_time == 0 {
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
        if crate::process::start_time_at(&format!("/proc/{pid}/stat")) != Some(start_time) {
            return None;
        }
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let died = Arc::new(AtomicBool::new(false));
        let mut targets = w.targets();
        let mut ev = libc::epoll_event {
            // One report per registration: an exited process stays readable.
            events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
            u64: key,
        };
        // SAFETY: both descriptors are open; `ev` is a valid event.
        let r = unsafe {
            libc::epoll_ctl(
                w.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                pidfd.as_raw_fd(),
                &mut ev,
            )
        };
        if r != 0 {
            return None;
        }
        targets.push(Target {
            key,
            word,
            died: died.clone(),
            pidfd,
        });
        Some(DeathWatch { key, died })
    }

    /// True once the watcher saw the peer process exit. Read it after loading the futex word
    /// (see `watch`).
    pub(crate) fn peer_died(&self) -> bool {
        // Relaxed: see the store in `watch`.
        self.died.load(Ordering::Relaxed)
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_watcher_wakes_the_word_of_a_process_that_dies() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start =
            crate::process::start_time_at(&format!("/proc/{pid}/stat")).expect("start time");
        let word = AtomicU32::new(0);
        assert!(
            DeathWatch::register(pid, start + 1, &word).is_none(),
            "another start time is another process"
        );
        let watch = DeathWatch::register(pid, start, &word).expect("register");
        assert!(!watch.peer_died());
        child.kill().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while word.load(Ordering::Acquire) == 0 {
            assert!(Instant::now() < deadline, "no wake-up within 10 s");
            futex_wait(&word, 0, Some(Duration::from_millis(100)));
        }
        assert!(watch.peer_died());
        drop(watch);
        child.wait().unwrap();
        // A reaped process cannot be watched.
        assert!(DeathWatch::register(pid, start, &word).is_none());
    }
}
