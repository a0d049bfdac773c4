//! Watching the other endpoint: did it close, does it still hold its end's lock?

use std::cell::Cell;
use std::os::unix::io::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{ChannelName, WaitError};
use crate::shm::layout::{PeerInfo, PEER_ABSENT, PEER_CLAIMING, PEER_CLOSED, PEER_PRESENT};
use crate::sys::{lock, Alarm, HoldsEnd, ProcessId};
use crate::wait::CHECK_INTERVAL;

/// Watches the other endpoint: did it close, does its process still hold its end?
///
/// Liveness is the peer's endpoint lock (see `sys/lock.rs`), asked through this channel's own open
/// of the object; the pid the peer recorded is only reported, never trusted.
#[derive(Clone)]
pub(super) struct PeerWatch {
    pub(super) info: NonNull<PeerInfo>,
    /// This endpoint's descriptor of the shared object, kept open by the mapping `info` points
    /// into for as long as the watch exists.
    fd: RawFd,
    /// The byte the peer's end keeps locked while it lives.
    lock_byte: u64,
    /// What the peer recorded about itself, read once it is present. Information only.
    id: Cell<Option<ProcessId>>,
    last_check: Cell<Option<Instant>>,
    /// The channel's name, for errors.
    name: ChannelName,
    /// Set once the peer was found gone: the verdict never changes back, even if a process that
    /// inspects the segment takes the dead peer's lock for a moment.
    gone: Cell<bool>,
    /// Raised for the sending half (shared by both halves' watches): by the death watcher on
    /// news of the peer (through either half's registration), by either half's watch once it
    /// found the peer gone, when the last registration goes, and at first, so that the first
    /// send once the peer is there makes sure a registration covers it (see
    /// `SendHalf::look_at_peer`). Lowered only by the sender, which then asks the peer's end.
    alarm: Arc<Alarm>,
}

type Result<T = (), E = WaitError> = std::result::Result<T, E>;

impl PeerWatch {
    pub(super) fn new(
        info: NonNull<PeerInfo>,
        fd: RawFd,
        lock_byte: u64,
        name: ChannelName,
    ) -> PeerWatch {
        PeerWatch {
            info,
            name,
            fd,
            lock_byte,
            id: Cell::new(None),
            last_check: Cell::new(None),
            gone: Cell::new(false),
            alarm: Arc::new(Alarm::new()),
        }
    }

    /// The pid the peer recorded, once it was seen present.
    pub(super) fn pid(&self) -> Option<u32> {
        self.id.get().map(|id| id.pid)
    }

    #[inline]
    pub(super) fn info(&self) -> &PeerInfo {
        // SAFETY: points into the channel's mapping, which outlives the watch; all fields are
        // atomics.
        unsafe { self.info.as_ref() }
    }

    #[inline]
    pub(super) fn state(&self) -> u32 {
        // Acquire: pairs with the Release store of PEER_PRESENT (so pid and start time are
        // visible) and of PEER_CLOSED in `Channel::drop` (so every frame sent before the close
        // is visible).
        self.info().state.load(Ordering::Acquire)
    }

    /// The alarm the sending half loads before each send (see `alarm`).
    #[inline(always)]
    pub(super) fn alarm(&self) -> &Alarm {
        &self.alarm
    }

    fn gone(&self) -> WaitError {
        WaitError::PeerGone {
            channel: self.name.clone(),
            pid: self.pid().unwrap_or(0),
        }
    }

    fn disconnected(&self) -> WaitError {
        WaitError::Disconnected {
            channel: self.name.clone(),
        }
    }

    /// Err(Disconnected) once the peer closed, Err(PeerGone) once it no longer holds its end's
    /// lock without having closed (its process died). Allocation-free.
    pub(super) fn check(&self) -> Result {
        if self.gone.get() {
            return Err(self.gone());
        }
        match self.state() {
            // Nobody yet, or a connector that is claiming the end (alive or dead: a dead
            // claimer's slot goes to the next connector, so either way we wait for one).
            PEER_ABSENT | PEER_CLAIMING => Ok(()),
            PEER_PRESENT => {
                if self.id.get().is_none() {
                    // Read once, for errors: the lock below decides.
                    let info = self.info();
                    self.id.set(Some(ProcessId {
                        // Relaxed: published before PEER_PRESENT, which `state` read with
                        // Acquire.
                        pid: info.pid.load(Ordering::Relaxed),
                        start_time: info.start_time.load(Ordering::Relaxed),
                    }));
                }
                #[cfg(feature = "test-hooks")]
                crate::hooks::count_peer_look();
                if lock::alive(self.fd, self.lock_byte)? {
                    self.last_check.set(Some(Instant::now()));
                    return Ok(());
                }
                // The lock is free. A peer that closes stores PEER_CLOSED before it closes the
                // descriptor that holds the lock, and the kernel orders the lock's release
                // before our query saw it free (both run under the file's lock context
                // spinlock), so a state still not CLOSED now means the peer died.
                match self.state() {
                    PEER_CLOSED => Err(self.disconnected()),
                    _ => {
                        self.gone.set(true);
                        // The sending half's next send looks and finds it.
                        self.alarm.raise();
                        Err(self.gone())
                    }
                }
            }
            PEER_CLOSED => Err(self.disconnected()),
            other => Err(WaitError::Corrupt {
                channel: self.name.clone(),
                what: format!("peer state {other:#x} is unknown"),
            }),
        }
    }

    /// Like `check`, but asks about the peer at most once per check interval.
    pub(super) fn check_throttled(&self) -> Result {
        let state = self.state();
        if state == PEER_PRESENT && !self.gone.get() {
            if let Some(last) = self.last_check.get() {
                if last.elapsed() < CHECK_INTERVAL {
                    return Ok(());
                }
            }
        }
        self.check()
    }
}

impl crate::wait::Peer for PeerWatch {
    fn check(&mut self, process: bool) -> Result {
        if process {
            PeerWatch::check(self)
        } else if self.gone.get() {
            Err(self.gone())
        } else if self.state() == PEER_CLOSED {
            Err(self.disconnected())
        } else {
            Ok(())
        }
    }

    fn channel(&self) -> ChannelName {
        self.name.clone()
    }

    fn alarm(&self) -> Option<Arc<Alarm>> {
        Some(self.alarm.clone())
    }

    fn holds_end(&self) -> HoldsEnd {
        // The descriptor stays open for as long as the mapping, which outlives the waiter's
        // registration with the watcher (see `Waiter`).
        let (fd, byte) = (self.fd, self.lock_byte);
        Box::new(move || lock::alive(fd, byte).unwrap_or(true))
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
