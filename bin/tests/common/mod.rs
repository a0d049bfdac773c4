//! Helpers shared by the integration tests: unique names, a lock that serialises tests which
//! busy-spin across processes, child guards that always reap, and a watchdog.

#![allow(dead_code)]

use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by every test that runs two processes: the machine may have only two cores, and two
/// spinning pairs at once would starve each other.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A name no other test (or test run) uses.
pub fn unique_name(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{tag}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Aborts the whole test binary if not dropped within `limit`: a hang becomes a loud failure
/// instead of a stuck CI job.
pub struct Watchdog {
    disarm: Option<mpsc::Sender<()>>,
}

impl Watchdog {
    pub fn arm(limit: Duration, what: &str) -> Watchdog {
        let (disarm, disarmed) = mpsc::channel::<()>();
        let what = what.to_owned();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = disarmed.recv_timeout(limit) {
                eprintln!("watchdog: {what} still running after {limit:?}; aborting");
                std::process::abort();
            }
        });
        Watchdog {
            disarm: Some(disarm),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.disarm.take() {
            let _ = tx.send(());
        }
    }
}

/// A spawned process, killed (if still running) and reaped on drop, even when the test fails.
pub struct ChildGuard {
    pub child: Child,
}

impl ChildGuard {
    pub fn spawn(mut command: Command) -> ChildGuard {
        let child = match command.spawn() {
            Ok(c) => c,
            Err(e) => panic!("spawning {command:?}: {e}"),
        };
        ChildGuard { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit, at most `limit` (then kills it and panics).
    pub fn wait_for(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!("process {} still running after {limit:?}", self.pid());
                }
                Err(e) => panic!("waiting for {}: {e}", self.pid()),
            }
        }
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.pid()).unwrap_or(0);
        // SAFETY: kill on our own child's pid; it is not reaped yet (reaping needs &mut self).
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Whether a process with this id exists (a zombie counts).
pub fn process_exists(pid: u32) -> bool {
    let pid = i32::try_from(pid).unwrap_or(0);
    // SAFETY: signal 0 only checks existence and permission.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Entries of /dev/shm, the temporary directory and the runtime directory that contain
/// `needle`: what a run left behind.
pub fn leftovers(needle: &str) -> Vec<String> {
    let mut dirs = vec![std::path::PathBuf::from("/dev/shm"), std::env::temp_dir()];
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR") {
        dirs.push(runtime.into());
    }
    let mut found = Vec::new();
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.contains(needle) {
                    found.push(format!("{}/{name}", dir.display()));
                }
            }
        }
    }
    found
}
