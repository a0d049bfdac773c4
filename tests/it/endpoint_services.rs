//! [`EndpointListener`] across real processes, where its backends differ or choose themselves
//! (what every surface does alike is in the conformance suite): a killed fallback listener's
//! leftovers removed by the next, and a listener on the forced fallback found by a plain
//! client.
//!
//! Client and server processes are this test binary run again with `SHMLINK_EPSVC_ROLE` set
//! (see `child`).

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shmlink::{
    Backend, Config, Endpoint, EndpointListener, Error, OpenError, RecvError, WaitStrategy,
};
use support::{
    assert_nothing_left, checked_echo, reap_killed, respawn, serial, unique, wait_for_line,
    ChildGuard, NameGuard, Watchdog, WATCHDOG,
};

const ROLE: &str = "SHMLINK_EPSVC_ROLE";

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
    let mut env = env.to_vec();
    env.push((ROLE, &spec));
    respawn("endpoint_services::child", &env)
}

/// The entry point of the re-executed processes; a no-op in a normal test run.
#[test]
fn child() {
    let Ok(spec) = std::env::var(ROLE) else {
        return;
    };
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
