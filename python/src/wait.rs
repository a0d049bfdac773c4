//! Waits the Python way: deadlines from `timeout=` seconds, waits cut into slices of [`SLICE`]
//! with the GIL released (signals looked at between them), and the locks a Python object's Rust
//! state is behind, taken without blocking while the GIL is held.

use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use shmlink::{Backend, WaitStrategy};

/// The longest a wait runs without the GIL before it looks for a pending signal (Ctrl-C), and
/// the longest a batch receive goes on taking messages after its first.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// A wait's end: `None` for no deadline.
pub(crate) fn deadline(timeout: Option<f64>) -> PyResult<Option<Instant>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t >= 0.0 => {
            let d =
                Duration::try_from_secs_f64(t).map_err(|e| PyValueError::new_err(e.to_string()))?;
            Ok(Some(
                Instant::now().checked_add(d).unwrap_or_else(far_future),
            ))
        }
        Some(t) if t.is_infinite() && t > 0.0 => Ok(None),
        Some(t) => Err(PyValueError::new_err(format!(
            "timeout must be a non-negative number of seconds or None, not {t}"
        ))),
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// The slice to wait next and whether it is the last before the deadline.
pub(crate) fn next_slice(deadline: Option<Instant>) -> (Duration, bool) {
    match deadline {
        None => (SLICE, false),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left <= SLICE {
                (left, true)
            } else {
                (SLICE, false)
            }
        }
    }
}

/// `backend=`: `None` (the library chooses), `"shm"` or `"ipc-channel"`.
pub(crate) fn parse_backend(backend: Option<&str>) -> PyResult<Option<Backend>> {
    match backend {
        None => Ok(None),
        Some("shm") => Ok(Some(Backend::Shm)),
        Some("ipc-channel") => Ok(Some(Backend::IpcChannel)),
        Some(other) => Err(PyValueError::new_err(format!(
            "backend must be 'shm' or 'ipc-channel', not {other:?}"
        ))),
    }
}

pub(crate) fn parse_wait(wait: &str) -> PyResult<WaitStrategy> {
    wait.parse().map_err(|_| {
        PyValueError::new_err(format!(
            "wait must be 'block', 'spin' or 'yield', not {wait:?}"
        ))
    })
}

/// Connects with the GIL released, in slices of the deadline so that Ctrl-C interrupts.
pub(crate) fn connect_sliced<T: Send>(
    py: Python<'_>,
    end: Instant,
    f: impl Fn(Duration) -> Result<T, shmlink::OpenError> + Sync,
) -> PyResult<Result<T, shmlink::OpenError>> {
    loop {
        let (slice, last) = next_slice(Some(end));
        let r = py.allow_threads(|| f(slice));
        match r {
            Err(shmlink::OpenError::Timeout { .. } | shmlink::OpenError::NotFound { .. })
                if !last =>
            {
                py.check_signals()?
            }
            r => return Ok(r),
        }
    }
}

/// Locks `m` without blocking while holding the GIL: first a try, then, if another thread
/// holds it, a wait with the GIL released (the holder may need the GIL to finish).
pub(crate) fn lock<'a, T: Send>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    match m.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            py.allow_threads(|| Guard(m.lock().unwrap_or_else(|p| p.into_inner())))
                .0
        }
    }
}

/// Carries a guard out of `allow_threads` (the guard itself is not `Send`, but it is only
/// moved back to the thread that took it).
struct Guard<G>(G);
// SAFETY: `allow_threads` runs its closure on the calling thread, so the guard never leaves
// the thread that locked the mutex; the wrapper only satisfies the `Ungil` bound.
unsafe impl<G> Send for Guard<G> {}

/// Locks `m` where the GIL is not held (inside `allow_threads`).
pub(crate) fn lock_nogil<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
