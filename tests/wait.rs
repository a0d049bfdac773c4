//! Waiting costs nothing while idle and still ends at once when the peer dies: a blocked
//! receiver makes no timed wake-ups, and a peer killed while we sleep gives `PeerGone` without
//! them. Real processes (`shmlink-echo`); the only time limits are watchdogs.

mod support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use shmlink::{Channel, Config, Error, WaitStrategy};
use support::{echo, serial, unique, NameGuard};

/// How long the idle receivers stay blocked.
const IDLE: Duration = Duration::from_millis(2500);
/// Voluntary context switches allowed to a thread blocked for `IDLE`: about one wake-up a
/// second, with room for the few a first wait makes (starting the death watcher). A receiver
/// that wakes every few milliseconds to look at its peer makes hundreds.
const MAX_SWITCHES: u64 = 5;

/// Voluntary context switches of the calling thread so far.
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .expect("voluntary_ctxt_switches in /proc/thread-self/status")
        .trim()
        .parse()
        .expect("a number")
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
    let before = voluntary_switches();
    let started = Instant::now();
    assert!(matches!(ch.recv_timeout(IDLE), Err(Error::Timeout)));
    let switches = voluntary_switches() - before;
    eprintln!(
        "wait: receiver blocked {:.0} ms with a deadline: {switches} voluntary context switches",
        started.elapsed().as_secs_f64() * 1e3
    );
    assert!(
        switches <= MAX_SWITCHES,
        "{switches} wake-ups while blocked for {IDLE:?}"
    );
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
        let before = voluntary_switches();
        let msg = rx.recv().expect("recv");
        let switches = voluntary_switches() - before;
        assert_eq!(&*msg, b"wake up");
        eprintln!("wait: receiver blocked {IDLE:?} without a deadline: {switches} switches");
        assert!(
            switches <= MAX_SWITCHES,
            "{switches} wake-ups while blocked for {IDLE:?}"
        );
    });
}

/// Blocks in `recv` while another thread SIGKILLs the peer; `PeerGone` must end the wait within
/// the one-second watchdog. Returns the time from the kill to the error.
fn killed_while_blocked(wait: WaitStrategy) -> Duration {
    let _serial = serial();
    let (mut ch, _name, mut child) = connected(&format!("killed-{wait}"), wait);
    let pid = child.pid();
    let (killed_tx, killed_rx) = mpsc::channel();
    let killer = std::thread::spawn(move || {
        // Let the receiver settle into its wait; a bounded sleep, nothing to poll for.
        std::thread::sleep(Duration::from_millis(200));
        killed_tx.send(Instant::now()).unwrap();
        // SAFETY: plain syscall on the pid of our own child, which is not reaped before this
        // thread is joined.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    });
    let result = ch.recv_timeout(Duration::from_millis(1200));
    let returned = Instant::now();
    killer.join().unwrap();
    let killed = killed_rx.recv().unwrap();
    match result {
        Err(Error::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        Err(Error::Timeout) => panic!("wait={wait}: peer death not noticed within 1 s"),
        Err(e) => panic!("wait={wait}: expected PeerGone, got {e}"),
        Ok(_) => panic!("wait={wait}: a message from a killed echo"),
    }
    child.reap();
    let took = returned.saturating_duration_since(killed);
    eprintln!(
        "wait: peer SIGKILLed while blocked, wait={wait}: PeerGone after {:.2} ms",
        took.as_secs_f64() * 1e3
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
