//! The lane: a thread that sends, one message at a time, for the sends of an `IpcDuplex` that
//! have a deadline.
//!
//! ipc-channel's send blocks while the peer's socket buffer is full, with no timeout and no
//! socket to poll. A send with a deadline therefore waits (until its deadline) only for the
//! lane to be free, copies its message into the lane's buffer and returns: the lane's thread
//! makes the blocking call. A lane holds one message, so a peer that stops reading holds up one
//! message there plus what its socket buffer takes, and the next send with a deadline times
//! out. A send the lane made that failed is reported to the next send. The lane's thread ends
//! once its duplex is gone and its last message is out (or failed: the peer's end is closed).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use ipc_channel::ipc::IpcBytesSender;

use super::Failure;
use crate::wait::Deadline;

/// The lane of one duplex.
pub(super) struct Lane {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a message is handed over, when the lane is free again, and on stop.
    changed: Condvar,
}

struct State {
    /// The message handed over and not yet sent.
    message: Option<Vec<u8>>,
    /// True from the hand-over until the send returned.
    busy: bool,
    /// How the last send failed, for the next send of the duplex to report.
    failure: Option<Failure>,
    /// A buffer for the next message (the last one's, cleared).
    spare: Vec<u8>,
    /// The duplex is gone: end once the message under way is out.
    stop: bool,
}

impl Lane {
    /// Starts the lane's thread, sending on `tx` (a clone of the duplex's sender).
    pub(super) fn start(name: &str, tx: IpcBytesSender) -> std::io::Result<Lane> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                message: None,
                busy: false,
                failure: None,
                spare: Vec::new(),
                stop: false,
            }),
            changed: Condvar::new(),
        });
        let theirs = shared.clone();
        std::thread::Builder::new()
            .name(format!("shmlink-send-{name}"))
            .spawn(move || theirs.run(&tx))?;
        Ok(Lane { shared })
    }

    /// Waits until the lane is free, at most until `deadline`: `Ok(true)` once it is,
    /// `Ok(false)` if it is not and `deadline` is [`Deadline::Now`], `Err(None)` past an
    /// instant; `Err(Some(failure))` if the last message the lane sent failed.
    pub(super) fn wait_free(&self, deadline: Deadline) -> Result<bool, Option<Failure>> {
        let mut state = self.shared.lock();
        while state.busy {
            state = match deadline {
                Deadline::Now => return Ok(false),
                Deadline::Never => self.shared.wait(state),
                Deadline::At(at) => {
                    let now = Instant::now();
                    if now >= at {
                        return Err(None);
                    }
                    let (state, _) = self
                        .shared
                        .changed
                        .wait_timeout(state, at - now)
                        .unwrap_or_else(|p| p.into_inner());
                    state
                }
            };
        }
        match state.failure.take() {
            Some(failure) => Err(Some(failure)),
            None => Ok(true),
        }
    }

    /// Hands `bytes` to the lane, which [`wait_free`](Lane::wait_free) found free.
    pub(super) fn hand_over(&self, bytes: &[u8]) {
        let mut state = self.shared.lock();
        let mut message = std::mem::take(&mut state.spare);
        message.clear();
        message.extend_from_slice(bytes);
        state.message = Some(message);
        state.busy = true;
        drop(state);
        self.shared.changed.notify_all();
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves plain values behind, each valid.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(state).unwrap_or_else(|p| p.into_inner())
    }

    /// The lane's thread: sends each message handed over, until stopped.
    fn run(&self, tx: &IpcBytesSender) {
        let mut state = self.lock();
        loop {
            let Some(message) = state.message.take() else {
                if state.stop {
                    return;
                }
                state = self.wait(state);
                continue;
            };
            drop(state);
            let result = tx.send(&message);
            state = self.lock();
            state.busy = false;
            state.spare = message;
            if let Err(e) = result {
                state.failure = Some(Failure::from(e));
            }
            self.changed.notify_all();
        }
    }
}
