//! The limit rows measured in this process: `serde` (the JSON work of a round trip) and
//! `memcpy` (the copies of a round trip).

use std::hint::black_box;

use crate::Error;
use shmlink::testing::SliceWriter;

use super::connect::Plan;
use crate::workload::{self as common, Ping};

/// The `serde` row: both processes' JSON work of one round trip, done in this one, exactly as
/// the `shm` transport does it around the ring: the ping serialised into a 256-byte slice (the
/// size of the ring grant `Channel::send_json` reserves for it) with borrowed `&str` ids and a
/// `u64` timestamp, decoded in place and checked as the child does, the pong likewise, each
/// direction in its own buffer as each has its own ring.
pub(crate) struct SerdeWork<'a> {
    pub(crate) parent_id: &'a str,
    pub(crate) child_id: &'a str,
    pub(crate) ping_buf: [u8; 256],
    pub(crate) pong_buf: [u8; 256],
}

impl<'a> SerdeWork<'a> {
    pub(crate) fn new(plan: &'a Plan<'_>) -> Self {
        SerdeWork {
            parent_id: &plan.parent_id,
            child_id: &plan.child_id,
            ping_buf: [0; 256],
            pong_buf: [0; 256],
        }
    }

    /// Serialises `value` into `buf` the way `Channel::send_json` writes into a grant.
    #[inline]
    fn encode(buf: &mut [u8], value: &Ping<'_>) -> Result<usize, Error> {
        let mut out = SliceWriter::new(buf);
        serde_json::to_writer(&mut out, value)?;
        Ok(out.written())
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
        let n = Self::encode(&mut self.ping_buf, &ping)?;
        // Child: decode the ping in place, check it, answer.
        let frame = black_box(&self.ping_buf[..n]);
        let got: Ping<'_> = serde_json::from_slice(frame)?;
        if got.sender_id != self.parent_id || got.receiver_id != self.child_id {
            return Err(crate::garbled(format!("unexpected ping {got:?}")));
        }
        let pong = Ping {
            sender_id: self.child_id,
            receiver_id: self.parent_id,
            sent_at_ms: got.sent_at_ms,
        };
        let m = Self::encode(&mut self.pong_buf, &pong)?;
        // Parent: decode the pong in place and check it.
        let frame = black_box(&self.pong_buf[..m]);
        let back: Ping<'_> = serde_json::from_slice(frame)?;
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
