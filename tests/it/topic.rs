//! Topics: one publisher, many subscribers. Every message reaches every subscriber in order
//! (subscribers in other processes); a lossless publisher waits for the slowest live
//! subscriber and no longer once it is killed or dropped; an overwrite subscriber that falls a
//! ring behind is told what it missed; late joiners get the history they ask for; a killed
//! publisher is `PeerGone` after its last messages; hostile cursors and slot states cost the
//! publisher nothing but the hostile subscriber.

use crate::support;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use shmlink::testing::{
    topic_offsets, TOPIC_SLOT_ACTIVE, TOPIC_SLOT_CURSOR, TOPIC_SLOT_DROPPED, TOPIC_SLOT_SIZE,
    TOPIC_SLOT_STATE,
};
use shmlink::{
    Channel, OpenError, Publisher, RecvError, Selectable, Selector, SendError, Subscriber,
    SubscriberConfig, TopicConfig, TopicMode, WaitStrategy,
};
use support::{unique, wait_for_line, ChildGuard, NameGuard, WATCHDOG};

/// A message numbered `seq`: the number, then `seq % 61` bytes of it.
fn message(seq: u64) -> Vec<u8> {
    let mut m = seq.to_le_bytes().to_vec();
    m.resize(8 + (seq % 61) as usize, seq as u8);
    m
}

/// The number of a message made by [`message`], checked whole.
fn number(m: &[u8]) -> u64 {
    let seq = u64::from_le_bytes(m[..8].try_into().expect("a numbered message"));
    assert_eq!(m, &message(seq)[..], "message {seq} garbled");
    seq
}

fn small(mode: TopicMode) -> TopicConfig {
    TopicConfig {
        capacity: 4096,
        mode,
        ..TopicConfig::default()
    }
}

/// The roles a child of these tests plays (`topic <what> <name> <args>`).
pub fn child(args: &str) {
    let mut words = args.split(' ');
    let what = words.next().expect("what");
    let name = words.next().expect("name").to_owned();
    let arg = |w: Option<&str>| w.map_or(0, |w| w.parse::<u64>().expect("a number"));
    match what {
        // Joins, says so, receives `count` messages from 0 on, checking each, and says so.
        "subscribe" => {
            let count = arg(words.next());
            let mut sub = Subscriber::connect(&name, WaitStrategy::Block).expect("join");
            println!("ready");
            for expected in 0..count {
                let got = sub.recv_timeout(WATCHDOG).expect("a message");
                assert_eq!(number(&got), expected, "out of order");
            }
            println!("got all");
        }
        // Joins, says so, and never reads.
        "hold" => {
            let _sub = Subscriber::connect(&name, WaitStrategy::Block).expect("join");
            println!("ready");
            std::thread::sleep(WATCHDOG);
        }
        // Publishes `count` messages once `subscribers` have joined, says so, then waits to
        // be killed.
        "publish" => {
            let count = arg(words.next());
            let subscribers = arg(words.next()) as usize;
            let mut publisher = Publisher::create(&name, &TopicConfig::default()).expect("create");
            println!("ready");
            let deadline = Instant::now() + WATCHDOG;
            while publisher.subscriber_count() < subscribers {
                assert!(Instant::now() < deadline, "subscribers never came");
                std::thread::sleep(Duration::from_millis(1));
            }
            for seq in 0..count {
                publisher.send(&message(seq)).expect("send");
            }
            println!("sent");
            std::thread::sleep(WATCHDOG);
        }
        other => panic!("unknown topic role {other}"),
    }
}

fn spawn(args: &str) -> ChildGuard {
    let mut child = crate::roles::spawn("topic", args, &[]);
    wait_for_line(&mut child, "ready");
    child
}

fn wait_for_subscribers(publisher: &Publisher, n: usize) {
    let deadline = Instant::now() + WATCHDOG;
    while publisher.subscriber_count() < n {
        assert!(Instant::now() < deadline, "{n} subscribers never joined");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn every_subscriber_process_gets_every_message_in_order() {
    for mode in [TopicMode::Lossless, TopicMode::Overwrite] {
        let name = unique("topic-fanout");
        let _unlink = NameGuard(name.clone());
        // Overwrite: a ring large enough that nobody laps.
        let capacity = if mode == TopicMode::Lossless {
            4096
        } else {
            1 << 22
        };
        let config = TopicConfig {
            capacity,
            mode,
            ..TopicConfig::default()
        };
        let mut publisher = Publisher::create(&name, &config).expect("create");
        let count = 20_000;
        let mut children: Vec<ChildGuard> = (0..3)
            .map(|_| spawn(&format!("subscribe {name} {count}")))
            .collect();
        wait_for_subscribers(&publisher, 3);
        for seq in 0..count {
            publisher
                .send_timeout(&message(seq), WATCHDOG)
                .expect("send");
        }
        for child in &mut children {
            wait_for_line(child, "got all");
        }
        assert_eq!(publisher.published(), count);
    }
}

#[test]
fn every_form_reaches_every_subscriber() {
    let name = unique("topic-forms");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &TopicConfig::default()).expect("create");
    let mut subs: Vec<Subscriber> = (0..2)
        .map(|_| Subscriber::connect(&name, WaitStrategy::Spin).expect("join"))
        .collect();
    publisher.send(b"bytes").unwrap();
    publisher.send_json(&serde_json::json!({"n": 7})).unwrap();
    publisher.send_value(&42u64).unwrap();
    let mut grant = publisher.reserve(5).unwrap();
    grant.copy_from_slice(b"grant");
    grant.commit(5);
    assert_eq!(publisher.send_batch(&[&b"b1"[..], b"b2"]).unwrap(), 2);
    for sub in &mut subs {
        assert_eq!(&*sub.recv().unwrap(), b"bytes");
        let v: serde_json::Value = sub.recv_json().unwrap();
        assert_eq!(v["n"], 7);
        assert_eq!(*sub.recv_value::<u64>().unwrap(), 42);
        let mut buf = Vec::new();
        sub.recv_into(&mut buf).unwrap();
        assert_eq!(buf, b"grant");
        let mut got = Vec::new();
        assert_eq!(sub.recv_batch(8, |m| got.push(m.to_vec())).unwrap(), 2);
        assert_eq!(got, [b"b1".to_vec(), b"b2".to_vec()]);
        assert!(matches!(sub.try_recv(), Err(RecvError::Empty { .. })));
        assert!(matches!(
            sub.recv_timeout(Duration::from_millis(5)),
            Err(RecvError::Timeout { .. })
        ));
    }
    assert_eq!(
        TopicConfig::default().max_message(),
        publisher.max_message()
    );
    let tiny = TopicConfig {
        capacity: 0,
        ..TopicConfig::default()
    };
    assert_eq!(tiny.max_message(), 0);
    let too_long = vec![0u8; publisher.max_message() + 1];
    assert!(matches!(
        publisher.send(&too_long),
        Err(SendError::TooLarge { .. })
    ));
    drop(publisher);
    for sub in &mut subs {
        assert!(matches!(sub.recv(), Err(RecvError::Disconnected { .. })));
    }
}

#[test]
fn a_lossless_publisher_waits_for_the_slowest_subscriber() {
    let name = unique("topic-slow");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &small(TopicMode::Lossless)).expect("create");
    let mut fast = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    let mut slow = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    let mut sent = 0u64;
    loop {
        match publisher.try_send(&message(sent)) {
            Ok(()) => sent += 1,
            Err(SendError::Full { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        // The fast one keeps up; only the slow one holds the ring.
        assert_eq!(number(&fast.recv().unwrap()), sent - 1);
    }
    assert!(sent > 10, "the ring held only {sent} messages");
    assert!(matches!(
        publisher.send_timeout(&message(sent), Duration::from_millis(20)),
        Err(SendError::Timeout { .. })
    ));
    let behind = publisher.subscribers();
    assert_eq!(behind.len(), 2);
    assert!(behind.iter().any(|s| s.slot == slow.slot() && s.behind > 0));
    // The slow one reads: room again.
    for seq in 0..sent {
        assert_eq!(number(&slow.recv().unwrap()), seq);
    }
    publisher.send(&message(sent)).unwrap();
    assert_eq!(number(&fast.recv().unwrap()), sent);
    assert_eq!(number(&slow.recv().unwrap()), sent);
}

#[test]
fn a_killed_subscriber_stops_holding_the_publisher_back() {
    let name = unique("topic-killed-sub");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &small(TopicMode::Lossless)).expect("create");
    let mut holder = spawn(&format!("hold {name}"));
    wait_for_subscribers(&publisher, 1);
    let mut sent = 0u64;
    while publisher.try_send(&message(sent)).is_ok() {
        sent += 1;
    }
    assert!(matches!(
        publisher.try_send(&message(sent)),
        Err(SendError::Full { .. })
    ));
    holder.kill();
    holder.reap();
    // Blocked on the dead subscriber, the publisher finds its slot free.
    publisher
        .send_timeout(&message(sent), WATCHDOG)
        .expect("room once the subscriber died");
    assert_eq!(publisher.subscriber_count(), 0);
}

#[test]
fn a_dropped_subscriber_is_told_and_holds_nothing() {
    let name = unique("topic-drop");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &small(TopicMode::Lossless)).expect("create");
    let mut sub = Subscriber::connect(&name, WaitStrategy::Block).expect("join");
    while publisher.try_send(b"x").is_ok() {}
    assert!(publisher.drop_subscriber(sub.slot()));
    assert!(!publisher.drop_subscriber(sub.slot()), "dropped twice");
    publisher
        .try_send(b"room")
        .expect("room once the subscriber is dropped");
    assert!(matches!(sub.recv(), Err(RecvError::Dropped { .. })));
    // Asleep when dropped: woken and told.
    let mut asleep = Subscriber::connect(&name, WaitStrategy::Block).expect("join");
    let slot = asleep.slot();
    std::thread::scope(|s| {
        let waiting = s.spawn(move || asleep.recv_timeout(WATCHDOG).map(|_| ()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(publisher.drop_subscriber(slot));
        assert!(matches!(
            waiting.join().unwrap(),
            Err(RecvError::Dropped { .. })
        ));
    });
}

#[test]
fn a_killed_publisher_is_peer_gone_after_its_last_messages() {
    let name = unique("topic-killed-pub");
    let _unlink = NameGuard(name.clone());
    let mut publisher = spawn(&format!("publish {name} 100 2"));
    let mut subs: Vec<Subscriber> = (0..2)
        .map(|_| Subscriber::connect(&name, WaitStrategy::Block).expect("join"))
        .collect();
    wait_for_line(&mut publisher, "sent");
    let pid = publisher.pid();
    publisher.kill();
    publisher.reap();
    for sub in &mut subs {
        for seq in 0..100 {
            assert_eq!(number(&sub.recv_timeout(WATCHDOG).unwrap()), seq);
        }
        match sub.recv_timeout(WATCHDOG) {
            Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
            other => panic!("expected PeerGone, got {other:?}"),
        }
    }
}

#[test]
fn a_lapped_overwrite_subscriber_is_told_what_it_missed() {
    let name = unique("topic-lagged");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &small(TopicMode::Overwrite)).expect("create");
    let mut sub = Subscriber::connect(&name, WaitStrategy::Block).expect("join");
    let count = 1000u64;
    for seq in 0..count {
        // Never waits, however far behind the subscriber is.
        publisher
            .try_send(&message(seq))
            .expect("an overwrite send never waits");
    }
    let mut next = 0u64;
    let mut lagged = 0;
    let mut received = 0;
    loop {
        match sub.try_recv() {
            Ok(m) => {
                assert_eq!(number(&m), next, "after {lagged} lags");
                next += 1;
                received += 1;
            }
            Err(RecvError::Lagged { missed, .. }) => {
                assert!(missed > 0);
                next += missed;
                lagged += 1;
            }
            Err(RecvError::Empty { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(next, count, "missed and received add up to what was sent");
    assert_eq!(lagged, 1, "told once");
    assert!(received > 10 && received < count, "received {received}");
    // Caught up, it gets what comes next.
    publisher.send(&message(count)).unwrap();
    assert_eq!(number(&sub.recv().unwrap()), count);
}

#[test]
fn late_subscribers_get_the_history_they_ask_for() {
    for mode in [TopicMode::Lossless, TopicMode::Overwrite] {
        let name = unique("topic-history");
        let _unlink = NameGuard(name.clone());
        let config = TopicConfig {
            history: 5,
            mode,
            ..TopicConfig::default()
        };
        let mut publisher = Publisher::create(&name, &config).expect("create");
        for seq in 0..20 {
            publisher.send(&message(seq)).unwrap();
        }
        let join = |history| {
            Subscriber::connect_with(
                &name,
                &SubscriberConfig {
                    wait: WaitStrategy::Spin,
                    history,
                },
            )
            .expect("join")
        };
        let mut none = join(0);
        let mut three = join(3);
        let mut all = join(100);
        publisher.send(&message(20)).unwrap();
        assert_eq!(number(&none.recv().unwrap()), 20, "{mode:?}");
        for seq in 17..=20 {
            assert_eq!(number(&three.recv().unwrap()), seq, "{mode:?}");
        }
        for seq in 15..=20 {
            assert_eq!(number(&all.recv().unwrap()), seq, "{mode:?}");
        }
    }
}

#[test]
fn a_lossless_history_survives_a_ring_the_subscribers_keep_empty() {
    let name = unique("topic-history-kept");
    let _unlink = NameGuard(name.clone());
    let config = TopicConfig {
        history: 3,
        ..small(TopicMode::Lossless)
    };
    let mut publisher = Publisher::create(&name, &config).expect("create");
    let mut reader = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    // Many rings' worth, read as it goes: the publisher reuses all but the history.
    for seq in 0..2000 {
        publisher.send_timeout(&message(seq), WATCHDOG).unwrap();
        assert_eq!(number(&reader.recv().unwrap()), seq);
    }
    let mut late = Subscriber::connect_with(
        &name,
        &SubscriberConfig {
            wait: WaitStrategy::Spin,
            history: 3,
        },
    )
    .expect("join");
    for seq in 1997..2000 {
        assert_eq!(number(&late.recv().unwrap()), seq);
    }
}

#[test]
fn the_topic_admits_as_many_subscribers_as_configured() {
    let name = unique("topic-limit");
    let _unlink = NameGuard(name.clone());
    let config = TopicConfig {
        max_subscribers: 2,
        ..TopicConfig::default()
    };
    let _publisher = Publisher::create(&name, &config).expect("create");
    let a = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    let _b = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    match Subscriber::connect(&name, WaitStrategy::Spin) {
        Err(OpenError::TooManySubscribers { limit: 2, channel }) => assert_eq!(channel, name),
        other => panic!("expected TooManySubscribers, got {other:?}"),
    }
    drop(a);
    Subscriber::connect(&name, WaitStrategy::Spin).expect("a slot freed");
}

#[test]
fn topics_and_channels_do_not_mix() {
    let name = unique("topic-kinds");
    let _unlink = NameGuard(name.clone());
    let publisher = Publisher::create(&name, &TopicConfig::default()).expect("create");
    assert!(Channel::connect(&name, WaitStrategy::Spin).is_err());
    assert!(matches!(
        Publisher::create(&name, &TopicConfig::default()),
        Err(OpenError::AlreadyExists { .. })
    ));
    drop(publisher);
    let channel_name = unique("topic-kinds-ch");
    let _unlink2 = NameGuard(channel_name.clone());
    let _ch = Channel::create(&channel_name, &Default::default()).expect("create");
    assert!(matches!(
        Subscriber::connect(&channel_name, WaitStrategy::Spin),
        Err(OpenError::NotAChannel { .. })
    ));
    assert!(matches!(
        Subscriber::connect(&unique("topic-none"), WaitStrategy::Spin),
        Err(OpenError::NotFound { .. })
    ));
    let bad = TopicConfig {
        max_subscribers: 0,
        ..TopicConfig::default()
    };
    assert!(matches!(
        Publisher::create(&unique("topic-bad"), &bad),
        Err(OpenError::InvalidConfig { .. })
    ));
}

/// The topic's mapping, as a hostile subscriber process would map it.
fn open_topic(name: &str) -> MmapMut {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(support::shm_path(name))
        .expect("open the topic");
    // SAFETY: a topic made by this test; every access through this mapping is atomic.
    unsafe { MmapMut::map_mut(&file) }.expect("map the topic")
}

fn slot_word<'a, T>(map: &'a MmapMut, config: &TopicConfig, slot: usize, field: usize) -> &'a T {
    let (slots, _) = topic_offsets(config.capacity, config.history, config.max_subscribers);
    let at = slots + slot * TOPIC_SLOT_SIZE + field;
    assert!(at + 8 <= map.len());
    // SAFETY: inside the mapping, aligned (slots are 128-byte aligned, the fields 4- or
    // 8-aligned); the words are atomics in the publisher's view too.
    unsafe { &*(map.as_ptr().add(at) as *const T) }
}

#[test]
fn hostile_cursors_cost_only_the_hostile_subscriber() {
    let config = small(TopicMode::Lossless);
    // Ahead of the publisher, far behind the ring, not aligned, flipped back and forth.
    let forged: [&dyn Fn(u64) -> u64; 4] =
        [&|_| u64::MAX - 7, &|_| 0, &|pos| pos + 3, &|pos| !pos & !7];
    for (i, forge) in forged.iter().enumerate() {
        let name = unique("topic-hostile");
        let _unlink = NameGuard(name.clone());
        let mut publisher = Publisher::create(&name, &config).expect("create");
        let mut honest = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
        let mut hostile = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
        // Past one lap, so that index 0 is behind the floor.
        for seq in 0..300 {
            publisher.send(&message(seq)).unwrap();
            assert_eq!(number(&honest.recv().unwrap()), seq);
            assert_eq!(number(&hostile.recv().unwrap()), seq);
        }
        let map = open_topic(&name);
        let cursor: &AtomicU64 = slot_word(&map, &config, hostile.slot(), TOPIC_SLOT_CURSOR);
        let pos = cursor.load(Ordering::SeqCst);
        cursor.store(forge(pos), Ordering::SeqCst);
        // The publisher goes on; the honest subscriber gets everything.
        for seq in 300..1300 {
            publisher
                .send_timeout(&message(seq), WATCHDOG)
                .unwrap_or_else(|e| panic!("forgery {i}: {e}"));
            assert_eq!(number(&honest.recv().unwrap()), seq);
        }
        let state: &AtomicU32 = slot_word(&map, &config, hostile.slot(), TOPIC_SLOT_STATE);
        assert_eq!(
            state.load(Ordering::SeqCst) & 0xff,
            TOPIC_SLOT_DROPPED,
            "forgery {i}: the hostile slot is dropped"
        );
        assert!(matches!(hostile.recv(), Err(RecvError::Dropped { .. })));
    }
}

#[test]
fn forged_slot_states_hold_nothing_for_long() {
    let config = small(TopicMode::Lossless);
    let name = unique("topic-forged-state");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &config).expect("create");
    let map = open_topic(&name);
    // A slot marked active with a cursor at 0 that nobody holds: swept as a dead subscriber's.
    let state: &AtomicU32 = slot_word(&map, &config, 5, TOPIC_SLOT_STATE);
    state.store(TOPIC_SLOT_ACTIVE, Ordering::SeqCst);
    // Every other byte pattern of a state word: ignored.
    for (slot, word) in [(6, 0xdead_beefu32), (7, 0xffff_ff07)] {
        let state: &AtomicU32 = slot_word(&map, &config, slot, TOPIC_SLOT_STATE);
        state.store(word, Ordering::SeqCst);
    }
    for seq in 0..2000 {
        publisher
            .send_timeout(&message(seq), WATCHDOG)
            .expect("the forged slots do not hold the publisher");
    }
}

#[test]
fn segments_list_a_topic_with_its_subscribers_and_their_liveness() {
    let name = unique("topic-listed");
    let _unlink = NameGuard(name.clone());
    let publisher = Publisher::create(&name, &TopicConfig::default()).expect("create");
    let _here = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    let mut there = spawn(&format!("hold {name}"));
    wait_for_subscribers(&publisher, 2);
    let seen = shmlink::segments::inspect(&name).expect("inspect");
    assert_eq!(seen.kind, "topic");
    assert!(seen.ready && !seen.stale && seen.creator.alive);
    assert_eq!(seen.subscribers.len(), 2);
    assert!(seen
        .subscribers
        .iter()
        .all(|s| s.alive && s.state == "active"));
    assert!(seen.subscribers.iter().any(|s| s.pid == there.pid()));
    there.kill();
    there.reap();
    let seen = shmlink::segments::inspect(&name).expect("inspect");
    assert_eq!(
        seen.subscribers.iter().filter(|s| s.alive).count(),
        1,
        "the killed subscriber's slot is not held: {:?}",
        seen.subscribers
    );
}

#[test]
fn a_dead_publishers_topic_is_reclaimed_like_a_channel() {
    let name = unique("topic-reclaimed");
    let _unlink = NameGuard(name.clone());
    let mut publisher = spawn(&format!("publish {name} 10 0"));
    wait_for_line(&mut publisher, "sent");
    assert!(!shmlink::segments::inspect(&name).expect("inspect").stale);
    publisher.kill();
    publisher.reap();
    let seen = shmlink::segments::inspect(&name).expect("inspect");
    assert!(seen.stale, "a killed publisher's topic is stale: {seen:?}");
    assert!(shmlink::segments::list()
        .expect("list")
        .iter()
        .any(|s| s.name == name && s.kind == "topic"));
    assert!(matches!(
        shmlink::segments::reclaim(&name).expect("reclaim"),
        shmlink::segments::Reclaim::Removed
    ));
    // And a dead publisher's name is taken over by a new topic at once.
    let mut again = spawn(&format!("publish {name} 10 0"));
    wait_for_line(&mut again, "sent");
    again.kill();
    again.reap();
    Publisher::create(&name, &TopicConfig::default()).expect("create over a dead publisher");
}

#[test]
fn a_selector_waits_on_subscribers_beside_channels() {
    let name = unique("topic-select");
    let _unlink = NameGuard(name.clone());
    let channel_name = unique("topic-select-ch");
    let _unlink_ch = NameGuard(channel_name.clone());
    let mut publisher = Publisher::create(&name, &TopicConfig::default()).expect("create");
    let mut peer = Channel::create(&channel_name, &Default::default()).expect("create");
    let mut set: Vec<Box<dyn Selectable>> = vec![
        Box::new(Channel::connect(&channel_name, WaitStrategy::Block).expect("connect")),
        Box::new(Subscriber::connect(&name, WaitStrategy::Block).expect("join")),
        Box::new(Subscriber::connect(&name, WaitStrategy::Block).expect("join")),
    ];
    let mut selector = Selector::new();
    assert!(selector
        .wait(&mut set, Some(Duration::from_millis(20)))
        .is_empty());
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            publisher.send(b"to all").unwrap();
        });
        let mut ready = selector.wait(&mut set, Some(WATCHDOG)).to_vec();
        if ready.len() < 2 {
            // The second subscriber's word may be looked at before the publish lands.
            ready.extend(selector.wait(&mut set, Some(WATCHDOG)).iter());
        }
        ready.sort_unstable();
        ready.dedup();
        assert_eq!(ready, [1, 2], "both subscribers, not the channel");
    });
    peer.send(b"to one").unwrap();
    // The subscribers' messages are still unread: all three are ready now.
    let mut ready = selector.wait(&mut set, Some(WATCHDOG)).to_vec();
    ready.sort_unstable();
    assert_eq!(ready, [0, 1, 2]);
}

#[test]
fn a_selector_reports_a_lapped_or_dropped_subscriber_ready() {
    let name = unique("topic-select-lag");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &small(TopicMode::Overwrite)).expect("create");
    let mut subs = vec![Subscriber::connect(&name, WaitStrategy::Block).expect("join")];
    // Lapped many times: its position may now lie in the middle of a later frame.
    for seq in 0..1000 {
        publisher.send(&message(seq)).unwrap();
    }
    let mut selector = Selector::new();
    assert_eq!(selector.wait(&mut subs, Some(WATCHDOG)), [0]);
    assert!(matches!(subs[0].try_recv(), Err(RecvError::Lagged { .. })));
    let lossless = unique("topic-select-drop");
    let _unlink2 = NameGuard(lossless.clone());
    let mut publisher = Publisher::create(&lossless, &TopicConfig::default()).expect("create");
    let mut subs = vec![Subscriber::connect(&lossless, WaitStrategy::Block).expect("join")];
    assert!(selector
        .wait(&mut subs, Some(Duration::from_millis(20)))
        .is_empty());
    assert!(publisher.drop_subscriber(subs[0].slot()));
    assert_eq!(selector.wait(&mut subs, Some(WATCHDOG)), [0]);
    assert!(matches!(subs[0].try_recv(), Err(RecvError::Dropped { .. })));
}

#[cfg(feature = "tokio")]
mod async_ends {
    use super::*;
    use shmlink::tokio::{AsyncPublisher, AsyncSubscriber};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn async_ends_wait_for_messages_and_for_room() {
        let name = unique("topic-async");
        let _unlink = NameGuard(name.clone());
        let rt = runtime();
        let mut publisher =
            AsyncPublisher::new(Publisher::create(&name, &small(TopicMode::Lossless)).unwrap())
                .unwrap();
        let mut a =
            AsyncSubscriber::new(Subscriber::connect(&name, WaitStrategy::Block).unwrap()).unwrap();
        let slow = Subscriber::connect(&name, WaitStrategy::Block).unwrap();
        // A receive that waits, woken by a publish from another thread.
        std::thread::scope(|s| {
            let p = &mut publisher;
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                p.get_mut().send(&message(0)).unwrap();
            });
            let got = rt.block_on(a.recv_timeout(WATCHDOG)).map(|m| number(&m));
            assert_eq!(got.unwrap(), 0);
        });
        rt.block_on(async {
            // The slow subscriber fills the ring; a send then waits for it.
            let mut seq = 1;
            while publisher.try_send(&message(seq)).is_ok() {
                seq += 1;
            }
            assert!(matches!(
                publisher
                    .send_timeout(&message(seq), Duration::from_millis(20))
                    .await,
                Err(SendError::Timeout { .. })
            ));
            // Both subscribers read on: the async one in a task, the other on a thread.
            let slow_reader = std::thread::spawn(move || {
                let mut slow = slow;
                std::thread::sleep(Duration::from_millis(20));
                for expected in 0..=seq {
                    assert_eq!(number(&slow.recv_timeout(WATCHDOG).unwrap()), expected);
                }
                slow
            });
            let task = tokio::spawn(async move {
                let mut got = Vec::new();
                while got.len() < seq as usize {
                    a.recv_batch_timeout(10_000, WATCHDOG, |m| got.push(number(m)))
                        .await
                        .unwrap();
                }
                (a, got)
            });
            publisher
                .send_timeout(&message(seq), WATCHDOG)
                .await
                .expect("room once the subscribers read");
            let (mut a, got) = task.await.unwrap();
            assert_eq!(got, (1..=seq).collect::<Vec<_>>());
            let _slow = slow_reader.join().unwrap();
            publisher.send_json(&7u32).await.unwrap();
            drop(publisher);
            let mut buf = Vec::new();
            // Everything left, then the close.
            loop {
                match a.recv_into_timeout(&mut buf, WATCHDOG).await {
                    Ok(_) => {}
                    Err(RecvError::Disconnected { .. }) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            assert_eq!(buf, b"7");
        });
    }

    #[test]
    fn an_async_subscriber_hears_of_a_killed_publisher() {
        let name = unique("topic-async-killed");
        let _unlink = NameGuard(name.clone());
        let mut publisher = spawn(&format!("publish {name} 5 1"));
        runtime().block_on(async {
            let mut sub =
                AsyncSubscriber::new(Subscriber::connect(&name, WaitStrategy::Block).unwrap())
                    .unwrap();
            for seq in 0..5 {
                assert_eq!(number(&sub.recv_timeout(WATCHDOG).await.unwrap()), seq);
            }
            let pid = publisher.pid();
            publisher.kill();
            let end = sub.recv_timeout(WATCHDOG).await.map(|m| m.len());
            match end {
                Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
                other => panic!("expected PeerGone, got {other:?}"),
            }
        });
        publisher.reap();
    }
}

/// A publisher whose claim stays past every message it indexes (here written by hand, with its
/// count of messages set back) cannot keep an overwrite subscriber's receive from returning: it
/// is `Corrupt` after a bounded number of catch-ups, whatever the deadline. (The hostile
/// proptest once met this as a receive that never returned.)
#[test]
fn a_claim_past_every_message_ends_a_receive_with_corrupt() {
    let _dog = support::Watchdog::arm(WATCHDOG, "claim past every message");
    let name = unique("topic-claim");
    let _unlink = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &small(TopicMode::Overwrite)).expect("create");
    let mut sub = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
    for seq in 0..3 {
        publisher.send(&message(seq)).unwrap();
    }
    let map = open_topic(&name);
    let word = |at: usize| {
        // SAFETY: in bounds and 8-aligned; the library reads these words atomically.
        unsafe { &*(map.as_ptr().add(at) as *const AtomicU64) }
    };
    // A claim past every message, and a count of messages back at none: the subscriber's
    // message at its own place is never fresh, and catching up finds nothing it missed.
    word(shmlink::testing::TOPIC_CLAIM_OFFSET).store(u64::MAX, Ordering::SeqCst);
    word(shmlink::testing::TOPIC_PUBLISHED_OFFSET).store(0, Ordering::SeqCst);
    for attempt in [Duration::ZERO, Duration::from_millis(20)] {
        match sub.recv_timeout(attempt) {
            Err(RecvError::Corrupt { channel, .. }) => assert_eq!(&*channel, name),
            other => panic!("a claim past every message: {:?}", other.map(|m| m.len())),
        }
    }
}

mod hostile_proptest {
    use super::*;
    use proptest::prelude::*;

    /// The words of a topic a hostile process may write, as offsets of the mapping of the
    /// small topic these cases make (header, topic info, ring header, the topic's words, the
    /// index, the slots, the ring), and the values written there.
    fn writes() -> impl Strategy<Value = Vec<(usize, u64)>> {
        let config = small(TopicMode::Lossless);
        let (slots, region) = topic_offsets(config.capacity, 0, config.max_subscribers);
        let end = region + config.capacity;
        let offset = prop_oneof![
            0usize..512,
            512usize..2048,
            2048..slots,
            slots..(slots + 4 * TOPIC_SLOT_SIZE),
            region..end,
        ];
        let value = prop_oneof![
            any::<u64>(),
            0u64..4096,
            Just(u64::MAX),
            Just(0),
            (0u32..4).prop_map(u64::from),
        ];
        proptest::collection::vec((offset, value), 0..12)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever a hostile process writes into a topic between the ends' calls, the
        /// publisher, the subscribers and new joiners answer with messages or typed errors, and
        /// no call waits past its deadline.
        #[test]
        fn hostile_words_give_typed_errors(
            overwrite in any::<bool>(),
            before in writes(),
            during in writes(),
            sends in 0usize..300,
        ) {
            let mode = if overwrite { TopicMode::Overwrite } else { TopicMode::Lossless };
            let config = small(mode);
            let name = unique("topic-prop");
            let _unlink = NameGuard(name.clone());
            let mut publisher = Publisher::create(&name, &config).expect("create");
            let mut sub = Subscriber::connect(&name, WaitStrategy::Spin).expect("join");
            let map = open_topic(&name);
            let write = |(at, value): (usize, u64)| {
                let at = at & !7;
                if at + 8 <= map.len() {
                    // SAFETY: in bounds, 8-aligned; the library reads these words atomically
                    // or copies them as bytes.
                    unsafe { &*(map.as_ptr().add(at) as *const AtomicU64) }
                        .store(value, Ordering::SeqCst);
                }
            };
            for w in before {
                write(w);
            }
            let late = Subscriber::connect(&name, WaitStrategy::Spin);
            for (i, w) in during.into_iter().enumerate() {
                write(w);
                for seq in 0..(sends / 12) as u64 {
                    let _ = publisher.try_send(&message(seq + i as u64));
                }
                let _ = publisher.send_timeout(b"x", Duration::from_millis(1));
                for _ in 0..8 {
                    let _ = sub.try_recv().map(|m| m.len());
                    let _ = sub.recv_timeout(Duration::ZERO).map(|m| m.len());
                }
            }
            if let Ok(mut late) = late {
                let _ = late.try_recv_batch(64, |_| {});
            }
            let _ = publisher.subscribers();
        }
    }
}
