//! Model checks of the two synchronisation protocols, run under loom:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --lib loom
//! ```
//!
//! The models use the ring's own ordering constants (`PUBLISH`, `OBSERVE`, `RELEASE_SPACE`,
//! `RECLAIM`) and header encoding, and follow the step order of `Producer::publish`,
//! `Consumer::next_frame` and the handshake in `wait.rs`; weakening any ordering there makes a
//! model fail.

use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::ring::{encode, kind, OBSERVE, PUBLISH, RECLAIM, RELEASE_SPACE};

const SLOTS: usize = 3;
const MESSAGES: u64 = 4;
const FRAME: u64 = 16;

struct Model {
    headers: [AtomicU64; SLOTS],
    payloads: [AtomicU64; SLOTS],
    /// Messages the consumer has released.
    head: AtomicU64,
}

fn value(i: u64) -> u64 {
    0xA5A5_0000 + i
}

/// Frames are published with the payload first, the next header word zeroed, and the header
/// stored last; the consumer must see the payload of every header it sees, and the producer must
/// never overwrite a frame the consumer has not released.
#[test]
fn loom_publish_and_observe() {
    loom::model(|| {
        let m = Arc::new(Model {
            headers: Default::default(),
            payloads: Default::default(),
            head: AtomicU64::new(0),
        });
        let p = m.clone();
        let producer = thread::spawn(move || {
            for i in 0..MESSAGES {
                // Room check: frame i and the next header word need message i + 1 - SLOTS
                // released.
                while i + 2 > SLOTS as u64 + p.head.load(RECLAIM) {
                    thread::yield_now();
                }
                let slot = (i as usize) % SLOTS;
                p.payloads[slot].store(value(i), Ordering::Relaxed);
                p.headers[(slot + 1) % SLOTS].store(0, Ordering::Relaxed);
                p.headers[slot].store(encode(i * FRAME, kind::DATA, 8), PUBLISH);
            }
        });
        for i in 0..MESSAGES {
            let slot = (i as usize) % SLOTS;
            let word = loop {
                let w = m.headers[slot].load(OBSERVE);
                if w != 0 {
                    break w;
                }
                thread::yield_now();
            };
            assert_eq!(word, encode(i * FRAME, kind::DATA, 8), "stale header seen");
            assert_eq!(m.payloads[slot].load(Ordering::Relaxed), value(i));
            m.head.store(i + 1, RELEASE_SPACE);
        }
        producer.join().unwrap();
    });
}

/// The sleep/wake handshake of `wait.rs`: a sleeper that announces itself is always woken or
/// sees the data. A lost wake-up leaves the sleeper spinning forever, which loom reports.
#[test]
fn loom_sleep_and_wake() {
    loom::model(|| {
        let data = Arc::new(AtomicU32::new(0));
        let futex = Arc::new(AtomicU32::new(0));
        let sleepers = Arc::new(AtomicU32::new(0));
        let (d, f, s) = (data.clone(), futex.clone(), sleepers.clone());
        let waker = thread::spawn(move || {
            d.store(1, PUBLISH);
            // F2
            fence(Ordering::SeqCst);
            if s.load(Ordering::Relaxed) != 0 {
                f.fetch_add(1, Ordering::Release);
            }
        });
        // The sleeper, as in `wait::sleep`.
        let seen = futex.load(Ordering::Acquire);
        sleepers.fetch_add(1, Ordering::Relaxed);
        // F1
        fence(Ordering::SeqCst);
        if data.load(Ordering::Relaxed) == 0 {
            // futex_wait(futex, seen): returns once the word differs from `seen`.
            while futex.load(Ordering::Acquire) == seen {
                thread::yield_now();
            }
        }
        sleepers.fetch_sub(1, Ordering::Relaxed);
        assert_eq!(data.load(OBSERVE), 1);
        waker.join().unwrap();
    });
}
