//! Hooks for the crate's own tests, fuzz targets and harness. Not part of the public API: no
//! semver promise covers anything here.

pub use crate::channel::SliceWriter;
pub use crate::fallback::{forced, rendezvous_path, validate_name as validate_fallback_name};
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
