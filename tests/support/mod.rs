//! The library's test support: everything in `common.rs` (shared with the harness's tests), what
//! a wait costs (`cost.rs`), and `shmlink-echo` peers.
#![allow(dead_code)]

use std::process::{Command, Stdio};

mod common;
pub use common::*;
mod cost;
// Only the tests that measure idle waits use it.
#[allow(unused_imports)]
pub use cost::*;

/// Spawns `shmlink-echo` with `args`; stdin and stdout piped, stderr discarded.
pub fn echo(args: &[&str]) -> ChildGuard {
    let child = Command::new(env!("CARGO_BIN_EXE_shmlink-echo"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shmlink-echo");
    ChildGuard::from(child)
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

/// Runs this test binary again with only its test `test` (the entry point of a child role),
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

/// Waits at most [`WATCHDOG`] until a re-executed process printed a line ending in `word`
/// (after the test harness's own lines); the rest of its output stays readable.
pub fn wait_for_line(child: &mut ChildGuard, word: &'static str) {
    use std::io::BufRead;
    let stdout = child.child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line.trim_end().ends_with(word) => {
                    let _ = tx.send(reader.into_inner());
                    return;
                }
                Ok(_) => {}
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
