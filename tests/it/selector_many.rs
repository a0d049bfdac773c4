//! A selector over more channels than one kernel wait takes (128 words): it sleeps on all of
//! them without polling, with the help of its pool threads, reports every message, and only the
//! channels that are ready; a peer killed on a channel any of its threads sleeps on is reported
//! at once, and a peer that bumps and wakes a channel's word in a loop costs CPU but changes
//! nothing the selector reports.
//!
//! The hostile peer is this test binary run again in the role `selector-bumper` (see `child`
//! and `roles`).

use crate::support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use shmlink::testing::{RingHeader, RINGS_OFFSET};
use shmlink::{Channel, Config, RecvError, Selector, WaitStrategy};
use support::{
    echo, exited, measure, process_cpu, reap_killed, serial, shm_path, thread_cpu, unique,
    voluntary_switches, wait_for_line, NameGuard, WATCHDOG,
};

/// The name of the selector's pool threads.
const POOL_THREAD: &str = "shmlink-select";

/// Short waits with nothing to report until the selector's pool runs: the first ones register
/// every peer with the death watcher and start the pool threads.
fn start_the_pool(selector: &mut Selector, channels: &mut [Channel]) {
    let started = Instant::now();
    while threads_cost(POOL_THREAD).0 == 0 {
        assert!(started.elapsed() < WATCHDOG, "no pool thread started");
        assert!(selector
            .wait(channels, Some(Duration::from_millis(50)))
            .is_empty());
    }
}

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
        start_the_pool(&mut selector, &mut receivers);
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

/// What a selector's reports gave a test that serves each reported channel once (one
/// `try_recv`) and is the channels' only receiver: while every peer lives, a channel is
/// reported only while a message waits in it, so every report yields a message.
#[derive(Debug, Default)]
struct Reports {
    /// Reports that yielded a message.
    messages: usize,
    /// Reports of a channel with nothing to read: none while the peers live.
    spurious: usize,
    /// Indices returned twice by one call.
    duplicates: usize,
}

impl Reports {
    /// Serves each channel of `ready` once, handing every message to `got`.
    fn serve(
        &mut self,
        ready: &[usize],
        receivers: &mut [Channel],
        mut got: impl FnMut(usize, &[u8]),
    ) {
        for (k, &i) in ready.iter().enumerate() {
            if ready[..k].contains(&i) {
                self.duplicates += 1;
                continue;
            }
            match receivers[i].try_recv() {
                Ok(msg) => {
                    self.messages += 1;
                    got(i, &msg);
                }
                Err(RecvError::Empty { .. }) => self.spurious += 1,
                Err(e) => panic!("channel {i}: {e}"),
            }
        }
    }

    /// Fails the test unless every report named a channel with a message, once.
    fn assert_exact(&self) {
        assert_eq!(
            (self.spurious, self.duplicates),
            (0, 0),
            "reports of channels with nothing to read, and indices returned twice ({self:?})"
        );
    }
}

#[test]
fn every_message_to_many_channels_is_reported_once_while_one_talks() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    let (senders, mut receivers, _guards) = channels("mix", 300);
    let rounds = 2000u64;
    // One client talks all the time on channel 7; now and then, after a pause long enough for
    // the selector to sleep on every channel, another one sends. Each message is its round.
    let sender = std::thread::spawn(move || {
        let mut senders = senders;
        for r in 0..rounds {
            senders[7].send(&r.to_le_bytes()).unwrap();
            if r % 100 == 0 {
                std::thread::sleep(Duration::from_millis(3));
                let other = (r as usize * 37) % 300;
                senders[other].send(&r.to_le_bytes()).unwrap();
            }
        }
        senders
    });
    let mut selector = Selector::new();
    let mut received: Vec<Vec<u64>> = vec![Vec::new(); 300];
    let mut reports = Reports::default();
    let expected_total = (rounds + rounds / 100) as usize;
    let started = Instant::now();
    while reports.messages < expected_total {
        assert!(
            started.elapsed() < WATCHDOG,
            "{reports:?}, got {received:?}"
        );
        // Serve each reported channel once: every report must be a message.
        let ready = selector.wait(&mut receivers, Some(WATCHDOG)).to_vec();
        reports.serve(&ready, &mut receivers, |i, msg| {
            received[i].push(u64::from_le_bytes(msg.try_into().expect("8 bytes")));
        });
    }
    let _senders = sender.join().unwrap();
    reports.assert_exact();
    let left = selector.poll(&mut receivers).to_vec();
    assert!(left.is_empty(), "reported after the last message: {left:?}");
    let mut expected: Vec<Vec<u64>> = vec![Vec::new(); 300];
    expected[7] = (0..rounds).collect();
    for r in (0..rounds).step_by(100) {
        expected[(r as usize * 37) % 300].push(r);
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

/// The longest a selector asleep on its channels may take to report a peer's death, from the
/// moment the peer's process has exited: "at once" on a loaded machine.
const AT_ONCE: Duration = Duration::from_millis(50);

#[test]
fn a_peer_killed_on_a_channel_a_pool_thread_sleeps_on_is_reported_at_once() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    // 200 channels: 0-126 are in the selector's own kernel wait, the rest in a pool thread's.
    // The peers of channels 5 and 150 are processes; the rest are ends in this process.
    let victims = [150usize, 5];
    let base = unique("selkill-many");
    let config = Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    };
    let mut guards = Vec::new();
    let mut channels = Vec::new();
    let mut local_peers = Vec::new();
    let mut peers = Vec::new();
    for i in 0..200 {
        let name = format!("{base}-{i}");
        guards.push(NameGuard(name.clone()));
        let mut ch = Channel::create(&name, &config).unwrap();
        if victims.contains(&i) {
            peers.push((i, echo(&[name.as_str(), "block"])));
            // The echo answers once it is connected.
            ch.send(b"hello").unwrap();
            assert_eq!(&*ch.recv_timeout(WATCHDOG).unwrap(), b"hello");
        } else {
            local_peers.push(Channel::connect(&name, WaitStrategy::Block).unwrap());
        }
        channels.push(ch);
    }
    let mut replacements = Vec::new();
    for i in victims {
        let name = format!("{base}-again-{i}");
        guards.push(NameGuard(name.clone()));
        let ch = Channel::create(&name, &config).unwrap();
        replacements.push((ch, Channel::connect(&name, WaitStrategy::Block).unwrap()));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let selector = std::thread::spawn(move || {
        let mut selector = Selector::new();
        start_the_pool(&mut selector, &mut channels);
        tx.send(None).unwrap();
        let mut kept = Vec::new();
        for (victim, (fresh, fresh_peer)) in victims.into_iter().zip(replacements) {
            let ready = selector.wait(&mut channels, Some(WATCHDOG)).to_vec();
            let returned = Instant::now();
            let got = channels[victim].try_recv().map(|m| m.to_vec());
            // The dead peer's channel leaves the set; a live one takes its place.
            kept.push(std::mem::replace(&mut channels[victim], fresh));
            kept.push(fresh_peer);
            tx.send(Some((ready, returned, got))).unwrap();
        }
        (channels, kept)
    });
    assert!(rx.recv_timeout(WATCHDOG).expect("selector stuck").is_none());
    for (victim, mut peer) in peers.into_iter().rev() {
        // Let the selector fall asleep (nothing to poll for), then kill the peer.
        std::thread::sleep(Duration::from_millis(100));
        let pid = peer.pid();
        peer.kill();
        let died = exited(pid);
        let (ready, returned, got) = rx
            .recv_timeout(WATCHDOG)
            .expect("selector did not return")
            .expect("a wait's outcome");
        reap_killed(&mut peer);
        let took = returned.saturating_duration_since(died);
        eprintln!(
            "selector: the killed peer of channel {victim} of 200 reported after {:.2} ms",
            took.as_secs_f64() * 1e3
        );
        assert_eq!(ready, vec![victim], "the killed peer's channel");
        match got {
            Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
            other => panic!("channel {victim}: expected PeerGone, got {other:?}"),
        }
        assert!(
            took <= AT_ONCE,
            "channel {victim}: the death was reported {took:?} after the peer exited"
        );
    }
    let (_channels, _kept) = selector.join().unwrap();
    drop(local_peers);
}

/// The futex word a connector's receive (and a selector over connectors) sleeps on: ring 0's
/// data word, in a mapping of its own.
struct DataWord(MmapMut);

impl DataWord {
    fn open(name: &str) -> DataWord {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(shm_path(name))
            .expect("open the segment");
        // SAFETY: a segment made by this test; the only access through this view is atomic.
        DataWord(unsafe { MmapMut::map_mut(&file) }.expect("map the segment"))
    }

    fn word(&self) -> &AtomicU32 {
        let offset = RINGS_OFFSET + std::mem::offset_of!(RingHeader, data_wait);
        assert!(self.0.len() >= offset + 4);
        // SAFETY: inside the mapping, 4-aligned (the cell is 128-aligned in a page-aligned
        // mapping), and the word is shared memory every process accesses atomically.
        unsafe { &*(self.0.as_ptr().add(offset) as *const AtomicU32) }
    }
}

/// The role `selector-bumper` of a re-run of this binary, the hostile peer: maps the segment
/// `name`, says so, then bumps and wakes its connector's
/// data word as fast as it can until killed.
pub(crate) fn child(name: &str) {
    let segment = DataWord::open(name);
    let word = segment.word();
    println!("bumping");
    loop {
        word.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a futex wake on a valid, aligned word of our mapping; the kernel only uses
        // the address as a key.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }
}

/// A selector over `count` channels of which channel `hostile`'s peer bumps and wakes its word
/// in a loop while the `honest` ones send numbered messages: every message arrives, in order,
/// each report is a message, and the bumped channel is never reported. Prints what the selector
/// cost (process CPU time, the bumper being another process) and the latest message.
fn bumped_selector(tag: &str, count: usize, hostile: usize, honest: &[usize]) {
    // One at a time: the CPU figures are this process's.
    let _serial = serial();
    const MESSAGES: u64 = 500;
    let (senders, mut receivers, guards) = channels(tag, count);
    let word = DataWord::open(&guards[hostile].0);
    let mut bumper = crate::roles::spawn("selector-bumper", &guards[hostile].0, &[]);
    wait_for_line(&mut bumper, "bumping");
    let mut selector = Selector::new();
    // A first wait registers every peer with the death watcher.
    assert!(selector
        .wait(&mut receivers, Some(Duration::from_millis(20)))
        .is_empty());
    // Nothing but the bumps for a while: the selector wakes for each and reports nothing.
    let (cpu, bumps) = (process_cpu(), word.word().load(Ordering::Relaxed));
    let (ready, cost) = measure(|| {
        selector
            .wait(&mut receivers, Some(Duration::from_millis(500)))
            .to_vec()
    });
    let (cpu, bumps) = (
        process_cpu() - cpu,
        word.word().load(Ordering::Relaxed).wrapping_sub(bumps),
    );
    eprintln!(
        "selector: {count} channels, the peer of channel {hostile} bumping its word ({bumps} \
         bumps), nothing sent: {:.0} ms, process CPU {:.0} ms ({:.0}% of a core), selector \
         thread {:.0} ms over {} wake-ups ({:.1} us each)",
        cost.wall.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 100.0 / cost.wall.as_secs_f64(),
        cost.cpu.as_secs_f64() * 1e3,
        cost.switches,
        cost.cpu.as_secs_f64() * 1e6 / cost.switches.max(1) as f64,
    );
    assert!(ready.is_empty(), "reported with nothing sent: {ready:?}");
    let bumps_before = word.word().load(Ordering::Relaxed);
    let base = Instant::now();
    let to_send = honest.to_vec();
    let sender = std::thread::spawn(move || {
        let mut senders = senders;
        for seq in 0..MESSAGES {
            for &i in &to_send {
                let sent = base.elapsed().as_nanos() as u64;
                let mut msg = [0u8; 16];
                msg[..8].copy_from_slice(&seq.to_le_bytes());
                msg[8..].copy_from_slice(&sent.to_le_bytes());
                senders[i].send(&msg).unwrap();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        senders
    });
    let mut next = vec![0u64; count];
    let mut reports = Reports::default();
    let mut latest = Duration::ZERO;
    let (cpu, own_cpu, wakes, started) = (
        process_cpu(),
        thread_cpu(),
        voluntary_switches(),
        Instant::now(),
    );
    while reports.messages < MESSAGES as usize * honest.len() {
        assert!(started.elapsed() < WATCHDOG, "{reports:?}, next {next:?}");
        let ready = selector.wait(&mut receivers, Some(WATCHDOG)).to_vec();
        assert!(
            !ready.contains(&hostile),
            "the bumped channel {hostile} was reported ready: {ready:?}"
        );
        reports.serve(&ready, &mut receivers, |i, msg| {
            assert!(honest.contains(&i), "a message on channel {i}");
            let seq = u64::from_le_bytes(msg[..8].try_into().unwrap());
            let sent = Duration::from_nanos(u64::from_le_bytes(msg[8..].try_into().unwrap()));
            assert_eq!(seq, next[i], "channel {i}: out of order");
            next[i] += 1;
            latest = latest.max(base.elapsed().saturating_sub(sent));
        });
    }
    let (wall, cpu, own_cpu, wakes) = (
        started.elapsed(),
        process_cpu() - cpu,
        thread_cpu() - own_cpu,
        voluntary_switches() - wakes,
    );
    let _senders = sender.join().unwrap();
    let bumps = word
        .word()
        .load(Ordering::Relaxed)
        .wrapping_sub(bumps_before);
    bumper.kill();
    reap_killed(&mut bumper);
    eprintln!(
        "selector: {count} channels, the peer of channel {hostile} bumping its word ({bumps} \
         bumps): {:.0} ms, process CPU {:.0} ms ({:.0}% of a core), selector thread {:.0} ms over \
         {wakes} wake-ups, latest message {:.1} ms",
        wall.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 100.0 / wall.as_secs_f64(),
        own_cpu.as_secs_f64() * 1e3,
        latest.as_secs_f64() * 1e3
    );
    reports.assert_exact();
    for &i in honest {
        assert_eq!(next[i], MESSAGES, "channel {i}");
    }
    let left = selector.poll(&mut receivers).to_vec();
    assert!(left.is_empty(), "reported after the last message: {left:?}");
    // The peer did bump the word all along: the selector had spurious wake-ups to survive.
    assert!(
        bumps >= 1000,
        "the hostile peer bumped its word only {bumps} times"
    );
}

#[test]
fn a_peer_bumping_its_word_among_2_channels_makes_the_selector_miss_or_misreport_nothing() {
    bumped_selector("bump-2", 2, 1, &[0]);
}

#[test]
fn a_peer_bumping_its_word_among_1000_channels_makes_the_selector_miss_or_misreport_nothing() {
    bumped_selector("bump-1000", 1000, 700, &[3, 500, 999]);
}

#[test]
fn a_paced_client_and_the_quiet_channels_around_it_are_each_answered_alone() {
    // One at a time: the tests count the pool threads of this process.
    let _serial = serial();
    let (senders, mut receivers, _guards) = channels("paced", 300);
    // (pause before, channel): a client on channel 150 (beyond the selector's own words) that
    // pauses a millisecond or two between requests, the quiet channels 3 and 290 talking while
    // it keeps the selector on its channel alone, then a pause long enough for the selector to
    // sleep on every channel, after which channel 200 (a pool thread's word) and the client
    // again. Each request waits for its answer, so each wait has one channel to report.
    let mut script: Vec<(u64, usize)> = (0..10).map(|k| (1 + k % 2, 150)).collect();
    script.extend([
        (1, 3),
        (1, 150),
        (2, 290),
        (1, 150),
        (120, 200),
        (1, 150),
        (90, 150),
    ]);
    script.extend((0..10).map(|k| (1 + k % 2, 150)));
    let expected: Vec<usize> = script.iter().map(|&(_, c)| c).collect();
    let client = std::thread::spawn(move || {
        let mut senders = senders;
        for (r, &(pause, c)) in script.iter().enumerate() {
            std::thread::sleep(Duration::from_millis(pause));
            senders[c].send(&(r as u64).to_le_bytes()).unwrap();
            let reply = senders[c].recv_timeout(WATCHDOG).unwrap().to_vec();
            assert_eq!(reply, (r as u64).to_le_bytes(), "answer {r} on {c}");
        }
        senders
    });
    let mut selector = Selector::new();
    let mut served = Vec::new();
    let started = Instant::now();
    while served.len() < expected.len() {
        assert!(started.elapsed() < WATCHDOG, "served {served:?}");
        let ready = selector.wait(&mut receivers, Some(WATCHDOG)).to_vec();
        assert!(ready.len() <= 1, "one request at a time, got {ready:?}");
        for i in ready {
            let msg = receivers[i].try_recv().unwrap().to_vec();
            assert_eq!(msg, (served.len() as u64).to_le_bytes(), "on {i}");
            receivers[i].send(&msg).unwrap();
            served.push(i);
        }
    }
    let _senders = client.join().unwrap();
    assert_eq!(served, expected);
    let left = selector.poll(&mut receivers).to_vec();
    assert!(left.is_empty(), "reported after the last request: {left:?}");
}
