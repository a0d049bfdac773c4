//! Helpers shared by the cross-process tests: child processes that are always reaped, names that
//! are always unlinked, a lock that serialises busy-spinning tests, and bounded waits.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// How long any single wait in these tests may take before the test fails.
pub const WATCHDOG: Duration = Duration::from_secs(10);

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of one test binary (the machine may have only two cores, and these
/// tests spin across processes). A test that panicked while holding it does not poison the rest.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A channel name unique to this test and process.
pub fn unique(test: &str) -> String {
    format!("t-{test}-{}", std::process::id())
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

/// A child process that is killed and reaped when dropped.
pub struct ChildGuard {
    pub child: Child,
    reaped: bool,
}

impl ChildGuard {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, without reaping (the child stays a zombie until `reap`).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits for the child to exit, failing the test after the watchdog.
    pub fn reap(&mut self) -> std::process::ExitStatus {
        self.reap_within(WATCHDOG)
    }

    /// Waits for the child to exit, failing the test after `limit`.
    pub fn reap_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                self.reaped = true;
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "child {} did not exit within {limit:?}",
                self.pid()
            );
            // A bounded wait on a process that was killed or told to stop; no data to poll for.
            std::thread::sleep(Duration::from_millis(2));
        }
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

/// Spawns `shmlink-echo` with `args`; stdin and stdout piped, stderr discarded.
pub fn echo(args: &[&str]) -> ChildGuard {
    let child = Command::new(env!("CARGO_BIN_EXE_shmlink-echo"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shmlink-echo");
    ChildGuard {
        child,
        reaped: false,
    }
}

/// Spawns `shmlink-echo --create ... NAME WAIT` and waits until the channel exists.
pub fn echo_creator(extra: &[&str], name: &str, wait: &str) -> ChildGuard {
    let mut args = vec!["--create"];
    args.extend_from_slice(extra);
    args.push(name);
    args.push(wait);
    let mut child = echo(&args);
    let line = child.read_line();
    assert_eq!(line, "ready", "shmlink-echo --create did not start");
    child
}
