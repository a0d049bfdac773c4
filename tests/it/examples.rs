//! Runs the examples as a user would: `request_reply` (two processes) and `topic_pub` with
//! `topic_sub`, public API only. `cargo test` builds the examples before it runs the tests.

use crate::support;

use std::process::{Command, Stdio};

/// The built example `name`: target/<profile>/deps/it-<hash> -> target/<profile>/examples/.
fn example(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let example = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("examples").join(name))
        .expect("target directory");
    assert!(
        example.exists(),
        "{} is missing: build it with `cargo build --examples` (plain `cargo test` does)",
        example.display()
    );
    example
}

#[test]
fn the_topic_examples_run_as_a_publisher_and_two_subscribers() {
    let name = support::unique("ex-ticks");
    let _unlink = support::NameGuard(name.clone());
    let subscriber = || {
        let child = Command::new(example("topic_sub"))
            .arg(&name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn topic_sub");
        support::ChildGuard::from(child)
    };
    // The subscribers wait for the topic to appear.
    let mut subs = [subscriber(), subscriber()];
    let publisher = Command::new(example("topic_pub"))
        .args([&name, "--count", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn topic_pub");
    let mut publisher = support::ChildGuard::from(publisher);
    let status = publisher.reap();
    let out = publisher.read_all();
    assert!(status.success(), "topic_pub failed ({status}):\n{out}");
    for sub in &mut subs {
        let status = sub.reap();
        let out = sub.read_all();
        assert!(status.success(), "topic_sub failed ({status}):\n{out}");
        assert!(out.contains("tick 29 at"), "{out}");
        assert!(
            out.contains(&format!("the publisher closed {name}")),
            "{out}"
        );
    }
}

#[test]
fn the_request_reply_example_runs_as_two_processes() {
    let example = example("request_reply");
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
