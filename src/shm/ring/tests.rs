//! The ring's unit and property tests, on heap memory.

use super::producer::ProducerState;
use super::*;
use crate::error::{RecvError, SendError};
use crate::sync::Ordering;
use proptest::prelude::*;
use std::collections::VecDeque;

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed * 31 + i * 7) as u8).collect()
}

/// A ring whose positions have been advanced by `offset` bytes (a multiple of 8).
fn ring_at(capacity: usize, offset: usize) -> (Producer, Consumer) {
    let (mut tx, mut rx) = new(capacity).unwrap();
    for _ in 0..offset / FRAME_ALIGN {
        tx.try_send(&[]).unwrap();
        drop(rx.try_read().unwrap());
    }
    (tx, rx)
}

#[test]
fn fill_and_drain_in_order() {
    let (mut tx, mut rx) = new(4096).unwrap();
    for round in 0..5 {
        let mut sent = 0;
        loop {
            match tx.try_send(&pattern(round * 1000 + sent, 120)) {
                Ok(()) => sent += 1,
                Err(SendError::Full { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        // 4096 bytes, 128-byte frames, 8 bytes kept for the next header word.
        assert_eq!(sent, 4096 / frame_size(120) - 1, "frames that fit");
        for i in 0..sent {
            let frame = rx.try_read().unwrap();
            assert_eq!(&*frame, &pattern(round * 1000 + i, 120)[..]);
        }
        assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
    }
}

#[test]
fn every_length_at_every_wrap_offset() {
    for capacity in [256usize, 512] {
        let max = max_payload(capacity);
        for offset in (0..capacity).step_by(FRAME_ALIGN) {
            for len in 0..=max {
                let (mut tx, mut rx) = ring_at(capacity, offset);
                let data = pattern(offset + len, len);
                tx.try_send(&data).unwrap();
                // A second frame right behind it, so the next-position bookkeeping is used.
                tx.try_send(b"next").unwrap();
                assert_eq!(
                    &*rx.try_read().unwrap(),
                    &data[..],
                    "offset {offset} len {len}"
                );
                assert_eq!(&*rx.try_read().unwrap(), b"next");
                assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
            }
        }
    }
}

#[test]
fn full_is_not_never_fits() {
    let (mut tx, mut rx) = new(1024).unwrap();
    let max = tx.max_len();
    assert_eq!(max, 1024 / 2 - 72);
    assert!(matches!(
        tx.try_reserve(max + 1),
        Err(SendError::TooLarge { len, max: m, .. }) if len == max + 1 && m == max
    ));
    tx.try_send(&vec![1; max]).unwrap();
    tx.try_send(&vec![2; max]).unwrap();
    assert!(matches!(tx.try_reserve(max), Err(SendError::Full { .. })));
    assert!(matches!(tx.try_reserve(200), Err(SendError::Full { .. })));
    // Never-fits stays never-fits when full, too.
    assert!(matches!(
        tx.try_reserve(max + 1),
        Err(SendError::TooLarge { .. })
    ));
    assert_eq!(&*rx.try_read().unwrap(), &vec![1; max][..]);
    assert_eq!(&*rx.try_read().unwrap(), &vec![2; max][..]);
    // After a full drain a maximal frame always fits, wherever the ring stands.
    tx.try_send(&vec![3; max]).unwrap();
    assert_eq!(&*rx.try_read().unwrap(), &vec![3; max][..]);
}

fn fill(tx: &mut Producer, len: usize) {
    loop {
        match tx.try_send(&vec![0; len]) {
            Ok(()) => {}
            Err(SendError::Full { .. }) => return,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn dropping_a_grant_aborts_it() {
    let (mut tx, mut rx) = new(256).unwrap();
    {
        let mut grant = tx.try_reserve(40).unwrap();
        grant.fill(0xAB);
    }
    assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
    let mut grant = tx.try_reserve(40).unwrap();
    grant[..3].copy_from_slice(b"abc");
    grant.commit(3);
    assert_eq!(&*rx.try_read().unwrap(), b"abc");
    // Aborting a grant that needed a wrap leaves a consistent ring too.
    let (mut tx, mut rx) = new(1024).unwrap();
    for _ in 0..20 {
        drop(tx.try_reserve(300).unwrap());
        tx.try_send(&[9; 100]).unwrap();
        assert_eq!(&*rx.try_read().unwrap(), &[9; 100]);
    }
}

#[test]
fn a_lightly_used_large_ring_rewinds_and_a_busy_one_does_not() {
    let capacity = 1 << 20;
    // Empty at every send: the producer comes back to the start of the region each lap.
    let (mut tx, mut rx) = new(capacity).unwrap();
    let mut furthest = 0;
    for i in 0..20_000 {
        let data = pattern(i, 1000);
        tx.try_send(&data).unwrap();
        furthest = furthest.max(tx.state.tail & tx.state.mask);
        assert_eq!(&*rx.try_read().unwrap(), &data[..]);
        // A receiver goes back for the next message and finds none.
        assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
    }
    assert!(
        tx.state.tail > 16 * capacity as u64,
        "the traffic went around many laps"
    );
    assert!(
        furthest < REWIND_AT + 2 * frame_size(1000) as u64,
        "furthest position {furthest}"
    );
    // Eight frames in flight: never empty when the producer looks, so it uses the whole ring.
    let (mut tx, mut rx) = new(capacity).unwrap();
    let mut furthest = 0;
    for i in 0..20_000 {
        tx.try_send(&pattern(i, 1000)).unwrap();
        furthest = furthest.max(tx.state.tail & tx.state.mask);
        if i >= 8 {
            assert_eq!(&*rx.try_read().unwrap(), &pattern(i - 8, 1000)[..]);
        }
    }
    assert!(
        furthest > capacity as u64 / 2,
        "furthest position {furthest}"
    );
}

/// A producer that writes a frame each time the consumer reads one (from inside the batch's
/// own callback: a stream that never runs dry) cannot keep a batch read going: it hands at
/// most a ring's worth of frames and returns.
#[test]
fn a_batch_read_takes_at_most_a_ring_while_the_producer_keeps_writing() {
    let capacity = 4096;
    let (mut tx, mut rx) = new(capacity).unwrap();
    while tx.try_send(&[1]).is_ok() {}
    let mut written = 0u64;
    let handed = rx
        .try_read_batch(usize::MAX, |_| {
            // Bounded, so that a read that never stops still ends (and fails below).
            if written < 1_000_000 && tx.try_send(&[1]).is_ok() {
                written += 1;
            }
        })
        .unwrap();
    assert!(written > 0, "the producer found room while the batch read");
    assert!(
        handed <= capacity / frame_size(1) + 1,
        "one batch read handed {handed} frames of a ring of {} ({written} written meanwhile)",
        capacity / frame_size(1)
    );
}

#[test]
fn a_lightly_used_large_ring_rewinds_under_batches_too() {
    let capacity = 1 << 20;
    let (mut tx, mut rx) = new(capacity).unwrap();
    let mut furthest = 0;
    for i in 0..5_000 {
        let batch: Vec<Vec<u8>> = (0..4).map(|k| pattern(4 * i + k, 1000)).collect();
        assert_eq!(tx.try_send_batch(&batch).unwrap(), 4);
        furthest = furthest.max(tx.state.tail & tx.state.mask);
        let mut got = Vec::new();
        assert_eq!(rx.try_read_batch(8, |m| got.push(m.to_vec())).unwrap(), 4);
        assert!(got == batch);
    }
    assert!(tx.state.tail > 16 * capacity as u64, "many laps");
    assert!(
        furthest < REWIND_AT + 8 * frame_size(1000) as u64,
        "furthest position {furthest}"
    );
}

/// Whether a consumer that announced its sleep is left asleep with something to read: a header
/// word at its position, and no wake-up since `woken` (the futex word when it went to sleep).
fn left_asleep(rx: &Consumer, woken: u32) -> bool {
    rx.has_data() && rx.data_cell().futex.load(Ordering::Relaxed) == woken
}

/// A consumer that may sleep (`Block`) is woken for everything it can see. Past the rewind point
/// with everything read, a grant for a small frame goes back to the start of the region, behind
/// a PAD; it is dropped (as `send_json` drops a grant its value overflows). If that published the
/// PAD without a wake-up, the consumer would sleep in front of it, and a maximal frame, which
/// fits only once the consumer has skipped the PAD, would wait for ever.
#[test]
fn a_dropped_grant_never_leaves_a_sleeping_consumer_behind_a_pad() {
    let capacity = 1 << 20;
    let (mut tx, mut rx) = new(capacity).unwrap();
    // The consumer announces `Block`: the producer must wake it.
    // SAFETY: the mode word is in the ring's allocation, alive as long as `tx`; it is atomic.
    unsafe { tx.state.ptrs.peer_mode.as_ref() }
        .store(crate::shm::layout::MODE_BLOCK, Ordering::Relaxed);
    let place = pattern(1, 200_000);
    tx.try_send(&place).unwrap();
    assert!(tx.state.tail & tx.state.mask >= REWIND_AT && tx.state.tail >= tx.state.next_rewind);
    assert_eq!(&*rx.try_read().unwrap(), &place[..]);
    // The consumer goes to sleep, as `wait` does: sleepers first, then the futex word.
    rx.data_cell().sleepers.store(1, Ordering::Relaxed);
    let woken = rx.data_cell().futex.load(Ordering::Relaxed);

    drop(tx.try_reserve(256).unwrap());
    assert!(
        !left_asleep(&rx, woken),
        "a dropped grant published something without waking the consumer"
    );
    // After a full drain a maximal frame fits, however the last grant was placed.
    let max = tx.max_len();
    let mut grant = tx.try_reserve(max).expect("room for a maximal frame");
    grant.fill(7);
    grant.commit(max);
    assert!(
        !left_asleep(&rx, woken),
        "a commit did not wake the consumer"
    );
    assert_ne!(rx.data_cell().futex.load(Ordering::Relaxed), woken);

    rx.data_cell().sleepers.store(0, Ordering::Relaxed);
    assert_eq!(&*rx.try_read().unwrap(), &vec![7; max][..]);
    assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
    // The same after a grant that did not fit before the end of the region, dropped: the next
    // frame still goes where the consumer finds it.
    let (mut tx, mut rx) = ring_at(1024, 1024 - 128);
    drop(tx.try_reserve(300).unwrap());
    assert!(!rx.has_data());
    tx.try_send(&[5; 100]).unwrap();
    assert_eq!(&*rx.try_read().unwrap(), &[5; 100]);
    tx.try_send(&[6; 400]).unwrap();
    assert_eq!(&*rx.try_read().unwrap(), &[6; 400]);
}

/// A producer wakes a sleeping consumer once per sleep: for the frame it sleeps in front of,
/// not again for the frames behind it, and again once the consumer has read them and sleeps
/// anew, also when the frame it sleeps in front of is a SKIP that the commit publishes.
#[test]
fn a_producer_wakes_a_sleeping_consumer_once_per_sleep() {
    let (mut tx, mut rx) = new(64 * 1024).unwrap();
    // SAFETY: as in `a_dropped_grant_never_leaves_a_sleeping_consumer_behind_a_pad`.
    unsafe { tx.state.ptrs.peer_mode.as_ref() }
        .store(crate::shm::layout::MODE_BLOCK, Ordering::Relaxed);
    let futex = |rx: &Consumer| rx.data_cell().futex.load(Ordering::Relaxed);
    assert!(!rx.has_data());
    // The consumer goes to sleep in front of the first frame.
    rx.data_cell().sleepers.store(1, Ordering::Relaxed);
    let asleep = futex(&rx);
    tx.try_send(&[1; 8]).unwrap();
    let woken = futex(&rx);
    assert_ne!(woken, asleep, "the frame it sleeps in front of wakes it");
    tx.try_send(&[2; 8]).unwrap();
    assert_eq!(futex(&rx), woken, "woken already: no wake-up per frame");
    assert_eq!(&*rx.try_read().unwrap(), &[1; 8]);
    assert_eq!(&*rx.try_read().unwrap(), &[2; 8]);
    assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
    // Asleep again, now in front of a frame that straddles a line, so its commit publishes a
    // SKIP where the consumer is and the frame at the next line.
    let asleep = futex(&rx);
    assert_ne!(tx.state.tail % LINE as u64, 0);
    tx.try_send(&[3; 56]).unwrap();
    assert_ne!(
        futex(&rx),
        asleep,
        "a SKIP in front of the consumer wakes it"
    );
    rx.data_cell().sleepers.store(0, Ordering::Relaxed);
    assert_eq!(&*rx.try_read().unwrap(), &[3; 56]);
}

/// While the producer sleeps for room, the consumer gives space back a quarter of the ring at a
/// time (each publication of its index wakes the producer), else a batch at a time; and all of
/// it once it reaches the last frame.
#[test]
fn a_consumer_gives_a_sleeping_producer_room_a_quarter_ring_at_a_time() {
    let capacity = 64 * 1024;
    for asleep in [false, true] {
        let (mut tx, mut rx) = new(capacity).unwrap();
        let frames = 2 * capacity / 4 / 128;
        for i in 0..frames {
            tx.try_send(&pattern(i, 120)).unwrap();
        }
        rx.space_cell()
            .sleepers
            .store(u32::from(asleep), Ordering::Relaxed);
        let published = |rx: &Consumer| rx.state.ptrs.header().head.load(Ordering::Relaxed);
        let mut steps = vec![0];
        for i in 0..frames {
            assert_eq!(&*rx.try_read().unwrap(), &pattern(i, 120)[..]);
            if steps.last() != Some(&published(&rx)) {
                steps.push(published(&rx));
            }
        }
        let step = if asleep {
            capacity as u64 / 4
        } else {
            rx.state.batch
        };
        let expected: Vec<u64> = (0..).map(|n| n * step).take(steps.len()).collect();
        assert_eq!(steps, expected, "asleep: {asleep}");
        assert_eq!(
            published(&rx),
            (frames * 128) as u64,
            "all of it at the last frame"
        );
    }
}

#[test]
fn a_grant_over_the_word_zeroed_ahead_leaves_no_false_frame() {
    // A 56-byte message fills the line [0, 64) and its publish zeroes the header word at 128,
    // where a next frame of its size ends, so that the next publish finds that zero in place.
    // A grant written over that word, then dropped or committed shorter, must not leave what
    // it wrote there for the consumer to take as a frame.
    for commit in [false, true] {
        let (mut tx, mut rx) = new(1024).unwrap();
        tx.try_send(&[1; 56]).unwrap();
        assert_eq!(&*rx.try_read().unwrap(), &[1; 56]);
        let mut grant = tx.try_reserve(120).unwrap();
        grant.fill(0xEE);
        // The payload starts at 72: bytes 56..64 of the grant are the word at 128.
        grant[56..64].copy_from_slice(&encode(128, kind::DATA, 8).to_le_bytes());
        let expected = if commit {
            grant.commit(56);
            [0xEE; 56]
        } else {
            drop(grant);
            tx.try_send(&[2; 56]).unwrap();
            [2; 56]
        };
        assert_eq!(&*rx.try_read().unwrap(), &expected, "commit {commit}");
        assert!(
            matches!(rx.try_read(), Err(RecvError::Empty { .. })),
            "commit {commit}: a frame past the last one sent"
        );
    }
}

#[test]
fn commit_clamps_to_the_grant() {
    let (mut tx, mut rx) = new(256).unwrap();
    let grant = tx.try_reserve(4).unwrap();
    grant.commit(1000);
    assert_eq!(rx.try_read().unwrap().len(), 4);
}

#[derive(Debug, Clone)]
enum Op {
    Send(usize),
    Read,
    Reserve(usize, usize),
    SendBatch(Vec<usize>),
    ReadBatch(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..200).prop_map(Op::Send),
        Just(Op::Read),
        (0usize..200, 0usize..250).prop_map(|(l, u)| Op::Reserve(l, u)),
        proptest::collection::vec(0usize..120, 0..12).prop_map(Op::SendBatch),
        (0usize..12).prop_map(Op::ReadBatch),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 256 }))]
    #[test]
    fn matches_a_vecdeque_model(ops in proptest::collection::vec(op(), 1..400)) {
        let (mut tx, mut rx) = new(512).unwrap();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        let mut seed = 0usize;
        for op in ops {
            match op {
                Op::Send(len) | Op::Reserve(len, _) if len > tx.max_len() => {
                    let too_large = matches!(tx.try_reserve(len), Err(SendError::TooLarge { .. }));
                    prop_assert!(too_large);
                }
                Op::Send(len) => {
                    seed += 1;
                    let data = pattern(seed, len);
                    match tx.try_send(&data) {
                        Ok(()) => model.push_back(data),
                        Err(SendError::Full { .. }) => prop_assert!(!model.is_empty(), "full while empty"),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Reserve(len, used) => {
                    seed += 1;
                    match tx.try_reserve(len) {
                        Ok(mut grant) => {
                            let data = pattern(seed, len);
                            grant.copy_from_slice(&data);
                            let used = used.min(len);
                            grant.commit(used);
                            model.push_back(data[..used].to_vec());
                        }
                        Err(SendError::Full { .. }) => prop_assert!(!model.is_empty(), "full while empty"),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::SendBatch(lens) => {
                    let batch: Vec<Vec<u8>> = lens
                        .iter()
                        .map(|&len| {
                            seed += 1;
                            pattern(seed, len)
                        })
                        .collect();
                    match tx.try_send_batch(&batch) {
                        Ok(n) => {
                            prop_assert!(n <= batch.len() && (n > 0 || batch.is_empty()));
                            model.extend(batch.into_iter().take(n));
                        }
                        Err(SendError::Full { .. }) => prop_assert!(!model.is_empty(), "full while empty"),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::ReadBatch(max) => {
                    let mut got = Vec::new();
                    match rx.try_read_batch(max, |msg| got.push(msg.to_vec())) {
                        Ok(n) => {
                            prop_assert_eq!(n, got.len());
                            prop_assert!(n <= max && (n > 0 || max == 0));
                            for msg in got {
                                prop_assert_eq!(Some(msg), model.pop_front());
                            }
                        }
                        Err(RecvError::Empty { .. }) => prop_assert!(model.is_empty() && max > 0),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Read => match rx.try_read() {
                    Ok(frame) => {
                        let expected = model.pop_front();
                        prop_assert_eq!(Some(&frame[..]), expected.as_deref());
                    }
                    Err(RecvError::Empty { .. }) => prop_assert!(model.is_empty()),
                    Err(e) => prop_assert!(false, "unexpected {e}"),
                },
            }
        }
        while let Some(expected) = model.pop_front() {
            let frame = rx.try_read().unwrap();
            prop_assert_eq!(&frame[..], &expected[..]);
        }
        prop_assert!(
            matches!(rx.try_read(), Err(RecvError::Empty { .. })),
            "the ring is not empty once the model is"
        );
    }
}

fn corrupt_head_word(rx: &Consumer, word: u64) {
    rx.state
        .ptrs
        .word((rx.state.head & rx.state.mask) as usize)
        .store(word, Ordering::Relaxed);
}

#[test]
fn hostile_frame_headers_are_corrupt_errors() {
    type Forge = Box<dyn Fn(u64) -> u64>;
    let cases: Vec<(&str, Forge)> = vec![
        ("wrong tag", Box::new(|idx| encode(idx + 64, kind::DATA, 4))),
        (
            "skip at a line boundary",
            Box::new(|idx| encode(idx, kind::SKIP, 0)),
        ),
        (
            "skip with a length",
            Box::new(|idx| encode(idx, kind::SKIP, 4)),
        ),
        ("kind zero", Box::new(|idx| encode(idx, 0, 4))),
        (
            "length past max",
            Box::new(|idx| encode(idx, kind::DATA, 1000)),
        ),
        (
            "length u32::MAX",
            Box::new(|idx| encode(idx, kind::DATA, u32::MAX)),
        ),
    ];
    for (what, word) in cases {
        for offset in [0usize, 64, 128, 192] {
            let (_tx, mut rx) = ring_at(256, offset);
            corrupt_head_word(&rx, word(rx.state.head));
            for _ in 0..3 {
                assert!(
                    matches!(rx.try_read(), Err(RecvError::Corrupt { .. })),
                    "{what} at {offset} accepted"
                );
            }
        }
    }
    // A frame that fits by length but would run past the end of the region.
    let (_tx, mut rx) = ring_at(1024, 960);
    corrupt_head_word(&rx, encode(rx.state.head, kind::DATA, 200));
    assert!(matches!(rx.try_read(), Err(RecvError::Corrupt { .. })));
    // Longer than a frame may be, though it would end inside the region.
    let (_tx, mut rx) = ring_at(1024, 0);
    let len = max_payload(1024) + 8;
    assert!(frame_size(len) < 1024);
    corrupt_head_word(&rx, encode(rx.state.head, kind::DATA, len as u32));
    assert!(matches!(rx.try_read(), Err(RecvError::Corrupt { .. })));
    // A PAD at offset 0 would skip a whole lap.
    let (_tx, mut rx) = ring_at(256, 0);
    corrupt_head_word(&rx, encode(rx.state.head, kind::PAD, 0));
    assert!(matches!(rx.try_read(), Err(RecvError::Corrupt { .. })));
}

#[test]
fn hostile_consumer_index_is_a_corrupt_error() {
    // Jumps past the producer.
    let (mut tx, rx) = new(256).unwrap();
    fill(&mut tx, 40);
    rx.state.ptrs.header().head.store(10_048, Ordering::Relaxed);
    assert!(matches!(
        tx.try_send(&[0; 40]),
        Err(SendError::Corrupt { .. })
    ));
    // Moves backwards.
    let (mut tx, mut rx) = new(256).unwrap();
    for _ in 0..3 {
        tx.try_send(&[0; 40]).unwrap();
        drop(rx.try_read().unwrap());
    }
    fill(&mut tx, 40);
    rx.state.ptrs.header().head.store(64, Ordering::Relaxed);
    assert!(matches!(
        tx.try_send(&[0; 40]),
        Err(SendError::Corrupt { .. })
    ));
    // Misaligned.
    let (mut tx, rx) = new(256).unwrap();
    fill(&mut tx, 40);
    rx.state.ptrs.header().head.store(12, Ordering::Relaxed);
    assert!(matches!(
        tx.try_send(&[0; 40]),
        Err(SendError::Corrupt { .. })
    ));
}

#[test]
fn threads_move_a_million_frames() {
    let n: u32 = if cfg!(miri) { 200 } else { 1_000_000 };
    let (mut tx, mut rx) = new(4096).unwrap();
    let t = std::thread::spawn(move || {
        for i in 0..n {
            let len = (i % 61) as usize;
            loop {
                match tx.try_reserve(len + 4) {
                    Ok(mut g) => {
                        g[..4].copy_from_slice(&i.to_le_bytes());
                        g[4..].fill(i as u8);
                        g.commit(len + 4);
                        break;
                    }
                    Err(SendError::Full { .. }) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
        }
    });
    let mut i = 0u32;
    while i < n {
        match rx.try_read() {
            Ok(frame) => {
                assert_eq!(frame.len(), (i % 61) as usize + 4);
                assert_eq!(u32::from_le_bytes(frame[..4].try_into().unwrap()), i);
                assert!(frame[4..].iter().all(|&b| b == i as u8));
                i += 1;
            }
            Err(RecvError::Empty { .. }) => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    t.join().unwrap();
}

#[test]
fn threads_move_a_million_frames_in_batches() {
    let n: u32 = if cfg!(miri) { 200 } else { 1_000_000 };
    let (mut tx, mut rx) = new(4096).unwrap();
    let message = |i: u32| {
        let mut msg = vec![i as u8; (i % 61) as usize + 4];
        msg[..4].copy_from_slice(&i.to_le_bytes());
        msg
    };
    let t = std::thread::spawn(move || {
        let mut i = 0;
        while i < n {
            let batch: Vec<Vec<u8>> = (i..n.min(i + 1 + i % 37)).map(message).collect();
            match tx.try_send_batch(&batch) {
                Ok(sent) => i += sent as u32,
                Err(SendError::Full { .. }) => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    });
    let mut i = 0u32;
    while i < n {
        let max = 1 + (i % 23) as usize;
        let check = |msg: &[u8]| {
            assert!(msg == message(i), "message {i}");
            i += 1;
        };
        match rx.try_read_batch(max, check) {
            Ok(_) => {}
            Err(RecvError::Empty { .. }) => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    t.join().unwrap();
}

/// A batch's frames are laid out as one by one sends lay them out (SKIPs to keep one-line
/// frames on one line, a PAD at the end of the region), and the batch stops at the first frame
/// that does not fit or is too long.
#[test]
fn a_batch_is_placed_as_single_sends_are_and_stops_where_they_would() {
    for offset in (0..512).step_by(8) {
        let (mut one, mut one_rx) = ring_at(512, offset);
        let (mut many, mut many_rx) = ring_at(512, offset);
        let batch: Vec<Vec<u8>> = (0..40)
            .map(|i| pattern(i, [3, 56, 20, 40][i % 4]))
            .collect();
        let mut singles = 0;
        while singles < batch.len() && one.try_send(&batch[singles]).is_ok() {
            singles += 1;
        }
        assert_eq!(
            many.try_send_batch(&batch).unwrap(),
            singles,
            "offset {offset}"
        );
        assert_eq!(many.state.tail, one.state.tail, "offset {offset}");
        let mut got = Vec::new();
        assert_eq!(
            many_rx
                .try_read_batch(usize::MAX, |m| got.push(m.to_vec()))
                .unwrap(),
            singles
        );
        for (i, msg) in got.iter().enumerate() {
            assert_eq!(msg, &batch[i]);
            assert_eq!(&*one_rx.try_read().unwrap(), &msg[..]);
        }
    }
    let (mut tx, _rx) = new(512).unwrap();
    let too_long = vec![0u8; tx.max_len() + 1];
    assert!(matches!(
        tx.try_send_batch(&[&too_long[..]]),
        Err(SendError::TooLarge { .. })
    ));
    assert_eq!(
        tx.try_send_batch(&[&b"ok"[..], &too_long, b"after"])
            .unwrap(),
        1
    );
}

#[test]
fn small_frames_share_cache_lines() {
    // 16-byte frames: four to a line, all of the ring but the next header word.
    let (mut tx, mut rx) = new(1024).unwrap();
    let mut sent = 0;
    while tx.try_send(&[sent as u8; 8]).is_ok() {
        sent += 1;
    }
    assert_eq!(frame_size(8), 16);
    assert_eq!(sent, 63, "1,016 bytes of 16-byte frames");
    for i in 0..sent {
        assert_eq!(&*rx.try_read().unwrap(), &[i as u8; 8]);
    }
    assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
}

#[test]
fn a_message_that_fits_in_a_line_never_straddles_two() {
    let (mut tx, mut rx) = new(4096).unwrap();
    for round in 0..2000usize {
        // A small message of some length, then one of up to 56 bytes.
        let before = round % 41;
        tx.try_send(&pattern(round, before)).unwrap();
        let len = round % 57;
        let grant = tx.try_reserve(len).unwrap();
        let start = grant.as_ptr() as usize - FRAME_HEADER;
        assert_eq!(
            start / LINE,
            (start + frame_size(len) - 1) / LINE,
            "a {len}-byte message after a {before}-byte one straddles two lines"
        );
        drop(grant);
        tx.try_send(&pattern(round + 1, len)).unwrap();
        assert_eq!(&*rx.try_read().unwrap(), &pattern(round, before)[..]);
        assert_eq!(&*rx.try_read().unwrap(), &pattern(round + 1, len)[..]);
    }
}

#[test]
fn ends_ask_no_alignment_beyond_what_every_allocator_gives() {
    // A Python object (PyO3) or a C allocation guarantees 16 bytes at most; the ends keep their
    // line-aligned state in allocations of their own.
    assert!(std::mem::align_of::<Producer>() <= 16);
    assert!(std::mem::align_of::<Consumer>() <= 16);
    assert!(std::mem::align_of::<crate::Channel>() <= 16);
    assert!(std::mem::align_of::<ProducerState>() >= 128);
}

/// A batch with records of [`BATCH_SLICE`](super::producer::BATCH_SLICE) or more (or a quarter
/// of a small ring), published on their own between runs of smaller ones: every record arrives
/// whole and in order, at every wrap offset, and a batch read of what is there takes them all.
#[test]
fn a_batch_past_the_publish_slice_arrives_whole_and_in_order() {
    for (capacity, lens) in [
        // Records of 1 KiB and more alone: records under, around and over it.
        (4096usize, [40usize, 300, 1100, 8, 700, 1500, 0, 256]),
        // Records of 8 KiB and more alone, and small ones between them.
        (
            64 * 1024,
            [17 * 1024, 64, 5000, 16 * 1024 - 8, 100, 9000, 3, 2048],
        ),
    ] {
        for offset in (0..capacity).step_by(capacity / 8 + FRAME_ALIGN) {
            let offset = offset / FRAME_ALIGN * FRAME_ALIGN;
            let (mut tx, mut rx) = ring_at(capacity, offset);
            let mut seed = 0;
            for round in 0..6 {
                let batch: Vec<Vec<u8>> = lens
                    .iter()
                    .cycle()
                    .skip(round)
                    .take(lens.len())
                    .enumerate()
                    .map(|(k, &len)| pattern(seed + k, len))
                    .collect();
                let sent = tx.try_send_batch(&batch).unwrap();
                assert!(sent > 0, "capacity {capacity} offset {offset}");
                let mut got = Vec::new();
                let handed = rx
                    .try_read_batch(usize::MAX, |m| got.push(m.to_vec()))
                    .unwrap();
                assert_eq!(handed, sent, "capacity {capacity} offset {offset}");
                assert_eq!(got, batch[..sent], "capacity {capacity} offset {offset}");
                assert!(matches!(rx.try_read(), Err(RecvError::Empty { .. })));
                seed += sent;
            }
        }
    }
}

/// A record that, when the producer takes its bytes, lets the consumer take what is there:
/// what a batch has published before it reaches each record.
struct Probe<'a> {
    bytes: Vec<u8>,
    rx: &'a std::cell::RefCell<Consumer>,
    got: &'a std::cell::RefCell<Vec<Vec<u8>>>,
    /// How many records the consumer had when the producer took this one's bytes.
    seen: std::cell::Cell<Option<usize>>,
}

impl AsRef<[u8]> for Probe<'_> {
    fn as_ref(&self) -> &[u8] {
        let mut got = self.got.borrow_mut();
        let _ = self
            .rx
            .borrow_mut()
            .try_read_batch(usize::MAX, |m| got.push(m.to_vec()));
        if self.seen.get().is_none() {
            self.seen.set(Some(got.len()));
        }
        &self.bytes
    }
}

/// Records whose frames reach [`BATCH_SLICE`](super::producer::BATCH_SLICE) are published one
/// by one within the batch (the consumer has every record before the one the producer is
/// writing); smaller ones are published together (the consumer has none of a run until the
/// producer has taken the record after it), and all arrive whole and in order.
#[test]
fn a_batch_publishes_large_records_one_by_one_and_small_ones_together() {
    let capacity = 256 * 1024;
    let large = super::producer::BATCH_SLICE as usize - FRAME_HEADER;
    let mixed: Vec<usize> = [
        vec![64; 10],
        vec![large],
        vec![64; 10],
        vec![large + 1000; 2],
    ]
    .concat();
    // (lengths, what the consumer has when the producer takes each record)
    let cases: [(Vec<usize>, Vec<usize>); 4] = [
        (vec![large; 6], (0..6).collect()),
        (vec![large + 1000; 5], (0..5).collect()),
        (vec![64; 600], vec![0; 600]),
        (mixed, [vec![0; 11], vec![11; 10], vec![11, 22]].concat()),
    ];
    for (lens, want_seen) in cases {
        let (mut tx, rx) = new(capacity).unwrap();
        let (rx, got) = (std::cell::RefCell::new(rx), std::cell::RefCell::default());
        let batch: Vec<Probe<'_>> = lens
            .iter()
            .enumerate()
            .map(|(k, &len)| Probe {
                bytes: pattern(k, len),
                rx: &rx,
                got: &got,
                seen: std::cell::Cell::new(None),
            })
            .collect();
        assert_eq!(tx.try_send_batch(&batch).unwrap(), lens.len());
        let seen: Vec<usize> = batch.iter().map(|p| p.seen.get().unwrap()).collect();
        assert_eq!(seen, want_seen, "lens {lens:?}");
        let _ = rx
            .borrow_mut()
            .try_read_batch(usize::MAX, |m| got.borrow_mut().push(m.to_vec()));
        let want: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(k, &l)| pattern(k, l))
            .collect();
        assert_eq!(*got.borrow(), want, "lens {lens:?}");
    }
}
