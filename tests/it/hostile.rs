//! Hostile bytes: a peer can write anything into the shared mapping. These properties fill the
//! segment header, the ring headers (indices included) and the ring regions of a real
//! `/dev/shm/shmlink-<name>` mapping with arbitrary values, through a second mapping of the same
//! object, and then drive the consumer (`try_recv`) and the connecting side (`connect`): every
//! outcome must be a frame that lies inside the ring region it was read from, a reassembled
//! message (longer than any frame, in memory of the receiver's own), or a typed error. No panic,
//! no read outside the mapping, no endless loop (every loop here is bounded, and a watchdog
//! aborts the process if a call never returns). Each property also counts how far its cases got
//! (frames accepted, connections made) and fails if too few went past the first check.

use crate::support;

use support::Watchdog;

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::mem::offset_of;

use memmap2::MmapMut;
use proptest::prelude::*;
use shmlink::testing::{frame_size, max_payload, FRAME_ALIGN};
use shmlink::testing::{SegmentHeader, HEADER_SIZE, LAYOUT_VERSION, MAGIC, READY, RINGS_OFFSET};
use shmlink::{Channel, Config, OpenError, RecvError, WaitStrategy};

const CAP: usize = 1024;
/// Size of one `RingHeader`: four cache-padded cells.
const RING_HEADER: usize = 512;
const CASES: u32 = if cfg!(debug_assertions) { 128 } else { 512 };
/// The padded-cell alignment every build writes into its segments (`layout::CELL_ALIGN`).
const CELL_ALIGN: u32 = 128;

static CASE: AtomicU64 = AtomicU64::new(0);

fn fresh_name() -> String {
    support::unique(&format!("hostile-{}", CASE.fetch_add(1, Ordering::Relaxed)))
}

/// The address ranges at which this process maps `/dev/shm/shmlink-<name>`.
fn mapped_ranges(name: &str) -> Vec<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let suffix = format!("/dev/shm/shmlink-{name}");
    maps.lines()
        .filter(|l| l.trim_end().ends_with(&suffix))
        .filter_map(|l| {
            let (range, _) = l.split_once(' ')?;
            let (a, b) = range.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// Checks a received message. One no longer than a frame is read in place: it must lie
/// entirely inside ring `ring`'s region of one of the mappings of the segment. A longer one can
/// only be a message reassembled from fragments (the receiver refuses fragmented messages that
/// would fit one frame): it must lie outside every mapping of the segment and within the limit.
fn check_frame(frame: &[u8], ranges: &[(usize, usize)], ring: usize, max_message: usize) {
    let start = frame.as_ptr() as usize;
    let end = start + frame.len();
    if frame.len() <= max_payload(CAP) {
        let inside_ring = ranges.iter().any(|&(a, b)| {
            let lo = a + HEADER_SIZE + ring * CAP;
            let hi = lo + CAP;
            hi <= b && start >= lo && end <= hi
        });
        assert!(
            inside_ring,
            "frame [{start:#x}, {end:#x}) is not inside ring {ring}'s region"
        );
    } else {
        let overlaps = ranges.iter().any(|&(a, b)| start < b && end > a);
        assert!(
            !overlaps,
            "a message of {} bytes, longer than a frame, at [{start:#x}, {end:#x}) in the segment",
            frame.len()
        );
        assert!(
            frame.len() <= max_message,
            "reassembled {} bytes",
            frame.len()
        );
    }
}

fn encode(index: u64, kind: u8, len: u32) -> u64 {
    (((index >> 3) & ((1 << 29) - 1)) << 35) | (u64::from(kind & 7) << 32) | u64::from(len)
}

/// One frame a hostile producer lays out: kind (0 and 6..7 are invalid), length, and whether its
/// tag matches its position.
#[derive(Debug, Clone)]
struct Planted {
    kind: u8,
    len: u32,
    good_tag: bool,
    fill: u8,
}

fn planted() -> impl Strategy<Value = Planted> {
    (
        prop_oneof![6 => Just(1u8), 1 => Just(2u8), 3 => 3u8..=5, 1 => 0u8..=7],
        prop_oneof![
            6 => 0u32..64,
            2 => 0u32..(CAP as u32 / 2),
            1 => Just(max_payload(CAP) as u32),
            1 => any::<u32>(),
        ],
        prop_oneof![9 => Just(true), 1 => Just(false)],
        any::<u8>(),
    )
        .prop_map(|(kind, len, good_tag, fill)| Planted {
            kind,
            len,
            good_tag,
            fill,
        })
}

/// A (tail, head) pair: consistent (head <= tail <= head + capacity, line-aligned) with weight
/// `consistent`, else nearly so or anything.
fn indices(consistent: u32) -> impl Strategy<Value = (u64, u64)> {
    prop_oneof![
        consistent => (0u64..4096, 0u64..=(CAP as u64 / 64)).prop_map(|(h, d)| (h * 64 + d * 64, h * 64)),
        1 => (0u64..(1 << 20), 0u64..(1 << 20)),
        1 => (any::<u64>(), any::<u64>()),
    ]
}

/// A value that is `valid`, or (one time in `1 + odds`) anything `other` makes.
fn mostly<T: std::fmt::Debug + Clone + 'static>(
    odds: u32,
    valid: T,
    other: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    prop_oneof![odds => Just(valid), 1 => other].boxed()
}

fn word_at(map: &MmapMut, offset: usize) -> &AtomicU64 {
    assert!(offset % 8 == 0 && offset + 8 <= map.len());
    // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); the library accesses these
    // words atomically too, so an atomic view is the right one for bytes another mapping uses.
    unsafe { &*(map.as_ptr().add(offset) as *const AtomicU64) }
}

/// Writes `bytes` over the region of ring `ring`, then lays out `frames` from index `from`: all
/// of them, a later lap over an earlier one, if `wrap`; else those that fit in one lap (as a
/// producer that respects the ring would, so the consumer meets them in turn).
fn scribble_ring(
    map: &MmapMut,
    ring: usize,
    bytes: &[u8],
    from: u64,
    frames: &[Planted],
    wrap: bool,
) {
    let base = HEADER_SIZE + ring * CAP;
    for (i, chunk) in bytes.chunks(8).enumerate().take(CAP / 8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        word_at(map, base + i * 8).store(u64::from_le_bytes(w), Ordering::Relaxed);
    }
    let first = from & !(FRAME_ALIGN as u64 - 1);
    let mut at = first;
    for f in frames {
        let pos = (at as usize) & (CAP - 1);
        let size = frame_size((f.len as usize).min(CAP)) as u64;
        // What it covers: its payload is only written up to the end of the region.
        let span = size.min((CAP - pos) as u64);
        if !wrap && at.wrapping_sub(first) + span + 8 > CAP as u64 {
            break;
        }
        let tag_index = if f.good_tag { at } else { at ^ 0x5a8 };
        word_at(map, base + pos).store(encode(tag_index, f.kind, f.len), Ordering::Relaxed);
        // Some payload words, bounded by the region.
        let payload_words = (f.len as usize).min(CAP).div_ceil(8);
        for k in 0..payload_words {
            let off = pos + 8 + k * 8;
            if off + 8 <= CAP {
                word_at(map, base + off)
                    .store(u64::from(f.fill) * 0x0101_0101_0101_0101, Ordering::Relaxed);
            }
        }
        at = at.wrapping_add(if f.kind == 2 {
            CAP as u64 - pos as u64
        } else {
            size
        });
    }
    word_at(map, base + ((at as usize) & (CAP - 1))).store(0, Ordering::Relaxed);
}

fn ring_index(map: &MmapMut, ring: usize, field: usize, value: u64) {
    // tail is the first cache-padded cell, head the second (128 bytes each).
    word_at(map, RINGS_OFFSET + ring * RING_HEADER + field * 128).store(value, Ordering::Relaxed);
}

fn open_segment(name: &str) -> MmapMut {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(support::shm_path(name))
        .expect("open the segment");
    // SAFETY: a segment made by this test; every access through this mapping is atomic.
    unsafe { MmapMut::map_mut(&file) }.expect("map the segment")
}

/// Drives `try_recv` until it stops yielding frames (bounded), checking each frame. Returns how
/// many it accepted.
fn drain(ch: &mut Channel, name: &str, ring: usize) -> u64 {
    ch.set_max_message(1 << 20);
    let ranges = mapped_ranges(name);
    assert!(!ranges.is_empty(), "segment not found in /proc/self/maps");
    let mut accepted = 0;
    for _ in 0..64 {
        match ch.try_recv() {
            Ok(frame) => {
                check_frame(&frame, &ranges, ring, 1 << 20);
                accepted += 1;
            }
            // Corrupt may repeat; other typed errors end the stream.
            Err(RecvError::Corrupt { .. }) => {}
            Err(_) => break,
        }
    }
    accepted
}

/// Bounded attempts to send: a hostile consumer index must give a typed error, not a panic.
fn poke_sender(ch: &mut Channel) {
    for len in [0usize, 8, 100, max_payload(CAP), CAP] {
        let _ = ch.try_send(&vec![0xEE; len.min(max_payload(CAP))]);
    }
    let _ = ch.send_timeout(&[1; 3000], Duration::from_millis(2));
}

/// The creator's consumer reads a ring a hostile connector wrote.
#[test]
fn consumer_survives_hostile_rings() {
    let cases = Cell::new(0u64);
    let with_frames = Cell::new(0u64);
    proptest!(ProptestConfig::with_cases(CASES), |(
        region in proptest::collection::vec(any::<u8>(), 0..CAP),
        frames in proptest::collection::vec(planted(), 0..24),
        wrap in prop_oneof![3 => Just(false), 1 => Just(true)],
        (tx_tail, tx_head) in indices(4),
        (rx_tail, rx_head) in indices(4),
    )| {
        let _dog = Watchdog::arm(Duration::from_secs(60), "a hostile case");
        let name = fresh_name();
        let _unlink = support::NameGuard(name.clone());
        let mut creator = Channel::create(&name, &Config { capacity: CAP, wait: WaitStrategy::Spin })
            .expect("create");
        let map = open_segment(&name);
        // The creator consumes ring 1 from index 0 (its local index; the shared one is only
        // advisory for it), and produces into ring 0, whose head is the peer's to write.
        scribble_ring(&map, 1, &region, 0, &frames, wrap);
        ring_index(&map, 1, 0, rx_tail);
        ring_index(&map, 1, 1, rx_head);
        ring_index(&map, 0, 0, tx_tail);
        ring_index(&map, 0, 1, tx_head);
        cases.set(cases.get() + 1);
        if drain(&mut creator, &name, 1) > 0 {
            with_frames.set(with_frames.get() + 1);
        }
        poke_sender(&mut creator);
    });
    let (cases, with_frames) = (cases.get(), with_frames.get());
    eprintln!("hostile rings: frames accepted in {with_frames} of {cases} cases");
    assert!(
        with_frames * 8 >= cases,
        "only {with_frames} of {cases} hostile rings yielded a frame"
    );
}

/// A connector meets a segment whose every header field, record and index may be anything. Most
/// cases hold a valid header (each field is wrong one time in 40), so that most connections are
/// made and the rings behind them driven; the count of connections made is checked.
#[test]
fn connect_survives_hostile_headers() {
    let cases = Cell::new(0u64);
    let connected = Cell::new(0u64);
    let with_frames = Cell::new(0u64);
    proptest!(ProptestConfig::with_cases(CASES), |(
        magic in mostly(39, MAGIC, any::<u64>()),
        version in mostly(39, LAYOUT_VERSION, any::<u32>()),
        header_size in mostly(39, HEADER_SIZE as u32, any::<u32>()),
        capacity in mostly(39, CAP as u64, prop_oneof![(0u64..64).prop_map(|s| 1 << s), any::<u64>()]),
        total in mostly(39, (HEADER_SIZE + 2 * CAP) as u64, any::<u64>()),
        ready in mostly(39, READY, any::<u32>()),
        frame_align in mostly(39, FRAME_ALIGN as u32, any::<u32>()),
        cell_align in mostly(39, CELL_ALIGN, any::<u32>()),
        pointer_width in mostly(39, usize::BITS, any::<u32>()),
        creator_state in prop_oneof![3 => Just(1u32), 1 => 0u32..8, 1 => any::<u32>()],
        creator_pid in prop_oneof![3 => Just(std::process::id()), 1 => any::<u32>()],
        connector_state in mostly(39, 0u32, prop_oneof![0u32..8, any::<u32>()]),
        rest in proptest::collection::vec(any::<u8>(), 0..256),
        region in proptest::collection::vec(any::<u8>(), 0..CAP),
        frames in proptest::collection::vec(planted(), 0..24),
        wrap in prop_oneof![3 => Just(false), 1 => Just(true)],
        ring0 in indices(40),
        ring1 in indices(40),
    )| {
        let _dog = Watchdog::arm(Duration::from_secs(60), "a hostile case");
        let name = fresh_name();
        let _unlink = support::NameGuard(name.clone());
        let creator = Channel::create(&name, &Config { capacity: CAP, wait: WaitStrategy::Spin })
            .expect("create");
        let map = open_segment(&name);
        // Arbitrary bytes over the layout words, the endpoint records and the padding first...
        for (i, chunk) in rest.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            let off = 40 + i * 8;
            word_at(&map, off).store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
        // ...then each field, valid or not, the 32-bit ones two to a word.
        let pair = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
        word_at(&map, offset_of!(SegmentHeader, magic)).store(magic, Ordering::Relaxed);
        word_at(&map, offset_of!(SegmentHeader, version)).store(pair(version, header_size), Ordering::Relaxed);
        word_at(&map, offset_of!(SegmentHeader, capacity)).store(capacity, Ordering::Relaxed);
        word_at(&map, offset_of!(SegmentHeader, total_size)).store(total, Ordering::Relaxed);
        word_at(&map, offset_of!(SegmentHeader, ready)).store(pair(ready, frame_align), Ordering::Relaxed);
        word_at(&map, offset_of!(SegmentHeader, cell_align)).store(pair(cell_align, pointer_width), Ordering::Relaxed);
        // PeerInfo: state, wait mode | pid, reserved, start time.
        let creator_at = offset_of!(SegmentHeader, creator);
        let connector_at = offset_of!(SegmentHeader, connector);
        word_at(&map, creator_at).store(pair(creator_state, 1), Ordering::Relaxed);
        word_at(&map, creator_at + 8).store(u64::from(creator_pid), Ordering::Relaxed);
        word_at(&map, connector_at).store(u64::from(connector_state), Ordering::Relaxed);
        ring_index(&map, 0, 0, ring0.0);
        ring_index(&map, 0, 1, ring0.1);
        ring_index(&map, 1, 0, ring1.0);
        ring_index(&map, 1, 1, ring1.1);
        // The connector consumes ring 0 from the shared head.
        scribble_ring(&map, 0, &region, ring0.1, &frames, wrap);
        cases.set(cases.get() + 1);
        match Channel::connect(&name, WaitStrategy::Spin) {
            Ok(mut ch) => {
                connected.set(connected.get() + 1);
                if drain(&mut ch, &name, 0) > 0 {
                    with_frames.set(with_frames.get() + 1);
                }
                poke_sender(&mut ch);
            }
            Err(e) => prop_assert!(
                matches!(
                    e,
                    OpenError::BadMagic { .. }
                        | OpenError::VersionMismatch { .. }
                        | OpenError::SizeMismatch { .. }
                        | OpenError::NotReady { .. }
                        | OpenError::LayoutMismatch { .. }
                        | OpenError::AlreadyConnected { .. }
                        | OpenError::Corrupt { .. }
                ),
                "unexpected error {e}"
            ),
        }
        drop(creator);
    });
    let (cases, connected, with_frames) = (cases.get(), connected.get(), with_frames.get());
    eprintln!(
        "hostile headers: {connected} of {cases} connects succeeded, {with_frames} of them \
         yielded a frame"
    );
    assert!(
        connected * 2 >= cases,
        "only {connected} of {cases} hostile segments could be connected to"
    );
    // The connector's consumer is driven too: some of the rings behind the connections made
    // hand out frames (each checked to lie inside its ring by `drain`).
    assert!(
        with_frames * 8 >= connected,
        "only {with_frames} of {connected} connections to hostile segments yielded a frame"
    );
}
