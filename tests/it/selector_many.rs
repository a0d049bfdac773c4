//! A selector over more channels than one kernel wait takes (128 words): it sleeps on all of
//! them without polling, with the help of its pool threads, and reports every message.

use crate::support;

use std::time::{Duration, Instant};

use shmlink::{Channel, Config, Selector, WaitStrategy};
use support::{measure, serial, unique, NameGuard, WATCHDOG};

/// The name of the selector's pool threads.
const POOL_THREAD: &str = "shmlink-select";

/// `count` channels: the sending ends, the receiving ends (`Block`) and their name guards.
fn channels(tag: &str, count: usize) -> (Vec<Channel>, Vec<Channel>, Vec<NameGuard>) {
    let base = unique(tag);
    let config = Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    };
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    let mut guards = Vec::new();
    for i in 0..count {
        let name = format!("{base}-{i}");
        guards.push(NameGuard(name.clone()));
        senders.push(Channel::create(&name, &config).unwrap());
        receivers.push(Channel::connect(&name, WaitStrategy::Block).unwrap());
    }
    (senders, receivers, guards)
}

/// The threads of this process called `name`: their voluntary context switches and their CPU
/// time (the scheduler's figure, in nanoseconds), summed.
fn threads_cost(name: &str) -> (usize, u64, Duration) {
    let (mut count, mut switches, mut cpu) = (0, 0, 0);
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("task entry").path();
        if !std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim() == name) {
            continue;
        }
        // A thread that ended since the listing has no files left: it costs nothing more.
        let (Ok(status), Ok(sched)) = (
            std::fs::read_to_string(dir.join("status")),
            std::fs::read_to_string(dir.join("schedstat")),
        ) else {
            continue;
        };
        count += 1;
        switches += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .expect("voluntary_ctxt_switches");
        cpu += sched
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .expect("schedstat");
    }
    (count, switches, Duration::from_nanos(cpu))
}

#[test]
fn a_selector_over_1000_idle_channels_sleeps_without_polling_and_wakes_on_any() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    let (mut senders, mut receivers, _guards) = channels("many", 1000);
    let idle = Duration::from_secs(3);
    let (tx, rx) = std::sync::mpsc::channel();
    let selector = std::thread::spawn(move || {
        let mut selector = Selector::new();
        // First short waits register every peer with the death watcher and start the pool.
        let started = Instant::now();
        while threads_cost(POOL_THREAD).0 == 0 {
            assert!(started.elapsed() < WATCHDOG, "no pool thread started");
            assert!(selector
                .wait(&mut receivers, Some(Duration::from_millis(50)))
                .is_empty());
        }
        let pool_before = threads_cost(POOL_THREAD);
        let (ready, cost) = measure(|| selector.wait(&mut receivers, Some(idle)).to_vec());
        let pool_after = threads_cost(POOL_THREAD);
        tx.send((ready, Some((cost, pool_before, pool_after))))
            .unwrap();
        // Then, with no timeout, every channel wakes it: one in the selector's own batch and
        // ones the pool threads sleep on.
        let mut got = Vec::new();
        for _ in 0..3 {
            let ready = selector.wait(&mut receivers, None).to_vec();
            for &i in &ready {
                got.push((i, receivers[i].try_recv().unwrap().to_vec()));
            }
            tx.send((ready, None)).unwrap();
        }
        got
    });
    let (ready, cost) = rx.recv_timeout(WATCHDOG).unwrap();
    let (cost, (threads, switches_before, cpu_before), (threads_after, switches_after, cpu_after)) =
        cost.expect("the idle wait's cost");
    assert!(ready.is_empty(), "idle channels reported ready: {ready:?}");
    assert!(cost.wall >= idle, "the wait ended before its deadline");
    // One sleep until the deadline, give or take a lock; each pool thread takes its batch and
    // is called off once: no timed wake-ups, however long the wait.
    cost.assert_idle("a selector over 1000 idle channels", 5);
    assert!(
        threads > 0 && threads == threads_after,
        "pool threads: {threads} then {threads_after}"
    );
    let pool_switches = switches_after - switches_before;
    let pool_cpu = cpu_after - cpu_before;
    eprintln!(
        "pool: {threads} threads, {pool_switches} voluntary context switches, {:.2} ms of CPU",
        pool_cpu.as_secs_f64() * 1e3
    );
    assert!(
        pool_switches <= 3 * threads as u64,
        "pool threads woke {pool_switches} times in {:?}",
        cost.wall
    );
    assert!(
        pool_cpu * support::IDLE_CPU_SHARE <= cost.wall,
        "pool threads used {pool_cpu:?} of CPU in {:?}",
        cost.wall
    );
    for i in [999, 3, 500] {
        std::thread::sleep(Duration::from_millis(20));
        senders[i].send(format!("for {i}").as_bytes()).unwrap();
        let (ready, _) = rx.recv_timeout(WATCHDOG).expect("selector did not wake");
        assert_eq!(ready, vec![i]);
    }
    let got = selector.join().unwrap();
    let expected: Vec<(usize, Vec<u8>)> = [999, 3, 500]
        .iter()
        .map(|&i| (i, format!("for {i}").into_bytes()))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn every_message_to_many_channels_is_reported_once_while_one_talks() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    let (senders, mut receivers, _guards) = channels("mix", 300);
    let rounds = 2000usize;
    // One client talks all the time on channel 7; now and then, after a pause long enough for
    // the selector to sleep on every channel, another one sends.
    let sender = std::thread::spawn(move || {
        let mut senders = senders;
        for r in 0..rounds {
            senders[7].send(&(r as u64).to_le_bytes()).unwrap();
            if r % 100 == 0 {
                std::thread::sleep(Duration::from_millis(3));
                let other = (r * 37) % 300;
                senders[other].send(&(r as u64).to_le_bytes()).unwrap();
            }
        }
        senders
    });
    let mut selector = Selector::new();
    let mut received = vec![0usize; 300];
    let expected_total = rounds + rounds / 100;
    let started = Instant::now();
    while received.iter().sum::<usize>() < expected_total {
        assert!(started.elapsed() < WATCHDOG, "received {received:?}");
        for &i in selector.wait(&mut receivers, Some(WATCHDOG)) {
            while receivers[i].try_recv().is_ok() {
                received[i] += 1;
            }
        }
    }
    let _senders = sender.join().unwrap();
    let mut expected = vec![0usize; 300];
    expected[7] = rounds;
    for r in (0..rounds).step_by(100) {
        expected[(r * 37) % 300] += 1;
    }
    assert_eq!(received, expected);
}

#[test]
fn channels_dropped_between_waits_leave_the_selector_working() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    let (mut senders, mut receivers, _guards) = channels("drop", 400);
    let mut selector = Selector::new();
    // Make channel 390 recently ready, then drop it and every other channel from 200 on.
    senders[390].send(b"first").unwrap();
    assert_eq!(selector.wait(&mut receivers, Some(WATCHDOG)), &[390]);
    receivers[390].try_recv().unwrap();
    receivers.truncate(200);
    senders.truncate(200);
    // And new ones in their place.
    let (mut more_senders, more_receivers, _more_guards) = channels("drop-new", 200);
    receivers.extend(more_receivers);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        more_senders[190].send(b"second").unwrap();
        more_senders
    });
    assert_eq!(selector.wait(&mut receivers, Some(WATCHDOG)), &[390]);
    assert_eq!(&*receivers[390].try_recv().unwrap(), b"second");
    drop(sender.join().unwrap());
}

#[test]
fn a_dropped_selector_ends_its_pool_threads() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    let (_senders, mut receivers, _guards) = channels("end", 200);
    let before = threads_cost(POOL_THREAD).0;
    let mut selector = Selector::new();
    // A wait starts the pool when it goes to sleep; on a busy machine its deadline may pass
    // before it gets that far, so wait again until it has.
    let started = Instant::now();
    while threads_cost(POOL_THREAD).0 <= before {
        assert!(started.elapsed() < WATCHDOG, "no pool thread");
        assert!(selector
            .wait(&mut receivers, Some(Duration::from_millis(20)))
            .is_empty());
    }
    drop(selector);
    let started = Instant::now();
    while threads_cost(POOL_THREAD).0 > before {
        assert!(
            started.elapsed() < WATCHDOG,
            "pool threads outlived their selector"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_chatty_channel_among_many_does_not_starve_a_quiet_one() {
    let _serial = serial();
    let (mut senders, mut receivers, _guards) = channels("chatty", 300);
    let mut selector = Selector::new();
    // Channel 7 always has more to read, so the selector never sleeps.
    for _ in 0..20 {
        senders[7].send(b"chatty").unwrap();
    }
    let mut quiet_sent = false;
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < WATCHDOG,
            "the quiet channel was never reported"
        );
        let ready = selector.wait(&mut receivers, Some(WATCHDOG)).to_vec();
        if quiet_sent && ready.contains(&250) {
            assert_eq!(&*receivers[250].try_recv().unwrap(), b"quiet");
            break;
        }
        for i in ready {
            if receivers[i].try_recv().is_ok() {
                senders[i].send(b"chatty").unwrap();
            }
        }
        if !quiet_sent && started.elapsed() > Duration::from_millis(20) {
            senders[250].send(b"quiet").unwrap();
            quiet_sent = true;
        }
    }
}

#[test]
fn a_selector_is_still_send_sync_and_unwind_safe() {
    fn check<T: Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe + Unpin>() {}
    check::<Selector>();
}
