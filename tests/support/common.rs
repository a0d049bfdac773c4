//! Test support shared by every integration test of the workspace (the library's in `tests/`,
//! the harness's in `harness/tests/`, which include this file by path): names unique to a test, a
//! lock that serialises tests which busy-spin across processes, child processes that are always
//! reaped, names that are always unlinked, and a watchdog that turns a hang into a failure.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long any single wait in these tests may take before the test fails.
pub const WATCHDOG: Duration = Duration::from_secs(10);

/// Serialises the tests of one test binary that run processes against each other: the machine
/// may have only two cores, and two spinning pairs at once would starve each other. A test that
/// panicked while holding it does not poison the rest.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A channel name no other test, call or test run uses: `t<pid>-<tag>-<n>`.
pub fn unique(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{tag}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `/dev/shm/shmlink-<name>`.
pub fn shm_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new("/dev/shm").join(format!("shmlink-{name}"))
}

/// Unlinks the mapping `name` when dropped, whatever happened in the test.
pub struct NameGuard(pub String);

impl Drop for NameGuard {
    fn drop(&mut self) {
        let _ = shmlink::testing::unlink(&self.0);
    }
}

/// Aborts the whole test binary if not dropped within `limit`: a hang becomes a loud failure
/// instead of a stuck run.
pub struct Watchdog {
    disarm: Option<mpsc::Sender<()>>,
}

impl Watchdog {
    /// Arms a watchdog for `what`.
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

/// A child process, killed (if still running) and reaped when dropped, even when the test fails.
pub struct ChildGuard {
    pub child: Child,
    reaped: bool,
}

impl ChildGuard {
    /// Spawns `command`, failing the test if it cannot start.
    pub fn spawn(mut command: Command) -> ChildGuard {
        match command.spawn() {
            Ok(child) => ChildGuard::from(child),
            Err(e) => panic!("spawning {command:?}: {e}"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, without reaping (the child stays a zombie until `reap`).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.pid()).unwrap_or(0);
        // SAFETY: kill on our own child's pid, which is not reaped yet (reaping needs &mut self).
        unsafe {
            libc::kill(pid, signal);
        }
    }

    /// Waits for the child to exit, failing the test after the watchdog.
    pub fn reap(&mut self) -> ExitStatus {
        self.reap_within(WATCHDOG)
    }

    /// Waits for the child to exit, failing the test (after killing it) past `limit`.
    pub fn reap_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                self.reaped = true;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("child {} did not exit within {limit:?}", self.pid());
            }
            // A bounded wait on a process that was killed or told to stop; no data to poll for.
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Same as [`reap_within`](ChildGuard::reap_within).
    pub fn wait_for(&mut self, limit: Duration) -> ExitStatus {
        self.reap_within(limit)
    }

    /// Everything the child wrote to stdout; call after it exited.
    pub fn read_all(&mut self) -> String {
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        }
        out
    }

    /// Reads one line from the child's stdout, failing after the watchdog.
    pub fn read_line(&mut self) -> String {
        let stdout = self.child.stdout.take().expect("child stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send((line, reader.into_inner()));
        });
        let (line, stdout) = rx
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|_| panic!("child {} printed nothing within {WATCHDOG:?}", self.pid()));
        self.child.stdout = Some(stdout);
        line.trim_end().to_owned()
    }
}

impl From<Child> for ChildGuard {
    fn from(child: Child) -> Self {
        ChildGuard {
            child,
            reaped: false,
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether a process with this id exists (a zombie counts).
pub fn process_exists(pid: u32) -> bool {
    let pid = i32::try_from(pid).unwrap_or(0);
    // SAFETY: signal 0 only checks existence and permission.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Fails the test if a run left anything named with `needle` behind (see [`leftovers`]).
pub fn assert_nothing_left(needle: &str) {
    let left = leftovers(needle);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Entries of /dev/shm, the temporary directory, the runtime directory and the directory of the
/// fallback's files whose names contain `needle`: what a run left behind.
pub fn leftovers(needle: &str) -> Vec<String> {
    let mut dirs = vec![std::path::PathBuf::from("/dev/shm"), std::env::temp_dir()];
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR") {
        dirs.push(runtime.into());
    }
    if let Some(fallback) = shmlink::testing::rendezvous_path(needle).parent() {
        if !dirs.iter().any(|d| d == fallback) {
            dirs.push(fallback.to_owned());
        }
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
