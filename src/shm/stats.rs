//! What the counters in a mapping say (`crate::shm::layout::counters`), read without
//! claiming anything: for `shmlink stat`, `shmlink top` and programs that export the figures.
//!
//! Every figure is read once from memory the ends write while they run; each is a recent
//! value, and two figures need not come from the same instant. The counters are information
//! only: an end that writes nonsense into them misleads the viewer and nothing else.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};

use crate::error::OpenError;
use crate::shm::layout::counters::{Counters, COUNTERS_OFFSET};
use crate::shm::layout::listener::LISTENER_MAGIC;
use crate::shm::layout::topic::{
    topic_offsets, SubscriberSlot, TopicInfo, INFO_OFFSET, MAX_INDEX, MAX_SUBSCRIBERS, MIN_INDEX,
    RING_OFFSET, TOPIC_COUNTERS_OFFSET, TOPIC_MAGIC, TOPIC_VERSION,
};
use crate::shm::layout::{
    RingHeader, SegmentHeader, CELL_ALIGN, HEADER_SIZE, MAGIC, READY, RINGS_OFFSET,
};
use crate::shm::mapping::{self, Mapping};

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// One side's counts: a ring's sender's, its receiver's, or a topic subscriber's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Messages sent (a sender) or received (a receiver); a message in fragments counts once.
    pub messages: u64,
    /// Payload bytes of those messages.
    pub bytes: u64,
    /// Fragments of messages longer than a frame.
    pub fragments: u64,
    /// A sender: sends that found the ring full (each wait for room counts once).
    pub full: u64,
    /// Times a wait of this side went to sleep: a blocking wait in the kernel, or an async
    /// task (`shmlink::tokio`) parked until its peer's wake-up.
    pub sleeps: u64,
    /// Wake-up calls this side made to a sleeping peer.
    pub wakes: u64,
    /// A sender: the highest fill of the ring, in bytes, seen when it looked at the reader's
    /// position (at least once a lap, and whenever the ring looked full).
    pub high_water: u64,
    /// Nanoseconds since the Unix epoch at a recent message: stamped with the first message,
    /// every 256th, and whenever the side woke its peer, found the ring full or slept (0:
    /// never).
    pub last_ns: u64,
    /// A topic's subscriber: messages overwritten before it read them.
    pub missed: u64,
}

impl Counts {
    fn read(c: &Counters) -> Counts {
        // Relaxed (all of them): information only, each read once.
        Counts {
            messages: c.messages.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            fragments: c.fragments.load(Relaxed),
            full: c.full.load(Relaxed),
            sleeps: c.sleeps.load(Relaxed),
            wakes: c.wakes.load(Relaxed),
            high_water: c.high_water.load(Relaxed),
            last_ns: c.last_ns.load(Relaxed),
            missed: c.missed.load(Relaxed),
        }
    }

    /// How long ago [`last_ns`](Counts::last_ns) was, if it was ever stamped and is not in
    /// the future.
    pub fn since_last(&self) -> Option<Duration> {
        if self.last_ns == 0 {
            return None;
        }
        let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(self.last_ns);
        SystemTime::now().duration_since(at).ok()
    }
}

/// One ring: a direction of a channel, or a topic's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RingStats {
    /// `"creator->connector"` or `"connector->creator"` for a channel, `"published"` for a
    /// topic.
    pub direction: &'static str,
    /// Bytes in the ring.
    pub capacity: u64,
    /// Bytes written and not yet given back by the reader, as both last published them (for
    /// a topic: not yet read by the slowest live subscriber).
    pub fill: u64,
    /// The writing side's counts.
    pub sender: Counts,
    /// The reading side's counts (all zero for a topic: each subscriber counts its own).
    pub receiver: Counts,
}

/// One subscriber of a topic.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SubscriberStats {
    /// Its slot in the topic's table (what `Publisher::drop_subscriber` takes).
    pub slot: usize,
    /// `joining`, `active` or `dropped`.
    pub state: &'static str,
    /// The pid it recorded (information only).
    pub pid: u32,
    /// Whether a process holds the slot's lock.
    pub alive: bool,
    /// Bytes of the ring between its position and the publisher's.
    pub lag: u64,
    /// Its receiver's counts.
    pub counts: Counts,
}

/// What a channel's, a topic's or a listener's counters say, from [`stats`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// The name it was made under.
    pub name: String,
    /// `"channel"`, `"topic"` or `"listener"`.
    pub kind: &'static str,
    /// A channel's two rings, a topic's one; none for a listener.
    pub rings: Vec<RingStats>,
    /// A topic's subscribers (slots in use).
    pub subscribers: Vec<SubscriberStats>,
    /// A listener's connections now named under it (`<listener>.<pid>.<seq>`, each a channel
    /// with counters of its own), sorted.
    pub clients: Vec<String>,
}

/// Reads the counters of the channel, topic or listener `name` without claiming anything in
/// it. [`OpenError::NotFound`] if there is none, [`OpenError::NotAChannel`] for an object that
/// is not one of them or is not ready yet, [`OpenError::VersionMismatch`] for one made by
/// another version of the layout.
///
/// ```
/// use shmlink::{Channel, Config};
/// let name = format!("doc-stats-{}", std::process::id());
/// let mut a = Channel::create(&name, &Config::default())?;
/// let mut b = Channel::connect(&name, Default::default())?;
/// a.send(b"hello")?;
/// assert_eq!(&*b.recv()?, b"hello");
/// let stats = shmlink::segments::stats(&name)?;
/// let to_connector = &stats.rings[0];
/// assert_eq!(to_connector.sender.messages, 1);
/// assert_eq!(to_connector.receiver.bytes, 5);
/// # Ok::<(), shmlink::Error>(())
/// ```
pub fn stats(name: &str) -> Result<Stats> {
    let file = mapping::open_shm_file(name)?;
    let size = file.metadata()?.len();
    let not_one = |reason: String| OpenError::NotAChannel {
        channel: name.into(),
        reason,
    };
    if size < HEADER_SIZE as u64 {
        return Err(not_one(format!(
            "{size} bytes, smaller than a channel header"
        )));
    }
    let head = Mapping::prefix_of_shm_file(file.try_clone()?, name, HEADER_SIZE)?;
    let at = |offset: usize| {
        // SAFETY: every offset passed is inside the header page, 8-aligned (or 128-aligned
        // for the ring headers and counters), and what lies there is all atomics.
        unsafe { head.ptr().as_ptr().add(offset) }
    };
    // SAFETY: see `at`.
    let hdr = unsafe { &*at(0).cast::<SegmentHeader>() };
    // Relaxed: the first word, read once and judged.
    let magic = hdr.magic.load(Relaxed);
    // Acquire: pairs with the creator's Release store of `ready`.
    if hdr.ready.load(std::sync::atomic::Ordering::Acquire) != READY {
        return Err(not_one("its creator has not finished making it".into()));
    }
    let base = Stats {
        name: name.into(),
        kind: "channel",
        rings: Vec::new(),
        subscribers: Vec::new(),
        clients: Vec::new(),
    };
    let ring =
        |direction, header: usize, capacity: usize, sender: usize, receiver: Option<usize>| {
            // SAFETY: see `at`.
            let ring = unsafe { &*at(header).cast::<RingHeader>() };
            // Relaxed: information only.
            let tail = ring.tail.load(Relaxed);
            let head = ring.head.load(Relaxed);
            // SAFETY: see `at`.
            let counts = |offset: usize| Counts::read(unsafe { &*at(offset).cast::<Counters>() });
            RingStats {
                direction,
                capacity: capacity as u64,
                fill: tail.saturating_sub(head).min(capacity as u64),
                sender: counts(sender),
                receiver: receiver.map(counts).unwrap_or_default(),
            }
        };
    match magic {
        MAGIC => {
            let capacity = hdr.validate(magic, size as usize, name)?;
            let ring_at = |i: usize| RINGS_OFFSET + i * std::mem::size_of::<RingHeader>();
            let counters_at = |i: usize| COUNTERS_OFFSET + i * CELL_ALIGN;
            Ok(Stats {
                rings: vec![
                    ring(
                        "creator->connector",
                        ring_at(0),
                        capacity,
                        counters_at(0),
                        Some(counters_at(1)),
                    ),
                    ring(
                        "connector->creator",
                        ring_at(1),
                        capacity,
                        counters_at(2),
                        Some(counters_at(3)),
                    ),
                ],
                ..base
            })
        }
        TOPIC_MAGIC => {
            // Relaxed: published before `ready`, read above with Acquire.
            let version = hdr.version.load(Relaxed);
            if version != TOPIC_VERSION {
                return Err(OpenError::VersionMismatch {
                    channel: name.into(),
                    found: version,
                    expected: TOPIC_VERSION,
                });
            }
            // Relaxed: as above.
            let capacity = hdr.capacity.load(Relaxed);
            let capacity = usize::try_from(capacity)
                .ok()
                .filter(|c| crate::shm::layout::valid_capacity(*c))
                .ok_or_else(|| not_one(format!("a topic of ring capacity {capacity}")))?;
            let published = ring(
                "published",
                RING_OFFSET,
                capacity,
                TOPIC_COUNTERS_OFFSET,
                None,
            );
            // SAFETY: see `at`.
            let tail = unsafe { &*at(RING_OFFSET).cast::<RingHeader>() }
                .tail
                .load(Relaxed);
            let subscribers = subscriber_stats(&file, name, size, tail)?;
            // The ring's reader index is unused on a topic: what is unread is what the slowest
            // live subscriber has not read.
            let fill = subscribers
                .iter()
                .filter(|s| s.alive)
                .map(|s| s.lag)
                .max()
                .unwrap_or(0)
                .min(capacity as u64);
            Ok(Stats {
                kind: "topic",
                rings: vec![RingStats { fill, ..published }],
                subscribers,
                ..base
            })
        }
        LISTENER_MAGIC => Ok(Stats {
            kind: "listener",
            clients: connection_names(name),
            ..base
        }),
        _ => Err(not_one(format!(
            "{size} bytes without the shmlink magic (first word {magic:#018x})"
        ))),
    }
}

/// A topic's subscribers in use, read from its slots once its counts were checked against the
/// object's size (a topic whose counts do not fit lists none); `lag` is measured from `tail`.
pub(crate) fn subscriber_stats(
    file: &std::fs::File,
    name: &str,
    size: u64,
    tail: u64,
) -> Result<Vec<SubscriberStats>> {
    use crate::shm::layout::topic::{slot_lock, state_name};
    use std::os::unix::io::AsRawFd;
    let head = Mapping::prefix_of_shm_file(file.try_clone()?, name, HEADER_SIZE)?;
    // SAFETY: INFO_OFFSET is inside the header page, aligned; `TopicInfo` is all atomics.
    let info = unsafe { &*head.ptr().as_ptr().add(INFO_OFFSET).cast::<TopicInfo>() };
    // Relaxed: published before `ready`, which the caller read with Acquire.
    let slots = info.slots.load(Relaxed) as usize;
    let index_len = info.index_len.load(Relaxed) as usize;
    if !(1..=MAX_SUBSCRIBERS).contains(&slots)
        || !index_len.is_power_of_two()
        || !(MIN_INDEX..=MAX_INDEX).contains(&index_len)
    {
        return Ok(Vec::new());
    }
    let (slots_offset, region_offset) = topic_offsets(index_len, slots);
    if region_offset as u64 > size {
        return Ok(Vec::new());
    }
    let map = Mapping::prefix_of_shm_file(file.try_clone()?, name, region_offset)?;
    let mut out = Vec::new();
    for i in 0..slots {
        // SAFETY: slot `i` lies below `region_offset`, inside the mapping, 128-aligned; all
        // atomics.
        let slot = unsafe {
            &*map
                .ptr()
                .as_ptr()
                .add(slots_offset + i * std::mem::size_of::<SubscriberSlot>())
                .cast::<SubscriberSlot>()
        };
        // Relaxed: information only.
        let state = match state_name(slot.state.load(Relaxed)) {
            "free" => continue,
            state => state,
        };
        out.push(SubscriberStats {
            slot: i,
            state,
            // Relaxed: information only.
            pid: slot.peer.pid.load(Relaxed),
            alive: crate::sys::lock::alive(file.as_raw_fd(), slot_lock(slots_offset, i))?,
            lag: tail.saturating_sub(slot.cursor.load(Relaxed)),
            counts: Counts::read(&slot.counters),
        });
    }
    Ok(out)
}

/// The names of `listener`'s connections (`<listener>.<pid>.<seq>`) now in the shared-memory
/// directory, sorted.
pub(crate) fn connection_names(listener: &str) -> Vec<String> {
    let Some(dir) = mapping::shm_dir() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name();
            let name = file.to_str()?.strip_prefix(mapping::OS_PREFIX)?;
            (mapping::connection_listener(name) == Some(listener)).then(|| name.to_owned())
        })
        .collect();
    out.sort();
    out
}

/// One counter as a metric: its name, its help and how to read it from a side's counts.
type Metric = (&'static str, &'static str, fn(&Counts) -> u64);

/// The counters, as metrics.
const COUNTERS: [Metric; 7] = [
    ("messages", "Messages through this side of the ring.", |c| {
        c.messages
    }),
    ("bytes", "Payload bytes of those messages.", |c| c.bytes),
    (
        "fragments",
        "Fragments of messages longer than a frame.",
        |c| c.fragments,
    ),
    ("full", "Sends that found the ring full.", |c| c.full),
    (
        "sleeps",
        "Waits that slept (blocking, in the kernel, or async tasks parked).",
        |c| c.sleeps,
    ),
    ("wakes", "Wake-up calls made to a sleeping peer.", |c| {
        c.wakes
    }),
    ("missed", "Messages a topic subscriber missed.", |c| {
        c.missed
    }),
];

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition format of the counters of `all` (for a textfile
/// collector): each counter as `shmlink_<what>_total` (messages, bytes, fragments, full,
/// sleeps, wakes, missed) per ring and side, and the gauges `shmlink_high_water_bytes`,
/// `shmlink_last_message_timestamp_seconds`, `shmlink_fill_bytes`, `shmlink_capacity_bytes`
/// and `shmlink_subscriber_lag_bytes`; labels `name`, `kind`, `ring`, `side`, `slot`.
///
/// ```
/// use shmlink::{Channel, Config};
/// let name = format!("doc-prometheus-{}", std::process::id());
/// let mut a = Channel::create(&name, &Config::default())?;
/// a.send(b"hello")?;
/// let text = shmlink::segments::prometheus(&[shmlink::segments::stats(&name)?]);
/// assert!(text.contains("ring=\"creator->connector\",side=\"sender\"} 1\n"));
/// # Ok::<(), shmlink::Error>(())
/// ```
pub fn prometheus(all: &[Stats]) -> String {
    // Every side of every ring and subscriber: its labels and counts.
    let mut sides: Vec<(String, &Counts)> = Vec::new();
    for s in all {
        let base = format!("name=\"{}\",kind=\"{}\"", escape(&s.name), s.kind);
        for r in &s.rings {
            sides.push((
                format!("{base},ring=\"{}\",side=\"sender\"", r.direction),
                &r.sender,
            ));
            if s.kind != "topic" {
                sides.push((
                    format!("{base},ring=\"{}\",side=\"receiver\"", r.direction),
                    &r.receiver,
                ));
            }
        }
        for sub in &s.subscribers {
            sides.push((
                format!(
                    "{base},ring=\"published\",side=\"subscriber\",slot=\"{}\"",
                    sub.slot
                ),
                &sub.counts,
            ));
        }
    }
    let mut out = String::new();
    for (metric, help, get) in COUNTERS {
        let _ = writeln!(out, "# HELP shmlink_{metric}_total {help}");
        let _ = writeln!(out, "# TYPE shmlink_{metric}_total counter");
        for (labels, c) in &sides {
            let _ = writeln!(out, "shmlink_{metric}_total{{{labels}}} {}", get(c));
        }
    }
    let gauge = |out: &mut String, metric: &str, help: &str| {
        let _ = writeln!(out, "# HELP shmlink_{metric} {help}");
        let _ = writeln!(out, "# TYPE shmlink_{metric} gauge");
    };
    gauge(
        &mut out,
        "high_water_bytes",
        "Highest fill of the ring its sender saw.",
    );
    for (labels, c) in sides.iter().filter(|(l, _)| l.contains("side=\"sender\"")) {
        let _ = writeln!(out, "shmlink_high_water_bytes{{{labels}}} {}", c.high_water);
    }
    gauge(
        &mut out,
        "last_message_timestamp_seconds",
        "Time of a recent message.",
    );
    for (labels, c) in sides.iter().filter(|(_, c)| c.last_ns != 0) {
        let _ = writeln!(
            out,
            "shmlink_last_message_timestamp_seconds{{{labels}}} {:.3}",
            c.last_ns as f64 / 1e9
        );
    }
    for (metric, help, get) in [
        (
            "fill_bytes",
            "Bytes in the ring not yet given back by its reader.",
            (|r: &RingStats| r.fill) as fn(&RingStats) -> u64,
        ),
        ("capacity_bytes", "Bytes in the ring.", |r: &RingStats| {
            r.capacity
        }),
    ] {
        gauge(&mut out, metric, help);
        for s in all {
            for r in &s.rings {
                let _ = writeln!(
                    out,
                    "shmlink_{metric}{{name=\"{}\",kind=\"{}\",ring=\"{}\"}} {}",
                    escape(&s.name),
                    s.kind,
                    r.direction,
                    get(r)
                );
            }
        }
    }
    gauge(
        &mut out,
        "subscriber_lag_bytes",
        "Bytes a subscriber is behind its publisher.",
    );
    for s in all {
        for sub in &s.subscribers {
            let _ = writeln!(
                out,
                "shmlink_subscriber_lag_bytes{{name=\"{}\",slot=\"{}\"}} {}",
                escape(&s.name),
                sub.slot,
                sub.lag
            );
        }
    }
    out
}
