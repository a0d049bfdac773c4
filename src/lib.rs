//! # shmlink
//!
//! Low-latency messaging between two processes on one host: a lock-free
//! single-producer/single-consumer ring of byte frames in a *named* shared-memory mapping, two
//! rings (one per direction) making a duplex [`Channel`]. Where no mapping can be made,
//! [`Endpoint`] offers the same calls over an `ipc-channel` fallback.
//!
//! shmlink runs on Linux only: it sleeps on futexes in shared memory, learns of a dead peer
//! from pidfds and open-file-description locks, and does not compile for other targets.
//!
//! ## A first channel
//!
//! One process creates the channel by name, the other connects to it by name; then both can
//! send and receive. Here both ends live in one process, so that the example runs as it is:
//!
//! ```
//! use shmlink::{Channel, Config, WaitStrategy};
//! # let name = format!("doc-first-{}", std::process::id());
//!
//! let mut server = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
//! let mut client = Channel::connect(&name, WaitStrategy::Spin)?;
//!
//! client.send(b"ping")?;
//! assert_eq!(&*server.recv()?, b"ping"); // read in place in the ring
//! server.send_json(&serde_json::json!({"pong": true}))?;
//! let reply: serde_json::Value = client.recv_json()?;
//! assert_eq!(reply["pong"], true);
//! # Ok::<(), shmlink::Error>(())
//! ```
//!
//! Across two processes the calls are the same; the connecting side usually waits for the
//! channel to appear with [`Channel::connect_timeout`]. A whole request/reply program that runs
//! as both processes is `examples/request_reply.rs`
//! (`cargo run --example request_reply`):
//!
//! ```no_run
//! use std::time::Duration;
//! use shmlink::{Channel, Config, WaitStrategy};
//!
//! // Process A, the server: answers each request with the same bytes reversed.
//! let mut server = Channel::create("demo", &Config::default())?;
//! let (tx, rx) = server.split();
//! loop {
//!     let request = rx.recv()?; // Err(Disconnected) once the client has gone
//!     let mut reply = request.to_vec();
//!     reply.reverse();
//!     drop(request);
//!     tx.send(&reply)?;
//! }
//! # Ok::<(), shmlink::Error>(())
//! ```
//!
//! ```no_run
//! # use std::time::Duration;
//! # use shmlink::{Channel, WaitStrategy};
//! // Process B, the client.
//! let mut client = Channel::connect_timeout("demo", WaitStrategy::Block, Duration::from_secs(5))?;
//! client.send(b"hello")?;
//! assert_eq!(&*client.recv()?, b"olleh");
//! # Ok::<(), shmlink::Error>(())
//! ```
//!
//! ## Messages and limits
//!
//! A message of up to [`Channel::max_frame`] bytes (`capacity / 2 - 72`) travels as one frame;
//! a longer one, up to [`Channel::max_message`] (1 GiB unless changed), is split into fragments
//! and reassembled. Each side publishes its `max_message` in the mapping
//! ([`Channel::set_max_message`]); a message longer than the receiver's limit fails *at the
//! sender* with [`Error::TooLarge`], before anything is written, and the channel keeps working.
//! A fragmented send that times out part-way ([`Channel::send_timeout`]) is withdrawn: the
//! receiver drops the fragments it got and never sees the message.
//!
//! A received message is a [`ReadGuard`]: it borrows the frame in place and releases it when
//! dropped. Because it borrows the channel, a reply that uses the request's bytes needs the
//! channel's two halves, from [`Channel::split`] (see its example). The halves also serve two
//! threads, one sending and one receiving; [`Channel::into_split`] gives owned, `Send` halves.
//! Each half keeps the mapping alive, and the endpoint closes when both are gone.
//!
//! ## JSON
//!
//! [`Channel::send_json`] serialises a value straight into the ring; values of any size go
//! through (a long one is fragmented like any long message). [`Channel::recv_json`] decodes
//! into an owned value; [`ReadGuard::json`] decodes a received message with fields that
//! borrow from it. A borrowed `&str` field only works while the string has no escapes (JSON
//! writes `"` as `\"`, a newline as `\n`, and so on): for text that may contain them, use
//! `Cow<str>` with `#[serde(borrow)]`, which borrows when it can and allocates when it must.
//!
//! ```
//! use std::borrow::Cow;
//! use shmlink::{Channel, Config, WaitStrategy};
//! # let name = format!("doc-json-{}", std::process::id());
//!
//! #[derive(serde::Deserialize)]
//! struct Note<'a> {
//!     #[serde(borrow)]
//!     text: Cow<'a, str>,
//! }
//!
//! #[derive(serde::Deserialize)]
//! struct Fragile<'a> {
//!     #[allow(dead_code)]
//!     text: &'a str,
//! }
//!
//! let mut a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
//! let mut b = Channel::connect(&name, WaitStrategy::Spin)?;
//! a.send_json(&serde_json::json!({ "text": "say \"hi\"" }))?;
//! let msg = b.recv()?;
//! assert!(msg.json::<Fragile<'_>>().is_err()); // the escaped quotes cannot be borrowed
//! let note: Note<'_> = msg.json()?;
//! assert_eq!(note.text, "say \"hi\"");
//! # Ok::<(), shmlink::Error>(())
//! ```
//!
//! ## Errors
//!
//! Every call returns [`Error`]. [`Error::Full`], [`Error::Empty`] and [`Error::Timeout`] mean
//! "not now" ([`Error::is_transient`]); [`Error::Disconnected`] means the peer closed and
//! everything it sent has been received; [`Error::PeerGone`] means its process died;
//! [`Error::TooLarge`] means "never on this channel". Errors about a channel as a whole name it:
//! [`Channel::connect_timeout`] to a name nobody created ends with [`Error::NotFound`] carrying
//! that name (every `connect_timeout`, of a channel, a listener or an endpoint, ends so, and
//! with [`Error::Timeout`] when something by that name was there but not ready in time). A name
//! that is not a channel's says what it is: [`Error::WrongKind`] for a listener's,
//! [`Error::NotAChannel`] for a link, a directory, a FIFO...
//!
//! ## Names
//!
//! Every name, of a channel or a listener, on either backend, follows one rule: 1 to
//! [`MAX_NAME_LEN`] (200) bytes of ASCII letters, digits, `.`, `_` and `-`, not starting with
//! `.` or `-`. Any other name is refused at once with [`Error::InvalidName`], by the calls that
//! make and by the calls that connect:
//!
//! ```
//! use shmlink::{Channel, Config, Error, Listener, WaitStrategy, MAX_NAME_LEN};
//! let long = "x".repeat(MAX_NAME_LEN + 1);
//! assert!(matches!(Listener::bind(&long, &Config::default()), Err(Error::InvalidName { .. })));
//! assert!(matches!(Channel::connect(".hidden", WaitStrategy::Block), Err(Error::InvalidName { .. })));
//! ```
//!
//! ## Services: many clients, many channels, async
//!
//! A channel joins one pair of endpoints for its whole life. A server that outlives its clients,
//! or serves several at once, binds a [`Listener`]: each client ([`Listener::connect`]) gets its
//! own channel, the server a [`Connection`] per client, up to a limit on concurrent clients
//! ([`Error::TooManyClients`] past it). A [`Selector`] lets one thread wait on many channels at
//! once and serve the ready ones in turn. With the `tokio` feature, `shmlink::tokio` offers
//! async `send`, `recv` and `accept` on one reactor thread per process.
//!
//! ## Backends
//!
//! [`Endpoint`] runs on the shared-memory [`Channel`] where a mapping can be made and on an
//! `ipc-channel` fallback where it cannot (or when the `force-fallback` feature asks for it);
//! [`Endpoint::create_with`] chooses explicitly. The connecting side finds whichever its
//! creator used. Both report a killed peer as [`Error::PeerGone`]. An [`EndpointListener`] is
//! the listener on either backend (the client side is [`Endpoint::connect`]); the selector and
//! the async API are shared-memory only.
//!
//! Mappings whose creator died can be listed and removed with [`segments`] (or the
//! `shmlink-clean` program). [`ring::new`] runs the same ring on the heap, between threads.
//!
//! ## Memory layout
//!
//! One mapping, `/shmlink-<name>` (`/dev/shm/shmlink-<name>`), created exclusively with
//! mode 0600:
//!
//! ```text
//! 0       SegmentHeader: magic "SHMLINK\0", layout version, header size, ring capacity,
//!         total size, a ready word written last, the layout parameters (frame alignment 64,
//!         cell alignment 128, pointer width), and per endpoint: state, wait mode, pid,
//!         process start time, max message (each endpoint on its own 128-byte cell; the first
//!         byte of each is the one that endpoint keeps locked while it lives)
//! 1024    RingHeader x 2: producer index, consumer index, two futex wait cells,
//!         each on its own 128-byte cell
//! 4096    ring 0 region (creator -> connector), `capacity` bytes, a power of two
//! 4096+c  ring 1 region (connector -> creator)
//! ```
//!
//! The layout is the same on every architecture; [`Channel::connect`] refuses a mapping whose
//! version or layout parameters differ from its own ([`Error::VersionMismatch`],
//! [`Error::LayoutMismatch`]).
//!
//! ## The ring protocol
//!
//! Frames are cache-line aligned: one `u64` header word (length, kind, and a tag derived from the
//! frame's position) followed by the payload. A frame never wraps: a PAD word sends the reader
//! back to offset 0, so every payload is one contiguous slice, written in place through a
//! [`WriteGrant`] and read in place through a [`ReadGuard`].
//!
//! The producer keeps the header word at its next position zeroed; it publishes a frame by
//! storing the frame's header word with `Release` after the payload. The consumer polls the word
//! at its position with `Acquire`. The consumer never reads the producer's index on the hot path,
//! and the producer reads the consumer's index only when its cached copy says the ring is full,
//! so a message moves only the cache lines that hold it. See [`ring`] for the details.
//!
//! ## Waiting and liveness
//!
//! Each endpoint picks a [`WaitStrategy`]: `Spin`, `SpinYield`, or `Block` (spin only while
//! recent spins found data, else sleep on a futex word in the mapping; the sender only makes the
//! wake-up call when a sleeper announced itself). A wait ends when the peer closes
//! ([`Error::Disconnected`], after everything it sent has been read) or dies
//! ([`Error::PeerGone`]). Whether the peer is alive is not read from its pid: each endpoint holds
//! a lock on its own byte of the shared object (an open-file-description lock), which
//! the kernel releases when the process dies, however it dies. So pid reuse is never mistaken for
//! the peer, and peers in different PID namespaces (containers sharing `/dev/shm`) see each
//! other correctly; the recorded pid only names the peer in errors and listings.
//!
//! Spinning waits ask about the peer every few milliseconds. A sleeping `Block` wait makes no
//! timed wake-ups: a watcher thread holds a pidfd for each peer process and wakes the
//! sleepers of a peer that dies, and asks once a second whether each peer still holds its lock
//! (the pid is the peer's word, the lock is not), so a peer that recorded some other live
//! process is still reported within about a second of its death. Where a pidfd cannot be had
//! (no pidfds, or a peer whose pid names another process in our PID namespace) the wait sleeps
//! in 10 ms slices and asks after each. A [`Selector`] and the async API (feature `tokio`)
//! follow the same rule.
//!
//! ## Safety against the peer
//!
//! The other process can write anything into the mapping. Every value read from it is checked
//! before use: a bad header gives [`Error::BadMagic`], [`Error::VersionMismatch`],
//! [`Error::LayoutMismatch`] or [`Error::SizeMismatch`]; a frame with a wrong tag, an unknown
//! kind or a length past the region, or a consumer index that moves backwards or past the
//! producer, gives [`Error::Corrupt`]. None of these panic, read outside the mapping or loop
//! forever. What a hostile peer *can* do: change the bytes of a frame while you hold its
//! [`ReadGuard`] (copy them out first if that matters), stop answering (use timeouts), or shrink
//! the shared object under you, which makes the kernel raise `SIGBUS` on the next access: share
//! names only with processes you trust that much.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks, unreachable_pub)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "shmlink runs on Linux only: it sleeps on futexes in shared memory, learns of a peer's death \
     from pidfds and open-file-description locks, and has no other implementation of these"
);

mod channel;
mod endpoint;
mod error;
mod ipc;
mod layout;
mod mapping;
pub mod ring;
pub mod segments;
mod service;
mod sync;
mod sys;
#[cfg(feature = "tokio")]
pub mod tokio;
mod wait;

pub use channel::{Channel, Config, RecvHalf, Role, SendHalf, DEFAULT_MAX_MESSAGE};
pub use endpoint::{Backend, Endpoint, EndpointListener, Received};
pub use error::{Error, Result};
pub use layout::listener::MAX_CLIENTS;
pub use mapping::MAX_NAME_LEN;
pub use ring::{ReadGuard, WriteGrant};
pub use service::{Connection, Listener, Selector, DEFAULT_MAX_CLIENTS};
pub use wait::WaitStrategy;

#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod testing;

#[cfg(all(test, loom))]
mod loom_tests;

/// The code blocks of the README and of `docs/`, compiled and run as doctests by
/// `cargo test --doc`, so that no example there goes stale.
#[cfg(doctest)]
mod doc_files {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/design.md")]
    struct Design;
    #[doc = include_str!("../docs/safety.md")]
    struct Safety;
    #[doc = include_str!("../docs/testing.md")]
    struct Testing;
}
