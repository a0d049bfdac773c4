//! The JSON codec every JSON send and receive of both backends goes through: serde_json, or
//! with feature `sonic-json` sonic-rs, a SIMD JSON library with a serde front end (about 1.6x
//! faster per round trip of the harness's ping, 1.3x-1.7x on larger documents: see
//! `benches/json.rs`).
//!
//! Either way a failure is serde_json's own `serde_json::Error`, the source the public
//! `SendError::Json` and `RecvError::Json` carry: where sonic-rs fails, serde_json does the work
//! again and reports (see [`sonic`]).
//!
//! [`decode`] is only ever given bytes this process alone writes (a private copy of a frame,
//! a reassembled message, or what a socket delivered), so that the `&str` fields it lends stay
//! what was checked.

use serde::{Deserialize, Serialize};

/// What a codec reports.
pub(crate) type Error = serde_json::Error;

/// True where [`encode_into`] may write straight into a slice (a ring's write grant): serde_json
/// writes piece by piece; sonic-rs wants room for the worst case of each string first (six
/// bytes a character), so it writes into a buffer and the text is copied from there.
pub(crate) const ENCODES_IN_PLACE: bool = cfg!(not(feature = "sonic-json"));

/// Serialises `value` into `out`. With serde_json an I/O error of `out` (a slice that is full)
/// comes back as an error whose `is_io()` is true.
#[inline]
pub(crate) fn encode_into<W: std::io::Write, T: Serialize + ?Sized>(
    out: W,
    value: &T,
) -> Result<(), Error> {
    #[cfg(not(feature = "sonic-json"))]
    {
        serde_json::to_writer(out, value)
    }
    #[cfg(feature = "sonic-json")]
    {
        // sonic-rs needs a growable buffer: a `Vec` is the only writer it is given (see
        // `ENCODES_IN_PLACE`); anything else goes through one.
        let mut buf = Vec::new();
        encode(&mut buf, value)?;
        let mut out = out;
        out.write_all(&buf).map_err(Error::io)
    }
}

/// Serialises `value` at the end of `out`.
#[inline]
pub(crate) fn encode<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    #[cfg(not(feature = "sonic-json"))]
    {
        serde_json::to_writer(out, value)
    }
    #[cfg(feature = "sonic-json")]
    {
        sonic::encode(out, value)
    }
}

/// Decodes `bytes`, memory only this process writes, as JSON for `T`; `&str` fields borrow
/// from it. Bytes that are not UTF-8 are an error, like any other text that is not JSON.
#[inline]
pub(crate) fn decode<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    #[cfg(not(feature = "sonic-json"))]
    {
        serde_reference::decode(bytes)
    }
    #[cfg(feature = "sonic-json")]
    {
        sonic::decode(bytes)
    }
}

/// serde_json, the default codec, and with feature `sonic-json` the reference the other is
/// tested against.
mod serde_reference {
    use super::Error;

    /// The text checked as UTF-8 once, up front (JSON text always is), then parsed as a `&str`:
    /// serde_json's `from_str` borrows strings without checking each again.
    #[inline]
    pub(super) fn decode<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
        let text = std::str::from_utf8(bytes).map_err(<Error as serde::de::Error>::custom)?;
        serde_json::from_str(text)
    }
}

/// sonic-rs. Its `from_slice` checks every string as UTF-8 (it has since 0.2) and bounds the
/// nesting of typed decoding; its `sanitize` feature (turned on in Cargo.toml) keeps its
/// string encoder from loading past the end of a string.
///
/// Where it fails, serde_json does the same work again and its outcome is the one reported: the
/// errors are serde_json's to the letter (text, line and column, `is_io` / `is_syntax` ...),
/// and a text sonic-rs refuses but serde_json takes decodes as serde_json decodes it. Only the
/// failing case pays for the second pass.
#[cfg(feature = "sonic-json")]
mod sonic {
    use super::{serde_reference, Error};

    #[inline]
    pub(super) fn encode<T: serde::Serialize + ?Sized>(
        out: &mut Vec<u8>,
        value: &T,
    ) -> Result<(), Error> {
        let start = out.len();
        match sonic_rs::to_writer(&mut *out, value) {
            Ok(()) => Ok(()),
            Err(_) => again_encode(out, start, value),
        }
    }

    #[cold]
    #[inline(never)]
    fn again_encode<T: serde::Serialize + ?Sized>(
        out: &mut Vec<u8>,
        start: usize,
        value: &T,
    ) -> Result<(), Error> {
        out.truncate(start);
        serde_json::to_writer(out, value)
    }

    #[inline]
    pub(super) fn decode<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
        match sonic_rs::from_slice(bytes) {
            Ok(value) => Ok(value),
            Err(_) => again_decode(bytes),
        }
    }

    #[cold]
    #[inline(never)]
    fn again_decode<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
        serde_reference::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    /// Texts a peer might send: valid JSON of every kind, and text that is not JSON, is not
    /// UTF-8, has trailing bytes, or is cut short.
    const TEXTS: &[&[u8]] = &[
        b"null",
        b"true",
        b" false ",
        b"0",
        b"-0",
        b"18446744073709551615",
        b"18446744073709551616",
        b"-9223372036854775808",
        b"1.5e300",
        b"1e400",
        b"0.1",
        b"\"\"",
        b"\"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00 \\n\\t\\\"\"",
        b"\"\\ud800\"",
        b"\"\xff\"",
        b"\"\xed\xa0\x80\"",
        b"[1,2,3]",
        b"[1,2,3,]",
        b"{\"a\":1,\"b\":[true,null],\"c\":{\"d\":\"e\"}}",
        b"{\"a\":1,}",
        b"{\"a\" 1}",
        b"{not json",
        b"",
        b"   ",
        b"1 2",
        b"[1] x",
        b"\"abc",
        b"[\"a\",",
        b"nul",
        b"01",
        b"+1",
        b".5",
        b"\x00",
        b"\"a\x01b\"",
    ];

    /// What a decode of `text` as `T` gives, in a form two codecs can be compared by: the value,
    /// or "error".
    fn outcome<T: for<'de> serde::Deserialize<'de> + std::fmt::Debug>(text: &[u8]) -> String {
        match super::decode::<T>(text) {
            Ok(v) => format!("{v:?}"),
            Err(_) => "error".into(),
        }
    }

    #[test]
    fn decode_accepts_json_and_refuses_the_rest() {
        assert_eq!(outcome::<Vec<u32>>(b"[1,2,3]"), "[1, 2, 3]");
        assert_eq!(outcome::<Vec<u32>>(b"{not json"), "error");
        assert_eq!(outcome::<String>(b"\"\xff\""), "error", "not UTF-8");
        assert_eq!(outcome::<u32>(b"1 2"), "error", "trailing bytes");
        let e = super::decode::<Vec<u32>>(b"nope").unwrap_err();
        assert!(e.to_string().contains("line 1 column 2"), "{e}");
        // Borrowed strings come from the bytes given.
        let text = b"{\"k\":\"v\"}".to_vec();
        let m: BTreeMap<&str, &str> = super::decode(&text).unwrap();
        assert_eq!(m["k"].as_ptr(), text[6..].as_ptr());
    }

    #[test]
    fn encode_writes_what_serde_json_writes() {
        let value: Value = serde_json::from_str(
            "{\"a\":[1,-2,3.5,true,null],\"s\":\"caf\u{e9} \\\"q\\\" \\n \\u0001\",\"o\":{}}",
        )
        .unwrap();
        let mut out = Vec::new();
        super::encode(&mut out, &value).unwrap();
        assert_eq!(out, serde_json::to_vec(&value).unwrap());
        let mut slice = [0u8; 4];
        let e = super::encode_into(&mut slice[..], &value).unwrap_err();
        assert!(e.is_io(), "{e}");
    }

    /// With sonic-rs on, both codecs agree on every text (the same value, or both an error) but
    /// for the differences listed in Cargo.toml beside the feature: `-0` is `0.0` rather than
    /// `-0.0`, and nesting between 129 and 255 levels decodes where serde_json refuses it.
    #[cfg(feature = "sonic-json")]
    #[test]
    fn sonic_decodes_every_text_as_serde_json_does() {
        let serde = |t: &[u8]| match super::serde_reference::decode::<Value>(t) {
            Ok(v) => format!("{v:?}"),
            Err(_) => "error".into(),
        };
        let differ: Vec<String> = TEXTS
            .iter()
            .filter(|t| outcome::<Value>(t) != serde(t))
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect();
        assert_eq!(differ, ["-0"]);
        // Nesting within serde_json's limit decodes alike; past it, sonic-rs goes on to 255.
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes();
        assert_eq!(outcome::<Value>(&nest(100)), serde(&nest(100)));
        assert_eq!(serde(&nest(200)), "error");
        assert_ne!(outcome::<Value>(&nest(200)), "error");
        assert_eq!(outcome::<Value>(&nest(300)), "error");
        // Far past either limit: an error, not a stack overflow.
        assert_eq!(outcome::<Value>(&nest(100_000)), "error");
        // The errors are serde_json's, to the letter.
        for &t in TEXTS {
            if let (Err(a), Err(b)) = (
                super::decode::<Value>(t),
                super::serde_reference::decode::<Value>(t),
            ) {
                assert_eq!(a.to_string(), b.to_string());
                assert_eq!(a.classify(), b.classify());
            }
        }
    }

    /// Every text of the list decodes to a value or an error, never a panic.
    #[test]
    fn decode_never_panics_on_the_list() {
        for &text in TEXTS {
            let _ = outcome::<Value>(text);
            let _ = outcome::<String>(text);
            let _ = outcome::<Vec<u64>>(text);
            let _ = outcome::<BTreeMap<String, i64>>(text);
        }
    }
}
