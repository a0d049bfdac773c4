//! The fallback's files trusted no more than `/dev/shm`: where `XDG_RUNTIME_DIR` is unset (root,
//! services, containers) another user cannot catch a client's messages, and a FIFO, a link to a
//! device, a huge file or a link planted where the publisher writes cannot hang, exhaust or
//! redirect it.
//!
//! Each test runs its processes (this test binary again, in the role an environment variable
//! names) with a temporary directory of its own, world-writable and sticky like `/tmp`, and
//! without a runtime directory; the directory and everything in it is removed at the end.

use crate::support;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shmlink::{Backend, Config, Endpoint, EndpointListener, WaitStrategy};
use support::{unique, wait_for_line, ChildGuard, WATCHDOG};

/// Set in a child: `<role> <name> [<path>]`.
const CHILD_ENV: &str = "SHMLINK_TRUST_TEST_CHILD";

/// The user a hostile neighbour runs as.
const OTHER_UID: u32 = 65534;

/// How long a client in these tests may try to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// A temporary directory for one test, mode 1777 like `/tmp`; removed with everything in it.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique(&format!("trust-{tag}")));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .expect("make the test's temporary directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))
            .expect("open the test's temporary directory to everybody");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// Runs this test binary again in `role` on channel `name`, with `tmp` as its temporary
/// directory and no runtime directory; as [`OTHER_UID`] with `other_user`.
fn spawn(
    tmp: &TempDir,
    role: &str,
    name: &str,
    path: Option<&Path>,
    other_user: bool,
) -> ChildGuard {
    let exe = std::env::current_exe().expect("current_exe");
    let mut command = if other_user {
        let mut c = Command::new("setpriv");
        c.args([
            &format!("--reuid={OTHER_UID}"),
            &format!("--regid={OTHER_UID}"),
            "--clear-groups",
        ])
        .arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let spec = match path {
        Some(p) => format!("{role} {name} {}", p.display()),
        None => format!("{role} {name}"),
    };
    command
        .args([
            "--exact",
            "fallback_trust::child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec)
        .env("TMPDIR", &tmp.0)
        .env("XDG_RUNTIME_DIR", "")
        .env_remove("SHMLINK_FORCE_FALLBACK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    ChildGuard::spawn(command)
}

/// What a child printed from the first of `words` to the end of that line (the test harness
/// prints its own words before it), once it has exited: within the watchdog, else it is killed
/// and the test fails.
fn outcome(child: &mut ChildGuard, words: &[&str]) -> String {
    let status = child.reap_within(WATCHDOG);
    let out = child.read_all();
    assert!(status.success(), "child {status}: {out}");
    out.lines()
        .find_map(|l| {
            words
                .iter()
                .find_map(|w| l.find(w).map(|at| l[at..].to_owned()))
        })
        .unwrap_or_else(|| panic!("the child printed none of {words:?}: {out}"))
}

/// The child's side; a no-op unless this process was started as a child.
#[test]
fn child_process_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let words: Vec<&str> = spec.split(' ').collect();
    let (role, name, path) = (words[0], words[1], words.get(2).map(Path::new));
    // Whatever is planted, a client must not take much memory: an allocation past this fails.
    let limit = libc::rlimit {
        rlim_cur: 512 << 20,
        rlim_max: 512 << 20,
    };
    // SAFETY: `limit` is a valid `rlimit` for the whole call.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) }, 0);
    let rendezvous = shmlink::testing::rendezvous_path(name);
    let plant_dir = || {
        let dir = rendezvous.parent().expect("a directory");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .expect("make the directory of the fallback's files");
    };
    match role {
        "squat" => squat(name, path),
        "publish" => publish_past(name, &rendezvous, path.expect("the victim"), plant_dir),
        _ => {
            match role {
                "connect" => {}
                "fifo" => {
                    plant_dir();
                    let c = std::ffi::CString::new(rendezvous.to_str().unwrap()).unwrap();
                    // SAFETY: `c` is a valid NUL-terminated path.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                }
                "zero" => {
                    plant_dir();
                    std::os::unix::fs::symlink("/dev/zero", &rendezvous).expect("plant a link");
                }
                "sparse" => {
                    plant_dir();
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&rendezvous)
                        .expect("plant a file");
                    file.set_len(1 << 40).expect("a sparse TiB");
                }
                other => panic!("unknown role {other}"),
            }
            client(name);
        }
    }
    std::process::exit(0);
}

/// A client that tries to connect to `name` and, if it gets in, sends a secret; prints
/// `connected` or `refused <error>` and how long the attempt took.
fn client(name: &str) {
    let start = Instant::now();
    match Endpoint::connect_timeout(name, WaitStrategy::Block, CONNECT_TIMEOUT) {
        Ok(mut ep) => {
            ep.send(b"secret").expect("send");
            // Long enough for the message to arrive before the process ends.
            std::thread::sleep(Duration::from_millis(200));
            println!("connected after {:?}", start.elapsed());
        }
        Err(e) => println!("refused after {:?}: {e}", start.elapsed()),
    }
}

/// Another user's listener bound under `name` first; with `link`, a link at that path to the
/// directory its files are in. Prints `ready`, then what the first client sends.
fn squat(name: &str, link: Option<&Path>) {
    let listener = EndpointListener::bind_with(name, &Config::default(), Backend::IpcChannel, 4)
        .expect("bind");
    if let Some(link) = link {
        let dir = shmlink::testing::rendezvous_path(name);
        std::os::unix::fs::symlink(dir.parent().expect("a directory"), link).expect("plant a link");
    }
    println!("ready");
    if let Ok(mut ep) = listener.accept_timeout(WATCHDOG) {
        if let Ok(msg) = ep.recv_timeout(WATCHDOG) {
            println!("received {}", String::from_utf8_lossy(&msg));
        }
    }
}

/// Links planted under every name the publisher used to write aside (`<file>.tmp-<pid>-<n>`),
/// pointing at `victim`; then a channel and a listener publish under `name`. Prints `victim`
/// and what the victim holds afterwards.
fn publish_past(name: &str, rendezvous: &Path, victim: &Path, plant_dir: impl Fn()) {
    plant_dir();
    for n in 0..16 {
        let aside = rendezvous.with_extension(format!("ipc.tmp-{}-{n}", std::process::id()));
        std::os::unix::fs::symlink(victim, aside).expect("plant a link");
    }
    let config = Config::default();
    drop(Endpoint::create_with(name, &config, Backend::IpcChannel).expect("create"));
    drop(EndpointListener::bind_with(name, &config, Backend::IpcChannel, 1).expect("bind"));
    let held = std::fs::read_to_string(victim).expect("read the victim");
    println!("victim {held}");
}

#[test]
fn another_users_listener_under_the_name_gets_nothing_from_a_client() {
    if euid() != 0 {
        eprintln!("SKIPPED: acting as another user needs root (CI runs as root)");
        return;
    }
    let tmp = TempDir::new("squat");
    let name = unique("squat");
    // Where this user's fallback files would go, taken first, as a link to the squatter's own.
    let ours = tmp.0.join(format!("shmlink-{}", euid()));
    let mut squatter = spawn(&tmp, "squat", &name, Some(&ours), true);
    wait_for_line(&mut squatter, "ready");
    let mut client = spawn(&tmp, "connect", &name, None, false);
    let result = outcome(&mut client, &["connected", "refused"]);
    squatter.kill();
    squatter.reap();
    let heard = squatter.read_all();
    assert!(
        !heard.contains("received"),
        "the other user's listener got: {heard}"
    );
    assert!(result.starts_with("refused"), "{result}");
    assert!(
        result.contains(&ours.display().to_string()) && result.contains("symbolic link"),
        "the refusal names the directory and what is wrong with it: {result}"
    );
}

/// What a client says (`refused ...`) after its process planted something under the
/// rendezvous name of a channel (`role`: fifo, zero, sparse).
fn refusal_after_planting(role: &str) -> String {
    let tmp = TempDir::new(role);
    let mut client = spawn(&tmp, role, &unique(role), None, false);
    // A client that what was planted holds is killed after the watchdog, failing the test.
    let result = outcome(&mut client, &["connected", "refused"]);
    assert!(result.starts_with("refused"), "{result}");
    result
}

#[test]
fn a_fifo_under_the_rendezvous_name_does_not_hold_a_connect_past_its_deadline() {
    let result = refusal_after_planting("fifo");
    assert!(result.contains("a FIFO"), "{result}");
}

#[test]
fn a_link_to_dev_zero_under_the_rendezvous_name_is_refused_at_once() {
    let result = refusal_after_planting("zero");
    assert!(result.contains("symbolic link"), "{result}");
}

#[test]
fn a_huge_sparse_rendezvous_file_is_refused_without_reading_it() {
    let result = refusal_after_planting("sparse");
    assert!(result.contains("longer than"), "{result}");
}

#[test]
fn a_link_planted_where_the_publisher_writes_aside_does_not_redirect_it() {
    let tmp = TempDir::new("publish");
    let victim = tmp.0.join("victim");
    std::fs::write(&victim, "untouched").expect("write the victim");
    let mut child = spawn(&tmp, "publish", &unique("publish"), Some(&victim), false);
    assert_eq!(outcome(&mut child, &["victim"]), "victim untouched");
}
