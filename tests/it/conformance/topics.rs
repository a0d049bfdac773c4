//! Topics in the one suite: every case written once over [`TopicSurface`] and run on every
//! surface that publishes: `Publisher` and `Subscriber` on shared memory, `EndpointPublisher`
//! and `EndpointSubscriber` on both backends, and (feature `tokio`) `AsyncPublisher` and
//! `AsyncSubscriber` on a tokio runtime. A test reads `conformance::topics::<surface>::<case>`.
//!
//! A topic goes one way, so its ends have half of the method set each: the publisher the
//! sending forms ([`SendEnd`], the same trait the duplex cases send through) and a subscriber
//! the receiving ones ([`RecvEnd`]). The duplex cases above need both on one end and a
//! listener; the cases here check the same forms and, besides, what a topic promises: every
//! subscriber gets every message, a lossless topic waits for the slowest, an overwrite topic
//! tells a lagging subscriber exactly what it missed, history, drops, the limit, deaths. The
//! surfaces differ in nothing these cases check.

use super::*;
use shmlink::{
    EndpointPublisher, EndpointSubscriber, Publisher, Subscriber, SubscriberConfig, SubscriberInfo,
    TopicConfig, TopicMode,
};

/// The role of a re-run of this binary that publishes (given `<surface> <name>`).
pub(crate) const TOPIC_PEER_ROLE: &str = "conformance-topic-peer";

/// One way of publishing and subscribing.
trait TopicSurface: 'static {
    const NAME: &'static str;
    /// The backend a channel of the same name would be made on (for the kinds case).
    const BACKEND: Backend;
    type Pub: SendEnd;
    type Sub: RecvEnd;
    fn create(name: &str, config: &TopicConfig) -> Result<Self::Pub, OpenError>;
    fn subscribe(name: &str, history: usize) -> Result<Self::Sub, OpenError>;
    fn subscribers(publisher: &mut Self::Pub) -> Vec<SubscriberInfo>;
    fn subscriber_count(publisher: &mut Self::Pub) -> usize;
    fn drop_subscriber(publisher: &mut Self::Pub, slot: usize) -> bool;
}

impl MaxFrame for Publisher {
    fn max_frame(&mut self) -> usize {
        Publisher::max_message(self)
    }
}

impl MaxFrame for EndpointPublisher {
    fn max_frame(&mut self) -> usize {
        EndpointPublisher::max_message(self)
    }
}

/// `Publisher` and `Subscriber`.
struct TopicShm;

impl TopicSurface for TopicShm {
    const NAME: &'static str = "topic_shm";
    const BACKEND: Backend = Backend::Shm;
    type Pub = Publisher;
    type Sub = Subscriber;
    fn create(name: &str, config: &TopicConfig) -> Result<Publisher, OpenError> {
        Publisher::create(name, config)
    }
    fn subscribe(name: &str, history: usize) -> Result<Subscriber, OpenError> {
        Subscriber::connect_with(
            name,
            &SubscriberConfig {
                wait: WaitStrategy::Block,
                history,
            },
        )
    }
    fn subscribers(publisher: &mut Publisher) -> Vec<SubscriberInfo> {
        publisher.subscribers()
    }
    fn subscriber_count(publisher: &mut Publisher) -> usize {
        publisher.subscriber_count()
    }
    fn drop_subscriber(publisher: &mut Publisher, slot: usize) -> bool {
        publisher.drop_subscriber(slot)
    }
}

/// `EndpointPublisher` and `EndpointSubscriber` on the backend `B` (0 shared memory, 1
/// ipc-channel).
struct TopicEndpointOn<const B: u8>;

impl<const B: u8> TopicSurface for TopicEndpointOn<B> {
    const NAME: &'static str = if B == 0 {
        "topic_endpoint_shm"
    } else {
        "topic_endpoint_ipc"
    };
    const BACKEND: Backend = if B == 0 {
        Backend::Shm
    } else {
        Backend::IpcChannel
    };
    type Pub = EndpointPublisher;
    type Sub = EndpointSubscriber;
    fn create(name: &str, config: &TopicConfig) -> Result<EndpointPublisher, OpenError> {
        let publisher = EndpointPublisher::create_with(name, config, Self::BACKEND)?;
        assert_eq!(publisher.backend(), Self::BACKEND);
        Ok(publisher)
    }
    fn subscribe(name: &str, history: usize) -> Result<EndpointSubscriber, OpenError> {
        let config = SubscriberConfig {
            wait: WaitStrategy::Block,
            history,
        };
        let sub = EndpointSubscriber::connect_with(name, &config)?;
        assert_eq!(
            sub.backend(),
            Self::BACKEND,
            "the subscriber finds the backend"
        );
        Ok(sub)
    }
    fn subscribers(publisher: &mut EndpointPublisher) -> Vec<SubscriberInfo> {
        publisher.subscribers()
    }
    fn subscriber_count(publisher: &mut EndpointPublisher) -> usize {
        publisher.subscriber_count()
    }
    fn drop_subscriber(publisher: &mut EndpointPublisher, slot: usize) -> bool {
        publisher.drop_subscriber(slot)
    }
}

#[cfg(feature = "tokio")]
mod async_topic {
    //! `AsyncPublisher` and `AsyncSubscriber`, each polled on a tokio runtime of its own.

    use super::super::async_surface::{async_recv_end, async_send_end, Exec};
    use super::*;
    use shmlink::tokio::{AsyncPublisher, AsyncSubscriber};

    pub(super) struct AsyncTopicEnd<T> {
        // First: dropped before the runtime.
        pub(super) ch: T,
        pub(super) rt: Exec,
    }

    async_send_end!(impl [SendEnd for AsyncTopicEnd<AsyncPublisher>]
        max_frame(end) end.ch.get_mut().max_message());
    async_recv_end!(impl [RecvEnd for AsyncTopicEnd<AsyncSubscriber>]);

    pub(super) struct TopicAsync;

    impl TopicSurface for TopicAsync {
        const NAME: &'static str = "topic_async";
        const BACKEND: Backend = Backend::Shm;
        type Pub = AsyncTopicEnd<AsyncPublisher>;
        type Sub = AsyncTopicEnd<AsyncSubscriber>;
        fn create(name: &str, config: &TopicConfig) -> Result<Self::Pub, OpenError> {
            let rt = Exec::new(true);
            let ch = AsyncPublisher::new(Publisher::create(name, config)?)?;
            Ok(AsyncTopicEnd { ch, rt })
        }
        fn subscribe(name: &str, history: usize) -> Result<Self::Sub, OpenError> {
            let rt = Exec::new(true);
            let config = SubscriberConfig {
                wait: WaitStrategy::Block,
                history,
            };
            let ch = AsyncSubscriber::new(Subscriber::connect_with(name, &config)?)?;
            Ok(AsyncTopicEnd { ch, rt })
        }
        fn subscribers(publisher: &mut Self::Pub) -> Vec<SubscriberInfo> {
            publisher.ch.get_mut().subscribers()
        }
        fn subscriber_count(publisher: &mut Self::Pub) -> usize {
            publisher.ch.get_mut().subscriber_count()
        }
        fn drop_subscriber(publisher: &mut Self::Pub, slot: usize) -> bool {
            publisher.ch.get_mut().drop_subscriber(slot)
        }
    }
}

#[cfg(feature = "tokio")]
use async_topic::TopicAsync;

// ---------------------------------------------------------------------------------------------
// Helpers

/// A lossless topic of 64 KiB for at most four subscribers.
fn topic_config() -> TopicConfig {
    TopicConfig {
        capacity: RING,
        max_subscribers: 4,
        ..TopicConfig::default()
    }
}

fn topic_names<T: TopicSurface>(tag: &str) -> Names {
    names_under(&format!("cft-{}-{tag}", T::NAME))
}

/// Waits (bounded by the case's watchdog) until the publisher counts `want` subscribers.
fn until_subscribers<T: TopicSurface>(publisher: &mut T::Pub, want: usize) {
    while T::subscriber_count(publisher) != want {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A `try_` send retried while it is `Full`: on the ipc-channel backend a message handed to a
/// subscriber's sending thread by a deadline form keeps that thread busy until the socket took
/// it, and a `try_` form says so (the watchdog bounds the wait).
fn until_room<T>(mut attempt: impl FnMut() -> Result<T, SendError>) -> T {
    loop {
        match attempt() {
            Err(SendError::Full { .. }) => std::thread::sleep(Duration::from_micros(100)),
            other => return other.expect("a try form"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The cases

/// Every send form, each message received by two subscribers, one through the plain forms
/// (bytes) and one through the typed forms that match how it was sent.
fn every_form_reaches_every_subscriber<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic forms");
    let names = topic_names::<T>("forms");
    let mut p = T::create(&names.name, &topic_config()).expect("create");
    let mut a = T::subscribe(&names.name, 0).expect("subscribe a");
    let mut b = T::subscribe(&names.name, 0).expect("subscribe b");
    let json = |n: &Note| serde_json::to_vec(n).unwrap();
    p.send(b"send").unwrap();
    until_room(|| p.try_send(b"try_send"));
    p.send_timeout(b"send_timeout", WATCHDOG).unwrap();
    p.send_json(&note(1, 10)).unwrap();
    until_room(|| p.try_send_json(&note(2, 20)));
    p.send_json_timeout(&note(3, 30), WATCHDOG).unwrap();
    p.send_value(&11u64).unwrap();
    until_room(|| p.try_send_value(&12u64));
    p.send_value_timeout(&13u64, WATCHDOG).unwrap();
    p.reserve(100, b"reserve").unwrap();
    until_room(|| p.try_reserve(100, b"try_reserve"));
    p.reserve_timeout(100, b"reserve_timeout", WATCHDOG)
        .unwrap();
    until_room(|| p.reserve_and_drop(100));
    let batch: Vec<Vec<u8>> = (0..5).map(|i| numbered(i, 40)).collect();
    assert_eq!(p.send_batch(&batch).unwrap(), 5);
    // On the fallback a `try_` batch ends where a sending thread is busy: the rest follows.
    let mut sent = 0;
    while sent < batch.len() {
        sent += until_room(|| p.try_send_batch(&batch[sent..]));
    }
    assert_eq!(p.send_batch_timeout(&batch, WATCHDOG).unwrap(), 5);
    let mut plain: Vec<Vec<u8>> = vec![
        b"send".to_vec(),
        b"try_send".to_vec(),
        b"send_timeout".to_vec(),
        json(&note(1, 10)),
        json(&note(2, 20)),
        json(&note(3, 30)),
        11u64.to_le_bytes().to_vec(),
        12u64.to_le_bytes().to_vec(),
        13u64.to_le_bytes().to_vec(),
        b"reserve".to_vec(),
        b"try_reserve".to_vec(),
        b"reserve_timeout".to_vec(),
    ];
    for _ in 0..3 {
        plain.extend(batch.iter().cloned());
    }
    // `a`: every message as bytes, through the forms in turn.
    for (i, want) in plain.iter().enumerate() {
        let got = match i % 3 {
            0 => a.recv(),
            1 => a.recv_timeout(WATCHDOG),
            _ => first_not_empty(|| a.try_recv()),
        };
        expect_message(got, want, &format!("subscriber a, message {i}"));
    }
    // `b`: the typed forms.
    let mut buf = vec![0u8; 3];
    assert_eq!(b.recv_into(&mut buf).unwrap(), 4);
    assert_eq!(buf, b"send");
    assert_eq!(b.recv_into_timeout(&mut buf, WATCHDOG).unwrap(), 8);
    assert_eq!(first_not_empty(|| b.try_recv_into(&mut buf)).unwrap(), 12);
    assert_eq!(buf, b"send_timeout");
    assert_eq!(b.recv_json::<Note>().unwrap(), note(1, 10));
    assert_eq!(b.recv_json_timeout::<Note>(WATCHDOG).unwrap(), note(2, 20));
    assert_eq!(
        first_not_empty(|| b.try_recv_json::<Note>()).unwrap(),
        note(3, 30)
    );
    assert_eq!(b.recv_value::<u64>().unwrap(), 11);
    assert_eq!(b.recv_value_timeout::<u64>(WATCHDOG).unwrap(), 12);
    assert_eq!(first_not_empty(|| b.try_recv_value::<u64>()).unwrap(), 13);
    for want in [&b"reserve"[..], b"try_reserve", b"reserve_timeout"] {
        expect_message(b.recv(), want, "a committed grant");
    }
    let mut got = Vec::new();
    while got.len() < 15 {
        let more = match got.len() % 3 {
            0 => b.recv_batch(15 - got.len()),
            1 => b.recv_batch_timeout(15 - got.len(), WATCHDOG),
            _ => first_not_empty(|| match b.try_recv_batch(15 - got.len()) {
                Ok(v) if v.is_empty() => Err(RecvError::Empty {
                    channel: names.name.as_str().into(),
                }),
                other => other,
            }),
        }
        .expect("a batch receive");
        assert!(
            !more.is_empty(),
            "a batch receive that waited handed nothing"
        );
        got.extend(more);
    }
    assert!(got == plain[12..], "the batches changed on the way");
    for sub in [&mut a, &mut b] {
        assert!(matches!(sub.try_recv(), Err(RecvError::Empty { .. })));
    }
    drop((p, a, b));
    assert_nothing_left(&names.name);
}

/// Nothing to read: the `try_` forms are `Empty` and the deadline forms give up at their
/// deadline; messages too long for the topic are `TooLarge` and send nothing.
fn receive_forms_wait_and_give_up_as_on_a_channel<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic deadlines");
    let names = topic_names::<T>("deadlines");
    let mut p = T::create(&names.name, &topic_config()).expect("create");
    let mut s = T::subscribe(&names.name, 0).expect("subscribe");
    assert!(matches!(s.try_recv(), Err(RecvError::Empty { .. })));
    assert!(matches!(
        s.try_recv_json::<Note>(),
        Err(RecvError::Empty { .. })
    ));
    assert!(matches!(
        s.try_recv_value::<u64>(),
        Err(RecvError::Empty { .. })
    ));
    assert!(matches!(s.try_recv_batch(4), Err(RecvError::Empty { .. })));
    assert_gave_up_at_deadline("recv_timeout", recv_timed_out, || s.recv_timeout(SHORT));
    assert_gave_up_at_deadline("recv_json_timeout", recv_timed_out, || {
        s.recv_json_timeout::<Note>(SHORT)
    });
    assert_gave_up_at_deadline("recv_value_timeout", recv_timed_out, || {
        s.recv_value_timeout::<u64>(SHORT)
    });
    let mut buf = Vec::new();
    assert_gave_up_at_deadline("recv_into_timeout", recv_timed_out, || {
        s.recv_into_timeout(&mut buf, SHORT)
    });
    assert_gave_up_at_deadline("recv_batch_timeout", recv_timed_out, || {
        s.recv_batch_timeout(4, SHORT)
    });
    let max = p.max_frame();
    assert!(matches!(
        p.try_send(&vec![0; max + 1]),
        Err(SendError::TooLarge { len, .. }) if len == max + 1
    ));
    // The longest message (on the fallback, whose limit is 256 MiB, 16 MiB of it), sent while
    // the subscriber reads.
    let long = numbered(1, max.min(16 << 20));
    std::thread::scope(|scope| {
        scope.spawn(|| p.send(&long).expect("the longest message"));
        expect_message(s.recv_timeout(CASE_LIMIT), &long, "the longest message");
    });
    drop((p, s));
    assert_nothing_left(&names.name);
}

/// Lossless: the publisher waits for the slowest subscriber (`Full`, deadlines kept, having
/// sent to nobody), until that one reads or is dropped; a dropped subscriber reads at most what
/// was sent, then `Dropped`.
fn a_lossless_topic_waits_for_the_slowest_until_it_is_dropped<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic lossless");
    let names = topic_names::<T>("lossless");
    let mut p = T::create(&names.name, &topic_config()).expect("create");
    let mut fast = T::subscribe(&names.name, 0).expect("subscribe fast");
    let mut slow = T::subscribe(&names.name, 0).expect("subscribe slow");
    until_subscribers::<T>(&mut p, 2);
    let len = (4 << 10).min(p.max_frame());
    let sent = fill(&mut p, len);
    assert!(!sent.is_empty(), "nothing could be sent");
    assert!(matches!(p.try_send(b"x"), Err(SendError::Full { .. })));
    assert!(matches!(
        p.try_send_json(&note(0, 2)),
        Err(SendError::Full { .. })
    ));
    assert!(matches!(
        p.try_reserve(8, b"x"),
        Err(SendError::Full { .. })
    ));
    assert_gave_up_at_deadline("send_timeout", send_timed_out, || {
        p.send_timeout(b"x", SHORT)
    });
    drain(&mut fast, &sent);
    assert!(
        matches!(fast.try_recv(), Err(RecvError::Empty { .. })),
        "a send that failed reached a subscriber"
    );
    // Still held by the slow one.
    assert!(matches!(p.try_send(b"x"), Err(SendError::Full { .. })));
    let subs = T::subscribers(&mut p);
    assert_eq!(subs.len(), 2, "{subs:?}");
    let slow_slot = subs.iter().map(|s| s.slot).max().unwrap();
    assert!(T::drop_subscriber(&mut p, slow_slot));
    assert!(!T::drop_subscriber(&mut p, slow_slot), "dropped twice");
    p.send_timeout(b"after the drop", WATCHDOG)
        .expect("the publisher waits no more for a dropped subscriber");
    expect_message(
        fast.recv_timeout(WATCHDOG),
        b"after the drop",
        "after the drop",
    );
    // The dropped one: a prefix of what was sent before the drop, then `Dropped`, for good.
    let mut read = 0;
    loop {
        match slow.recv_timeout(WATCHDOG) {
            Ok(msg) => {
                assert!(read < sent.len(), "a dropped subscriber read past the drop");
                assert!(
                    msg == numbered(read as u64, sent[read]),
                    "message {read} changed"
                );
                read += 1;
            }
            Err(RecvError::Dropped { channel }) => {
                assert_eq!(&*channel, names.name);
                break;
            }
            Err(e) => panic!("a dropped subscriber: {e:?}"),
        }
    }
    assert!(matches!(slow.try_recv(), Err(RecvError::Dropped { .. })));
    drop((p, fast, slow));
    assert_nothing_left(&names.name);
}

/// A publisher that closes: each subscriber reads everything sent, then `Disconnected`.
fn a_closed_publisher_is_disconnected_after_everything_it_sent<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic close");
    let names = topic_names::<T>("close");
    let mut p = T::create(&names.name, &topic_config()).expect("create");
    let mut subs = [
        T::subscribe(&names.name, 0).expect("subscribe"),
        T::subscribe(&names.name, 0).expect("subscribe"),
    ];
    for i in 0..BEFORE_THE_END {
        p.send(&numbered(i, i as usize * 5)).unwrap();
    }
    drop(p);
    for s in &mut subs {
        for i in 0..BEFORE_THE_END {
            expect_message(
                s.recv_timeout(WATCHDOG),
                &numbered(i, i as usize * 5),
                "before the close",
            );
        }
        assert!(matches!(
            s.recv_timeout(WATCHDOG),
            Err(RecvError::Disconnected { .. })
        ));
        assert!(matches!(s.try_recv(), Err(RecvError::Disconnected { .. })));
    }
    drop(subs);
    assert_nothing_left(&names.name);
}

/// A publisher process killed: each subscriber reads everything sent, then `PeerGone` with its
/// pid; the next publisher takes the name over.
fn a_killed_publisher_is_peer_gone_after_everything_it_sent<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic killed publisher");
    let names = topic_names::<T>("killed");
    let mut child =
        crate::roles::spawn(TOPIC_PEER_ROLE, &format!("{} {}", T::NAME, names.name), &[]);
    wait_for_line(&mut child, "ready");
    let mut subs = [
        T::subscribe(&names.name, 0).expect("subscribe"),
        T::subscribe(&names.name, 0).expect("subscribe"),
    ];
    wait_for_line(&mut child, "sent");
    let pid = child.pid();
    child.kill();
    reap_killed(&mut child);
    for s in &mut subs {
        for i in 0..BEFORE_THE_END {
            expect_message(
                s.recv_timeout(WATCHDOG),
                &numbered(i, i as usize * 3),
                "before the death",
            );
        }
        match s.recv_timeout(WATCHDOG) {
            Err(RecvError::PeerGone { pid: gone, .. }) => assert_eq!(gone, pid),
            other => panic!("after the publisher was killed: {other:?}"),
        }
    }
    drop(subs);
    // The dead publisher's name is taken over by the next one.
    drop(T::create(&names.name, &topic_config()).expect("the name of a dead publisher"));
    assert_nothing_left(&names.name);
}

/// The publisher process of [`a_killed_publisher_is_peer_gone_after_everything_it_sent`].
fn publisher_peer<T: TopicSurface>(name: &str) {
    let mut p = T::create(name, &topic_config()).expect("peer create");
    println!("ready");
    until_subscribers::<T>(&mut p, 2);
    for i in 0..BEFORE_THE_END {
        p.send(&numbered(i, i as usize * 3)).expect("peer send");
    }
    println!("sent");
    wait_to_be_killed();
}

/// Overwrite: the publisher never waits; a subscriber that fell behind is told once how many
/// it missed, and the next message it reads is exactly that many past the last one it read.
fn an_overwrite_topic_tells_exactly_what_was_missed<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic overwrite");
    let names = topic_names::<T>("overwrite");
    let config = TopicConfig {
        mode: TopicMode::Overwrite,
        ..topic_config()
    };
    let mut p = T::create(&names.name, &config).expect("create");
    let mut s = T::subscribe(&names.name, 0).expect("subscribe");
    until_subscribers::<T>(&mut p, 1);
    // Far more than the ring or a socket holds, none of it read: the publisher never waits.
    const SENT: u64 = 20_000;
    for i in 0..SENT {
        p.try_send(&numbered(i, 100))
            .expect("an overwrite topic never waits");
    }
    let mut last: Option<u64> = None;
    let mut lagged = 0u64;
    let mut told = false;
    let mut received = 0u64;
    // Then one more now and then, until the subscriber has caught up with the end.
    let mut next = SENT;
    loop {
        match s.try_recv() {
            Ok(msg) => {
                let n = number_of(&msg);
                assert_eq!(msg, numbered(n, 100), "message {n} changed");
                let want = last.map_or(0, |l| l + 1) + std::mem::take(&mut lagged);
                assert!(
                    n == want || last.is_none() && n >= want,
                    "read message {n} after {last:?} and a lag of {lagged}"
                );
                last = Some(n);
                received += 1;
                if n >= SENT {
                    break;
                }
            }
            Err(RecvError::Lagged { missed, .. }) => {
                assert!(missed > 0, "a lag of nothing");
                assert_eq!(lagged, 0, "a lag told twice in a row");
                lagged = missed;
                told = true;
            }
            Err(RecvError::Empty { .. }) => {
                p.try_send(&numbered(next, 100)).unwrap();
                next += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("overwrite: {e:?}"),
        }
    }
    assert!(told, "a subscriber far behind was never told it lagged");
    assert!(
        received < SENT,
        "every message arrived: the case lapped nobody"
    );
    drop((p, s));
    assert_nothing_left(&names.name);
}

/// History: a late subscriber gets as many of the last kept messages as it asks for, then
/// everything new; one that asks for none gets only what is new.
fn a_late_subscriber_gets_the_history_it_asks_for<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic history");
    let names = topic_names::<T>("history");
    let config = TopicConfig {
        history: 3,
        ..topic_config()
    };
    let mut p = T::create(&names.name, &config).expect("create");
    for i in 0..5 {
        p.send(&numbered(i, 30)).unwrap();
    }
    let mut two = T::subscribe(&names.name, 2).expect("subscribe");
    let mut all = T::subscribe(&names.name, 10).expect("subscribe");
    let mut none = T::subscribe(&names.name, 0).expect("subscribe");
    p.send(&numbered(5, 30)).unwrap();
    for (s, first) in [(&mut two, 3), (&mut all, 2), (&mut none, 5)] {
        for i in first..6 {
            expect_message(
                s.recv_timeout(WATCHDOG),
                &numbered(i, 30),
                "history, then new",
            );
        }
        assert!(matches!(s.try_recv(), Err(RecvError::Empty { .. })));
    }
    drop((p, two, all, none));
    assert_nothing_left(&names.name);
}

/// The subscriber limit: one past it is `TooManySubscribers` (with the limit) until a
/// subscriber leaves.
fn subscribers_past_the_limit_are_refused_until_one_leaves<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic limit");
    let names = topic_names::<T>("limit");
    let config = TopicConfig {
        max_subscribers: 2,
        ..topic_config()
    };
    let mut p = T::create(&names.name, &config).expect("create");
    let a = T::subscribe(&names.name, 0).expect("subscribe");
    let b = T::subscribe(&names.name, 0).expect("subscribe");
    match T::subscribe(&names.name, 0) {
        Err(OpenError::TooManySubscribers { channel, limit }) => {
            assert_eq!(&*channel, names.name);
            assert_eq!(limit, 2);
        }
        other => panic!("past the limit: {:?}", other.map(|_| ())),
    }
    drop(a);
    until_subscribers::<T>(&mut p, 1);
    let mut c = T::subscribe(&names.name, 0).expect("a place was freed");
    p.send(b"to b and c").unwrap();
    expect_message(
        c.recv_timeout(WATCHDOG),
        b"to b and c",
        "the new subscriber",
    );
    drop((p, b, c));
    assert_nothing_left(&names.name);
}

/// A topic is no channel and a channel no topic, on either backend.
fn topics_and_channels_do_not_mix<T: TopicSurface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "topic kinds");
    let names = topic_names::<T>("kinds");
    let p = T::create(&names.name, &topic_config()).expect("create");
    assert!(matches!(
        Endpoint::connect_timeout(&names.name, WaitStrategy::Block, SHORT),
        Err(OpenError::NotAChannel { .. })
    ));
    drop(p);
    assert_nothing_left(&names.name);
    let channel = Endpoint::create_with(&names.name, &config(), T::BACKEND).expect("channel");
    assert!(matches!(
        T::subscribe(&names.name, 0),
        Err(OpenError::NotAChannel { .. })
    ));
    drop(channel);
    assert_nothing_left(&names.name);
}

/// The entry of [`TOPIC_PEER_ROLE`]: `<surface> <name>`.
pub(crate) fn peer_process(args: &str) {
    let (surface, name) = args.split_once(' ').expect("<surface> <name>");
    match surface {
        "topic_shm" => publisher_peer::<TopicShm>(name),
        "topic_endpoint_shm" => publisher_peer::<TopicEndpointOn<0>>(name),
        "topic_endpoint_ipc" => publisher_peer::<TopicEndpointOn<1>>(name),
        #[cfg(feature = "tokio")]
        "topic_async" => publisher_peer::<TopicAsync>(name),
        other => panic!("no topic surface {other}"),
    }
}

macro_rules! topic_suite {
    ($(#[$attr:meta])* $module:ident: $surface:ty; [$($case:ident),* $(,)?]) => {
        $(#[$attr])*
        mod $module {
            $(
                #[test]
                fn $case() {
                    super::$case::<$surface>();
                }
            )*
        }
    };
}

macro_rules! every_topic_surface {
    ($cases:tt) => {
        topic_suite!(topic_shm: super::TopicShm; $cases);
        topic_suite!(topic_endpoint_shm: super::TopicEndpointOn<0>; $cases);
        topic_suite!(topic_endpoint_ipc: super::TopicEndpointOn<1>; $cases);
        topic_suite!(#[cfg(feature = "tokio")] topic_async: super::TopicAsync; $cases);
    };
}

every_topic_surface!([
    every_form_reaches_every_subscriber,
    receive_forms_wait_and_give_up_as_on_a_channel,
    a_lossless_topic_waits_for_the_slowest_until_it_is_dropped,
    a_closed_publisher_is_disconnected_after_everything_it_sent,
    a_killed_publisher_is_peer_gone_after_everything_it_sent,
    an_overwrite_topic_tells_exactly_what_was_missed,
    a_late_subscriber_gets_the_history_it_asks_for,
    subscribers_past_the_limit_are_refused_until_one_leaves,
    topics_and_channels_do_not_mix,
]);
