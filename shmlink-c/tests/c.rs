//! The C API from C and C++: `tests/c/test.c` and `tests/cpp/test.cpp` compiled by the system's
//! compilers against `include/shmlink.h` (and `shmlink.hpp`) and `libshmlink.a`, once plain and
//! once with `-fsanitize=address,undefined`, each case run in both builds (C processes talking to
//! C processes, C++ to C++ and to C), and a C process talking to this Rust one. Nothing may be
//! left in /dev/shm.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use shmlink_rs::{Channel, Config};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// The directory cargo put `libshmlink.a` in: this test's own profile directory.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("this test's path");
    // target/<profile>/deps/c-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_owned()
}

/// `libshmlink.a` of this test's profile. `cargo test` builds the tests but not the library's
/// static form (a test cannot link it): it is built here, by the same cargo, if it is missing.
fn static_lib() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = lib_dir();
            let lib = dir.join("libshmlink.a");
            let release = dir.file_name().is_some_and(|n| n == "release");
            let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cargo.args(["build", "--quiet", "-p", "shmlink-c", "--lib"]);
            if release {
                cargo.arg("--release");
            }
            let status = cargo.current_dir(MANIFEST).status().expect("running cargo");
            assert!(
                status.success() && lib.exists(),
                "{lib:?} could not be built: {cargo:?}"
            );
            lib
        })
        .clone()
}

/// The language of a test program.
#[derive(Clone, Copy, PartialEq)]
enum Lang {
    C,
    Cpp,
}

/// A test program, built once per language and flavour: plain, or with the sanitizers.
fn program(lang: Lang, sanitized: bool) -> &'static Path {
    static BUILT: [OnceLock<PathBuf>; 4] = [const { OnceLock::new() }; 4];
    let slot = (lang == Lang::Cpp) as usize * 2 + sanitized as usize;
    BUILT[slot].get_or_init(|| {
        let lib = static_lib();
        let out = std::env::temp_dir().join(format!(
            "shmlink-{}-test-{}{}",
            if lang == Lang::C { "c" } else { "cpp" },
            std::process::id(),
            if sanitized { "-san" } else { "" }
        ));
        let (compiler, std, source) = match lang {
            Lang::C => (
                std::env::var("CC").unwrap_or_else(|_| "cc".into()),
                "-std=c11",
                "tests/c/test.c",
            ),
            Lang::Cpp => (
                std::env::var("CXX").unwrap_or_else(|_| "c++".into()),
                "-std=c++17",
                "tests/cpp/test.cpp",
            ),
        };
        let mut cc = Command::new(compiler);
        cc.args([std, "-O1", "-g", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{MANIFEST}/include"));
        if sanitized {
            cc.args([
                "-fsanitize=address,undefined",
                "-fno-sanitize-recover=undefined",
                "-fno-omit-frame-pointer",
            ]);
        }
        cc.arg(format!("{MANIFEST}/{source}"))
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(&out);
        let status = cc.status().expect("running the compiler");
        assert!(status.success(), "the test program did not compile: {cc:?}");
        out
    })
}

fn unique(case: &str) -> String {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    format!(
        "ctest-{}-{}-{case}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn left_in_shm(base: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("shmlink-{base}")))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `case` of the `lang` program in both builds and checks it passed and left nothing
/// behind.
fn run_in(lang: Lang, case: &str, extra: &[&str]) {
    for sanitized in [false, true] {
        let base = unique(case);
        let out = Command::new(program(lang, sanitized))
            .args([case, &base])
            .args(extra)
            // Leaks are checked too (LeakSanitizer is part of AddressSanitizer here).
            .env("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1")
            .env("UBSAN_OPTIONS", "print_stacktrace=1")
            .output()
            .expect("running the C test program");
        let flavour = if sanitized { "sanitized" } else { "plain" };
        if !out.status.success() {
            // A failed case may stop before it closes its names: remove them (their creator
            // is gone) so that a failure leaves nothing behind either.
            for entry in left_in_shm(&base) {
                let _ = shmlink_rs::segments::reclaim(entry.trim_start_matches("shmlink-"));
            }
        }
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains(&format!("ok {case}")),
            "the case {case} ({flavour}) failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let left = left_in_shm(&base);
        assert!(left.is_empty(), "the case {case} ({flavour}) left {left:?}");
    }
}

fn run(case: &str) {
    run_in(Lang::C, case, &[]);
}

#[test]
fn cpp_every_error_surfaces_as_an_exception_or_nothing_now() {
    run_in(Lang::Cpp, "errors", &[]);
}

#[test]
fn cpp_processes_round_trip() {
    run_in(Lang::Cpp, "pingpong", &[]);
}

#[test]
fn a_cpp_end_and_a_c_end_talk() {
    let peer = program(Lang::C, false).to_str().unwrap().to_owned();
    run_in(Lang::Cpp, "c-peer", &[&peer]);
}

#[test]
fn cpp_subscribers_and_a_lagging_one() {
    run_in(Lang::Cpp, "topics", &[]);
}

#[test]
fn cpp_listener_and_client() {
    run_in(Lang::Cpp, "listeners", &[]);
}

#[test]
fn every_error_a_c_caller_can_reach() {
    run("errors");
}

#[test]
fn c_processes_round_trip_every_size() {
    run("pingpong");
}

#[test]
fn a_c_peer_killed_mid_stream_is_peer_gone_after_its_messages() {
    run("killed");
}

#[test]
fn c_clients_of_a_c_listener_get_their_replies() {
    run("listener");
}

#[test]
fn a_c_selector_says_which_channels_and_subscribers_are_ready() {
    run("selector");
}

#[test]
fn c_subscribers_get_every_message_and_a_lagging_one_is_told() {
    run("topic");
}

/// A Rust channel end and a C one: the C process echoes what this one sends.
#[test]
fn a_rust_end_and_a_c_end_talk() {
    for sanitized in [false, true] {
        let name = unique("rust");
        let mut ch = Channel::create(&name, &Config::default()).unwrap();
        let mut child = Command::new(program(Lang::C, sanitized))
            .args(["echo", &name])
            .env("ASAN_OPTIONS", "detect_leaks=1")
            .spawn()
            .expect("the C program");
        for i in 0..500u32 {
            let m: Vec<u8> = (0..(i as usize * 37) % 70_000)
                .map(|k| (k as u32 ^ i) as u8)
                .collect();
            ch.send(&m).unwrap();
            let back = ch.recv_timeout(Duration::from_secs(10)).unwrap();
            assert!(*back == *m, "echo {i} differs");
        }
        drop(ch);
        let status = child.wait().unwrap();
        assert!(status.success(), "the C echo failed: {status}");
        assert!(left_in_shm(&name).is_empty());
    }
}

/// The whole program in docs/c.md compiles (plain and sanitized) and does what it says.
#[test]
fn the_example_in_docs_c_md_runs() {
    let doc = std::fs::read_to_string(format!("{MANIFEST}/../docs/c.md")).expect("docs/c.md");
    let start = doc.find("```c\n").expect("a C block in docs/c.md") + "```c\n".len();
    let source = &doc[start..];
    let source = &source[..source.find("```").expect("the block's end")];
    let lib = static_lib();
    for sanitized in [false, true] {
        let dir = std::env::temp_dir();
        let src = dir.join(format!("shmlink-docs-example-{}.c", std::process::id()));
        let exe = dir.join(format!(
            "shmlink-docs-example-{}{}",
            std::process::id(),
            sanitized as u8
        ));
        std::fs::write(&src, source).unwrap();
        let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
        cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{MANIFEST}/include"));
        if sanitized {
            cc.arg("-fsanitize=address,undefined");
        }
        let status = cc
            .arg(&src)
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-o"])
            .arg(&exe)
            .status()
            .unwrap();
        let _ = std::fs::remove_file(&src);
        assert!(status.success(), "the example in docs/c.md did not compile");
        let name = unique("docs");
        let out = Command::new(&exe).arg(&name).output().unwrap();
        let _ = std::fs::remove_file(&exe);
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains("client got pong"),
            "the example in docs/c.md: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(left_in_shm(&name).is_empty());
    }
}
