//! The counters in a mapping, read through `segments::stats` as a viewer in another mapping of
//! the same object reads them: exact after a known sequence of sends, receives, full rings
//! and sleeps, on a channel and a topic.

use crate::support;

use std::time::Duration;

use shmlink::segments::{self, Counts};
use shmlink::{Channel, Config, OpenError, Publisher, Subscriber, TopicConfig, WaitStrategy};
use support::{unique, NameGuard};

fn small() -> Config {
    Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    }
}

/// The counts of the two sides of a channel's ring `i` (0: creator to connector).
pub(crate) fn ring(name: &str, i: usize) -> (Counts, Counts) {
    let stats = segments::stats(name).expect("stats");
    assert_eq!(stats.kind, "channel");
    let r = &stats.rings[i];
    (r.sender, r.receiver)
}

#[test]
fn a_channels_counters_are_exact_after_messages_full_rings_and_sleeps() {
    let name = unique("counters");
    let _guard = NameGuard(name.clone());
    let mut a = Channel::create(&name, &small()).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
    assert_eq!(ring(&name, 0), (Counts::default(), Counts::default()));

    // N messages of 16 bytes, and one in fragments (longer than a frame).
    const N: u64 = 50;
    for i in 0..N {
        a.send(&[i as u8; 16]).unwrap();
        assert_eq!(&*b.recv().unwrap(), &[i as u8; 16]);
    }
    let long = vec![7u8; a.max_frame() + 100];
    std::thread::scope(|s| {
        s.spawn(|| a.send(&long).unwrap());
        assert_eq!(b.recv().unwrap().len(), long.len());
    });
    let (tx, rx) = ring(&name, 0);
    let bytes = N * 16 + long.len() as u64;
    assert_eq!((tx.messages, tx.bytes), (N + 1, bytes));
    assert_eq!((rx.messages, rx.bytes), (N + 1, bytes));
    assert!(
        tx.fragments >= 2 && tx.fragments == rx.fragments,
        "{tx:?} {rx:?}"
    );
    assert!(tx.last_ns > 0 && tx.since_last().is_some());
    // Nothing went the other way.
    assert_eq!(ring(&name, 1), (Counts::default(), Counts::default()));

    // M sends that find the ring full: the first try_send refused, then three more.
    let full_before = tx.full;
    let mut sent = 0u64;
    while a.try_send(&[1; 16]).is_ok() {
        sent += 1;
    }
    for _ in 0..3 {
        assert!(a.try_send(&[1; 16]).is_err());
    }
    let (tx, _) = ring(&name, 0);
    assert_eq!(tx.full - full_before, 4);
    assert_eq!(tx.messages, N + 1 + sent);
    assert!(tx.high_water > 0 && tx.high_water <= 4096, "{tx:?}");
    for _ in 0..sent {
        b.recv().unwrap();
    }

    // K receives that sleep: each waits in the kernel until the sender's message wakes it.
    const K: u64 = 3;
    let (_, rx_before) = ring(&name, 0);
    let (tx_before, _) = ring(&name, 0);
    std::thread::scope(|s| {
        let b = &mut b;
        let reader = s.spawn(move || {
            for _ in 0..K {
                b.recv().unwrap();
            }
        });
        for _ in 0..K {
            // Long enough for the reader to stop spinning and sleep.
            std::thread::sleep(Duration::from_millis(100));
            a.send(b"wake").unwrap();
        }
        reader.join().unwrap();
    });
    let (tx, rx) = ring(&name, 0);
    assert_eq!(rx.sleeps - rx_before.sleeps, K, "{rx:?}");
    assert_eq!(tx.wakes - tx_before.wakes, K, "{tx:?}");
    assert_eq!(rx.messages, tx.messages);
}

#[test]
fn a_topics_counters_count_the_publisher_and_each_subscriber() {
    let name = unique("topic-counters");
    let _guard = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &TopicConfig::default()).unwrap();
    let mut first = Subscriber::connect(&name, WaitStrategy::Block).unwrap();
    let mut second = Subscriber::connect(&name, WaitStrategy::Block).unwrap();
    for i in 0..10u8 {
        publisher.send(&[i; 8]).unwrap();
    }
    for _ in 0..10 {
        first.recv().unwrap();
    }
    for _ in 0..4 {
        second.recv().unwrap();
    }
    let stats = segments::stats(&name).unwrap();
    assert_eq!(stats.kind, "topic");
    assert_eq!(
        (stats.rings[0].sender.messages, stats.rings[0].sender.bytes),
        (10, 80)
    );
    let mut subs: Vec<_> = stats
        .subscribers
        .iter()
        .map(|s| (s.counts.messages, s.alive))
        .collect();
    subs.sort();
    assert_eq!(subs, vec![(4, true), (10, true)]);
    // The one that read all of it is not behind; the other is six frames behind.
    let lags: Vec<u64> = stats.subscribers.iter().map(|s| s.lag).collect();
    assert!(
        lags.contains(&0) && lags.iter().any(|&l| l >= 6 * 16),
        "{lags:?}"
    );
    // The topic's fill is what its slowest live subscriber has not read.
    assert_eq!(stats.rings[0].fill, *lags.iter().max().unwrap());
}

#[test]
fn stats_of_what_is_not_ours_or_not_there_fail_with_the_name() {
    let name = unique("no-counters");
    match segments::stats(&name) {
        Err(OpenError::NotFound { channel }) => assert_eq!(channel.as_str(), name),
        other => panic!("{other:?}"),
    }
}

/// The `counters-sender` role: connects to the channel named in `args`, sends ROUNDS batches
/// of single messages, a batch call and one in fragments, and waits for each to be answered.
pub fn sender(args: &str) {
    let mut ch = Channel::connect(args, WaitStrategy::Block).unwrap();
    let long = vec![1u8; ch.max_frame() + 1];
    for round in 0..ROUNDS {
        for i in 0..10u8 {
            ch.send(&[i; 24]).unwrap();
        }
        ch.send_batch(&[&b"abc"[..]; 5]).unwrap();
        if round % 10 == 0 {
            ch.send(&long).unwrap();
        }
        ch.recv().unwrap();
    }
}

/// Rounds of the `counters-sender` role.
const ROUNDS: u64 = 200;

/// Whoever has a message sees the count of it: a receiver in another process that reads the
/// sender's counters just after each message it received finds every one of them counted
/// (the sender counts before it publishes; counted after, a round's last messages would often
/// be missing from the count the receiver reads).
#[test]
fn a_message_received_in_another_process_is_already_counted_by_its_sender() {
    let name = unique("counters-causal");
    let _guard = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &Config::default()).unwrap();
    let mut child = crate::roles::spawn("counters-sender", &name, &[]);
    let long = ch.max_frame() as u64 + 1;
    let (mut messages, mut bytes) = (0u64, 0u64);
    for round in 0..ROUNDS {
        let mut got = 0;
        while got < 15 + u64::from(round % 10 == 0) {
            let len = ch.recv().unwrap().len() as u64;
            got += 1;
            messages += 1;
            bytes += len;
            let (tx, _) = ring(&name, 1);
            assert!(
                tx.messages >= messages && tx.bytes >= bytes,
                "round {round}: received {messages} messages ({bytes} bytes), the sender's count says {} ({})",
                tx.messages,
                tx.bytes
            );
        }
        ch.send(b"next").unwrap();
    }
    assert_eq!(bytes, ROUNDS * (10 * 24 + 5 * 3) + (ROUNDS / 10) * long);
    let (tx, rx) = ring(&name, 1);
    assert_eq!((tx.messages, tx.bytes), (messages, bytes));
    assert_eq!((rx.messages, rx.bytes), (messages, bytes));
    assert!(child.reap_within(Duration::from_secs(30)).success());
}
