//! Hooks for the crate's own tests, fuzz targets and harness. Not part of the public API: no
//! semver promise covers anything here.

pub use crate::channel::SliceWriter;
pub use crate::ipc::rendezvous::rendezvous_path;
pub use crate::ipc::{forced, validate_name as validate_fallback_name};
pub use crate::layout::{
    segment_size, PeerInfo, RingHeader, SegmentHeader, HEADER_SIZE, LAYOUT_VERSION, MAGIC, READY,
    RINGS_OFFSET,
};
pub use crate::mapping::{shm_dir, unlink, validate_name, OS_PREFIX};

/// Bytes a frame with a payload of `len` bytes occupies in a ring, header included.
pub fn frame_size(len: usize) -> usize {
    crate::ring::frame_size(len)
}

/// Largest payload one frame carries in a ring of `capacity` bytes.
pub fn max_payload(capacity: usize) -> usize {
    crate::ring::max_payload(capacity)
}

/// Every frame starts on a boundary of this many bytes.
pub const FRAME_ALIGN: usize = crate::ring::FRAME_ALIGN;

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
}

impl StopPoint {
    /// The value of [`STOP_AT_ENV`] that selects this point.
    pub fn name(self) -> &'static str {
        match self {
            StopPoint::ConnectClaimed => "connect-claimed",
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

/// Takes the creator's lock on a freshly made segment file the way `Channel::create` does,
/// waiting for it; the lock lasts as long as `file` stays open. For tools that forge segments.
pub fn take_creator_lock(file: &std::fs::File) -> crate::Result<()> {
    crate::sys::lock::take(file, crate::layout::CREATOR_LOCK, true).map(|_| ())
}

pub use crate::layout::{CONNECTOR_LOCK, CREATOR_LOCK};

/// A listener's client slots: where the first starts, how long each is (its first `u64` is
/// `pid << 32 | state`), and the state the server gives a slot it holds a connection in. For
/// tests that forge slot states.
pub use crate::layout::listener::{
    SLOTS_OFFSET as LISTENER_SLOTS_OFFSET, SLOT_ACTIVE as LISTENER_SLOT_ACTIVE,
    SLOT_SIZE as LISTENER_SLOT_SIZE,
};

/// Where the fallback listener `name` keeps its lock file (beside its rendezvous file).
pub use crate::ipc::listener::lock_path as fallback_listener_lock_path;
