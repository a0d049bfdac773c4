//! The library's test support: everything of the workspace's `shmlink-test-support` crate, and
//! `shmlink-echo` peers (whose path only the library's own tests know).

use std::process::{Command, Stdio};

pub use shmlink_test_support::*;

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
