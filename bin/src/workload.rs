//! What the parent and the child binaries share: the workload's messages and the command-line
//! vocabulary.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::transport::{JsonMessage, Kind, Transport};
use crate::Error;
use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

/// The workload's message, as the harness sends it on every backend except `raw-sync`: ids
/// borrowed (decoded in place from the received frame), a `u64` millisecond timestamp.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ping<'a> {
    pub sender_id: &'a str,
    pub receiver_id: &'a str,
    pub sent_at_ms: u64,
}

/// [`Ping`] as a family over the borrowed lifetime.
pub struct PingMsg;

impl JsonMessage for PingMsg {
    type Of<'a> = Ping<'a>;
}

/// One round trip of the JSON workload from the parent's side, as the harness does it on every
/// backend but `raw-sync`: the ping serialised by the transport (into the ring on `shm`), the
/// pong decoded with its ids borrowed from the received bytes and checked.
#[inline]
pub fn json_round_trip<T: Transport>(
    t: &mut T,
    parent_id: &str,
    child_id: &str,
) -> Result<(), Error> {
    let sent_at_ms = now_ms() as u64;
    let ping = Ping {
        sender_id: parent_id,
        receiver_id: child_id,
        sent_at_ms,
    };
    t.send_json(&ping)?;
    t.recv_json::<PingMsg, _>(|pong| {
        if pong.sender_id != child_id
            || pong.receiver_id != parent_id
            || pong.sent_at_ms != sent_at_ms
        {
            return Err(crate::garbled(format!("unexpected pong {pong:?}")));
        }
        Ok(())
    })
}

/// The reference project's message, kept for the `raw-sync` row: owned strings, a `u128`
/// timestamp, serialised with `serde_json::to_vec`.
#[derive(Debug, Serialize, Deserialize)]
pub struct OwnedPing {
    pub sender_id: String,
    pub receiver_id: String,
    pub sent_at_ms: u128,
}

/// What the messages of a run are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MessageKind {
    /// The JSON ping / pong of the reference workload.
    Json,
    /// `--size` bytes echoed back.
    Raw,
}

impl MessageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Json => "json",
            MessageKind::Raw => "raw",
        }
    }
}

/// How a (transport, message) pair is exchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// [`Ping`] with borrowed ids, serialised in place.
    Json,
    /// [`OwnedPing`], the reference's handling.
    ReferenceJson,
    /// Bytes echoed back.
    Raw,
    /// Empty messages: the `floor` transport's bounce.
    Bounce,
}

impl Workload {
    pub fn of(kind: Kind, message: MessageKind) -> Workload {
        match (kind, message) {
            (Kind::Floor, _) => Workload::Bounce,
            (_, MessageKind::Raw) => Workload::Raw,
            (Kind::RawSync, MessageKind::Json) => Workload::ReferenceJson,
            (_, MessageKind::Json) => Workload::Json,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// A random UUID-style id (36 characters).
pub fn random_id() -> String {
    let mut words = [0u64; 2];
    for (i, word) in words.iter_mut().enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u32(std::process::id());
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        *word = h.finish();
    }
    let [a, b] = words;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// Writes the round-trip number into a raw payload (its first 8 bytes, and its last byte when
/// it is longer than that), the cheap check that the echo is this message, whole, and not a
/// stale one.
pub fn stamp(buf: &mut [u8], seq: u64) {
    let head = seq.to_le_bytes();
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&head[..n]);
    if buf.len() > 8 {
        if let Some(last) = buf.last_mut() {
            *last = seq as u8;
        }
    }
}

/// Checks an echoed raw payload against [`stamp`].
pub fn check_stamp(buf: &[u8], len: usize, seq: u64) -> bool {
    if buf.len() != len {
        return false;
    }
    let head = seq.to_le_bytes();
    let n = buf.len().min(8);
    buf[..n] == head[..n] && (buf.len() <= 8 || buf.last() == Some(&(seq as u8)))
}

/// Parses `200ms`, `5s`, `1.5s`, `2m`, `500us` or a bare number of seconds.
pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .with_context(|| format!("bad duration {s:?}"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "ns" => value / 1e9,
        "m" | "min" => value * 60.0,
        other => bail!("bad duration unit {other:?} in {s:?} (use ns, us, ms, s or m)"),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        bail!("bad duration {s:?}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses `4096`, `64k`, `64KiB`, `1M`, `1MiB` (powers of 1024).
pub fn parse_size(s: &str) -> anyhow::Result<usize> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: usize = number.parse().with_context(|| format!("bad size {s:?}"))?;
    let factor: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => bail!("bad size unit {other:?} in {s:?}"),
    };
    value
        .checked_mul(factor)
        .ok_or_else(|| anyhow!("size {s:?} too large"))
}

/// Parses a comma list of sizes (`1KiB,64KiB,1MiB,16MiB`).
pub fn parse_sizes(s: &str) -> anyhow::Result<Vec<usize>> {
    let mut sizes = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let size = parse_size(item)?;
        if size == 0 {
            bail!("message sizes must be at least 1 byte");
        }
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }
    if sizes.is_empty() {
        bail!("no message size given");
    }
    Ok(sizes)
}

/// `1 KiB`, `64 KiB`, `16 MiB`, `1000 B`: a size the way tables show it.
pub fn size_label(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (factor, unit) in UNITS {
        if bytes >= factor && bytes % factor == 0 {
            return format!("{} {unit}", bytes / factor);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(
            parse_duration("200ms").ok(),
            Some(Duration::from_millis(200))
        );
        assert_eq!(
            parse_duration("1.5s").ok(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_duration("2").ok(), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m").ok(), Some(Duration::from_secs(60)));
        assert!(parse_duration("fast").is_err() && parse_duration("5 parsecs").is_err());
        assert_eq!(parse_size("4096").ok(), Some(4096));
        assert_eq!(parse_size("64KiB").ok(), Some(64 << 10));
        assert_eq!(parse_size("1M").ok(), Some(1 << 20));
        assert!(parse_size("lots").is_err() && parse_size("99999999999999999999G").is_err());
        assert_eq!(
            parse_sizes("1KiB, 64KiB,1MiB,1KiB").ok(),
            Some(vec![1 << 10, 64 << 10, 1 << 20])
        );
        assert!(parse_sizes("").is_err() && parse_sizes("0").is_err());
        assert_eq!(size_label(1 << 10), "1 KiB");
        assert_eq!(size_label(16 << 20), "16 MiB");
        assert_eq!(size_label(1000), "1000 B");
    }

    #[test]
    fn stamps_catch_stale_and_short_echoes() {
        for len in [1, 7, 8, 9, 64, 4096] {
            let mut buf = vec![0u8; len];
            stamp(&mut buf, 0x0102_0304_0506_0708);
            assert!(check_stamp(&buf, len, 0x0102_0304_0506_0708), "len {len}");
            assert!(!check_stamp(&buf, len, 0x0102_0304_0506_0709), "len {len}");
            assert!(
                !check_stamp(&buf[..len - 1], len, 0x0102_0304_0506_0708),
                "len {len}"
            );
        }
    }

    #[test]
    fn ids_look_like_uuids() {
        let (a, b) = (random_id(), random_id());
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
        assert_ne!(a, b);
    }
}
