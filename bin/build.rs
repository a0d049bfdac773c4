//! Records the commit the harness is built from, for the documents it writes: `HARNESS_COMMIT`
//! is `git rev-parse HEAD`, with `-dirty` when the sources of the library or the harness
//! differ from it, or `unknown` outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        // Never take the index lock: a build must not write to the checkout.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The version of the package `name` in the workspace's Cargo.lock (`unknown` if not there).
fn locked_version(name: &str) -> String {
    let lock = std::fs::read_to_string("../Cargo.lock").unwrap_or_default();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"") {
            if let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = ")) {
                return v.trim_matches('"').to_owned();
            }
        }
    }
    "unknown".to_owned()
}

fn main() {
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(head) => {
            let changed = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                "../src",
                "../shmlink-zenoh",
            ])
            .is_some_and(|s| !s.is_empty());
            if changed {
                format!("{head}-dirty")
            } else {
                head
            }
        }
        None => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=HARNESS_COMMIT={commit}");
    println!(
        "cargo:rustc-env=HARNESS_ZENOH_VERSION={}",
        locked_version("zenoh")
    );
    println!("cargo:rerun-if-changed=../Cargo.lock");
    // Built again when HEAD moves (a commit, a checkout) or the sources change. A file that
    // does not exist (packed-refs, often) would make every build run this script again.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(&["symbolic-ref", "--quiet", "HEAD"]));
    for path in watched {
        if let Some(p) = git(&["rev-parse", "--git-path", &path]) {
            if std::path::Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    for path in ["build.rs", "ipc-parent.rs", "ipc-child.rs", "src", "../src"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
