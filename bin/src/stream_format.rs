//! The one-way streaming workload both binaries share.
//!
//! A *phase* is one start message, `count` data messages of `size` bytes from the parent, and one
//! verdict from the child:
//!
//! - start (16 bytes): `count` and `size`, little-endian `u64`s;
//! - message `seq` (`seq` = 0, 1, ...): `seq` as a little-endian `u64` in the first 8 bytes, then
//!   a fixed pattern ([`Stream::new`]);
//! - verdict (24 bytes): messages received, the sum of their digests ([`digest`]), and 0 when
//!   every message had the right length and sequence number (else 1 + the first bad one).
//!
//! The child digests every byte of every message, so a transport cannot skip or defer the copy,
//! and the parent knows the expected sum without digesting anything itself
//! ([`Stream::expected`]). The time of a phase runs from the start message to the verdict.
//!
//! A *bare* phase ([`send_bare_phase`], [`receive_bare_phase`], kernel transports only) sends the
//! data messages unframed ([`Transport::send_bare`]): after the start message the receiver
//! answers [`READY`], so that nothing framed is in flight while the bare messages go, and each
//! message is then one `write` of exactly its bytes on one side and reads until it is whole on
//! the other; the verdict is framed again.
//!
//! A *batch* phase ([`send_batch_phase`], [`receive_batch_phase`]: shm and the kernel byte
//! streams) starts as a bare one and moves the messages [`BATCH`] at a time
//! ([`Transport::send_batch`]); the receiver takes every whole message there per call
//! ([`Transport::recv_batch`]). Each message is still stamped, received and digested on its
//! own.

use crate::Error;

use crate::transport::Transport;

/// Bytes of a start message.
pub const START_LEN: usize = 16;
/// Bytes of a verdict.
pub const VERDICT_LEN: usize = 24;
/// The smallest message: the sequence number.
pub const MIN_SIZE: usize = 8;
/// Messages a batch phase hands to one send.
pub const BATCH: usize = 64;
/// The receiver's answer to the start of a bare phase: ready for the unframed messages.
pub const READY: &[u8; 8] = b"ready-go";

/// The digest of one message: the wrapping sum of its little-endian `u64` words (the tail
/// zero-padded to a word) plus their XOR rotated by 17 bits. Returns (first word, digest) so
/// that the sequence number is read in the same single pass.
#[inline]
pub fn digest(bytes: &[u8]) -> (u64, u64) {
    let (head, body) = bytes.split_at(bytes.len().min(8));
    let first = padded_word(head);
    let mut sum = first;
    let mut xor = first;
    let mut chunks = body.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        sum = sum.wrapping_add(w);
        xor ^= w;
    }
    let w = padded_word(chunks.remainder());
    sum = sum.wrapping_add(w);
    xor ^= w;
    (first, combine(sum, xor))
}

/// Up to 8 bytes as a little-endian word, zero-padded.
#[inline]
fn padded_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

#[inline]
fn combine(sum: u64, xor: u64) -> u64 {
    sum.wrapping_add(xor.rotate_left(17))
}

/// The messages of a stream of one size: a buffer holding the fixed pattern, stamped with each
/// sequence number in turn.
#[derive(Debug, Clone)]
pub struct Stream {
    buf: Vec<u8>,
    /// Sum and XOR of the words after the first (the part every message shares).
    rest_sum: u64,
    rest_xor: u64,
}

impl Stream {
    /// The stream of `size`-byte messages (at least [`MIN_SIZE`]).
    pub fn new(size: usize) -> Stream {
        let size = size.max(MIN_SIZE);
        let buf: Vec<u8> = (0..size)
            .map(|i| (i.wrapping_mul(131).wrapping_add(17)) as u8)
            .collect();
        let mut rest = buf.clone();
        rest[..8].fill(0);
        let mut sum = 0u64;
        let mut xor = 0u64;
        for chunk in rest.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            let w = u64::from_le_bytes(word);
            sum = sum.wrapping_add(w);
            xor ^= w;
        }
        Stream {
            buf,
            rest_sum: sum,
            rest_xor: xor,
        }
    }

    /// Bytes per message.
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// Message `seq`.
    #[inline]
    pub fn message(&mut self, seq: u64) -> &[u8] {
        self.buf[..8].copy_from_slice(&seq.to_le_bytes());
        &self.buf
    }

    /// [`BATCH`] copies of the stream's message, to stamp with [`stamp`].
    pub fn batch(&self) -> Vec<Vec<u8>> {
        vec![self.buf.clone(); BATCH]
    }

    /// The digest of message `seq`, computed without reading it.
    #[inline]
    pub fn digest_of(&self, seq: u64) -> u64 {
        combine(self.rest_sum.wrapping_add(seq), self.rest_xor ^ seq)
    }

    /// The sum of the digests of messages `0..count`.
    pub fn expected(&self, count: u64) -> u64 {
        (0..count).fold(0u64, |acc, seq| acc.wrapping_add(self.digest_of(seq)))
    }
}

/// What the receiver saw in one phase (`Default`: nothing yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Messages received.
    pub count: u64,
    /// Sum of their digests.
    pub digest: u64,
    /// The first message with a wrong length or sequence number.
    pub first_bad: Option<u64>,
}

impl Verdict {
    /// The 24 bytes the child sends.
    pub fn encode(&self) -> [u8; VERDICT_LEN] {
        let mut out = [0u8; VERDICT_LEN];
        out[..8].copy_from_slice(&self.count.to_le_bytes());
        out[8..16].copy_from_slice(&self.digest.to_le_bytes());
        let bad = self.first_bad.map_or(0, |b| b.wrapping_add(1));
        out[16..].copy_from_slice(&bad.to_le_bytes());
        out
    }

    /// Parses a verdict.
    pub fn decode(bytes: &[u8]) -> Result<Verdict, Error> {
        if bytes.len() != VERDICT_LEN {
            return Err(crate::garbled(format!(
                "verdict of {} bytes, {VERDICT_LEN} expected",
                bytes.len()
            )));
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Verdict {
            count: word(0),
            digest: word(1),
            first_bad: word(2).checked_sub(1),
        })
    }

    /// `Ok` when this is the verdict on `count` messages of `stream`, whole and in order.
    pub fn check(&self, stream: &Stream, count: u64) -> Result<(), Error> {
        if let Some(bad) = self.first_bad {
            return Err(crate::garbled(format!(
                "message {bad} of {count} arrived with a wrong length or sequence number"
            )));
        }
        if self.count != count {
            return Err(crate::garbled(format!(
                "the receiver confirmed {} messages, {count} were sent",
                self.count
            )));
        }
        let expected = stream.expected(count);
        if self.digest != expected {
            return Err(crate::garbled(format!(
                "digest of the {count} messages is {:#x}, {expected:#x} expected",
                self.digest
            )));
        }
        Ok(())
    }
}

/// Makes `msg` (a copy of a stream's message) message `seq`.
#[inline]
pub fn stamp(msg: &mut [u8], seq: u64) {
    msg[..8].copy_from_slice(&seq.to_le_bytes());
}

/// Encodes a start message.
pub fn start_message(count: u64, size: usize) -> [u8; START_LEN] {
    let mut out = [0u8; START_LEN];
    out[..8].copy_from_slice(&count.to_le_bytes());
    out[8..].copy_from_slice(&(size as u64).to_le_bytes());
    out
}

/// Parses a start message into (count, size).
pub fn parse_start(bytes: &[u8]) -> Result<(u64, usize), Error> {
    if bytes.len() != START_LEN {
        return Err(crate::garbled(format!(
            "stream start of {} bytes, {START_LEN} expected",
            bytes.len()
        )));
    }
    let mut count = [0u8; 8];
    let mut size = [0u8; 8];
    count.copy_from_slice(&bytes[..8]);
    size.copy_from_slice(&bytes[8..]);
    let size = usize::try_from(u64::from_le_bytes(size))
        .map_err(|_| crate::garbled("stream size out of range".to_owned()))?;
    Ok((u64::from_le_bytes(count), size))
}

/// Checks one received message against the expected sequence number and length, adding its
/// digest to `verdict`.
#[inline]
pub fn take(verdict: &mut Verdict, bytes: &[u8], size: usize) {
    let (seq, d) = digest(bytes);
    if verdict.first_bad.is_none() && (bytes.len() != size || seq != verdict.count) {
        verdict.first_bad = Some(verdict.count);
    }
    verdict.digest = verdict.digest.wrapping_add(d);
    verdict.count += 1;
}

/// The sending side of one phase: the start message, `count` messages, then the receiver's
/// verdict, returned unchecked (check it with [`Verdict::check`] once the clock has stopped).
pub fn send_phase<T: Transport>(
    t: &mut T,
    stream: &mut Stream,
    count: u64,
) -> Result<Verdict, Error> {
    t.send(&start_message(count, stream.size()))?;
    for seq in 0..count {
        t.send(stream.message(seq))?;
    }
    t.recv_with(Verdict::decode)
}

/// The receiving side of one phase: waits for the start message, receives and digests the
/// messages, sends the verdict. Returns it.
pub fn receive_phase<T: Transport>(t: &mut T) -> Result<Verdict, Error> {
    let (count, size) = t.recv_with(parse_start)?;
    let mut verdict = Verdict::default();
    for _ in 0..count {
        t.recv_with(|bytes| {
            take(&mut verdict, bytes, size);
            Ok(())
        })?;
    }
    t.send(&verdict.encode())?;
    Ok(verdict)
}

/// The start of a bare or batch phase (`what`), on the sending side: the framed start message,
/// then the receiver's [`READY`], so that nothing framed is in flight while the messages go.
fn start_unframed<T: Transport>(
    t: &mut T,
    stream: &Stream,
    count: u64,
    what: &str,
) -> Result<(), Error> {
    t.send(&start_message(count, stream.size()))?;
    if !t.recv_with(|bytes| Ok(bytes == READY))? {
        return Err(crate::garbled(format!(
            "the receiver did not answer the start of a {what} phase"
        )));
    }
    Ok(())
}

/// The start of a bare or batch phase (`what`), on the receiving side: the start message
/// (count and size, which must hold a sequence number), answered with [`READY`].
fn accept_unframed<T: Transport>(t: &mut T, what: &str) -> Result<(u64, usize), Error> {
    let (count, size) = t.recv_with(parse_start)?;
    if size < MIN_SIZE {
        return Err(crate::garbled(format!(
            "{what} messages of {size} bytes: at least {MIN_SIZE} hold the sequence number"
        )));
    }
    t.send(READY)?;
    Ok((count, size))
}

/// The sending side of a bare phase: the start message, the receiver's [`READY`], `count` bare
/// messages, then the receiver's verdict, returned unchecked.
pub fn send_bare_phase<T: Transport>(
    t: &mut T,
    stream: &mut Stream,
    count: u64,
) -> Result<Verdict, Error> {
    start_unframed(t, stream, count, "bare")?;
    for seq in 0..count {
        t.send_bare(stream.message(seq))?;
    }
    t.recv_with(Verdict::decode)
}

/// The receiving side of a bare phase: waits for the start message, answers [`READY`], receives
/// and digests `count` bare messages of the announced size, sends the verdict. Returns it.
pub fn receive_bare_phase<T: Transport>(t: &mut T) -> Result<Verdict, Error> {
    let (count, size) = accept_unframed(t, "bare")?;
    let mut verdict = Verdict::default();
    for _ in 0..count {
        t.recv_bare(size, |bytes| {
            take(&mut verdict, bytes, size);
            Ok(())
        })?;
    }
    t.send(&verdict.encode())?;
    Ok(verdict)
}

/// The sending side of a batch phase: the start message, the receiver's [`READY`], `count`
/// messages [`BATCH`] at a time, then the receiver's verdict, returned unchecked.
pub fn send_batch_phase<T: Transport>(
    t: &mut T,
    stream: &mut Stream,
    count: u64,
) -> Result<Verdict, Error> {
    start_unframed(t, stream, count, "batch")?;
    let mut batch = stream.batch();
    let mut seq = 0;
    while seq < count {
        let n = (count - seq).min(BATCH as u64) as usize;
        for (i, msg) in batch[..n].iter_mut().enumerate() {
            stamp(msg, seq + i as u64);
        }
        t.send_batch(&batch[..n])?;
        seq += n as u64;
    }
    t.recv_with(Verdict::decode)
}

/// The receiving side of a batch phase: as [`receive_bare_phase`], taking every whole message
/// there per call.
pub fn receive_batch_phase<T: Transport>(t: &mut T) -> Result<Verdict, Error> {
    let (count, size) = accept_unframed(t, "batch")?;
    let mut verdict = Verdict::default();
    while verdict.count < count {
        let left = usize::try_from(count - verdict.count).unwrap_or(usize::MAX);
        t.recv_batch(size, left, |bytes| take(&mut verdict, bytes, size))?;
    }
    t.send(&verdict.encode())?;
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_digest_is_the_sum_of_the_messages_digests() {
        for size in [8, 9, 15, 64, 100, 4096] {
            let mut stream = Stream::new(size);
            let mut verdict = Verdict::default();
            for seq in 0..50 {
                let msg = stream.message(seq).to_vec();
                assert_eq!(digest(&msg).1, stream.digest_of(seq), "size {size}");
                take(&mut verdict, &msg, size);
            }
            assert!(verdict.check(&stream, 50).is_ok(), "size {size}");
            let back = Verdict::decode(&verdict.encode());
            assert_eq!(back.ok(), Some(verdict));
        }
    }

    #[test]
    fn a_skipped_damaged_or_short_message_is_caught() {
        let mut stream = Stream::new(64);
        let mut skipped = Verdict::default();
        let mut damaged = skipped;
        for seq in 0..10 {
            let msg = stream.message(seq).to_vec();
            if seq != 4 {
                take(&mut skipped, &msg, 64);
            }
            let mut bad = msg.clone();
            if seq == 7 {
                bad[40] ^= 1;
            }
            take(&mut damaged, &bad, 64);
        }
        assert_eq!(skipped.first_bad, Some(4));
        assert!(skipped.check(&stream, 10).is_err());
        assert_eq!(damaged.first_bad, None);
        assert!(damaged.check(&stream, 10).is_err());

        let mut short = Verdict::default();
        take(&mut short, &stream.message(0)[..63], 64);
        assert_eq!(short.first_bad, Some(0));
        assert_eq!(parse_start(&start_message(5, 64)).ok(), Some((5, 64)));
        assert!(parse_start(&[0; 3]).is_err());
    }
}
