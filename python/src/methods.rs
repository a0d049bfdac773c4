//! The message method set, once for every Rust type a Python channel holds.
//!
//! A Python `Channel` (and so an `Endpoint`, and a channel a `Listener` accepted) holds one of
//! [`shmlink::Channel`], [`shmlink::Connection`] or [`shmlink::Endpoint`] behind a mutex. The
//! Python operations are written here once, as generic functions ([`send`], [`send_batch`],
//! [`recv`], [`recv_batch`]) bounded on the library's cores ([`SendCore`], [`RecvCore`]): each
//! wait is cut into slices of [`SLICE`](crate::wait::SLICE) with the GIL released, with a look
//! for signals between them, and a message that goes (or is there) now takes no slice at all.
//! [`Methods`] is what the classes call: one implementation, for [`Slot<H>`] of any held type,
//! so the choice of Rust type is made once, when the channel is made, by the vtable.
//!
//! The library's method set ([`Sender`], [`Receiver`]) is what every held type offers; the
//! binding reaches it through four functions ([`send_until`], [`send_batch_until`],
//! [`recv_until`], [`recv_batch_until`]) that take a [`Deadline`] and call the `try_`,
//! `_timeout` or blocking form it names. The binding uses no other operation: JSON is encoded
//! and decoded by the Python codec, `recv_into` copies straight from the received message into
//! the Python buffer, and `reserve` has no Python form.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use shmlink::{
    Backend, Channel as RsChannel, ChannelName, Config, Connection, Endpoint as RsEndpoint, Error,
    Message, Receiver, RecvError, SendError, Sender, TopicConfig,
};

use crate::buffer::RawBuffer;
use crate::errors::{closed, to_py, ShmlinkError};
use crate::wait::{lock, lock_nogil, next_slice, SLICE};

/// How many messages a batch receive takes at a time with the GIL held, between two looks at
/// its bounds.
const BATCH_CHUNK: usize = 256;

/// The bytes a message of `len` bytes takes in a ring as one frame: an 8-byte header and the
/// payload padded to 8 bytes (a message of several frames takes at least as much).
fn frame_bytes(len: usize) -> usize {
    8 + len.div_ceil(8) * 8
}

/// How long one call may wait: which of the library's forms it is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deadline {
    /// Not at all: the `try_` forms.
    Now,
    /// Until this instant: the `_timeout` forms.
    At(Instant),
    /// For as long as it takes: the blocking forms.
    Never,
}

impl Deadline {
    /// `timeout` from now (or never, for a timeout too long to add to the clock).
    fn after(timeout: Duration) -> Deadline {
        Instant::now()
            .checked_add(timeout)
            .map_or(Deadline::Never, Deadline::At)
    }
}

/// What is left of `at` from now (the `_timeout` forms count from the call).
fn left(at: Instant) -> Duration {
    at.saturating_duration_since(Instant::now())
}

/// Sends one message within `deadline`, through the form of the library's [`Sender`] it names.
fn send_until<E: Sender>(end: &mut E, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
    match deadline {
        Deadline::Now => end.try_send(bytes),
        Deadline::At(at) => end.send_timeout(bytes, left(at)),
        Deadline::Never => end.send(bytes),
    }
}

/// Sends the messages of `batch` in order within `deadline`; how many went.
fn send_batch_until<E: Sender>(
    end: &mut E,
    batch: &[&[u8]],
    deadline: Deadline,
) -> Result<usize, SendError> {
    match deadline {
        Deadline::Now => end.try_send_batch(batch),
        Deadline::At(at) => end.send_batch_timeout(batch, left(at)),
        Deadline::Never => end.send_batch(batch),
    }
}

/// Receives the next message within `deadline`, through the form of the library's
/// [`Receiver`] it names, and hands it to `take` while it is lent out.
fn recv_until<E: Receiver, R>(
    end: &mut E,
    deadline: Deadline,
    take: impl FnOnce(&[u8], &ChannelName) -> R,
) -> Result<R, RecvError> {
    let msg = match deadline {
        Deadline::Now => end.try_recv(),
        Deadline::At(at) => end.recv_timeout(left(at)),
        Deadline::Never => end.recv(),
    }?;
    Ok(take(&msg, msg.channel()))
}

/// Hands `f` the next message within `deadline`, then those there now behind it, up to `max`;
/// how many it took.
fn recv_batch_until<E: Receiver>(
    end: &mut E,
    max: usize,
    f: &mut impl FnMut(&[u8]),
    deadline: Deadline,
) -> Result<usize, RecvError> {
    match deadline {
        Deadline::Now => end.try_recv_batch(max, f),
        Deadline::At(at) => end.recv_batch_timeout(max, left(at), f),
        Deadline::Never => end.recv_batch(max, f),
    }
}

/// What the classes read and set of a held end besides its messages.
pub(crate) trait Info {
    fn max_frame(&self) -> usize;
    fn max_message(&self) -> usize;
    fn set_max_message(&mut self, max: usize);
    fn peer_pid(&self) -> Option<u32>;
    fn is_peer_connected(&self) -> bool;
    fn backend(&self) -> Backend;
    /// The shared-memory channel, if the end is on that backend.
    fn channel(&mut self) -> Option<&mut RsChannel>;
}

impl Info for RsChannel {
    fn max_frame(&self) -> usize {
        RsChannel::max_frame(self)
    }
    fn max_message(&self) -> usize {
        RsChannel::max_message(self)
    }
    fn set_max_message(&mut self, max: usize) {
        RsChannel::set_max_message(self, max)
    }
    fn peer_pid(&self) -> Option<u32> {
        RsChannel::peer_pid(self)
    }
    fn is_peer_connected(&self) -> bool {
        RsChannel::is_peer_connected(self)
    }
    fn backend(&self) -> Backend {
        Backend::Shm
    }
    fn channel(&mut self) -> Option<&mut RsChannel> {
        Some(self)
    }
}

impl Info for Connection {
    fn max_frame(&self) -> usize {
        RsChannel::max_frame(self)
    }
    fn max_message(&self) -> usize {
        RsChannel::max_message(self)
    }
    fn set_max_message(&mut self, max: usize) {
        self.channel().set_max_message(max)
    }
    fn peer_pid(&self) -> Option<u32> {
        RsChannel::peer_pid(self)
    }
    fn is_peer_connected(&self) -> bool {
        RsChannel::is_peer_connected(self)
    }
    fn backend(&self) -> Backend {
        Backend::Shm
    }
    fn channel(&mut self) -> Option<&mut RsChannel> {
        Some(Connection::channel(self))
    }
}

impl Info for RsEndpoint {
    fn max_frame(&self) -> usize {
        RsEndpoint::max_frame(self)
    }
    fn max_message(&self) -> usize {
        RsEndpoint::max_message(self)
    }
    fn set_max_message(&mut self, max: usize) {
        if let Some(c) = self.as_channel() {
            c.set_max_message(max)
        }
    }
    fn peer_pid(&self) -> Option<u32> {
        RsEndpoint::peer_pid(self)
    }
    fn is_peer_connected(&self) -> bool {
        RsEndpoint::is_peer_connected(self)
    }
    fn backend(&self) -> Backend {
        RsEndpoint::backend(self)
    }
    fn channel(&mut self) -> Option<&mut RsChannel> {
        self.as_channel()
    }
}

/// A Rust type a Python channel holds: an end with both directions' cores (a server's
/// connection holds a channel and frees its listener slot when dropped).
pub(crate) trait Held: Info + SendSide + RecvSide {
    type End: Sender + Receiver;
    fn end(&mut self) -> &mut Self::End;
}

impl Held for RsChannel {
    type End = RsChannel;
    fn end(&mut self) -> &mut RsChannel {
        self
    }
}

impl Held for Connection {
    type End = Connection;
    fn end(&mut self) -> &mut Connection {
        self
    }
}

impl Held for RsEndpoint {
    type End = RsEndpoint;
    fn end(&mut self) -> &mut RsEndpoint {
        self
    }
}

/// What a send needs of a held end: its sending cores and its largest frame (a channel's,
/// or a topic's publisher).
pub(crate) trait SendSide: Send + 'static {
    type Tx: Sender;
    fn tx(&mut self) -> &mut Self::Tx;
    fn max_frame(&self) -> usize;
}

/// What a receive needs of a held end: its receiving cores and how many bytes its ring holds
/// (what a batch receive takes at most; a default ring's on the ipc-channel backend).
pub(crate) trait RecvSide: Send + 'static {
    type Rx: Receiver;
    fn rx(&mut self) -> &mut Self::Rx;
    fn ring_bytes(&mut self) -> usize;
}

macro_rules! both_sides {
    ($($ty:ty),*) => {$(
        impl SendSide for $ty {
            type Tx = <$ty as Held>::End;
            fn tx(&mut self) -> &mut Self::Tx {
                self.end()
            }
            fn max_frame(&self) -> usize {
                Info::max_frame(self)
            }
        }

        impl RecvSide for $ty {
            type Rx = <$ty as Held>::End;
            fn rx(&mut self) -> &mut Self::Rx {
                self.end()
            }
            fn ring_bytes(&mut self) -> usize {
                Info::channel(self)
                    .map_or_else(|| Config::default().capacity, |c| c.capacity())
            }
        }
    )*};
}

both_sides!(RsChannel, Connection, RsEndpoint);

impl SendSide for shmlink::EndpointPublisher {
    type Tx = shmlink::EndpointPublisher;
    fn tx(&mut self) -> &mut Self::Tx {
        self
    }
    fn max_frame(&self) -> usize {
        self.max_message()
    }
}

impl RecvSide for shmlink::EndpointSubscriber {
    type Rx = shmlink::EndpointSubscriber;
    fn rx(&mut self) -> &mut Self::Rx {
        self
    }
    fn ring_bytes(&mut self) -> usize {
        match self.backend() {
            // A topic's messages are at most half its ring.
            Backend::Shm => 2 * (self.max_message() + 72),
            Backend::IpcChannel => TopicConfig::default().capacity,
        }
    }
}

/// A held end behind its lock; `None` once closed.
pub(crate) type Cell<H> = Mutex<Option<H>>;

/// Sends `bytes` now (`try_only`) or within `deadline`, waiting in slices with the GIL
/// released.
pub(crate) fn send<H: SendSide>(
    py: Python<'_>,
    cell: &Cell<H>,
    bytes: &[u8],
    deadline: Option<Instant>,
    try_only: bool,
) -> PyResult<()> {
    // Fast path, with the GIL held: a send that fits now (a message longer than a frame,
    // unless `try_only`, goes the slow way: `try_send` refuses one the ring cannot hold
    // whole, which a waiting send delivers as the peer reads).
    // A `try_` call returns from this match whatever happens.
    match cell.try_lock() {
        Ok(mut g) => {
            let held = g.as_mut().ok_or_else(closed)?;
            if try_only || bytes.len() <= held.max_frame() {
                match send_until(held.tx(), bytes, Deadline::Now) {
                    Ok(()) => return Ok(()),
                    Err(SendError::Full { .. }) if !try_only => {}
                    Err(e) => return Err(to_py(e)),
                }
            }
        }
        Err(_) if try_only => {
            let r = py.allow_threads(|| {
                let mut g = lock_nogil(cell);
                let held = g.as_mut().ok_or(None)?;
                send_until(held.tx(), bytes, Deadline::Now).map_err(|e| Some(Error::from(e)))
            });
            return r.map_err(|e| e.map_or_else(closed, to_py));
        }
        Err(_) => {}
    }
    let mut whole = false;
    loop {
        let (slice, last) = next_slice(deadline);
        let r = py.allow_threads(|| {
            let mut g = lock_nogil(cell);
            let held = g.as_mut().ok_or(None)?;
            // A message longer than one frame is withdrawn if its deadline passes part-way:
            // it waits in one call (to its own deadline), not in slices.
            let wait = if bytes.len() > held.max_frame() {
                whole = true;
                deadline.map_or(Deadline::Never, Deadline::At)
            } else {
                Deadline::after(slice)
            };
            send_until(held.tx(), bytes, wait).map_err(|e| Some(Error::from(e)))
        });
        match r {
            Ok(()) => return Ok(()),
            Err(Some(Error::Send(SendError::Timeout { .. }))) if !last && !whole => {
                py.check_signals()?
            }
            Err(e) => return Err(e.map_or_else(closed, to_py)),
        }
    }
}

/// What a receive does with the message (and the name of its channel, for errors), with the GIL
/// held, while it is still lent out.
pub(crate) type Take<'a, R> = dyn Fn(Python<'_>, &[u8], &ChannelName) -> PyResult<R> + Sync + 'a;

/// Receives one message now (`try_only`) or within `deadline`, and hands it to `take`.
pub(crate) fn recv<H: RecvSide, R: Send>(
    py: Python<'_>,
    cell: &Cell<H>,
    deadline: Option<Instant>,
    try_only: bool,
    take: &Take<'_, R>,
) -> PyResult<R> {
    // Fast path, with the GIL held: a message waiting now.
    // A `try_` call returns from this match whatever happens.
    match cell.try_lock() {
        Ok(mut g) => {
            let held = g.as_mut().ok_or_else(closed)?;
            match recv_until(held.rx(), Deadline::Now, |m, c| take(py, m, c)) {
                Ok(r) => return r,
                Err(RecvError::Empty { .. }) if !try_only => {}
                Err(e) => return Err(to_py(e)),
            }
        }
        Err(_) if try_only => {
            // Another thread holds the channel: wait for it without the GIL, then try.
            let r = py.allow_threads(|| {
                let mut g = lock_nogil(cell);
                let held = g.as_mut().ok_or(None)?;
                recv_until(held.rx(), Deadline::Now, |m, c| {
                    Python::with_gil(|py| take(py, m, c))
                })
                .map_err(|e| Some(Error::from(e)))
            });
            return r.map_err(|e| e.map_or_else(closed, to_py))?;
        }
        Err(_) => {}
    }
    loop {
        let (slice, last) = next_slice(deadline);
        let r = py.allow_threads(|| {
            let mut g = lock_nogil(cell);
            let held = g.as_mut().ok_or(None)?;
            // The message is copied out while it is in the ring, so the GIL is taken back
            // with the channel still locked: every other lock of it is taken without the GIL.
            recv_until(held.rx(), Deadline::after(slice), |m, c| {
                Python::with_gil(|py| take(py, m, c))
            })
            .map_err(|e| Some(Error::from(e)))
        });
        match r {
            Ok(r) => return r,
            Err(Some(Error::Recv(RecvError::Timeout { .. }))) if !last => py.check_signals()?,
            Err(e) => return Err(e.map_or_else(closed, to_py)),
        }
    }
}

/// Sends the messages of `batch` in order: as many at a time as go now, with the GIL held,
/// and, when none does, the next one as [`send`] sends it (waiting in slices). Returns how many
/// went; an error after the first message ends the batch (the next call meets it again),
/// except an exception that is not the library's (`KeyboardInterrupt` from a wait), which is
/// raised whatever went.
pub(crate) fn send_batch<H: SendSide>(
    py: Python<'_>,
    cell: &Cell<H>,
    batch: &[&[u8]],
    deadline: Option<Instant>,
    try_only: bool,
) -> PyResult<usize> {
    let mut sent = 0;
    let ended = |sent: usize, e: PyErr| {
        if sent > 0 && e.is_instance_of::<ShmlinkError>(py) {
            Ok(sent)
        } else {
            Err(e)
        }
    };
    while sent < batch.len() {
        // How many went now; `Err(None)` where the next message is for `send` to wait for.
        let now: Result<usize, Option<SendError>> = match cell.try_lock() {
            Ok(mut g) => {
                let held = g.as_mut().ok_or_else(closed)?;
                if try_only || batch[sent].len() <= held.max_frame() {
                    send_batch_until(held.tx(), &batch[sent..], Deadline::Now).map_err(Some)
                } else {
                    // Longer than a frame: `send` delivers it as the peer reads.
                    Err(None)
                }
            }
            Err(_) if try_only => {
                // Another thread holds the channel: wait for it without the GIL, then try,
                // as `try_send` does.
                let rest = &batch[sent..];
                let r = py.allow_threads(|| {
                    let mut g = lock_nogil(cell);
                    let held = g.as_mut().ok_or(None)?;
                    send_batch_until(held.tx(), rest, Deadline::Now).map_err(Some)
                });
                match r {
                    Ok(n) => Ok(n),
                    Err(None) => return ended(sent, closed()),
                    Err(Some(e)) => Err(Some(e)),
                }
            }
            // Held by another thread: `send` below waits for it (and for room).
            Err(_) => Err(None),
        };
        match now {
            Ok(n) => sent += n,
            Err(Some(SendError::Full { .. })) | Err(None) if !try_only => {
                match send(py, cell, batch[sent], deadline, false) {
                    Ok(()) => sent += 1,
                    Err(e) => return ended(sent, e),
                }
            }
            Err(Some(e)) => return ended(sent, to_py(e)),
            Err(None) => return ended(sent, closed()),
        }
    }
    Ok(sent)
}

/// Receives the next message as [`recv`] does (or now, `try_only`), then the messages there
/// now behind it, up to `max` in all: a list of `bytes`.
///
/// A peer that keeps the ring from running dry could keep a batch going for ever, so the
/// messages after the first are taken in chunks of [`BATCH_CHUNK`] with the GIL held, and
/// between chunks the batch looks at its bounds: it ends once it holds a ring's worth of
/// frames, [`SLICE`] after its first message, or at its deadline, whichever comes first.
/// Between chunks, once it has held the GIL for [`hand_over_after`], it hands the GIL to a
/// thread that waits for it. It does not run signal handlers
/// itself (one that raises would drop the messages already taken): it returns within a
/// slice, and the interpreter runs them then.
pub(crate) fn recv_batch<H: RecvSide>(
    py: Python<'_>,
    cell: &Cell<H>,
    max: usize,
    deadline: Option<Instant>,
    try_only: bool,
) -> PyResult<Py<PyList>> {
    let list = PyList::empty(py);
    if max == 0 {
        return Ok(list.unbind());
    }
    let first = recv(py, cell, deadline, try_only, &|py, m, _| {
        Ok(PyBytes::new(py, m).unbind())
    })?;
    let mut taken = frame_bytes(first.bind(py).as_bytes().len());
    list.append(first)?;
    let end = match deadline {
        Some(d) => d.min(Instant::now() + SLICE),
        None => Instant::now() + SLICE,
    };
    let mut budget = None;
    let hold = hand_over_after(py);
    let mut hand_over = Instant::now() + hold;
    while list.len() < max {
        let want = (max - list.len()).min(BATCH_CHUNK);
        // Another thread holds the channel: the batch ends with what it has.
        let Ok(mut g) = cell.try_lock() else {
            break;
        };
        let Some(held) = g.as_mut() else { break };
        // The ipc-channel backend has no ring: a default ring's worth.
        let budget = *budget.get_or_insert_with(|| held.ring_bytes());
        let mut failed = None;
        let mut each = |m: &[u8]| {
            taken += frame_bytes(m.len());
            if let Err(e) = list.append(PyBytes::new(py, m)) {
                failed.get_or_insert(e);
            }
        };
        let got = recv_batch_until(held.rx(), want, &mut each, Deadline::Now);
        drop(g);
        if let Some(e) = failed {
            return Err(e);
        }
        // Fewer than asked: nothing more there now. An error (`Empty` among them) ends
        // the batch too; the next call meets it.
        if got.map_or(true, |n| n < want) || taken >= budget || Instant::now() >= end {
            break;
        }
        let now = Instant::now();
        if now >= hand_over {
            // A thread that has waited a switch interval for the GIL has asked for it, and a
            // release with that request pending waits until the thread took it (CPython's
            // forced switching). Released sooner, the GIL goes back to this thread: the waiter
            // is woken, finds it taken again and starts its interval anew, for as long as the
            // batch goes on.
            py.allow_threads(|| ());
            hand_over = now + hold;
        }
    }
    Ok(list.unbind())
}

/// How long a batch holds the GIL before it hands it over: twice the interpreter's switch
/// interval (`sys.getswitchinterval()`), so that a thread that began to wait at any time
/// before has timed out and asked for it.
fn hand_over_after(py: Python<'_>) -> Duration {
    let interval = py
        .import("sys")
        .and_then(|sys| sys.getattr("getswitchinterval")?.call0()?.extract::<f64>())
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(Duration::from_millis(5));
    interval.max(Duration::from_micros(100)) * 2
}

/// A held end, locked: `None` once closed.
pub(crate) trait Locked {
    fn held(&mut self) -> Option<&mut dyn Info>;
}

impl<H: Held> Locked for MutexGuard<'_, Option<H>> {
    fn held(&mut self) -> Option<&mut dyn Info> {
        self.as_mut().map(|h| h as &mut dyn Info)
    }
}

/// The method set as the classes call it, whatever Rust type the channel holds (`timeout=`
/// turned into a deadline, `try_only` for the `try_` forms).
pub(crate) trait Methods: Send + Sync {
    fn send(
        &self,
        py: Python<'_>,
        bytes: &[u8],
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<()>;
    fn send_batch(
        &self,
        py: Python<'_>,
        batch: &[&[u8]],
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<usize>;
    /// A message as `bytes`.
    fn recv(
        &self,
        py: Python<'_>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyBytes>>;
    /// A message copied into `buffer`; its length.
    fn recv_into(
        &self,
        py: Python<'_>,
        buffer: &RawBuffer,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<usize>;
    /// A message of exactly `buffer`'s length, copied into it (`WrongSize` for another
    /// length).
    fn recv_value(
        &self,
        py: Python<'_>,
        buffer: &RawBuffer,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<()>;
    fn recv_batch(
        &self,
        py: Python<'_>,
        max: usize,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyList>>;
    /// Drops the end (with the GIL released); closing twice does nothing.
    fn close(&self, py: Python<'_>);
    /// The end locked, the GIL held (released while another thread holds the lock).
    fn lock(&self, py: Python<'_>) -> Box<dyn Locked + '_>;
    /// The end locked, the GIL not held.
    fn lock_nogil(&self) -> Box<dyn Locked + '_>;
}

/// The one implementation of [`Methods`]: a held end behind its lock.
pub(crate) struct Slot<H>(Cell<H>);

impl<H: Held> Slot<H> {
    pub(crate) fn new(held: H) -> Slot<H> {
        Slot(Mutex::new(Some(held)))
    }
}

impl<H: Held> Methods for Slot<H> {
    fn send(
        &self,
        py: Python<'_>,
        bytes: &[u8],
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<()> {
        send(py, &self.0, bytes, deadline, try_only)
    }

    fn send_batch(
        &self,
        py: Python<'_>,
        batch: &[&[u8]],
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<usize> {
        send_batch(py, &self.0, batch, deadline, try_only)
    }

    fn recv(
        &self,
        py: Python<'_>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyBytes>> {
        recv(py, &self.0, deadline, try_only, &|py, m, _| {
            Ok(PyBytes::new(py, m).unbind())
        })
    }

    fn recv_into(
        &self,
        py: Python<'_>,
        buffer: &RawBuffer,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<usize> {
        recv(py, &self.0, deadline, try_only, &|_py, m, c| {
            buffer.copy_in(m, c)
        })
    }

    fn recv_value(
        &self,
        py: Python<'_>,
        buffer: &RawBuffer,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<()> {
        recv(py, &self.0, deadline, try_only, &|_py, m, c| {
            if m.len() != buffer.len() {
                return Err(to_py(RecvError::WrongSize {
                    channel: c.clone(),
                    len: m.len(),
                    expected: buffer.len(),
                }));
            }
            buffer.copy_in(m, c).map(drop)
        })
    }

    fn recv_batch(
        &self,
        py: Python<'_>,
        max: usize,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyList>> {
        recv_batch(py, &self.0, max, deadline, try_only)
    }

    fn close(&self, py: Python<'_>) {
        let old = lock(py, &self.0).take();
        py.allow_threads(move || drop(old));
    }

    fn lock(&self, py: Python<'_>) -> Box<dyn Locked + '_> {
        Box::new(lock(py, &self.0))
    }

    fn lock_nogil(&self) -> Box<dyn Locked + '_> {
        Box::new(lock_nogil(&self.0))
    }
}
