//! What is sent arrives, across real processes:
//!
//! * JSON values of every size around `max_frame` (and some multiples of it), sent with
//!   `send_json` into a `Block` ring at many positions of its index, among them past the point
//!   where the producer goes back to the start of the region, while the receiver sleeps in a
//!   plain `recv()`: every send returns and every value arrives whole.
//! * The frames a peer sent before it was killed are all delivered, in order, before
//!   `PeerGone`, whichever end was killed and however the survivor waits.
//!
//! The other processes are this test binary run again in the role `delivery` (see `child` and
//! `roles`).

use crate::support;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use shmlink::{Channel, Config, RecvError, WaitStrategy};
use support::{
    assert_nothing_left, serial, unique, wait_for_line, ChildGuard, NameGuard, Watchdog, WATCHDOG,
};

/// Runs this binary again in the role `args` (see `roles`).
fn spawn_role(args: &[&str]) -> ChildGuard {
    crate::roles::spawn("delivery", &args.join(" "), &[])
}

/// The role `delivery` of a re-run of this binary: `json-receiver` or `doomed`, with its
/// arguments.
pub(crate) fn child(spec: &str) {
    let args: Vec<&str> = spec.split_whitespace().collect();
    let code = match args.as_slice() {
        ["json-receiver", base, rounds] => json_receiver(base, rounds.parse().expect("rounds")),
        ["doomed", end, name, wait, count] => doomed(
            end,
            name,
            wait.parse().expect("wait strategy"),
            count.parse().expect("count"),
        ),
        other => panic!("unknown role {other:?}"),
    };
    std::process::exit(code);
}

/// Capacity of the rings of the JSON test: the default, as most callers have it.
const JSON_CAPACITY: usize = 1 << 20;
/// `max_frame` of those rings.
const MAX_FRAME: usize = JSON_CAPACITY / 2 - 72;

/// How the ring's index is moved before a round's JSON values go out: `stream` filler messages
/// of `len` bytes sent without waiting for the receiver, then (once the receiver has read them)
/// one message of `place` bytes (none if 0), which the receiver reads before the first value.
///
/// A producer may go back to the start of the region once it is 128 KiB into a lap and the
/// consumer has read everything; it tries once per lap. On a fresh ring one placing message of
/// 128 KiB to `MAX_FRAME` bytes leaves the index in the band where the next frame, a JSON value,
/// may be the one placed back at the start, after a padding marker. The long streams leave the
/// index wherever the race between the two processes left it.
struct Plan {
    stream: usize,
    len: usize,
    place: usize,
}

const fn plan(stream: usize, len: usize, place: usize) -> Plan {
    Plan { stream, len, place }
}

const PLANS: [Plan; 16] = [
    plan(0, 0, 0),
    plan(0, 0, 1000),
    plan(0, 0, 120 << 10),
    plan(0, 0, 128 << 10),
    plan(0, 0, 200_000),
    plan(0, 0, 262_000),
    plan(0, 0, 300_000),
    plan(0, 0, 400_000),
    plan(0, 0, 500_000),
    plan(0, 0, MAX_FRAME),
    plan(3, 100_000, 0),
    plan(700, 1000, 150_000),
    plan(1024, 64 << 10, 0),
    plan(1024, 64 << 10, 200_000),
    plan(1025, 65_531, 300_000),
    plan(1, 700_000, 0),
];

/// Lengths of the JSON texts sent: every length from `MAX_FRAME - 70` to `MAX_FRAME + 70`, and a
/// few multiples and small ones.
fn json_sizes() -> Vec<usize> {
    let mut sizes: Vec<usize> = (MAX_FRAME - 70..=MAX_FRAME + 70).collect();
    sizes.extend([
        2,
        300,
        MAX_FRAME / 2,
        2 * MAX_FRAME - 1,
        2 * MAX_FRAME,
        2 * MAX_FRAME + 1,
        3 * MAX_FRAME + 7,
        JSON_CAPACITY + 1,
    ]);
    sizes
}

/// A JSON string whose text is `len` bytes long: `len - 2` letters in quotes.
fn json_text(len: usize) -> String {
    "x".repeat(len - 2)
}

/// The receiver of the JSON test: connects to `<base>-0`, `<base>-1`, ... in turn and, on each,
/// answers in a plain `recv()` (no deadline: a frame published without waking it would leave
/// it asleep for good) until `end`: nothing for streamed filler, `placed` for the placing
/// message, `synced` for `sync`, and the length of each JSON text (or what is wrong with it).
fn json_receiver(base: &str, rounds: usize) -> i32 {
    for round in 0..rounds {
        let name = format!("{base}-{round}");
        let mut ch = match Channel::connect_timeout(&name, WaitStrategy::Block, WATCHDOG) {
            Ok(ch) => ch,
            Err(e) => {
                eprintln!("json receiver: connect {name}: {e}");
                return 2;
            }
        };
        if let Err(e) = ch.send(b"hello") {
            eprintln!("json receiver: hello on {name}: {e}");
            return 3;
        }
        loop {
            let reply = match ch.recv() {
                Ok(msg) => match &msg[..] {
                    [b'S', ..] => continue,
                    [b'P', ..] => b"placed".to_vec(),
                    b"sync" => b"synced".to_vec(),
                    b"end" => break,
                    [b'"', text @ .., b'"'] if text.iter().all(|&b| b == b'x') => {
                        msg.len().to_string().into_bytes()
                    }
                    other => format!("unexpected message of {} bytes", other.len()).into_bytes(),
                },
                Err(e) => {
                    eprintln!("json receiver: recv on {name}: {e}");
                    return 4;
                }
            };
            if let Err(e) = ch.send(&reply) {
                eprintln!("json receiver: reply on {name}: {e}");
                return 5;
            }
        }
    }
    0
}

fn expect_reply(ch: &mut Channel, want: &[u8], what: &str) {
    match ch.recv_timeout(WATCHDOG) {
        Ok(got) => assert!(
            *got == *want,
            "{what}: the receiver answered {:?}, expected {:?}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want)
        ),
        Err(e) => panic!("{what}: no answer: {e}"),
    }
}

/// One channel: the index moved by `plan`, then the JSON texts of `sizes`, each answered
/// before the next goes out. Every other value goes through `send_json_timeout`.
/// Waits until a thread of process `pid` that runs the child role (the test thread, or the
/// main thread) sleeps in the kernel on a futex: a receiver asleep in its `recv()`, which only
/// the sender's wake-up brings back.
fn wait_until_asleep(pid: u32, what: &str) {
    let deadline = Instant::now() + WATCHDOG;
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the receiver's tasks");
        for task in tasks.flatten() {
            let path = task.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let role_thread =
                comm.trim() == "delivery::child" || task.file_name() == *pid.to_string();
            // The number of the system call the thread is blocked in: futex (202) or futex_waitv
            // (449) on x86-64.
            let call = std::fs::read_to_string(path.join("syscall")).unwrap_or_default();
            let call = call.split_whitespace().next().unwrap_or("");
            if role_thread && (call == "202" || call == "449") {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the receiver never fell asleep in recv()"
        );
        // Polling another process's state: nothing to wait on.
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn json_round(receiver: u32, base: &str, round: usize, plan: &Plan, sizes: &[usize]) {
    let name = format!("{base}-{round}");
    let _unlink = NameGuard(name.clone());
    let what = format!(
        "round {round} ({} x {} bytes, then {})",
        plan.stream, plan.len, plan.place
    );
    // A send that never returns fails the whole binary here, loudly.
    let _dog = Watchdog::arm(3 * WATCHDOG, &what);
    let config = Config {
        capacity: JSON_CAPACITY,
        wait: WaitStrategy::Block,
    };
    let mut ch = Channel::create(&name, &config).expect("create");
    assert_eq!(ch.max_frame(), MAX_FRAME);
    expect_reply(&mut ch, b"hello", &what);
    let filler = vec![b'S'; plan.len];
    for _ in 0..plan.stream {
        ch.send(&filler).expect("stream");
    }
    ch.send(b"sync").expect("sync");
    expect_reply(&mut ch, b"synced", &what);
    if plan.place > 0 {
        ch.send(&vec![b'P'; plan.place]).expect("place");
        expect_reply(&mut ch, b"placed", &what);
    }
    for (k, &size) in sizes.iter().enumerate() {
        // The receiver is asleep in its `recv()`, where only a wake-up from the sender brings
        // it back.
        wait_until_asleep(receiver, &what);
        let text = json_text(size);
        let sent = if (round + k) % 2 == 0 {
            ch.send_json(&text)
        } else {
            ch.send_json_timeout(&text, WATCHDOG)
        };
        if let Err(e) = sent {
            panic!("{what}: JSON text of {size} bytes: {e}");
        }
        expect_reply(&mut ch, size.to_string().as_bytes(), &what);
    }
    ch.send(b"end").expect("end");
}

#[test]
fn send_json_of_every_size_around_max_frame_at_many_ring_positions() {
    let _serial = serial();
    let base = unique("json-sizes");
    let sizes = json_sizes();
    // A round per size, each on a fresh channel (so each value is the first `send_json` of its
    // sender), and a last one that sends them all in a row.
    let rounds = sizes.len() + 1;
    let mut receiver = spawn_role(&["json-receiver", &base, &rounds.to_string()]);
    for (round, &size) in sizes.iter().enumerate() {
        json_round(
            receiver.pid(),
            &base,
            round,
            &PLANS[round % PLANS.len()],
            &[size],
        );
    }
    json_round(
        receiver.pid(),
        &base,
        sizes.len(),
        &plan(0, 0, 200_000),
        &sizes,
    );
    let status = receiver.reap();
    assert!(status.success(), "the receiver failed: {status:?}");
    assert_nothing_left(&base);
}

/// Ring capacity of the death test: room for every message the survivor leaves unread.
const DEATH_CAPACITY: usize = 64 << 10;
/// Messages the doomed peer sends, and how many of them the survivor reads before the kill.
const DOOMED_SENDS: u64 = 300;
const READ_BEFORE_KILL: u64 = 150;

/// The doomed peer's message `seq`: its number, then filler; two of the early ones are larger
/// than the ring (fragmented, read while they are sent).
fn numbered(seq: u64) -> Vec<u8> {
    let len = match seq {
        3 | 40 => 3 * DEATH_CAPACITY + 5,
        _ => 8 + (seq as usize * 37) % 300,
    };
    let mut msg = seq.to_le_bytes().to_vec();
    msg.resize(len, seq as u8);
    msg
}

/// The doomed peer: takes its `end` of the channel `name`, sends `count` numbered messages,
/// says `sent` and waits to be killed.
fn doomed(end: &str, name: &str, wait: WaitStrategy, count: u64) -> i32 {
    let made = match end {
        "creator" => Channel::create(
            name,
            &Config {
                capacity: DEATH_CAPACITY,
                wait,
            },
        )
        .inspect(|_| println!("ready")),
        _ => Channel::connect_timeout(name, wait, WATCHDOG),
    };
    let mut ch = match made {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("doomed {end}: {e}");
            return 2;
        }
    };
    for seq in 0..count {
        if let Err(e) = ch.send_timeout(&numbered(seq), WATCHDOG) {
            eprintln!("doomed {end}: send {seq}: {e}");
            return 3;
        }
    }
    println!("sent");
    loop {
        std::thread::park();
    }
}

fn receive_numbered(ch: &mut Channel, seq: u64) {
    match ch.recv_timeout(WATCHDOG) {
        Ok(msg) => assert!(*msg == *numbered(seq), "message {seq} differs"),
        Err(e) => panic!("message {seq}: {e}"),
    }
}

/// The peer playing `end` sends its messages and is killed with half of them still unread:
/// the survivor receives every one of them, in order, and then `PeerGone` naming the peer.
fn frames_sent_before_a_death_arrive_first(end: &str, wait: WaitStrategy) {
    let name = unique(&format!("doomed-{end}-{wait}"));
    let _unlink = NameGuard(name.clone());
    let args = [
        "doomed",
        end,
        &name,
        wait.as_str(),
        &DOOMED_SENDS.to_string(),
    ];
    let (mut ch, mut peer) = if end == "creator" {
        let mut peer = spawn_role(&args);
        wait_for_line(&mut peer, "ready");
        let ch = Channel::connect_timeout(&name, wait, WATCHDOG).expect("connect");
        (ch, peer)
    } else {
        let config = Config {
            capacity: DEATH_CAPACITY,
            wait,
        };
        let ch = Channel::create(&name, &config).expect("create");
        (ch, spawn_role(&args))
    };
    for seq in 0..READ_BEFORE_KILL {
        receive_numbered(&mut ch, seq);
    }
    wait_for_line(&mut peer, "sent");
    let pid = peer.pid();
    peer.kill();
    let mut delivered = 0;
    let gone = loop {
        match ch.recv_timeout(WATCHDOG) {
            Ok(msg) => {
                let seq = READ_BEFORE_KILL + delivered;
                assert!(*msg == *numbered(seq), "message {seq} differs");
                delivered += 1;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(
        delivered,
        DOOMED_SENDS - READ_BEFORE_KILL,
        "messages delivered after the kill (then {gone})"
    );
    assert!(
        matches!(&gone, RecvError::PeerGone { pid: p, channel } if *p == pid && *channel == name),
        "after the last message: {gone}"
    );
    // And it stays gone.
    assert!(matches!(ch.try_recv(), Err(RecvError::PeerGone { .. })));
    let status = peer.reap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the peer was not killed but ended with {status:?}"
    );
}

#[test]
fn frames_sent_before_the_connector_was_killed_arrive_before_peer_gone() {
    let _serial = serial();
    for wait in WaitStrategy::ALL {
        frames_sent_before_a_death_arrive_first("connector", wait);
    }
}

#[test]
fn frames_sent_before_the_creator_was_killed_arrive_before_peer_gone() {
    let _serial = serial();
    for wait in WaitStrategy::ALL {
        frames_sent_before_a_death_arrive_first("creator", wait);
    }
}
