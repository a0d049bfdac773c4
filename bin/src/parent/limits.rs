//! The limit rows measured in this process: `serde` (the JSON work of a round trip) and
//! `memcpy` (the copies of a round trip).

use std::hint::black_box;

use crate::Error;
use shmlink::testing::{self as json, SliceWriter};

use super::connect::Plan;
use crate::workload::{self as common, Ping};

/// The `serde` row: both processes' JSON work of one round trip, done in this one, exactly as
/// the `shm` transport does it around the ring, with the library's codec (serde_json, or
/// sonic-rs with its feature `sonic-json`): the ping serialised into a 256-byte slice (the size
/// of the ring grant `Channel::send_json` reserves for it; or, where the codec does not write in
/// place, into a buffer and copied into the slice, as `send_json` then does) with borrowed `&str`
/// ids and a `u64` timestamp; copied out (as the receiver copies a frame before decoding it),
/// decoded and checked as the child does; the pong likewise, each direction in its own buffers
/// as each has its own ring.
pub(crate) struct SerdeWork<'a> {
    pub(crate) parent_id: &'a str,
    pub(crate) child_id: &'a str,
    pub(crate) ping_buf: [u8; 256],
    pub(crate) pong_buf: [u8; 256],
    /// The sender's buffer and the receiver's private copy of each direction.
    scratch: [Vec<u8>; 2],
    copy: [Vec<u8>; 2],
}

impl<'a> SerdeWork<'a> {
    pub(crate) fn new(plan: &'a Plan<'_>) -> Self {
        SerdeWork {
            parent_id: &plan.parent_id,
            child_id: &plan.child_id,
            ping_buf: [0; 256],
            pong_buf: [0; 256],
            scratch: [Vec::with_capacity(256), Vec::with_capacity(256)],
            copy: [Vec::with_capacity(256), Vec::with_capacity(256)],
        }
    }

    /// Serialises `value` into `buf` the way `Channel::send_json` writes into a grant.
    #[inline]
    fn encode(buf: &mut [u8], scratch: &mut Vec<u8>, value: &Ping<'_>) -> Result<usize, Error> {
        if json::JSON_ENCODES_IN_PLACE {
            let mut out = SliceWriter::new(buf);
            json::json_encode_into(&mut out, value)?;
            return Ok(out.written());
        }
        scratch.clear();
        json::json_encode(scratch, value)?;
        buf[..scratch.len()].copy_from_slice(scratch);
        Ok(scratch.len())
    }

    /// The receiver's private copy of a frame, as `ReadGuard::json` makes it.
    #[inline]
    fn copy<'c>(copy: &'c mut Vec<u8>, frame: &[u8]) -> &'c [u8] {
        copy.clear();
        copy.extend_from_slice(frame);
        copy
    }

    #[inline]
    pub(crate) fn round_trip(&mut self) -> Result<(), Error> {
        // Parent: stamp and send the ping.
        let sent_at_ms = common::now_ms() as u64;
        let ping = Ping {
            sender_id: self.parent_id,
            receiver_id: self.child_id,
            sent_at_ms,
        };
        let [ping_scratch, pong_scratch] = &mut self.scratch;
        let [ping_copy, pong_copy] = &mut self.copy;
        let n = Self::encode(&mut self.ping_buf, ping_scratch, &ping)?;
        // Child: decode the ping from its copy, check it, answer.
        let frame = Self::copy(ping_copy, black_box(&self.ping_buf[..n]));
        let got: Ping<'_> = json::json_decode(frame)?;
        if got.sender_id != self.parent_id || got.receiver_id != self.child_id {
            return Err(crate::garbled(format!("unexpected ping {got:?}")));
        }
        let pong = Ping {
            sender_id: self.child_id,
            receiver_id: self.parent_id,
            sent_at_ms: got.sent_at_ms,
        };
        let m = Self::encode(&mut self.pong_buf, pong_scratch, &pong)?;
        // Parent: decode the pong from its copy and check it.
        let frame = Self::copy(pong_copy, black_box(&self.pong_buf[..m]));
        let back: Ping<'_> = json::json_decode(frame)?;
        if back.sender_id != self.child_id
            || back.receiver_id != self.parent_id
            || back.sent_at_ms != sent_at_ms
        {
            return Err(crate::garbled(format!("unexpected pong {back:?}")));
        }
        Ok(())
    }
}

/// The `memcpy` row: one message-sized copy per direction, in one process. Both buffers are
/// written before the round, so page faults stay out of it.
pub(crate) struct Copier {
    pub(crate) a: Vec<u8>,
    pub(crate) b: Vec<u8>,
}

impl Copier {
    pub(crate) fn new(size: usize) -> Self {
        Copier {
            a: vec![0xa5; size],
            b: vec![0x5a; size],
        }
    }

    #[inline]
    pub(crate) fn round_trip(&mut self) -> Result<(), Error> {
        self.b.copy_from_slice(black_box(&self.a));
        self.a.copy_from_slice(black_box(&self.b));
        black_box(&mut self.a);
        Ok(())
    }
}
