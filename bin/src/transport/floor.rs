//! `floor`: the hardware's limit. One cache line per direction in a small shared mapping holds
//! a sequence number, an acknowledgement and up to 40 bytes of payload; a message is a store
//! of the sequence number, a receive is a spin until it changes. No framing, no system call:
//! what is left is the cost of moving a cache line from one core to the other and back.
//!
//! The acknowledgement of a received message lives in the receiver's *own* line, so in a
//! ping-pong it travels with the reply and costs nothing extra; a sender only waits for it when
//! it sends twice in a row.

use std::mem::size_of;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::Serialize;

use super::{
    await_connected, create_mapping, mapping_id, open_mapping, poll_until, ChildStdio, Kind,
    Listener, Options, Peer, Result, Spinner, Transport,
};
use crate::Error;

const MAGIC: u64 = 0x7368_6d72_666c_6f72; // "shmrflor"
const WORDS: usize = 5;
/// The largest message: the payload words of one line.
pub const MAX_MESSAGE: usize = WORDS * 8;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    ready: AtomicU32,
    closed: [AtomicU32; 2],
}

/// One line per side, written only by that side: `seq`, `len` and `words` carry the messages it
/// sends, `ack` counts the messages of the other side it has consumed.
#[repr(C)]
struct Line {
    seq: AtomicU64,
    ack: AtomicU64,
    len: AtomicU64,
    words: [AtomicU64; WORDS],
}

#[repr(C)]
struct Shared {
    header: CachePadded<Header>,
    lines: [CachePadded<Line>; 2],
}

/// One end of the floor transport.
pub struct Floor {
    shmem: shared_memory::Shmem,
    /// 0 for the creator (parent), 1 for the connector (child).
    me: usize,
    sent: u64,
    received: u64,
    peer: Peer,
}

/// The created mapping, waiting for the child.
pub struct FloorListener {
    floor: Floor,
    id: String,
    opts: Options,
}

impl Floor {
    fn shared(&self) -> &Shared {
        // SAFETY: the mapping is page-aligned, at least size_of::<Shared>() bytes (checked at
        // create and open), zero-filled at creation, and all-zero bytes are valid atomics; it is
        // only ever accessed through these atomics, and it lives as long as `self.shmem`, which
        // the returned borrow cannot outlive.
        unsafe { &*self.shmem.as_ptr().cast::<Shared>() }
    }

    fn peer_closed(&self) -> bool {
        // Acquire: pairs with the Release store in Drop, so every message the peer sent before
        // closing is visible once the flag is.
        self.shared().header.closed[1 - self.me].load(Ordering::Acquire) != 0
    }

    fn send_bytes(&mut self, msg: &[u8]) -> Result<()> {
        if msg.len() > MAX_MESSAGE {
            return Err(Error::TooLarge {
                len: msg.len(),
                max: MAX_MESSAGE,
            });
        }
        let mut spin = Spinner::new(self.peer);
        let sent = self.sent;
        // Wait until the peer consumed everything we sent: the slot is ours again.
        // Acquire: pairs with the Release store of `ack` in `recv_with`, so the peer's reads of
        // the old payload are done before we overwrite it.
        while self.shared().lines[1 - self.me].ack.load(Ordering::Acquire) != sent {
            spin.turn(|| {
                if self.peer_closed() {
                    Err(super::closed())
                } else {
                    Ok(())
                }
            })?;
        }
        let line = &self.shared().lines[self.me];
        for (word, chunk) in line.words.iter().zip(msg.chunks(8)) {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            // Relaxed: published by the Release store of `seq` below.
            word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
        // Relaxed: published by the Release store of `seq` below.
        line.len.store(msg.len() as u64, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `seq` in the peer's `recv_with`.
        line.seq.store(sent + 1, Ordering::Release);
        self.sent = sent + 1;
        Ok(())
    }
}

impl Transport for Floor {
    type Listener = FloorListener;
    const KIND: Kind = Kind::Floor;

    fn listen(name: &str, opts: &Options) -> Result<FloorListener> {
        let id = mapping_id(name, "floor");
        let shmem = create_mapping(&id, size_of::<Shared>())?;
        let floor = Floor {
            shmem,
            me: 0,
            sent: 0,
            received: 0,
            peer: Peer::unknown(),
        };
        let header = &floor.shared().header;
        // Relaxed: published by the Release store of `ready`.
        header.magic.store(MAGIC, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `ready` in `connect`.
        header.ready.store(1, Ordering::Release);
        Ok(FloorListener {
            floor,
            id,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Floor> {
        let shmem = open_mapping(address, size_of::<Shared>(), peer, opts.connect_timeout)?;
        let floor = Floor {
            shmem,
            me: 1,
            sent: 0,
            received: 0,
            peer,
        };
        let header = &floor.shared().header;
        poll_until(peer, opts.connect_timeout, || {
            // Acquire: pairs with the Release store of `ready` in `listen`.
            Ok((header.ready.load(Ordering::Acquire) != 0).then_some(()))
        })?;
        // Relaxed: ordered after the Acquire load of `ready` above.
        let magic = header.magic.load(Ordering::Relaxed);
        if magic != MAGIC {
            return Err(crate::garbled(format!(
                "mapping {address:?} starts with {magic:#x}, not the floor's magic"
            )));
        }
        // Release: pairs with the Acquire load of `ready` in `FloorListener::accept`.
        header.ready.store(2, Ordering::Release);
        Ok(floor)
    }

    fn max_message(&self) -> usize {
        MAX_MESSAGE
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        self.send_bytes(msg)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let mut buf = [0u8; MAX_MESSAGE];
        let mut cursor = &mut buf[..];
        serde_json::to_writer(&mut cursor, value).map_err(|_| Error::TooLarge {
            len: MAX_MESSAGE + 1,
            max: MAX_MESSAGE,
        })?;
        let used = MAX_MESSAGE - cursor.len();
        self.send_bytes(&buf[..used])
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let mut spin = Spinner::new(self.peer);
        let expected = self.received + 1;
        let line = &self.shared().lines[1 - self.me];
        loop {
            // Acquire: pairs with the Release store of `seq` in the peer's `send_bytes`.
            let seq = line.seq.load(Ordering::Acquire);
            if seq == expected {
                break;
            }
            if seq != self.received {
                return Err(crate::garbled(format!(
                    "sequence {seq} where {} or {expected} was expected",
                    self.received
                )));
            }
            let turned = spin.turn(|| {
                if self.peer_closed() {
                    Err(super::closed())
                } else {
                    Ok(())
                }
            });
            if let Err(e) = turned {
                // The peer closed or exited, perhaps right after a last message: look again
                // (after the Acquire of `closed`, or the peer's exit, it would be visible).
                if line.seq.load(Ordering::Acquire) != expected {
                    return Err(e);
                }
            }
        }
        // Relaxed: ordered after the Acquire load of `seq` above.
        let len = line.len.load(Ordering::Relaxed) as usize;
        if len > MAX_MESSAGE {
            return Err(crate::garbled(format!("floor message of {len} bytes")));
        }
        let mut buf = [0u8; MAX_MESSAGE];
        for (word, chunk) in line
            .words
            .iter()
            .zip(buf.chunks_mut(8))
            .take(len.div_ceil(8))
        {
            // Relaxed: ordered after the Acquire load of `seq` above.
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
        }
        self.received = expected;
        // Release: pairs with the Acquire load of `ack` in the peer's `send_bytes`; our reads
        // of the payload are complete.
        self.shared().lines[self.me]
            .ack
            .store(expected, Ordering::Release);
        read(&buf[..len])
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        // Release: pairs with the Acquire load in the peer's `peer_closed`.
        self.shared().header.closed[self.me].store(1, Ordering::Release);
    }
}

impl FloorListener {
    /// The mapping's OS name.
    pub fn mapping_id(&self) -> &str {
        &self.id
    }
}

impl Listener for FloorListener {
    type Transport = Floor;

    fn address(&self) -> String {
        self.id.clone()
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<Floor> {
        self.floor.peer = peer;
        let floor = self.floor;
        await_connected(
            &floor.shared().header.ready,
            peer,
            self.opts.connect_timeout,
        )?;
        Ok(floor)
    }
}

const _: () = assert!(size_of::<Line>() == 64);
