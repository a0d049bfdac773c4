//! Unit tests of the channel within one process; those of limits and long messages are in
//! `limits_and_fragments.rs`.

use super::*;
use crate::error::{OpenError, RecvError, SendError};
use crate::shm::layout::listener::LISTENER_MAGIC;
use crate::shm::layout::*;
use crate::shm::ring::{frame_size, kind, Producer};
use crate::sys::ProcessId;
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "ut-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn small(wait: WaitStrategy) -> Config {
    Config {
        capacity: 4096,
        wait,
    }
}

fn shm_path(name: &str) -> std::path::PathBuf {
    Path::new("/dev/shm").join(format!("shmlink-{name}"))
}

#[test]
fn both_directions_and_cleanup() {
    let name = unique("both");
    {
        let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
        let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
        assert_eq!(a.role(), Role::Creator);
        assert_eq!(b.role(), Role::Connector);
        a.send(b"to b").unwrap();
        b.send(b"to a").unwrap();
        assert_eq!(&*b.recv().unwrap(), b"to b");
        assert_eq!(&*a.recv().unwrap(), b"to a");
        assert!(a.is_peer_connected());
        assert_eq!(b.peer_pid(), Some(std::process::id()));
        if Path::new("/dev/shm").is_dir() {
            let mode = std::fs::metadata(shm_path(&name)).unwrap().permissions();
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(mode.mode() & 0o777, 0o600);
        }
    }
    assert!(matches!(
        Channel::connect(&name, WaitStrategy::Spin),
        Err(OpenError::NotFound { .. })
    ));
    assert!(!shm_path(&name).exists());
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Ping<'a> {
    sender_id: &'a str,
    receiver_id: &'a str,
    sent_at_ms: u64,
}

#[test]
fn json_in_place_with_borrowed_fields() {
    let name = unique("json");
    let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    let ping = Ping {
        sender_id: "11111111-2222-3333-4444-555555555555",
        receiver_id: "66666666-7777-8888-9999-000000000000",
        sent_at_ms: 1_764_000_000_000,
    };
    for _ in 0..1000 {
        a.send_json(&ping).unwrap();
        let frame = b.recv().unwrap();
        let got: Ping<'_> = frame.json().unwrap();
        assert_eq!(got, ping);
    }
    // A value larger than one frame goes out in fragments and comes back whole.
    let big: Vec<u32> = (0..5000).collect();
    let expected = big.clone();
    let sender = std::thread::spawn(move || {
        a.send_json(&big).unwrap();
        a
    });
    let back: Vec<u32> = b.recv_json().unwrap();
    assert_eq!(back, expected);
    let mut a = sender.join().unwrap();
    // Invalid JSON is a typed error, not a panic.
    a.send(b"{not json").unwrap();
    assert!(matches!(
        b.recv_json::<Vec<u32>>(),
        Err(RecvError::Json { .. })
    ));
}

#[test]
fn connect_errors_are_typed() {
    let name = unique("errs");
    assert!(matches!(
        Channel::connect(&name, WaitStrategy::Spin),
        Err(OpenError::NotFound { .. })
    ));
    // Past the timeout, the error says which channel was not found.
    let err =
        Channel::connect_timeout(&name, WaitStrategy::Spin, Duration::from_millis(20)).unwrap_err();
    assert!(
        matches!(&err, OpenError::NotFound { channel: n } if *n == name),
        "{err:?}"
    );
    assert!(err.to_string().contains(&name), "{err}");
    let _a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    assert!(matches!(
        Channel::create(&name, &small(WaitStrategy::Spin)),
        Err(OpenError::AlreadyExists { .. })
    ));
    let b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    assert!(matches!(
        Channel::connect(&name, WaitStrategy::Spin),
        Err(OpenError::AlreadyConnected { channel: n }) if n == name
    ));
    // Also once the connector has gone; the error says what serves clients in turn.
    drop(b);
    let err = Channel::connect(&name, WaitStrategy::Spin).unwrap_err();
    assert!(matches!(&err, OpenError::AlreadyConnected { channel: n } if *n == name));
    assert!(err.to_string().contains("Listener"), "{err}");
    for bad in ["", "../x", "a\0b"] {
        assert!(matches!(
            Channel::create(bad, &Config::default()),
            Err(OpenError::InvalidName { .. })
        ));
    }
    assert!(matches!(
        Channel::create(
            &unique("cap"),
            &Config {
                capacity: 1000,
                ..Config::default()
            }
        ),
        Err(OpenError::InvalidConfig { .. })
    ));
}

#[test]
fn close_is_seen_after_the_last_frame() {
    let name = unique("close");
    let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    for i in 0..3u8 {
        a.send(&[i; 10]).unwrap();
    }
    drop(a);
    for i in 0..3u8 {
        assert_eq!(&*b.recv_timeout(Duration::from_secs(10)).unwrap(), &[i; 10]);
    }
    assert!(matches!(
        b.recv_timeout(Duration::from_secs(10)),
        Err(RecvError::Disconnected { .. })
    ));
    assert!(matches!(b.try_recv(), Err(RecvError::Disconnected { .. })));
    assert!(matches!(b.send(b"x"), Err(SendError::Disconnected { .. })));
}

#[test]
fn empty_and_timeout() {
    let name = unique("empty");
    let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let _b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
    for wait in WaitStrategy::ALL {
        a.receiver.wait = crate::wait::Waiter::new(wait);
        assert!(matches!(
            a.recv_timeout(Duration::from_millis(30)),
            Err(RecvError::Timeout { .. })
        ));
    }
}

#[test]
fn fragmented_messages_of_every_interesting_size() {
    let name = unique("frag");
    let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let max = a.max_frame();
    let sizes = [0, 1, max - 1, max, max + 1, 4096 * 7 / 2, 100_000];
    let sender = std::thread::spawn(move || {
        for (i, &n) in sizes.iter().enumerate() {
            let data: Vec<u8> = (0..n).map(|j| (i * 7 + j * 13) as u8).collect();
            a.send(&data).unwrap();
        }
        a
    });
    let mut buf = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        assert_eq!(b.recv_into(&mut buf).unwrap(), n);
        assert!(buf
            .iter()
            .enumerate()
            .all(|(j, &x)| x == (i * 7 + j * 13) as u8));
    }
    let mut a = sender.join().unwrap();
    a.set_max_message(10_000);
    assert!(matches!(
        a.send(&vec![0; 10_001]),
        Err(SendError::TooLarge {
            len: 10_001,
            max: 10_000,
            ..
        })
    ));
    // Nothing of the refused message was written.
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
}

#[test]
fn split_halves_stream_large_messages_both_ways_at_once() {
    let name = unique("split");
    let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let big = |seed: u8| -> Vec<u8> { (0..50_000).map(|i| (i as u8) ^ seed).collect() };
    // Each end sends messages 12x the ring while the other does the same: with one thread
    // per end this would deadlock; with split halves each end keeps receiving.
    let run = |ch: &mut Channel, seed: u8, other: u8| {
        let (tx, rx) = ch.split();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..5 {
                    tx.send_timeout(&big(seed), Duration::from_secs(20))
                        .unwrap();
                }
            });
            let mut buf = Vec::new();
            for _ in 0..5 {
                let msg = rx.recv_timeout(Duration::from_secs(20)).unwrap();
                buf.clear();
                buf.extend_from_slice(&msg);
                assert_eq!(buf, big(other));
            }
        });
    };
    std::thread::scope(|s| {
        s.spawn(|| run(&mut a, 1, 2));
        s.spawn(|| run(&mut b, 2, 1));
    });
}

#[test]
fn block_ping_pong_between_threads() {
    let name = unique("block");
    let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let n = 20_000u32;
    let echo = std::thread::spawn(move || {
        for _ in 0..n {
            let v = u32::from_le_bytes(
                b.recv_timeout(Duration::from_secs(10)).unwrap()[..4]
                    .try_into()
                    .unwrap(),
            );
            b.send(&(v + 1).to_le_bytes()).unwrap();
        }
    });
    for i in 0..n {
        a.send(&i.to_le_bytes()).unwrap();
        let r = a.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(u32::from_le_bytes(r[..4].try_into().unwrap()), i + 1);
    }
    echo.join().unwrap();
}

/// Writes a header by hand and returns the error `connect` refuses it with, which must name the
/// channel.
fn connect_to_forged(edit: impl FnOnce(&SegmentHeader)) -> OpenError {
    let name = unique("forged");
    let mut map = Mapping::create_named(&name, segment_size(4096)).unwrap();
    {
        let hdr = segment(&map);
        hdr.magic.store(MAGIC, Ordering::Relaxed);
        hdr.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        hdr.header_size.store(HEADER_SIZE as u32, Ordering::Relaxed);
        hdr.capacity.store(4096, Ordering::Relaxed);
        hdr.total_size
            .store(segment_size(4096) as u64, Ordering::Relaxed);
        hdr.write_layout();
        hdr.creator.pid.store(std::process::id(), Ordering::Relaxed);
        hdr.creator.state.store(PEER_PRESENT, Ordering::Relaxed);
        hdr.ready.store(READY, Ordering::Release);
        edit(hdr);
    }
    let err = Channel::connect(&name, WaitStrategy::Spin).unwrap_err();
    map.set_owner(true);
    assert!(
        err.to_string().contains(&name),
        "{err} does not name {name}"
    );
    err
}

#[test]
fn hostile_headers_are_refused() {
    assert!(matches!(
        connect_to_forged(|h| h.magic.store(0xdead_beef, Ordering::Relaxed)),
        OpenError::BadMagic {
            magic: 0xdead_beef,
            ..
        }
    ));
    // A listener's magic: the name is taken for a listener's, and this header is refused as
    // one (a channel's version and sizes are not a listener's).
    let err = connect_to_forged(|h| h.magic.store(LISTENER_MAGIC, Ordering::Relaxed));
    assert!(
        matches!(
            err,
            OpenError::VersionMismatch { .. } | OpenError::SizeMismatch { .. }
        ),
        "{err:?}"
    );
    assert!(matches!(
        connect_to_forged(|h| h.version.store(99, Ordering::Relaxed)),
        OpenError::VersionMismatch { found: 99, .. }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.capacity.store(1 << 20, Ordering::Relaxed)),
        OpenError::SizeMismatch { .. }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.capacity.store(3000, Ordering::Relaxed)),
        OpenError::SizeMismatch { .. }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.total_size.store(u64::MAX, Ordering::Relaxed)),
        OpenError::SizeMismatch { .. }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.header_size.store(8, Ordering::Relaxed)),
        OpenError::SizeMismatch { .. }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.ready.store(0, Ordering::Relaxed)),
        OpenError::NotReady { .. }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.connector.state.store(PEER_PRESENT, Ordering::Relaxed)),
        OpenError::AlreadyConnected { .. }
    ));
    // A build with other layout parameters: refused by name, field and value.
    let err = connect_to_forged(|h| h.cell_align.store(64, Ordering::Relaxed));
    assert!(
        matches!(
            &err,
            OpenError::LayoutMismatch {
                field: "cell alignment",
                found: 64,
                expected: 128,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        connect_to_forged(|h| h.pointer_width.store(32, Ordering::Relaxed)),
        OpenError::LayoutMismatch {
            field: "pointer width",
            found: 32,
            ..
        }
    ));
    assert!(matches!(
        connect_to_forged(|h| h.frame_align.store(128, Ordering::Relaxed)),
        OpenError::LayoutMismatch {
            field: "frame alignment",
            ..
        }
    ));
    // Indices that disagree with each other.
    assert!(matches!(
        connect_to_forged(|h| {
            let ring0 = (h as *const SegmentHeader as *const u8).wrapping_add(RINGS_OFFSET)
                as *const RingHeader;
            // SAFETY: the ring headers lie inside the mapping at RINGS_OFFSET.
            unsafe { &*ring0 }.head.store(64, Ordering::Relaxed);
        }),
        OpenError::Corrupt { .. }
    ));
}

#[test]
fn a_dead_creator_is_reclaimed_and_a_live_one_is_not() {
    let name = unique("stale");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = ProcessId {
        pid: child.id(),
        start_time: 0,
    };
    child.wait().unwrap();
    let mut map = Mapping::create_named(&name, segment_size(4096)).unwrap();
    map.set_owner(false);
    {
        let hdr = segment(&map);
        hdr.magic.store(MAGIC, Ordering::Relaxed);
        hdr.creator.pid.store(dead.pid, Ordering::Relaxed);
        hdr.creator
            .start_time
            .store(dead.start_time, Ordering::Relaxed);
        hdr.creator.state.store(PEER_PRESENT, Ordering::Relaxed);
        hdr.ready.store(READY, Ordering::Release);
    }
    // A dead creator also no longer holds its creator lock: let go of the segment (without
    // removing its name) like a process that died.
    drop(map);
    let fresh = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    assert!(matches!(
        Channel::create(&name, &small(WaitStrategy::Spin)),
        Err(OpenError::AlreadyExists { .. })
    ));
    drop(fresh);
    assert!(!shm_path(&name).exists());
}

#[test]
fn file_backed_channels() {
    let dir = std::env::temp_dir().join(unique("file"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ring");
    {
        let mut a = Channel::create_at(&path, &small(WaitStrategy::Spin)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let mut b = Channel::connect_at(&path, WaitStrategy::Spin).unwrap();
        a.send(b"via a file").unwrap();
        assert_eq!(&*b.recv().unwrap(), b"via a file");
    }
    assert!(!path.exists());
    std::fs::remove_dir(&dir).unwrap();
}

/// Halves swapped between two channels: each half keeps its own mapping alive, so a producer
/// never points into another channel's unmapped segment; only a confusing thing to do.
#[test]
fn swapping_halves_between_channels_is_harmless() {
    let cfg = Config {
        capacity: 1 << 16,
        wait: WaitStrategy::Spin,
    };
    let (name_a, name_c) = (unique("swap-a"), unique("swap-c"));
    let mut a = Channel::create(&name_a, &cfg).unwrap();
    let mut c = Channel::create(&name_c, &cfg).unwrap();
    let mut peer_c = Channel::connect(&name_c, WaitStrategy::Spin).unwrap();
    {
        let (sa, _) = a.split();
        let (sc, _) = c.split();
        std::mem::swap(sa, sc);
    }
    drop(c);
    // `a` now sends on c's ring, whose mapping its sending half keeps alive.
    a.try_send(b"hello").unwrap();
    assert_eq!(&*peer_c.recv().unwrap(), b"hello");
    assert_eq!(a.split().0.name(), name_c);
    drop(a);
    // Both of c's halves are gone now: its peer sees the close, and its name is free.
    assert!(matches!(
        peer_c.try_recv(),
        Err(RecvError::Disconnected { .. })
    ));
    assert!(!shm_path(&name_a).exists());
    assert!(!shm_path(&name_c).exists());
}

fn assert_send<T: Send>() {}

#[test]
fn owned_halves_work_from_threads_and_close_when_both_are_gone() {
    assert_send::<SendHalf>();
    assert_send::<RecvHalf>();
    assert_send::<Channel>();
    let name = unique("owned");
    let a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let (mut tx, mut rx) = a.into_split();
    let sender = std::thread::spawn(move || {
        for i in 0..1000u32 {
            tx.send(&i.to_le_bytes()).unwrap();
        }
        tx
    });
    let echo = std::thread::spawn(move || {
        let msg = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(&*msg, b"to a");
        drop(msg);
        rx
    });
    b.send(b"to a").unwrap();
    for i in 0..1000u32 {
        let msg = b.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(&*msg, &i.to_le_bytes());
    }
    let tx = sender.join().unwrap();
    let rx = echo.join().unwrap();
    // One half alone keeps the endpoint open.
    drop(tx);
    assert!(b.is_peer_connected());
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
    assert!(shm_path(&name).exists());
    // The last half closes it, and the creator's name goes with it.
    drop(rx);
    assert!(!b.is_peer_connected());
    assert!(matches!(b.try_recv(), Err(RecvError::Disconnected { .. })));
    assert!(!shm_path(&name).exists());
}

#[test]
fn a_sleeping_peer_is_woken_when_the_last_half_drops() {
    let name = unique("owned-wake");
    let a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    let waiter = std::thread::spawn(move || b.recv_timeout(Duration::from_secs(10)).map(|_| ()));
    let (tx, rx) = a.into_split();
    std::thread::sleep(Duration::from_millis(50));
    drop(rx);
    drop(tx);
    assert!(matches!(
        waiter.join().unwrap(),
        Err(RecvError::Disconnected { .. })
    ));
}

pub(super) mod limits_and_fragments;
