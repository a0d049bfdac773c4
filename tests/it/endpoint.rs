//! `Endpoint` across real processes, on both backends: the peer's pid and liveness, a clean
//! close (`Disconnected`) and a killed peer (`PeerGone`) on either side. The child is this test
//! binary run again, in the mode named by an environment variable.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use shmlink::{Backend, Config, Endpoint, OpenError, RecvError, SendError, WaitStrategy};
use support::{reap_killed, ChildGuard, NameGuard, WATCHDOG};

/// Set in a child: `<mode> <backend> <name>`.
const CHILD_ENV: &str = "SHMLINK_ENDPOINT_TEST_CHILD";

/// Removes the fallback's rendezvous file when dropped (a killed creator leaves it behind).
struct RendezvousGuard(String);

impl Drop for RendezvousGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(shmlink::testing::rendezvous_path(&self.0));
    }
}

fn backend_of(s: &str) -> Backend {
    match s {
        "shm" => Backend::Shm,
        _ => Backend::IpcChannel,
    }
}

/// The child's side; a no-op unless this process was started as a child.
#[test]
fn child_process_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut words = spec.split(' ');
    let (mode, backend, name) = (
        words.next().unwrap(),
        words.next().unwrap(),
        words.next().unwrap(),
    );
    let mut ep = match mode {
        "create" => Endpoint::create_with(
            name,
            &Config::with_wait(WaitStrategy::Block),
            backend_of(backend),
        )
        .expect("child create"),
        _ => Endpoint::connect_timeout(name, WaitStrategy::Block, WATCHDOG).expect("child connect"),
    };
    // Echo until the parent goes; in "once" mode, echo one message and close cleanly.
    let mut buf = Vec::new();
    loop {
        match ep.recv() {
            Ok(msg) => {
                buf.clear();
                buf.extend_from_slice(&msg);
            }
            Err(_) => break,
        }
        if ep.send(&buf).is_err() {
            break;
        }
        if mode == "once" {
            break;
        }
    }
    drop(ep);
    std::process::exit(0);
}

fn spawn_child(mode: &str, backend: Backend, name: &str) -> ChildGuard {
    let child = Command::new(std::env::current_exe().expect("current_exe"))
        .args(["--exact", "endpoint::child_process_entry", "--test-threads=1"])
        .env(CHILD_ENV, format!("{mode} {backend} {name}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    ChildGuard::from(child)
}

fn unique(test: &str, backend: Backend) -> String {
    support::unique(&format!("ep-{test}-{backend}"))
}

/// A round trip, after which both ends are surely connected.
fn round_trip(ep: &mut Endpoint) {
    ep.send(b"ping").expect("send");
    let reply = ep.recv_timeout(WATCHDOG).expect("echo reply");
    assert_eq!(&*reply, b"ping");
}

/// Kills the child and expects the next receive to report it gone by pid.
fn expect_peer_gone(ep: &mut Endpoint, child: &mut ChildGuard) {
    let pid = child.pid();
    let backend = ep.backend();
    let name = ep.name().to_owned();
    child.kill();
    match ep.recv_timeout(WATCHDOG) {
        Err(RecvError::PeerGone { pid: gone, channel }) => {
            assert_eq!(gone, pid);
            assert_eq!(
                channel, name,
                "{backend} backend: PeerGone names the channel"
            );
        }
        Err(e) => panic!("{backend} backend: expected PeerGone, got {e:?}"),
        Ok(msg) => panic!("{backend} backend: unexpected message {:?}", &*msg),
    }
    reap_killed(child);
    assert!(!ep.is_peer_connected());
    // A send fails too once the socket is gone; shared memory only looks at the peer when it
    // has to wait for room, so there the send may still land in the ring.
    match ep.send(b"anyone?") {
        Err(SendError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        Ok(()) if backend == Backend::Shm => {}
        other => panic!("{backend} backend: a send to a dead peer gave {other:?}"),
    }
}

fn killed_connector(backend: Backend) {
    let name = unique("kill-conn", backend);
    let _unlink = NameGuard(name.clone());
    let _rendezvous = RendezvousGuard(name.clone());
    let config = Config::with_wait(WaitStrategy::Block);
    let mut ep = Endpoint::create_with(&name, &config, backend).expect("create");
    assert_eq!(ep.backend(), backend);
    let mut child = spawn_child("echo", backend, &name);
    round_trip(&mut ep);
    assert_eq!(ep.peer_pid(), Some(child.pid()));
    assert!(ep.is_peer_connected());
    expect_peer_gone(&mut ep, &mut child);
}

fn killed_creator(backend: Backend) {
    let name = unique("kill-creator", backend);
    let _unlink = NameGuard(name.clone());
    let _rendezvous = RendezvousGuard(name.clone());
    let mut child = spawn_child("create", backend, &name);
    let mut ep = Endpoint::connect_timeout(&name, WaitStrategy::Block, WATCHDOG).expect("connect");
    assert_eq!(ep.backend(), backend);
    round_trip(&mut ep);
    assert_eq!(ep.peer_pid(), Some(child.pid()));
    assert!(ep.is_peer_connected());
    expect_peer_gone(&mut ep, &mut child);
}

fn clean_close(backend: Backend) {
    let name = unique("close", backend);
    let _unlink = NameGuard(name.clone());
    let _rendezvous = RendezvousGuard(name.clone());
    let config = Config::with_wait(WaitStrategy::Block);
    let mut ep = Endpoint::create_with(&name, &config, backend).expect("create");
    let mut child = spawn_child("once", backend, &name);
    round_trip(&mut ep);
    assert!(child.reap().success());
    match ep.recv_timeout(WATCHDOG) {
        Err(RecvError::Disconnected(channel)) => {
            assert_eq!(channel, name, "{backend:?}: Disconnected names the channel")
        }
        other => panic!(
            "{backend:?}: expected Disconnected, got {:?}",
            other.map(|m| m.len())
        ),
    }
    assert!(!ep.is_peer_connected());
}

#[test]
fn a_killed_connector_is_peer_gone_on_the_fallback() {
    killed_connector(Backend::IpcChannel);
}

#[test]
fn a_killed_creator_is_peer_gone_on_the_fallback() {
    killed_creator(Backend::IpcChannel);
}

#[test]
fn a_clean_close_is_disconnected_on_the_fallback() {
    clean_close(Backend::IpcChannel);
}

#[test]
fn a_killed_connector_is_peer_gone_on_shared_memory() {
    killed_connector(Backend::Shm);
}

#[test]
fn a_killed_creator_is_peer_gone_on_shared_memory() {
    killed_creator(Backend::Shm);
}

#[test]
fn a_clean_close_is_disconnected_on_shared_memory() {
    clean_close(Backend::Shm);
}

#[test]
fn connect_timeout_to_a_missing_name_says_which_name() {
    let name = support::unique("ep-missing");
    let err = Endpoint::connect_timeout(&name, WaitStrategy::Block, Duration::from_millis(20))
        .unwrap_err();
    assert!(
        matches!(&err, OpenError::NotFound(n) if *n == name),
        "{err:?}"
    );
    assert!(err.to_string().contains(&name), "{err}");
}

#[test]
fn recv_json_timeout_on_both_backends() {
    for backend in [Backend::Shm, Backend::IpcChannel] {
        let name = unique("json", backend);
        let _unlink = NameGuard(name.clone());
        let _rendezvous = RendezvousGuard(name.clone());
        let config = Config::with_wait(WaitStrategy::Block);
        let mut a = Endpoint::create_with(&name, &config, backend).expect("create");
        let mut b = Endpoint::connect(&name, WaitStrategy::Block).expect("connect");
        assert_eq!(b.backend(), backend);
        assert!(matches!(
            b.recv_json_timeout::<Vec<u32>>(Duration::from_millis(20)),
            Err(RecvError::Timeout)
        ));
        a.send_json(&[1u32, 2, 3]).unwrap();
        assert_eq!(
            b.recv_json_timeout::<Vec<u32>>(WATCHDOG).unwrap(),
            [1, 2, 3]
        );
    }
}

/// Every send has a deadline form on both backends. On shared memory it bounds the wait for
/// room in the ring; on the fallback, the wait for the peer to connect.
#[test]
fn send_timeout_and_send_json_timeout_on_both_backends() {
    let short = Duration::from_millis(20);
    for backend in [Backend::Shm, Backend::IpcChannel] {
        let name = unique("send-timeout", backend);
        let _unlink = NameGuard(name.clone());
        let _rendezvous = RendezvousGuard(name.clone());
        let config = Config {
            capacity: 4096,
            wait: WaitStrategy::Block,
        };
        let mut a = Endpoint::create_with(&name, &config, backend).expect("create");
        let mut sent = 0usize;
        if backend == Backend::IpcChannel {
            // Nobody has connected: nothing can be sent yet.
            assert!(matches!(
                a.send_timeout(b"early", short),
                Err(SendError::Timeout)
            ));
            assert!(matches!(
                a.send_json_timeout(&"early", short),
                Err(SendError::Timeout)
            ));
        } else {
            // Nobody reads: the ring fills up, then both forms give up.
            while a.send_timeout(&[7; 100], short).is_ok() {
                sent += 1;
            }
            assert!(sent > 0);
            assert!(matches!(
                a.send_timeout(&[7; 100], short),
                Err(SendError::Timeout)
            ));
            assert!(matches!(
                a.send_json_timeout(&"late", short),
                Err(SendError::Timeout)
            ));
        }
        let mut b = Endpoint::connect(&name, WaitStrategy::Block).expect("connect");
        for _ in 0..sent {
            assert_eq!(&*b.recv_timeout(WATCHDOG).expect("filler"), &[7; 100]);
        }
        a.send_timeout(b"bytes", WATCHDOG).expect("send_timeout");
        a.send_json_timeout(&[1u32, 2, 3], WATCHDOG)
            .expect("send_json_timeout");
        assert_eq!(&*b.recv_timeout(WATCHDOG).expect("bytes"), b"bytes");
        assert_eq!(
            b.recv_json_timeout::<Vec<u32>>(WATCHDOG).unwrap(),
            [1, 2, 3]
        );
    }
}

/// The rest of the method set on both backends, in one process: grants written in place and
/// committed, receives into the caller's buffer, and the `try_` forms.
#[test]
fn grants_receives_into_a_buffer_and_try_forms_on_both_backends() {
    for backend in [Backend::Shm, Backend::IpcChannel] {
        let name = unique("methods", backend);
        let _unlink = NameGuard(name.clone());
        let _rendezvous = RendezvousGuard(name.clone());
        let config = Config::with_wait(WaitStrategy::Block);
        let mut a = Endpoint::create_with(&name, &config, backend).expect("create");
        let mut b = Endpoint::connect(&name, WaitStrategy::Block).expect("connect");
        // Nothing to receive yet, on either side.
        assert!(matches!(b.try_recv(), Err(RecvError::Empty)), "{backend}");
        let mut buf = Vec::new();
        assert!(matches!(b.try_recv_into(&mut buf), Err(RecvError::Empty)));
        // A grant: written in place, only the bytes committed go out.
        let mut grant = a.reserve(64).expect("reserve");
        assert_eq!(grant.len(), 64);
        grant[..5].copy_from_slice(b"grant");
        grant.commit(5).expect("commit");
        assert_eq!(&*b.recv_timeout(WATCHDOG).unwrap(), b"grant", "{backend}");
        // A grant dropped without a commit sends nothing.
        drop(a.try_reserve(16).expect("try_reserve"));
        assert!(matches!(
            b.recv_timeout(Duration::from_millis(20)),
            Err(RecvError::Timeout)
        ));
        // Past one frame (or, on the fallback, past its largest message): never.
        let too_long = a.max_frame() + 1;
        assert!(matches!(
            a.try_reserve(too_long),
            Err(SendError::TooLarge { len, .. }) if len == too_long
        ));
        // Into the caller's buffer, a short message and one longer than a frame.
        a.try_send(b"short").expect("try_send");
        assert_eq!(b.recv_into_timeout(&mut buf, WATCHDOG).unwrap(), 5);
        assert_eq!(buf, b"short");
        let long: Vec<u8> = (0..(3 << 20)).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|s| {
            let sender = s.spawn(|| a.send(&long));
            assert_eq!(b.recv_into(&mut buf).unwrap(), long.len(), "{backend}");
            sender.join().unwrap().expect("send a long message");
        });
        assert!(buf == long, "{backend}: the long message arrived changed");
        a.try_send_json(&("json", 7)).expect("try_send_json");
        let got: (String, u32) = loop {
            match b.try_recv_json() {
                Err(RecvError::Empty) => std::thread::yield_now(),
                other => break other.unwrap(),
            }
        };
        assert_eq!(got, ("json".to_owned(), 7));
    }
}
