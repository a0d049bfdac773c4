//! Services across real processes: one listener serving many client processes, clients and
//! servers dying, and a selector over many idle channels.
//!
//! Client and server processes are this test binary run again in the role `services` (see
//! `child` and `roles`).

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shmlink::{
    Channel, Config, Connection, Endpoint, Listener, OpenError, RecvError, Selector, WaitStrategy,
};
use support::{
    checked_echo, measure, reap_killed, serial, unique, wait_for_line, ChildGuard, NameGuard,
    WATCHDOG,
};

/// Runs this binary again as a client or server (see `roles`).
fn spawn_role(role: &str, args: &[String]) -> ChildGuard {
    crate::roles::spawn("services", &format!("{role} {}", args.join(" ")), &[])
}

/// The role `services` of a re-run of this binary: `client`, `server`, `idle`, `deaf`...,
/// with its arguments.
pub(crate) fn child(spec: &str) {
    let args: Vec<&str> = spec.split_whitespace().collect();
    let code = match args.as_slice() {
        ["client", name, id, count] => client(name, id.parse().unwrap(), count.parse().unwrap()),
        ["server", name] => server(name),
        ["idle", name] => {
            // Connects and holds its channel until killed.
            let _ch =
                Channel::connect_timeout(name, WaitStrategy::Block, WATCHDOG).expect("connect");
            println!("ready");
            loop {
                std::thread::park();
            }
        }
        ["deaf", name, limit @ ..] => {
            // Binds (with the given client limit, or the default) and never accepts.
            let limit = limit
                .first()
                .map_or(shmlink::DEFAULT_MAX_CLIENTS, |l| l.parse().expect("limit"));
            let _listener =
                Listener::bind_with_limit(name, &Config::default(), limit).expect("bind");
            println!("ready");
            loop {
                std::thread::park();
            }
        }
        ["forge", name, limit] => forge_slots(name, limit.parse().expect("limit")),
        other => panic!("unknown role {other:?}"),
    };
    std::process::exit(code);
}

/// The forged states `forge_slots` writes, slot by slot in turn: (pid, state).
const FORGED: [(u64, u64); 4] = [
    (1, ACTIVE),  // active, "held" by init
    (4242, 0x77), // no known state
    (0, ACTIVE),  // active, no pid
    (7, 0xffff),  // no known state
];
const ACTIVE: u64 = shmlink::testing::LISTENER_SLOT_ACTIVE;

/// A hostile process of the same user: writes forged states into every slot word of the
/// listener `name` (`limit` slots) without holding any slot's lock, and exits.
fn forge_slots(name: &str, limit: usize) -> i32 {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(support::shm_path(name))
        .expect("open the listener");
    for i in 0..limit {
        let (pid, state) = FORGED[i % FORGED.len()];
        let word = pid << 32 | state;
        file.write_all_at(&word.to_le_bytes(), slot_offset(i))
            .expect("write a slot word");
    }
    println!("forged");
    0
}

/// Where slot `i`'s word is in a listener's mapping.
fn slot_offset(i: usize) -> u64 {
    (shmlink::testing::LISTENER_SLOTS_OFFSET + i * shmlink::testing::LISTENER_SLOT_SIZE) as u64
}

/// The words (`pid << 32 | state`) of the `limit` slots of the listener `name`, read from its
/// object.
fn slot_words(name: &str, limit: usize) -> Vec<u64> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(support::shm_path(name)).expect("open the listener");
    (0..limit)
        .map(|i| {
            let mut word = [0u8; 8];
            file.read_exact_at(&mut word, slot_offset(i))
                .expect("read a slot word");
            u64::from_le_bytes(word)
        })
        .collect()
}

/// The states (low 32 bits of the slot words) of the `limit` slots of the listener `name`.
fn slot_states(name: &str, limit: usize) -> Vec<u64> {
    slot_words(name, limit)
        .into_iter()
        .map(|w| w & 0xffff_ffff)
        .collect()
}

/// `Listener::connect`, retried while the listener answers `TooManyClients` (a client that
/// finds no free slot wakes the server, which frees what no client holds), for at most the
/// watchdog.
fn connect_retrying(name: &str) -> Channel {
    let deadline = Instant::now() + WATCHDOG;
    loop {
        match Channel::connect(name, WaitStrategy::Block) {
            Ok(ch) => return ch,
            Err(OpenError::TooManyClients { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("connect to {name}: {e}"),
        }
    }
}

/// Exchanges `count` checked messages (0 = until killed) and exits 0 if every reply was right.
fn client(name: &str, id: u64, count: u64) -> i32 {
    let mut ch = match Channel::connect_timeout(name, WaitStrategy::Block, WATCHDOG) {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("client {id}: connect: {e}");
            return 2;
        }
    };
    let mut i = 0u64;
    while count == 0 || i < count {
        if let Err(code) = checked_echo(&mut ch, &id.to_string(), i) {
            return code;
        }
        i += 1;
    }
    0
}

/// Echo server: one thread, one selector, accepting clients until killed.
fn server(name: &str) -> i32 {
    let listener = Listener::bind(name, &Config::default()).expect("bind");
    println!("ready");
    let mut conns = Vec::new();
    let mut selector = Selector::new();
    loop {
        serve_round(&listener, &mut selector, &mut conns, None);
    }
}

/// Waits once, echoes one message per ready connection, drops the connections whose client is
/// gone. Returns how many were dropped.
fn serve_round(
    listener: &Listener,
    selector: &mut Selector,
    conns: &mut Vec<Connection>,
    timeout: Option<Duration>,
) -> usize {
    let ready = selector
        .wait_accept(listener, conns, timeout)
        .expect("selector")
        .to_vec();
    let mut gone = Vec::new();
    for i in ready {
        let conn = &mut conns[i];
        let msg = match conn.try_recv() {
            Ok(msg) => msg.to_vec(),
            Err(RecvError::Empty { .. }) => continue,
            Err(e) => {
                assert!(e.is_disconnect(), "server: unexpected {e}");
                gone.push(i);
                continue;
            }
        };
        if let Err(e) = conn.send(&msg) {
            assert!(e.is_disconnect(), "server: unexpected {e}");
            gone.push(i);
        }
    }
    gone.sort_unstable();
    for &i in gone.iter().rev() {
        conns.swap_remove(i);
    }
    gone.len()
}

/// Names in /dev/shm that belong to connections of the listener `name`.
fn connection_names(name: &str) -> Vec<String> {
    let prefix = format!("shmlink-{name}.");
    std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|f| f.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Lines of /proc/self/maps that map the listener `name` or one of its connections (other
/// tests of this binary map their own channels meanwhile).
fn mappings_of(name: &str) -> usize {
    let listener = format!("/shmlink-{name} ");
    let connection = format!("/shmlink-{name}.");
    std::fs::read_to_string("/proc/self/maps")
        .expect("maps")
        .lines()
        .filter(|l| l.contains(&connection) || format!("{l} ").contains(&listener))
        .count()
}

/// Serves until `done()` or the watchdog; returns the connections dropped.
fn serve_until(
    listener: &Listener,
    conns: &mut Vec<Connection>,
    limit: Duration,
    mut done: impl FnMut(usize, &[Connection]) -> bool,
) -> usize {
    let mut selector = Selector::new();
    let deadline = Instant::now() + limit;
    let mut dropped = 0;
    while !done(dropped, conns) {
        assert!(
            Instant::now() < deadline,
            "server did not finish in {limit:?}"
        );
        dropped += serve_round(
            listener,
            &mut selector,
            conns,
            Some(Duration::from_millis(200)),
        );
    }
    dropped
}

#[test]
fn sixteen_clients_then_sixteen_more_lose_nothing_and_leave_no_names() {
    let _serial = serial();
    let name = unique("svc16");
    let _guard = NameGuard(name.clone());
    let listener = Listener::bind(&name, &Config::default()).unwrap();
    const CLIENTS: u64 = 16;
    const MESSAGES: u64 = 10_000;
    let mut conns = Vec::new();
    for round in 0..2 {
        let mut clients: Vec<ChildGuard> = (0..CLIENTS)
            .map(|i| {
                spawn_role(
                    "client",
                    &[
                        name.clone(),
                        (round * CLIENTS + i).to_string(),
                        MESSAGES.to_string(),
                    ],
                )
            })
            .collect();
        let dropped = serve_until(&listener, &mut conns, 6 * WATCHDOG, |dropped, conns| {
            dropped == CLIENTS as usize && conns.is_empty()
        });
        assert_eq!(dropped, CLIENTS as usize);
        for c in &mut clients {
            let status = c.reap();
            assert!(status.success(), "client {} failed: {status}", c.pid());
        }
        assert_eq!(connection_names(&name), Vec::<String>::new());
    }
    drop(listener);
    assert!(!support::shm_path(&name).exists(), "listener name left");
}

#[test]
fn clients_killed_at_random_free_what_the_server_held() {
    let _serial = serial();
    let name = unique("svckill");
    let _guard = NameGuard(name.clone());
    let listener = Listener::bind(&name, &Config::default()).unwrap();
    let baseline = mappings_of(&name);
    assert_eq!(baseline, 1, "the listener is mapped once");
    let mut conns = Vec::new();
    // Four clients talk until killed, four finish a fixed number of messages.
    let mut doomed: Vec<ChildGuard> = (0..4)
        .map(|i| spawn_role("client", &[name.clone(), i.to_string(), "0".into()]))
        .collect();
    let mut finishing: Vec<ChildGuard> = (4..8)
        .map(|i| spawn_role("client", &[name.clone(), i.to_string(), "3000".into()]))
        .collect();
    // Kill them one by one at moments spread by a cheap pseudo-random sequence.
    let mut seed = u64::from(std::process::id());
    let mut kill_at = Vec::new();
    let mut t = Instant::now();
    for _ in 0..doomed.len() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        t += Duration::from_millis(20 + (seed >> 33) % 150);
        kill_at.push(t);
    }
    let mut killed = 0;
    let dropped = serve_until(&listener, &mut conns, 6 * WATCHDOG, |dropped, conns| {
        while killed < doomed.len() && Instant::now() >= kill_at[killed] {
            doomed[killed].kill();
            killed += 1;
        }
        killed == doomed.len() && dropped == 8 && conns.is_empty()
    });
    assert_eq!(dropped, 8);
    for c in &mut finishing {
        let status = c.reap();
        assert!(status.success(), "client {} failed: {status}", c.pid());
    }
    for c in &mut doomed {
        reap_killed(c);
    }
    assert_eq!(
        mappings_of(&name),
        baseline,
        "the server still maps connections"
    );
    // A killed client's name is removed when its connection drops, or, if its process was
    // still exiting then, by one of the listener's next sweeps.
    let deadline = Instant::now() + WATCHDOG;
    while !connection_names(&name).is_empty() {
        assert!(
            Instant::now() < deadline,
            "names left: {:?}",
            connection_names(&name)
        );
        assert!(matches!(
            listener.try_accept(),
            Err(OpenError::NoClient { .. })
        ));
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_killed_server_is_noticed_by_every_client_and_its_name_reclaimed() {
    let _serial = serial();
    let name = unique("svcdead");
    let _guard = NameGuard(name.clone());
    let mut server = spawn_role("server", std::slice::from_ref(&name));
    wait_for_line(&mut server, "ready");
    let clients: Vec<Channel> = (0..4)
        .map(|_| Channel::connect_timeout(&name, WaitStrategy::Block, WATCHDOG).unwrap())
        .collect();
    let (echoed_tx, echoed) = std::sync::mpsc::channel();
    let threads: Vec<_> = clients
        .into_iter()
        .map(|mut ch| {
            let echoed_tx = echoed_tx.clone();
            std::thread::spawn(move || {
                ch.send(b"hello").unwrap();
                assert_eq!(&*ch.recv_timeout(WATCHDOG).unwrap(), b"hello");
                echoed_tx.send(()).unwrap();
                // Now wait on a server that is about to be killed: the watchdog is one second.
                let result = ch.recv_timeout(Duration::from_secs(1)).map(|m| m.to_vec());
                (result, Instant::now(), ch)
            })
        })
        .collect();
    // Kill the server once every client got its echo and is about to wait.
    for _ in 0..4 {
        echoed.recv_timeout(WATCHDOG).expect("a client got no echo");
    }
    let pid = server.pid();
    server.kill();
    let died = support::exited(pid);
    reap_killed(&mut server);
    for t in threads {
        let (result, returned, _ch) = t.join().unwrap();
        match result {
            Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
            other => panic!("client got {other:?} instead of PeerGone within 1 s"),
        }
        // "Within milliseconds", with a margin for a loaded machine.
        let took = returned.saturating_duration_since(died);
        eprintln!(
            "services: a client got PeerGone {:.2} ms after the server exited",
            took.as_secs_f64() * 1e3
        );
        assert!(
            took <= Duration::from_millis(100),
            "a client got PeerGone {took:?} after the server exited"
        );
    }
    // The name is stale: a new server takes it over, and clients reach the new one.
    let listener = Listener::bind(&name, &Config::default()).expect("reclaim the listener name");
    let connector = {
        let name = name.clone();
        std::thread::spawn(move || Channel::connect(&name, WaitStrategy::Block))
    };
    let mut conn = listener.accept_timeout(WATCHDOG).unwrap();
    let mut ch = connector.join().unwrap().unwrap();
    ch.send(b"again").unwrap();
    assert_eq!(&*conn.recv_timeout(WATCHDOG).unwrap(), b"again");
}

#[test]
fn a_selector_over_100_idle_channels_sleeps_and_wakes_on_any() {
    let base = unique("sel");
    let mut names = Vec::new();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..100 {
        let name = format!("{base}-{i}");
        names.push(NameGuard(name.clone()));
        senders.push(Channel::create(&name, &Config::default()).unwrap());
        receivers.push(Channel::connect(&name, WaitStrategy::Block).unwrap());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let idle = Duration::from_secs(2);
    let selector = std::thread::spawn(move || {
        let mut selector = Selector::new();
        // Idle for two seconds: every peer is covered by the death watcher (whose look at their
        // locks once a second runs on its own thread), so nothing but the deadline may wake
        // this one.
        let (ready, cost) = measure(|| selector.wait(&mut receivers, Some(idle)).to_vec());
        tx.send((ready, Some(cost))).unwrap();
        // Then wait with no timeout until a message comes.
        let ready = selector.wait(&mut receivers, None).to_vec();
        let got = receivers[57].try_recv().unwrap().to_vec();
        tx.send((ready, None)).unwrap();
        got
    });
    let (ready, cost) = rx.recv_timeout(WATCHDOG).unwrap();
    let cost = cost.expect("the idle wait's cost");
    assert!(ready.is_empty(), "idle channels reported ready: {ready:?}");
    assert!(cost.wall >= idle, "the wait ended before its deadline");
    // One sleep until the deadline, give or take a lock taken while registering the peers.
    cost.assert_idle("services: a selector over 100 idle channels", 5);
    std::thread::sleep(Duration::from_millis(50));
    senders[57].send(b"for 57").unwrap();
    let (ready, _) = rx.recv_timeout(WATCHDOG).expect("selector did not wake");
    assert_eq!(ready, vec![57]);
    assert_eq!(selector.join().unwrap(), b"for 57");
}

#[test]
fn a_selector_reports_a_channel_whose_peer_process_was_killed() {
    let base = unique("selkill");
    let mut guards = Vec::new();
    let mut channels = Vec::new();
    let mut peers = Vec::new();
    for i in 0..3 {
        let name = format!("{base}-{i}");
        guards.push(NameGuard(name.clone()));
        let mut ch = Channel::create(&name, &Config::default()).unwrap();
        peers.push(support::echo(&[name.as_str(), "block"]));
        // The echo answers once it is connected.
        ch.send(b"hello").unwrap();
        assert_eq!(&*ch.recv_timeout(WATCHDOG).unwrap(), b"hello");
        channels.push(ch);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (asleep_tx, asleep) = std::sync::mpsc::channel();
    let selector = std::thread::spawn(move || {
        let mut selector = Selector::new();
        // A first, idle wait registers the peers with the death watcher.
        let idle = selector
            .wait(&mut channels, Some(Duration::from_millis(50)))
            .to_vec();
        asleep_tx.send(idle).unwrap();
        // The watchdog: a death must end this wait well within a second.
        let ready = selector
            .wait(&mut channels, Some(Duration::from_secs(1)))
            .to_vec();
        let received: Vec<_> = ready
            .iter()
            .map(|&i| channels[i].try_recv().map(|m| m.to_vec()))
            .collect();
        tx.send((ready, received)).unwrap();
        channels
    });
    let idle = asleep.recv_timeout(WATCHDOG).expect("selector stuck");
    assert!(idle.is_empty(), "idle channels reported ready: {idle:?}");
    // Let the selector fall asleep (nothing to poll for), then kill the middle peer.
    std::thread::sleep(Duration::from_millis(20));
    let pid = peers[1].pid();
    peers[1].kill();
    let (ready, received) = rx.recv_timeout(WATCHDOG).expect("selector did not return");
    reap_killed(&mut peers[1]);
    assert_eq!(
        ready,
        vec![1],
        "the killed peer's channel was not reported within 1 s"
    );
    match &received[0] {
        Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(*gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
    // The other peers are still there.
    let mut channels = selector.join().unwrap();
    for i in [0, 2] {
        channels[i].send(b"still there").unwrap();
        assert_eq!(
            &*channels[i].recv_timeout(WATCHDOG).unwrap(),
            b"still there"
        );
    }
}

#[test]
fn a_selector_notices_a_peer_that_connects_and_dies_while_it_waits() {
    let name = unique("sellate");
    let _guard = NameGuard(name.clone());
    let mut channels = vec![Channel::create(&name, &Config::default()).unwrap()];
    let (tx, rx) = std::sync::mpsc::channel();
    let selector = std::thread::spawn(move || {
        // Nobody to watch yet: the selector looks now and then, and registers the peer once it
        // has connected (connecting wakes nobody).
        let ready = Selector::new().wait(&mut channels, Some(WATCHDOG)).to_vec();
        let received = channels[0].try_recv().map(|m| m.to_vec());
        tx.send((ready, received)).unwrap();
    });
    let mut peer = support::echo(&[name.as_str(), "block"]);
    let connected = Instant::now() + WATCHDOG;
    while shmlink::segments::inspect(&name).unwrap().connector.state != "present" {
        assert!(Instant::now() < connected, "the echo did not connect");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Give the selector time to register the new peer with the death watcher (a few of its
    // looks), then kill the peer.
    std::thread::sleep(Duration::from_millis(100));
    let pid = peer.pid();
    peer.kill();
    let (ready, received) = rx
        .recv_timeout(Duration::from_secs(1))
        .expect("the selector did not report the dead peer within 1 s");
    reap_killed(&mut peer);
    selector.join().unwrap();
    assert_eq!(ready, vec![0]);
    match received {
        Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
}

#[test]
fn a_chatty_channel_does_not_starve_the_others() {
    let base = unique("fair");
    let mut guards = Vec::new();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..3 {
        let name = format!("{base}-{i}");
        guards.push(NameGuard(name.clone()));
        senders.push(Channel::create(&name, &Config::default()).unwrap());
        receivers.push(Channel::connect(&name, WaitStrategy::Block).unwrap());
    }
    // Channel 0 always has more to read; 1 and 2 get one message each.
    for _ in 0..1000 {
        senders[0].send(b"chatty").unwrap();
    }
    senders[1].send(b"one").unwrap();
    senders[2].send(b"two").unwrap();
    let mut selector = Selector::new();
    let mut served = [0usize; 3];
    for _ in 0..3 {
        let ready = selector.wait(&mut receivers, Some(WATCHDOG)).to_vec();
        for i in ready {
            if receivers[i].try_recv().is_ok() {
                served[i] += 1;
            }
        }
    }
    assert_eq!(&served[1..], &[1, 1], "quiet channels starved: {served:?}");
}

#[test]
fn a_client_waiting_to_be_accepted_notices_a_dead_server() {
    let name = unique("svcdeaf");
    let _guard = NameGuard(name.clone());
    let mut server = spawn_role("deaf", std::slice::from_ref(&name));
    wait_for_line(&mut server, "ready");
    let n = name.clone();
    let waiting = std::thread::spawn(move || Channel::connect(&n, WaitStrategy::Block));
    std::thread::sleep(Duration::from_millis(50));
    let pid = server.pid();
    server.kill();
    reap_killed(&mut server);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(waiting.join().unwrap());
    });
    match rx.recv_timeout(WATCHDOG).expect("connect did not return") {
        Err(OpenError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
        other => panic!("expected PeerGone, got {other:?}"),
    }
    // The client's own channel went away with its error.
    assert_eq!(connection_names(&name), Vec::<String>::new());
}

#[test]
fn a_client_that_gives_up_waiting_frees_its_slot() {
    let name = unique("svcgiveup");
    let _guard = NameGuard(name.clone());
    let listener = Listener::bind_with_limit(&name, &Config::default(), 1).unwrap();
    assert!(matches!(
        Channel::connect_timeout(&name, WaitStrategy::Block, Duration::from_millis(30)),
        Err(OpenError::Timeout { .. })
    ));
    assert!(matches!(
        listener.try_accept(),
        Err(OpenError::NoClient { .. })
    ));
    // The one slot is free again: the next client gets in.
    let n = name.clone();
    let t = std::thread::spawn(move || Channel::connect(&n, WaitStrategy::Block));
    let mut conn = listener.accept_timeout(WATCHDOG).unwrap();
    let mut ch = t.join().unwrap().unwrap();
    ch.send(b"in").unwrap();
    assert_eq!(&*conn.recv_timeout(WATCHDOG).unwrap(), b"in");
    assert_eq!(connection_names(&name).len(), 1);
}

#[test]
fn an_idle_accept_makes_no_timed_wake_ups() {
    let name = unique("idle-accept");
    let listener = Listener::bind(&name, &Config::default()).unwrap();
    let idle = Duration::from_secs(2);
    let (got, cost) = std::thread::scope(|s| {
        s.spawn(|| measure(|| listener.accept_timeout(idle)))
            .join()
            .unwrap()
    });
    assert!(matches!(got, Err(OpenError::Timeout { .. })), "{got:?}");
    assert!(cost.wall >= idle, "the accept ended before its deadline");
    // A sweep every 100 ms would be about 20 wake-ups.
    cost.assert_idle("services: an idle accept", 3);
}

#[test]
fn clients_killed_after_their_connection_was_dropped_leave_no_names() {
    let _serial = serial();
    let name = unique("late-kill");
    let connection = |listener: &Listener| {
        let mut client = spawn_role("idle", std::slice::from_ref(&name));
        let conn = listener.accept_timeout(WATCHDOG).expect("accept");
        // Connected on its side too.
        wait_for_line(&mut client, "ready");
        let conn_name = conn.name().to_owned();
        // The server is done with the client while the client still runs.
        drop(conn);
        (client, conn_name)
    };
    let gone = |conn_name: &str| {
        matches!(
            shmlink::segments::inspect(conn_name),
            Err(OpenError::NotFound { .. })
        )
    };

    // Killed while the listener runs: its drop removes the name.
    let listener = Listener::bind(&name, &Config::default()).unwrap();
    let (mut client, first) = connection(&listener);
    let _first = NameGuard(first.clone());
    client.kill();
    reap_killed(&mut client);
    assert!(!gone(&first), "the name went with the client");
    drop(listener);
    assert!(
        gone(&first),
        "{first} was left behind by the listener's drop"
    );

    // Killed after the listener went: the next listener of that name removes it.
    let listener = Listener::bind(&name, &Config::default()).unwrap();
    let (mut client, second) = connection(&listener);
    let _second = NameGuard(second.clone());
    drop(listener);
    client.kill();
    reap_killed(&mut client);
    assert!(!gone(&second));
    let _listener = Listener::bind(&name, &Config::default()).unwrap();
    assert!(gone(&second), "{second} was not reclaimed by the next bind");
}

#[test]
fn retried_connects_to_a_killed_servers_listener_leave_every_slot_free() {
    const LIMIT: usize = 4;
    let name = unique("svcretry");
    let _guard = NameGuard(name.clone());
    let mut server = spawn_role("deaf", &[name.clone(), LIMIT.to_string()]);
    wait_for_line(&mut server, "ready");
    // Two clients have claimed slots and wait to be accepted when the server is killed.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let n = name.clone();
            std::thread::spawn(move || Channel::connect(&n, WaitStrategy::Block))
        })
        .collect();
    let deadline = Instant::now() + WATCHDOG;
    while slot_states(&name, LIMIT)
        .iter()
        .filter(|&&s| s != 0)
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "the clients did not claim slots");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = server.pid();
    server.kill();
    reap_killed(&mut server);
    for t in waiting {
        match t.join().unwrap() {
            Err(OpenError::PeerGone { channel, pid: gone }) => {
                assert_eq!((channel.as_str(), gone), (name.as_str(), pid))
            }
            other => panic!("a waiting client got {other:?} instead of PeerGone"),
        }
    }
    assert_eq!(
        slot_states(&name, LIMIT),
        [0; LIMIT],
        "clients that saw the server die left their slots taken"
    );
    // A client that keeps retrying hears that the server is gone every time, and takes no slot.
    for attempt in 0..3 * LIMIT {
        let got = if attempt % 2 == 0 {
            Channel::connect(&name, WaitStrategy::Block)
        } else {
            Channel::connect_timeout(&name, WaitStrategy::Block, WATCHDOG)
        };
        match got {
            Err(OpenError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
            other => panic!("attempt {attempt}: {other:?} instead of PeerGone"),
        }
    }
    assert_eq!(slot_states(&name, LIMIT), [0; LIMIT]);
    assert_eq!(connection_names(&name), Vec::<String>::new());
}

#[test]
fn forged_slot_states_do_not_keep_clients_out() {
    const LIMIT: usize = 4;
    let name = unique("svcforge");
    let _guard = NameGuard(name.clone());
    let listener = Listener::bind_with_limit(&name, &Config::default(), LIMIT).unwrap();
    let stop = AtomicBool::new(false);
    // Held by the server while it accepts, and by the test while the forger writes and the
    // test reads what it wrote (the server frees forged slots as soon as it looks).
    let gate = std::sync::Mutex::new(());
    std::thread::scope(|s| {
        // The server: accepts, echoes one message on each connection, and holds it until its
        // client leaves. Returns how many it accepted.
        let server = s.spawn(|| {
            let mut conns: Vec<Connection> = Vec::new();
            let mut accepted = 0;
            while !stop.load(Ordering::Relaxed) {
                let got = {
                    let _held = gate.lock().unwrap_or_else(|p| p.into_inner());
                    listener.accept_timeout(Duration::from_millis(20))
                };
                match got {
                    Ok(mut conn) => {
                        let msg = conn.recv_timeout(WATCHDOG).expect("first message").to_vec();
                        conn.send(&msg).expect("echo");
                        conns.push(conn);
                        accepted += 1;
                    }
                    Err(OpenError::Timeout { .. }) => {}
                    Err(e) => panic!("accept: {e}"),
                }
                conns.retain_mut(|c| c.is_peer_connected());
            }
            accepted
        });
        // Stops the server however this thread leaves the scope.
        let _stop = StopOnDrop(&stop);
        let hello = |ch: &mut Channel, what: &str| {
            ch.send(what.as_bytes()).unwrap();
            assert_eq!(&*ch.recv_timeout(WATCHDOG).unwrap(), what.as_bytes());
        };
        // One client is in before the forger comes: its slot is rewritten too.
        let mut first = connect_retrying(&name);
        hello(&mut first, "first");
        let forged = {
            let _held = gate.lock().unwrap_or_else(|p| p.into_inner());
            let mut forger = spawn_role("forge", &[name.clone(), LIMIT.to_string()]);
            wait_for_line(&mut forger, "forged");
            assert!(forger.reap().success(), "the forger failed");
            slot_words(&name, LIMIT)
        };
        // The forgery landed: every slot word, the first client's included, is a forged one.
        let expected: Vec<u64> = (0..LIMIT)
            .map(|i| FORGED[i % FORGED.len()])
            .map(|(pid, state)| pid << 32 | state)
            .collect();
        assert_eq!(forged, expected, "the slot words after the forger ran");
        // Every slot no connection holds is free again for the next clients.
        let mut others: Vec<Channel> = (0..LIMIT - 1)
            .map(|i| {
                let mut ch = connect_retrying(&name);
                hello(&mut ch, &format!("client {i}"));
                ch
            })
            .collect();
        // The limit still holds: the server has LIMIT connections.
        assert!(matches!(
            Channel::connect(&name, WaitStrategy::Block),
            Err(OpenError::TooManyClients { .. })
        ));
        // The first client leaves: its slot (rewritten under its lease) comes back too.
        drop(first);
        let mut last = connect_retrying(&name);
        hello(&mut last, "last");
        others.clear();
        drop(_stop);
        assert_eq!(server.join().unwrap(), LIMIT + 1);
    });
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn listener_names_follow_the_one_name_rule() {
    assert_eq!(shmlink::MAX_NAME_LEN, 200);
    let sized = |len: usize| {
        let mut name = unique("len");
        name.extend(std::iter::repeat_n('n', len - name.len()));
        name
    };
    // Every length a channel may have, a listener may have; its connections' names are longer.
    for len in [169, shmlink::MAX_NAME_LEN] {
        let name = sized(len);
        let _guard = NameGuard(name.clone());
        let listener = Listener::bind(&name, &Config::default())
            .unwrap_or_else(|e| panic!("bind a {len}-byte name: {e}"));
        let n = name.clone();
        let client = std::thread::spawn(move || Channel::connect(&n, WaitStrategy::Block));
        let mut conn = listener.accept_timeout(WATCHDOG).unwrap();
        let mut ch = client.join().unwrap().unwrap();
        assert!(conn.name().len() > len && conn.name().starts_with(&name));
        assert!(shmlink::segments::inspect(conn.name()).unwrap().ready);
        ch.send(b"long").unwrap();
        assert_eq!(&*conn.recv_timeout(WATCHDOG).unwrap(), b"long");
        drop((conn, ch, listener));
        assert!(!support::shm_path(&name).exists());
        assert_eq!(connection_names(&name), Vec::<String>::new());
    }
    // A name no listener can have is refused at once by every call, client side included.
    let long = sized(shmlink::MAX_NAME_LEN + 1);
    for (bad, reason) in [
        (long.as_str(), "200 bytes"),
        (&"x".repeat(300), "200 bytes"),
        (".x", "'.' or '-'"),
        ("-x", "'.' or '-'"),
        ("a/b", "letters, digits"),
        ("", "empty"),
    ] {
        let refused = |what: &str, got: Result<(), OpenError>| match got {
            Err(OpenError::InvalidName { name, reason: r }) => {
                assert_eq!(name, bad, "{what}");
                assert!(r.contains(reason), "{what} {bad:?}: {r}");
            }
            other => panic!("{what} {bad:?}: {other:?}"),
        };
        refused("bind", Listener::bind(bad, &Config::default()).map(drop));
        refused(
            "connect",
            Channel::connect(bad, WaitStrategy::Block).map(drop),
        );
        refused(
            "channel connect_timeout",
            Channel::connect_timeout(bad, WaitStrategy::Block, WATCHDOG).map(drop),
        );
        refused(
            "endpoint connect_timeout",
            Endpoint::connect_timeout(bad, WaitStrategy::Block, WATCHDOG).map(drop),
        );
    }
}

#[test]
fn listener_connects_end_like_channel_connects() {
    let name = unique("svcnone");
    let _guard = NameGuard(name.clone());
    let short = Duration::from_millis(30);
    let missing = |got: Result<Channel, OpenError>| match got {
        Err(OpenError::NotFound { channel: n }) => assert_eq!(n, name),
        other => panic!("{other:?} instead of NotFound({name:?})"),
    };
    missing(Channel::connect(&name, WaitStrategy::Block));
    missing(Channel::connect_timeout(&name, WaitStrategy::Block, short));
    match Endpoint::connect_timeout(&name, WaitStrategy::Block, short) {
        Err(OpenError::NotFound { channel: n }) => assert_eq!(n, name),
        other => panic!("{:?} instead of NotFound", other.map(|e| e.backend())),
    }
    // A listener that is there but does not accept: the wait for the server ends in Timeout.
    let _listener = Listener::bind(&name, &Config::default()).unwrap();
    assert!(matches!(
        Channel::connect_timeout(&name, WaitStrategy::Block, short),
        Err(OpenError::Timeout { .. })
    ));
}

#[test]
fn connect_errors_name_what_the_name_is() {
    let listener_name = unique("svckind-l");
    let channel_name = unique("svckind-c");
    let _guards = (
        NameGuard(listener_name.clone()),
        NameGuard(channel_name.clone()),
    );
    let listener = Listener::bind(&listener_name, &Config::default()).unwrap();
    let _channel = Channel::create(&channel_name, &Config::default()).unwrap();
    // One connect reaches both, by what is under the name: a listener's makes a new client of
    // it (accepted by the server), a channel's makes this end its connector.
    let n = listener_name.clone();
    let client =
        std::thread::spawn(move || Channel::connect_timeout(&n, WaitStrategy::Block, WATCHDOG));
    let mut conn = listener.accept_timeout(WATCHDOG).unwrap();
    let mut client = client.join().unwrap().unwrap();
    assert!(
        client.name().starts_with(&format!("{listener_name}.")),
        "{}",
        client.name()
    );
    client.send(b"via the listener").unwrap();
    assert_eq!(&*conn.recv_timeout(WATCHDOG).unwrap(), b"via the listener");
    drop((client, conn));
    let mut connector = Channel::connect(&channel_name, WaitStrategy::Block).unwrap();
    assert_eq!(connector.name(), channel_name);
    connector.send(b"to the channel").unwrap();
    // A listener whose header this build cannot read: the error names it.
    use std::os::unix::fs::FileExt;
    type Header = shmlink::testing::SegmentHeader;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(support::shm_path(&listener_name))
        .unwrap();
    let poke = |offset: usize, bytes: &[u8]| {
        let mut old = vec![0; bytes.len()];
        file.read_exact_at(&mut old, offset as u64).unwrap();
        file.write_all_at(bytes, offset as u64).unwrap();
        let got = Channel::connect(&listener_name, WaitStrategy::Block);
        file.write_all_at(&old, offset as u64).unwrap();
        let err = got.expect_err("a forged header was accepted");
        assert!(err.to_string().contains(&listener_name), "{err}");
        err
    };
    let magic = std::mem::offset_of!(Header, magic);
    let version = std::mem::offset_of!(Header, version);
    let total = std::mem::offset_of!(Header, total_size);
    assert!(matches!(
        poke(magic, &0xdead_beef_u64.to_le_bytes()),
        OpenError::BadMagic {
            magic: 0xdead_beef,
            ..
        }
    ));
    assert!(matches!(
        poke(version, &99u32.to_le_bytes()),
        OpenError::VersionMismatch { found: 99, .. }
    ));
    assert!(matches!(
        poke(total, &12345u64.to_le_bytes()),
        OpenError::SizeMismatch { .. }
    ));
    // Restored, it serves again.
    let n = listener_name.clone();
    let client = std::thread::spawn(move || Channel::connect(&n, WaitStrategy::Block));
    let _conn = listener.accept_timeout(WATCHDOG).unwrap();
    client.join().unwrap().unwrap();
}

/// Writes `value` at `offset` of slot `i` of the listener `name`, through its object.
fn write_slot(name: &str, i: usize, offset: usize, value: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(support::shm_path(name))
        .expect("open the listener");
    file.write_all_at(&value.to_le_bytes(), slot_offset(i) + offset as u64)
        .expect("write a slot field");
}

#[test]
fn a_client_channel_larger_than_the_listener_allows_is_refused() {
    use shmlink::testing::{LISTENER_SLOT_PENDING, LISTENER_SLOT_SEQ};
    const LIMIT: usize = 2;
    let name = unique("svcbig");
    let _guard = NameGuard(name.clone());
    let config = Config::default();
    let listener = Listener::bind_with_limit(&name, &config, LIMIT).unwrap();
    // A hostile client of the same user: makes its connection's channel by hand, with rings of
    // 2 GiB (4 GiB of mapping, sparse), names it in slot 0 and publishes the slot as pending.
    let pid = std::process::id();
    let seq = 7_000_000_u64;
    let big = format!("{name}.{pid}.{seq}");
    let _big_guard = NameGuard(big.clone());
    let huge = Channel::create(
        &big,
        &Config {
            capacity: 1 << 31,
            ..config.clone()
        },
    )
    .expect("a channel of 2 GiB rings");
    write_slot(&name, 0, LISTENER_SLOT_SEQ, seq);
    write_slot(&name, 0, 0, u64::from(pid) << 32 | LISTENER_SLOT_PENDING);
    match listener.try_accept() {
        Err(OpenError::NoClient { .. }) => {}
        Ok(conn) => panic!(
            "accepted a client channel of {} bytes per ring, the listener's are {}",
            conn.capacity(),
            config.capacity
        ),
        Err(e) => panic!("try_accept: {e}"),
    }
    assert!(!huge.is_peer_connected(), "the server connected to it");
    assert_eq!(slot_states(&name, LIMIT), [0; LIMIT], "the refused slot");
    // The listener goes on serving honest clients, as many as its limit.
    let clients: Vec<_> = (0..LIMIT)
        .map(|_| {
            let n = name.clone();
            std::thread::spawn(move || Channel::connect_timeout(&n, WaitStrategy::Block, WATCHDOG))
        })
        .collect();
    let mut conns: Vec<Connection> = (0..LIMIT)
        .map(|_| listener.accept_timeout(WATCHDOG).expect("an honest client"))
        .collect();
    let mut live = Vec::new();
    for t in clients {
        let mut ch = t.join().unwrap().expect("connect");
        let conn = conns
            .iter_mut()
            .find(|c| c.name() == ch.name())
            .expect("the client's connection");
        assert_eq!(conn.capacity(), config.capacity);
        ch.send(b"honest").unwrap();
        assert_eq!(&*conn.recv_timeout(WATCHDOG).unwrap(), b"honest");
        live.push(ch);
    }
}

#[test]
fn a_client_whose_channel_is_refused_hears_so_before_its_deadline() {
    use std::os::unix::fs::FileExt;
    type Header = shmlink::testing::SegmentHeader;
    let name = unique("svcbigc");
    let _guard = NameGuard(name.clone());
    let config = Config::default();
    let listener = Listener::bind(&name, &config).unwrap();
    // Another process of the user rewrites the capacity an honest client reads from the
    // listener: the client makes a channel of 2 GiB rings, which the server refuses.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(support::shm_path(&name))
        .unwrap();
    let at = std::mem::offset_of!(Header, capacity) as u64;
    file.write_all_at(&(1u64 << 31).to_le_bytes(), at).unwrap();
    let n = name.clone();
    let started = Instant::now();
    let client =
        std::thread::spawn(move || Channel::connect_timeout(&n, WaitStrategy::Block, WATCHDOG));
    let got = loop {
        match listener.accept_timeout(Duration::from_millis(20)) {
            Ok(conn) => panic!("accepted a channel of {} bytes per ring", conn.capacity()),
            Err(OpenError::Timeout { .. }) => {}
            Err(e) => panic!("accept: {e}"),
        }
        if client.is_finished() {
            break client.join().unwrap();
        }
        assert!(
            started.elapsed() < 2 * WATCHDOG,
            "the client never returned"
        );
    };
    let took = started.elapsed();
    match got {
        Err(OpenError::Disconnected { channel: n }) => assert_eq!(n, name),
        other => panic!("{other:?} instead of Disconnected"),
    }
    // Refused at the server's first look, told at once: far from the client's deadline.
    assert!(
        took < Duration::from_secs(2),
        "the client heard after {took:?}"
    );
    assert_eq!(connection_names(&name), Vec::<String>::new());
    // The capacity restored, the next client gets in.
    file.write_all_at(&(config.capacity as u64).to_le_bytes(), at)
        .unwrap();
    let n = name.clone();
    let client = std::thread::spawn(move || Channel::connect(&n, WaitStrategy::Block));
    let _conn = listener.accept_timeout(WATCHDOG).unwrap();
    client.join().unwrap().unwrap();
}

/// The state letter of process `pid` in `/proc/<pid>/stat` (`T` once stopped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

#[test]
fn a_client_killed_while_connecting_leaves_no_slot_taken() {
    use shmlink::testing::{StopPoint, LISTENER_SLOT_CLAIMED, LISTENER_SLOT_NAMED, STOP_AT_ENV};
    const LIMIT: usize = 2;
    for (point, state) in [
        (StopPoint::ListenerClaimed, LISTENER_SLOT_CLAIMED),
        (StopPoint::ListenerNamed, LISTENER_SLOT_NAMED),
    ] {
        let name = unique("svcdying");
        let _guard = NameGuard(name.clone());
        let listener = Listener::bind_with_limit(&name, &Config::default(), LIMIT).unwrap();
        // A client that stops itself at `point` of its connect, and is killed there.
        let mut client = crate::roles::spawn(
            "services",
            &format!("idle {name}"),
            &[(STOP_AT_ENV, point.name())],
        );
        let pid = client.pid();
        let deadline = Instant::now() + WATCHDOG;
        while proc_state(pid) != Some('T') {
            assert!(
                Instant::now() < deadline,
                "{point:?}: the client did not stop"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(slot_states(&name, LIMIT), [state, 0], "{point:?}");
        let made = usize::from(point == StopPoint::ListenerNamed);
        assert_eq!(connection_names(&name).len(), made, "{point:?}");
        client.kill();
        reap_killed(&mut client);
        // Its slot comes back: LIMIT clients get in, each served.
        let clients: Vec<_> = (0..LIMIT)
            .map(|_| {
                let n = name.clone();
                std::thread::spawn(move || connect_retrying(&n))
            })
            .collect();
        let mut conns: Vec<Connection> = (0..LIMIT)
            .map(|_| {
                listener
                    .accept_timeout(WATCHDOG)
                    .unwrap_or_else(|e| panic!("{point:?}: accept: {e}"))
            })
            .collect();
        let mut live = Vec::new();
        for t in clients {
            let mut ch = t.join().expect("a client after the kill");
            let conn = conns
                .iter_mut()
                .find(|c| c.name() == ch.name())
                .expect("the client's connection");
            ch.send(b"in").unwrap();
            assert_eq!(&*conn.recv_timeout(WATCHDOG).unwrap(), b"in", "{point:?}");
            assert!(
                conn.is_peer_connected(),
                "{point:?}: the dead client was accepted"
            );
            live.push(ch);
        }
        // Full now, and only with the live clients: the dead one's channel name is gone too.
        assert!(matches!(
            Channel::connect(&name, WaitStrategy::Block),
            Err(OpenError::TooManyClients { .. })
        ));
        assert_eq!(connection_names(&name).len(), LIMIT, "{point:?}");
    }
}
