//! Waiting costs nothing while idle and still ends at once when the peer dies: a blocked
//! receiver makes no timed wake-ups, and a peer killed while we sleep gives `PeerGone` without
//! them; a sender makes wake-up calls only for a receiver that announced its sleep; and where
//! the kernel lacks pidfds or `futex_waitv` (taken away by a test hook) a channel and a
//! selector still receive and notice a killed peer. Real processes (`shmlink-echo`); the
//! measurements of idleness run in a process of their own, where the death watcher serves no
//! other test; the only time limits are watchdogs and how soon a death must be reported.

use crate::support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use shmlink::testing::PRETEND_MISSING_ENV;
use shmlink::{Channel, Config, RecvError, Selector, WaitStrategy};
use support::{
    echo, measure, serial, thread_switches, unique, voluntary_switches, Cost, NameGuard, WATCHDOG,
};

/// The role `wait` of a re-run of this binary: runs the check `role` names, alone in its
/// process.
pub(crate) fn child(role: &str) {
    match role {
        "idle-deadline" => idle_with_a_deadline(),
        "idle-forever" => idle_without_a_deadline(),
        "idle-subscriber" => idle_subscriber(),
        "fallbacks" => fallbacks(),
        other => panic!("unknown role {other}"),
    }
    println!("role done");
}

/// Runs `role` in a process of its own, with `env` besides, and fails the test if it failed.
fn in_a_child(role: &str, env: &[(&str, &str)]) {
    let mut child = crate::roles::spawn("wait", role, env);
    let status = child.reap_within(4 * WATCHDOG);
    let out = child.read_all();
    eprintln!("{}", out.trim());
    assert!(status.success(), "the {role} child failed (see its output)");
    assert!(out.contains("role done"), "{out:?}");
}

/// How long the idle receivers stay blocked.
const IDLE: Duration = Duration::from_millis(2500);
/// Voluntary context switches allowed to a thread blocked for `IDLE`: the sleep that ends the
/// wait, with room for a lock or two taken on the way. The once-a-second look at the peer's
/// lock happens on the death watcher's thread, not the sleeper's. A receiver that wakes every
/// few milliseconds to look at its peer makes hundreds.
const MAX_SWITCHES: u64 = 3;

/// The death watcher's thread wakes once a second to look at the peers' locks, and for nothing
/// else while no peer dies: fails the test if it woke more often during `cost`'s wait. Call
/// with its switches from before the wait, in a process of its own (the watcher of the test
/// binary also serves every other test's peers, whose deaths wake it).
fn assert_watcher_looked_once_a_second(before: Option<u64>, cost: &Cost) {
    // Not started yet if the round trip never slept: the wait starts it.
    let before = before.unwrap_or(0);
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
    in_a_child("idle-deadline", &[]);
}

fn idle_with_a_deadline() {
    let (mut ch, _name, _child) = connected("idle-deadline", WaitStrategy::Block);
    let watcher = thread_switches("shmlink-watch");
    let (got, cost) = measure(|| ch.recv_timeout(IDLE).map(|m| m.to_vec()));
    assert!(matches!(got, Err(RecvError::Timeout { .. })), "{got:?}");
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
    in_a_child("idle-forever", &[]);
}

fn idle_without_a_deadline() {
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

#[test]
fn an_idle_subscriber_makes_no_timed_wake_ups() {
    let _serial = serial();
    in_a_child("idle-subscriber", &[]);
}

/// A topic's subscriber blocked on an idle topic (its publisher in another process, alive):
/// asleep until its deadline, as a channel's receiver is.
fn idle_subscriber() {
    let name = unique("idle-subscriber");
    let _guard = NameGuard(name.clone());
    let mut publisher = crate::roles::spawn("topic", &format!("publish {name} 1 1"), &[]);
    support::wait_for_line(&mut publisher, "ready");
    let mut sub = shmlink::Subscriber::connect(&name, WaitStrategy::Block).expect("join");
    assert_eq!(
        sub.recv_timeout(WATCHDOG).expect("the first message").len(),
        8
    );
    let watcher = thread_switches("shmlink-watch");
    let (got, cost) = measure(|| sub.recv_timeout(IDLE).map(|m| m.to_vec()));
    assert!(matches!(got, Err(RecvError::Timeout { .. })), "{got:?}");
    cost.assert_idle("wait: subscriber blocked on an idle topic", MAX_SWITCHES);
    assert_watcher_looked_once_a_second(watcher, &cost);
    publisher.kill();
    publisher.reap();
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
        Err(RecvError::Timeout { .. }) => panic!("wait={wait}: peer death not noticed within 1 s"),
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

#[test]
fn a_sender_makes_wake_up_calls_only_for_a_receiver_that_announced_its_sleep() {
    use shmlink::testing::wake_calls_on_this_thread;
    const MESSAGES: u32 = 10_000;
    let name = unique("wake-calls");
    let _guard = NameGuard(name.clone());
    let config = Config {
        capacity: 1 << 16,
        wait: WaitStrategy::Block,
    };
    let mut tx = Channel::create(&name, &config).expect("create");
    let mut rx = Channel::connect(&name, WaitStrategy::Block).expect("connect");
    // A receiver that never sleeps: it only ever tries.
    let spinning = std::thread::spawn(move || {
        let deadline = Instant::now() + 2 * WATCHDOG;
        let mut got = 0;
        while got < MESSAGES {
            assert!(Instant::now() < deadline, "only {got} messages came");
            match rx.try_recv() {
                Ok(msg) => {
                    assert_eq!(&*msg, &got.to_le_bytes());
                    got += 1;
                }
                Err(RecvError::Empty { .. }) => std::hint::spin_loop(),
                Err(e) => panic!("{e}"),
            }
        }
        rx
    });
    let before = wake_calls_on_this_thread();
    for i in 0..MESSAGES {
        tx.send(&i.to_le_bytes()).expect("send");
    }
    let to_spinning = wake_calls_on_this_thread() - before;
    let mut rx = spinning.join().unwrap();
    eprintln!(
        "wait: {MESSAGES} sends to a receiver that never sleeps made {to_spinning} wake-up calls"
    );
    assert_eq!(
        to_spinning, 0,
        "wake-up calls for a receiver that never announced a sleep"
    );

    // A receiver asleep in `recv` between messages: each send finds it announced, and wakes it.
    const PACED: u32 = 20;
    let sleeping = std::thread::spawn(move || {
        for i in 0..PACED {
            assert_eq!(&*rx.recv_timeout(WATCHDOG).expect("recv"), &i.to_le_bytes());
        }
    });
    let before = wake_calls_on_this_thread();
    for i in 0..PACED {
        // A bounded pause, nothing to poll for: the receiver falls asleep meanwhile.
        std::thread::sleep(Duration::from_millis(5));
        tx.send(&i.to_le_bytes()).expect("send");
    }
    sleeping.join().unwrap();
    let to_sleeping = wake_calls_on_this_thread() - before;
    eprintln!("wait: {PACED} paced sends to a sleeping receiver made {to_sleeping} wake-up calls");
    assert!(
        to_sleeping >= u64::from(PACED / 2),
        "only {to_sleeping} wake-up calls for {PACED} messages to a sleeping receiver"
    );
}

/// How soon a killed peer must be noticed where a fallback serves: the 10 ms looks at a peer
/// the death watcher cannot cover (no pidfds) or the selector's 1 ms looks (no `futex_waitv`),
/// with room for a loaded 2-core machine.
const FALLBACK_BOUND: Duration = Duration::from_millis(250);

/// Kills `pid` (a child of ours, reaped by the caller after this returns) after `after`;
/// returns when it was killed.
fn kill_after(pid: u32, after: Duration) -> std::thread::JoinHandle<Instant> {
    std::thread::spawn(move || {
        // Let the waiter settle into its wait; a bounded sleep, nothing to poll for.
        std::thread::sleep(after);
        let killed = Instant::now();
        // SAFETY: plain syscall on the pid of our own child, not reaped before this thread is
        // joined.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        killed
    })
}

/// Under [`PRETEND_MISSING_ENV`] (`pidfd` or `futex_waitv`): a `Block` channel and a selector
/// still receive, take the fallback's looks (seen in their threads' wake-ups), and notice a
/// killed peer within [`FALLBACK_BOUND`].
fn fallbacks() {
    let missing = std::env::var(PRETEND_MISSING_ENV).unwrap_or_default();
    let no_pidfd = missing.split(',').any(|m| m == "pidfd");
    let no_waitv = missing.split(',').any(|m| m == "futex_waitv");
    assert!(no_pidfd || no_waitv, "nothing taken away: {missing:?}");

    // A Block channel: idle, it looks at its peer every 10 ms without pidfds (and sleeps
    // without them where it has them: a single word needs no `futex_waitv`).
    let (mut ch, _name, mut peer) = connected("fallback-block", WaitStrategy::Block);
    let before = voluntary_switches();
    let idle = ch
        .recv_timeout(Duration::from_millis(200))
        .map(|m| m.to_vec());
    assert!(matches!(idle, Err(RecvError::Timeout { .. })), "{idle:?}");
    let woke = voluntary_switches() - before;
    println!("block: idle for 200 ms, woke {woke} times");
    if no_pidfd {
        assert!(
            woke >= 5,
            "no looks at the peer without pidfds: {woke} wake-ups"
        );
    } else {
        assert!(woke <= MAX_SWITCHES, "{woke} wake-ups of an idle receiver");
    }
    ch.send(b"still there").expect("send");
    assert_eq!(&*ch.recv_timeout(WATCHDOG).expect("echo"), b"still there");
    let pid = peer.pid();
    let killer = kill_after(pid, Duration::from_millis(100));
    let result = ch.recv_timeout(WATCHDOG).map(|m| m.to_vec());
    let took = Instant::now().saturating_duration_since(killer.join().unwrap());
    peer.reap();
    println!("block: PeerGone {took:?} after the kill");
    match result {
        Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
    assert!(took <= FALLBACK_BOUND, "PeerGone {took:?} after the kill");

    // A selector over two channels.
    let (a, _name_a, mut peer_a) = connected("fallback-sel-a", WaitStrategy::Block);
    let (b, _name_b, mut peer_b) = connected("fallback-sel-b", WaitStrategy::Block);
    let mut channels = vec![a, b];
    let mut selector = Selector::new();
    let before = voluntary_switches();
    let idle = selector
        .wait(&mut channels, Some(Duration::from_millis(200)))
        .to_vec();
    let woke = voluntary_switches() - before;
    println!("selector: idle for 200 ms, woke {woke} times");
    assert!(idle.is_empty(), "idle channels reported ready: {idle:?}");
    assert!(
        woke >= 5,
        "the selector did not take its looks: {woke} wake-ups"
    );
    channels[1].send(b"ping").expect("send");
    let ready = selector.wait(&mut channels, Some(WATCHDOG)).to_vec();
    assert_eq!(ready, vec![1], "the echo was not reported");
    assert_eq!(&*channels[1].try_recv().expect("echo"), b"ping");
    let pid = peer_a.pid();
    let killer = kill_after(pid, Duration::from_millis(100));
    let ready = selector.wait(&mut channels, Some(WATCHDOG)).to_vec();
    let took = Instant::now().saturating_duration_since(killer.join().unwrap());
    peer_a.reap();
    println!("selector: the dead peer's channel ready {took:?} after the kill");
    assert_eq!(ready, vec![0], "the killed peer's channel was not reported");
    match channels[0].try_recv().map(|m| m.to_vec()) {
        Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
    assert!(took <= FALLBACK_BOUND, "reported {took:?} after the kill");
    channels[1].send(b"still there").expect("send");
    assert_eq!(
        &*channels[1].recv_timeout(WATCHDOG).expect("echo"),
        b"still there"
    );
    peer_b.kill();
    peer_b.reap();
}

#[test]
fn without_pidfds_a_channel_and_a_selector_still_receive_and_notice_a_killed_peer() {
    let _serial = serial();
    in_a_child("fallbacks", &[(PRETEND_MISSING_ENV, "pidfd")]);
}

#[test]
fn without_futex_waitv_a_channel_and_a_selector_still_receive_and_notice_a_killed_peer() {
    let _serial = serial();
    in_a_child("fallbacks", &[(PRETEND_MISSING_ENV, "futex_waitv")]);
}
