//! A task's own sleep, woken by its peer through the tokio runtime's I/O driver: the task's
//! futex wait is submitted to a small `io_uring` of its own ([`FutexRing`]) whose descriptor
//! the runtime polls, so the peer's `FUTEX_WAKE` makes it readable and the runtime thread,
//! woken by its own poll, runs the task: one hand-off, where a wait through the reactor thread
//! takes two (peer, reactor, runtime thread).
//!
//! Used only on a tokio runtime with its I/O driver and a kernel with `io_uring` futex waits
//! (6.7 and later); [`DirectWait::new`] says `None` otherwise and the task waits through the
//! reactor.

use std::io;
use std::sync::atomic::AtomicU32;
use std::task::{Context, Poll};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;

use crate::sys::FutexRing;

/// What [`DirectWait::arm`] left behind.
pub(crate) enum Armed {
    /// Asleep: the runtime wakes the task's waker when the wait completes.
    Pending,
    /// The wait already completed (the word had changed, or the timeout passed): look again.
    Again,
}

/// A task's futex ring, registered with the runtime it was made on.
pub(crate) struct DirectWait {
    fd: AsyncFd<FutexRing>,
}

impl DirectWait {
    /// A ring registered with the current tokio runtime, or `None` outside one or where the
    /// kernel offers no `io_uring` futex waits.
    ///
    /// # Panics
    ///
    /// On a tokio runtime built without its I/O driver (`enable_io`), as tokio's own
    /// `AsyncFd` does.
    pub(crate) fn new() -> Option<DirectWait> {
        ::tokio::runtime::Handle::try_current().ok()?;
        let ring = FutexRing::new()?;
        // SAFETY: the descriptor is the ring's own, open until the ring is dropped with the
        // `AsyncFd`, and `as_raw_fd` always returns it (`FutexRing` never replaces its ring).
        let fd = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }.ok()?;
        Some(DirectWait { fd })
    }

    /// Sleeps until `word` no longer holds `seen` (and its peer wakes it) or `timeout` passes;
    /// the runtime wakes `cx`'s waker then. The caller keeps the rest of the handshake (it
    /// announced its sleep and looked again after reading `seen`).
    pub(crate) fn arm(
        &mut self,
        cx: &mut Context<'_>,
        word: &AtomicU32,
        seen: u32,
        timeout: Option<Duration>,
    ) -> io::Result<Armed> {
        self.fd.get_mut().wait(word, seen, timeout)?;
        loop {
            let mut ready = match self.fd.poll_read_ready_mut(cx) {
                Poll::Pending => return Ok(Armed::Pending),
                Poll::Ready(ready) => ready?,
            };
            let latest = ready.get_inner_mut().reap();
            // Cleared only for the completions just reaped: one that arrives later is a new
            // readiness event, which the next poll sees.
            ready.clear_ready();
            if latest {
                return Ok(Armed::Again);
            }
        }
    }
}
