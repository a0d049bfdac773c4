//! Peer liveness that does not trust pids, with real processes: a connector killed in the middle
//! of claiming its end leaves the channel usable, a segment is stale when nobody holds its
//! creator lock whatever pid it names, and a live peer stays alive whatever pid it recorded
//! (the pid a process in another PID namespace records means nothing here), nor does a dead one
//! that recorded the pid of a process that lives on.
//!
//! Connectors that forge their record are this test binary run again in the role
//! `liveness-forge-as-init` (see `child` and `roles`).

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use shmlink::segments;
use shmlink::testing::{PeerInfo, SegmentHeader, StopPoint, STOP_AT_ENV};
use shmlink::{Channel, Config, Error, OpenError, RecvError, Selector, SendError, WaitStrategy};
use support::{
    echo, echo_creator, exited, serial, shm_path, unique, wait_for_line, ChildGuard, NameGuard,
    WATCHDOG,
};

fn small() -> Config {
    Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    }
}

/// A writable view of the segment `name`, as another process (a neighbour, or a peer in another
/// PID namespace) sees it.
struct Segment(MmapMut);

impl Segment {
    fn open(name: &str) -> Segment {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(shm_path(name))
            .expect("open the segment");
        // SAFETY: a segment made by this test or its children; every access through this view
        // is atomic.
        Segment(unsafe { MmapMut::map_mut(&file) }.expect("map the segment"))
    }

    fn header(&self) -> &SegmentHeader {
        assert!(self.0.len() >= shmlink::testing::HEADER_SIZE);
        // SAFETY: the mapping is page-aligned and at least a header long; the header is all
        // atomics, valid for any bytes and shared with the processes that use the segment.
        unsafe { &*(self.0.as_ptr() as *const SegmentHeader) }
    }

    /// Writes `pid` (and a start time) into an endpoint's record, as a process whose pid
    /// numbers differ from ours would have recorded it.
    fn record_pid(info: &PeerInfo, pid: u32, start_time: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        info.pid.store(pid, Relaxed);
        info.start_time.store(start_time, Relaxed);
    }
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

/// Start time of `pid` (field 22 of `/proc/<pid>/stat`).
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    rest.split_ascii_whitespace()
        .nth(19)
        .expect("start time field")
        .parse()
        .expect("start time")
}

/// Waits (bounded) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WATCHDOG;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {WATCHDOG:?}");
        // Polling another process's progress; nothing to wake us.
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits until the connector of `name` has marked itself present.
fn wait_connector_present(name: &str) {
    wait_for("connector present", || {
        segments::inspect(name).is_ok_and(|i| i.connector.state == "present")
    });
}

/// State letter of `pid` in `/proc/<pid>/stat` (`T` when stopped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// `shmlink-echo` connecting to `name` with extra environment.
fn echo_with_env(name: &str, env: &[(&str, &str)]) -> ChildGuard {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shmlink-echo"));
    cmd.args([name, "block"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    ChildGuard::from(cmd.spawn().expect("spawn shmlink-echo"))
}

/// A round trip through a fresh `shmlink-echo` connected to `name`.
fn round_trip_with_new_connector(ch: &mut Channel, name: &str) {
    let _echo = echo(&[name, "block"]);
    ch.send(b"still works").expect("send");
    let reply = ch
        .recv_timeout(WATCHDOG)
        .expect("a new connector gets the channel and echoes");
    assert_eq!(&*reply, b"still works");
}

/// A connector stopped right after it claimed its end (`PEER_CLAIMING`), before it marked itself
/// present, and killed there: the creator keeps waiting for a connector instead of hanging on a
/// dead one, and the next connector gets the channel.
#[test]
fn a_connector_killed_while_claiming_leaves_the_channel_to_the_next_one() {
    let _serial = serial();
    let name = unique("claim-killed");
    let _unlink = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &small()).expect("create");
    let mut claimer = echo_with_env(&name, &[(STOP_AT_ENV, StopPoint::ConnectClaimed.name())]);
    let pid = claimer.pid();
    wait_for("the connector stops after claiming", || {
        proc_state(pid) == Some('T')
    });
    let info = segments::inspect(&name).expect("inspect");
    assert_eq!(info.connector.state, "claiming", "{info:?}");
    assert!(
        info.connector.alive,
        "a stopped claimer still holds its end"
    );
    // While the claimer lives, its claim stands.
    assert!(matches!(
        Channel::connect(&name, WaitStrategy::Block),
        Err(OpenError::AlreadyConnected { .. })
    ));

    claimer.kill();
    claimer.reap();
    let info = segments::inspect(&name).expect("inspect after the kill");
    assert!(
        info.connector.state == "claiming" && !info.connector.alive,
        "{info:?}"
    );
    // The creator is back to waiting for a connector: no PeerGone (nobody was connected), and
    // no hang past the deadline.
    assert!(matches!(
        ch.recv_timeout(Duration::from_millis(30)),
        Err(RecvError::Timeout { .. })
    ));
    assert!(!ch.is_peer_connected());
    round_trip_with_new_connector(&mut ch, &name);
}

/// Connectors killed at random moments while they connect: whatever point each one reached,
/// the channel recovers: either the creator gets `PeerGone` (the connector had connected), or a
/// new connector gets the channel. The kills home in on the moment connectors claim their end.
#[test]
fn random_kills_during_connect_never_brick_the_channel() {
    let _serial = serial();
    let mut seed = u64::from(std::process::id()) | 1;
    let mut random = move || {
        // xorshift64*
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    // Delay from spawn to kill: lengthened after a kill that came before the claim, shortened
    // after one that came after it, with jitter, so the kills gather around the claim.
    let mut aim = Duration::from_millis(1);
    let (mut before, mut claiming, mut connected) = (0, 0, 0);
    let rounds = 200;
    for round in 0..rounds {
        let name = unique(&format!("kill-{round}"));
        let _unlink = NameGuard(name.clone());
        let mut ch = Channel::create(&name, &small()).expect("create");
        let delay = aim.mul_f64(0.8 + (random() % 1000) as f64 / 2500.0);
        let mut child = echo(&[&name, "block"]);
        let started = Instant::now();
        while started.elapsed() < delay {
            std::hint::spin_loop();
        }
        child.kill();
        child.reap();
        let info = segments::inspect(&name).expect("inspect");
        match info.connector.state {
            "present" => {
                connected += 1;
                aim = aim.mul_f64(0.93);
                assert!(!info.connector.alive, "round {round}: {info:?}");
                match ch.recv_timeout(WATCHDOG) {
                    Err(RecvError::PeerGone { .. }) => {}
                    other => panic!("round {round}: expected PeerGone, got {other:?}"),
                }
            }
            state => {
                if state == "absent" {
                    before += 1;
                    aim = aim.mul_f64(1.07);
                } else {
                    // Killed between claiming the end and marking itself present.
                    claiming += 1;
                }
                round_trip_with_new_connector(&mut ch, &name);
            }
        }
    }
    eprintln!(
        "liveness: {rounds} connectors killed during connect (delay settled at {aim:?}): \
         {before} before claiming, {claiming} while claiming, {connected} after connecting"
    );
    // The kills gathered around the claim: some landed before it, some after the connector was
    // in. (The moment between claiming and being present is hit on purpose by the stop-point
    // test above; a random kill lands there only now and then.)
    assert!(
        before > 0 && connected > 0,
        "the kills never straddled the claim: {before} before claiming, {claiming} while \
         claiming, {connected} after connecting"
    );
}

/// A segment whose creator lock nobody holds is stale, even when the pid it names is alive
/// (here pid 1, with its real start time): `create` reclaims it and `shmlink-clean` removes it.
#[test]
fn a_segment_without_a_lock_holder_is_stale_whatever_pid_it_names() {
    let _serial = serial();
    let init_start = start_time(1);
    for (i, start) in [0, init_start].into_iter().enumerate() {
        let name = unique(&format!("pid-one-{i}"));
        let _unlink = NameGuard(name.clone());
        let mut owner = echo_creator(&[], &name, "block");
        owner.kill();
        owner.reap();
        {
            let seg = Segment::open(&name);
            Segment::record_pid(&seg.header().creator, 1, start);
        }
        let info = segments::inspect(&name).expect("inspect");
        assert!(info.ready && !info.owner_locked, "{info:?}");
        assert_eq!(info.creator.pid, 1, "the recorded pid is still shown");
        assert!(
            !info.creator.alive && info.stale,
            "pid 1 overrode the lock: {info:?}"
        );

        // The cleaner agrees, and removes it.
        let out = Command::new(env!("CARGO_BIN_EXE_shmlink-clean"))
            .arg(&name)
            .output()
            .expect("run shmlink-clean");
        assert!(out.status.success(), "{out:?}");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            report.contains("stale") && report.contains("-> removed"),
            "{report}"
        );
        assert!(!shm_path(&name).exists(), "{report}");
    }

    // `create` reclaims such a segment too.
    let name = unique("pid-one-create");
    let _unlink = NameGuard(name.clone());
    let mut owner = echo_creator(&[], &name, "block");
    owner.kill();
    owner.reap();
    Segment::record_pid(&Segment::open(&name).header().creator, 1, init_start);
    let mut ch = Channel::create(&name, &small()).expect("create over a dead creator named pid 1");
    round_trip_with_new_connector(&mut ch, &name);
}

/// The connector recorded a pid that means nothing here (as a process in another PID namespace
/// does): while it holds its end, the creator still sees it alive; once killed, `PeerGone`.
#[test]
fn a_live_connector_is_alive_whatever_pid_it_recorded() {
    let _serial = serial();
    for bogus in [dead_pid(), 1] {
        let name = unique(&format!("bogus-conn-{bogus}"));
        let _unlink = NameGuard(name.clone());
        let mut ch = Channel::create(&name, &small()).expect("create");
        let mut peer = echo(&[&name, "block"]);
        wait_connector_present(&name);
        let seg = Segment::open(&name);
        // Before the creator has looked at its peer at all.
        Segment::record_pid(&seg.header().connector, bogus, 12345);

        // Longer than the peer-check interval: the wait looks at the peer.
        assert!(
            matches!(
                ch.recv_timeout(Duration::from_millis(30)),
                Err(RecvError::Timeout { .. })
            ),
            "a live connector recorded as pid {bogus} was judged gone"
        );
        assert!(ch.is_peer_connected());
        assert_eq!(
            ch.peer_pid(),
            Some(bogus),
            "the recorded pid is reported as is"
        );
        let info = segments::inspect(&name).expect("inspect");
        assert!(info.connector.alive, "{info:?}");
        ch.send(b"ping").expect("send");
        assert_eq!(&*ch.recv_timeout(WATCHDOG).expect("echo"), b"ping");

        // Death is still seen, by the lock.
        peer.kill();
        let killed = Instant::now();
        match ch.recv_timeout(WATCHDOG) {
            Err(RecvError::PeerGone { pid, .. }) => assert_eq!(pid, bogus),
            other => panic!("expected PeerGone, got {other:?}"),
        }
        eprintln!(
            "liveness: connector recorded as pid {bogus} killed: PeerGone after {:.2} ms",
            killed.elapsed().as_secs_f64() * 1e3
        );
        peer.reap();
    }
}

/// The same from the connector's side: the creator recorded a pid that means nothing here.
#[test]
fn a_live_creator_is_alive_whatever_pid_it_recorded() {
    let _serial = serial();
    for bogus in [dead_pid(), 1] {
        let name = unique(&format!("bogus-creator-{bogus}"));
        let _unlink = NameGuard(name.clone());
        let mut peer = echo_creator(&[], &name, "block");
        let mut ch =
            Channel::connect_timeout(&name, WaitStrategy::Block, WATCHDOG).expect("connect");
        let seg = Segment::open(&name);
        Segment::record_pid(&seg.header().creator, bogus, 12345);

        assert!(
            matches!(
                ch.recv_timeout(Duration::from_millis(30)),
                Err(RecvError::Timeout { .. })
            ),
            "a live creator recorded as pid {bogus} was judged gone"
        );
        assert!(ch.is_peer_connected());
        let info = segments::inspect(&name).expect("inspect");
        assert!(info.creator.alive && !info.stale, "{info:?}");
        assert!(matches!(
            Channel::create(&name, &small()),
            Err(OpenError::AlreadyExists { .. })
        ));
        ch.send(b"ping").expect("send");
        assert_eq!(&*ch.recv_timeout(WATCHDOG).expect("echo"), b"ping");

        peer.kill();
        let died = exited(peer.pid());
        match ch.recv_timeout(WATCHDOG) {
            Err(RecvError::PeerGone { pid, .. }) => assert_eq!(pid, bogus),
            other => panic!("expected PeerGone, got {other:?}"),
        }
        assert_about_a_second(
            &format!("recv from a creator recorded as {bogus}"),
            died.elapsed(),
        );
        peer.reap();
    }
}

/// Set (to anything) on a machine that cannot make PID namespaces, to skip the test that needs
/// one instead of failing it.
const NO_PID_NAMESPACE: &str = "SHMLINK_TEST_NO_PID_NAMESPACE";

/// A real peer in another PID namespace (`unshare --pid --fork --mount-proc`: it is pid 1 in
/// its own namespace, with its own `/proc`). Needs root and util-linux `unshare`, as CI has:
/// fails, saying why, where the namespace cannot be made, unless [`NO_PID_NAMESPACE`] is set.
#[test]
fn a_peer_in_another_pid_namespace_is_alive_until_it_dies() {
    let _serial = serial();
    if let Some(v) = std::env::var_os(NO_PID_NAMESPACE) {
        eprintln!("liveness: PID namespace test skipped: {NO_PID_NAMESPACE}={v:?} is set");
        return;
    }
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "--mount-proc", "true"])
        .stdout(Stdio::null())
        .output();
    match probe {
        Ok(out) if out.status.success() => {
            eprintln!("liveness: PID namespace test runs: unshare made a namespace");
        }
        other => panic!(
            "cannot make a PID namespace with `unshare --pid --fork --mount-proc` (needs root \
             and util-linux): {}; set {NO_PID_NAMESPACE}=1 to skip this test on such a machine",
            match other {
                Ok(out) => format!(
                    "{}, {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Err(e) => e.to_string(),
            }
        ),
    }
    let name = unique("pidns");
    let _unlink = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &small()).expect("create");
    // `--kill-child`: killing `unshare` kills the namespace's init, our peer.
    let mut peer = ChildGuard::from(
        Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child", "--mount-proc"])
            .arg(env!("CARGO_BIN_EXE_shmlink-echo"))
            .args([name.as_str(), "block"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn unshare"),
    );
    wait_connector_present(&name);
    let info = segments::inspect(&name).expect("inspect");
    assert_eq!(
        info.connector.pid, 1,
        "the peer records its own namespace's pid"
    );
    assert!(info.connector.alive, "{info:?}");

    assert!(
        matches!(
            ch.recv_timeout(Duration::from_millis(30)),
            Err(RecvError::Timeout { .. })
        ),
        "a live peer in another PID namespace was judged gone"
    );
    ch.send(b"across namespaces").expect("send");
    assert_eq!(
        &*ch.recv_timeout(WATCHDOG).expect("echo"),
        b"across namespaces"
    );

    peer.kill();
    // `unshare` exits first; the peer dies of its death.
    let died = exited(peer.pid());
    match ch.recv_timeout(WATCHDOG) {
        Err(RecvError::PeerGone { pid, .. }) => assert_eq!(pid, 1),
        other => panic!("expected PeerGone, got {other:?}"),
    }
    assert_about_a_second("recv from a peer in another PID namespace", died.elapsed());
    peer.reap();
}

/// The role `liveness-forge-as-init` of a re-run of this binary: connects to the channel
/// `name`, overwrites its own record with pid 1 and init's start time (the peer chooses what
/// it records), says so, and holds its end until killed.
pub(crate) fn child(name: &str) {
    let _ch = Channel::connect_timeout(name, WaitStrategy::Block, WATCHDOG).expect("connect");
    let seg = Segment::open(name);
    Segment::record_pid(&seg.header().connector, 1, start_time(1));
    println!("forged");
    loop {
        std::thread::park();
    }
}

/// A channel whose connector, a child process, recorded itself as pid 1 with init's start
/// time, and killed after the creator's receiving half registered that record with the death
/// watcher (a first short wait does): the watcher then holds a pidfd of init, which never
/// exits, so only the connector's lock can tell that it died.
fn connector_dead_as_init(tag: &str) -> (Channel, NameGuard) {
    let name = unique(tag);
    let guard = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &small()).expect("create");
    let mut child = crate::roles::spawn("liveness-forge-as-init", &name, &[]);
    wait_for_line(&mut child, "forged");
    assert!(matches!(
        ch.recv_timeout(Duration::from_millis(30)),
        Err(RecvError::Timeout { .. })
    ));
    assert_eq!(ch.peer_pid(), Some(1), "the forged record is what we read");
    child.kill();
    child.reap();
    (ch, guard)
}

/// Runs `wait` in a thread of its own and returns what it gave and how long it took; fails the
/// test if it has not returned within the watchdog (the thread is then left blocked).
fn within_watchdog<T: Send + 'static>(
    what: &str,
    wait: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(wait());
    });
    let got = rx
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("{what}: still waiting {WATCHDOG:?} after its peer died"));
    let took = started.elapsed();
    eprintln!(
        "liveness: {what} after a connector recorded as init died: returned after {:.0} ms",
        took.as_secs_f64() * 1e3
    );
    (got, took)
}

/// How long the news of a death may take when the peer recorded another process's pid: the
/// death watcher's look at every lock once a second, with a margin for a loaded machine.
const ABOUT_A_SECOND: Duration = Duration::from_millis(2500);

/// Fails the test if `what` ended later than [`ABOUT_A_SECOND`] after the peer died.
fn assert_about_a_second(what: &str, took: Duration) {
    assert!(
        took <= ABOUT_A_SECOND,
        "{what}: returned {took:?} after the peer recorded as init died"
    );
}

/// `PeerGone` naming the forged pid.
fn assert_gone_as_init<T: std::fmt::Debug>(what: &str, got: Result<T, impl Into<Error>>) {
    match got.map_err(Into::into) {
        Err(
            Error::Open(OpenError::PeerGone { pid, .. })
            | Error::Send(SendError::PeerGone { pid, .. })
            | Error::Recv(RecvError::PeerGone { pid, .. }),
        ) => assert_eq!(pid, 1, "{what}"),
        other => panic!("{what}: expected PeerGone, got {other:?}"),
    }
}

#[test]
fn a_recv_ends_when_a_connector_recorded_as_init_dies() {
    let _serial = serial();
    let (mut ch, _name) = connector_dead_as_init("init-recv");
    let (got, took) = within_watchdog("recv()", move || ch.recv().map(|m| m.to_vec()));
    assert_gone_as_init("recv()", got);
    assert_about_a_second("recv()", took);
}

#[test]
fn a_long_recv_timeout_ends_when_a_connector_recorded_as_init_dies() {
    let _serial = serial();
    let (mut ch, _name) = connector_dead_as_init("init-recv-timeout");
    let (got, took) = within_watchdog("recv_timeout(5 s)", move || {
        ch.recv_timeout(WATCHDOG / 2).map(|m| m.to_vec())
    });
    assert_gone_as_init("recv_timeout(5 s)", got);
    assert_about_a_second("recv_timeout(5 s)", took);
}

#[test]
fn a_selector_reports_a_connector_recorded_as_init_that_died() {
    let _serial = serial();
    let (ch, _name) = connector_dead_as_init("init-selector");
    let ((ready, mut channels), took) = within_watchdog("Selector::wait", move || {
        let mut channels = vec![ch];
        let ready = Selector::new()
            .wait(&mut channels, Some(WATCHDOG / 2))
            .to_vec();
        (ready, channels)
    });
    assert_eq!(ready, vec![0], "the dead peer's channel is ready");
    assert_about_a_second("Selector::wait", took);
    assert_gone_as_init("try_recv after the selector", channels[0].try_recv());
}

#[cfg(feature = "tokio")]
#[test]
fn an_async_recv_ends_when_a_connector_recorded_as_init_dies() {
    let _serial = serial();
    let (ch, _name) = connector_dead_as_init("init-async");
    let (got, took) = within_watchdog("async recv", move || {
        ::tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("runtime")
            .block_on(async move {
                let mut ch = shmlink::tokio::AsyncChannel::new(ch)?;
                let got = ch.recv().await.map(|m| m.to_vec());
                Ok::<_, Error>(got?)
            })
    });
    assert_gone_as_init("async recv", got);
    assert_about_a_second("async recv", took);
}
