//! The library's errors: one type per kind of operation, and a catch-all.
//!
//! * [`OpenError`]: what making, finding and joining a channel or listener can return
//!   (create, connect, bind, accept).
//! * [`SendError`]: what a send, a JSON send or a reservation can return.
//! * [`RecvError`]: what a receive can return.
//! * [`Error`]: one of the three, nested (`Error::Send(SendError::Full { .. })`), for callers
//!   who want one type; each of them converts into it, so `?` works in a function that returns
//!   [`Result`], and it displays as the error it holds.
//!
//! Every error about a channel or listener names it, in a field called `channel`, and its
//! message says what to do where there is something to do. The errors of the hot path (`Full`,
//! `Empty`, `Timeout`, `Disconnected`, `PeerGone`) allocate nothing: the channel's name is a
//! [`ChannelName`], held once per endpoint and shared (an `Arc` clone) by the errors that name
//! it.

use std::fmt;
use std::io;
use std::sync::Arc;

/// The name of a channel or listener (or the path of a channel's file), as errors carry it.
///
/// Shared, not copied: an endpoint holds its name once and every error that names the
/// channel holds the same string, so reporting one allocates nothing. It displays as the
/// plain name, and compares equal to a `&str` or `String` holding the same text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelName(Arc<str>);

impl ChannelName {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ChannelName {
    fn from(name: &str) -> ChannelName {
        ChannelName(Arc::from(name))
    }
}

impl From<String> for ChannelName {
    fn from(name: String) -> ChannelName {
        ChannelName(Arc::from(name))
    }
}

impl std::ops::Deref for ChannelName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ChannelName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ChannelName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq<str> for ChannelName {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for ChannelName {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for ChannelName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

/// What making, finding or joining a channel or a listener can return: `create`, `connect`,
/// `bind`, `accept` (and their `_timeout` and `try_` forms) on every surface and backend.
///
/// Every variant about a channel or listener names it in a field called `channel` (a listener's
/// name too); only [`InvalidName`](OpenError::InvalidName) names the string it rejected, which is
/// not a channel yet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The name is not acceptable. Every name, of a channel or of a listener, on either
    /// backend, follows one rule: 1 to [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) (200) bytes of
    /// ASCII letters, digits, `.`, `_` and `-`, not starting with `.` or `-`. (The channels
    /// a [`Listener`](crate::Listener) makes for its clients are named `<name>.<pid>.<n>`,
    /// up to 32 bytes longer; the library makes those names itself.)
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name, as given (not a channel: nothing was made or found under it).
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A configuration value is out of range.
    #[error("{channel:?}: invalid configuration: {what}")]
    InvalidConfig {
        /// The channel or listener the configuration was for.
        channel: ChannelName,
        /// Which value, and what it must be instead.
        what: String,
    },
    /// Nothing exists under that name (yet): no channel, no listener, on either backend.
    #[error("no channel or listener named {channel:?} (its server must create or bind it first)")]
    NotFound {
        /// The name looked up.
        channel: ChannelName,
    },
    /// The mapping exists but its creator has not finished initialising it.
    #[error(
        "channel {channel:?} exists but is not initialised yet: retry, or use connect_timeout"
    )]
    NotReady {
        /// The channel's name.
        channel: ChannelName,
    },
    /// A channel or listener with that name exists and its creator is alive.
    #[error(
        "{channel:?} is taken: a channel or listener of that name exists and its creator is \
         alive; pick another name"
    )]
    AlreadyExists {
        /// The name asked for.
        channel: ChannelName,
    },
    /// Another endpoint already holds the connecting end of the named channel (or held it
    /// and closed or died: a channel serves one connection; a [`Listener`](crate::Listener)
    /// gives each client its own channel).
    #[error(
        "channel {channel:?} already has its connector: a channel serves one connection, even \
         once that peer has gone; a Listener serves one client after another"
    )]
    AlreadyConnected {
        /// The channel's name.
        channel: ChannelName,
    },
    /// The object behind a channel name (or path) belongs to another user or is open to
    /// other users: it is not one this user's creator made, so `connect` refuses to share
    /// anything through it.
    #[error(
        "channel {channel:?} is not private to this user: owned by uid {owner} with mode \
         {mode:04o} (expected uid {expected} and mode 0600)"
    )]
    NotPrivate {
        /// The channel name or file path.
        channel: ChannelName,
        /// User id that owns the object.
        owner: u32,
        /// Its permission bits.
        mode: u32,
        /// The effective user id of this process, which must own it.
        expected: u32,
    },
    /// The entry under a channel's name (or path) is not a channel: a directory, a symbolic
    /// link (never followed), a FIFO or another file that is not a regular one, an object
    /// without the shmlink magic... `create` and `bind` leave it alone, `connect` refuses
    /// it.
    #[error("{channel:?} is not a shmlink channel: {reason}")]
    NotAChannel {
        /// The channel name.
        channel: ChannelName,
        /// What it is instead.
        reason: String,
    },
    /// The mapping does not start with the shmlink magic number.
    #[error("{channel:?} is not a shmlink mapping (bad magic number {magic:#018x})")]
    BadMagic {
        /// The channel's name (or path).
        channel: ChannelName,
        /// The first word of the mapping.
        magic: u64,
    },
    /// The mapping was made by an incompatible version of this crate.
    #[error("{channel:?} has layout version {found}, this build understands version {expected}")]
    VersionMismatch {
        /// The channel's (or listener's) name.
        channel: ChannelName,
        /// Version written in the mapping.
        found: u32,
        /// Version this build writes and reads.
        expected: u32,
    },
    /// The mapping was made by a build whose layout parameters differ from this one's
    /// (frame or cell alignment, pointer width): the two processes would not agree on where
    /// things are.
    #[error("channel {channel:?} was made with {field} {found}, this build uses {expected}")]
    LayoutMismatch {
        /// The channel's name.
        channel: ChannelName,
        /// Which parameter differs.
        field: &'static str,
        /// The value recorded in the mapping.
        found: u64,
        /// The value this build uses.
        expected: u64,
    },
    /// The sizes recorded in the header disagree with each other or with the mapping.
    #[error("{channel:?} has inconsistent sizes: {what}")]
    SizeMismatch {
        /// The channel's (or listener's) name, or the file's path.
        channel: ChannelName,
        /// Which sizes disagree.
        what: String,
    },
    /// A listener already holds connections with as many clients as it admits.
    #[error(
        "listener {channel:?} is at its limit of {limit} concurrent clients: retry once one \
         leaves, or bind it with a higher limit"
    )]
    TooManyClients {
        /// The listener's name.
        channel: ChannelName,
        /// Most clients it admits at once.
        limit: usize,
    },
    /// A topic already has as many subscribers as its publisher admits.
    #[error(
        "topic {channel:?} is at its limit of {limit} subscribers: retry once one leaves, or \
         create it with a higher TopicConfig::max_subscribers"
    )]
    TooManySubscribers {
        /// The topic's name.
        channel: ChannelName,
        /// Most subscribers it admits at once.
        limit: usize,
    },
    /// No client is waiting to be accepted right now (`try_accept`): not an error of the
    /// listener, which keeps working; try again when its selector reports it ready.
    #[error("listener {channel:?} has no client waiting to be accepted now")]
    NoClient {
        /// The listener's name.
        channel: ChannelName,
    },
    /// The wait ran past its deadline: `connect_timeout` (something by that name is there but
    /// did not become ready, or its listener is alive but did not accept us, in time) or
    /// `accept_timeout` (no client came). `waited_for` says which, and what to do.
    #[error("{channel:?}: timed out: {waited_for}")]
    Timeout {
        /// The channel's or listener's name.
        channel: ChannelName,
        /// What did not happen in time, and what to do about it.
        waited_for: &'static str,
    },
    /// The listener closed (before or while a client waited to be accepted), the server
    /// closed the new connection at once, or it refused the client's channel (rings larger
    /// than the listener's capacity).
    #[error("the peer closed channel {channel:?}")]
    Disconnected {
        /// The listener's or channel's name.
        channel: ChannelName,
    },
    /// The listener's server process died (before or while a client waited to be accepted).
    #[error("the peer of channel {channel:?} (process {pid}) is gone")]
    PeerGone {
        /// The listener's or channel's name.
        channel: ChannelName,
        /// Process id the peer recorded (information only).
        pid: u32,
    },
    /// The shared memory holds a value this side will not interpret (a ring index out of
    /// range, an unknown state word...).
    #[error("channel {channel:?} holds corrupt data: {what}")]
    Corrupt {
        /// The channel's (or listener's) name.
        channel: ChannelName,
        /// What was wrong.
        what: String,
    },
    /// An operating-system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What [`OpenError::Timeout`] says a `connect_timeout` to a live listener that did not accept
/// waited for.
pub(crate) const NOT_ACCEPTED: &str = "the listener is alive but did not accept this client \
    within the timeout: its server must call accept (or poll its Selector and accept when the \
    listener is ready)";
/// What [`OpenError::Timeout`] says a `connect_timeout` to a mapping that never became ready
/// waited for.
pub(crate) const NEVER_READY: &str = "the channel exists but its creator did not finish making \
    it within the timeout (if the creator died, remove it with shmlink-clean)";
/// What [`OpenError::Timeout`] says a `connect_timeout` to a fallback channel whose creator
/// did not answer waited for.
pub(crate) const NOT_ANSWERED: &str = "the channel's creator is alive but did not answer within \
    the timeout";
/// What [`OpenError::Timeout`] says an `accept_timeout` waited for.
pub(crate) const NO_CLIENT_CAME: &str = "no client connected to the listener within the timeout";

/// What sending can return: `send`, `send_json`, `reserve` (and their `try_` and `_timeout`
/// forms) on every surface and backend.
///
/// Every variant but [`Io`](SendError::Io) names the channel in a field called `channel`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// No room for the message right now (`try_` forms); retry after the peer reads. Nothing
    /// was sent.
    #[error(
        "channel {channel:?} is full now: nothing was sent; retry once the receiver has read, \
         or use send or send_timeout to wait for room"
    )]
    Full {
        /// The channel's name (`"ring"` for a [`ring`](crate::shm::ring) between threads).
        channel: ChannelName,
    },
    /// The wait for room ran past its deadline (`_timeout` forms). Nothing of the message is
    /// delivered: one that was sent in fragments and timed out part-way is withdrawn.
    #[error(
        "channel {channel:?}: timed out waiting for room: the receiver did not take messages \
         within the timeout; nothing was sent"
    )]
    Timeout {
        /// The channel's name.
        channel: ChannelName,
    },
    /// The message can never be sent this way: longer than the largest message the receiver
    /// accepts (its published [`max_message`](crate::Channel::max_message)) or this side's own
    /// limit; or, for a grant, longer than one frame; or, for `try_send`, more than the whole
    /// ring could hold at once. Nothing was sent; the channel keeps working.
    #[error(
        "channel {channel:?}: message of {len} bytes exceeds the maximum of {max} bytes this way; \
         nothing was sent: send it in smaller messages (or with send, which streams it), or raise \
         the receiver's set_max_message"
    )]
    TooLarge {
        /// The channel's name.
        channel: ChannelName,
        /// Requested length.
        len: usize,
        /// Largest length accepted this way.
        max: usize,
    },
    /// The peer closed its end: nothing more can be sent.
    #[error("the peer closed channel {channel:?}")]
    Disconnected {
        /// The channel's name.
        channel: ChannelName,
    },
    /// The peer process exited or was killed without closing its end.
    #[error("the peer of channel {channel:?} (process {pid}) is gone")]
    PeerGone {
        /// The channel's name.
        channel: ChannelName,
        /// Process id the peer recorded in the mapping (in its own PID namespace; information
        /// only, the peer's death is judged by its endpoint lock).
        pid: u32,
    },
    /// The shared memory holds a value this side will not interpret (the peer's ring index out
    /// of range, an unknown state word...). The channel should be dropped.
    #[error("channel {channel:?} holds corrupt data: {what}")]
    Corrupt {
        /// The channel's name (`"ring"` for a [`ring`](crate::shm::ring) between threads).
        channel: ChannelName,
        /// What was wrong.
        what: String,
    },
    /// The value could not be serialised as JSON. Nothing was sent.
    #[error("channel {channel:?}: value could not be serialised as JSON: {source}")]
    Json {
        /// The channel's name.
        channel: ChannelName,
        /// What serde_json reported.
        source: serde_json::Error,
    },
    /// An operating-system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What receiving can return: `recv`, `recv_into`, `recv_json` (and their `try_` and
/// `_timeout` forms) on every surface and backend.
///
/// Every variant but [`Io`](RecvError::Io) names the channel in a field called `channel`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// No message is waiting right now (`try_` forms).
    #[error(
        "channel {channel:?} has no message waiting now: retry later, or use recv or \
         recv_timeout to wait for one"
    )]
    Empty {
        /// The channel's name (`"ring"` for a [`ring`](crate::shm::ring) between threads).
        channel: ChannelName,
    },
    /// The wait ran past its deadline (`_timeout` forms). The part of a fragmented message
    /// received so far is kept for the next call.
    #[error(
        "channel {channel:?}: timed out: no message arrived within the timeout; the channel \
         keeps working"
    )]
    Timeout {
        /// The channel's name.
        channel: ChannelName,
    },
    /// The peer closed its end, and everything it sent has been received.
    #[error("the peer closed channel {channel:?}")]
    Disconnected {
        /// The channel's name.
        channel: ChannelName,
    },
    /// The peer process exited or was killed without closing its end (everything it sent
    /// before has been received).
    #[error("the peer of channel {channel:?} (process {pid}) is gone")]
    PeerGone {
        /// The channel's name.
        channel: ChannelName,
        /// Process id the peer recorded in the mapping (in its own PID namespace; information
        /// only, the peer's death is judged by its endpoint lock).
        pid: u32,
    },
    /// The shared memory holds a value this side will not interpret (a length past the region,
    /// an unknown frame kind, fragments out of sequence...). The channel should be dropped.
    #[error("channel {channel:?} holds corrupt data: {what}")]
    Corrupt {
        /// The channel's name (`"ring"` for a [`ring`](crate::shm::ring) between threads).
        channel: ChannelName,
        /// What was wrong.
        what: String,
    },
    /// A message longer than this side accepts
    /// ([`max_message`](crate::Channel::max_message)) was on its way: its limit dropped while
    /// the message was in flight. The message is dropped; the channel keeps working.
    #[error(
        "channel {channel:?}: a message of {len} bytes exceeds this side's maximum of {max} \
         bytes and was dropped: raise set_max_message before the peer sends such messages"
    )]
    TooLarge {
        /// The channel's name.
        channel: ChannelName,
        /// Length the sender announced.
        len: usize,
        /// Largest length this side accepts.
        max: usize,
    },
    /// The message is not exactly one value of the type a `recv_value` asked for. The
    /// message is consumed; the channel keeps working.
    #[error(
        "channel {channel:?}: a message of {len} bytes is not a value of the {expected}-byte \
         type asked for; the message was consumed and the channel keeps working (both ends must \
         send and receive the same type)"
    )]
    WrongSize {
        /// The channel's name.
        channel: ChannelName,
        /// Length of the message.
        len: usize,
        /// Size of the type asked for.
        expected: usize,
    },
    /// The message is not valid JSON for the type asked for. The message is consumed; the
    /// channel keeps working.
    #[error("channel {channel:?}: message is not valid JSON for the requested type: {source}")]
    Json {
        /// The channel's name.
        channel: ChannelName,
        /// What serde_json reported.
        source: serde_json::Error,
    },
    /// A subscriber of an overwrite topic fell more than a ring behind its publisher: `missed`
    /// messages were written over before it read them. Returned once; the next receive gives
    /// the oldest message still there.
    #[error(
        "topic {channel:?}: this subscriber fell behind and missed {missed} messages; the next \
         receive gives the oldest message still there"
    )]
    Lagged {
        /// The topic's name.
        channel: ChannelName,
        /// Messages published that this subscriber will never see.
        missed: u64,
    },
    /// The publisher of the topic dropped this subscriber (asked to by its program, or because
    /// the subscriber's cursor was out of range): it no longer waits for it, so nothing more
    /// can be read safely. Subscribe again to go on.
    #[error("topic {channel:?}: the publisher dropped this subscriber; subscribe again to go on")]
    Dropped {
        /// The topic's name.
        channel: ChannelName,
    },
    /// An operating-system call failed (or, on the ipc-channel backend, a buffer for a message
    /// could not be had).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Everything that can go wrong, for callers who want one error type: the error of the
/// operation that failed, nested. Each operation's error converts into it (so `?` works in a
/// function returning [`Result`]), and it displays as that error does.
///
/// Match through it: `Error::Send(SendError::Full { .. })`, `Error::Recv(RecvError::Timeout {
/// channel })`, `Error::Open(OpenError::NotFound { .. })`. [`is_transient`](Error::is_transient)
/// says "not right now" (`Full`, `Empty`, `NoClient`, `Timeout`),
/// [`is_disconnect`](Error::is_disconnect) that the peer closed cleanly (`Disconnected`) or its
/// process died (`PeerGone`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Making, finding or joining a channel or listener failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A send failed.
    #[error(transparent)]
    Send(#[from] SendError),
    /// A receive failed.
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// A [`WaitStrategy`](crate::WaitStrategy) was parsed from a string that names none.
    #[error("unknown wait strategy {given:?} (expected spin, yield or block)")]
    UnknownWaitStrategy {
        /// The string given.
        given: String,
    },
}

/// `is_transient` and `is_disconnect` for an operation's error type, whose "not right now"
/// variants are `transient`.
macro_rules! kinds {
    ($ty:ident, transient: $($t:ident)|+) => {
        impl $ty {
            /// True for the "not right now" errors, after which the same call may succeed later.
            pub fn is_transient(&self) -> bool {
                matches!(self, $($ty::$t { .. })|+)
            }

            /// True when the peer is no longer there: it closed cleanly
            /// ([`Disconnected`](Self::Disconnected)) or its process died
            /// ([`PeerGone`](Self::PeerGone)).
            pub fn is_disconnect(&self) -> bool {
                matches!(self, $ty::Disconnected { .. } | $ty::PeerGone { .. })
            }
        }
    };
}

kinds!(OpenError, transient: NoClient | Timeout);
kinds!(SendError, transient: Full | Timeout);
kinds!(RecvError, transient: Empty | Timeout | Lagged);

impl Error {
    /// True for the "not right now" errors, after which the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Open(e) => e.is_transient(),
            Error::Send(e) => e.is_transient(),
            Error::Recv(e) => e.is_transient(),
            Error::UnknownWaitStrategy { .. } => false,
        }
    }

    /// True when the peer is no longer there: it closed cleanly or its process died.
    pub fn is_disconnect(&self) -> bool {
        match self {
            Error::Open(e) => e.is_disconnect(),
            Error::Send(e) => e.is_disconnect(),
            Error::Recv(e) => e.is_disconnect(),
            Error::UnknownWaitStrategy { .. } => false,
        }
    }

    /// The channel (or listener) the error is about, if it names one.
    pub fn channel(&self) -> Option<&ChannelName> {
        match self {
            Error::Open(e) => e.channel(),
            Error::Send(e) => e.channel(),
            Error::Recv(e) => e.channel(),
            Error::UnknownWaitStrategy { .. } => None,
        }
    }
}

/// `channel()` for an error type whose variants name their channel in a field of that name.
macro_rules! channel_of {
    ($ty:ident: $($v:ident)|+) => {
        impl $ty {
            /// The channel (or listener) the error is about, if it names one.
            pub fn channel(&self) -> Option<&ChannelName> {
                match self {
                    $($ty::$v { channel, .. })|+ => Some(channel),
                    _ => None,
                }
            }
        }
    };
}

channel_of!(OpenError: InvalidConfig | NotFound | NotReady | AlreadyExists | AlreadyConnected
    | NotPrivate | NotAChannel | BadMagic | VersionMismatch | LayoutMismatch | SizeMismatch
    | TooManyClients | TooManySubscribers | NoClient | Timeout | Disconnected | PeerGone | Corrupt);
channel_of!(SendError: Full | Timeout | TooLarge | Disconnected | PeerGone | Corrupt | Json);
channel_of!(RecvError: Empty | Timeout | TooLarge | WrongSize | Disconnected | PeerGone | Corrupt
    | Json | Lagged | Dropped);

/// Why a wait for the peer, or a look at it, ended without what it was for: what the waits
/// of sends, receives and connects share. Each operation's error type takes it in.
#[derive(Debug)]
pub(crate) enum WaitError {
    /// The deadline passed.
    Timeout { channel: ChannelName },
    /// The peer closed its end.
    Disconnected { channel: ChannelName },
    /// The peer's process is gone.
    PeerGone { channel: ChannelName, pid: u32 },
    /// The peer's state word holds no known state.
    Corrupt { channel: ChannelName, what: String },
    /// A look at the peer's lock failed.
    Io(io::Error),
}

impl From<io::Error> for WaitError {
    fn from(e: io::Error) -> WaitError {
        WaitError::Io(e)
    }
}

impl From<WaitError> for SendError {
    fn from(e: WaitError) -> SendError {
        match e {
            WaitError::Timeout { channel } => SendError::Timeout { channel },
            WaitError::Disconnected { channel } => SendError::Disconnected { channel },
            WaitError::PeerGone { channel, pid } => SendError::PeerGone { channel, pid },
            WaitError::Corrupt { channel, what } => SendError::Corrupt { channel, what },
            WaitError::Io(e) => SendError::Io(e),
        }
    }
}

impl From<WaitError> for RecvError {
    fn from(e: WaitError) -> RecvError {
        match e {
            WaitError::Timeout { channel } => RecvError::Timeout { channel },
            WaitError::Disconnected { channel } => RecvError::Disconnected { channel },
            WaitError::PeerGone { channel, pid } => RecvError::PeerGone { channel, pid },
            WaitError::Corrupt { channel, what } => RecvError::Corrupt { channel, what },
            WaitError::Io(e) => RecvError::Io(e),
        }
    }
}

/// A connect's wait: its timeout is a live listener's that did not accept in time.
impl From<WaitError> for OpenError {
    fn from(e: WaitError) -> OpenError {
        match e {
            WaitError::Timeout { channel } => OpenError::Timeout {
                channel,
                waited_for: NOT_ACCEPTED,
            },
            WaitError::Disconnected { channel } => OpenError::Disconnected { channel },
            WaitError::PeerGone { channel, pid } => OpenError::PeerGone { channel, pid },
            WaitError::Corrupt { channel, what } => OpenError::Corrupt { channel, what },
            WaitError::Io(e) => OpenError::Io(e),
        }
    }
}

impl OpenError {
    /// [`OpenError::SizeMismatch`] in the channel `channel`.
    pub(crate) fn size_mismatch(channel: &str, what: impl Into<String>) -> OpenError {
        OpenError::SizeMismatch {
            channel: channel.into(),
            what: what.into(),
        }
    }

    /// [`OpenError::Corrupt`] in the channel `channel`.
    pub(crate) fn corrupt(channel: &str, what: impl Into<String>) -> OpenError {
        OpenError::Corrupt {
            channel: channel.into(),
            what: what.into(),
        }
    }
}

/// The crate's result type, with the catch-all [`Error`] unless another is named.
pub type Result<T, E = Error> = std::result::Result<T, E>;
