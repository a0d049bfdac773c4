//! # shmlink
//!
//! Low-latency messaging between two processes on one host: a lock-free
//! single-producer/single-consumer ring of byte frames in a *named* shared-memory mapping, two
//! rings (one per direction) making a duplex [`Channel`].
//!
//! ```no_run
//! use shmlink::{Channel, Config, WaitStrategy};
//!
//! // Process A
//! let mut a = Channel::create("demo", &Config::with_wait(WaitStrategy::Spin))?;
//! // Process B
//! let mut b = Channel::connect("demo", WaitStrategy::Spin)?;
//!
//! b.send(b"ping")?;
//! assert_eq!(&*a.recv()?, b"ping");
//! a.send_json(&serde_json::json!({"pong": true}))?;
//! let reply: serde_json::Value = b.recv_json()?;
//! # Ok::<(), shmlink::Error>(())
//! ```
//!
//! ## Memory layout
//!
//! One mapping, `/shmlink-<name>` (on Linux `/dev/shm/shmlink-<name>`), created exclusively with
//! mode 0600:
//!
//! ```text
//! 0       SegmentHeader: magic "SHMLINK\0", layout version, header size, ring capacity,
//!         total size, a ready word written last, and per endpoint: state, wait mode, pid,
//!         process start time (each on its own cache line)
//! 1024    RingHeader x 2: producer index, consumer index, two futex wait cells,
//!         each on its own cache line
//! 4096    ring 0 region (creator -> connector), `capacity` bytes, a power of two
//! 4096+c  ring 1 region (connector -> creator)
//! ```
//!
//! ## The ring protocol
//!
//! Frames are cache-line aligned: one `u64` header word (length, kind, and a tag derived from the
//! frame's position) followed by the payload. A frame never wraps: a PAD word sends the reader
//! back to offset 0, so every payload is one contiguous slice, written in place through a
//! [`WriteGrant`] and read in place through a [`ReadGuard`].
//!
//! The producer keeps the header word at its next position zeroed; it publishes a frame by
//! storing the frame's header word with `Release` after the payload. The consumer polls the word
//! at its position with `Acquire`. The consumer never reads the producer's index on the hot path,
//! and the producer reads the consumer's index only when its cached copy says the ring is full,
//! so a message moves only the cache lines that hold it. See [`ring`] for the details.
//!
//! ## Waiting and liveness
//!
//! Each endpoint picks a [`WaitStrategy`]: `Spin`, `SpinYield`, or `Block` (spin briefly, then
//! sleep on a futex word in the mapping; the sender only makes the wake-up call when a sleeper
//! announced itself). Every wait checks every few milliseconds whether the peer closed
//! ([`Error::Disconnected`], after everything it sent has been read) or died
//! ([`Error::PeerGone`]; pids are paired with process start times, so pid reuse is not mistaken
//! for the peer).
//!
//! ## Safety against the peer
//!
//! The other process can write anything into the mapping. Every value read from it is checked
//! before use: a bad header gives [`Error::BadMagic`], [`Error::VersionMismatch`] or
//! [`Error::SizeMismatch`]; a frame with a wrong tag, an unknown kind or a length past the region,
//! or a consumer index that moves backwards or past the producer, gives [`Error::Corrupt`]. None
//! of these panic, read outside the mapping or loop forever. What a hostile peer *can* do: change
//! the bytes of a frame while you hold its [`ReadGuard`] (copy them out first if that matters),
//! stop answering (use timeouts), or shrink the shared object under you, which makes the kernel
//! raise `SIGBUS` on the next access: share names only with processes you trust that much.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod channel;
mod endpoint;
mod error;
mod fallback;
mod futex;
mod layout;
mod listener;
mod mapping;
mod process;
pub mod ring;
pub mod segments;
mod selector;
#[cfg(feature = "tokio")]
pub mod tokio;
mod wait;

pub use channel::{Channel, Config, RecvHalf, Role, SendHalf, DEFAULT_MAX_MESSAGE};
pub use endpoint::{Backend, Endpoint, Received};
pub use error::{Error, Result};
pub use listener::{Connection, Listener, DEFAULT_MAX_CLIENTS, MAX_CLIENTS};
pub use ring::{ReadGuard, WriteGrant};
pub use selector::{Selector, LIVENESS_PERIOD};
pub use wait::WaitStrategy;

#[doc(hidden)]
pub mod testing;

#[cfg(all(test, loom))]
mod loom_model;
