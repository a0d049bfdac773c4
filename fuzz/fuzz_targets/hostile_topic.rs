//! A real topic (a publisher and subscribers of this process, each with its own mapping) whose
//! shared bytes a hostile process rewrites while they work: every word of the header, the
//! topic's words, the index, the slots and the ring is in reach, between the ends' calls. The
//! input is a list of steps:
//!
//! * the first byte picks the mode (lossless or overwrite) and the history kept;
//! * then each step's first byte picks an operation: a `try_send` of a message of a length the
//!   next byte gives, a `try_recv` (or a `recv_timeout(0)`, or a batch) by one of the
//!   subscribers, a new subscriber joining (with a history), one dropped by the publisher or
//!   leaving, or a write of the next eight bytes at an offset of the mapping the next two
//!   bytes give (scaled to the whole mapping: the header, the topic's words, the index, the
//!   slots and the ring are all written).
//!
//! Every message handed out must lie inside the ring region it was read from (lossless) or in
//! the subscriber's own memory (overwrite: a copy); every other outcome must be a typed error.
//! A panic, a crash, an abort or a hang is a finding. Sends and receives do not wait.
#![no_main]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use shmlink::{
    Publisher, RecvError, Subscriber, SubscriberConfig, TopicConfig, TopicMode, WaitStrategy,
};

static CASE: AtomicUsize = AtomicUsize::new(0);

fn open_topic(name: &str) -> Option<memmap2::MmapMut> {
    let path = format!("{}/shmlink-{name}", shmlink::testing::shm_dir()?.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ok()?;
    // SAFETY: a topic this process made; every access through this mapping is atomic.
    unsafe { memmap2::MmapMut::map_mut(&file) }.ok()
}

fn write_word(map: &memmap2::MmapMut, at: usize, value: u64) {
    let at = at & !7;
    if at + 8 <= map.len() {
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); the library reads
        // these words atomically or as plain bytes it copies.
        unsafe { &*(map.as_ptr().add(at) as *const AtomicU64) }.store(value, Ordering::Relaxed);
    }
}

/// A message handed out (`len` bytes at `at`, looked at once its guard is gone) lay inside
/// the ring region the subscriber reads (read in place), or wholly outside its mapping (a copy
/// in its own memory), and never in the hostile mapping.
fn check_span(at: usize, len: usize, sub: &Subscriber, hostile: &memmap2::MmapMut) {
    if len == 0 {
        return;
    }
    let end = at + len;
    let overlaps = |r: &std::ops::Range<usize>| at < r.end && end > r.start;
    let (ring, mapping) = shmlink::testing::subscriber_regions(sub);
    let inside_ring = at >= ring.start && end <= ring.end;
    assert!(
        inside_ring || !overlaps(&mapping),
        "a message of {len} bytes at {at:#x} straddles the ring {ring:x?} of the mapping \
         {mapping:x?}"
    );
    let base = hostile.as_ptr() as usize;
    assert!(
        !overlaps(&(base..base + hostile.len())),
        "a message in the hostile mapping"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let name = format!(
        "fzt-{}-{}",
        std::process::id(),
        CASE.fetch_add(1, Ordering::Relaxed)
    );
    let config = TopicConfig {
        capacity: 1024,
        wait: WaitStrategy::Spin,
        mode: if first & 1 == 0 {
            TopicMode::Lossless
        } else {
            TopicMode::Overwrite
        },
        history: usize::from(first >> 1 & 7),
        max_subscribers: 4,
    };
    let Ok(mut publisher) = Publisher::create(&name, &config) else {
        return;
    };
    let Some(map) = open_topic(&name) else {
        return;
    };
    let mut subs: Vec<Subscriber> = Vec::new();
    let mut seq = 0u64;
    let mut steps = 0;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        steps += 1;
        if steps > 256 {
            break;
        }
        let arg = rest.first().copied().unwrap_or(0);
        match op % 8 {
            0 | 1 => {
                rest = rest.get(1..).unwrap_or(&[]);
                let len = usize::from(arg) * 3;
                let mut msg = vec![seq as u8; len];
                if len >= 8 {
                    msg[..8].copy_from_slice(&seq.to_le_bytes());
                }
                seq += 1;
                let _ = publisher.try_send(&msg);
            }
            2 | 3 => {
                rest = rest.get(1..).unwrap_or(&[]);
                if let Some(sub) = subs.get_mut(usize::from(arg) % 4) {
                    match arg >> 6 {
                        0 => {
                            let got = sub.try_recv().map(|m| (m.as_ptr() as usize, m.len()));
                            if let Ok((at, len)) = got {
                                check_span(at, len, sub, &map);
                            }
                        }
                        1 => {
                            let got = sub
                                .recv_timeout(Duration::ZERO)
                                .map(|m| (m.as_ptr() as usize, m.len()));
                            if let Ok((at, len)) = got {
                                check_span(at, len, sub, &map);
                            }
                        }
                        2 => {
                            let mut spans = Vec::new();
                            let _ = sub
                                .try_recv_batch(16, |m| spans.push((m.as_ptr() as usize, m.len())));
                            for (at, len) in spans {
                                check_span(at, len, sub, &map);
                            }
                        }
                        _ => {
                            let mut buf = Vec::new();
                            let _ = sub.try_recv_into(&mut buf);
                        }
                    }
                }
            }
            4 => {
                rest = rest.get(1..).unwrap_or(&[]);
                let join = SubscriberConfig {
                    wait: WaitStrategy::Spin,
                    history: usize::from(arg % 8),
                };
                match Subscriber::connect_with(&name, &join) {
                    Ok(sub) if subs.len() < 4 => subs.push(sub),
                    Ok(_) => {}
                    // Typed errors: a forged header, a full table, a join that never settles.
                    Err(_) => {}
                }
            }
            5 => {
                rest = rest.get(1..).unwrap_or(&[]);
                if usize::from(arg) < subs.len() {
                    if arg & 0x80 == 0 {
                        publisher.drop_subscriber(subs[usize::from(arg)].slot());
                    } else {
                        subs.swap_remove(usize::from(arg));
                    }
                }
            }
            _ => {
                // A hostile write: two bytes of offset, eight of value.
                if rest.len() < 10 {
                    break;
                }
                let offset = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
                let value = u64::from_le_bytes(rest[2..10].try_into().unwrap_or([0; 8]));
                rest = &rest[10..];
                // Scaled to the whole mapping.
                let at = offset * map.len() / 65536;
                write_word(&map, at, value);
            }
        }
    }
    drop(subs);
    drop(publisher);
    drop(map);
});
