//! The same surface as `tests/hostile.rs`: a real shmlink segment whose header, ring indices
//! and ring bytes come from the fuzzer, read by the creator's consumer (`try_recv`) or met by a
//! connector (`connect`, then `try_recv` and `try_send`). Anything but a frame inside the ring
//! or a typed error (a panic, a crash, a hang) is a finding.
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};

use libfuzzer_sys::fuzz_target;
use shmlink::testing::{HEADER_SIZE, RINGS_OFFSET};
use shmlink::{Channel, Config, WaitStrategy};

const CAP: usize = 1024;
static CASE: AtomicU64 = AtomicU64::new(0);

fn overwrite(map: &mut memmap2::MmapMut, at: usize, bytes: &[u8]) {
    let end = (at + bytes.len()).min(map.len());
    if at < end {
        map[at..end].copy_from_slice(&bytes[..end - at]);
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
    creator.set_max_message(1 << 20);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/shm/shmlink-{name}"))
        .expect("open segment");
    // SAFETY: a segment only this process maps; the writes below race with nothing.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.expect("map segment");
    if mode & 1 == 0 {
        // Consumer: ring 1 (connector -> creator) header and region, ring 0's consumer index.
        let (indices, region) = rest.split_at(rest.len().min(32));
        overwrite(&mut map, RINGS_OFFSET + 512, &indices[..indices.len().min(8)]);
        if indices.len() > 8 {
            overwrite(&mut map, RINGS_OFFSET + 128, &indices[8..indices.len().min(16)]);
        }
        overwrite(&mut map, HEADER_SIZE + CAP, region);
        for _ in 0..64 {
            match creator.try_recv() {
                Ok(frame) => assert!(frame.len() <= 1 << 20),
                Err(shmlink::Error::Corrupt(_)) => {}
                Err(_) => break,
            }
        }
        let _ = creator.try_send(&[1; 100]);
    } else {
        // Connector: the header page's fields (after the magic, kept valid half of the time),
        // then ring 0's bytes.
        let keep_magic = mode & 2 != 0;
        let (head, region) = rest.split_at(rest.len().min(1200));
        let from = if keep_magic { 8 } else { 0 };
        // Skip the reserved gap so the fuzzer's bytes land on fields and ring indices.
        let (fields, rings) = head.split_at(head.len().min(400));
        overwrite(&mut map, from, fields);
        overwrite(&mut map, RINGS_OFFSET, rings);
        overwrite(&mut map, HEADER_SIZE, region);
        if let Ok(mut ch) = Channel::connect(&name, WaitStrategy::Spin) {
            ch.set_max_message(1 << 20);
            for _ in 0..64 {
                match ch.try_recv() {
                    Ok(frame) => assert!(frame.len() <= 1 << 20),
                    Err(shmlink::Error::Corrupt(_)) => {}
                    Err(_) => break,
                }
            }
            let _ = ch.try_send(&[2; 100]);
        }
    }
    drop(map);
    drop(creator);
});
