//! The C API of shmlink: `libshmlink.so` / `libshmlink.a` and `include/shmlink.h` (generated
//! from this file by cbindgen; `tests/header.rs` fails when the two disagree).
//!
//! Every function returns a [`shmlink_status`] (or, for the few that cannot fail, a value),
//! checks its pointer arguments for NULL, and catches any panic inside shmlink
//! ([`shmlink_status::SHMLINK_PANIC`]): nothing unwinds into C. What went wrong is also a
//! sentence, [`shmlink_last_error`], per thread.
//!
//! A handle is used by one thread at a time (it may move between threads); handles of one
//! process are independent of each other.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::time::Duration;

use shmlink_rs::{
    Channel, Config, Connection, Listener, OpenError, Publisher, ReadGuard, RecvError, RecvHalf,
    Selectable, Selector, SendError, SendHalf, Subscriber, TopicConfig, TopicMode, WaitStrategy,
    WriteGrant,
};

/// What a call did.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shmlink_status {
    /// It did what it says.
    SHMLINK_OK = 0,
    /// A `try_` receive found no message waiting.
    SHMLINK_EMPTY = 1,
    /// A `try_` send found no room (the receiver is behind).
    SHMLINK_FULL = 2,
    /// A `_timeout` call, or a connect or an accept, ran out of time.
    SHMLINK_TIMEOUT = 3,
    /// The peer closed its end; everything it sent before has been received.
    SHMLINK_DISCONNECTED = 4,
    /// The peer's process died; everything it sent before has been received.
    SHMLINK_PEER_GONE = 5,
    /// No channel, listener or topic under that name.
    SHMLINK_NOT_FOUND = 6,
    /// The name is taken by a live creator.
    SHMLINK_ALREADY_EXISTS = 7,
    /// The message is larger than the channel or topic takes.
    SHMLINK_TOO_LARGE = 8,
    /// The caller's buffer is smaller than the message: its length is in `*len`, and the
    /// message stays, for the next receive.
    SHMLINK_BUFFER_TOO_SMALL = 9,
    /// An overwrite topic's subscriber fell behind: `shmlink_last_missed()` messages were lost; the next
    /// receive gives the oldest message still there.
    SHMLINK_LAGGED = 10,
    /// The topic's publisher dropped this subscriber.
    SHMLINK_DROPPED = 11,
    /// The listener or topic has as many clients or subscribers as it takes.
    SHMLINK_TOO_MANY = 12,
    /// A NULL pointer, a name that is not a valid shmlink name, a capacity that is not a power
    /// of two in range, a length past the reservation.
    SHMLINK_INVALID_ARGUMENT = 13,
    /// The handle holds a received message or a reservation that must be released or
    /// committed first.
    SHMLINK_BUSY = 14,
    /// Anything else (a corrupt or foreign mapping, a system error): `shmlink_last_error()`
    /// says what.
    SHMLINK_ERROR = 15,
    /// A bug in shmlink, caught before it reached C: `shmlink_last_error()` says where.
    SHMLINK_PANIC = 16,
}

use shmlink_status::*;

/// A failure: its status and the sentence for `shmlink_last_error`.
struct Fail(shmlink_status, String);

type Result<T> = std::result::Result<T, Fail>;

impl From<OpenError> for Fail {
    fn from(e: OpenError) -> Fail {
        let s = match &e {
            OpenError::NotFound { .. } => SHMLINK_NOT_FOUND,
            OpenError::AlreadyExists { .. } => SHMLINK_ALREADY_EXISTS,
            OpenError::Timeout { .. } | OpenError::NoClient { .. } => SHMLINK_TIMEOUT,
            OpenError::TooManyClients { .. } | OpenError::TooManySubscribers { .. } => {
                SHMLINK_TOO_MANY
            }
            OpenError::Disconnected { .. } => SHMLINK_DISCONNECTED,
            OpenError::PeerGone { .. } => SHMLINK_PEER_GONE,
            OpenError::InvalidName { .. } | OpenError::InvalidConfig { .. } => {
                SHMLINK_INVALID_ARGUMENT
            }
            _ => SHMLINK_ERROR,
        };
        Fail(s, e.to_string())
    }
}

impl From<SendError> for Fail {
    fn from(e: SendError) -> Fail {
        let s = match &e {
            SendError::Full { .. } => SHMLINK_FULL,
            SendError::Timeout { .. } => SHMLINK_TIMEOUT,
            SendError::TooLarge { .. } => SHMLINK_TOO_LARGE,
            SendError::Disconnected { .. } => SHMLINK_DISCONNECTED,
            SendError::PeerGone { .. } => SHMLINK_PEER_GONE,
            _ => SHMLINK_ERROR,
        };
        Fail(s, e.to_string())
    }
}

impl From<RecvError> for Fail {
    fn from(e: RecvError) -> Fail {
        let s = match &e {
            RecvError::Empty { .. } => SHMLINK_EMPTY,
            RecvError::Timeout { .. } => SHMLINK_TIMEOUT,
            RecvError::Disconnected { .. } => SHMLINK_DISCONNECTED,
            RecvError::PeerGone { .. } => SHMLINK_PEER_GONE,
            RecvError::TooLarge { .. } => SHMLINK_TOO_LARGE,
            RecvError::Lagged { missed, .. } => {
                LAST_MISSED.with(|m| m.set(*missed));
                SHMLINK_LAGGED
            }
            RecvError::Dropped { .. } => SHMLINK_DROPPED,
            _ => SHMLINK_ERROR,
        };
        Fail(s, e.to_string())
    }
}

fn invalid(what: &str) -> Fail {
    Fail(SHMLINK_INVALID_ARGUMENT, what.to_owned())
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static LAST_MISSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning its failure or panic into a status and the thread's last error.
///
/// Inlined (as are the receive paths below), so that each call's work, a received message's
/// guard included, is built where it is kept rather than returned and moved through frames of
/// their own: those moves made a receive in place and its release take about twice as long
/// as the same in Rust, measured on one thread.
#[inline(always)]
fn call(f: impl FnOnce() -> Result<()>) -> shmlink_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SHMLINK_OK,
        Ok(Err(fail)) => failed(fail),
        Err(panic) => panicked(panic),
    }
}

#[cold]
#[inline(never)]
fn failed(Fail(status, message): Fail) -> shmlink_status {
    set_last_error(&message);
    status
}

#[cold]
#[inline(never)]
fn panicked(panic: Box<dyn std::any::Any + Send>) -> shmlink_status {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    set_last_error(&format!(
        "shmlink panicked (a bug, please report it): {what}"
    ));
    SHMLINK_PANIC
}

/// The sentence that says what the last failing call on this thread did wrong (an empty string
/// if none failed). The pointer stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn shmlink_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// How many messages the last `SHMLINK_LAGGED` on this thread said were missed.
#[no_mangle]
pub extern "C" fn shmlink_last_missed() -> u64 {
    LAST_MISSED.with(|m| m.get())
}

/// The name of a status, such as `"SHMLINK_TIMEOUT"` (a static string; `"SHMLINK_?"` for a
/// value that is not a status).
#[no_mangle]
pub extern "C" fn shmlink_status_name(status: shmlink_status) -> *const c_char {
    let name: &'static CStr = match status {
        SHMLINK_OK => c"SHMLINK_OK",
        SHMLINK_EMPTY => c"SHMLINK_EMPTY",
        SHMLINK_FULL => c"SHMLINK_FULL",
        SHMLINK_TIMEOUT => c"SHMLINK_TIMEOUT",
        SHMLINK_DISCONNECTED => c"SHMLINK_DISCONNECTED",
        SHMLINK_PEER_GONE => c"SHMLINK_PEER_GONE",
        SHMLINK_NOT_FOUND => c"SHMLINK_NOT_FOUND",
        SHMLINK_ALREADY_EXISTS => c"SHMLINK_ALREADY_EXISTS",
        SHMLINK_TOO_LARGE => c"SHMLINK_TOO_LARGE",
        SHMLINK_BUFFER_TOO_SMALL => c"SHMLINK_BUFFER_TOO_SMALL",
        SHMLINK_LAGGED => c"SHMLINK_LAGGED",
        SHMLINK_DROPPED => c"SHMLINK_DROPPED",
        SHMLINK_TOO_MANY => c"SHMLINK_TOO_MANY",
        SHMLINK_INVALID_ARGUMENT => c"SHMLINK_INVALID_ARGUMENT",
        SHMLINK_BUSY => c"SHMLINK_BUSY",
        SHMLINK_ERROR => c"SHMLINK_ERROR",
        SHMLINK_PANIC => c"SHMLINK_PANIC",
    };
    name.as_ptr()
}

// --- arguments ------------------------------------------------------------------------------

/// The name behind a C string.
///
/// # Safety
/// `name` is NULL or points to a NUL-terminated string that stays valid during the call.
unsafe fn name_arg<'a>(name: *const c_char) -> Result<&'a str> {
    if name.is_null() {
        return Err(invalid("the name is NULL"));
    }
    // SAFETY: not NULL, and the caller promises a NUL-terminated string.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| invalid("the name is not UTF-8"))
}

/// The bytes `data[..len]`.
///
/// # Safety
/// `data` is NULL (with `len` 0) or points to `len` readable bytes valid during the call.
unsafe fn bytes_arg<'a>(data: *const u8, len: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(invalid("data is NULL with a length above 0"));
    }
    // SAFETY: not NULL, and the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// The object behind a handle.
///
/// # Safety
/// `h` is NULL or a handle this library returned and that was not closed, used by no other
/// thread during the call.
unsafe fn handle<'a, T>(h: *mut T) -> Result<&'a mut T> {
    // SAFETY: the caller's promise; a NULL handle is refused.
    unsafe { h.as_mut() }.ok_or_else(|| invalid("the handle is NULL"))
}

fn out_arg<'a, T>(p: *mut T) -> Result<&'a mut T> {
    // SAFETY: a non-NULL out-parameter is writable memory for a T (the header's promise).
    unsafe { p.as_mut() }.ok_or_else(|| invalid("an out-parameter is NULL"))
}

fn ms(timeout_ms: u64) -> Duration {
    Duration::from_millis(timeout_ms)
}

// --- the held message and the reservation ----------------------------------------------------

/// A received message held for the caller (read in place until released, or too large for
/// the caller's buffer): it borrows the receiving side of its handle, which is boxed and
/// neither moved nor otherwise used until the message is released.
struct Held(Option<ReadGuard<'static>>);

/// A reservation being written by the caller; it borrows the sending side of its handle, as
/// a held message borrows the receiving side.
struct Reserved(Option<WriteGrant<'static>>);

/// A receiving side: a channel's half or a topic's subscriber.
trait Rx {
    fn take(&mut self, how: How) -> std::result::Result<ReadGuard<'_>, RecvError>;
}

impl Rx for RecvHalf {
    #[inline(always)]
    fn take(&mut self, how: How) -> std::result::Result<ReadGuard<'_>, RecvError> {
        match how {
            How::Block => self.recv(),
            How::Try => self.try_recv(),
            How::Timeout(t) => self.recv_timeout(t),
        }
    }
}

impl Rx for Subscriber {
    #[inline(always)]
    fn take(&mut self, how: How) -> std::result::Result<ReadGuard<'_>, RecvError> {
        match how {
            How::Block => self.recv(),
            How::Try => self.try_recv(),
            How::Timeout(t) => self.recv_timeout(t),
        }
    }
}

/// How a receive waits.
#[derive(Clone, Copy)]
enum How {
    Block,
    Try,
    Timeout(Duration),
}

/// Receives into `held` from `rx` unless a message is held already (then that one is given
/// again).
///
/// # Safety
/// `rx` stays at its address, and is not used other than through `held`, for as long as the
/// held message lives (the handle's rule: every receive goes through here, and `held` drops
/// before `rx`).
#[inline(always)]
unsafe fn receive<R: Rx>(
    held: &mut Held,
    rx: *mut R,
    how: How,
) -> Result<&'static ReadGuard<'static>> {
    let guard = match &mut held.0 {
        Some(guard) => guard,
        none => {
            // SAFETY: the caller's promise: `rx` is valid and not borrowed while nothing is held.
            let guard = unsafe { &mut *rx }.take(how)?;
            // SAFETY: the guard borrows `*rx`, which outlives it (see above).
            unsafe { hold(none, guard) }
        }
    };
    // SAFETY: the reference lives as long as the caller uses it within this call, while `held`
    // is not changed.
    Ok(unsafe { &*(guard as *const ReadGuard<'static>) })
}

/// Copies the held (or newly received) message into `buf` and releases it, or, if it does not
/// fit, keeps it and says how long it is.
///
/// # Safety
/// As [`receive`]; `buf` is NULL with `cap` 0 or points to `cap` writable bytes.
#[inline(always)]
unsafe fn receive_into<R: Rx>(
    held: &mut Held,
    rx: *mut R,
    how: How,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> Result<()> {
    let len = out_arg(len)?;
    if buf.is_null() && cap > 0 {
        return Err(invalid("the buffer is NULL with a capacity above 0"));
    }
    if held.0.is_none() {
        // Nothing held: the message is copied out and released here unless it does not fit
        // (then it is held, as below).
        // SAFETY: the caller's promise: `rx` is valid and not borrowed while nothing is held.
        let guard = unsafe { &mut *rx }.take(how)?;
        // SAFETY: `buf` and `cap` as the caller promised.
        return match unsafe { copy_out(&guard, buf, cap, len) } {
            Ok(()) => Ok(()),
            Err(too_small) => {
                // SAFETY: as in `receive`: the guard borrows `*rx`, which outlives it.
                unsafe { hold(&mut held.0, guard) };
                Err(too_small)
            }
        };
    }
    // SAFETY: the caller's promise, passed on.
    let message = unsafe { receive(held, rx, how) }?;
    // SAFETY: `buf` and `cap` as the caller promised.
    unsafe { copy_out(message, buf, cap, len) }?;
    held.0 = None;
    Ok(())
}

/// Says `message`'s length in `len` and copies it into `buf`, or, if it is longer than `cap`,
/// fails with `SHMLINK_BUFFER_TOO_SMALL` (the caller keeps the message).
///
/// # Safety
/// `buf` is NULL with `cap` 0 or points to `cap` writable bytes.
#[inline(always)]
unsafe fn copy_out(message: &[u8], buf: *mut u8, cap: usize, len: &mut usize) -> Result<()> {
    *len = message.len();
    if message.len() > cap {
        return Err(Fail(
            SHMLINK_BUFFER_TOO_SMALL,
            format!(
                "the message is {} bytes, the buffer {cap}: it stays for the next receive",
                message.len()
            ),
        ));
    }
    if !message.is_empty() {
        // SAFETY: `buf` has room for `cap >= len` bytes (the caller's promise); the message's
        // bytes are shmlink's, not the caller's buffer.
        unsafe { ptr::copy_nonoverlapping(message.as_ptr(), buf, message.len()) };
    }
    Ok(())
}

/// Keeps `guard` in `held` for the caller, and gives it back.
///
/// # Safety
/// As [`receive`]: the guard borrows a receiving side that stays where it is, unused but
/// through `held`, for as long as `held` keeps it.
#[inline(always)]
unsafe fn hold<'h>(
    held: &'h mut Option<ReadGuard<'static>>,
    guard: ReadGuard<'_>,
) -> &'h mut ReadGuard<'static> {
    // SAFETY: the caller's promise; only the guard's lifetime is widened, nothing else about
    // it changes.
    held.insert(unsafe { std::mem::transmute::<ReadGuard<'_>, ReadGuard<'static>>(guard) })
}

// --- channels -------------------------------------------------------------------------------

/// A channel's end (made by create or connect, or a listener's accepted connection).
enum End {
    Channel(Channel),
    Connection(Connection),
}

/// One end of a channel. Opaque.
pub struct shmlink_channel {
    // The held message and the reservation borrow the halves of `end`: `drop` ends them first.
    held: Held,
    reserved: Reserved,
    tx: *mut SendHalf,
    rx: *mut RecvHalf,
    /// From `Box::into_raw`: every access to the end goes through `tx` and `rx`, derived from it
    /// once, so that no new borrow of the whole end invalidates them.
    end: *mut End,
}

impl shmlink_channel {
    fn new(end: End) -> *mut shmlink_channel {
        let end = Box::into_raw(Box::new(end));
        // SAFETY: `end` is a fresh, valid allocation that nothing else refers to yet.
        let channel: &mut Channel = match unsafe { &mut *end } {
            End::Channel(c) => c,
            End::Connection(c) => c,
        };
        let (tx, rx) = channel.split();
        let (tx, rx): (*mut SendHalf, *mut RecvHalf) = (tx, rx);
        Box::into_raw(Box::new(shmlink_channel {
            held: Held(None),
            reserved: Reserved(None),
            tx,
            rx,
            end,
        }))
    }

    /// Whether it lends nothing out (no received message held, no reservation open).
    fn idle(&self) -> bool {
        self.held.0.is_none() && self.reserved.0.is_none()
    }

    /// The whole channel, for the selector. Only for an [`idle`](Self::idle) handle, and
    /// `rederive` must follow before the halves are used again.
    fn whole(&mut self) -> &mut Channel {
        debug_assert!(self.idle());
        // SAFETY: `end` is valid while `self` lives, and nothing borrows it now (the handle is
        // idle); the halves' pointers are taken again by `rederive` before their next use.
        match unsafe { &mut *self.end } {
            End::Channel(c) => c,
            End::Connection(c) => c,
        }
    }

    /// Takes the halves' pointers again, after a use of the whole channel.
    fn rederive(&mut self) {
        // SAFETY: as in `whole`; nothing is lent out.
        let channel: &mut Channel = match unsafe { &mut *self.end } {
            End::Channel(c) => c,
            End::Connection(c) => c,
        };
        let (tx, rx) = channel.split();
        self.tx = tx;
        self.rx = rx;
    }

    fn sender(&mut self) -> Result<&mut SendHalf> {
        if self.reserved.0.is_some() {
            return Err(Fail(
                SHMLINK_BUSY,
                "a reservation is open: commit it first".into(),
            ));
        }
        // SAFETY: `tx` points into the end, which lives as long as `self`; nothing borrows the
        // sending half while no reservation is open.
        Ok(unsafe { &mut *self.tx })
    }
}

impl Drop for shmlink_channel {
    fn drop(&mut self) {
        // What borrows the end goes first.
        self.held.0 = None;
        self.reserved.0 = None;
        // SAFETY: `end` came from `Box::into_raw` in `new` and is freed only here, once nothing
        // borrows it.
        drop(unsafe { Box::from_raw(self.end) });
    }
}

/// Creates the channel `name` (the first end; another process connects to it) with rings of
/// `capacity` bytes each way (a power of two from 256; 0 for the default, 1 MiB). Its ends wait
/// by sleeping (block).
///
/// # Safety
/// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn shmlink_channel_create(
    name: *const c_char,
    capacity: usize,
    out: *mut *mut shmlink_channel,
) -> shmlink_status {
    call(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller's promise.
        let name = unsafe { name_arg(name) }?;
        let config = Config {
            capacity: if capacity == 0 {
                Config::default().capacity
            } else {
                capacity
            },
            wait: WaitStrategy::Block,
        };
        *out = shmlink_channel::new(End::Channel(Channel::create(name, &config)?));
        Ok(())
    })
}

/// Connects to the channel or listener `name`, waiting up to `timeout_ms` for it to be there
/// (and, for a listener, to accept).
///
/// # Safety
/// As [`shmlink_channel_create`].
#[no_mangle]
pub unsafe extern "C" fn shmlink_channel_connect(
    name: *const c_char,
    timeout_ms: u64,
    out: *mut *mut shmlink_channel,
) -> shmlink_status {
    call(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller's promise.
        let name = unsafe { name_arg(name) }?;
        let channel = Channel::connect_timeout(name, WaitStrategy::Block, ms(timeout_ms))?;
        *out = shmlink_channel::new(End::Channel(channel));
        Ok(())
    })
}

/// Closes the end: the peer receives what was sent, then `SHMLINK_DISCONNECTED`. A held
/// message is released and an open reservation dropped. NULL is ignored.
///
/// # Safety
/// `ch` is NULL or a handle not closed before; it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_channel_close(ch: *mut shmlink_channel) {
    if !ch.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller's promise: a live handle from `Box::into_raw`, closed once.
            drop(unsafe { Box::from_raw(ch) })
        }));
    }
}

/// Sends `data[..len]` as one message, waiting while the ring is full.
///
/// # Safety
/// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
/// is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_send(
    h: *mut shmlink_channel,
    data: *const c_void,
    len: usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promises.
        let h = unsafe { handle(h) }?;
        // SAFETY: the caller's promise.
        let b = unsafe { bytes_arg(data.cast(), len) }?;
        let s = h.sender()?;
        Ok(s.send(b)?)
    })
}

/// Sends `data[..len]` if there is room now (`SHMLINK_FULL` if not).
///
/// # Safety
/// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
/// is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_try_send(
    h: *mut shmlink_channel,
    data: *const c_void,
    len: usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promises.
        let h = unsafe { handle(h) }?;
        // SAFETY: the caller's promise.
        let b = unsafe { bytes_arg(data.cast(), len) }?;
        let s = h.sender()?;
        Ok(s.try_send(b)?)
    })
}

/// Sends `data[..len]`, waiting at most `timeout_ms` for room (`SHMLINK_TIMEOUT`).
///
/// # Safety
/// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
/// is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_send_timeout(
    h: *mut shmlink_channel,
    data: *const c_void,
    len: usize,
    timeout_ms: u64,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promises.
        let h = unsafe { handle(h) }?;
        // SAFETY: the caller's promise.
        let b = unsafe { bytes_arg(data.cast(), len) }?;
        let s = h.sender()?;
        Ok(s.send_timeout(b, ms(timeout_ms))?)
    })
}

/// Reserves room for a message of up to `len` bytes, to be written in place at `*data` and sent
/// by [`shmlink_commit`]; waits while the ring is full. The handle sends nothing else until the
/// commit.
///
/// # Safety
/// `ch` is live and used by this thread alone; `data` points to writable storage for a
/// pointer. `*data` is valid for `len` bytes until the commit or the close.
#[no_mangle]
pub unsafe extern "C" fn shmlink_reserve(
    ch: *mut shmlink_channel,
    len: usize,
    data: *mut *mut c_void,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { handle(ch) }?;
        let data = out_arg(data)?;
        let tx = h.sender()?;
        let mut grant = tx.reserve(len)?;
        *data = grant.as_mut_ptr().cast();
        // SAFETY: the grant borrows the sending half, boxed in the handle, which every send
        // reaches through `sender()`, refused while this grant is open; the grant drops
        // before the half (field order).
        h.reserved.0 =
            Some(unsafe { std::mem::transmute::<WriteGrant<'_>, WriteGrant<'static>>(grant) });
        Ok(())
    })
}

/// Sends the first `used` bytes written at the reserved `*data` as one message
/// (`SHMLINK_INVALID_ARGUMENT` if `used` is more than was reserved, and nothing is sent; the
/// reservation stays open).
///
/// # Safety
/// `ch` is live and used by this thread alone.
#[no_mangle]
pub unsafe extern "C" fn shmlink_commit(ch: *mut shmlink_channel, used: usize) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { handle(ch) }?;
        let Some(grant) = h.reserved.0.take() else {
            return Err(invalid("nothing is reserved"));
        };
        if used > grant.len() {
            let reserved = grant.len();
            h.reserved.0 = Some(grant);
            return Err(invalid(&format!(
                "{used} bytes used of {reserved} reserved"
            )));
        }
        grant.commit(used);
        Ok(())
    })
}

/// The receive in place of any handle with a receiving side.
///
/// # Safety
/// As the public forms.
#[inline(always)]
unsafe fn in_place<H: Receiving>(
    h: *mut H,
    how: How,
    data: *mut *const u8,
    len: *mut usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { handle(h) }?;
        let (data, len) = (out_arg(data)?, out_arg(len)?);
        let (held, rx) = h.parts();
        // SAFETY: the handle's rule (see `Receiving`).
        let message = unsafe { receive(held, rx, how) }?;
        *data = message.as_ptr();
        *len = message.len();
        Ok(())
    })
}

/// The receive into a buffer of any handle with a receiving side.
///
/// # Safety
/// As the public forms.
#[inline(always)]
unsafe fn into<H: Receiving>(
    h: *mut H,
    how: How,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { handle(h) }?;
        let (held, rx) = h.parts();
        // SAFETY: the handle's rule (see `Receiving`).
        unsafe { receive_into(held, rx, how, buf, cap, len) }
    })
}

/// Releases the held message of any handle with a receiving side.
///
/// # Safety
/// As the public forms.
#[inline(always)]
unsafe fn release<H: Receiving>(h: *mut H) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let h = unsafe { handle(h) }?;
        let (held, _) = h.parts();
        held.0
            .take()
            .map(drop)
            .ok_or_else(|| invalid("no message is held"))
    })
}

/// A handle with a receiving side: the held message and the side it borrows, which stays at its
/// address for as long as the handle lives and is reached only through [`receive`].
trait Receiving {
    type Side: Rx;
    fn parts(&mut self) -> (&mut Held, *mut Self::Side);
}

impl Receiving for shmlink_channel {
    type Side = RecvHalf;
    fn parts(&mut self) -> (&mut Held, *mut RecvHalf) {
        (&mut self.held, self.rx)
    }
}

/// Receives the next message in place: `*data` and `*len` are its bytes, valid until the
/// release (or the close). Waits for a message. While a message is held, every receive gives
/// it again.
///
/// # Safety
/// The handle is live and used by this thread alone; `data` and `len` point to writable
/// storage.
#[no_mangle]
pub unsafe extern "C" fn shmlink_recv(
    h: *mut shmlink_channel,
    data: *mut *const u8,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { in_place(h, How::Block, data, len) }
}

/// As `shmlink_recv`, but `SHMLINK_EMPTY` at once when no message is waiting.
///
/// # Safety
/// As `shmlink_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_try_recv(
    h: *mut shmlink_channel,
    data: *mut *const u8,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { in_place(h, How::Try, data, len) }
}

/// As `shmlink_recv`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
///
/// # Safety
/// As `shmlink_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_recv_timeout(
    h: *mut shmlink_channel,
    data: *mut *const u8,
    len: *mut usize,
    timeout_ms: u64,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { in_place(h, How::Timeout(ms(timeout_ms)), data, len) }
}

/// Receives the next message into `buf` (`cap` bytes), its length in `*len`; waits for a
/// message. A message longer than `cap` is not consumed: `SHMLINK_BUFFER_TOO_SMALL`, with its
/// length in `*len`.
///
/// # Safety
/// The handle is live and used by this thread alone; `buf` points to `cap` writable bytes (or
/// is NULL with `cap` 0); `len` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn shmlink_recv_into(
    h: *mut shmlink_channel,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { into(h, How::Block, buf.cast(), cap, len) }
}

/// As `shmlink_recv_into`, but `SHMLINK_EMPTY` at once when no message is waiting.
///
/// # Safety
/// As `shmlink_recv_into`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_try_recv_into(
    h: *mut shmlink_channel,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { into(h, How::Try, buf.cast(), cap, len) }
}

/// As `shmlink_recv_into`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
///
/// # Safety
/// As `shmlink_recv_into`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_recv_into_timeout(
    h: *mut shmlink_channel,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    timeout_ms: u64,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { into(h, How::Timeout(ms(timeout_ms)), buf.cast(), cap, len) }
}

/// Releases the message held since a receive in place (its bytes are no longer valid);
/// `SHMLINK_INVALID_ARGUMENT` if none is held.
///
/// # Safety
/// The handle is live and used by this thread alone.
#[no_mangle]
pub unsafe extern "C" fn shmlink_release(h: *mut shmlink_channel) -> shmlink_status {
    // SAFETY: the caller's promise.
    unsafe { release(h) }
}

// --- listeners ------------------------------------------------------------------------------

/// A listener: one server, many clients, each with a channel of its own. Opaque.
pub struct shmlink_listener {
    listener: Listener,
}

/// Binds the listener `name`: clients connect with `shmlink_channel_connect(name, ...)`.
///
/// # Safety
/// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn shmlink_listener_bind(
    name: *const c_char,
    out: *mut *mut shmlink_listener,
) -> shmlink_status {
    call(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller's promise.
        let name = unsafe { name_arg(name) }?;
        let listener = Listener::bind(name, &Config::default())?;
        *out = Box::into_raw(Box::new(shmlink_listener { listener }));
        Ok(())
    })
}

/// Accepts the next client, waiting up to `timeout_ms` (`SHMLINK_TIMEOUT`): `*out` is the
/// server's end of the client's channel, closed with `shmlink_channel_close`.
///
/// # Safety
/// `l` is a live listener; `out` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn shmlink_listener_accept(
    l: *mut shmlink_listener,
    timeout_ms: u64,
    out: *mut *mut shmlink_channel,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let l = unsafe { handle(l) }?;
        let out = out_arg(out)?;
        let conn = l.listener.accept_timeout(ms(timeout_ms))?;
        *out = shmlink_channel::new(End::Connection(conn));
        Ok(())
    })
}

/// Closes the listener: its name goes; connections already accepted stay. NULL is ignored.
///
/// # Safety
/// `l` is NULL or a listener not closed before; it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_listener_close(l: *mut shmlink_listener) {
    if !l.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller's promise: a live handle from `Box::into_raw`, closed once.
            drop(unsafe { Box::from_raw(l) })
        }));
    }
}

// --- topics ---------------------------------------------------------------------------------

/// A topic's publisher. Opaque.
pub struct shmlink_publisher {
    publisher: Publisher,
}

impl shmlink_publisher {
    fn sender(&mut self) -> Result<&mut Publisher> {
        Ok(&mut self.publisher)
    }
}

/// Creates the topic `name` with a ring of `capacity` bytes (0: 1 MiB): lossless (a full ring
/// makes the publisher wait for the slowest subscriber) unless `overwrite` is non-zero (the
/// publisher never waits; a subscriber that falls a ring behind gets `SHMLINK_LAGGED`).
///
/// # Safety
/// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn shmlink_publisher_create(
    name: *const c_char,
    capacity: usize,
    overwrite: i32,
    out: *mut *mut shmlink_publisher,
) -> shmlink_status {
    call(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller's promise.
        let name = unsafe { name_arg(name) }?;
        let config = TopicConfig {
            capacity: if capacity == 0 {
                TopicConfig::default().capacity
            } else {
                capacity
            },
            mode: if overwrite != 0 {
                TopicMode::Overwrite
            } else {
                TopicMode::Lossless
            },
            ..TopicConfig::default()
        };
        let publisher = Publisher::create(name, &config)?;
        *out = Box::into_raw(Box::new(shmlink_publisher { publisher }));
        Ok(())
    })
}

/// How many subscribers the topic has now (0 for a NULL handle).
///
/// # Safety
/// `p` is NULL or a live publisher used by this thread alone.
#[no_mangle]
pub unsafe extern "C" fn shmlink_publisher_subscribers(p: *mut shmlink_publisher) -> usize {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's promise.
        unsafe { p.as_mut() }.map_or(0, |p| p.publisher.subscriber_count())
    }))
    .unwrap_or(0)
}

/// Closes the publisher: each subscriber receives what was published, then
/// `SHMLINK_DISCONNECTED`. NULL is ignored.
///
/// # Safety
/// `p` is NULL or a publisher not closed before; it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_publisher_close(p: *mut shmlink_publisher) {
    if !p.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller's promise: a live handle from `Box::into_raw`, closed once.
            drop(unsafe { Box::from_raw(p) })
        }));
    }
}

/// Publishes `data[..len]` to every subscriber, waiting (lossless) while the slowest subscriber
/// leaves no room.
///
/// # Safety
/// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
/// is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_publish(
    h: *mut shmlink_publisher,
    data: *const c_void,
    len: usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promises.
        let h = unsafe { handle(h) }?;
        // SAFETY: the caller's promise.
        let b = unsafe { bytes_arg(data.cast(), len) }?;
        let s = h.sender()?;
        Ok(s.send(b)?)
    })
}

/// Publishes `data[..len]` if there is room now (`SHMLINK_FULL` if not).
///
/// # Safety
/// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
/// is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_try_publish(
    h: *mut shmlink_publisher,
    data: *const c_void,
    len: usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promises.
        let h = unsafe { handle(h) }?;
        // SAFETY: the caller's promise.
        let b = unsafe { bytes_arg(data.cast(), len) }?;
        let s = h.sender()?;
        Ok(s.try_send(b)?)
    })
}

/// Publishes `data[..len]`, waiting at most `timeout_ms` for room (`SHMLINK_TIMEOUT`).
///
/// # Safety
/// The handle is live and used by this thread alone; `data` points to `len` readable bytes (or
/// is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn shmlink_publish_timeout(
    h: *mut shmlink_publisher,
    data: *const c_void,
    len: usize,
    timeout_ms: u64,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promises.
        let h = unsafe { handle(h) }?;
        // SAFETY: the caller's promise.
        let b = unsafe { bytes_arg(data.cast(), len) }?;
        let s = h.sender()?;
        Ok(s.send_timeout(b, ms(timeout_ms))?)
    })
}

/// A topic's subscriber. Opaque.
pub struct shmlink_subscriber {
    // Borrows `*subscriber`: `drop` ends it first.
    held: Held,
    /// From `Box::into_raw`, freed by `drop`.
    subscriber: *mut Subscriber,
}

impl Drop for shmlink_subscriber {
    fn drop(&mut self) {
        self.held.0 = None;
        // SAFETY: `subscriber` came from `Box::into_raw` in `shmlink_subscriber_connect` and is
        // freed only here, once nothing borrows it.
        drop(unsafe { Box::from_raw(self.subscriber) });
    }
}

impl Receiving for shmlink_subscriber {
    type Side = Subscriber;
    fn parts(&mut self) -> (&mut Held, *mut Subscriber) {
        (&mut self.held, self.subscriber)
    }
}

/// Subscribes to the topic `name`, waiting up to `timeout_ms` for its publisher: the
/// subscriber gets every message published from now on, and `history` (at most what the topic
/// keeps) of those before.
///
/// # Safety
/// `name` is a NUL-terminated string; `out` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_connect(
    name: *const c_char,
    history: usize,
    timeout_ms: u64,
    out: *mut *mut shmlink_subscriber,
) -> shmlink_status {
    call(|| {
        let out = out_arg(out)?;
        // SAFETY: the caller's promise.
        let name = unsafe { name_arg(name) }?;
        let config = shmlink_rs::SubscriberConfig {
            wait: WaitStrategy::Block,
            history,
        };
        let deadline = std::time::Instant::now() + ms(timeout_ms);
        let subscriber = loop {
            match Subscriber::connect_with(name, &config) {
                Ok(s) => break s,
                Err(OpenError::NotFound { .. } | OpenError::NotReady { .. })
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e.into()),
            }
        };
        *out = Box::into_raw(Box::new(shmlink_subscriber {
            held: Held(None),
            subscriber: Box::into_raw(Box::new(subscriber)),
        }));
        Ok(())
    })
}

/// Closes the subscriber: the publisher no longer waits for it. NULL is ignored.
///
/// # Safety
/// `s` is NULL or a subscriber not closed before; it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_close(s: *mut shmlink_subscriber) {
    if !s.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller's promise: a live handle from `Box::into_raw`, closed once.
            drop(unsafe { Box::from_raw(s) })
        }));
    }
}

/// Receives the next message in place: `*data` and `*len` are its bytes, valid until the
/// release (or the close). Waits for a message. While a message is held, every receive gives
/// it again.
///
/// # Safety
/// The handle is live and used by this thread alone; `data` and `len` point to writable
/// storage.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_recv(
    h: *mut shmlink_subscriber,
    data: *mut *const u8,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { in_place(h, How::Block, data, len) }
}

/// As `shmlink_subscriber_recv`, but `SHMLINK_EMPTY` at once when no message is waiting.
///
/// # Safety
/// As `shmlink_subscriber_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_try_recv(
    h: *mut shmlink_subscriber,
    data: *mut *const u8,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { in_place(h, How::Try, data, len) }
}

/// As `shmlink_subscriber_recv`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
///
/// # Safety
/// As `shmlink_subscriber_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_recv_timeout(
    h: *mut shmlink_subscriber,
    data: *mut *const u8,
    len: *mut usize,
    timeout_ms: u64,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { in_place(h, How::Timeout(ms(timeout_ms)), data, len) }
}

/// Receives the next message into `buf` (`cap` bytes), its length in `*len`; waits for a
/// message. A message longer than `cap` is not consumed: `SHMLINK_BUFFER_TOO_SMALL`, with its
/// length in `*len`.
///
/// # Safety
/// The handle is live and used by this thread alone; `buf` points to `cap` writable bytes (or
/// is NULL with `cap` 0); `len` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_recv_into(
    h: *mut shmlink_subscriber,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { into(h, How::Block, buf.cast(), cap, len) }
}

/// As `shmlink_subscriber_recv_into`, but `SHMLINK_EMPTY` at once when no message is waiting.
///
/// # Safety
/// As `shmlink_subscriber_recv_into`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_try_recv_into(
    h: *mut shmlink_subscriber,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { into(h, How::Try, buf.cast(), cap, len) }
}

/// As `shmlink_subscriber_recv_into`, but `SHMLINK_TIMEOUT` after `timeout_ms`.
///
/// # Safety
/// As `shmlink_subscriber_recv_into`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_recv_into_timeout(
    h: *mut shmlink_subscriber,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    timeout_ms: u64,
) -> shmlink_status {
    // SAFETY: the caller's promises.
    unsafe { into(h, How::Timeout(ms(timeout_ms)), buf.cast(), cap, len) }
}

/// Releases the message held since a receive in place (its bytes are no longer valid);
/// `SHMLINK_INVALID_ARGUMENT` if none is held.
///
/// # Safety
/// The handle is live and used by this thread alone.
#[no_mangle]
pub unsafe extern "C" fn shmlink_subscriber_release(h: *mut shmlink_subscriber) -> shmlink_status {
    // SAFETY: the caller's promise.
    unsafe { release(h) }
}

// --- counters -------------------------------------------------------------------------------

/// Writes the counters of the channel, listener or topic `name` as one JSON document (the
/// schema of `shmlink stat --json`, docs/observe.md) into `buf` (`cap` bytes, NUL-terminated);
/// its length without the NUL in `*len`. `SHMLINK_BUFFER_TOO_SMALL` if it does not fit (`*len`
/// says how long it is).
///
/// # Safety
/// `name` is a NUL-terminated string; `buf` points to `cap` writable bytes (or is NULL with
/// `cap` 0); `len` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn shmlink_stats_json(
    name: *const c_char,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> shmlink_status {
    call(|| {
        let len = out_arg(len)?;
        // SAFETY: the caller's promise.
        let name = unsafe { name_arg(name) }?;
        if buf.is_null() && cap > 0 {
            return Err(invalid("the buffer is NULL with a capacity above 0"));
        }
        let stats = shmlink_rs::segments::stats(name)?;
        let text = serde_json::to_string(&stats).map_err(|e| Fail(SHMLINK_ERROR, e.to_string()))?;
        *len = text.len();
        if text.len() + 1 > cap {
            return Err(Fail(
                SHMLINK_BUFFER_TOO_SMALL,
                format!(
                    "the document is {} bytes and its NUL, the buffer {cap}",
                    text.len()
                ),
            ));
        }
        // SAFETY: `buf` has room for `cap > text.len()` bytes (the caller's promise).
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
        Ok(())
    })
}

// --- the selector ---------------------------------------------------------------------------

/// One thread waiting on many channels and subscribers at once. Opaque.
pub struct shmlink_selector {
    selector: Selector,
}

/// Makes a selector.
///
/// # Safety
/// `out` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn shmlink_selector_new(out: *mut *mut shmlink_selector) -> shmlink_status {
    call(|| {
        let out = out_arg(out)?;
        *out = Box::into_raw(Box::new(shmlink_selector {
            selector: Selector::new(),
        }));
        Ok(())
    })
}

/// Closes a selector. NULL is ignored.
///
/// # Safety
/// `sel` is NULL or a selector not closed before; it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_selector_close(sel: *mut shmlink_selector) {
    if !sel.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller's promise: a live handle from `Box::into_raw`, closed once.
            drop(unsafe { Box::from_raw(sel) })
        }));
    }
}

/// Waits up to `timeout_ms` until at least one of the `n_channels` channels and `n_subscribers`
/// subscribers is ready (a message waits, or its peer closed or died: the next receive says
/// which). Their indices go to `ready` (room for `n_channels + n_subscribers`): `i` for
/// `channels[i]`, `n_channels + j` for `subscribers[j]`; their count to `*n_ready`.
/// `SHMLINK_TIMEOUT` (and `*n_ready` 0) if none became ready; `SHMLINK_BUSY` if a handle in the
/// set holds a received message or a reservation; `SHMLINK_INVALID_ARGUMENT` if a handle is
/// NULL or appears twice.
///
/// # Safety
/// `sel` is a live selector; `channels` and `subscribers` point to that many live handles (or
/// are NULL with a count of 0), used by no other thread during the call; `ready` points to room
/// for `n_channels + n_subscribers` indices; `n_ready` to writable storage.
#[no_mangle]
pub unsafe extern "C" fn shmlink_selector_wait(
    sel: *mut shmlink_selector,
    channels: *const *mut shmlink_channel,
    n_channels: usize,
    subscribers: *const *mut shmlink_subscriber,
    n_subscribers: usize,
    timeout_ms: u64,
    ready: *mut usize,
    n_ready: *mut usize,
) -> shmlink_status {
    call(|| {
        // SAFETY: the caller's promise.
        let sel = unsafe { handle(sel) }?;
        let n_ready = out_arg(n_ready)?;
        *n_ready = 0;
        let list = |p: *const *mut c_void, n: usize| -> Result<Vec<*mut c_void>> {
            if n == 0 {
                return Ok(Vec::new());
            }
            if p.is_null() {
                return Err(invalid("a handle list is NULL with a count above 0"));
            }
            // SAFETY: the caller's promise: `n` readable handle pointers.
            Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
        };
        let chans = list(channels.cast(), n_channels)?;
        let subs = list(subscribers.cast(), n_subscribers)?;
        let total = chans.len() + subs.len();
        if total > 0 && ready.is_null() {
            return Err(invalid("ready is NULL"));
        }
        // Two references to one handle would alias: every handle once.
        let mut seen: Vec<*mut c_void> = chans.iter().chain(&subs).copied().collect();
        seen.sort();
        if seen.windows(2).any(|w| w[0] == w[1]) || seen.iter().any(|p| p.is_null()) {
            return Err(invalid("a handle is NULL or appears twice in the set"));
        }
        let mut chan_handles: Vec<&mut shmlink_channel> = chans
            .iter()
            // SAFETY: live, distinct channel handles (checked above; the caller's promise).
            .map(|&p| unsafe { &mut *p.cast::<shmlink_channel>() })
            .collect();
        let mut sub_handles: Vec<&mut shmlink_subscriber> = subs
            .iter()
            // SAFETY: as above, subscriber handles.
            .map(|&p| unsafe { &mut *p.cast::<shmlink_subscriber>() })
            .collect();
        if chan_handles.iter().any(|c| !c.idle()) || sub_handles.iter().any(|s| s.held.0.is_some())
        {
            return Err(Fail(
                SHMLINK_BUSY,
                "a handle in the set holds a received message or a reservation".into(),
            ));
        }
        let found: Vec<usize> = {
            let mut set: Vec<&mut dyn Selectable> = Vec::with_capacity(total);
            for c in chan_handles.iter_mut() {
                set.push(c.whole());
            }
            for s in sub_handles.iter_mut() {
                // SAFETY: the subscriber's box lives as long as its handle and nothing borrows
                // it (no message is held).
                set.push(unsafe { &mut *s.subscriber });
            }
            let timeout = Some(ms(timeout_ms));
            sel.selector.wait(&mut set, timeout).to_vec()
        };
        for c in chan_handles.iter_mut() {
            c.rederive();
        }
        if found.is_empty() {
            return Err(Fail(
                SHMLINK_TIMEOUT,
                format!("nothing in the set was ready within {timeout_ms} ms"),
            ));
        }
        // SAFETY: `ready` has room for `total >= found.len()` indices (the caller's promise).
        unsafe { ptr::copy_nonoverlapping(found.as_ptr(), ready, found.len()) };
        *n_ready = found.len();
        Ok(())
    })
}
