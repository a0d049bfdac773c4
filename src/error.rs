//! The library's errors: one type per kind of operation, and a catch-all.
//!
//! * [`OpenError`]: what making, finding and joining a channel or listener can return
//!   (create, connect, bind, accept).
//! * [`SendError`]: what a send, a JSON send or a reservation can return.
//! * [`RecvError`]: what a receive can return.
//! * [`Error`]: every variant of the three, for callers who want one type; each of them
//!   converts into it, so `?` works in a function that returns [`Result`].
//!
//! The errors of the hot path (`Full`, `Empty`, `Timeout`, `Disconnected`, `PeerGone`)
//! allocate nothing: the channel's name is a [`ChannelName`], held once per endpoint and
//! shared by the errors that name it.

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

/// Writes an error enum whose first variants are those of opening (shared by [`OpenError`] and
/// the catch-all [`Error`], so that each is written once), followed by `$rest`.
macro_rules! with_open_variants {
    ($(#[$attr:meta])* $vis:vis enum $name:ident { $($rest:tt)* }) => {
        $(#[$attr])*
        $vis enum $name {
            /// The name is not acceptable. Every name, of a channel or of a listener, on either
            /// backend, follows one rule: 1 to [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) (200) bytes of
            /// ASCII letters, digits, `.`, `_` and `-`, not starting with `.` or `-`. (The channels
            /// a [`Listener`](crate::Listener) makes for its clients are named `<name>.<pid>.<n>`,
            /// up to 32 bytes longer; the library makes those names itself.)
            #[error("invalid name {name:?}: {reason}")]
            InvalidName {
                /// The rejected name, as given.
                name: String,
                /// Why it was rejected.
                reason: &'static str,
            },
            /// A configuration value is out of range.
            #[error("invalid configuration: {0}")]
            InvalidConfig(String),
            /// Nothing exists under that name (yet): no channel, no listener, on either backend.
            #[error("no channel or listener named {0:?}")]
            NotFound(ChannelName),
            /// The mapping exists but its creator has not finished initialising it.
            #[error("channel {0:?} exists but is not initialised yet")]
            NotReady(ChannelName),
            /// A channel or listener with that name exists and its creator is alive.
            #[error(
                "{0:?} is taken: a channel or listener of that name exists and its creator is \
                 alive"
            )]
            AlreadyExists(ChannelName),
            /// Another endpoint already holds the connecting end of the named channel (or held it
            /// and closed or died: a channel serves one connection; a [`Listener`](crate::Listener)
            /// gives each client its own channel).
            #[error(
                "channel {0:?} already has its connector: a channel serves one connection, even \
                 once that peer has gone; a Listener serves one client after another"
            )]
            AlreadyConnected(ChannelName),
            /// The object behind a channel name (or path) belongs to another user or is open to
            /// other users: it is not one this user's creator made, so `connect` refuses to share
            /// anything through it.
            #[error(
                "channel {name:?} is not private to this user: owned by uid {owner} with mode \
                 {mode:04o} (expected uid {expected} and mode 0600)"
            )]
            NotPrivate {
                /// The channel name or file path.
                name: ChannelName,
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
            #[error("{name:?} is not a shmlink channel: {reason}")]
            NotAChannel {
                /// The channel name.
                name: ChannelName,
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
            #[error(
                "{channel:?} has layout version {found}, this build understands version {expected}"
            )]
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
            #[error(
                "channel {channel:?} was made with {field} {found}, this build uses {expected}"
            )]
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
            #[error("listener {name:?} is at its limit of {limit} concurrent clients")]
            TooManyClients {
                /// The listener's name.
                name: ChannelName,
                /// Most clients it admits at once.
                limit: usize,
            },
            $($rest)*
        }
    };
}

with_open_variants! {
    /// What making, finding or joining a channel or a listener can return: `create`, `connect`,
    /// `bind`, `accept` (and their `_timeout` and `try_` forms) on every surface and backend.
    ///
    /// Every variant about a channel or listener names it.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum OpenError {
        /// No client is waiting to be accepted right now (`try_accept`).
        #[error("no client is waiting to be accepted")]
        Empty,
        /// The wait ran past its deadline (`connect_timeout`: something by that name is there but
        /// did not become ready, or its listener did not accept us, in time; `accept_timeout`: no
        /// client came).
        #[error("timed out")]
        Timeout,
        /// The listener closed (before or while a client waited to be accepted), the server
        /// closed the new connection at once, or it refused the client's channel (rings larger
        /// than the listener's capacity).
        #[error("the peer closed channel {0:?}")]
        Disconnected(ChannelName),
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
}

/// What sending can return: `send`, `send_json`, `reserve` (and their `try_` and `_timeout`
/// forms) on every surface and backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// No room for the message right now (`try_` forms); retry after the peer reads. Nothing
    /// was sent.
    #[error("no room in the channel now")]
    Full,
    /// The wait for room ran past its deadline (`_timeout` forms). Nothing of the message is
    /// delivered: one that was sent in fragments and timed out part-way is withdrawn.
    #[error("timed out")]
    Timeout,
    /// The message can never be sent this way: longer than the largest message the receiver
    /// accepts (its published [`max_message`](crate::Channel::max_message)) or this side's own
    /// limit; or, for a grant, longer than one frame; or, for `try_send`, more than the whole
    /// ring could hold at once. Nothing was sent; the channel keeps working.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest length accepted this way.
        max: usize,
    },
    /// The peer closed its end: nothing more can be sent.
    #[error("the peer closed channel {0:?}")]
    Disconnected(ChannelName),
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
        /// The channel's name (`"ring"` for a [`ring`](crate::ring) between threads).
        channel: ChannelName,
        /// What was wrong.
        what: String,
    },
    /// The value could not be serialised as JSON. Nothing was sent.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// An operating-system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What receiving can return: `recv`, `recv_into`, `recv_json` (and their `try_` and
/// `_timeout` forms) on every surface and backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// No message is waiting right now (`try_` forms).
    #[error("no message waiting now")]
    Empty,
    /// The wait ran past its deadline (`_timeout` forms). The part of a fragmented message
    /// received so far is kept for the next call.
    #[error("timed out")]
    Timeout,
    /// The peer closed its end, and everything it sent has been received.
    #[error("the peer closed channel {0:?}")]
    Disconnected(ChannelName),
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
        /// The channel's name (`"ring"` for a [`ring`](crate::ring) between threads).
        channel: ChannelName,
        /// What was wrong.
        what: String,
    },
    /// A message longer than this side accepts
    /// ([`max_message`](crate::Channel::max_message)) was on its way: its limit dropped while
    /// the message was in flight. The message is dropped; the channel keeps working.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Length the sender announced.
        len: usize,
        /// Largest length this side accepts.
        max: usize,
    },
    /// The message is not exactly one value of the type a `recv_value` asked for. The
    /// message is consumed; the channel keeps working.
    #[error(
        "a message of {len} bytes is not a value of the {expected}-byte type asked for (both \
         ends must send and receive the same type)"
    )]
    WrongSize {
        /// Length of the message.
        len: usize,
        /// Size of the type asked for.
        expected: usize,
    },
    /// The message is not valid JSON for the type asked for. The message is consumed; the
    /// channel keeps working.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// An operating-system call failed (or, on the ipc-channel backend, a buffer for a message
    /// could not be had).
    #[error(transparent)]
    Io(#[from] io::Error),
}

with_open_variants! {
    /// Everything that can go wrong, for callers who want one error type: every variant of
    /// [`OpenError`], [`SendError`] and [`RecvError`], with the same meaning. Each of them converts
    /// into it (so `?` works in a function returning [`Result`]).
    ///
    /// [`Error::Full`], [`Error::Empty`] and [`Error::Timeout`] say "not right now"
    /// ([`is_transient`](Error::is_transient)), [`Error::TooLarge`] says "never",
    /// [`Error::Disconnected`] says the peer closed cleanly and [`Error::PeerGone`] that its
    /// process died ([`is_disconnect`](Error::is_disconnect)), and [`Error::Corrupt`] that the
    /// shared memory holds something this side refuses to interpret.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum Error {
        /// See [`RecvError::WrongSize`].
        #[error("a message of {len} bytes is not a value of the {expected}-byte type asked for")]
        WrongSize {
            /// Length of the message.
            len: usize,
            /// Size of the type asked for.
            expected: usize,
        },
        /// See [`SendError::Full`].
        #[error("no room in the channel now")]
        Full,
        /// See [`RecvError::Empty`] and [`OpenError::Empty`].
        #[error("nothing waiting now")]
        Empty,
        /// See [`SendError::TooLarge`] and [`RecvError::TooLarge`].
        #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
        TooLarge {
            /// Requested (or announced) length.
            len: usize,
            /// Largest length accepted.
            max: usize,
        },
        /// A wait ran past its deadline.
        #[error("timed out")]
        Timeout,
        /// The peer closed its end (see [`RecvError::Disconnected`], [`SendError::Disconnected`]).
        #[error("the peer closed channel {0:?}")]
        Disconnected(ChannelName),
        /// The peer process exited or was killed without closing its end.
        #[error("the peer of channel {channel:?} (process {pid}) is gone")]
        PeerGone {
            /// The channel's name.
            channel: ChannelName,
            /// Process id the peer recorded (information only).
            pid: u32,
        },
        /// The shared memory holds a value this side will not interpret.
        #[error("channel {channel:?} holds corrupt data: {what}")]
        Corrupt {
            /// The channel's name (`"ring"` for a [`ring`](crate::ring) between threads).
            channel: ChannelName,
            /// What was wrong.
            what: String,
        },
        /// A value could not be encoded or decoded as JSON.
        #[error("JSON: {0}")]
        Json(#[from] serde_json::Error),
        /// An operating-system call failed.
        #[error(transparent)]
        Io(#[from] io::Error),
    }
}

/// `is_transient` and `is_disconnect` for an error type, from the variants that mean each.
macro_rules! kinds {
    ($ty:ident, transient: $($t:ident)|+) => {
        impl $ty {
            /// True for the "not right now" errors, after which the same call may succeed later.
            pub fn is_transient(&self) -> bool {
                matches!(self, $($ty::$t)|+)
            }

            /// True when the peer is no longer there: it closed cleanly
            /// ([`Disconnected`](Self::Disconnected)) or its process died
            /// ([`PeerGone`](Self::PeerGone)).
            pub fn is_disconnect(&self) -> bool {
                matches!(self, $ty::Disconnected(_) | $ty::PeerGone { .. })
            }
        }
    };
}

kinds!(OpenError, transient: Empty | Timeout);
kinds!(SendError, transient: Full | Timeout);
kinds!(RecvError, transient: Empty | Timeout);
kinds!(Error, transient: Full | Empty | Timeout);

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Error {
        match e {
            OpenError::InvalidName { name, reason } => Error::InvalidName { name, reason },
            OpenError::InvalidConfig(what) => Error::InvalidConfig(what),
            OpenError::NotFound(name) => Error::NotFound(name),
            OpenError::NotReady(name) => Error::NotReady(name),
            OpenError::AlreadyExists(name) => Error::AlreadyExists(name),
            OpenError::AlreadyConnected(name) => Error::AlreadyConnected(name),
            OpenError::NotPrivate {
                name,
                owner,
                mode,
                expected,
            } => Error::NotPrivate {
                name,
                owner,
                mode,
                expected,
            },
            OpenError::NotAChannel { name, reason } => Error::NotAChannel { name, reason },
            OpenError::BadMagic { channel, magic } => Error::BadMagic { channel, magic },
            OpenError::VersionMismatch {
                channel,
                found,
                expected,
            } => Error::VersionMismatch {
                channel,
                found,
                expected,
            },
            OpenError::LayoutMismatch {
                channel,
                field,
                found,
                expected,
            } => Error::LayoutMismatch {
                channel,
                field,
                found,
                expected,
            },
            OpenError::SizeMismatch { channel, what } => Error::SizeMismatch { channel, what },
            OpenError::TooManyClients { name, limit } => Error::TooManyClients { name, limit },
            OpenError::Empty => Error::Empty,
            OpenError::Timeout => Error::Timeout,
            OpenError::Disconnected(name) => Error::Disconnected(name),
            OpenError::PeerGone { channel, pid } => Error::PeerGone { channel, pid },
            OpenError::Corrupt { channel, what } => Error::Corrupt { channel, what },
            OpenError::Io(e) => Error::Io(e),
        }
    }
}

impl From<SendError> for Error {
    fn from(e: SendError) -> Error {
        match e {
            SendError::Full => Error::Full,
            SendError::Timeout => Error::Timeout,
            SendError::TooLarge { len, max } => Error::TooLarge { len, max },
            SendError::Disconnected(name) => Error::Disconnected(name),
            SendError::PeerGone { channel, pid } => Error::PeerGone { channel, pid },
            SendError::Corrupt { channel, what } => Error::Corrupt { channel, what },
            SendError::Json(e) => Error::Json(e),
            SendError::Io(e) => Error::Io(e),
        }
    }
}

impl From<RecvError> for Error {
    fn from(e: RecvError) -> Error {
        match e {
            RecvError::Empty => Error::Empty,
            RecvError::Timeout => Error::Timeout,
            RecvError::TooLarge { len, max } => Error::TooLarge { len, max },
            RecvError::WrongSize { len, expected } => Error::WrongSize { len, expected },
            RecvError::Disconnected(name) => Error::Disconnected(name),
            RecvError::PeerGone { channel, pid } => Error::PeerGone { channel, pid },
            RecvError::Corrupt { channel, what } => Error::Corrupt { channel, what },
            RecvError::Json(e) => Error::Json(e),
            RecvError::Io(e) => Error::Io(e),
        }
    }
}

/// Why a wait for the peer, or a look at it, ended without what it was for: what the waits
/// of sends, receives and connects share. Each operation's error type takes it in.
#[derive(Debug)]
pub(crate) enum WaitError {
    /// The deadline passed.
    Timeout,
    /// The peer closed its end.
    Disconnected(ChannelName),
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

/// `From<WaitError>` for an operation's error type, whose variants have the same names.
macro_rules! from_wait_error {
    ($($ty:ident),+) => {$(
        impl From<WaitError> for $ty {
            fn from(e: WaitError) -> $ty {
                match e {
                    WaitError::Timeout => $ty::Timeout,
                    WaitError::Disconnected(name) => $ty::Disconnected(name),
                    WaitError::PeerGone { channel, pid } => $ty::PeerGone { channel, pid },
                    WaitError::Corrupt { channel, what } => $ty::Corrupt { channel, what },
                    WaitError::Io(e) => $ty::Io(e),
                }
            }
        }
    )+};
}

from_wait_error!(OpenError, SendError, RecvError, Error);

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
