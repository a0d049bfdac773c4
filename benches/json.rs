//! The JSON work of the library, in one process (no IPC), with serde_json beside two SIMD JSON
//! crates with serde front ends, sonic-rs and simd-json.
//!
//! Three documents: the harness's ping (see `bin/src/workload.rs`: two 36-character ids and a
//! millisecond timestamp, about 120 bytes), a page of records (`records/4k`, about 4 KiB) and a
//! large one (`records/1m`, about 1 MiB). Records have integers, a float, a bool, and strings
//! with and without escapes.
//!
//! - `json/encode/<doc>/<codec>`: serialise into a buffer the sender owns and reuses
//!   (`serde_json/into_slice` is `serde_json::to_writer` into a fixed slice through
//!   `SliceWriter`, what `send_json` does with a write grant; the others write into a reused
//!   `Vec`, the only target sonic-rs serialises into).
//! - `json/decode/<doc>/<codec>`: what a receiver does per message: copy the frame's bytes into a
//!   reused private buffer (as `ReadGuard::json` does: the peer can write the frame) and decode
//!   that copy, `&str` fields borrowed from it where the type asks. serde_json checks the copy
//!   as UTF-8 once and parses it as `&str` (the library's way); sonic-rs parses the bytes
//!   (`from_slice`, which validates UTF-8 itself); simd-json parses in place, which its API
//!   requires (it rewrites the buffer), so the fresh copy per message is part of its cost in any
//!   case.
//! - `json/round_trip/<codec>`: the codec work of one ping-pong round trip on the ping (encode
//!   ping, copy, decode, encode pong, copy, decode): the harness's `serde` row.
//!   `serde_json/reference` is the seed's owned way (`to_vec`, owned `String`s, `u128`).
//!
//! Every codec's output is checked to decode to the same value before anything is timed.

use std::borrow::Cow;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde::{Deserialize, Serialize};
use shmlink::testing::SliceWriter;

/// The harness's ping / pong: ids borrowed, `u64` milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Ping<'a> {
    sender_id: &'a str,
    receiver_id: &'a str,
    sent_at_ms: u64,
}

/// The reference's message: owned ids, `u128` milliseconds.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct OwnedPing {
    sender_id: String,
    receiver_id: String,
    sent_at_ms: u128,
}

/// One record of the larger documents. `Cow` strings borrow from the decoded bytes where they
/// hold no escape, as a receiver that wants speed would declare them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record<'a> {
    id: u64,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    note: Cow<'a, str>,
    score: f64,
    delta: i32,
    active: bool,
    tags: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Records<'a> {
    #[serde(borrow)]
    records: Vec<Record<'a>>,
}

const PARENT_ID: &str = "5f0c9a3e-1b2d-4e6f-8a7b-9c0d1e2f3a4b";
const CHILD_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d";
/// A realistic 13-digit millisecond timestamp.
const SENT_AT_MS: u64 = 1_764_444_156_789;

fn ping() -> Ping<'static> {
    Ping {
        sender_id: PARENT_ID,
        receiver_id: CHILD_ID,
        sent_at_ms: SENT_AT_MS,
    }
}

fn pong<'a>(p: &Ping<'a>) -> Ping<'a> {
    Ping {
        sender_id: p.receiver_id,
        receiver_id: p.sender_id,
        sent_at_ms: p.sent_at_ms,
    }
}

/// `n` records, every fourth with a note that needs escapes.
fn records(n: usize) -> Records<'static> {
    Records {
        records: (0..n)
            .map(|i| Record {
                id: 1_000_000 + i as u64 * 7919,
                name: Cow::Owned(format!("user-{i:06}-{:08x}", i.wrapping_mul(2_654_435_761))),
                note: Cow::Owned(if i % 4 == 0 {
                    format!("line \"{i}\"\n\tsecond line \\ tab, caf\u{e9}")
                } else {
                    format!("plain note number {i} with some words in it")
                }),
                // Quarter steps: every codec reads them back exactly (serde_json's default float
                // parsing is not correctly rounded for every double).
                score: i as f64 * 0.25 + 0.5,
                delta: (i as i32 % 200) - 100,
                active: i % 3 != 0,
                tags: (0..(i % 5) as u32).map(|t| t * 31 + i as u32).collect(),
            })
            .collect(),
    }
}

/// The codecs compared.
#[derive(Clone, Copy, Debug)]
enum Codec {
    SerdeJson,
    Sonic,
    Simd,
}

const CODECS: [Codec; 3] = [Codec::SerdeJson, Codec::Sonic, Codec::Simd];

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Codec::SerdeJson => "serde_json",
            Codec::Sonic => "sonic_rs",
            Codec::Simd => "simd_json",
        }
    }

    /// Serialises `value` into `out` (cleared first).
    #[inline]
    fn encode<T: Serialize>(self, out: &mut Vec<u8>, value: &T) {
        out.clear();
        match self {
            Codec::SerdeJson => serde_json::to_writer(&mut *out, value).unwrap(),
            Codec::Sonic => sonic_rs::to_writer(&mut *out, value).unwrap(),
            Codec::Simd => simd_json::to_writer(&mut *out, value).unwrap(),
        }
    }

    /// Copies `frame` into `copy` (as the receiver does) and decodes the copy.
    #[inline]
    fn decode<'a, T: Deserialize<'a>>(self, frame: &[u8], copy: &'a mut Vec<u8>) -> T {
        copy.clear();
        copy.extend_from_slice(frame);
        match self {
            Codec::SerdeJson => {
                let text = std::str::from_utf8(copy).unwrap();
                serde_json::from_str(text).unwrap()
            }
            Codec::Sonic => sonic_rs::from_slice(copy).unwrap(),
            Codec::Simd => simd_json::from_slice(copy).unwrap(),
        }
    }
}

/// serde_json into `buf` through `SliceWriter`, as `send_json` writes into a grant; returns the
/// bytes written.
#[inline]
fn serde_into_slice<T: Serialize>(buf: &mut [u8], value: &T) -> usize {
    let mut out = SliceWriter::new(buf);
    serde_json::to_writer(&mut out, value).expect("the value fits");
    out.written()
}

/// Checks that every codec's text decodes, with every codec, to `value`.
fn check<T>(value: &T)
where
    T: Serialize + PartialEq + std::fmt::Debug + for<'a> Deserialize<'a>,
{
    for enc in CODECS {
        let mut text = Vec::new();
        enc.encode(&mut text, value);
        for dec in CODECS {
            let mut copy = Vec::new();
            let back: T = dec.decode(&text, &mut copy);
            assert_eq!(
                &back,
                value,
                "{} text decoded by {}",
                enc.name(),
                dec.name()
            );
        }
    }
}

fn docs() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let mut text = Vec::new();
    Codec::SerdeJson.encode(&mut text, &ping());
    out.push(("ping", text));
    for (name, n) in [("records_4k", 34), ("records_1m", 8_800)] {
        let mut text = Vec::new();
        Codec::SerdeJson.encode(&mut text, &records(n));
        out.push((name, text));
    }
    out
}

fn encode(c: &mut Criterion) {
    check_all();
    let mut g = c.benchmark_group("json/encode");
    let msg = ping();
    let mut slice = [0u8; 512];
    let mut out = Vec::with_capacity(2 << 20);
    g.throughput(Throughput::Elements(1));
    g.bench_function("ping/serde_json/into_slice", |b| {
        b.iter(|| serde_into_slice(black_box(&mut slice), black_box(&msg)))
    });
    for codec in CODECS {
        g.bench_function(BenchmarkId::new("ping", codec.name()), |b| {
            b.iter(|| codec.encode(black_box(&mut out), black_box(&msg)))
        });
    }
    for (name, n) in [("records_4k", 34), ("records_1m", 8_800)] {
        let doc = records(n);
        codec_len(&doc, &mut g, name);
        for codec in CODECS {
            g.bench_function(BenchmarkId::new(name, codec.name()), |b| {
                b.iter(|| codec.encode(black_box(&mut out), black_box(&doc)))
            });
        }
    }
    g.finish();
}

/// Sets the group's throughput to the document's length in bytes.
fn codec_len<T: Serialize>(
    doc: &T,
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
) {
    let mut text = Vec::new();
    Codec::SerdeJson.encode(&mut text, doc);
    eprintln!("{name}: {} bytes", text.len());
    g.throughput(Throughput::Bytes(text.len() as u64));
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("json/decode");
    let mut copy = Vec::with_capacity(2 << 20);
    for (name, text) in docs() {
        g.throughput(if name == "ping" {
            Throughput::Elements(1)
        } else {
            Throughput::Bytes(text.len() as u64)
        });
        for codec in CODECS {
            g.bench_function(BenchmarkId::new(name, codec.name()), |b| {
                if name == "ping" {
                    b.iter(|| {
                        let p: Ping<'_> = codec.decode(black_box(&text), &mut copy);
                        p.sent_at_ms
                    })
                } else {
                    b.iter(|| {
                        let r: Records<'_> = codec.decode(black_box(&text), &mut copy);
                        r.records.len()
                    })
                }
            });
        }
    }
    g.finish();
}

/// One round trip's codec work on the ping: encode, copy and decode it, encode the pong, copy
/// and decode it.
fn round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("json/round_trip");
    g.throughput(Throughput::Elements(1));
    let (mut a, mut b_) = (Vec::with_capacity(512), Vec::with_capacity(512));
    let (mut ca, mut cb) = (Vec::with_capacity(512), Vec::with_capacity(512));
    for codec in CODECS {
        g.bench_function(codec.name(), |b| {
            b.iter(|| {
                codec.encode(&mut a, black_box(&ping()));
                let got: Ping<'_> = codec.decode(black_box(&a), &mut ca);
                codec.encode(&mut b_, &pong(&got));
                let back: Ping<'_> = codec.decode(black_box(&b_), &mut cb);
                back.sent_at_ms
            })
        });
    }
    g.bench_function("serde_json/reference", |b| {
        b.iter(|| {
            let bytes = serde_json::to_vec(black_box(&OwnedPing {
                sender_id: PARENT_ID.to_owned(),
                receiver_id: CHILD_ID.to_owned(),
                sent_at_ms: u128::from(SENT_AT_MS),
            }))
            .unwrap();
            let got: OwnedPing = serde_json::from_slice(black_box(&bytes)).unwrap();
            let bytes = serde_json::to_vec(&OwnedPing {
                sender_id: got.receiver_id,
                receiver_id: got.sender_id,
                sent_at_ms: got.sent_at_ms,
            })
            .unwrap();
            let back: OwnedPing = serde_json::from_slice(black_box(&bytes)).unwrap();
            back.sent_at_ms
        })
    });
    g.finish();
}

/// Every codec agrees on every document, and the ping's text is the reference's.
fn check_all() {
    let mut buf = [0u8; 512];
    let n = serde_into_slice(&mut buf, &ping());
    let reference = serde_json::to_vec(&OwnedPing {
        sender_id: PARENT_ID.into(),
        receiver_id: CHILD_ID.into(),
        sent_at_ms: SENT_AT_MS.into(),
    })
    .unwrap();
    assert_eq!(&buf[..n], &reference[..], "u64 and u128 encode alike");
    // `Ping` borrows, so it is checked through its owned twin.
    check(&OwnedPing {
        sender_id: PARENT_ID.into(),
        receiver_id: CHILD_ID.into(),
        sent_at_ms: SENT_AT_MS.into(),
    });
    check_records(&records(34));
    check_records(&records(200));
}

/// [`check`] for the borrowing `Records`.
fn check_records(value: &Records<'_>) {
    for enc in CODECS {
        let mut text = Vec::new();
        enc.encode(&mut text, value);
        for dec in CODECS {
            let mut copy = Vec::new();
            let back: Records<'_> = dec.decode(&text, &mut copy);
            assert_eq!(
                &back,
                value,
                "{} text decoded by {}",
                enc.name(),
                dec.name()
            );
        }
    }
}

criterion_group!(benches, encode, decode, round_trip);
criterion_main!(benches);
