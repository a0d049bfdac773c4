//! Model checks of the real ring (`shm/ring/`) and the real sleep/wake handshake
//! (`wait/handshake.rs`, as the blocking waits of `wait/waiter.rs`, a selector over several
//! words, its pool's threads (`service/pool.rs`), an async task and a selector's waker use it),
//! run under loom through the `sync` shim:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmlink --release --lib loom
//! ```
//!
//! Under loom a heap ring keeps its header words in loom atomics and guards every 8 bytes
//! of payload with a loom cell; its ends announce `Block` (so every publish and release goes
//! through the wake-up path) unless a model asks for `Spin`. Weakening an ordering in
//! `shm/ring/` or `wait/` (PUBLISH, OBSERVE, RELEASE_SPACE, RECLAIM, the fences F1/F2, the
//! Acquire load A of the futex word) makes a model fail: with a causality violation on a
//! payload, a wrong frame, or a waiter that is never woken (docs/testing.md lists which model
//! fails for which ordering). `LOOM_MAX_PREEMPTIONS` overrides the preemption bound (default 4).

use loom::sync::Arc;
use loom::thread;

use crate::error::{RecvError, SendError, WaitError};
use crate::shm::layout::{MODE_BLOCK, MODE_SPIN};
use crate::shm::ring::{self, Consumer, Producer};
use crate::sync::{AtomicU32, Ordering};
use crate::wait::{self, handshake, WaitStrategy, Waiter};

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
        crate::shm::ring::announce(MODE_SPIN);
        let (mut tx, mut rx) = ring::new(512).unwrap();
        crate::shm::ring::announce(MODE_BLOCK);
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
        crate::shm::ring::announce(MODE_SPIN);
        let (mut tx, mut rx) = ring::new(512).unwrap();
        crate::shm::ring::announce(MODE_BLOCK);
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

/// A peer that closes through `handshake::close`, as `Channel`'s drop does (state first, then
/// the unconditional wake-ups), ends the wait of a `Block` sleeper: with `Disconnected`, or
/// with the data sent before.
#[test]
fn loom_block_sleeper_is_woken_by_a_close() {
    model(|| {
        let (tx, rx) = ring::new(256).unwrap();
        let stand = open();
        let closed = stand.closed.clone();
        let closer = thread::spawn(move || {
            // As `Channel`'s drop closes: the state word (here the stand's), then both cells.
            handshake::close(&closed, 1, [tx.data_cell(), tx.space_cell()]);
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

/// A frame sent just before a close (`handshake::close`, as `Channel`'s drop makes it) is
/// delivered to a `Block` sleeper, however the close and the publish meet its sleep: the wait
/// ends with the frame, never with `Disconnected` alone.
#[test]
fn loom_a_frame_sent_before_a_close_is_delivered() {
    model(|| {
        let (mut tx, mut rx) = ring::new(256).unwrap();
        let stand = open();
        let closed = stand.closed.clone();
        let closer = thread::spawn(move || {
            send(&mut tx, b"last");
            handshake::close(&closed, 1, [tx.data_cell(), tx.space_cell()]);
            drop(tx);
        });
        let mut waiter = Waiter::new(WaitStrategy::Block);
        let cell = data_cell(&rx);
        let mut stand = stand;
        let r = waiter.wait_until(cell, None, || rx.has_data(), &mut stand);
        assert!(r.is_ok(), "the frame sent before the close was lost: {r:?}");
        expect(&mut rx, b"last");
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

/// A sleeper on several words at once, as a selector sleeps (`Selector::sleep`): steps 1 and 2
/// on every word (`announce_word`), one fence, one look at every ring (a peer gone counts as
/// ready, as the selector's `probe` says), `sleep_any`, then every sleeper withdrawn. Returns
/// the index of a ready ring.
fn select(
    cells: &[&crate::shm::layout::WaitCell],
    mut ready: impl FnMut() -> Option<usize>,
) -> usize {
    loop {
        if let Some(i) = ready() {
            return i;
        }
        let words: Vec<_> = cells.iter().map(|c| handshake::announce_word(c)).collect();
        handshake::fence();
        let found = ready();
        if found.is_none() {
            handshake::sleep_any(&words, None);
        }
        for cell in cells {
            handshake::withdraw(cell);
        }
        if let Some(i) = found {
            return i;
        }
    }
}

/// The address of a ring's data cell, for a model thread that also holds the ring's end.
fn data_cell(rx: &Consumer) -> &'static crate::shm::layout::WaitCell {
    let cell = rx.data_cell() as *const crate::shm::layout::WaitCell;
    // SAFETY: the cell is in the ring's storage, which the model keeps alive (through `rx`)
    // for as long as it uses the cell.
    unsafe { &*cell }
}

/// A selector's wait over two words: a frame published on either ring (here the second, then
/// the first) ends the sleep on both, and the sleeper counts are back to zero after.
#[test]
fn loom_a_sleep_on_several_words_is_woken_by_a_publish_on_any() {
    model(|| {
        let (mut tx0, mut rx0) = ring::new(256).unwrap();
        let (mut tx1, mut rx1) = ring::new(256).unwrap();
        let producer = thread::spawn(move || {
            send(&mut tx1, b"one");
            send(&mut tx0, b"zero");
        });
        let cells = [data_cell(&rx0), data_cell(&rx1)];
        let mut got = [false, false];
        while got != [true, true] {
            let i = select(&cells, || {
                [rx0.has_data(), rx1.has_data()]
                    .iter()
                    .zip(got)
                    .position(|(&has, done)| has && !done)
            });
            if i == 0 {
                expect(&mut rx0, b"zero");
            } else {
                expect(&mut rx1, b"one");
            }
            got[i] = true;
        }
        for cell in cells {
            assert_eq!(cell.sleepers.load(Ordering::Relaxed), 0);
        }
        producer.join().unwrap();
    });
}

/// A close through `handshake::close`, as `Channel`'s drop makes it, racing a selector's sleep
/// over two words ends it: the closed channel is found ready.
#[test]
fn loom_a_close_ends_a_sleep_on_several_words() {
    model(|| {
        let (tx0, rx0) = ring::new(256).unwrap();
        let (_tx1, rx1) = ring::new(256).unwrap();
        let stand = open();
        let closed = stand.closed.clone();
        let closer = thread::spawn(move || {
            // As `Channel`'s drop closes: the state word (here the stand's), then both cells.
            handshake::close(&closed, 1, [tx0.data_cell(), tx0.space_cell()]);
            drop(tx0);
        });
        let cells = [data_cell(&rx0), data_cell(&rx1)];
        let i = select(&cells, || {
            // Acquire: pairs with the Release store of the closer.
            (stand.closed.load(Ordering::Acquire) != 0 || rx0.has_data() || rx1.has_data())
                .then_some(0)
        });
        assert_eq!(i, 0);
        closer.join().unwrap();
    });
}

/// A selector's pool hands a word to a pool thread (`pool::hand`, `pool::serve`) and sleeps on
/// the pool's woken word: the pool thread, whichever way its loop meets the hand-off (before
/// it looked at its control word, or asleep on it), waits on the word, finds that it changed
/// (a wake-up the selector's look missed), reports it, and wakes the selector, which takes the
/// report; then the thread is stopped. (The race of a publish with the announcement is the
/// several-words model's; here the word changes before the hand-off, so that the model has
/// one sleeper at a time.)
#[test]
fn loom_a_pool_thread_reports_its_word_to_the_selector() {
    use crate::service::pool::{self, Fired, Slot};
    model(|| {
        let (_tx, rx) = ring::new(256).unwrap();
        let slot = Arc::new(Slot::default());
        let woken = Arc::new(AtomicU32::new(0));
        let server = {
            let (slot, woken) = (slot.clone(), woken.clone());
            thread::spawn(move || pool::serve(&slot, &woken))
        };
        let cell = data_cell(&rx);
        let word = handshake::announce_word(cell);
        handshake::fence();
        // The peer's close, after the selector read the word.
        handshake::wake(cell);
        // As `Selector::sleep` does: the pool's word read before the batch is handed over.
        let entry = pool::woken_entry(&woken);
        pool::hand(&slot, &[word]);
        handshake::sleep_any(&[entry], None);
        assert_eq!(
            pool::take_fired(&slot),
            Fired::Word(0),
            "woken without a report"
        );
        handshake::withdraw(cell);
        pool::stop(&slot);
        server.join().unwrap();
    });
}

/// An async task's side of a wait (`service/task.rs`, built only with tokio): each poll withdraws the announcement of the
/// last, reads the word and announces ([`handshake::Announced`]), fences and looks again, and
/// returns `Pending` with the word handed to a waiter (here: a sleep on it, as the reactor and
/// the task's futex ring compare the word with the value read). The publish wakes it.
#[test]
fn loom_an_async_task_is_woken_by_a_publish() {
    model(|| {
        let (mut tx, mut rx) = ring::new(256).unwrap();
        let producer = thread::spawn(move || send(&mut tx, b"ping"));
        let cell = data_cell(&rx);
        let mut sleeper = handshake::Announced::default();
        loop {
            sleeper.withdraw_from(cell);
            if rx.has_data() {
                break;
            }
            let seen = sleeper.announce(cell);
            if handshake::look_again(|| rx.has_data()) {
                continue;
            }
            // Pending: the reactor wakes the task once the word no longer holds `seen`.
            handshake::sleep_on(cell, seen, None);
        }
        assert_eq!(cell.sleepers.load(Ordering::Relaxed), 0);
        expect(&mut rx, b"ping");
        producer.join().unwrap();
    });
}

/// Timed slices that end (the sleep of a `Block` wait whose peer nobody watches ends every
/// slice without a wake-up): each slice announces and withdraws, the publish ends the wait
/// whichever slice it meets, and no sleeper stays counted.
#[test]
fn loom_a_wait_in_slices_that_end_sees_the_publish() {
    model(|| {
        let (mut tx, mut rx) = ring::new(256).unwrap();
        let producer = thread::spawn(move || send(&mut tx, b"ping"));
        crate::sync::slices_end(true);
        let mut waiter = Waiter::new(WaitStrategy::Block);
        let cell = data_cell(&rx);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        waiter
            .wait_until(cell, Some(deadline), || rx.has_data(), &mut open())
            .unwrap();
        crate::sync::slices_end(false);
        assert_eq!(cell.sleepers.load(Ordering::Relaxed), 0);
        expect(&mut rx, b"ping");
        producer.join().unwrap();
    });
}

/// A selector's waker (`WakeFlag`) raised while the selector goes to sleep on it and on a
/// channel's word that nobody wakes: the raise ends the sleep whenever it comes, before the
/// wait, between the first look and the sleep, or during it; and what the waking thread wrote
/// before it raised the flag is seen by the woken one.
#[test]
fn loom_a_wake_racing_the_sleep_ends_it() {
    model(|| {
        let (_tx, rx) = ring::new(256).unwrap();
        let flag = Arc::new(handshake::WakeFlag::default());
        let reason = Arc::new(AtomicU32::new(0));
        let waker = {
            let (flag, reason) = (flag.clone(), reason.clone());
            thread::spawn(move || {
                // Relaxed: published by the raise.
                reason.store(7, Ordering::Relaxed);
                flag.raise();
            })
        };
        let cell = data_cell(&rx);
        loop {
            if flag.take() {
                break;
            }
            let words = [flag.word(), handshake::announce_word(cell)];
            handshake::fence();
            if !rx.has_data() {
                handshake::sleep_any(&words, None);
            }
            handshake::withdraw(cell);
        }
        // Relaxed: ordered by the Acquire of `take`.
        assert_eq!(
            reason.load(Ordering::Relaxed),
            7,
            "the raise did not publish"
        );
        assert!(!flag.take(), "one raise ends one wait");
        waker.join().unwrap();
    });
}

/// A topic's table of one slot, and the publisher's proposal and position, as the topic's
/// protocol (`shm/topic/protocol.rs`) reads them.
struct OneSlot {
    state: AtomicU32,
    cursor: crate::sync::AtomicU64,
    proposal: crate::sync::AtomicU64,
    tail: crate::sync::AtomicU64,
}

impl crate::shm::topic::Cursors for OneSlot {
    fn slots(&self) -> usize {
        1
    }
    fn state(&self, _: usize) -> &AtomicU32 {
        &self.state
    }
    fn cursor(&self, _: usize) -> &crate::sync::AtomicU64 {
        &self.cursor
    }
}

/// The reclaim rule and the join: a subscriber that settles its cursor while the publisher
/// takes rounds is never passed by a floor (no round lets the publisher write over what it is
/// about to read), and is never taken for a hostile one. Without either fence of the join
/// (F-P, F-S) a round misses the joiner's cursor while the joiner misses the round's proposal.
#[test]
fn loom_topic_join_is_never_passed_by_a_floor() {
    use crate::shm::layout::topic::{state_of, SLOT_ACTIVE, SLOT_JOINING};
    use crate::shm::topic::{join, lossless_floor};
    model(|| {
        let t = Arc::new(OneSlot {
            state: AtomicU32::new(0),
            cursor: crate::sync::AtomicU64::new(0),
            proposal: crate::sync::AtomicU64::new(0),
            tail: crate::sync::AtomicU64::new(0),
        });
        let publisher = {
            let t = t.clone();
            thread::spawn(move || {
                let mut floor = 0;
                let mut floors = Vec::new();
                for tail in [8u64, 16] {
                    // Release: the position a joiner picks.
                    t.tail.store(tail, Ordering::Release);
                    floor = lossless_floor(&*t, &t.proposal, floor, tail, tail);
                    floors.push(floor);
                }
                floors
            })
        };
        // Relaxed and Release, as `Subscriber::connect_with` stores them.
        t.state.store(SLOT_JOINING, Ordering::Relaxed);
        // Acquire: pairs with the publisher's Release store of its position.
        let settled = join(
            &t.cursor,
            &t.proposal,
            |_| Some(t.tail.load(Ordering::Acquire)),
            2,
        );
        t.state.store(SLOT_ACTIVE, Ordering::Release);
        let floors = publisher.join().unwrap();
        if let Some(p) = settled {
            for f in floors {
                assert!(
                    f <= p,
                    "a floor of {f} passed a subscriber that settled at {p}"
                );
            }
            assert_eq!(
                state_of(t.state.load(Ordering::Acquire)),
                SLOT_ACTIVE,
                "an honest joiner was dropped"
            );
        }
    });
}

/// The overwrite check: a subscriber whose copy saw any byte the publisher wrote after its
/// claim finds the claim past where its message began. Without the fences (or with the claim
/// stored after the write) a stale copy passes the check.
#[test]
fn loom_topic_overwrite_check_catches_every_torn_copy() {
    use crate::shm::topic::{fresh, overwrite_claim};
    model(|| {
        let claim = Arc::new(crate::sync::AtomicU64::new(0));
        // One word of the message at index 0 of a 64-byte ring, as the subscriber copies it.
        let byte = Arc::new(crate::sync::AtomicU64::new(1));
        let publisher = {
            let (claim, byte) = (claim.clone(), byte.clone());
            thread::spawn(move || {
                // A frame ending at 72 overwrites index 0..16.
                let got = overwrite_claim(&claim, 0, 64, 72, 64);
                assert!(got >= 16);
                // Relaxed: ordered by the claim's fence.
                byte.store(2, Ordering::Relaxed);
            })
        };
        // Relaxed: the copy; judged by `fresh`.
        let copied = byte.load(Ordering::Relaxed);
        if fresh(&claim, 0) {
            assert_eq!(copied, 1, "a torn copy passed the check");
        }
        publisher.join().unwrap();
    });
}

/// The index's sequence lock: an entry read whole names a message and the bounds written for
/// it, never the bounds of another.
#[test]
fn loom_topic_index_entries_are_read_whole() {
    use crate::shm::layout::topic::IndexEntry;
    use crate::shm::topic::{index_read, index_write};
    model(|| {
        let entry = Arc::new(IndexEntry {
            seq: crate::sync::AtomicU64::new(0),
            start: crate::sync::AtomicU64::new(0),
            end: crate::sync::AtomicU64::new(0),
            _reserved: crate::sync::AtomicU64::new(0),
        });
        let publisher = {
            let entry = entry.clone();
            thread::spawn(move || {
                index_write(&entry, 0, 8, 16);
                index_write(&entry, 1, 24, 32);
            })
        };
        for _ in 0..2 {
            if let Some((seq, start, end)) = index_read(&entry) {
                let want = if seq == 0 { (8, 16) } else { (24, 32) };
                assert_eq!((start, end), want, "entry {seq} read torn");
            }
        }
        publisher.join().unwrap();
    });
}

/// A topic's wake-up: a reader asleep on a cell of its own with a `Block` waiter (its
/// position published before it waits), beside another reader's cell with nobody asleep on
/// it, against a writer that publishes once and wakes the readers through
/// `wait::wake_readers` with the topic's test (a reader whose position is at or past where
/// the publish began). The reader never sleeps through the publish; without F2 in
/// `handshake::after_publish` it does. (Two readers asleep at once are more interleavings
/// than the model's branch bound takes.)
#[test]
fn loom_topic_readers_are_each_woken_by_a_publish() {
    use crate::shm::layout::WaitCell;
    model(|| {
        let cell = || WaitCell {
            futex: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        };
        let cells = Arc::new([cell(), cell()]);
        let cursors = Arc::new([
            crate::sync::AtomicU64::new(0),
            crate::sync::AtomicU64::new(0),
        ]);
        let published = Arc::new(AtomicU32::new(0));
        let writer = {
            let (cells, cursors, published) = (cells.clone(), cursors.clone(), published.clone());
            thread::spawn(move || {
                // Release: the publish the reader looks for.
                published.store(1, Ordering::Release);
                let from = 8;
                wait::wake_readers(|wake| {
                    for (cell, cursor) in cells.iter().zip(cursors.iter()) {
                        // Relaxed: ordered by F2, as the topic's gate loads it.
                        wake(cell, &mut || cursor.load(Ordering::Relaxed) >= from);
                    }
                });
            })
        };
        // Relaxed: its position, published before it waits (ordered by F1).
        cursors[1].store(8, Ordering::Relaxed);
        Waiter::new(WaitStrategy::Block)
            .wait_until(
                &cells[1],
                None,
                || published.load(Ordering::Acquire) != 0,
                &mut open(),
            )
            .unwrap();
        writer.join().unwrap();
    });
}
