//! Waiting costs nothing while idle and still ends at once when the peer dies: a blocked
//! receiver makes no timed wake-ups, and a peer killed while we sleep gives `PeerGone` without
//! them. Real processes (`shmlink-echo`); the only time limits are watchdogs and how soon a death
//! must be reported.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use shmlink::{Channel, Config, RecvError, WaitStrategy};
use support::{echo, measure, serial, thread_switches, unique, Cost, NameGuard};

/// How long the idle receivers stay blocked.
const IDLE: Duration = Duration::from_millis(2500);
/// Voluntary context switches allowed to a thread blocked for `IDLE`: the sleep that ends the
/// wait, with room for a lock or two taken on the way. The once-a-second look at the peer's
/// lock happens on the death watcher's thread, not the sleeper's. A receiver that wakes every
/// few milliseconds to look at its peer makes hundreds.
const MAX_SWITCHES: u64 = 3;

/// The death watcher's thread wakes once a second to look at the peers' locks, and for nothing
/// else while no peer dies: fails the test if it woke more often during `cost`'s wait. Call
/// with its switches from before the wait.
fn assert_watcher_looked_once_a_second(before: Option<u64>, cost: &Cost) {
    let before = before.expect("the first round trip started the death watcher");
    let woke = thread_switches("shmlink-watch").expect("the death watcher runs") - before;
    let most = cost.wall.as_secs() + 2;
    eprintln!("wait: the death watcher woke {woke} times meanwhile");
    assert!(
        woke <= most,
        "the death watcher woke {woke} times in {:?} (at most {most})",
        cost.wall
    );
}

/// A channel to a fresh `shmlink-echo` (Block), after one round trip.
fn connected(test: &str, wait: WaitStrategy) -> (Channel, NameGuard, support::ChildGuard) {
    let name = unique(test);
    let guard = NameGuard(name.clone());
    let config = Config {
        capacity: 1 << 16,
        wait,
    };
    let mut ch = Channel::create(&name, &config).expect("create");
    let child = echo(&[&name, "block"]);
    ch.send(b"hello").expect("send");
    assert_eq!(
        &*ch.recv_timeout(support::WATCHDOG).expect("echo"),
        b"hello"
    );
    (ch, guard, child)
}

#[test]
fn an_idle_receiver_with_a_deadline_wakes_up_only_at_the_deadline() {
    let _serial = serial();
    let (mut ch, _name, _child) = connected("idle-deadline", WaitStrategy::Block);
    let watcher = thread_switches("shmlink-watch");
    let (got, cost) = measure(|| ch.recv_timeout(IDLE).map(|m| m.to_vec()));
    assert!(matches!(got, Err(RecvError::Timeout)), "{got:?}");
    assert!(
        cost.wall >= IDLE,
        "the wait ended {:?} before its deadline",
        IDLE - cost.wall
    );
    cost.assert_idle("wait: receiver blocked with a deadline", MAX_SWITCHES);
    assert_watcher_looked_once_a_second(watcher, &cost);
}

#[test]
fn an_idle_receiver_without_a_deadline_sleeps_until_data_comes() {
    let _serial = serial();
    let (mut ch, _name, _child) = connected("idle-forever", WaitStrategy::Block);
    let (tx, rx) = ch.split();
    std::thread::scope(|s| {
        s.spawn(|| {
            // The message that ends the idle period (echoed back by the child); a bounded sleep,
            // nothing to poll for.
            std::thread::sleep(IDLE);
            tx.send(b"wake up").expect("send");
        });
        let watcher = thread_switches("shmlink-watch");
        let (msg, cost) = measure(|| rx.recv().map(|m| m.to_vec()));
        assert_eq!(msg.expect("recv"), b"wake up");
        cost.assert_idle("wait: receiver blocked without a deadline", MAX_SWITCHES);
        assert_watcher_looked_once_a_second(watcher, &cost);
    });
}

/// How long after the peer's process exited a waiting receive may take to report it: `Block`
/// is woken at once by the death watcher, `Spin` and `SpinYield` look every 5 ms; the margin is
/// for a loaded machine.
const PEER_GONE_WITHIN: Duration = Duration::from_millis(50);

/// Blocks in `recv` while another thread SIGKILLs the peer; `PeerGone` must end the wait within
/// [`PEER_GONE_WITHIN`] of the peer's exit (the one-second deadline is the watchdog). Returns the
/// time from the exit to the error.
fn killed_while_blocked(wait: WaitStrategy) -> Duration {
    let _serial = serial();
    let (mut ch, _name, mut child) = connected(&format!("killed-{wait}"), wait);
    let pid = child.pid();
    let (died_tx, died_rx) = mpsc::channel();
    let killer = std::thread::spawn(move || {
        // Let the receiver settle into its wait; a bounded sleep, nothing to poll for.
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: plain syscall on the pid of our own child, which is not reaped before this
        // thread is joined.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        died_tx.send(support::exited(pid)).unwrap();
    });
    let result = ch.recv_timeout(Duration::from_millis(1200));
    let returned = Instant::now();
    killer.join().unwrap();
    let died = died_rx.recv().unwrap();
    match result {
        Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        Err(RecvError::Timeout) => panic!("wait={wait}: peer death not noticed within 1 s"),
        Err(e) => panic!("wait={wait}: expected PeerGone, got {e}"),
        Ok(_) => panic!("wait={wait}: a message from a killed echo"),
    }
    child.reap();
    let took = returned.saturating_duration_since(died);
    eprintln!(
        "wait: peer SIGKILLed while blocked, wait={wait}: PeerGone {:.2} ms after it exited",
        took.as_secs_f64() * 1e3
    );
    assert!(
        took <= PEER_GONE_WITHIN,
        "wait={wait}: PeerGone came {took:?} after the peer exited"
    );
    took
}

#[test]
fn a_peer_killed_while_we_block_gives_peer_gone_spin() {
    killed_while_blocked(WaitStrategy::Spin);
}

#[test]
fn a_peer_killed_while_we_block_gives_peer_gone_yield() {
    killed_while_blocked(WaitStrategy::SpinYield);
}

#[test]
fn a_peer_killed_while_we_block_gives_peer_gone_block() {
    killed_while_blocked(WaitStrategy::Block);
}
