//! `ipc-parent fanout`: the rows, the message format, and the subscriber side that
//! `ipc-child --fanout ROW` runs.
//!
//! The parent is the one publisher. Every message it publishes starts with a header of three
//! little-endian `u64`s: the `CLOCK_MONOTONIC` time it was sent at, in nanoseconds (one clock
//! for every process of the machine, so a subscriber can take the one-way latency), its
//! sequence number (from 0, over the warmup and the timed part), and its [`Phase`]; its last
//! byte is the low byte of the sequence number, so that a message cut short or overwritten in
//! the middle of a read is caught. A subscriber checks every message's length, order and last
//! byte, records the latency of the timed ones in a histogram, and on the end message prints a
//! [`SubscriberResult`] on standard output: its span (from its first timed message to its
//! last), the timed messages it got and the histogram.

#[cfg(feature = "iceoryx2")]
pub mod iceoryx;

use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;
use shmlink::{Channel, Subscriber, WaitStrategy};

use crate::client::{monotonic_ns, CONNECT_LIMIT};
use crate::transport::uds::Uds;
use crate::transport::{Options, Peer, Transport};

/// The smallest message of a fan-out run: the header.
pub const MIN_SIZE: usize = 24;

/// The largest latency a histogram records (longer ones count as this).
const HISTOGRAM_LIMIT_NS: u64 = 60_000_000_000;

/// One row of a fan-out run: how the publisher reaches its N subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FanoutRow {
    /// One shmlink topic (`Publisher` / `Subscriber`), every end waiting with `Block`: each
    /// message written once, read in place by every subscriber.
    Topic,
    /// The same topic with every end spinning (`Spin`): only where the publisher and the N
    /// subscribers each have a CPU.
    TopicSpin,
    /// N shmlink `Channel`s (`Block`): the publisher sends each message once per channel.
    Channels,
    /// N Unix stream sockets with the harness's length-prefixed framing: the publisher writes
    /// each message once per socket.
    Uds,
    /// iceoryx2's publish-subscribe service with N subscribers (a build with `--features
    /// iceoryx2`): each message a loaned sample, sent once, then an event that wakes the
    /// subscribers.
    Iceoryx2,
}

impl FanoutRow {
    /// Every row, in the table's order.
    pub const ALL: [FanoutRow; 5] = [
        FanoutRow::Topic,
        FanoutRow::TopicSpin,
        FanoutRow::Channels,
        FanoutRow::Uds,
        FanoutRow::Iceoryx2,
    ];

    /// The name `--transport`, `ipc-child --fanout`, the table and the document use.
    pub fn name(self) -> &'static str {
        match self {
            FanoutRow::Topic => "shmlink-topic",
            FanoutRow::TopicSpin => "shmlink-topic-spin",
            FanoutRow::Channels => "shmlink-channels",
            FanoutRow::Uds => "uds",
            FanoutRow::Iceoryx2 => "iceoryx2",
        }
    }

    /// What the row does, for the tables.
    pub fn about(self) -> &'static str {
        match self {
            FanoutRow::Topic => {
                "one shmlink topic (Publisher / Subscriber), Block: each message written once \
                 into one ring, read in place by every subscriber"
            }
            FanoutRow::TopicSpin => {
                "the same topic with every end spinning (Spin); only where the publisher and \
                 every subscriber have a CPU each"
            }
            FanoutRow::Channels => {
                "N shmlink Channels, Block: the publisher sends each message N times, once per \
                 channel"
            }
            FanoutRow::Uds => {
                "N Unix stream sockets, length-prefixed frames: the publisher writes each \
                 message N times, one write per socket"
            }
            FanoutRow::Iceoryx2 => {
                "iceoryx2's publish-subscribe service with N subscribers (lossless: no safe \
                 overflow, the publisher retries until delivered): a loaned sample per message, \
                 sent once, then an event notification; each subscriber blocks on an event \
                 listener and then receives every sample there, the pattern of iceoryx2's \
                 event-based communication example (no polling)"
            }
        }
    }

    /// Whether this build has the row (iceoryx2 needs `--features iceoryx2`).
    pub fn built(self) -> bool {
        self != FanoutRow::Iceoryx2 || cfg!(feature = "iceoryx2")
    }

    /// How the shmlink ends of the row wait.
    pub fn wait(self) -> WaitStrategy {
        match self {
            FanoutRow::TopicSpin => WaitStrategy::Spin,
            _ => WaitStrategy::Block,
        }
    }

    /// Whether every process of the row spins while it waits, so that it needs a CPU of its
    /// own.
    pub fn spins(self) -> bool {
        self == FanoutRow::TopicSpin
    }
}

impl FromStr for FanoutRow {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<FanoutRow> {
        let s = s.trim();
        FanoutRow::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = FanoutRow::ALL.iter().map(|r| r.name()).collect();
                anyhow!("unknown fanout row {s:?} (rows: {})", names.join(", "))
            })
    }
}

/// Where a message stands in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Sent before the timed part: checked, not counted.
    Warmup = 0,
    /// Counted and timed.
    Timed = 1,
    /// The last message of the round: the subscriber reports and exits.
    End = 2,
}

/// The header of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `CLOCK_MONOTONIC` when the publisher sent it, in nanoseconds.
    pub sent_ns: u64,
    /// Its number in the round, from 0.
    pub seq: u64,
    pub phase: Phase,
}

fn word(bytes: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
    u64::from_le_bytes(w)
}

impl Header {
    /// Writes the header into `msg` (at least [`MIN_SIZE`] bytes) and the low byte of the
    /// sequence number into its last byte.
    pub fn write(&self, msg: &mut [u8]) {
        msg[0..8].copy_from_slice(&self.sent_ns.to_le_bytes());
        msg[8..16].copy_from_slice(&self.seq.to_le_bytes());
        msg[16..24].copy_from_slice(&(self.phase as u64).to_le_bytes());
        if msg.len() > MIN_SIZE {
            msg[msg.len() - 1] = self.seq as u8;
        }
    }

    /// Reads the header of a message of `size` bytes; `None` when the length, the phase or the
    /// last byte is not what [`write`](Header::write) makes.
    pub fn read(msg: &[u8], size: usize) -> Option<Header> {
        if msg.len() != size || size < MIN_SIZE {
            return None;
        }
        let phase = match word(msg, 2) {
            0 => Phase::Warmup,
            1 => Phase::Timed,
            2 => Phase::End,
            _ => return None,
        };
        let seq = word(msg, 1);
        if size > MIN_SIZE && msg.last() != Some(&(seq as u8)) {
            return None;
        }
        Some(Header {
            sent_ns: word(msg, 0),
            seq,
            phase,
        })
    }
}

/// What one subscriber measured in one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberResult {
    /// `CLOCK_MONOTONIC` when its first timed message arrived, in nanoseconds.
    pub start_ns: u64,
    /// When its last timed message arrived.
    pub end_ns: u64,
    /// Timed messages received (all of them: a gap fails the subscriber).
    pub messages: u64,
    /// The one-way latencies of the timed messages: (value in ns, count) per recorded bucket
    /// of the histogram, so that the parent can merge every subscriber's.
    pub histogram: Vec<(u64, u64)>,
}

impl SubscriberResult {
    /// Messages per second over the subscriber's own span (0 for fewer than two messages).
    pub fn msgs_per_s(&self) -> f64 {
        let span = self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        if span > 0.0 {
            self.messages as f64 / span
        } else {
            0.0
        }
    }

    /// The lines a subscriber prints: `result START END MESSAGES` and `latency V:C V:C ...`.
    pub fn lines(&self) -> String {
        let mut out = format!(
            "result {} {} {}\nlatency",
            self.start_ns, self.end_ns, self.messages
        );
        for (value, count) in &self.histogram {
            out.push_str(&format!(" {value}:{count}"));
        }
        out
    }

    /// Reads what [`lines`](SubscriberResult::lines) wrote (the last such pair of `text`).
    pub fn parse(text: &str) -> anyhow::Result<SubscriberResult> {
        let find = |tag: &str| {
            text.lines()
                .rev()
                .find(|l| l.split_whitespace().next() == Some(tag))
                .ok_or_else(|| anyhow!("no {tag} line in the subscriber's output {text:?}"))
        };
        let line = find("result")?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("subscriber result {line:?}"))?;
        let [start_ns, end_ns, messages] = f[..] else {
            bail!("subscriber result {line:?}");
        };
        let histogram = find("latency")?
            .split_whitespace()
            .skip(1)
            .map(|pair| {
                let (v, c) = pair
                    .split_once(':')
                    .ok_or_else(|| anyhow!("latency bucket {pair:?}"))?;
                Ok((
                    v.parse().context("latency value")?,
                    c.parse().context("latency count")?,
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(SubscriberResult {
            start_ns,
            end_ns,
            messages,
            histogram,
        })
    }
}

/// A latency histogram as every fan-out histogram is made (1 ns to a minute, 3 digits).
pub fn new_histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, HISTOGRAM_LIMIT_NS, 3).map_err(|e| anyhow!("histogram: {e}"))
}

/// The subscriber's side of a round: checks every message and measures the timed ones.
pub struct Tally {
    size: usize,
    next_seq: u64,
    messages: u64,
    start_ns: u64,
    end_ns: u64,
    histogram: Histogram<u64>,
}

impl Tally {
    pub fn new(size: usize) -> anyhow::Result<Tally> {
        if size < MIN_SIZE {
            bail!("fan-out messages are at least {MIN_SIZE} bytes");
        }
        Ok(Tally {
            size,
            next_seq: 0,
            messages: 0,
            start_ns: 0,
            end_ns: 0,
            histogram: new_histogram()?,
        })
    }

    /// Takes one message as it arrived: true when it was the end message.
    #[inline]
    pub fn take(&mut self, msg: &[u8]) -> anyhow::Result<bool> {
        let now = monotonic_ns();
        let Some(h) = Header::read(msg, self.size) else {
            bail!(
                "message {} is damaged ({} bytes, {} expected)",
                self.next_seq,
                msg.len(),
                self.size
            );
        };
        if h.seq != self.next_seq {
            bail!(
                "message {} arrived where {} was due: lost or out of order",
                h.seq,
                self.next_seq
            );
        }
        self.next_seq += 1;
        match h.phase {
            Phase::Warmup => {}
            Phase::Timed => {
                if self.messages == 0 {
                    self.start_ns = now;
                }
                self.end_ns = now;
                self.messages += 1;
                self.histogram
                    .saturating_record(now.saturating_sub(h.sent_ns).max(1));
            }
            Phase::End => return Ok(true),
        }
        Ok(false)
    }

    pub fn result(&self) -> SubscriberResult {
        SubscriberResult {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            messages: self.messages,
            histogram: self
                .histogram
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }
}

/// What one subscriber does.
#[derive(Debug, Clone)]
pub struct SubscriberSpec {
    pub row: FanoutRow,
    /// The topic, the channel, the socket path or the iceoryx2 service name.
    pub address: String,
    /// Bytes per message.
    pub size: usize,
    /// The socket buffers of the uds row.
    pub ring_size: usize,
}

/// How often a subscriber that waits with a deadline looks whether its parent still runs.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Runs one subscriber of `spec.row` to the end of the round: connect, then check and measure
/// every message until the end message.
pub fn run_subscriber(spec: &SubscriberSpec) -> anyhow::Result<SubscriberResult> {
    let mut tally = Tally::new(spec.size)?;
    let name = spec.address.as_str();
    match spec.row {
        FanoutRow::Topic | FanoutRow::TopicSpin => {
            let mut sub = Subscriber::connect(name, spec.row.wait())
                .with_context(|| format!("joining topic {name}"))?;
            loop {
                let msg = sub.recv()?;
                if tally.take(&msg)? {
                    break;
                }
            }
        }
        FanoutRow::Channels => {
            let mut ch = Channel::connect_timeout(name, spec.row.wait(), CONNECT_LIMIT)
                .with_context(|| format!("connecting channel {name}"))?;
            loop {
                let msg = ch.recv()?;
                if tally.take(&msg)? {
                    break;
                }
            }
        }
        FanoutRow::Uds => {
            let opts = Options {
                ring_size: spec.ring_size,
                max_message: spec.size,
                connect_timeout: CONNECT_LIMIT,
                ..Options::default()
            };
            let mut t = Uds::connect(name, &opts, Peer::parent())
                .with_context(|| format!("connecting {name}"))?;
            while !t.recv_with(|msg| Ok(tally.take(msg)))?? {}
        }
        FanoutRow::Iceoryx2 => {
            #[cfg(feature = "iceoryx2")]
            iceoryx::subscribe(name, &mut tally, Peer::parent())?;
            #[cfg(not(feature = "iceoryx2"))]
            bail!("the iceoryx2 row needs a harness built with --features iceoryx2");
        }
    }
    Ok(tally.result())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_by_name() {
        for row in FanoutRow::ALL {
            assert_eq!(row.name().parse::<FanoutRow>().unwrap(), row);
        }
        assert!("shm".parse::<FanoutRow>().is_err());
        assert!(FanoutRow::Topic.built() && FanoutRow::Uds.built());
        assert_eq!(FanoutRow::Iceoryx2.built(), cfg!(feature = "iceoryx2"));
    }

    #[test]
    fn headers_round_trip_and_damage_is_caught() {
        for size in [MIN_SIZE, 25, 64, 4096] {
            let mut msg = vec![0xa5; size];
            let h = Header {
                sent_ns: 123_456_789,
                seq: 300,
                phase: Phase::Timed,
            };
            h.write(&mut msg);
            assert_eq!(Header::read(&msg, size), Some(h));
            // Another length, a bad phase, a torn last byte.
            assert_eq!(Header::read(&msg[..size - 1], size), None);
            let mut bad = msg.clone();
            bad[16] = 7;
            assert_eq!(Header::read(&bad, size), None);
            if size > MIN_SIZE {
                let mut torn = msg.clone();
                *torn.last_mut().unwrap() ^= 1;
                assert_eq!(Header::read(&torn, size), None);
            }
        }
        assert!(Tally::new(MIN_SIZE - 1).is_err());
    }

    #[test]
    fn a_tally_counts_the_timed_messages_in_order_and_refuses_a_gap() {
        let size = 64;
        let mut tally = Tally::new(size).unwrap();
        let mut msg = vec![0; size];
        let phases = [Phase::Warmup, Phase::Timed, Phase::Timed, Phase::Timed];
        for (seq, phase) in phases.into_iter().enumerate() {
            Header {
                sent_ns: monotonic_ns(),
                seq: seq as u64,
                phase,
            }
            .write(&mut msg);
            assert!(!tally.take(&msg).unwrap());
        }
        Header {
            sent_ns: 0,
            seq: 4,
            phase: Phase::End,
        }
        .write(&mut msg);
        assert!(tally.take(&msg).unwrap());
        let r = tally.result();
        assert_eq!(r.messages, 3);
        assert_eq!(r.histogram.iter().map(|&(_, c)| c).sum::<u64>(), 3);
        assert!(r.end_ns >= r.start_ns);

        let mut tally = Tally::new(size).unwrap();
        Header {
            sent_ns: 0,
            seq: 1,
            phase: Phase::Timed,
        }
        .write(&mut msg);
        let err = tally.take(&msg).unwrap_err().to_string();
        assert!(err.contains("lost or out of order"), "{err}");
    }

    #[test]
    fn result_lines_round_trip() {
        let r = SubscriberResult {
            start_ns: 1_000,
            end_ns: 2_000_001_000,
            messages: 4_000,
            histogram: vec![(150, 3_000), (1_200, 999), (40_000, 1)],
        };
        let text = format!("noise\n{}\n", r.lines());
        assert_eq!(SubscriberResult::parse(&text).unwrap(), r);
        assert_eq!(r.msgs_per_s(), 2_000.0);
        let empty = SubscriberResult {
            histogram: Vec::new(),
            ..r
        };
        assert_eq!(SubscriberResult::parse(&empty.lines()).unwrap(), empty);
        assert!(SubscriberResult::parse("result 1 2").is_err());
        assert!(SubscriberResult::parse("result 1 2 3\nlatency 4").is_err());
    }
}
