//! The same surface as `tests/it/hostile.rs` and `tests/it/hostile_stream.rs`: a real shmlink
//! segment whose bytes come from the fuzzer. Three modes, chosen by the first byte:
//!
//! * a static image of ring 1 and its indices, read by the creator's consumer (`try_recv`);
//! * a header page and ring 0 met by a connector (`connect`, then `try_recv` and `try_send`);
//! * a stream: frames fed into ring 1 one after another, over time, by a hand-written producer
//!   that respects the ring's free space (or, when told, ignores it), with the creator receiving
//!   in between (`try_recv`, `recv_timeout(0)`, and JSON decoding of what it gets). Fragments of
//!   every kind, length and order, announced totals of any size, wrong tags and rewrites of a
//!   frame after it was published are all in reach.
//!
//! Anything but a frame inside the ring it was read from (its addresses checked against the
//! ring region's), a reassembled message within the limit in the receiver's own memory (outside
//! both mappings of the segment), or a typed error (a panic, a crash, an abort, a hang) is a
//! finding.
#![no_main]

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use shmlink::testing::{
    frame_size, max_payload, recv_region, segment_size, HEADER_SIZE, RINGS_OFFSET,
};
use shmlink::{Channel, Config, RecvError, WaitStrategy};

const CAP: usize = 1024;
/// The creator's limit for reassembled messages in these runs.
const MAX_MESSAGE: usize = 1 << 16;
/// Size of one `RingHeader`: four cache-padded cells.
const RING_HEADER: usize = 512;
static CASE: AtomicU64 = AtomicU64::new(0);

fn overwrite(map: &mut memmap2::MmapMut, at: usize, bytes: &[u8]) {
    let end = (at + bytes.len()).min(map.len());
    if at < end {
        map[at..end].copy_from_slice(&bytes[..end - at]);
    }
}

fn encode(index: u64, kind: u8, len: u32) -> u64 {
    (((index >> 3) & ((1 << 29) - 1)) << 35) | (u64::from(kind & 7) << 32) | u64::from(len)
}

fn word(map: &memmap2::MmapMut, offset: usize) -> &AtomicU64 {
    assert!(offset.is_multiple_of(8) && offset + 8 <= map.len());
    // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); the library accesses these
    // words atomically too.
    unsafe { &*(map.as_ptr().add(offset) as *const AtomicU64) }
}

/// Where a receiver's messages may lie: the ring region it reads (for a message read in place)
/// and the two mappings of the segment (which a reassembled message must stay out of).
struct Bounds {
    ring: Range<usize>,
    mappings: [Range<usize>; 2],
}

impl Bounds {
    /// For `ch`, which reads ring `ring` of its mapping (1 for the creator, 0 for the
    /// connector), and the fuzzer's own mapping `view` of the same segment (as long as the
    /// channel's: both map the whole object).
    fn of(ch: &Channel, ring: usize, view: &memmap2::MmapMut) -> Bounds {
        let region = recv_region(ch);
        let cap = region.len();
        assert!(
            cap.is_power_of_two() && segment_size(cap) <= view.len(),
            "a ring of {cap} bytes in a segment of {}",
            view.len()
        );
        let base = region.start - HEADER_SIZE - ring * cap;
        let own = base..base + view.len();
        let view = view.as_ptr() as usize..view.as_ptr() as usize + view.len();
        Bounds {
            ring: region,
            mappings: [own, view],
        }
    }

    /// The capacity of the ring (a connector's comes from the header the fuzzer wrote).
    fn capacity(&self) -> usize {
        self.ring.len()
    }

    /// A message no longer than a frame is read in place and must lie inside the ring region;
    /// a longer one can only be reassembled from fragments (a fragmented message that would fit
    /// one frame is refused), in the receiver's own memory, within the limit.
    fn check(&self, msg: &[u8]) {
        let start = msg.as_ptr() as usize;
        let end = start + msg.len();
        if msg.len() <= max_payload(self.capacity()) {
            assert!(
                self.ring.start <= start && end <= self.ring.end,
                "a message at [{start:#x}, {end:#x}) outside the ring region [{:#x}, {:#x})",
                self.ring.start,
                self.ring.end
            );
        } else {
            assert!(msg.len() <= MAX_MESSAGE, "message of {} bytes", msg.len());
            for m in &self.mappings {
                assert!(
                    end <= m.start || start >= m.end,
                    "a reassembled message of {} bytes at [{start:#x}, {end:#x}) in the segment",
                    msg.len()
                );
            }
        }
    }
}

/// One received outcome: a message where `bounds` allow, or a typed error. Decodes some
/// messages as JSON to exercise the private copy.
fn check(got: Result<shmlink::ReadGuard<'_>, RecvError>, decode: bool, bounds: &Bounds) {
    match got {
        Ok(msg) => {
            bounds.check(&msg);
            if decode {
                if let Ok(text) = msg.json::<&str>() {
                    assert!(std::str::from_utf8(text.as_bytes()).is_ok());
                }
            }
        }
        Err(
            RecvError::Empty { .. }
            | RecvError::Timeout { .. }
            | RecvError::Corrupt { .. }
            | RecvError::TooLarge { .. }
            | RecvError::Disconnected { .. }
            | RecvError::PeerGone { .. },
        ) => {}
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// One batch receive's outcome: every message it handed within the limit, as many as it
/// counts, at most `max`, or a typed error.
fn check_batch(creator: &mut Channel, max: usize, bounds: &Bounds) {
    let mut handed = 0;
    let got = creator.try_recv_batch(max, |msg| {
        bounds.check(msg);
        handed += 1;
    });
    match got {
        Ok(n) => assert!(
            n == handed && n <= max && n > 0,
            "{n} counted, {handed} handed"
        ),
        Err(
            RecvError::Empty { .. }
            | RecvError::Corrupt { .. }
            | RecvError::TooLarge { .. }
            | RecvError::Disconnected { .. }
            | RecvError::PeerGone { .. },
        ) => assert_eq!(handed, 0, "an error after handing messages"),
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Feeds `ops` into ring 1 as frames, one after another, receiving in between.
///
/// Each op is a control byte (bits 0..3 kind, 0 and 7 invalid; bit 3 wrong tag; bit 4
/// receive after it; bit 5 with `recv_timeout(0)`, or with `try_recv_batch` if bit 6 is set
/// too; bit 6 decode as JSON; bit 7 rewrite the
/// frame's first payload word after publishing it), two length bytes, a fill byte, and for a
/// first fragment eight more bytes: the announced total.
fn stream(creator: &mut Channel, map: &mut memmap2::MmapMut, mut ops: &[u8]) {
    let bounds = Bounds::of(creator, 1, map);
    let region = HEADER_SIZE + CAP;
    let head_at = RINGS_OFFSET + RING_HEADER + 128;
    let mut tail = 0u64;
    while let [control, lo, hi, fill, rest @ ..] = ops {
        ops = rest;
        let kind = control & 7;
        let len = usize::from(u16::from_le_bytes([*lo, *hi])) % (CAP / 2);
        let mut payload = vec![*fill; len];
        if kind == 3 {
            let Some((total, rest)) = ops.split_first_chunk::<8>() else {
                break;
            };
            ops = rest;
            let n = len.min(8);
            payload[..n].copy_from_slice(&total[..n]);
        }
        let fs = frame_size(len) as u64;
        // Room as a producer sees it, draining the consumer a little when there is none.
        let mut placed = None;
        for _ in 0..4 {
            let pos = tail % CAP as u64;
            let start = if pos + fs <= CAP as u64 {
                tail
            } else {
                tail + (CAP as u64 - pos)
            };
            // Acquire: pairs with the consumer's Release store of its index.
            let head = word(map, head_at).load(Ordering::Acquire);
            if start + fs + 8 <= head + CAP as u64 && head <= tail {
                placed = Some(start);
                break;
            }
            check(creator.try_recv(), false, &bounds);
        }
        let Some(start) = placed else {
            // The consumer is stuck (a corrupt stream): keep poking it, nothing more to feed.
            check(creator.try_recv(), false, &bounds);
            continue;
        };
        if start != tail {
            word(map, region).store(0, Ordering::Relaxed);
            word(map, region + (tail % CAP as u64) as usize)
                .store(encode(tail, 2, 0), Ordering::Release);
        }
        let pos = (start % CAP as u64) as usize;
        overwrite(map, region + pos + 8, &payload);
        word(map, region + ((start + fs) % CAP as u64) as usize).store(0, Ordering::Relaxed);
        let tag_index = if control & 8 != 0 {
            start ^ 0x5a8
        } else {
            start
        };
        word(map, region + pos).store(encode(tag_index, kind, len as u32), Ordering::Release);
        tail = start + fs;
        if control & 0x80 != 0 && len >= 8 {
            // A peer rewriting what it published (the receiver may be reading it).
            word(map, region + pos + 8).store(
                u64::from(*fill).wrapping_mul(0x0101_0101_0101_0101) ^ u64::MAX,
                Ordering::Relaxed,
            );
        }
        if control & 0x10 != 0 {
            let decode = control & 0x40 != 0;
            if control & 0x20 != 0 && decode {
                check_batch(creator, usize::from(*fill % 8) + 1, &bounds);
            } else if control & 0x20 != 0 {
                check(creator.recv_timeout(Duration::ZERO), decode, &bounds);
            } else {
                check(creator.try_recv(), decode, &bounds);
            }
        }
    }
    for _ in 0..4 {
        check(creator.try_recv(), true, &bounds);
        check_batch(creator, 4, &bounds);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let name = format!(
        "fuzz-{}-{}",
        std::process::id(),
        CASE.fetch_add(1, Ordering::Relaxed)
    );
    let config = Config {
        capacity: CAP,
        wait: WaitStrategy::Spin,
    };
    let Ok(mut creator) = Channel::create(&name, &config) else {
        return;
    };
    creator.set_max_message(MAX_MESSAGE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/shm/shmlink-{name}"))
        .expect("open segment");
    // SAFETY: a segment only this process maps; the writes below race with nothing.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.expect("map segment");
    match mode % 3 {
        0 => {
            // Consumer: ring 1 (connector -> creator) header and region, ring 0's consumer
            // index.
            let (indices, region) = rest.split_at(rest.len().min(32));
            overwrite(
                &mut map,
                RINGS_OFFSET + 512,
                &indices[..indices.len().min(8)],
            );
            if indices.len() > 8 {
                overwrite(
                    &mut map,
                    RINGS_OFFSET + 128,
                    &indices[8..indices.len().min(16)],
                );
            }
            overwrite(&mut map, HEADER_SIZE + CAP, region);
            let bounds = Bounds::of(&creator, 1, &map);
            for _ in 0..64 {
                match creator.try_recv() {
                    Ok(frame) => bounds.check(&frame),
                    Err(RecvError::Corrupt { .. }) => {}
                    Err(_) => break,
                }
            }
            let _ = creator.try_send(&[1; 100]);
        }
        1 => {
            // Connector: the header page's fields (after the magic, kept valid half of the
            // time), then ring 0's bytes.
            let keep_magic = mode & 4 != 0;
            let (head, region) = rest.split_at(rest.len().min(1200));
            let from = if keep_magic { 8 } else { 0 };
            // Skip the reserved gap so the fuzzer's bytes land on fields and ring indices.
            let (fields, rings) = head.split_at(head.len().min(400));
            overwrite(&mut map, from, fields);
            overwrite(&mut map, RINGS_OFFSET, rings);
            overwrite(&mut map, HEADER_SIZE, region);
            if let Ok(mut ch) = Channel::connect(&name, WaitStrategy::Spin) {
                ch.set_max_message(MAX_MESSAGE);
                let bounds = Bounds::of(&ch, 0, &map);
                for _ in 0..64 {
                    match ch.try_recv() {
                        Ok(frame) => bounds.check(&frame),
                        Err(RecvError::Corrupt { .. }) => {}
                        Err(_) => break,
                    }
                }
                let _ = ch.try_send(&[2; 100]);
            }
        }
        _ => stream(&mut creator, &mut map, rest),
    }
    drop(map);
    drop(creator);
});
