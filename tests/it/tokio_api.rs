//! The async API (feature `tokio`) across real processes: a server process accepting with
//! `AsyncListener` and eight client tasks in one current-thread runtime.

use crate::support;

use std::time::Duration;

use shmlink::testing;
use shmlink::tokio::{connect, AsyncChannel, AsyncListener};
use shmlink::{Channel, Config, Error, OpenError, RecvError, WaitStrategy};
use support::{
    process_cpu, thread_switches, unique, wait_for_line, ChildGuard, NameGuard, IDLE_CPU_SHARE,
    WATCHDOG,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime")
}

/// Runs `f` on a current-thread runtime in another thread; fails the test after `limit`.
fn run_with_watchdog<T: Send + 'static>(
    limit: Duration,
    f: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(runtime().block_on(f));
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("async test did not finish within {limit:?}"))
}

/// The entry point of the re-executed server; a no-op in a normal test run.
pub(crate) fn child(name: &str) {
    runtime().block_on(async move {
        let mut listener = AsyncListener::bind(name, &Config::default()).expect("bind");
        println!("ready");
        loop {
            let mut conn = listener.accept().await.expect("accept");
            tokio::spawn(async move {
                while let Ok(msg) = conn.recv().await.map(|m| m.to_vec()) {
                    if conn.send(&msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

fn spawn_server(name: &str) -> ChildGuard {
    let mut child = crate::roles::spawn("tokio-server", name, &[]);
    wait_for_line(&mut child, "ready");
    child
}

#[test]
fn eight_client_tasks_against_a_server_process() {
    let name = unique("tokio8");
    let _guard = NameGuard(name.clone());
    let mut server = spawn_server(&name);
    let n = name.clone();
    let results = run_with_watchdog(3 * WATCHDOG, async move {
        let tasks: Vec<_> = (0..8u32)
            .map(|id| {
                let name = n.clone();
                tokio::spawn(async move {
                    let mut ch = connect(&name).await?;
                    for i in 0..1000u32 {
                        let msg = format!("task {id} message {i}");
                        ch.send(msg.as_bytes()).await?;
                        let reply = ch.recv().await?.to_vec();
                        if reply != msg.as_bytes() {
                            return Err(Error::Recv(RecvError::Io(std::io::Error::other(
                                format!("task {id}: wrong reply {i}"),
                            ))));
                        }
                    }
                    Ok::<u32, Error>(id)
                })
            })
            .collect();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.expect("task panicked"));
        }
        done
    });
    for (id, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap(), id as u32);
    }
    server.kill();
    server.reap();
}

/// A full ring makes an async send wait (it is still pending while the peer reads nothing),
/// the messages arrive once the peer reads, and the peer's close ends the task's receive.
#[test]
fn a_full_ring_makes_send_wait_and_a_closed_peer_ends_recv() {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    use std::sync::Arc;

    let name = unique("tokiofull");
    let _guard = NameGuard(name.clone());
    let config = Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    };
    let mut peer = Channel::create(&name, &config).unwrap();
    let ch = Channel::connect(&name, WaitStrategy::Block).unwrap();
    // Sends the task has finished.
    let sent = Arc::new(AtomicU32::new(0));
    let sent_by_task = Arc::clone(&sent);
    // The peer thread reads nothing until the task's sends have stopped on the full 4 KiB ring
    // (eight messages of 500 bytes fill it), then reads slowly, so the sender waits again.
    let reader = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + WATCHDOG;
        let mut seen = 0;
        loop {
            // A bounded look every 50 ms: nothing to sleep on for the task's progress.
            std::thread::sleep(Duration::from_millis(50));
            let now = sent.load(Relaxed);
            if now > 0 && now == seen {
                break;
            }
            seen = now;
            assert!(
                std::time::Instant::now() < deadline,
                "the task sent nothing"
            );
        }
        assert!(
            seen < 8,
            "{seen} sends of 500 bytes went into a 4 KiB ring nobody read: none waited"
        );
        let mut got = 0u32;
        while got < 200 {
            let msg = peer.recv_timeout(WATCHDOG).unwrap();
            assert_eq!(&*msg, &[got as u8; 500][..]);
            got += 1;
            if got % 20 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        peer.send(b"bye").unwrap();
        // Dropping the peer closes the channel: the task's next recv ends.
    });
    let result = run_with_watchdog(WATCHDOG, async move {
        let mut ch = AsyncChannel::new(ch)?;
        for i in 0..200u32 {
            ch.send(&[i as u8; 500]).await?;
            sent_by_task.fetch_add(1, Relaxed);
        }
        let bye = ch.recv().await?.to_vec();
        let end = ch.recv().await.map(|m| m.len());
        Ok::<_, Error>((bye, end))
    });
    reader.join().unwrap();
    let (bye, end) = result.unwrap();
    assert_eq!(bye, b"bye");
    assert!(
        matches!(end, Err(RecvError::Disconnected { .. })),
        "{end:?}"
    );
}

#[test]
fn an_async_recv_whose_peer_process_is_killed_says_peer_gone() {
    let name = unique("tokiokill");
    let _guard = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &Config::default()).unwrap();
    let mut peer = support::echo(&[name.as_str(), "block"]);
    ch.send(b"hello").unwrap();
    assert_eq!(&*ch.recv_timeout(WATCHDOG).unwrap(), b"hello");
    let (waiting_tx, waiting) = std::sync::mpsc::channel();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = runtime().block_on(async move {
            let mut ch = AsyncChannel::new(ch)?;
            ch.send(b"ping").await?;
            let reply = ch.recv().await?.to_vec();
            waiting_tx.send(reply).unwrap();
            // Nothing more comes: only the peer's death can end this receive.
            let end = ch.recv().await.map(|m| m.to_vec());
            Ok::<_, Error>(end?)
        });
        let _ = tx.send(result);
    });
    let reply = waiting.recv_timeout(WATCHDOG).expect("no echo");
    assert_eq!(reply, b"ping");
    // Let the task fall asleep (nothing to poll for), then kill the peer.
    std::thread::sleep(Duration::from_millis(20));
    let pid = peer.pid();
    peer.kill();
    // The watchdog: a second.
    let result = rx
        .recv_timeout(Duration::from_secs(1))
        .expect("the receive did not end within 1 s of the peer's death");
    peer.reap();
    match result {
        Err(Error::Recv(RecvError::PeerGone { pid: gone, .. })) => assert_eq!(gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
}

/// The role of a re-run of this binary as a plain peer: `sink NAME` (connects, says
/// `connected`, reads nothing, waits to be killed) or `stream NAME` (connects, says
/// `streaming`, sends one-byte messages in batches as fast as the channel takes them until a
/// send fails or it is killed). Each ends on its own after [`WATCHDOG`].
const PEER: &str = "tokio-plain-peer";

/// The role `tokio-plain-peer` (see [`PEER`]).
pub(crate) fn plain_peer(role: &str) {
    let (what, name) = role.split_once(' ').expect("a role and a name");
    let mut ch = Channel::connect_timeout(name, WaitStrategy::Block, WATCHDOG).expect("connect");
    let started = std::time::Instant::now();
    match what {
        "sink" => {
            println!("connected");
            std::thread::sleep(WATCHDOG);
        }
        "stream" => {
            let batch = [[7u8]; 64];
            println!("streaming");
            while started.elapsed() < WATCHDOG && ch.send_batch(&batch).is_ok() {}
        }
        _ => panic!("no role {what:?}"),
    }
    std::process::exit(0);
}

fn spawn_plain_peer(role: &str, name: &str, says: &'static str) -> ChildGuard {
    let role = format!("{role} {name}");
    let mut child = crate::roles::spawn(PEER, &role, &[]);
    wait_for_line(&mut child, says);
    child
}

/// An async send waiting on a full ring whose reader's process is killed ends with
/// `PeerGone`, naming the reader's pid, within a second.
#[test]
fn an_async_send_waiting_on_a_full_ring_whose_reader_is_killed_says_peer_gone() {
    let name = unique("tokiosendkill");
    let _guard = NameGuard(name.clone());
    let ch = Channel::create(&name, &small_block()).unwrap();
    let mut peer = spawn_plain_peer("sink", &name, "connected");
    let (waiting_tx, waiting) = std::sync::mpsc::channel();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = runtime().block_on(async move {
            let mut ch = AsyncChannel::new(ch).unwrap();
            // Nobody reads: fill the ring, then wait in a send.
            while ch.try_send(&[1; 500]).is_ok() {}
            waiting_tx.send(()).unwrap();
            ch.send(&[2; 500]).await
        });
        let _ = tx.send(result);
    });
    waiting
        .recv_timeout(WATCHDOG)
        .expect("the ring never filled");
    // Let the task fall asleep in its send, then kill the reader.
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        rx.try_recv().is_err(),
        "the send ended while the reader lived"
    );
    let pid = peer.pid();
    peer.kill();
    let result = rx
        .recv_timeout(Duration::from_secs(1))
        .expect("the send did not end within 1 s of the reader's death");
    support::reap_killed(&mut peer);
    match result {
        Err(shmlink::SendError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
}

/// A task that drains a channel whose sender never lets it run empty, with
/// `recv_batch_timeout(usize::MAX, 10 ms)` on a current-thread runtime, leaves the thread to
/// the other tasks now and then: each call returns within 200 ms, and a task that only yields
/// and counts runs at least every 200 ms meanwhile.
#[test]
fn an_async_batch_receive_against_an_endless_stream_leaves_room_for_the_other_tasks() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    use std::time::Instant;

    const BOUND: Duration = Duration::from_millis(200);
    let name = unique("tokioendless");
    let _guard = NameGuard(name.clone());
    let config = Config {
        capacity: 64 * 1024,
        wait: WaitStrategy::Block,
    };
    let ch = Channel::create(&name, &config).unwrap();
    let mut peer = spawn_plain_peer("stream", &name, "streaming");
    let (slowest_call, worst_gap, handed) = run_with_watchdog(WATCHDOG, async move {
        let mut ch = AsyncChannel::new(ch).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut last = Instant::now();
                let mut worst = Duration::ZERO;
                while !stop.load(Relaxed) {
                    tokio::task::yield_now().await;
                    worst = worst.max(last.elapsed());
                    last = Instant::now();
                }
                worst
            })
        };
        let started = Instant::now();
        let mut slowest = Duration::ZERO;
        let mut handed = 0u64;
        while started.elapsed() < Duration::from_secs(1) {
            let call = Instant::now();
            // Some work per message, as a consumer would do: slower than the sender.
            let got = ch
                .recv_batch_timeout(usize::MAX, Duration::from_millis(10), |msg| {
                    handed += u64::from(std::hint::black_box(msg[0]) == 7);
                    let spin = Instant::now();
                    while spin.elapsed() < Duration::from_micros(1) {}
                })
                .await;
            slowest = slowest.max(call.elapsed());
            match got {
                Ok(_) | Err(RecvError::Timeout { .. }) => {}
                Err(e) => panic!("recv_batch_timeout: {e:?}"),
            }
        }
        stop.store(true, Relaxed);
        (slowest, ticker.await.unwrap(), handed)
    });
    // It may have ended already: the channel closed when the task's end dropped.
    peer.kill();
    peer.reap();
    assert!(handed > 0, "the stream never came");
    assert!(
        slowest_call <= BOUND,
        "a recv_batch_timeout of 10 ms took {slowest_call:?}"
    );
    assert!(
        worst_gap <= BOUND,
        "the other task waited {worst_gap:?} for its turn"
    );
}

/// Whether this process's async tasks must sleep on futex rings of their own: the kernel offers
/// `io_uring` futex waits (asked apart from the library), no test hook takes them away, and
/// `SHMLINK_TEST_NO_IO_URING` does not say that this machine refuses them on purpose.
fn direct_path_required() -> bool {
    let taken_away = std::env::var(testing::PRETEND_MISSING_ENV)
        .is_ok_and(|v| v.split(',').any(|m| m == "io_uring"));
    testing::kernel_has_io_uring_futex_waits()
        && !taken_away
        && !testing::io_uring_refused_on_purpose()
}

/// The re-executed process of `an_idle_async_recv_makes_no_timed_wake_ups` (and of its
/// reactor twin, run with io_uring taken away): a task waits for two seconds on a channel whose
/// peer (this process) stays alive and silent. The process's threads must stay asleep
/// meanwhile: the task's runtime thread (and the reactor, where the task sleeps through it)
/// woke at most for the first wait, the whole process used next to no CPU, and the receive was
/// still waiting at the end. Where the kernel lets a task sleep on its own futex ring it must
/// (unless `SHMLINK_TEST_NO_IO_URING` says otherwise), and there is no reactor thread at all.
/// A no-op in a normal test run.
pub(crate) fn idle_child(name: &str) {
    let _guard = NameGuard(name.to_owned());
    let mut peer = Channel::create(name, &Config::default()).unwrap();
    let ch = Channel::connect(name, WaitStrategy::Block).unwrap();
    let task = std::thread::Builder::new()
        .name("idle-task".into())
        .spawn(move || {
            runtime().block_on(async move {
                Ok::<_, Error>(AsyncChannel::new(ch)?.recv().await?.to_vec())
            })
        })
        .unwrap();
    // Let the task give up polling and sleep (nothing to poll for).
    std::thread::sleep(Duration::from_millis(200));
    let sleepers = shmlink::tokio::sleepers();
    let direct = sleepers.rings == 1;
    let reactor_thread = thread_switches("shmlink-reactor").is_some();
    println!("direct {direct}, reactor thread {reactor_thread}");
    println!("async paths: {}", testing::async_paths());
    assert!(
        direct || !direct_path_required(),
        "the kernel has io_uring futex waits, yet the task sleeps through the reactor: {sleepers:?}"
    );
    assert_eq!(
        sleepers.through_reactor,
        usize::from(!direct),
        "the task sleeps on one path: {sleepers:?}"
    );
    assert_eq!(
        reactor_thread, !direct,
        "a reactor thread exists exactly when tasks sleep through it"
    );
    let idle = Duration::from_secs(2);
    let switches = || {
        thread_switches("idle-task").expect("no task thread")
            + thread_switches("shmlink-reactor").unwrap_or(0)
    };
    let (before, cpu) = (switches(), process_cpu());
    std::thread::sleep(idle);
    let (switches, cpu) = (switches() - before, process_cpu() - cpu);
    let waiting = !task.is_finished();
    println!("task and reactor switches {switches}, process cpu {cpu:?}, still waiting {waiting}");
    assert!(
        waiting,
        "the receive ended with no message: {:?}",
        task.join()
    );
    // The peer is covered by the death watcher (whose look at its lock once a second runs on
    // its own thread): nothing but the message may wake the task.
    assert!(
        switches <= 3,
        "the sleeping task's threads woke {switches} times in {idle:?} of idling"
    );
    // Every thread of the process (runtime, reactor if any, watcher, this one) slept.
    assert!(
        cpu * IDLE_CPU_SHARE <= idle,
        "the idle process used {cpu:?} of CPU in {idle:?}"
    );
    peer.send(b"wake up").unwrap();
    assert_eq!(task.join().unwrap().unwrap(), b"wake up");
}

/// Runs `idle_child` in a process of its own (the other tests' tasks would wake the reactor,
/// and their threads use CPU), with `env` besides; returns its output.
fn idle_in_a_child(tag: &str, env: &[(&str, &str)]) -> String {
    let name = unique(tag);
    let _guard = NameGuard(name.clone());
    let mut child = crate::roles::spawn("tokio-idle", &name, env);
    let status = child.reap();
    let out = child.read_all();
    eprintln!("{}", out.trim());
    assert!(status.success(), "the idle child failed (see its output)");
    assert!(
        out.contains("still waiting true"),
        "the idle child did not report its wait: {out:?}"
    );
    out
}

#[test]
fn an_idle_async_recv_makes_no_timed_wake_ups() {
    let out = idle_in_a_child("tokioidle", &[]);
    if direct_path_required() {
        assert!(out.contains("direct true"), "{out:?}");
    }
}

#[test]
fn an_idle_async_recv_through_the_reactor_makes_no_timed_wake_ups() {
    // Where tasks would have rings, the reactor's idleness is measured with them taken away.
    let out = idle_in_a_child("tokioidler", &[(testing::PRETEND_MISSING_ENV, "io_uring")]);
    assert!(out.contains("direct false, reactor thread true"), "{out:?}");
    // And the process says why, where a program can ask.
    assert!(out.contains("rings unsupported true"), "{out:?}");
}

/// Channels whose receivers sleep at once in `many_child`.
const MANY_CHANNELS: usize = 900;
/// The soft `RLIMIT_NOFILE` of `many_child`: each receiver takes two descriptors of it (its
/// mapping, and the pidfd of its peer once it sleeps), 1,800 in all; the rings' share is a
/// quarter, 750: fewer than the receivers, so some sleep through the reactor, and room is left
/// for the rest. (The senders are in a process of their own, `many_senders`.)
const MANY_NOFILE: u64 = 3000;

/// Descriptors this process holds.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The re-executed process of `many_sleeping_async_receivers_leave_descriptors_and_all_wake`:
/// under a soft `RLIMIT_NOFILE` of [`MANY_NOFILE`], [`MANY_CHANNELS`] tasks of a current-thread
/// runtime sleep in `recv` at once. The rings they sleep on must stay within their share (the
/// rest through the reactor), the process must still open files, and every task must wake for
/// its message. A no-op in a normal test run.
pub(crate) fn many_child(prefix: &str) {
    // The senders first, before the limit is lowered (they inherit it).
    let mut command = std::process::Command::new(std::env::current_exe().expect("current_exe"));
    crate::roles::add_to(&mut command, "tokio-many-senders", prefix);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let mut senders = support::ChildGuard::spawn(command);
    wait_for_line(&mut senders, "ready");
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid, writable rlimit, only written by the kernel.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    limit.rlim_cur = MANY_NOFILE.min(limit.rlim_max);
    // SAFETY: a valid rlimit, only read by the kernel.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let names: Vec<String> = (0..MANY_CHANNELS)
        .map(|i| format!("{prefix}-{i}"))
        .collect();
    let _guards: Vec<NameGuard> = names.iter().map(|n| NameGuard(n.clone())).collect();
    let receivers: Vec<Channel> = names
        .iter()
        .map(|name| Channel::connect(name, WaitStrategy::Block).expect("connect"))
        .collect();
    let before = open_descriptors();
    let task = std::thread::spawn(move || {
        runtime().block_on(async move {
            let tasks: Vec<_> = receivers
                .into_iter()
                .map(|ch| {
                    tokio::spawn(async move {
                        let mut ch = AsyncChannel::new(ch)?;
                        let msg = ch.recv().await?.to_vec();
                        Ok::<_, Error>(msg)
                    })
                })
                .collect();
            let mut got = Vec::new();
            for t in tasks {
                got.push(t.await.expect("task panicked"));
            }
            got
        })
    });
    // Every receiver asleep: on its ring (made at its first sleep), or through the reactor.
    let watchdog = std::time::Instant::now() + 2 * WATCHDOG;
    let asleep = |s: &shmlink::tokio::Sleepers| s.through_reactor + s.rings;
    loop {
        let s = shmlink::tokio::sleepers();
        if asleep(&s) >= MANY_CHANNELS {
            break;
        }
        assert!(
            std::time::Instant::now() < watchdog,
            "not every receiver fell asleep: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let sleepers = shmlink::tokio::sleepers();
    let held = open_descriptors();
    println!(
        "{MANY_CHANNELS} sleeping receivers: {before} descriptors before, {held} asleep; {}",
        testing::async_paths()
    );
    assert!(
        sleepers.ring_descriptors <= sleepers.ring_descriptor_limit,
        "{sleepers:?}"
    );
    assert!(
        held <= before + MANY_CHANNELS + sleepers.ring_descriptor_limit + 16,
        "{held} descriptors held, {before} before the receivers slept: {sleepers:?}"
    );
    if direct_path_required() {
        assert!(sleepers.ring_descriptors > 0, "{sleepers:?}");
        assert!(sleepers.over_limit > 0, "{sleepers:?}");
    }
    // The process still has descriptors for the rest of its work.
    let files: Vec<std::fs::File> = (0..64)
        .map(|i| {
            std::fs::File::open("/dev/null").unwrap_or_else(|e| {
                panic!("open file {i} beside {MANY_CHANNELS} sleeping receivers: {e}")
            })
        })
        .collect();
    drop(files);
    // Idle: the reactor sleeps on its first words and its pool threads on the rest, instead of
    // looking at them all every millisecond.
    let idle = Duration::from_secs(1);
    let reactor = || thread_switches("shmlink-reactor").unwrap_or(0);
    let (before, cpu) = (reactor(), process_cpu());
    std::thread::sleep(idle);
    let (woke, cpu) = (reactor() - before, process_cpu() - cpu);
    println!("idle for {idle:?}: the reactor woke {woke} times, the process used {cpu:?}");
    assert!(woke <= 3, "the reactor woke {woke} times in {idle:?}");
    assert!(
        cpu * IDLE_CPU_SHARE <= idle,
        "the idle process used {cpu:?} of CPU in {idle:?}"
    );
    {
        use std::io::Write;
        let stdin = senders.child.stdin.as_mut().expect("the senders' stdin");
        writeln!(stdin, "send").expect("tell the senders");
    }
    wait_for_line(&mut senders, "sent");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(task.join());
    });
    let got = rx
        .recv_timeout(2 * WATCHDOG)
        .expect("not every receiver woke within the watchdog")
        .expect("the runtime thread panicked");
    assert_eq!(got.len(), MANY_CHANNELS);
    for (i, msg) in got.into_iter().enumerate() {
        assert_eq!(msg.expect("recv"), b"wake up", "receiver {i}");
    }
    println!("every receiver woke");
    // Closing their stdin ends the senders.
    drop(senders.child.stdin.take());
    assert!(senders.reap().success(), "the senders failed");
}

/// The senders of `many_child`, in a process of their own: they make [`MANY_CHANNELS`]
/// channels, say `ready`, send one message on each when told on stdin, say `sent`, and keep
/// the channels until stdin closes.
pub(crate) fn many_senders(prefix: &str) {
    use std::io::BufRead;
    let config = Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    };
    let mut channels: Vec<Channel> = (0..MANY_CHANNELS)
        .map(|i| Channel::create(&format!("{prefix}-{i}"), &config).expect("create"))
        .collect();
    println!("ready");
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    stdin.read_line(&mut line).expect("stdin");
    for ch in &mut channels {
        ch.send(b"wake up").expect("send");
    }
    println!("sent");
    let _ = stdin.read_line(&mut line);
}

#[test]
fn many_sleeping_async_receivers_leave_descriptors_and_all_wake() {
    // In a process of its own: the descriptor limit is the process's.
    let prefix = unique("tokiomany");
    let mut child = crate::roles::spawn("tokio-many", &prefix, &[]);
    let status = child.reap_within(4 * WATCHDOG);
    let out = child.read_all();
    eprintln!("{}", out.trim());
    assert!(status.success(), "the child failed (see its output)");
    assert!(out.contains("every receiver woke"), "{out:?}");
    support::assert_nothing_left(&prefix);
}

#[test]
fn a_spinning_channel_is_refused() {
    let name = unique("tokiospin");
    let _guard = NameGuard(name.clone());
    let _a = Channel::create(&name, &Config::default()).unwrap();
    let b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    assert!(matches!(
        AsyncChannel::new(b),
        Err(OpenError::InvalidConfig { .. })
    ));
}

#[test]
fn an_async_listener_refuses_a_config_it_cannot_serve() {
    let name = unique("tokiospin");
    let _guard = NameGuard(name.clone());
    let refused = |got: Result<AsyncListener, OpenError>| match got {
        Err(e @ OpenError::InvalidConfig { .. }) => {
            assert!(e.to_string().contains(&name), "{e}");
            assert!(e.to_string().contains("spin"), "{e}");
        }
        other => panic!("a spin listener was taken for async use: {other:?}"),
    };
    // At bind, before the name is taken: no client ever finds a listener that cannot serve it.
    refused(AsyncListener::bind(
        &name,
        &Config::with_wait(WaitStrategy::Spin),
    ));
    assert!(
        !support::shm_path(&name).exists(),
        "the refused bind left its name"
    );
    assert!(matches!(
        Channel::connect(&name, WaitStrategy::Block),
        Err(OpenError::NotFound { .. })
    ));
    // And when wrapping a listener bound for spinning.
    let spin = shmlink::Listener::bind(&name, &Config::with_wait(WaitStrategy::Spin)).unwrap();
    refused(AsyncListener::new(spin));
    // A block listener is served.
    AsyncListener::bind(&name, &Config::default()).expect("bind a block listener");
}

fn small_block() -> Config {
    Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    }
}

/// A send that times out, or whose future is dropped, part-way through a message longer than
/// the ring withdraws it: the receiver never sees any of it, and the next message arrives.
#[test]
fn an_async_send_abandoned_part_way_is_withdrawn() {
    use std::future::Future;
    use std::task::{Context, Waker};

    let name = unique("tokiocut");
    let _guard = NameGuard(name.clone());
    let a = Channel::create(&name, &small_block()).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let long = vec![3u8; 20_000];
    let mut ch = AsyncChannel::new(a).unwrap();
    // Nobody reads: the send fills the ring and its deadline passes part-way.
    let timed_out = runtime().block_on(ch.send_timeout(&long, Duration::from_millis(50)));
    assert!(
        matches!(timed_out, Err(shmlink::SendError::Timeout { .. })),
        "{timed_out:?}"
    );
    // Drained, then a send that is dropped after its first poll sent part of the message.
    while b.try_recv().is_ok() {}
    {
        let mut send = std::pin::pin!(ch.send(&long));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(send.as_mut().poll(&mut cx).is_pending());
    }
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        b.recv_into_timeout(&mut buf, WATCHDOG).map(|_| buf)
    });
    run_with_watchdog(WATCHDOG, async move {
        ch.send(b"after").await.expect("send after");
        ch
    });
    assert_eq!(reader.join().unwrap().unwrap(), b"after");
}

/// Operations that end at once still take the task's tokio budget, as a tokio socket's do: a
/// task whose channel always has a message (or room) yields to the other tasks of its thread
/// now and then, instead of keeping the thread until the channel runs dry (or fills).
#[test]
fn a_task_whose_channel_is_always_ready_lets_the_other_tasks_of_its_thread_run() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;

    const MESSAGES: usize = 1000;
    let name = unique("tokiocoop");
    let _guard = NameGuard(name.clone());
    let config = Config {
        capacity: 64 * 1024,
        wait: WaitStrategy::Block,
    };
    let a = Channel::create(&name, &config).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    for i in 0..MESSAGES as u32 {
        b.send(&i.to_le_bytes()).unwrap();
    }
    let (sent, received) = run_with_watchdog(WATCHDOG, async move {
        let mut ch = AsyncChannel::new(a).unwrap();
        // How many operations the loop below had done when another task of the thread ran.
        let done = Arc::new(AtomicUsize::new(0));
        let looked = |done: &Arc<AtomicUsize>| {
            let done = Arc::clone(done);
            tokio::spawn(async move { done.load(Relaxed) })
        };
        // A backlog: every receive finds its message at once.
        let other = looked(&done);
        for i in 0..MESSAGES as u32 {
            assert_eq!(*ch.recv().await.unwrap(), i.to_le_bytes());
            done.fetch_add(1, Relaxed);
        }
        let received = other.await.unwrap();
        // A ring with room for every message: every send finds room at once.
        done.store(0, Relaxed);
        let other = looked(&done);
        for i in 0..MESSAGES as u32 {
            ch.send(&i.to_le_bytes()).await.unwrap();
            done.fetch_add(1, Relaxed);
        }
        (other.await.unwrap(), received)
    });
    assert!(
        received < MESSAGES,
        "another task ran only after all {MESSAGES} receives"
    );
    assert!(
        sent < MESSAGES,
        "another task ran only after all {MESSAGES} sends"
    );
    // What the sends wrote arrived whole, in order.
    for i in 0..MESSAGES as u32 {
        assert_eq!(*b.try_recv().unwrap(), i.to_le_bytes());
    }
}

/// An async receive that sleeps until a message comes, and an async send that sleeps until a
/// full ring has room, count their sleeps in the mapping as blocking waits do.
#[test]
fn async_waits_that_sleep_are_counted() {
    const K: u64 = 3;
    let name = unique("async-sleeps");
    let _guard = NameGuard(name.clone());
    let config = Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    };
    let mut a = Channel::create(&name, &config).unwrap();
    let b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let sleeps = |i| {
        let (sender, receiver) = crate::counters::ring(&name, i);
        (sender.sleeps, receiver.sleeps)
    };
    assert_eq!((sleeps(0), sleeps(1)), ((0, 0), (0, 0)));

    // K receives, each long enough before its message to stop polling and sleep.
    let sender = std::thread::spawn(move || {
        for _ in 0..K {
            std::thread::sleep(Duration::from_millis(100));
            a.send(b"wake").unwrap();
        }
        a
    });
    let b = run_with_watchdog(WATCHDOG, async move {
        let mut ch = AsyncChannel::new(b).unwrap();
        for _ in 0..K {
            ch.recv().await.unwrap();
        }
        ch
    });
    let mut a = sender.join().unwrap();
    assert_eq!(sleeps(0), (0, K));

    // One send into b's full outbound ring: it sleeps until a reads, 100 ms later.
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        while a.try_recv().is_ok() {}
        a
    });
    let _b = run_with_watchdog(WATCHDOG, async move {
        let mut ch = b;
        while ch.try_send(&[1; 64]).is_ok() {}
        ch.send(&[2; 64]).await.unwrap();
        ch
    });
    let _a = reader.join().unwrap();
    assert_eq!(sleeps(1).0, 1);
}
