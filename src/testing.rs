//! Hooks for the crate's own tests, fuzz targets and harness: compiled only with the cargo
//! feature `test-hooks`, which those enable and a dependent never needs. Not part of the public
//! API: no semver promise covers anything here.
//!
//! Two hooks read the environment, and only here: [`STOP_AT_ENV`] stops a process at a chosen
//! point of `connect`, and [`FORCE_FALLBACK_ENV`] puts `Endpoint::create` and
//! `EndpointListener::bind` on the ipc-channel backend (outside tests the backend is chosen with
//! `Backend`, `create_with` / `bind_with`, or the `force-fallback` feature).

use crate::layout;

pub use crate::channel::SliceWriter;
pub use crate::layout::{PeerInfo, RingHeader, SegmentHeader};

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
pub const OS_PREFIX: &str = crate::mapping::OS_PREFIX;

/// Checks a channel or listener name (the one rule of every name).
pub fn validate_name(name: &str) -> Result<(), crate::OpenError> {
    crate::mapping::validate_name(name)
}

/// Checks a name on the ipc-channel backend (the same rule).
pub fn validate_fallback_name(name: &str) -> Result<(), crate::OpenError> {
    crate::ipc::validate_name(name)
}

/// Where the shared-memory objects are listed (`/dev/shm`), if that directory exists.
pub fn shm_dir() -> Option<&'static std::path::Path> {
    crate::mapping::shm_dir()
}

/// Removes the name of the channel `name`.
pub fn unlink(name: &str) -> Result<(), crate::OpenError> {
    crate::mapping::unlink(name)
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

/// The environment variable that puts `Endpoint::create` and `EndpointListener::bind` on the
/// ipc-channel backend when set to anything but `0` or the empty string.
pub const FORCE_FALLBACK_ENV: &str = "SHMLINK_FORCE_FALLBACK";

/// True when the ipc-channel backend is forced, by [`FORCE_FALLBACK_ENV`] or the
/// `force-fallback` cargo feature.
pub fn forced() -> bool {
    crate::ipc::forced()
}

/// Whether [`FORCE_FALLBACK_ENV`] asks for the ipc-channel backend.
pub(crate) fn fallback_forced_by_env() -> bool {
    std::env::var_os(FORCE_FALLBACK_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The environment variable that names a [`StopPoint`] (by [`StopPoint::name`]): a process
/// started with it stops itself (SIGSTOP) when it gets there, so a test can kill it at exactly
/// that point.
pub const STOP_AT_ENV: &str = "SHMLINK_TEST_STOP_AT";

/// Places where a process stops itself when [`STOP_AT_ENV`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPoint {
    /// `connect` has taken the connector's lock and claimed the slot (`PEER_CLAIMING`), and has
    /// not yet marked itself present.
    ConnectClaimed,
    /// A listener's client has claimed a slot (holding its lock) and not yet named its channel.
    ListenerClaimed,
    /// A listener's client has named its channel in its slot and made it, and not yet published
    /// the slot as pending.
    ListenerNamed,
}

impl StopPoint {
    /// The value of [`STOP_AT_ENV`] that selects this point.
    pub fn name(self) -> &'static str {
        match self {
            StopPoint::ConnectClaimed => "connect-claimed",
            StopPoint::ListenerClaimed => "listener-claimed",
            StopPoint::ListenerNamed => "listener-named",
        }
    }
}

/// Stops the process (SIGSTOP) if [`STOP_AT_ENV`] names `point`. The variable is read once per
/// process; without it this is one load.
pub(crate) fn stop_point(point: StopPoint) {
    static WANTED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let wanted = WANTED.get_or_init(|| std::env::var(STOP_AT_ENV).ok());
    if wanted.as_deref() == Some(point.name()) {
        // SAFETY: raise takes no pointers; SIGSTOP cannot be caught, so no handler runs.
        unsafe { libc::raise(libc::SIGSTOP) };
    }
}

/// Whether an async task here sleeps on a futex ring of its own, polled by the tokio runtime's
/// I/O driver (`io_uring` futex waits: Linux 6.7 and later, not refused by a sandbox), rather
/// than through the reactor thread.
#[cfg(feature = "tokio")]
pub fn async_wakes_directly() -> bool {
    crate::sys::FutexRing::new(false).is_some()
}
