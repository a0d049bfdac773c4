//! The library's JSON receive path on bytes the peer chose: each input is one message, sent as
//! raw bytes through an in-process ring (the protocol the shared channel uses) and decoded by
//! `ReadGuard::json` (the private copy, then the codec, sonic-rs with serde_json behind it when
//! feature `sonic-json` is on, as this crate builds it) as several types: a `serde_json::Value`,
//! the harness's ping with `&str` fields borrowed from the copy, a list of strings, one string.
//!
//! A value or a `RecvError::Json` naming the ring is the answer; a panic, a crash or a hang is a
//! finding. Where the codec decodes a string or the ping, serde_json must decode the same bytes
//! to the same value (the codecs differ only on `-0` and on nesting, which these types have not).
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use shmlink::ring::{Consumer, Producer};
use shmlink::RecvError;

#[derive(Debug, PartialEq, Deserialize)]
struct Ping<'a> {
    sender_id: &'a str,
    receiver_id: &'a str,
    sent_at_ms: u64,
}

/// Ring capacity: room for the largest message a run feeds (libFuzzer's default `-max_len` is
/// 4096; longer inputs are cut to one frame).
const CAP: usize = 1 << 16;

static RING: Mutex<Option<(Producer, Consumer)>> = Mutex::new(None);

/// Decodes the received message as `T`; checks the outcome is a value or a JSON error naming the
/// ring, and gives the value back as text.
fn decode<'a, T: Deserialize<'a> + std::fmt::Debug>(
    frame: &'a shmlink::ring::ReadGuard<'_>,
) -> Option<T> {
    match frame.json::<T>() {
        Ok(v) => Some(v),
        Err(RecvError::Json { channel, .. }) => {
            assert_eq!(channel.as_str(), "ring");
            None
        }
        Err(e) => panic!("not a JSON error: {e:?}"),
    }
}

/// serde_json's outcome on the same bytes, the reference.
fn reference<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()
}

fuzz_target!(|data: &[u8]| {
    let mut ring = RING.lock().unwrap();
    let (tx, rx) = ring.get_or_insert_with(|| shmlink::ring::new(CAP).expect("a ring"));
    let bytes = &data[..data.len().min(tx.max_len())];
    tx.try_send(bytes)
        .expect("the ring is empty between inputs");
    let frame = rx.try_read().expect("the message just sent");
    let _ = decode::<serde_json::Value>(&frame);
    let _ = decode::<Vec<String>>(&frame);
    if let Some(ping) = decode::<Ping<'_>>(&frame) {
        assert_eq!(Some(&ping), reference::<Ping<'_>>(bytes).as_ref(), "ping");
    }
    if let Some(s) = decode::<String>(&frame) {
        assert_eq!(Some(&s), reference::<String>(bytes).as_ref(), "string");
    }
    drop(frame);
});
