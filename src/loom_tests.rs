//! Model checks of the real ring (`ring/`) and the real sleep/wake handshake (`wait/waiter.rs`),
//! run under loom through the `sync` shim:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmlink --release --lib loom
//! ```
//!
//! Under loom a heap ring keeps its header words in loom atomics and guards every line of
//! payload with a loom cell; its ends announce `Block` (so every publish and release goes
//! through the wake-up path) unless a model asks for `Spin`. Weakening an ordering in `ring/` or `wait/` (PUBLISH, OBSERVE,
//! RELEASE_SPACE, RECLAIM, the fences F1/F2, the Acquire load of the futex word) makes a model
//! fail: with a causality violation on a payload line, a wrong frame, or a waiter that is never
//! woken. `LOOM_MAX_PREEMPTIONS` overrides the preemption bound (default 4).

use loom::sync::Arc;
use loom::thread;

use crate::error::{RecvError, SendError, WaitError};
use crate::layout::{MODE_BLOCK, MODE_SPIN};
use crate::ring::{self, Consumer, Producer};
use crate::sync::{AtomicU32, Ordering};
use crate::wait::{self, WaitStrategy, Waiter};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    builder.check(f);
}

/// The other endpoint as a waiter sees it: closed once `closed` is non-zero (stored with
/// Release before the closing wake-up, as `Channel::drop` stores its state).
struct Stand {
    closed: Arc<AtomicU32>,
}

impl wait::Peer for Stand {
    fn check(&mut self, _process: bool) -> Result<(), WaitError> {
        // Acquire: pairs with the Release store of the closing side.
        if self.closed.load(Ordering::Acquire) != 0 {
            Err(WaitError::Disconnected {
                channel: "loom".into(),
            })
        } else {
            Ok(())
        }
    }

    fn channel(&self) -> crate::error::ChannelName {
        "loom".into()
    }

    fn process(&mut self) -> Option<(u32, u64)> {
        None
    }

    fn holds_end(&self) -> crate::sys::HoldsEnd {
        Box::new(|| true)
    }
}

fn open() -> Stand {
    Stand {
        closed: Arc::new(AtomicU32::new(0)),
    }
}

fn message(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 7 + j) as u8).collect()
}

fn send(tx: &mut Producer, data: &[u8]) {
    loop {
        match tx.try_send(data) {
            Ok(()) => return,
            Err(SendError::Full { .. }) => thread::yield_now(),
            Err(e) => panic!("send: {e}"),
        }
    }
}

fn expect(rx: &mut Consumer, data: &[u8]) {
    loop {
        match rx.try_read() {
            Ok(frame) => {
                assert_eq!(&*frame, data, "wrong frame");
                return;
            }
            Err(RecvError::Empty { .. }) => thread::yield_now(),
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// The largest payload a 512-byte ring takes: three such frames do not fit in one lap.
const BIG: usize = 184;

/// Three `BIG` frames through a 512-byte ring: the third needs a PAD and reuses the space of
/// the first, so publishing, observing, releasing and reclaiming are all exercised. Both ends
/// spin (no wake-up path, so no SeqCst fence helps the ring's own orderings).
#[test]
fn loom_frames_cross_and_space_comes_back() {
    model(|| {
        crate::ring::announce(MODE_SPIN);
        let (mut tx, mut rx) = ring::new(512).unwrap();
        crate::ring::announce(MODE_BLOCK);
        let producer = thread::spawn(move || {
            for i in 0..3 {
                send(&mut tx, &message(i, BIG));
            }
        });
        for i in 0..3 {
            expect(&mut rx, &message(i, BIG));
        }
        producer.join().unwrap();
    });
}

/// Batches through a 512-byte ring: the first has a SKIP inside it (two 40-byte messages would
/// straddle a line), the second a PAD in front of its last message, which reuses the space of
/// the first batch. Every word of a batch is published by its first one, stored last; the
/// consumer reads in batches and gives their space back once. Both ends spin.
#[test]
fn loom_batches_cross_and_space_comes_back() {
    model(|| {
        crate::ring::announce(MODE_SPIN);
        let (mut tx, mut rx) = ring::new(512).unwrap();
        crate::ring::announce(MODE_BLOCK);
        let all: Vec<Vec<u8>> = [40, 40, BIG, BIG, 40]
            .iter()
            .enumerate()
            .map(|(i, &len)| message(i, len))
            .collect();
        let want = all.clone();
        let producer = thread::spawn(move || {
            for batch in [&all[..3], &all[3..]] {
                let mut sent = 0;
                while sent < batch.len() {
                    match tx.try_send_batch(&batch[sent..]) {
                        Ok(n) => sent += n,
                        Err(SendError::Full { .. }) => thread::yield_now(),
                        Err(e) => panic!("send: {e}"),
                    }
                }
            }
        });
        let mut got = 0;
        while got < want.len() {
            let check = |msg: &[u8]| {
                assert_eq!(msg, &want[got][..], "wrong frame");
                got += 1;
            };
            match rx.try_read_batch(2, check) {
                Ok(_) => {}
                Err(RecvError::Empty { .. }) => thread::yield_now(),
                Err(e) => panic!("read: {e}"),
            }
        }
        producer.join().unwrap();
    });
}

/// A `Block` consumer that finds the ring empty sleeps, and the producer's publish wakes it.
#[test]
fn loom_block_consumer_is_woken_by_a_publish() {
    model(|| {
        let (mut tx, mut rx) = ring::new(256).unwrap();
        let producer = thread::spawn(move || send(&mut tx, b"ping"));
        let mut waiter = Waiter::new(WaitStrategy::Block);
        let cell = rx.data_cell() as *const _;
        // SAFETY: the cell is in the ring's storage, which `rx` keeps alive.
        let cell = unsafe { &*cell };
        waiter
            .wait_until(cell, None, || rx.has_data(), &mut open())
            .unwrap();
        expect(&mut rx, b"ping");
        producer.join().unwrap();
    });
}

/// Waits for room on `tx` with a `Block` waiter and sends `data`.
fn block_send(tx: &mut Producer, data: &[u8]) {
    let mut waiter = Waiter::new(WaitStrategy::Block);
    let cell = tx.space_cell() as *const _;
    // SAFETY: the cell is in the ring's storage, which `tx` keeps alive.
    let cell = unsafe { &*cell };
    waiter
        .wait_until(cell, None, || tx.has_room(data.len()).unwrap(), &mut open())
        .unwrap();
    tx.try_send(data).unwrap();
}

/// A `Block` producer that finds the ring full sleeps, and the consumer's release wakes it.
#[test]
fn loom_block_producer_is_woken_by_a_release() {
    model(|| {
        let (mut tx, mut rx) = ring::new(256).unwrap();
        // 256 bytes hold three 64-byte frames and the next header word.
        for i in 0..3 {
            tx.try_send(&message(i, 56)).unwrap();
        }
        assert!(matches!(
            tx.try_send(&message(3, 56)),
            Err(SendError::Full { .. })
        ));
        let consumer = thread::spawn(move || expect(&mut rx, &message(0, 56)));
        block_send(&mut tx, &message(3, 56));
        consumer.join().unwrap();
    });
}

/// A consumer that holds back the space of what it read (here all of it, as if the batch never
/// filled) gives it back once it has read the last frame published, before it sleeps: a `Block`
/// producer asleep for that space is woken, and its frame reaches the consumer.
#[test]
fn loom_held_back_space_reaches_a_sleeping_producer() {
    model(|| {
        let (mut tx, mut rx) = ring::new(256).unwrap();
        rx.hold_back();
        for i in 0..3 {
            tx.try_send(&message(i, 56)).unwrap();
        }
        let consumer = thread::spawn(move || {
            for i in 0..3 {
                expect(&mut rx, &message(i, 56));
            }
            let mut waiter = Waiter::new(WaitStrategy::Block);
            block_recv(&mut waiter, &mut rx, &message(3, 56));
        });
        block_send(&mut tx, &message(3, 56));
        consumer.join().unwrap();
    });
}

/// A peer that closes (state first, then the unconditional wake-up, as `Channel::drop` does)
/// ends the wait of a `Block` sleeper: with `Disconnected`, or with the data sent before.
#[test]
fn loom_block_sleeper_is_woken_by_a_close() {
    model(|| {
        let (tx, rx) = ring::new(256).unwrap();
        let stand = open();
        let closed = stand.closed.clone();
        let closer = thread::spawn(move || {
            // Release: pairs with the Acquire load in `Stand::check`.
            closed.store(1, Ordering::Release);
            wait::wake(tx.data_cell());
            drop(tx);
        });
        let mut waiter = Waiter::new(WaitStrategy::Block);
        let cell = rx.data_cell() as *const _;
        // SAFETY: the cell is in the ring's storage, which `rx` keeps alive.
        let cell = unsafe { &*cell };
        let mut stand = stand;
        let r = waiter.wait_until(cell, None, || rx.has_data(), &mut stand);
        assert!(matches!(r, Err(WaitError::Disconnected { .. })), "{r:?}");
        closer.join().unwrap();
    });
}

/// Waits on `rx` with a `Block` waiter and reads `data`.
fn block_recv(waiter: &mut Waiter, rx: &mut Consumer, data: &[u8]) {
    let cell = rx.data_cell() as *const _;
    // SAFETY: the cell is in the ring's storage, which `rx` keeps alive.
    let cell = unsafe { &*cell };
    waiter
        .wait_until(cell, None, || rx.has_data(), &mut open())
        .unwrap();
    expect(rx, data);
}

/// A ping-pong between two `Block` endpoints over two rings: each side publishes, then sleeps
/// until the other answers.
#[test]
fn loom_block_ping_pong() {
    model(|| {
        let (mut ping_tx, mut ping_rx) = ring::new(256).unwrap();
        let (mut pong_tx, mut pong_rx) = ring::new(256).unwrap();
        let server = thread::spawn(move || {
            let mut waiter = Waiter::new(WaitStrategy::Block);
            block_recv(&mut waiter, &mut ping_rx, b"ping");
            send(&mut pong_tx, b"pong");
        });
        let mut waiter = Waiter::new(WaitStrategy::Block);
        send(&mut ping_tx, b"ping");
        block_recv(&mut waiter, &mut pong_rx, b"pong");
        server.join().unwrap();
    });
}

/// A `Block` consumer waits for each of three `BIG` frames through a 512-byte ring. The
/// third goes back to the start of the region behind a PAD, which is published with it on
/// commit: the one wake-up of that commit must bring the consumer past both.
#[test]
fn loom_block_consumer_follows_a_pad() {
    model(|| {
        let (mut tx, mut rx) = ring::new(512).unwrap();
        let producer = thread::spawn(move || {
            for i in 0..3 {
                send(&mut tx, &message(i, BIG));
            }
        });
        let mut waiter = Waiter::new(WaitStrategy::Block);
        for i in 0..3 {
            block_recv(&mut waiter, &mut rx, &message(i, BIG));
        }
        producer.join().unwrap();
    });
}
