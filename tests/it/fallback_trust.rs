//! The fallback's files trusted no more than `/dev/shm`: where `XDG_RUNTIME_DIR` is unset (root,
//! services, containers) another user cannot catch a client's messages nor deny the backend by
//! taking its directory's name first, and a FIFO, a link to a device or a huge file planted
//! where a client looks cannot hang, exhaust or redirect it. A killed creator or listener leaves
//! nothing in the temporary directory after the next `bind`, and cleanup touches only this
//! user's own entries.
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
use support::{reap_killed, unique, wait_for_line, ChildGuard, WATCHDOG};

/// The user a hostile neighbour runs as.
const OTHER_UID: u32 = 65534;

/// How long a client in these tests may try to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The longest a client may take to give up at [`CONNECT_TIMEOUT`], on a loaded machine.
const PAST_DEADLINE: Duration = Duration::from_secs(2);

/// The longest "at once" may take, on a loaded machine.
const AT_ONCE: Duration = Duration::from_secs(1);

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
    crate::roles::add_to(&mut command, "fallback-trust", &spec);
    command
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

/// The role `fallback-trust` of a re-run of this binary: `<role> <name> [<path>]`.
pub(crate) fn child_process_entry(spec: &str) {
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
        "create" => {
            let _ep = Endpoint::create_with(name, &Config::default(), Backend::IpcChannel)
                .expect("create");
            println!("ready");
            // Killed by the test.
            std::thread::sleep(WATCHDOG);
        }
        "listen" => {
            let _listener =
                EndpointListener::bind_with(name, &Config::default(), Backend::IpcChannel, 4)
                    .expect("bind");
            println!("ready");
            // Killed by the test.
            std::thread::sleep(WATCHDOG);
        }
        "serve" => {
            let mut ep = Endpoint::create_with(name, &Config::default(), Backend::IpcChannel)
                .expect("create");
            println!("ready");
            let said = match ep.recv_timeout(WATCHDOG) {
                Ok(msg) => format!("received {}", String::from_utf8_lossy(&msg)),
                Err(e) => format!("recv failed: {e}"),
            };
            println!("{said}");
        }
        "hold" => {
            let mut ep =
                Endpoint::connect_timeout(name, WaitStrategy::Block, WATCHDOG).expect("connect");
            println!("connected");
            let said = match ep.recv_timeout(WATCHDOG) {
                Ok(_) => "recv a message".to_owned(),
                Err(e) => format!("recv {e}"),
            };
            println!("{said}");
        }
        "bind" => {
            for name in [name.to_owned(), format!("{name}-b")] {
                let config = Config::default();
                drop(
                    EndpointListener::bind_with(&name, &config, Backend::IpcChannel, 1)
                        .expect("bind"),
                );
            }
            println!("bound");
        }
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
/// `connected` or `refused`, how long the attempt took (`after <n> ms`) and the error.
fn client(name: &str) {
    let start = Instant::now();
    match Endpoint::connect_timeout(name, WaitStrategy::Block, CONNECT_TIMEOUT) {
        Ok(mut ep) => {
            let took = start.elapsed().as_millis();
            ep.send(b"secret").expect("send");
            // Long enough for the message to arrive before the process ends.
            std::thread::sleep(Duration::from_millis(200));
            println!("connected after {took} ms");
        }
        Err(e) => println!("refused after {} ms: {e}", start.elapsed().as_millis()),
    }
}

/// How long the attempt a client reported (`... after <n> ms ...`) took.
fn took(result: &str) -> Duration {
    let ms = result
        .split_once(" after ")
        .and_then(|(_, rest)| rest.split_once(" ms"))
        .and_then(|(ms, _)| ms.parse().ok())
        .unwrap_or_else(|| panic!("no time in {result:?}"));
    Duration::from_millis(ms)
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

#[test]
fn another_users_listener_under_the_name_gets_nothing_from_a_client() {
    if euid() != 0 {
        eprintln!("SKIPPED: acting as another user needs root (CI runs as root)");
        return;
    }
    let tmp = TempDir::new("squat");
    let name = unique("squat");
    // Where this user's fallback files would go first, taken first, as a link to the
    // squatter's own: the client skips it and finds no channel.
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
    assert!(result.contains("no channel or listener"), "{result}");
}

/// Plants `what` under `path`: a link, a file, a directory open to everybody, or another
/// user's directory (root only).
fn plant(path: &Path, what: &str) {
    match what {
        "link" => std::os::unix::fs::symlink("/", path).expect("plant a link"),
        "file" => std::fs::write(path, "").expect("plant a file"),
        "open directory" | "their directory" => {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(path)
                .expect("plant a directory");
            let mode = if what == "open directory" {
                0o777
            } else {
                0o700
            };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .expect("chmod the directory");
            if what == "their directory" {
                std::os::unix::fs::chown(path, Some(OTHER_UID), Some(OTHER_UID))
                    .expect("give the directory away");
            }
        }
        other => panic!("nothing to plant called {other}"),
    }
}

#[test]
fn a_name_another_user_took_first_does_not_deny_the_backend() {
    let mut kinds = vec!["link", "file", "open directory"];
    if euid() == 0 {
        kinds.push("their directory");
    } else {
        eprintln!("another user's directory needs root to plant (CI runs as root)");
    }
    for kind in kinds {
        let tmp = TempDir::new("taken");
        let name = unique("taken");
        let first = tmp.0.join(format!("shmlink-{}", euid()));
        plant(&first, kind);
        let mut server = spawn(&tmp, "serve", &name, None, false);
        wait_for_line(&mut server, "ready");
        let mut client = spawn(&tmp, "connect", &name, None, false);
        let result = outcome(&mut client, &["connected", "refused"]);
        assert!(result.starts_with("connected"), "{kind}: {result}");
        assert_eq!(
            outcome(&mut server, &["received", "recv failed"]),
            "received secret"
        );
        let used = tmp.0.join(format!("shmlink-{}-1", euid()));
        assert!(used.is_dir(), "{kind}: the next name was not used");
    }
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
    assert!(took(&result) < PAST_DEADLINE, "{result}");
}

#[test]
fn a_link_to_dev_zero_under_the_rendezvous_name_is_refused_at_once() {
    let result = refusal_after_planting("zero");
    assert!(result.contains("symbolic link"), "{result}");
    assert!(took(&result) < AT_ONCE, "{result}");
}

#[test]
fn a_huge_sparse_rendezvous_file_is_refused_without_reading_it() {
    let result = refusal_after_planting("sparse");
    assert!(result.contains("longer than"), "{result}");
    assert!(took(&result) < AT_ONCE, "{result}");
}

/// The entries of `dir` whose name starts with `prefix`.
fn entries(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|f| f.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_killed_creator_and_listener_leave_nothing_in_the_temporary_directory_after_the_next_bind() {
    let tmp = TempDir::new("killed");
    let files = tmp.0.join(format!("shmlink-{}", euid()));
    let (channel, listener) = (unique("killed-channel"), unique("killed-listener"));
    let mut creator = spawn(&tmp, "create", &channel, None, false);
    wait_for_line(&mut creator, "ready");
    let mut server = spawn(&tmp, "listen", &listener, None, false);
    wait_for_line(&mut server, "ready");
    // Their one-shot servers are in their own directories beside the files, not in the
    // temporary directory.
    assert_eq!(entries(&tmp.0, ".tmp"), Vec::<String>::new());
    assert_eq!(
        entries(&files, "servers-").len(),
        4,
        "two directories, two locks"
    );
    creator.kill();
    reap_killed(&mut creator);
    server.kill();
    reap_killed(&mut server);

    // The killed creator's rendezvous file stays, with no server behind it: a client retries
    // until its deadline, then gets `NotFound`.
    let rendezvous = files.join(format!("shmlink-{channel}.ipc"));
    assert!(rendezvous.exists(), "{} is gone", rendezvous.display());
    let mut client = spawn(&tmp, "connect", &channel, None, false);
    let result = outcome(&mut client, &["connected", "refused"]);
    assert!(result.starts_with("refused"), "{result}");
    assert!(result.contains("no channel or listener"), "{result}");
    assert!(took(&result) < PAST_DEADLINE, "{result}");

    // The next bind, of any name, removes what the dead processes' servers left.
    let mut next = spawn(&tmp, "bind", &unique("next"), None, false);
    assert_eq!(outcome(&mut next, &["bound"]), "bound");
    assert_eq!(entries(&tmp.0, ".tmp"), Vec::<String>::new());
    assert_eq!(entries(&files, "servers-"), Vec::<String>::new());
}

#[test]
fn a_creator_killed_after_its_client_arrived_is_peer_gone_to_it_and_not_found_to_the_next() {
    let tmp = TempDir::new("killed-held");
    let name = unique("killed-held");
    let mut creator = spawn(&tmp, "create", &name, None, false);
    wait_for_line(&mut creator, "ready");
    let mut holder = spawn(&tmp, "hold", &name, None, false);
    wait_for_line(&mut holder, "connected");
    creator.kill();
    reap_killed(&mut creator);
    let said = outcome(&mut holder, &["recv"]);
    assert!(
        said.contains("is gone"),
        "the connected client got {said:?}"
    );
    // A new client finds nothing (the creator, which never sent or received, left its file),
    // and the name is free for the next creator or listener.
    let mut client = spawn(&tmp, "connect", &name, None, false);
    let result = outcome(&mut client, &["connected", "refused"]);
    assert!(result.contains("no channel or listener"), "{result}");
    let mut next = spawn(&tmp, "bind", &name, None, false);
    assert_eq!(outcome(&mut next, &["bound"]), "bound");
}

/// A socket file at `path` that nothing listens on.
fn dead_socket(path: &Path) {
    drop(std::os::unix::net::UnixListener::bind(path).expect("bind a socket"));
}

/// A directory at `path`, mode 0700.
fn private_dir(path: &Path) {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .expect("make a directory");
}

/// A file at `path` with `contents`, mode 0600.
fn private_file(path: &Path, contents: &str) {
    std::fs::write(path, contents).expect("write a file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

#[test]
fn cleanup_removes_only_this_users_own_entries_and_never_follows_a_link() {
    let tmp = TempDir::new("cleanup");
    let name = unique("cleanup");
    let files = tmp.0.join(format!("shmlink-{}", euid()));
    private_dir(&files);
    let victim_dir = tmp.0.join("victim-dir");
    private_dir(&victim_dir);
    private_file(&victim_dir.join("keep"), "keep");
    let victim_file = tmp.0.join("victim-file");
    private_file(&victim_file, "keep");

    // Left by dead processes of this user: removed by the next bind.
    let dead_home = files.join("servers-00000000000000d0");
    private_dir(&dead_home);
    private_dir(&dead_home.join("0"));
    dead_socket(&dead_home.join("0/socket"));
    private_file(&files.join("servers-00000000000000d0.lock"), "");
    let unpublished = files.join(format!("shmlink-{name}.ipc.tmp-1-0-00000000000000d1"));
    private_file(&unpublished, "1\n/s");
    let dead_server = tmp.0.join(".tmpd2");
    private_dir(&dead_server);
    dead_socket(&dead_server.join("socket"));
    let server = dead_server.join("socket");
    private_file(
        &files.join(format!("shmlink-{name}-b.ipc")),
        &format!("listener\n1\n{}", server.display()),
    );
    // Links under the same kinds of names: left alone, and nothing behind them touched.
    let links = [
        (files.join("servers-00000000000000e0"), &victim_dir),
        (files.join("servers-00000000000000e0.lock"), &victim_file),
        (
            files.join(format!("shmlink-{name}.ipc.tmp-1-1-00000000000000e1")),
            &victim_file,
        ),
    ];
    for (link, to) in &links {
        std::os::unix::fs::symlink(to, link).expect("plant a link");
    }
    // Another user's entries under the same kinds of names (root only): left alone.
    let mut theirs = Vec::new();
    if euid() == 0 {
        let home = files.join("servers-00000000000000f0");
        private_dir(&home);
        private_file(&home.join("keep"), "keep");
        let lock = files.join("servers-00000000000000f0.lock");
        private_file(&lock, "");
        let server_dir = tmp.0.join(".tmpf1");
        private_dir(&server_dir);
        let socket = server_dir.join("socket");
        dead_socket(&socket);
        private_file(
            &files.join(format!("shmlink-{name}.ipc")),
            &format!("listener\n1\n{}", socket.display()),
        );
        for path in [&home, &lock, &server_dir, &socket] {
            std::os::unix::fs::lchown(path, Some(OTHER_UID), Some(OTHER_UID)).expect("chown");
        }
        theirs.extend([home.join("keep"), lock, socket]);
    } else {
        eprintln!("another user's entries need root to plant (CI runs as root)");
    }

    let mut next = spawn(&tmp, "bind", &name, None, false);
    assert_eq!(outcome(&mut next, &["bound"]), "bound");
    for gone in [&dead_home, &unpublished, &server] {
        assert!(!gone.exists(), "{} was left", gone.display());
    }
    assert!(!files.join("servers-00000000000000d0.lock").exists());
    for (link, _) in &links {
        let meta = std::fs::symlink_metadata(link).expect("the link is still there");
        assert!(meta.file_type().is_symlink(), "{}", link.display());
    }
    assert_eq!(
        std::fs::read_to_string(victim_dir.join("keep")).expect("victim"),
        "keep"
    );
    assert_eq!(
        std::fs::read_to_string(&victim_file).expect("victim"),
        "keep"
    );
    for path in &theirs {
        assert!(
            std::fs::symlink_metadata(path).is_ok(),
            "{} was removed",
            path.display()
        );
    }
}
