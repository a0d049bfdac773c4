//! The JSON work of the harness's ping, in one process: no IPC.
//!
//! The message is the one `ipc-parent` sends (see `bin/src/workload.rs`): two 36-character
//! ids and a millisecond timestamp, about 120 bytes of JSON.
//!
//! - `json/encode`: `serde_json::to_writer` into a fixed slice (what `Channel::send_json` does
//!   with a write grant), the same through a real grant of an in-process ring (reserve, serialise,
//!   commit, and the consumer releasing the frame), and `serde_json::to_vec` (one allocation per
//!   message, the reference's way).
//! - `json/decode`: `&str` fields borrowed from the bytes (`borrowed`: the text checked as UTF-8
//!   once, then `serde_json::from_str`, as `ReadGuard::json` does; `borrowed_from_slice`:
//!   `serde_json::from_slice`), and into owned `String`s with a `u128` timestamp with
//!   `from_slice` (the reference's way; serde_json parses a `u128` through a heap buffer).
//! - `json/round_trip`: the codec work of one ping-pong round trip (encode ping, decode it, encode
//!   pong, decode it), the harness's `serde` row.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde::{Deserialize, Serialize};
use shmlink::testing::SliceWriter;

/// The harness's ping / pong: ids borrowed, `u64` milliseconds.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
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

fn pong(p: &Ping<'_>) -> Ping<'static> {
    Ping {
        sender_id: CHILD_ID,
        receiver_id: PARENT_ID,
        sent_at_ms: p.sent_at_ms,
    }
}

/// serde_json decoding the way `ReadGuard::json` does: the whole text checked as UTF-8 once,
/// then parsed as a `&str`.
#[inline]
fn serde_decode<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> T {
    let text = std::str::from_utf8(bytes).unwrap();
    serde_json::from_str(text).unwrap()
}

/// serde_json into `buf`; returns the bytes written.
#[inline]
fn serde_encode<T: Serialize>(buf: &mut [u8], value: &T) -> usize {
    let mut out = SliceWriter::new(buf);
    serde_json::to_writer(&mut out, value).expect("the ping fits");
    out.written()
}

/// Room for the ping, with plenty to spare.
const SLICE: usize = 512;

fn check_wire(buf: &mut [u8]) -> usize {
    let n = serde_encode(buf, &ping());
    let reference = serde_json::to_vec(&OwnedPing {
        sender_id: PARENT_ID.into(),
        receiver_id: CHILD_ID.into(),
        sent_at_ms: SENT_AT_MS.into(),
    })
    .unwrap();
    assert_eq!(&buf[..n], &reference[..], "u64 and u128 encode alike");
    n
}

fn encode(c: &mut Criterion) {
    let mut buf = [0u8; SLICE];
    check_wire(&mut buf);
    let mut g = c.benchmark_group("json/encode");
    g.throughput(Throughput::Elements(1));
    let msg = ping();
    g.bench_function("serde_json/into_slice", |b| {
        b.iter(|| serde_encode(black_box(&mut buf), black_box(&msg)))
    });
    let (mut tx, mut rx) = shmlink::ring::new(64 * 1024).unwrap();
    g.bench_function("serde_json/into_grant", |b| {
        b.iter(|| {
            let mut grant = tx.try_reserve(SLICE).unwrap();
            let used = serde_encode(&mut grant, black_box(&msg));
            grant.commit(used);
            drop(black_box(rx.try_read().unwrap()));
        })
    });
    g.bench_function("serde_json/to_vec", |b| {
        b.iter(|| serde_json::to_vec(black_box(&msg)).unwrap())
    });
    g.finish();
}

fn decode(c: &mut Criterion) {
    let mut buf = [0u8; SLICE];
    let n = check_wire(&mut buf);
    let wire = &buf[..n];
    let mut g = c.benchmark_group("json/decode");
    g.throughput(Throughput::Elements(1));
    g.bench_function("serde_json/borrowed", |b| {
        b.iter(|| serde_decode::<Ping<'_>>(black_box(wire)))
    });
    g.bench_function("serde_json/borrowed_from_slice", |b| {
        b.iter(|| serde_json::from_slice::<Ping<'_>>(black_box(wire)).unwrap())
    });
    g.bench_function("serde_json/owned_u128", |b| {
        b.iter(|| serde_json::from_slice::<OwnedPing>(black_box(wire)).unwrap())
    });
    g.finish();
}

/// One round trip's codec work: encode the ping, decode it, encode the pong, decode it.
fn round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("json/round_trip");
    g.throughput(Throughput::Elements(1));
    let mut a = [0u8; SLICE];
    let mut b_ = [0u8; SLICE];
    g.bench_function("serde_json", |b| {
        b.iter(|| {
            let n = serde_encode(&mut a, black_box(&ping()));
            let got: Ping<'_> = serde_decode(black_box(&a[..n]));
            let m = serde_encode(&mut b_, &pong(&got));
            let back: Ping<'_> = serde_decode(black_box(&b_[..m]));
            back.sent_at_ms
        })
    });
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

criterion_group!(benches, encode, decode, round_trip);
criterion_main!(benches);
