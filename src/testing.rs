//! Hooks for the crate's own tests, fuzz targets and harness: compiled only with the cargo
//! feature `test-hooks`, which those enable and a dependent never needs. Not part of the public
//! API: no semver promise covers anything here.
//!
//! The hooks that read the environment do so only here and in the crate's bottom module of
//! hooks, which the modules that call them import instead of this one (this module imports them
//! all, and nothing imports it): [`STOP_AT_ENV`] stops a process at a chosen point of `connect`, [`FORCE_FALLBACK_ENV`] puts `Endpoint::create` and
//! `EndpointListener::bind` on the ipc-channel backend (outside tests the backend is chosen with
//! `Backend`, `create_with` / `bind_with`, or the `force-fallback` feature),
//! [`PRETEND_MISSING_ENV`] takes system calls away to exercise their fallbacks, and
//! [`NO_IO_URING_ENV`] tells the tests that a machine refuses `io_uring` on purpose.

use crate::shm::layout;

pub use crate::hooks::{
    peer_looks_on_this_thread, wake_calls_on_this_thread, StopPoint, FORCE_FALLBACK_ENV,
    PRETEND_MISSING_ENV, STOP_AT_ENV,
};
pub use crate::shm::channel::SliceWriter;
pub use crate::shm::layout::{PeerInfo, RingHeader, SegmentHeader};

/// Bytes before the first ring region of a channel's mapping.
pub const HEADER_SIZE: usize = layout::HEADER_SIZE;
/// Offset of the two ring headers in a channel's mapping.
pub const RINGS_OFFSET: usize = layout::RINGS_OFFSET;
/// The first word of a channel's mapping.
pub const MAGIC: u64 = layout::MAGIC;
/// The layout version this build writes and reads.
pub const LAYOUT_VERSION: u32 = layout::LAYOUT_VERSION;
/// The value of the ready word once a creator has initialised its mapping.
pub const READY: u32 = layout::READY;
/// The byte of a channel's object the creator keeps locked while it lives.
pub const CREATOR_LOCK: u64 = layout::CREATOR_LOCK;
/// The byte of a channel's object the connector keeps locked while it lives.
pub const CONNECTOR_LOCK: u64 = layout::CONNECTOR_LOCK;
/// Every frame starts on a boundary of this many bytes.
pub const FRAME_ALIGN: usize = layout::frame::FRAME_ALIGN;

/// Bytes a mapping with two rings of `capacity` bytes needs.
pub fn segment_size(capacity: usize) -> usize {
    layout::segment_size(capacity)
}

/// Bytes a frame with a payload of `len` bytes occupies in a ring, header included.
pub fn frame_size(len: usize) -> usize {
    layout::frame::frame_size(len)
}

/// Largest payload one frame carries in a ring of `capacity` bytes.
pub fn max_payload(capacity: usize) -> usize {
    layout::frame::max_payload(capacity)
}

/// A listener's client slots: where the first starts and how long each is (its first `u64` is
/// `pid << 32 | state`). For tests that forge slot states.
pub const LISTENER_SLOTS_OFFSET: usize = layout::listener::SLOTS_OFFSET;
/// Bytes per listener slot.
pub const LISTENER_SLOT_SIZE: usize = layout::listener::SLOT_SIZE;
/// The state the server gives a slot it holds a connection in.
pub const LISTENER_SLOT_ACTIVE: u64 = layout::listener::SLOT_ACTIVE;

/// The other slot states, in the order a client moves its slot through them: free, claimed (by a
/// client that holds the slot's lock), named (its connection number written), pending (its
/// channel made, waiting for the server).
pub const LISTENER_SLOT_FREE: u64 = layout::listener::SLOT_FREE;
/// See [`LISTENER_SLOT_FREE`].
pub const LISTENER_SLOT_CLAIMED: u64 = layout::listener::SLOT_CLAIMED;
/// See [`LISTENER_SLOT_FREE`].
pub const LISTENER_SLOT_NAMED: u64 = layout::listener::SLOT_NAMED;
/// See [`LISTENER_SLOT_FREE`].
pub const LISTENER_SLOT_PENDING: u64 = layout::listener::SLOT_PENDING;
/// Offset in a slot of the client's connection number (`u64`): its channel is named
/// `<listener>.<pid>.<number>`.
pub const LISTENER_SLOT_SEQ: usize = std::mem::offset_of!(layout::listener::Slot, seq);
/// Offset in a slot of the client's process start time (`u64`).
pub const LISTENER_SLOT_START_TIME: usize =
    std::mem::offset_of!(layout::listener::Slot, start_time);
/// Offset in a slot of the word the server bumps once it has connected (`u32`).
pub const LISTENER_SLOT_ACCEPTED: usize = std::mem::offset_of!(layout::listener::Slot, accepted);
/// Offset in a listener's mapping of its slot count (`u32`) and, 128 bytes on, its doorbell
/// (`u32`).
pub const LISTENER_HEADER_OFFSET: usize = layout::RINGS_OFFSET;

/// Takes the lock a client holds on slot `i` of a listener while it connects, on `file` (an
/// open description of the listener's object), without waiting: `Ok(false)` if another open
/// description holds it. The lock lasts until released or the description closes.
pub fn take_listener_slot_lock(file: &std::fs::File, i: usize) -> std::io::Result<bool> {
    crate::sys::lock::take(file, layout::listener::slot_lock(i), false)
}

/// Makes the next scan of `listener` (an accept in any form) look for slots whose claimers died,
/// which it otherwise does once per sweep period (100 ms).
pub fn sweep_on_next_accept(listener: &crate::Listener) {
    listener.sweep_on_next_scan();
}

/// The addresses, in this process, of the ring region `channel` receives from: every message
/// a receive hands out in place (one no longer than a frame) lies inside it.
pub fn recv_region(channel: &crate::Channel) -> std::ops::Range<usize> {
    channel.recv_region()
}

/// The prefix of a channel's name in the shared-memory namespace.
pub const OS_PREFIX: &str = crate::shm::mapping::OS_PREFIX;

/// Checks a channel or listener name (the one rule of every name).
pub fn validate_name(name: &str) -> Result<(), crate::OpenError> {
    crate::shm::mapping::validate_name(name)
}

/// Checks a name on the ipc-channel backend (the same rule).
pub fn validate_fallback_name(name: &str) -> Result<(), crate::OpenError> {
    crate::ipc::validate_name(name)
}

/// Where the shared-memory objects are listed (`/dev/shm`), if that directory exists.
pub fn shm_dir() -> Option<&'static std::path::Path> {
    crate::shm::mapping::shm_dir()
}

/// Removes the name of the channel `name`.
pub fn unlink(name: &str) -> Result<(), crate::OpenError> {
    crate::shm::mapping::unlink(name)
}

/// Where the ipc-channel backend's rendezvous file of `name` is.
pub fn rendezvous_path(name: &str) -> std::path::PathBuf {
    crate::ipc::rendezvous::rendezvous_path(name)
}

/// Where the ipc-channel listener or channel creator `name` keeps its lock file (beside its
/// rendezvous file).
pub fn fallback_listener_lock_path(name: &str) -> std::path::PathBuf {
    crate::ipc::listener::lock_path(name)
}

/// Takes the creator's lock on a freshly made segment file the way `Channel::create` does,
/// waiting for it; the lock lasts as long as `file` stays open. For tools that forge segments.
pub fn take_creator_lock(file: &std::fs::File) -> std::io::Result<()> {
    crate::sys::lock::take(file, layout::CREATOR_LOCK, true).map(|_| ())
}

/// True when the ipc-channel backend is forced, by [`FORCE_FALLBACK_ENV`] or the
/// `force-fallback` cargo feature.
pub fn forced() -> bool {
    crate::ipc::forced()
}

/// Whether an async task here sleeps on a futex ring of its own, polled by the tokio runtime's
/// I/O driver (`io_uring` futex waits: Linux 6.7 and later, not refused by a sandbox, not
/// taken away by [`PRETEND_MISSING_ENV`], descriptors to spare), rather than through the
/// reactor thread.
#[cfg(feature = "tokio")]
pub fn async_wakes_directly() -> bool {
    crate::sys::FutexRing::new().is_some()
}

/// The environment variable that tells the tests a machine refuses `io_uring` on purpose
/// (a sandbox, `kernel.io_uring_disabled`): set, the tests that need a futex ring accept its
/// absence and say so; unset, a kernel with `io_uring` futex waits must give the library one.
pub const NO_IO_URING_ENV: &str = "SHMLINK_TEST_NO_IO_URING";

/// Whether the tests accept that no futex ring can be made here ([`NO_IO_URING_ENV`] set to
/// anything but `0` or the empty string).
pub fn io_uring_refused_on_purpose() -> bool {
    std::env::var_os(NO_IO_URING_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether this kernel offers `io_uring` futex waits with linked timeouts, asked directly with
/// `IORING_REGISTER_PROBE` on a ring of its own, apart from the library's constructor (which a
/// regression could break): where this is true, an async task must be able to sleep on a
/// futex ring. Ignores [`PRETEND_MISSING_ENV`].
#[cfg(feature = "tokio")]
pub fn kernel_has_io_uring_futex_waits() -> bool {
    crate::sys::kernel_has_futex_ring_ops()
}

/// How async directions in this process sleep (see `shmlink::tokio::sleepers`), as a line for
/// a test's output.
#[cfg(feature = "tokio")]
pub fn async_paths() -> String {
    let s = crate::surface::tokio::sleepers();
    format!(
        "futex rings {} holding {} descriptors (limit {}), asleep through the reactor now {}, \
         sent to the reactor for the limit {}, rings unsupported {}",
        s.rings,
        s.ring_descriptors,
        s.ring_descriptor_limit,
        s.through_reactor,
        s.over_limit,
        s.rings_unsupported
    )
}

/// True where `send_json` serialises straight into a ring's write grant (serde_json); false
/// where it serialises into the half's buffer and copies the text into the ring (sonic-rs, with
/// feature `sonic-json`).
pub const JSON_ENCODES_IN_PLACE: bool = crate::json::ENCODES_IN_PLACE;

/// The library's JSON encoder (serde_json, or sonic-rs with feature `sonic-json`) into a
/// writer, as `send_json` writes into a grant where [`JSON_ENCODES_IN_PLACE`].
pub fn json_encode_into<W: std::io::Write, T: serde::Serialize + ?Sized>(
    out: W,
    value: &T,
) -> Result<(), serde_json::Error> {
    crate::json::encode_into(out, value)
}

/// The library's JSON encoder at the end of `out`, as `send_json` fills its buffer.
pub fn json_encode<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    crate::json::encode(out, value)
}

/// The library's JSON decoder, as `ReadGuard::json` runs it on its private copy of a frame.
pub fn json_decode<'de, T: serde::Deserialize<'de>>(
    bytes: &'de [u8],
) -> Result<T, serde_json::Error> {
    crate::json::decode(bytes)
}

/// Where the parts of a topic of `capacity` bytes, keeping `history` messages, with
/// `max_subscribers` slots, lie: (offset of the slots, offset of the region).
pub fn topic_offsets(capacity: usize, history: usize, max_subscribers: usize) -> (usize, usize) {
    let index_len = crate::shm::topic::index_len(capacity, history);
    layout::topic::topic_offsets(index_len, max_subscribers)
}

/// Offset in a topic's mapping of the overwrite claim word (`layout::topic::TopicWords::claim`).
pub const TOPIC_CLAIM_OFFSET: usize =
    layout::topic::WORDS_OFFSET + std::mem::offset_of!(layout::topic::TopicWords, claim);
/// Offset in a topic's mapping of the count of messages published
/// (`layout::topic::TopicWords::published`).
pub const TOPIC_PUBLISHED_OFFSET: usize =
    layout::topic::WORDS_OFFSET + std::mem::offset_of!(layout::topic::TopicWords, published);
/// Bytes of one topic subscriber slot.
pub const TOPIC_SLOT_SIZE: usize = layout::topic::SLOT_SIZE;
/// Offset of a topic slot's state word in the slot.
pub const TOPIC_SLOT_STATE: usize = std::mem::offset_of!(layout::topic::SubscriberSlot, state);
/// Offset of a topic slot's cursor in the slot.
pub const TOPIC_SLOT_CURSOR: usize = std::mem::offset_of!(layout::topic::SubscriberSlot, cursor);
/// Offset of the topic's ring header (its `tail` first).
pub const TOPIC_RING_OFFSET: usize = layout::topic::RING_OFFSET;
/// Offset of the topic's words: floor, proposal, claim, published (128 bytes each).
pub const TOPIC_WORDS_OFFSET: usize = layout::topic::WORDS_OFFSET;
/// Topic slot states (the low byte of the state word).
pub const TOPIC_SLOT_FREE: u32 = layout::topic::SLOT_FREE;
/// See [`TOPIC_SLOT_FREE`].
pub const TOPIC_SLOT_JOINING: u32 = layout::topic::SLOT_JOINING;
/// See [`TOPIC_SLOT_FREE`].
pub const TOPIC_SLOT_ACTIVE: u32 = layout::topic::SLOT_ACTIVE;
/// See [`TOPIC_SLOT_FREE`].
pub const TOPIC_SLOT_DROPPED: u32 = layout::topic::SLOT_DROPPED;

/// Where a subscriber's ring region and its whole mapping lie in this process: a message it
/// lends in place lies inside the first, a copy outside the second.
pub fn subscriber_regions(
    sub: &crate::Subscriber,
) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    sub.regions()
}
