//! Watching the other endpoint: did it close, is its process still running?

use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::layout::{PeerInfo, PEER_ABSENT, PEER_CLAIMING, PEER_CLOSED, PEER_PRESENT};
use crate::process::ProcessId;
use crate::wait::CHECK_INTERVAL;

/// Watches the other endpoint: did it close, is its process still running?
#[derive(Clone)]
pub(super) struct PeerWatch {
    pub(super) info: NonNull<PeerInfo>,
    pub(super) id: Option<ProcessId>,
    pub(super) last_check: Option<Instant>,
}

impl PeerWatch {
    pub(super) fn info(&self) -> &PeerInfo {
        // SAFETY: points into the channel's mapping, which outlives the watch; all fields are
        // atomics.
        unsafe { self.info.as_ref() }
    }

    pub(super) fn state(&self) -> u32 {
        // Acquire: pairs with the Release store of PEER_PRESENT (so pid and start time are
        // visible) and of PEER_CLOSED in `Channel::drop` (so every frame sent before the close
        // is visible).
        self.info().state.load(Ordering::Acquire)
    }

    /// Err(Disconnected) once the peer closed, Err(PeerGone) once its process is gone.
    pub(super) fn check(&mut self) -> Result<()> {
        match self.state() {
            PEER_ABSENT | PEER_CLAIMING => Ok(()),
            PEER_PRESENT => {
                // SAFETY: as in `info`; a copy of the pointer so `self.id` can be borrowed.
                let info = unsafe { self.info.as_ref() };
                let id = *self.id.get_or_insert_with(|| ProcessId {
                    // Relaxed: published before PEER_PRESENT, which `state` read with Acquire.
                    pid: info.pid.load(Ordering::Relaxed),
                    start_time: info.start_time.load(Ordering::Relaxed),
                });
                if id.is_alive() {
                    // Only a live verdict is cached: a dead process stays dead, and every call
                    // after the first `PeerGone` must report it too.
                    self.last_check = Some(Instant::now());
                    Ok(())
                } else {
                    self.last_check = None;
                    Err(Error::PeerGone { pid: id.pid })
                }
            }
            PEER_CLOSED => Err(Error::Disconnected),
            other => Err(Error::corrupt(format!("peer state {other:#x} is unknown"))),
        }
    }

    /// Like `check`, but looks at the process at most once per check interval.
    pub(super) fn check_throttled(&mut self) -> Result<()> {
        let state = self.state();
        if state == PEER_PRESENT {
            if let Some(last) = self.last_check {
                if last.elapsed() < CHECK_INTERVAL {
                    return Ok(());
                }
            }
        }
        self.check()
    }
}

impl crate::wait::Peer for PeerWatch {
    fn check(&mut self, process: bool) -> Result<()> {
        if process {
            PeerWatch::check(self)
        } else if self.state() == PEER_CLOSED {
            Err(Error::Disconnected)
        } else {
            Ok(())
        }
    }

    fn process(&mut self) -> Option<(u32, u64)> {
        if self.state() != PEER_PRESENT {
            return None;
        }
        let info = self.info();
        // Relaxed: published before PEER_PRESENT, which `state` read with Acquire.
        Some((
            info.pid.load(Ordering::Relaxed),
            info.start_time.load(Ordering::Relaxed),
        ))
    }
}
