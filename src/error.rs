//! The library's error type.

use std::io;

/// Everything that can go wrong when creating, connecting, sending or receiving.
///
/// Errors that a caller usually handles differently are separate variants: [`Error::Full`] and
/// [`Error::Empty`] say "not right now", [`Error::TooLarge`] says "never", [`Error::Disconnected`]
/// says the peer closed cleanly and everything it sent has been read, [`Error::PeerGone`] says the
/// peer process died without closing, and [`Error::Corrupt`] says the shared memory holds
/// something this side refuses to interpret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The name is not acceptable. Every name, of a channel or of a listener, on either
    /// backend, follows one rule: 1 to [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) (200) bytes of
    /// ASCII letters, digits, `.`, `_` and `-`, not starting with `.` or `-`. (The channels a
    /// [`Listener`](crate::Listener) makes for its clients are named `<name>.<pid>.<n>`, up to
    /// 32 bytes longer; the library makes those names itself.)
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
    /// Nothing exists under that name (yet): no channel, no listener.
    #[error("no channel or listener named {0:?}")]
    NotFound(String),
    /// A channel or listener with that name exists and its creator is alive.
    #[error("{0:?} is taken: a channel or listener of that name exists and its creator is alive")]
    AlreadyExists(String),
    /// The mapping exists but its creator has not finished initialising it.
    #[error("channel {0:?} exists but is not initialised yet")]
    NotReady(String),
    /// The object behind a channel name (or path) belongs to another user or is open to other
    /// users: it is not one this user's creator made, so [`Channel::connect`](crate::Channel::connect)
    /// refuses to share anything through it.
    #[error(
        "channel {name:?} is not private to this user: owned by uid {owner} with mode {mode:04o} \
         (expected uid {expected} and mode 0600)"
    )]
    NotPrivate {
        /// The channel name or file path.
        name: String,
        /// User id that owns the object.
        owner: u32,
        /// Its permission bits.
        mode: u32,
        /// The effective user id of this process, which must own it.
        expected: u32,
    },
    /// The entry under a channel's name (or path) is not a channel: a directory, a symbolic link
    /// (never followed), a FIFO or another file that is not a regular one, an object without
    /// the shmlink magic... [`Channel::create`](crate::Channel::create) and
    /// [`Listener::bind`](crate::Listener::bind) leave it alone, `connect` refuses it.
    #[error("{name:?} is not a shmlink channel: {reason}")]
    NotAChannel {
        /// The channel name.
        name: String,
        /// What it is instead.
        reason: String,
    },
    /// The mapping does not start with the shmlink magic number.
    #[error("{channel:?} is not a shmlink mapping (bad magic number {magic:#018x})")]
    BadMagic {
        /// The channel's name (or path).
        channel: String,
        /// The first word of the mapping.
        magic: u64,
    },
    /// The name belongs to a listener where a channel was expected, or to a channel where a
    /// listener was. [`Endpoint::connect`](crate::Endpoint::connect) reaches either.
    #[error(
        "{name:?} is a shmlink {found}, not a {expected}: connect to it with {}",
        connect_call(found)
    )]
    WrongKind {
        /// The name.
        name: String,
        /// What it is: `"listener"` or `"channel"`.
        found: &'static str,
        /// What the call connects to.
        expected: &'static str,
    },
    /// The mapping was made by an incompatible version of this crate.
    #[error("{channel:?} has layout version {found}, this build understands version {expected}")]
    VersionMismatch {
        /// The channel's (or listener's) name.
        channel: String,
        /// Version written in the mapping.
        found: u32,
        /// Version this build writes and reads.
        expected: u32,
    },
    /// The mapping was made by a build whose layout parameters differ from this one's (frame or
    /// cell alignment, pointer width): the two processes would not agree on where things are.
    #[error("channel {channel:?} was made with {field} {found}, this build uses {expected}")]
    LayoutMismatch {
        /// The channel's name.
        channel: String,
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
        channel: String,
        /// Which sizes disagree.
        what: String,
    },
    /// Another endpoint already holds the connecting end of the named channel (or held it and
    /// closed or died: a channel serves one connection; a [`Listener`](crate::Listener) gives
    /// each client its own channel).
    #[error(
        "channel {0:?} already has its connector: a channel serves one connection, even once that \
         peer has gone; a Listener serves one client after another"
    )]
    AlreadyConnected(String),
    /// A listener already holds connections with as many clients as it admits.
    #[error("listener {name:?} is at its limit of {limit} concurrent clients")]
    TooManyClients {
        /// The listener's name.
        name: String,
        /// Most clients it admits at once.
        limit: usize,
    },
    /// The ring has no room for this frame right now; retry after the peer reads.
    #[error("ring full")]
    Full,
    /// No frame is waiting right now.
    #[error("ring empty")]
    Empty,
    /// The message can never be sent this way: longer than one frame for the calls that send
    /// exactly one frame ([`try_send`](crate::Channel::try_send), grants), or longer than the
    /// receiver's [`max_message`](crate::Channel::max_message) (or this side's own) for
    /// [`send`](crate::Channel::send). Nothing was sent; the channel keeps working.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest length this channel accepts.
        max: usize,
    },
    /// The wait ran past its deadline.
    #[error("timed out")]
    Timeout,
    /// The peer closed the channel; everything it sent has been received.
    #[error("the peer closed channel {channel:?}")]
    Disconnected {
        /// The channel's name.
        channel: String,
    },
    /// The peer process exited or was killed without closing the channel.
    #[error("the peer of channel {channel:?} (process {pid}) is gone")]
    PeerGone {
        /// The channel's name.
        channel: String,
        /// Process id the peer recorded in the mapping (in its own PID namespace; information
        /// only, the peer's death is judged by its endpoint lock).
        pid: u32,
    },
    /// The shared memory holds a value this side will not interpret (a length past the region,
    /// an index out of range, an unknown frame kind...). The channel should be dropped.
    #[error("channel {channel:?} holds corrupt data: {what}")]
    Corrupt {
        /// The channel's name (empty for a [`ring`](crate::ring) between threads).
        channel: String,
        /// What was wrong.
        what: String,
    },
    /// The value could not be encoded or decoded as JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// An operating-system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl Error {
    /// True for the "not right now" errors ([`Error::Full`], [`Error::Empty`], [`Error::Timeout`])
    /// after which the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Full | Error::Empty | Error::Timeout)
    }

    /// True when the peer is no longer there: closed cleanly or died.
    pub fn is_disconnect(&self) -> bool {
        matches!(self, Error::Disconnected { .. } | Error::PeerGone { .. })
    }

    /// [`Error::Disconnected`] for the channel `channel`.
    pub(crate) fn disconnected(channel: &str) -> Error {
        Error::Disconnected {
            channel: channel.to_owned(),
        }
    }

    /// Names the channel in a [`Error::Disconnected`], [`Error::PeerGone`] or
    /// [`Error::Corrupt`] made where the name was not at hand (left empty there).
    pub(crate) fn in_channel(self, name: &str) -> Error {
        match self {
            Error::Corrupt { channel, what } if channel.is_empty() => Error::Corrupt {
                channel: name.to_owned(),
                what,
            },
            Error::Disconnected { channel } if channel.is_empty() => Error::disconnected(name),
            Error::PeerGone { channel, pid } if channel.is_empty() => Error::PeerGone {
                channel: name.to_owned(),
                pid,
            },
            e => e,
        }
    }

    /// [`Error::SizeMismatch`] in the channel `channel`.
    pub(crate) fn size_mismatch(channel: &str, what: impl Into<String>) -> Error {
        Error::SizeMismatch {
            channel: channel.to_owned(),
            what: what.into(),
        }
    }

    /// [`Error::Corrupt`] in the channel `channel`.
    pub(crate) fn corrupt(channel: &str, what: impl Into<String>) -> Error {
        Error::Corrupt {
            channel: channel.to_owned(),
            what: what.into(),
        }
    }
}

/// The call that connects to an object of kind `kind`, for [`Error::WrongKind`].
fn connect_call(kind: &str) -> &'static str {
    match kind {
        KIND_LISTENER => "Listener::connect or Endpoint::connect",
        _ => "Channel::connect or Endpoint::connect",
    }
}

/// [`Error::WrongKind`]'s name for a channel.
pub(crate) const KIND_CHANNEL: &str = "channel";
/// [`Error::WrongKind`]'s name for a listener.
pub(crate) const KIND_LISTENER: &str = "listener";

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
