//! [`EndpointListener`] across real processes, where its backends differ or choose themselves
//! (what every surface does alike is in the conformance suite): a killed fallback listener's
//! leftovers removed by the next, and a listener on the forced fallback found by a plain
//! client.
//!
//! Client and server processes are this test binary run again in the role `endpoint-services`
//! (see `child` and `roles`).

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shmlink::{
    Backend, Config, Endpoint, EndpointListener, Error, OpenError, RecvError, WaitStrategy,
};
use support::{
    assert_nothing_left, checked_echo, reap_killed, serial, unique, wait_for_line, ChildGuard,
    NameGuard, Watchdog, WATCHDOG,
};

/// Exit codes of a holding client (see `client`).
const GONE: i32 = 10;
const CLOSED: i32 = 11;

fn backend_arg(backend: Backend) -> &'static str {
    match backend {
        Backend::Shm => "shm",
        Backend::IpcChannel => "ipc",
    }
}

/// Removes whatever a listener `name` may leave on either backend when dropped, even when the
/// test fails: its mapping and its connections' (shm), its rendezvous and lock files (fallback).
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        drop(NameGuard(self.0.clone()));
        let _ = std::fs::remove_file(shmlink::testing::rendezvous_path(&self.0));
        let _ = std::fs::remove_file(shmlink::testing::fallback_listener_lock_path(&self.0));
        let prefix = format!("shmlink-{}.", self.0);
        if let Ok(dir) = std::fs::read_dir("/dev/shm") {
            for entry in dir.flatten() {
                let file = entry.file_name().to_string_lossy().into_owned();
                if let Some(rest) = file.strip_prefix(&prefix) {
                    let _ = shmlink::testing::unlink(&format!("{}.{rest}", self.0));
                }
            }
        }
    }
}

/// Runs this binary again in `role`, its arguments going through the environment so the test
/// harness only runs `child`.
fn spawn_role(role: &str, args: &[&str]) -> ChildGuard {
    spawn_role_with(role, args, &[])
}

/// [`spawn_role`] with extra environment variables.
fn spawn_role_with(role: &str, args: &[&str], env: &[(&str, &str)]) -> ChildGuard {
    let spec = format!("{role} {}", args.join(" "));
    crate::roles::spawn("endpoint-services", &spec, env)
}

/// The role `endpoint-services` of a re-run of this binary: `client`, `auto-server` or
/// `server`, with its arguments.
pub(crate) fn child(spec: &str) {
    let args: Vec<&str> = spec.split_whitespace().collect();
    let code = match args.as_slice() {
        ["client", name, id, count] => client(name, id, count.parse().expect("count")),
        ["auto-server", name] => {
            // `bind` chooses the backend (the environment may force the fallback).
            let listener = EndpointListener::bind(name, &Config::default()).expect("bind");
            println!("ready {}", listener.backend());
            serve(listener, Arc::new(AtomicBool::new(false)));
            0
        }
        ["server", backend, name] => {
            let backend = match *backend {
                "shm" => Backend::Shm,
                _ => Backend::IpcChannel,
            };
            let listener =
                EndpointListener::bind_with(name, &Config::default(), backend, 16).expect("bind");
            println!("ready");
            serve(listener, Arc::new(AtomicBool::new(false)));
            0
        }
        ["connect-nothing", name] => {
            // Connects to a name nothing holds, in a process the environment may force onto
            // the fallback, and says what each connect gave.
            let once = Endpoint::connect(name, WaitStrategy::Block).map(|e| e.backend());
            let timed = Endpoint::connect_timeout(name, WaitStrategy::Block, WAIT_FOR_NOTHING)
                .map(|e| e.backend());
            println!(
                "forced {} connect {once:?} connect_timeout {timed:?}",
                shmlink::testing::forced()
            );
            0
        }
        other => panic!("unknown role {other:?}"),
    };
    std::process::exit(code);
}

/// A client: exchanges `count` checked messages and exits 0 if every reply was right. With
/// `count == 0` it exchanges one, prints `connected`, and waits for the server to go: exits
/// with `GONE` on `PeerGone`, `CLOSED` on `Disconnected`.
fn client(name: &str, id: &str, count: u64) -> i32 {
    let mut ep = match Endpoint::connect_timeout(name, WaitStrategy::Block, WATCHDOG) {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("client {id}: connect: {e}");
            return 2;
        }
    };
    for i in 0..count.max(1) {
        if let Err(code) = checked_echo(&mut ep, id, i) {
            return code;
        }
    }
    if count > 0 {
        return 0;
    }
    println!("connected");
    let code = match ep.recv() {
        Err(RecvError::PeerGone { channel, .. }) if channel.starts_with(name) => GONE,
        Err(RecvError::Disconnected { .. }) => CLOSED,
        other => {
            eprintln!(
                "client {id}: waiting for the server's end: {:?}",
                other.map(|m| m.len())
            );
            6
        }
    };
    code
}

/// Echoes every message of one client until it goes; returns how it went.
fn echo(mut ep: Endpoint) -> Error {
    loop {
        let msg = match ep.recv() {
            Ok(msg) => msg.to_vec(),
            Err(e) => return e.into(),
        };
        if let Err(e) = ep.send(&msg) {
            return e.into();
        }
    }
}

/// Accepts and echoes (a thread per client) until `stop`; returns how each client went.
fn serve(listener: EndpointListener, stop: Arc<AtomicBool>) -> Vec<Error> {
    let mut handlers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept_timeout(Duration::from_millis(50)) {
            Ok(ep) => handlers.push(std::thread::spawn(move || echo(ep))),
            Err(OpenError::Timeout { .. }) => {}
            Err(e) => panic!("accept: {e}"),
        }
    }
    drop(listener);
    handlers
        .into_iter()
        .map(|h| h.join().expect("handler"))
        .collect()
}

/// Connects a client in this process and accepts it (on shared memory a client waits until
/// the server accepts it, so the two run on two threads).
fn connect_and_accept(listener: &EndpointListener) -> (Endpoint, Endpoint) {
    let name = listener.name().to_owned();
    let client =
        std::thread::spawn(move || Endpoint::connect_timeout(&name, WaitStrategy::Block, WATCHDOG));
    let accepted = listener.accept_timeout(WATCHDOG).expect("accept");
    let client = client.join().expect("client thread").expect("connect");
    assert_eq!(client.backend(), listener.backend());
    (client, accepted)
}

fn bind(name: &str, backend: Backend, limit: usize) -> EndpointListener {
    let listener = EndpointListener::bind_with(name, &Config::default(), backend, limit)
        .unwrap_or_else(|e| panic!("bind {name} on {backend}: {e}"));
    assert_eq!(listener.backend(), backend);
    assert_eq!(listener.name(), name);
    assert_eq!(listener.max_clients(), limit);
    listener
}

fn a_killed_server_is_peer_gone_for_every_client(backend: Backend) {
    let _serial = serial();
    let _dog = Watchdog::arm(4 * WATCHDOG, "killed server");
    let name = unique(&format!("epkill-{}", backend_arg(backend)));
    let _cleanup = Cleanup(name.clone());
    let mut server = spawn_role("server", &[backend_arg(backend), &name]);
    wait_for_line(&mut server, "ready");
    let mut clients: Vec<ChildGuard> = (0..3)
        .map(|i| spawn_role("client", &[&name, &i.to_string(), "0"]))
        .collect();
    for c in &mut clients {
        wait_for_line(c, "connected");
    }
    server.kill();
    reap_killed(&mut server);
    for c in &mut clients {
        assert_eq!(
            c.reap_within(WATCHDOG).code(),
            Some(GONE),
            "client {} must see PeerGone naming the channel",
            c.pid()
        );
    }
    // The one-shot server the dead fallback listener waited on (the last line of its
    // rendezvous file), which the new listener removes.
    let dead_server = std::fs::read_to_string(shmlink::testing::rendezvous_path(&name))
        .ok()
        .and_then(|text| text.lines().last().map(std::path::PathBuf::from));
    assert_eq!(dead_server.is_some(), backend == Backend::IpcChannel);
    // The dead server's name is reclaimed by a new one.
    let listener = bind(&name, backend, 4);
    if let Some(socket) = dead_server {
        assert!(!socket.exists(), "{} left", socket.display());
        assert!(
            !socket.parent().unwrap().exists(),
            "{} left",
            socket.display()
        );
    }
    let (mut client, mut ep) = connect_and_accept(&listener);
    client.send(b"again").unwrap();
    assert_eq!(&*ep.recv_timeout(WATCHDOG).unwrap(), b"again");
    // A live listener's name is not bound twice.
    match EndpointListener::bind_with(&name, &Config::default(), backend, 4) {
        Err(OpenError::AlreadyExists { channel: n }) => assert_eq!(n, name),
        other => panic!("second bind of a live name: {other:?}"),
    }
    drop((ep, client, listener));
    assert_nothing_left(&name);
}

/// What the conformance suite checks of a killed listener on every surface, and here, across
/// processes, what only the fallback leaves: the one-shot server of the dead listener, which
/// the next listener of the name removes.
#[test]
fn a_new_fallback_listener_removes_the_server_a_killed_one_left() {
    a_killed_server_is_peer_gone_for_every_client(Backend::IpcChannel);
}

#[test]
fn a_forced_fallback_server_is_found_by_a_plain_client() {
    let _serial = serial();
    let _dog = Watchdog::arm(4 * WATCHDOG, "forced fallback");
    let name = unique("epforced");
    let _cleanup = Cleanup(name.clone());
    let mut server = spawn_role_with("auto-server", &[&name], &[("SHMLINK_FORCE_FALLBACK", "1")]);
    wait_for_line(&mut server, "ready ipc-channel");
    // This process is not forced: `connect` finds the fallback listener by its name.
    for round in 0..2 {
        let mut client = Endpoint::connect_timeout(&name, WaitStrategy::Block, WATCHDOG)
            .expect("connect to the forced server");
        assert_eq!(client.backend(), Backend::IpcChannel);
        let msg = format!("round {round}");
        client.send(msg.as_bytes()).unwrap();
        assert_eq!(&*client.recv_timeout(WATCHDOG).unwrap(), msg.as_bytes());
    }
    server.kill();
    reap_killed(&mut server);
    // A new listener reclaims the name (and what the killed one left); closing it leaves nothing.
    drop(bind(&name, Backend::IpcChannel, 1));
    assert_nothing_left(&name);
}

/// How long a connect to a name nothing holds keeps looking.
const WAIT_FOR_NOTHING: Duration = Duration::from_millis(50);

/// A connect to a name that has neither a mapping nor a rendezvous file is `NotFound`, naming
/// the channel, from `connect` and from `connect_timeout`, in a process that creates on shared
/// memory and in one forced onto the fallback alike.
#[test]
fn a_connect_to_nothing_is_not_found_naming_the_channel_on_either_backend() {
    let _serial = serial();
    let name = unique("epnothing");
    let expected =
        format!("connect Err(NotFound {{ channel: {name:?} }}) connect_timeout Err(NotFound {{ channel: {name:?} }})");
    for (forced, env) in [(false, "0"), (true, "1")] {
        let mut child = spawn_role_with(
            "connect-nothing",
            &[&name],
            &[(shmlink::testing::FORCE_FALLBACK_ENV, env)],
        );
        let status = child.reap();
        let out = child.read_all();
        assert!(status.success(), "{status}: {out}");
        // After the test harness's own words on the line.
        let line = out
            .lines()
            .find_map(|l| l.find("forced ").map(|at| &l[at..]))
            .unwrap_or_else(|| panic!("the child said nothing: {out}"));
        assert_eq!(line, format!("forced {forced} {expected}"));
    }
    // And here, in this process.
    for result in [
        Endpoint::connect(&name, WaitStrategy::Block),
        Endpoint::connect_timeout(&name, WaitStrategy::Block, WAIT_FOR_NOTHING),
    ] {
        match result {
            Err(e @ OpenError::NotFound { .. }) => {
                assert!(e.to_string().contains(&name), "{e}");
            }
            other => panic!("connect to nothing: {other:?}"),
        }
    }
    assert_nothing_left(&name);
}

/// Something planted in the shared-memory namespace under a name, removed when dropped.
struct Planted(std::path::PathBuf);

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What can sit in `/dev/shm` under a channel's name without being a mapping of ours: a
/// dangling link, a directory, and, where this process may give a file away (as root), another
/// user's object.
fn plantings() -> Vec<&'static str> {
    let mut what = vec!["a link", "a directory"];
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        what.push("another user's object");
    }
    what
}

/// Plants `what` at `path`.
fn plant(what: &str, path: &std::path::Path) -> Planted {
    match what {
        "a link" => std::os::unix::fs::symlink("/nonexistent-shmlink-target", path).expect("link"),
        "a directory" => std::fs::create_dir(path).expect("directory"),
        "another user's object" => {
            std::fs::write(path, [0u8; 64]).expect("file");
            std::os::unix::fs::chown(path, Some(65534), Some(65534)).expect("chown");
        }
        _ => unreachable!(),
    }
    Planted(path.to_owned())
}

/// The fallback's rendezvous file decides when no mapping of ours is under the name, whatever
/// else sits there in `/dev/shm` (which any user can write): the connect reaches the fallback
/// channel.
#[test]
fn a_fallback_channel_is_found_past_whatever_else_is_planted_under_its_name_in_dev_shm() {
    let _serial = serial();
    for what in plantings() {
        let name = unique("epplanted");
        let mut server =
            Endpoint::create_with(&name, &Config::default(), Backend::IpcChannel).expect("create");
        let planted = plant(what, &support::shm_path(&name));
        let mut client = Endpoint::connect_timeout(&name, WaitStrategy::Block, WATCHDOG)
            .unwrap_or_else(|e| panic!("past {what}: {e:?}"));
        assert_eq!(client.backend(), Backend::IpcChannel, "past {what}");
        client.send(b"past").unwrap();
        assert_eq!(
            &*server.recv_timeout(WATCHDOG).unwrap(),
            b"past",
            "past {what}"
        );
        drop((client, server, planted));
        assert_nothing_left(&name);
    }
}

/// Without a rendezvous file, what sits under the name in `/dev/shm` is reported for what it
/// is, naming the channel.
#[test]
fn without_a_rendezvous_file_what_is_planted_under_the_name_is_reported_for_what_it_is() {
    for what in plantings() {
        let name = unique("epplantedonly");
        let planted = plant(what, &support::shm_path(&name));
        let err = Endpoint::connect(&name, WaitStrategy::Block).expect_err(what);
        match (what, &err) {
            ("another user's object", OpenError::NotPrivate { owner: 65534, .. }) => {}
            ("a link" | "a directory", OpenError::NotAChannel { channel: n, .. }) if *n == name => {
            }
            _ => panic!("{what}: {err:?}"),
        }
        drop(planted);
        assert_nothing_left(&name);
    }
}

/// A mapping of ours under the name is chosen before a rendezvous file of the same name.
#[test]
fn a_mapping_under_the_name_is_chosen_before_a_rendezvous_file() {
    let name = unique("epboth");
    let fallback =
        Endpoint::create_with(&name, &Config::default(), Backend::IpcChannel).expect("fallback");
    let mut shm = Endpoint::create_with(&name, &Config::default(), Backend::Shm).expect("shm");
    let mut client = Endpoint::connect(&name, WaitStrategy::Block).expect("connect");
    assert_eq!(client.backend(), Backend::Shm);
    client.send(b"to the mapping").unwrap();
    assert_eq!(&*shm.recv_timeout(WATCHDOG).unwrap(), b"to the mapping");
    drop((client, shm, fallback));
    assert_nothing_left(&name);
}
