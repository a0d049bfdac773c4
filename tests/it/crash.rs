//! A peer killed with SIGKILL in the middle of a stream: the other side's next receive reports
//! `PeerGone`, and the name can be created again. Real processes, every wait strategy, both
//! roles. Each death must be reported within 50 ms of the peer's exit; the measured times are
//! printed (run with `--nocapture` to see them).

use crate::support;

use std::time::{Duration, Instant};

use shmlink::{Channel, Config, RecvError, SendError, WaitStrategy};
use support::{echo, echo_creator, exited, serial, unique, ChildGuard, NameGuard, WATCHDOG};

/// Receives stream frames until `count` have arrived, checking their sequence numbers.
fn receive_stream(ch: &mut Channel, count: u64) {
    for expected in 0..count {
        let frame = ch.recv_timeout(WATCHDOG).expect("stream frame");
        let seq = u64::from_le_bytes(frame[..8].try_into().expect("8-byte sequence number"));
        assert_eq!(seq, expected, "stream out of order");
        assert_eq!(frame.len(), 8 + (seq % 256) as usize);
    }
}

/// How long after the peer's process exited a receive may take to report it, frames left in
/// the ring drained first: `Block` is woken at once, `Spin` and `SpinYield` look every 5 ms; the
/// margin is for a loaded machine.
const PEER_GONE_WITHIN: Duration = Duration::from_millis(50);

/// Two threads that keep both cores busy until dropped: a death must be reported in time on a
/// busy machine too, where a thread that yields may not get its core back for a time slice.
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start() -> Busy {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..2)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    // Load for the test's measured moment; no data to wait for.
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Kills `child` and measures how long the next receives take to report it gone (frames still
/// in the ring are drained first), from the moment its process exited. Fails past
/// [`PEER_GONE_WITHIN`].
fn kill_and_detect(ch: &mut Channel, child: &mut ChildGuard) -> Duration {
    let pid = child.pid();
    let _busy = Busy::start();
    child.kill();
    let killed = Instant::now();
    // The exit is seen on another thread, which leaves the child unreaped.
    let died = std::thread::spawn(move || exited(pid));
    let mut drained = 0u64;
    loop {
        let left = WATCHDOG.saturating_sub(killed.elapsed());
        match ch.recv_timeout(left) {
            Ok(_) => drained += 1,
            Err(RecvError::PeerGone { pid: gone, .. }) => {
                assert_eq!(gone, pid, "PeerGone names another process");
                let returned = Instant::now();
                let died = died.join().expect("the exit seen");
                // The child is a zombie until here: detection must not need it reaped.
                child.reap();
                let took = returned.saturating_duration_since(died);
                assert!(
                    took <= PEER_GONE_WITHIN,
                    "PeerGone came {took:?} after the peer exited ({drained} frames drained)"
                );
                return took;
            }
            Err(RecvError::Timeout { .. }) => panic!("peer death not detected within {WATCHDOG:?}"),
            Err(e) => panic!("expected PeerGone, got {e}"),
        }
    }
}

/// A round trip through a fresh `shmlink-echo` on `name`, to show the new channel works.
fn round_trip(ch: &mut Channel, name: &str, wait: WaitStrategy) {
    let _echo = echo(&[name, wait.as_str()]);
    ch.send(b"after the crash").expect("send");
    let reply = ch.recv_timeout(WATCHDOG).expect("echo reply");
    assert_eq!(&*reply, b"after the crash");
}

fn connector_killed(wait: WaitStrategy) {
    let _serial = serial();
    let name = unique(&format!("crash-conn-{wait}"));
    let _unlink = NameGuard(name.clone());
    let config = Config {
        capacity: 1 << 16,
        wait,
    };
    let mut ch = Channel::create(&name, &config).expect("create");
    let mut child = echo(&["--stream", &name, wait.as_str()]);
    receive_stream(&mut ch, 2000);
    let took = kill_and_detect(&mut ch, &mut child);
    eprintln!(
        "crash: connector killed, wait={wait}: creator got PeerGone {:.2} ms after it exited",
        took.as_secs_f64() * 1e3
    );
    // The name is free again once the old channel is dropped, and a new one works.
    drop(ch);
    let mut ch = Channel::create(&name, &config).expect("create again after the crash");
    round_trip(&mut ch, &name, wait);
}

fn creator_killed(wait: WaitStrategy) {
    let _serial = serial();
    let name = unique(&format!("crash-creator-{wait}"));
    let _unlink = NameGuard(name.clone());
    let mut child = echo_creator(&["--stream"], &name, wait.as_str());
    let mut ch = Channel::connect_timeout(&name, wait, WATCHDOG).expect("connect");
    receive_stream(&mut ch, 2000);
    let took = kill_and_detect(&mut ch, &mut child);
    eprintln!(
        "crash: creator killed, wait={wait}: connector got PeerGone {:.2} ms after it exited",
        took.as_secs_f64() * 1e3
    );
    // The dead creator's segment is still there; creating the name reclaims it, even while the
    // old connection is still open here.
    assert!(support::shm_path(&name).exists(), "stale segment vanished");
    let config = Config {
        capacity: 1 << 16,
        wait,
    };
    let mut fresh = Channel::create(&name, &config).expect("create over a dead creator's segment");
    assert!(matches!(ch.try_recv(), Err(RecvError::PeerGone { .. })));
    drop(ch);
    round_trip(&mut fresh, &name, wait);
}

#[test]
fn connector_killed_spin() {
    connector_killed(WaitStrategy::Spin);
}

#[test]
fn connector_killed_yield() {
    connector_killed(WaitStrategy::SpinYield);
}

#[test]
fn connector_killed_block() {
    connector_killed(WaitStrategy::Block);
}

#[test]
fn creator_killed_spin() {
    creator_killed(WaitStrategy::Spin);
}

#[test]
fn creator_killed_yield() {
    creator_killed(WaitStrategy::SpinYield);
}

#[test]
fn creator_killed_block() {
    creator_killed(WaitStrategy::Block);
}

/// A peer that is killed while this side already waits for room (the ring towards it is full)
/// is detected too.
#[test]
fn peer_killed_while_we_wait_for_room() {
    let _serial = serial();
    for wait in WaitStrategy::ALL {
        let name = unique(&format!("crash-full-{wait}"));
        let _unlink = NameGuard(name.clone());
        let mut ch = Channel::create(
            &name,
            &Config {
                capacity: 4096,
                wait,
            },
        )
        .expect("create");
        // A streaming peer sends and never reads: the ring towards it fills up.
        let mut child = echo(&["--stream", &name, wait.as_str()]);
        ch.recv_timeout(WATCHDOG).expect("the peer is streaming");
        let pid = child.pid();
        // Kill it from another thread once we are (very likely) asleep waiting for room. The
        // pid cannot be reused before we reap the child below.
        let (killed_tx, killed_rx) = std::sync::mpsc::channel();
        let busy = Busy::start();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            // SAFETY: kill takes no pointers; the pid is our unreaped child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let _ = killed_tx.send(exited(pid));
        });
        let big = vec![7u8; 1000];
        let outcome = loop {
            match ch.send_timeout(&big, WATCHDOG) {
                Ok(()) => {}
                other => break other,
            }
        };
        let returned = Instant::now();
        drop(busy);
        killer.join().expect("killer thread");
        let died = killed_rx.recv().expect("exit time");
        match outcome {
            Err(SendError::PeerGone { pid: gone, .. }) => {
                assert_eq!(gone, pid);
                let took = returned.saturating_duration_since(died);
                eprintln!(
                    "crash: peer killed while we wait for room, wait={wait}: PeerGone {:.2} ms \
                     after it exited",
                    took.as_secs_f64() * 1e3
                );
                assert!(
                    took <= PEER_GONE_WITHIN,
                    "wait={wait}: PeerGone came {took:?} after the peer exited"
                );
            }
            Err(e) => panic!("expected PeerGone, got {e}"),
            Ok(()) => unreachable!(),
        }
        child.reap();
    }
}
