//! Unit tests of the channel's limits and of long messages: the receiver's published limit,
//! fragments, their reassembly and withdrawal, and frames a peer writes by hand.

use super::*;

#[test]
fn a_message_over_the_receivers_limit_is_too_large_at_the_sender() {
    let name = unique("limit");
    let cfg = Config {
        capacity: 1 << 16,
        wait: WaitStrategy::Spin,
    };
    let mut a = Channel::create(&name, &cfg).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    assert!(a.max_frame() < 40_000);
    // A fragmented message over the receiver's limit, and a single frame over it too.
    for (len, limit) in [(50_000, 40_000), (1000, 500)] {
        b.split().1.set_max_message(limit);
        assert_eq!(a.split().0.max_message(), limit);
        assert!(
            matches!(a.send(&vec![7; len]), Err(SendError::TooLarge { len: l, max, .. }) if l == len && max == limit)
        );
        assert!(matches!(
            a.try_send(&vec![7; len]),
            Err(SendError::TooLarge { .. })
        ));
        assert!(matches!(
            a.send_json(&vec![7u8; len]),
            Err(SendError::TooLarge { .. })
        ));
        // Nothing was written and the channel keeps working both ways.
        assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
        a.send(&vec![1; 400]).unwrap();
        assert_eq!(b.recv().unwrap().len(), 400);
        a.send_json(&[1, 2, 3]).unwrap();
        assert_eq!(b.recv_json::<Vec<u8>>().unwrap(), [1, 2, 3]);
        // The limit is the receiver's: the other direction is not limited by it.
        b.send(&vec![2; 1000]).unwrap();
        assert_eq!(a.recv().unwrap().len(), 1000);
    }
    // Raising the limit again lets the long message through.
    b.set_max_message(DEFAULT_MAX_MESSAGE);
    let sender = std::thread::spawn(move || {
        a.send(&vec![3; 50_000]).unwrap();
        a
    });
    assert_eq!(b.recv().unwrap().len(), 50_000);
    sender.join().unwrap();
}

#[test]
fn recv_json_timeout_times_out_and_decodes() {
    let name = unique("json-timeout");
    let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    assert!(matches!(
        b.recv_json_timeout::<u32>(Duration::from_millis(20)),
        Err(RecvError::Timeout { .. })
    ));
    a.send_json(&41u32).unwrap();
    assert_eq!(
        b.recv_json_timeout::<u32>(Duration::from_secs(10)).unwrap(),
        41
    );
}

#[test]
fn any_published_limit_is_taken_as_it_is() {
    let name = unique("hostile-limit");
    let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    let shared = b.receiver.shared.clone();
    let published = &shared.me().max_message;
    // Zero: every non-empty message is refused at the sender, the empty one still goes.
    published.store(0, Ordering::Relaxed);
    assert!(matches!(
        a.send(b"x"),
        Err(SendError::TooLarge { len: 1, max: 0, .. })
    ));
    a.send(b"").unwrap();
    assert_eq!(b.recv().unwrap().len(), 0);
    // Past usize (on 32-bit builds) or simply huge: our own limit applies.
    published.store(u64::MAX, Ordering::Relaxed);
    assert_eq!(a.split().0.max_message(), DEFAULT_MAX_MESSAGE);
    a.send(b"y").unwrap();
    assert_eq!(&*b.recv().unwrap(), b"y");
}

#[test]
fn a_fragmented_send_that_times_out_is_withdrawn_and_the_channel_goes_on() {
    let name = unique("cut");
    let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    // Several rings' worth: nobody reads, so the send stops part-way and times out.
    let long: Vec<u8> = (0..20_000).map(|i| i as u8).collect();
    assert!(matches!(
        a.send_timeout(&long, Duration::from_millis(50)),
        Err(SendError::Timeout { .. })
    ));
    // Until the receiver makes room, no message of any size fits behind the withdrawal.
    assert!(matches!(a.try_send(&[7; 200]), Err(SendError::Full { .. })));
    let sender = std::thread::spawn(move || {
        a.send(b"after").unwrap();
        a.send(&long).unwrap();
        a
    });
    // The receiver drops what it had of the withdrawn message and gets the next ones whole.
    assert_eq!(&*b.recv().unwrap(), b"after");
    let mut buf = Vec::new();
    assert_eq!(b.recv_into(&mut buf).unwrap(), 20_000);
    assert!(buf.iter().enumerate().all(|(i, &x)| x == i as u8));
    let _a = sender.join().unwrap();
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
}

#[test]
fn after_a_message_that_fails_to_reassemble_the_next_ones_come_through() {
    let name = unique("refused");
    let cfg = Config {
        capacity: 1 << 17,
        wait: WaitStrategy::Block,
    };
    let mut a = Channel::create(&name, &cfg).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    // Two fragments, both in the ring before the receiver lowers its limit.
    let len = a.max_frame() + 20_000;
    a.send(&vec![5; len]).unwrap();
    b.split().1.set_max_message(len - 1);
    // Refused as over this side's limit, at the first fragment.
    assert!(matches!(
        b.recv(),
        Err(RecvError::TooLarge { len: l, max, .. }) if l == len && max == len - 1
    ));
    // The rest of the refused message is skipped, not reported again.
    a.send(b"next").unwrap();
    assert_eq!(&*b.recv().unwrap(), b"next");
    b.split().1.set_max_message(DEFAULT_MAX_MESSAGE);
    a.send(&vec![6; len]).unwrap();
    assert_eq!(b.recv().unwrap().len(), len);
}

thread_local! {
    /// Run by a receiving half of this thread after each fragment it takes (see
    /// `RecvHalf::next_message`): lets a test feed the ring from inside a receive.
    static AFTER_FRAGMENT: RefCell<Option<Box<dyn FnMut()>>> = const { RefCell::new(None) };
}

/// Called by the receiving half after each fragment it takes.
pub(in crate::shm::channel) fn fragment_taken() {
    AFTER_FRAGMENT.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook();
        }
    });
}

/// Writes one frame of `kind` by hand, as a peer could. False if there is no room now.
fn push(tx: &mut Producer, kind: u8, payload: &[u8]) -> bool {
    match tx.try_reserve_kind(payload.len(), kind) {
        Ok(mut grant) => {
            grant.copy_from_slice(payload);
            grant.commit(payload.len());
            true
        }
        Err(SendError::Full { .. }) => false,
        Err(e) => panic!("push: {e}"),
    }
}

/// A first fragment announcing `total` bytes, with `body` bytes of the message.
fn first_fragment(total: u64, body: usize) -> Vec<u8> {
    let mut payload = total.to_le_bytes().to_vec();
    payload.resize(8 + body, 1);
    payload
}

/// A pair in this process: the receiving channel and the peer's sending half, whose ring end
/// the tests write by hand.
fn receiver_and_raw_sender(tag: &str, capacity: usize) -> (Channel, SendHalf, RecvHalf) {
    let name = unique(tag);
    let cfg = Config {
        capacity,
        wait: WaitStrategy::Spin,
    };
    let a = Channel::create(&name, &cfg).unwrap();
    let (tx, rx) = Channel::connect(&name, WaitStrategy::Spin)
        .unwrap()
        .into_split();
    (a, tx, rx)
}

#[test]
fn try_recv_takes_one_ring_of_fragments_per_call_however_fast_they_come() {
    let capacity = 4096;
    let (mut a, mut b, _b_rx) = receiver_and_raw_sender("budget", capacity);
    const MORE: usize = 200;
    // A message that never ends, the ring full of it.
    assert!(push(
        &mut b.tx,
        kind::FRAG_FIRST,
        &first_fragment(1 << 30, 1000)
    ));
    while push(&mut b.tx, kind::FRAG_MORE, &[2; MORE]) {}
    // Every fragment the receiver takes is replaced at once, from inside the call: the ring
    // never runs dry, so only the call's own limit can end it (or, if that is broken, the feed
    // running out far past it).
    let taken = Rc::new(Cell::new(0usize));
    AFTER_FRAGMENT.set(Some(Box::new({
        let taken = Rc::clone(&taken);
        move || {
            taken.set(taken.get() + 1);
            if taken.get() < 1000 {
                assert!(push(&mut b.tx, kind::FRAG_MORE, &[2; MORE]));
            }
        }
    })));
    let got = a.try_recv().map(|m| m.len());
    drop(AFTER_FRAGMENT.take());
    assert!(matches!(got, Err(RecvError::Empty { .. })), "{got:?}");
    // The first fragment, then middle ones: a ring's worth of frames, and not one more.
    let taken = taken.get();
    let bytes = frame_size(8 + 1000) + (taken - 1) * frame_size(MORE);
    assert!(
        (capacity..capacity + frame_size(MORE)).contains(&bytes),
        "one try_recv took {taken} fragments, {bytes} bytes of a {capacity}-byte ring"
    );
    // The message is still under way: the next call goes on with it.
    assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
    assert_eq!(a.receiver.assembling, recv::Assembling::Collecting(1 << 30));
}

#[test]
fn a_failed_or_withdrawn_message_gives_its_reassembly_memory_back() {
    let (mut a, mut b, _b_rx) = receiver_and_raw_sender("release", 1 << 16);
    let chunk = b.max_frame();
    let total = 8 * chunk;
    // Starts a message of `total` bytes and sends all but its last fragment.
    let grow = |a: &mut Channel, b: &mut SendHalf| {
        assert!(push(
            &mut b.tx,
            kind::FRAG_FIRST,
            &first_fragment(total as u64, chunk - 8)
        ));
        assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
        for _ in 0..6 {
            assert!(push(&mut b.tx, kind::FRAG_MORE, &vec![3; chunk]));
            assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
        }
        assert!(a.receiver.assembly.capacity() >= 7 * chunk - 8);
    };
    // Withdrawn by its sender.
    grow(&mut a, &mut b);
    assert!(push(&mut b.tx, kind::FRAG_ABORT, &[]));
    assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
    assert_eq!(a.receiver.assembly.capacity(), 0, "after a withdrawal");
    // Refused: a fragment out of sequence.
    grow(&mut a, &mut b);
    assert!(push(
        &mut b.tx,
        kind::FRAG_FIRST,
        &first_fragment(total as u64, 8)
    ));
    assert!(matches!(a.try_recv(), Err(RecvError::Corrupt { .. })));
    assert_eq!(a.receiver.assembly.capacity(), 0, "after a refusal");
    // Refused: longer than announced.
    grow(&mut a, &mut b);
    assert!(push(&mut b.tx, kind::FRAG_MORE, &vec![3; chunk]));
    assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
    assert!(push(&mut b.tx, kind::FRAG_LAST, &vec![3; chunk]));
    assert!(matches!(a.try_recv(), Err(RecvError::Corrupt { .. })));
    assert_eq!(
        a.receiver.assembly.capacity(),
        0,
        "after an overlong message"
    );
    // A message that completes keeps its buffer for the next one.
    grow(&mut a, &mut b);
    assert!(push(&mut b.tx, kind::FRAG_MORE, &vec![3; chunk]));
    assert!(matches!(a.try_recv(), Err(RecvError::Empty { .. })));
    assert!(push(&mut b.tx, kind::FRAG_LAST, &[3; 8]));
    assert_eq!(a.try_recv().map(|m| m.len()).unwrap(), total);
    assert!(a.receiver.assembly.capacity() >= total);
}

#[test]
fn send_json_sends_every_size_and_its_deadline_form_withdraws_like_send_timeout() {
    let name = unique("json-sizes");
    let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    let b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    let max = a.max_frame();
    let text = |len: usize| "x".repeat(len - 2);
    let mut b = std::thread::scope(|s| {
        let sizes = [
            2,
            300,
            max - 1,
            max,
            max + 1,
            3 * max,
            200,
            max,
            5 * max + 3,
            2,
            max + 1,
        ];
        let receiver = s.spawn(move || {
            let mut b = b;
            for &len in &sizes {
                let got: String = b.recv_json_timeout(Duration::from_secs(10)).unwrap();
                assert_eq!(got.len(), len - 2);
            }
            b
        });
        for &len in &sizes {
            a.send_json(&text(len)).unwrap();
            // A value that did not fit a frame sends the next one to the buffer first; one that
            // did makes the grant fit it next time.
            if len > max {
                assert!(a.sender.json_hint > max, "after {len} bytes");
            } else {
                assert!(a.sender.json_hint >= len.min(max), "after {len} bytes");
            }
        }
        receiver.join().unwrap()
    });
    // Nobody reads: a value of several rings times out part-way and is withdrawn.
    assert!(matches!(
        a.send_json_timeout(&text(5 * 4096), Duration::from_millis(50)),
        Err(SendError::Timeout { .. })
    ));
    let mut got = Vec::new();
    loop {
        match b.try_recv() {
            Ok(msg) => got.push(msg.len()),
            Err(RecvError::Empty { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        got.is_empty(),
        "parts of a withdrawn value arrived: {got:?}"
    );
    a.send_json_timeout(&text(100), Duration::from_secs(10))
        .unwrap();
    assert_eq!(b.recv_json::<String>().unwrap().len(), 98);
}

#[test]
fn try_send_of_a_long_message_sends_it_whole_or_not_at_all() {
    let name = unique("trywhole");
    let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
    let max = a.max_frame();
    let long: Vec<u8> = (0..max + 100).map(|i| i as u8).collect();
    // It fits the empty ring whole: it goes out, and arrives whole.
    a.try_send(&long).unwrap();
    let mut buf = Vec::new();
    assert_eq!(b.try_recv_into(&mut buf).unwrap(), long.len());
    assert_eq!(buf, long);
    // With the ring nearly full: Full, and nothing of it arrives.
    let mut fillers = 0;
    while a.try_send(&[9; 300]).is_ok() {
        fillers += 1;
    }
    assert!(matches!(a.try_send(&long), Err(SendError::Full { .. })));
    for _ in 0..fillers {
        assert_eq!(&*b.try_recv().unwrap(), &[9; 300]);
    }
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
    // More than the whole ring could ever hold at once: never this way.
    let huge = vec![1; 3 * max];
    match a.try_send(&huge) {
        Err(SendError::TooLarge { len, max: most, .. }) => {
            assert_eq!(len, huge.len());
            assert!(most >= long.len() && most < huge.len(), "{most}");
        }
        other => panic!("{other:?}"),
    }
    // `send` streams it, as the peer reads.
    let sender = std::thread::spawn(move || {
        a.send(&huge).unwrap();
        a
    });
    assert_eq!(b.recv_into(&mut buf).unwrap(), 3 * max);
    let _a = sender.join().unwrap();
}
