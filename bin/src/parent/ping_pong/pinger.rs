//! The parent's side of the ping-pong workload over a transport.

use crate::Error;

use crate::parent::connect::Plan;
use crate::transport::{Kind, Transport};
use crate::workload::{self as common, check_stamp, stamp, MessageKind, OwnedPing, Workload};

/// The parent's side of the workload.
pub(crate) struct Pinger<'a> {
    pub(crate) workload: Workload,
    pub(crate) parent_id: &'a str,
    pub(crate) child_id: &'a str,
    pub(crate) raw: Vec<u8>,
    pub(crate) seq: u64,
}

impl<'a> Pinger<'a> {
    pub(crate) fn new(plan: &'a Plan<'_>, kind: Kind, message: MessageKind, size: usize) -> Self {
        let workload = Workload::of(kind, message);
        let size = if workload == Workload::Raw { size } else { 0 };
        Pinger {
            workload,
            parent_id: &plan.parent_id,
            child_id: &plan.child_id,
            raw: vec![0xa5; size],
            seq: 0,
        }
    }

    #[inline]
    pub(crate) fn round_trip<T: Transport>(&mut self, t: &mut T) -> Result<(), Error> {
        self.seq = self.seq.wrapping_add(1);
        match self.workload {
            Workload::Json => common::json_round_trip(t, self.parent_id, self.child_id),
            Workload::ReferenceJson => {
                let ping = OwnedPing {
                    sender_id: self.parent_id.to_owned(),
                    receiver_id: self.child_id.to_owned(),
                    sent_at_ms: common::now_ms(),
                };
                let bytes = serde_json::to_vec(&ping)?;
                t.send(&bytes)?;
                let pong: OwnedPing = t.recv_with(|b| Ok(serde_json::from_slice(b)?))?;
                if pong.sender_id != self.child_id
                    || pong.receiver_id != self.parent_id
                    || pong.sent_at_ms != ping.sent_at_ms
                {
                    return Err(crate::garbled(format!("unexpected pong {pong:?}")));
                }
                Ok(())
            }
            Workload::Raw => {
                let seq = self.seq;
                stamp(&mut self.raw, seq);
                t.send(&self.raw)?;
                let len = self.raw.len();
                if !t.recv_with(|b| Ok(check_stamp(b, len, seq)))? {
                    return Err(crate::garbled(format!("echo of message {seq} damaged")));
                }
                Ok(())
            }
            Workload::Bounce => {
                t.send(&[])?;
                t.recv_with(|_| Ok(()))
            }
        }
    }
}
