//! Runs `examples/request_reply.rs` as a user would: two processes, public API only.
//! `cargo test` builds the examples before it runs the tests.

use crate::support;

use std::process::{Command, Stdio};

#[test]
fn the_request_reply_example_runs_as_two_processes() {
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/request_reply
    let exe = std::env::current_exe().expect("current_exe");
    let example = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join("request_reply"))
        .expect("target directory");
    assert!(
        example.exists(),
        "{} is missing: build it with `cargo build --examples` (plain `cargo test` does)",
        example.display()
    );
    let child = Command::new(&example)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the example");
    let mut child = support::ChildGuard::from(child);
    let status = child.reap();
    let out = child.read_all();
    assert!(
        status.success(),
        "example failed ({status}); stdout:\n{out}"
    );
    assert!(out.contains("client: 4 replies checked"), "{out}");
    assert!(out.contains("server: answered 4 requests"), "{out}");
}
