//! Test support shared by the integration tests of the workspace (the library's `tests/it/`,
//! the harness's `bin/tests/it/`), a dev-dependency of both and never published: names
//! unique to a test, a lock that serialises tests which busy-spin across processes, child
//! processes that are always reaped, names and files that are always removed, a watchdog that
//! turns a hang into a failure, the test binary run again in a child role, and what a wait costs
//! (`cost`).

mod cost;
pub use cost::*;

use std::process::{Child, Command, ExitStatus, Stdio};
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
            let mut stdout = stdout;
            let line = next_line(&mut stdout).unwrap_or_default();
            let _ = tx.send((line, stdout));
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

/// Removes the ipc-channel backend's files of `name` (its rendezvous file and its lock file)
/// when dropped: a creator that was killed leaves them behind.
pub struct FallbackFiles(pub String);

impl Drop for FallbackFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(shmlink::testing::rendezvous_path(&self.0));
        let _ = std::fs::remove_file(shmlink::testing::fallback_listener_lock_path(&self.0));
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

/// A client end the service tests drive: a [`shmlink::Channel`] or a [`shmlink::Endpoint`].
pub trait ClientEnd {
    fn send_bytes(&mut self, bytes: &[u8]) -> shmlink::Result<()>;
    /// The next message (copied out), waiting at most `timeout`.
    fn recv_bytes(&mut self, timeout: std::time::Duration) -> shmlink::Result<Vec<u8>>;
}

impl ClientEnd for shmlink::Channel {
    fn send_bytes(&mut self, bytes: &[u8]) -> shmlink::Result<()> {
        Ok(self.send(bytes)?)
    }
    fn recv_bytes(&mut self, timeout: std::time::Duration) -> shmlink::Result<Vec<u8>> {
        Ok(self.recv_timeout(timeout).map(|m| m.to_vec())?)
    }
}

impl ClientEnd for shmlink::Endpoint {
    fn send_bytes(&mut self, bytes: &[u8]) -> shmlink::Result<()> {
        Ok(self.send(bytes)?)
    }
    fn recv_bytes(&mut self, timeout: std::time::Duration) -> shmlink::Result<Vec<u8>> {
        Ok(self.recv_timeout(timeout).map(|m| m.to_vec())?)
    }
}

/// Client `id` sends its `i`-th message (of a length that varies with `i`) and checks that the
/// echo is the same. `Err` holds the exit code for the failure, whose reason is printed:
/// 3 send, 4 wrong reply, 5 receive.
pub fn checked_echo(end: &mut impl ClientEnd, id: &str, i: u64) -> Result<(), i32> {
    let msg = format!("client {id} message {i} {}", "x".repeat((i % 97) as usize));
    if let Err(e) = end.send_bytes(msg.as_bytes()) {
        eprintln!("client {id}: send {i}: {e}");
        return Err(3);
    }
    match end.recv_bytes(WATCHDOG) {
        Ok(reply) if reply == msg.as_bytes() => Ok(()),
        Ok(reply) => {
            eprintln!(
                "client {id}: reply {i} is {:?}",
                String::from_utf8_lossy(&reply)
            );
            Err(4)
        }
        Err(e) => {
            eprintln!("client {id}: recv {i}: {e}");
            Err(5)
        }
    }
}

/// Runs this test binary again with only its test `test` (the entry point of a child role, by
/// its path in the binary: `module::name`),
/// with the environment `env` (the role and its arguments): stdin closed, stdout piped for
/// [`wait_for_line`] or [`ChildGuard::read_all`], stderr shared with ours.
pub fn respawn(test: &str, env: &[(&str, &str)]) -> ChildGuard {
    let child = Command::new(std::env::current_exe().expect("current_exe"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("re-exec the test binary");
    ChildGuard::from(child)
}

/// The next line `pipe` gives (with its newline; the last one may have none), or `None` at its
/// end. Read a byte at a time, so that whatever was written after the line stays in the pipe for
/// the next read: a buffered reader would take it along and lose it when dropped.
fn next_line(pipe: &mut impl std::io::Read) -> Option<String> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while let Ok(1) = pipe.read(&mut byte) {
        bytes.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// Waits at most [`WATCHDOG`] until a re-executed process printed a line ending in `word`
/// (after the test harness's own lines); the rest of its output stays readable.
pub fn wait_for_line(child: &mut ChildGuard, word: &'static str) {
    let mut stdout = child.child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Some(line) = next_line(&mut stdout) {
            if line.trim_end().ends_with(word) {
                let _ = tx.send(stdout);
                return;
            }
        }
    });
    let stdout = rx
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("process {} did not print {word:?}", child.pid()));
    child.child.stdout = Some(stdout);
}

/// Reaps a child this test killed with SIGKILL and checks that the kill is what it died of: a
/// child that had already exited by itself (an error, a panic) fails the test.
pub fn reap_killed(child: &mut ChildGuard) {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.pid();
    let status = child.reap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "child {pid} was to die of our SIGKILL, but ended with {status}"
    );
}

/// Waits until our child `pid` has exited, without reaping it (it stays a zombie for
/// [`ChildGuard::reap`]), and returns when that was seen: the moment a peer's death is news.
/// Call it only for a child that was killed (it has no timeout of its own).
pub fn exited(pid: u32) -> Instant {
    let id = libc::id_t::from(pid);
    loop {
        // SAFETY: siginfo_t is plain data, for which all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t the call fills; WNOWAIT leaves the child
        // unreaped, so its pid cannot be reused before the caller reaps it.
        let r = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 {
            return Instant::now();
        }
        let err = std::io::Error::last_os_error();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::Interrupted,
            "waitid({pid}): {err}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::next_line;

    #[test]
    fn a_line_read_leaves_what_follows_it_in_the_pipe() {
        let mut pipe: &[u8] = b"first\nsecond\nlast";
        assert_eq!(next_line(&mut pipe).as_deref(), Some("first\n"));
        assert_eq!(pipe, b"second\nlast");
        assert_eq!(next_line(&mut pipe).as_deref(), Some("second\n"));
        assert_eq!(next_line(&mut pipe).as_deref(), Some("last"));
        assert_eq!(next_line(&mut pipe), None);
    }
}
