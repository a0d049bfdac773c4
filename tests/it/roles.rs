//! The roles a re-run of this test binary plays: one table of every role, one environment
//! variable that names the role (and its arguments), and one test, [`role`], that runs it.
//!
//! A test that needs another process calls [`spawn`] (or [`add_to`], for a command it starts
//! itself) with a role of [`ROLES`]: the child is this binary with only `roles::role`
//! selected and [`ROLE_ENV`] set to `<role> <arguments>`. In an ordinary run `role` finds no
//! [`ROLE_ENV`] and does nothing.

use std::process::{Command, Stdio};

use crate::support::ChildGuard;

/// Set in a re-run of this binary to `<role> <arguments>`: the role (a name in [`ROLES`]) and
/// what it is given, which the role parses.
pub const ROLE_ENV: &str = "SHMLINK_TEST_ROLE";

/// The test that runs the role, by its path in this binary.
const ENTRY: &str = "roles::role";

/// A role: given the arguments (everything after the role's name in [`ROLE_ENV`]), it does
/// its part and returns (the process then exits as a passed test does) or exits itself.
pub type Role = fn(&str);

/// Every role a test of this binary spawns, by name.
pub const ROLES: &[(&str, Role)] = &[
    ("conformance-peer", crate::conformance::peer_process),
    (
        "conformance-topic-peer",
        crate::conformance::topics::peer_process,
    ),
    ("counters-sender", crate::counters::sender),
    ("delivery", crate::delivery::child),
    ("endpoint-services", crate::endpoint_services::child),
    ("fallback-trust", crate::fallback_trust::child_process_entry),
    (
        "huge-announcement-receiver",
        crate::hostile_stream::huge_announcement_receiver,
    ),
    ("liveness-forge-as-init", crate::liveness::child),
    ("segments-fork-holder", crate::segments::fork_holder),
    ("selector-bumper", crate::selector_many::child),
    ("services", crate::services::child),
    ("stress", crate::stress::stress_child_process),
    #[cfg(feature = "tokio")]
    ("tokio-server", crate::tokio_api::child),
    #[cfg(feature = "tokio")]
    ("tokio-plain-peer", crate::tokio_api::plain_peer),
    #[cfg(feature = "tokio")]
    ("tokio-idle", crate::tokio_api::idle_child),
    #[cfg(feature = "tokio")]
    ("tokio-many", crate::tokio_api::many_child),
    #[cfg(feature = "tokio")]
    ("tokio-many-senders", crate::tokio_api::many_senders),
    ("topic", crate::topic::child),
    ("wait", crate::wait::child),
];

fn find(name: &str) -> Option<Role> {
    ROLES.iter().find(|(n, _)| *n == name).map(|&(_, f)| f)
}

/// The role this process plays, if it is a re-run of the binary: `(role, arguments)`.
pub fn playing() -> Option<(String, String)> {
    let spec = std::env::var(ROLE_ENV).ok()?;
    let (role, args) = spec.split_once(' ').unwrap_or((&spec, ""));
    Some((role.to_owned(), args.to_owned()))
}

/// Makes `command` (this binary, or a wrapper that runs it) run `role` with `args`: the test
/// selection and [`ROLE_ENV`]. Fails the calling test for a role that is not in [`ROLES`].
pub fn add_to(command: &mut Command, role: &str, args: &str) {
    assert!(
        find(role).is_some(),
        "the role {role:?} is not in roles::ROLES: a child would run nothing"
    );
    assert!(!role.contains(' '), "a role's name has no space: {role:?}");
    command
        .args(["--exact", ENTRY, "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, format!("{role} {args}"));
}

/// Runs this test binary again in `role` with `args` and the extra environment `env`: stdin
/// closed, stdout piped (for `wait_for_line` or `ChildGuard::read_all`), stderr shared with
/// ours.
pub fn spawn(role: &str, args: &str, env: &[(&str, &str)]) -> ChildGuard {
    let mut command = Command::new(std::env::current_exe().expect("current_exe"));
    add_to(&mut command, role, args);
    command
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    ChildGuard::spawn(command)
}

/// The one entry point of the re-run processes: runs the role [`ROLE_ENV`] names; a no-op in
/// an ordinary test run.
#[test]
fn role() {
    let Some((name, args)) = playing() else {
        return;
    };
    let role = find(&name).unwrap_or_else(|| panic!("no role {name:?} in roles::ROLES"));
    role(&args);
}

#[test]
fn every_role_has_a_name_of_its_own() {
    for (i, (name, _)) in ROLES.iter().enumerate() {
        assert!(!name.is_empty() && !name.contains(' '), "{name:?}");
        assert!(
            ROLES[..i].iter().all(|(other, _)| other != name),
            "the role {name:?} is registered twice"
        );
    }
}

#[test]
#[should_panic(expected = "is not in roles::ROLES")]
fn spawning_a_role_that_is_not_registered_fails_the_test_before_anything_runs() {
    let _child = spawn("no-such-role", "", &[]);
}

/// The roles the sources spawn by name (`roles::spawn(`, `roles::add_to(`, or a constant
/// naming a role), checked against [`ROLES`] both ways: a misspelt role fails here even when
/// the test that spawns it is not run, and so does a role nothing spawns any more.
#[test]
fn every_role_the_sources_spawn_is_registered_and_every_registered_role_is_spawned() {
    let mut sources = vec![
        include_str!("conformance.rs"),
        include_str!("conformance/topics.rs"),
        include_str!("counters.rs"),
        include_str!("delivery.rs"),
        include_str!("endpoint_services.rs"),
        include_str!("fallback_trust.rs"),
        include_str!("hostile_stream.rs"),
        include_str!("liveness.rs"),
        include_str!("segments.rs"),
        include_str!("selector_many.rs"),
        include_str!("services.rs"),
        include_str!("stress.rs"),
        include_str!("topic.rs"),
        include_str!("wait.rs"),
    ];
    if cfg!(feature = "tokio") {
        sources.push(include_str!("tokio_api.rs"));
    }
    let mut spawned = Vec::new();
    for source in sources {
        // The role is the first string literal after a call, or a constant's value.
        for start in [
            "roles::spawn(",
            "roles::add_to(",
            "_ROLE: &str = ",
            "PEER: &str = ",
        ] {
            for (at, _) in source.match_indices(start) {
                let rest = &source[at + start.len()..];
                let Some(open) = rest.find('"') else { continue };
                if rest[..open].contains(['(', ')', ';']) {
                    continue;
                }
                let name = &rest[open + 1..];
                spawned.push(&name[..name.find('"').expect("a closed literal")]);
            }
        }
    }
    for name in &spawned {
        assert!(
            ROLES.iter().any(|(n, _)| n == name),
            "a test spawns the role {name:?}, which is not in roles::ROLES"
        );
    }
    for (name, _) in ROLES {
        assert!(
            spawned.contains(name),
            "the role {name:?} is registered, and no test spawns it by name"
        );
    }
}
