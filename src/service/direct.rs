//! A task's own sleep, woken by its peer through the tokio runtime's I/O driver: the task's
//! futex wait is submitted to a small `io_uring` of its own ([`FutexRing`]) whose descriptor
//! the runtime polls, so the peer's `FUTEX_WAKE` makes it readable and the runtime thread,
//! woken by its own poll, runs the task: one hand-off, where a wait through the reactor thread
//! takes two (peer, reactor, runtime thread).
//!
//! Used only on a tokio runtime with its I/O driver and a kernel with `io_uring` futex waits
//! (6.7 and later); [`DirectWait::new`] says `None` otherwise and the task waits through the
//! reactor. The ring is one any thread may enter, whatever the runtime's flavour (a ring for one
//! thread only woke its runtime 15.6 ms late on Linux 6.18: `crate::sys::FutexRing` says why),
//! so a current-thread runtime may be driven from any thread.

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
        DirectWait::with(FutexRing::new()?)
    }

    /// `ring`, registered with the current runtime.
    fn with(ring: FutexRing) -> Option<DirectWait> {
        // SAFETY: the ring's descriptor is owned by the ring, open until the ring is dropped
        // with the `AsyncFd`, and `as_raw_fd` always returns the same one.
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
        // A wait that completed in its submission (the word had changed): no need to go
        // through the runtime's poll.
        if self.fd.get_mut().reap() {
            return Ok(Armed::Again);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::sync::atomic::Ordering;

    fn arm_on(
        rt: &::tokio::runtime::Runtime,
        direct: &mut DirectWait,
        word: &AtomicU32,
    ) -> io::Result<Armed> {
        rt.block_on(poll_fn(|cx| Poll::Ready(direct.arm(cx, word, 0, None))))
    }

    #[test]
    fn a_wait_armed_on_one_thread_is_woken_when_its_runtime_is_driven_from_another() {
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let Some(mut direct) = rt.block_on(async { DirectWait::new() }) else {
            crate::sys::uring_tests::no_ring_here("futex ring");
            return;
        };
        let word = AtomicU32::new(0);
        assert!(matches!(
            arm_on(&rt, &mut direct, &word),
            Ok(Armed::Pending)
        ));
        // The same runtime, driven from another thread.
        let armed = std::thread::scope(|s| {
            s.spawn(|| {
                let armed = arm_on(&rt, &mut direct, &word);
                word.store(1, Ordering::Release);
                crate::sys::futex_wake(&word);
                let woken = rt.block_on(poll_fn(|cx| match direct.fd.poll_read_ready_mut(cx) {
                    Poll::Ready(Ok(mut ready)) => Poll::Ready(ready.get_inner_mut().reap()),
                    Poll::Ready(Err(_)) => Poll::Ready(false),
                    Poll::Pending => Poll::Pending,
                }));
                (armed, woken)
            })
            .join()
            .unwrap()
        });
        assert!(
            matches!(armed.0, Ok(Armed::Pending)),
            "the wait failed on the runtime's new thread: {:?}",
            armed.0.err()
        );
        assert!(armed.1, "the wake-up did not complete the wait");
    }
}
