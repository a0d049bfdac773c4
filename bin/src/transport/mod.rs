//! Every way the ping-pong harness can move a message between two processes, behind one trait.
//!
//! A backend is a [`Transport`]: the parent side makes a [`Listener`] (it creates the mapping,
//! binds the socket, ...), hands its [`Listener::address`] to the child on the command line, spawns
//! the child and [`Listener::accept`]s; the child side calls [`Transport::connect`] with that
//! address. After that both sides are symmetric: [`Transport::send`] / [`Transport::recv_with`]
//! move one message of bytes, [`Transport::send_json`] / [`Transport::recv_json`] move one JSON
//! value without a heap allocation where the backend allows it. The kernel transports also move
//! *bare* messages ([`Transport::send_bare`] / [`Transport::recv_bare`]): fixed-size, unframed,
//! one system call per message on each side, the stream's reference rows; and *batches* of them
//! ([`Transport::send_batch`] / [`Transport::recv_batch`]): many fixed-size messages per call,
//! the best a stream of small messages can do (one `write` of the lot on a kernel stream,
//! `send_batch` / `recv_batch` on shared memory).
//!
//! Every blocking wait notices a peer that is gone: a socket or pipe sees end of file, a
//! shared-memory spin checks the peer's "closed" flag and whether its process is still alive
//! ([`Peer`]) every few thousand iterations, so a killed peer is an error, never a hang.
//!
//! The transports are the table below (the `transports!` invocation): one entry per transport,
//! with its name, what it is, its class and the modes it serves, and the module whose type
//! builds its two ends (`listen` and `connect`). `ipc-parent transports --describe` prints it.
//! Adding a comparison transport is one file in this folder and one entry in the table.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::Error;
use shmlink::WaitStrategy;

/// The message methods of a [`Transport`] whose messages travel as length-prefixed frames over
/// a byte stream kept in `self.framed` (see `framed.rs`).
macro_rules! framed_methods {
    () => {
        fn max_message(&self) -> usize {
            self.framed.max_message()
        }

        fn send(&mut self, msg: &[u8]) -> Result<()> {
            self.framed.send(msg)
        }

        fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
            self.framed.send_json(value)
        }

        fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
            self.framed.recv_with(read)
        }

        fn send_bare(&mut self, msg: &[u8]) -> Result<()> {
            self.framed.send_bare(msg)
        }

        fn recv_bare<R>(
            &mut self,
            size: usize,
            read: impl FnOnce(&[u8]) -> Result<R>,
        ) -> Result<R> {
            self.framed.recv_bare(size, read)
        }

        fn send_batch(&mut self, msgs: &[Vec<u8>]) -> Result<()> {
            self.framed.send_batch(msgs)
        }

        fn recv_batch(
            &mut self,
            size: usize,
            max: usize,
            read: impl FnMut(&[u8]),
        ) -> Result<usize> {
            self.framed.recv_batch(size, max, read)
        }
    };
}

#[macro_use]
pub mod spec;
mod framed;

pub use spec::{Class, Mode, Spec};

transports! {
    Shm: shm::Shm {
        name: "shm", aliases: ["shmem"],
        about: "the shmlink duplex channel (`shmlink::Endpoint`, so it falls back to ipc-channel as the library does)",
        class: Memory, modes: [PingPong, Sweep, Stream, Batch], spins: false, stdio: false,
    },
    IpcChannel: ipc_channel::IpcChannel {
        name: "ipc-channel", aliases: ["ipcc", "ipc_channel"],
        about: "the library's ipc-channel fallback, chosen explicitly (`shmlink::Backend::IpcChannel`)",
        class: Memory, modes: [PingPong, Sweep, Stream], spins: false, stdio: false,
    },
    RawSync: raw_sync::RawSync {
        name: "raw-sync", aliases: ["raw_sync"],
        about: "a single-slot mailbox per direction signalled with `raw_sync` busy events, the common hand-rolled way",
        class: Memory, modes: [PingPong, Sweep, Stream], spins: true, stdio: false,
    },
    Memfd: memfd::Memfd {
        name: "memfd", aliases: [],
        about: "a ring per direction in a `memfd_create` buffer the child inherits, handed over with eventfd reads and writes",
        class: Memory, modes: [PingPong, Sweep, Stream], spins: false, stdio: false,
    },
    Pipe: pipe::Pipe {
        name: "pipe", aliases: ["stdio"],
        about: "the child's stdin and stdout, length-prefixed",
        class: Kernel, modes: [PingPong, Sweep, Stream, Bare, Batch], spins: false, stdio: true,
    },
    Fifo: fifo::Fifo {
        name: "fifo", aliases: [],
        about: "two named pipes, length-prefixed",
        class: Kernel, modes: [PingPong, Sweep, Stream, Bare, Batch], spins: false, stdio: false,
    },
    Socketpair: socketpair::Socketpair {
        name: "socketpair", aliases: [],
        about: "an `AF_UNIX` `SOCK_STREAM` pair made before the spawn and inherited by the child, length-prefixed",
        class: Kernel, modes: [PingPong, Sweep, Stream, Bare, Batch], spins: false, stdio: false,
    },
    PosixMq: posixmq::PosixMq {
        name: "posixmq", aliases: ["posixq", "mq"],
        about: "two POSIX message queues, larger messages in fragments",
        class: Kernel, modes: [PingPong, Sweep, Stream, Bare], spins: false, stdio: false,
    },
    Uds: uds::Uds {
        name: "uds", aliases: ["unix"],
        about: "a Unix stream socket, `SO_SNDBUF` / `SO_RCVBUF` set on both ends, length-prefixed",
        class: Kernel, modes: [PingPong, Sweep, Stream, Bare, Batch], spins: false, stdio: false,
    },
    Tcp: tcp::Tcp {
        name: "tcp", aliases: [],
        about: "TCP, loopback by default, length-prefixed; `TCP_NODELAY` except in a one-way stream",
        class: Kernel, modes: [PingPong, Sweep, Stream, Bare, Batch], spins: false, stdio: false,
    },
    Floor: floor::Floor {
        name: "floor", aliases: [],
        about: "one cache line per direction bounced between the processes, no framing: the hardware's limit",
        class: Limit, modes: [PingPong], spins: true, stdio: false,
    },
}

/// Result type of this module: the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Kind {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// Whether it takes part in `mode` (or has that form of the stream).
    pub fn serves(self, mode: Mode) -> bool {
        self.spec().modes.contains(&mode)
    }

    /// Whether the child must be spawned with piped standard input and output.
    pub fn needs_stdio(self) -> bool {
        self.spec().stdio
    }

    /// Whether the kernel carries the messages (pipes, sockets, queues): the rows "the best
    /// kernel transport" is chosen from.
    pub fn is_kernel(self) -> bool {
        self.spec().class == Class::Kernel
    }

    /// Whether it is a limit rather than a transport (`floor`).
    pub fn is_limit(self) -> bool {
        self.spec().class == Class::Limit
    }

    /// Whether it has a bare form ([`Transport::send_bare`]).
    pub fn has_bare(self) -> bool {
        self.serves(Mode::Bare)
    }

    /// Whether it has a batch form ([`Transport::send_batch`]).
    pub fn has_batch(self) -> bool {
        self.serves(Mode::Batch)
    }

    /// Whether both processes busy-spin while they wait (whatever the wait strategy).
    pub fn always_spins(self) -> bool {
        self.spec().spins
    }

    /// The names of the transports `keep` picks, comma-separated, for messages.
    pub fn names(keep: impl Fn(Kind) -> bool) -> String {
        let names: Vec<&str> = Kind::ALL
            .into_iter()
            .filter(|&k| keep(k))
            .map(Kind::as_str)
            .collect();
        names.join(", ")
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s || k.spec().aliases.contains(&s))
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "unknown transport {s:?} (expected one of {})",
                    Kind::names(|_| true)
                ))
            })
    }
}

/// Settings shared by both sides of a transport.
#[derive(Debug, Clone)]
pub struct Options {
    /// How the `shm` backend waits (the other backends ignore it).
    pub wait: WaitStrategy,
    /// Bytes per direction: ring capacity (`shm`), mailbox slot (`raw-sync`, at least
    /// [`max_message`](Options::max_message)), socket buffers (`uds`, `tcp`) and pipe buffer
    /// (`pipe`, up to what the OS allows).
    pub ring_size: usize,
    /// The largest message either side will send: the `raw-sync` mailbox slot and the stream
    /// backends' frame limit grow to hold it (the ring streams larger messages in fragments, and
    /// ipc-channel splits them itself, so `shm` and `ipc-channel` need no setting).
    pub max_message: usize,
    /// Address the `tcp` parent binds (the child connects to the address the listener reports).
    pub tcp_addr: String,
    /// How long a connect or an accept may wait for the other side.
    pub connect_timeout: Duration,
    /// Whether `tcp` sets `TCP_NODELAY`: yes where a message waits for an answer (ping-pong,
    /// sweep), no for a one-way stream, where Nagle's algorithm lets a busy sender fill
    /// segments instead of paying one per message.
    pub tcp_nodelay: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            wait: WaitStrategy::Spin,
            ring_size: 1 << 20,
            max_message: 1 << 20,
            tcp_addr: "127.0.0.1:0".to_owned(),
            connect_timeout: Duration::from_secs(10),
            tcp_nodelay: true,
        }
    }
}

/// A family of JSON message types that may borrow from the received bytes, so that
/// [`Transport::recv_json`] can hand out a `T<'a>` tied to a frame it only lends.
pub trait JsonMessage {
    /// The message type, borrowing from a buffer of lifetime `'a`.
    type Of<'a>: Deserialize<'a>;
}

/// One backend of the harness. See the module docs for the life cycle.
pub trait Transport: Sized {
    /// The parent side before the child has connected.
    type Listener: Listener<Transport = Self>;

    /// Which backend this is.
    const KIND: Kind;

    /// Parent side: prepare an endpoint named after `name` (mapping, socket path, ...).
    fn listen(name: &str, opts: &Options) -> Result<Self::Listener>;

    /// Child side: connect to the address the parent's listener reported.
    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Self>;

    /// The largest message this endpoint can send in one piece.
    fn max_message(&self) -> usize;

    /// Sends one message, waiting for room (and failing if the peer is gone).
    fn send(&mut self, msg: &[u8]) -> Result<()>;

    /// Serialises `value` as JSON and sends it, without a heap allocation per message where the
    /// backend can write in place or reuse a buffer.
    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()>;

    /// Waits for one message and lends its bytes to `read`.
    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R>;

    /// Sends `msg` bare: no framing, exactly one system call writing its bytes (a `write`,
    /// `mq_send`), as a minimal C program does when both sides know the size. Only the kernel
    /// transports ([`Kind::is_kernel`]) have a bare form; the others refuse.
    fn send_bare(&mut self, msg: &[u8]) -> Result<()> {
        let _ = msg;
        Err(no_bare_form(Self::KIND))
    }

    /// Receives one bare message of `size` bytes (reading until it is whole, never past it) and
    /// lends it to `read`. The counterpart of [`Transport::send_bare`].
    fn recv_bare<R>(&mut self, size: usize, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let _ = (size, read);
        Err(no_bare_form(Self::KIND))
    }

    /// Sends `msgs` (each of one stream's size) as a batch, waiting for room until all went:
    /// the kernel byte streams write them back to back, unframed, with one `write` (more only
    /// if the kernel takes part of it), and shared memory publishes them with `send_batch`.
    /// The others refuse.
    fn send_batch(&mut self, msgs: &[Vec<u8>]) -> Result<()> {
        let _ = msgs;
        Err(no_batch_form(Self::KIND))
    }

    /// Waits for at least one message of a batch (each `size` bytes) and hands `read` every
    /// whole one there now, at most `max`; returns how many. The counterpart of
    /// [`Transport::send_batch`]: a kernel stream `read`s all the room of its buffer at once.
    fn recv_batch(&mut self, size: usize, max: usize, read: impl FnMut(&[u8])) -> Result<usize> {
        let _ = (size, max, read);
        Err(no_batch_form(Self::KIND))
    }

    /// Receives one message and sends the same bytes back. `buf` is scratch space a backend may
    /// use to hold the message in between; backends that can send straight from the received
    /// message override this to save that copy.
    fn echo(&mut self, buf: &mut Vec<u8>) -> Result<()> {
        self.recv_with(|bytes| {
            buf.clear();
            buf.extend_from_slice(bytes);
            Ok(())
        })?;
        self.send(buf)
    }

    /// Waits for one JSON message and lends the decoded value (which may borrow from the
    /// message's bytes) to `read`.
    fn recv_json<M: JsonMessage, R>(
        &mut self,
        read: impl for<'a> FnOnce(M::Of<'a>) -> Result<R>,
    ) -> Result<R> {
        self.recv_with(|bytes| {
            let value = serde_json::from_slice::<M::Of<'_>>(bytes)?;
            read(value)
        })
    }
}

/// The parent side of a transport before the child has connected.
pub trait Listener {
    /// The transport this listener yields.
    type Transport: Transport;

    /// What the child must be told to connect (a mapping name, a socket path, an address).
    fn address(&self) -> String;

    /// The backend that will carry the messages: the transport's own name, except where the
    /// library may fall back (`shm` says `ipc-channel` then).
    fn backend(&self) -> &'static str {
        <Self::Transport as Transport>::KIND.as_str()
    }

    /// Waits for the child to connect. `stdio` carries the child's piped standard input and
    /// output for the `pipe` backend (the others ignore it). Fails rather than hangs when `peer`
    /// dies first or the options' connect timeout passes.
    fn accept(self, stdio: ChildStdio, peer: Peer) -> Result<Self::Transport>;
}

/// The child's piped standard input and output, when it was spawned with them.
#[derive(Debug, Default)]
pub struct ChildStdio {
    /// The child's standard input (the parent writes to it).
    pub stdin: Option<std::process::ChildStdin>,
    /// The child's standard output (the parent reads from it).
    pub stdout: Option<std::process::ChildStdout>,
}

/// The process on the other side, watched while waiting so that a dead peer is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pid: Option<i32>,
    relation: Relation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    /// Our child: it stays a zombie until reaped, so liveness is asked with `waitid(WNOWAIT)`.
    Child,
    /// Our parent: gone when we are reparented.
    Parent,
    /// Any other process: `kill(pid, 0)`.
    Other,
    /// Nothing to watch (the transport's own end-of-file detection must do).
    Unknown,
}

impl Peer {
    /// A child process of this one.
    pub fn child(pid: u32) -> Peer {
        Peer {
            pid: i32::try_from(pid).ok(),
            relation: Relation::Child,
        }
    }

    /// This process's parent, as it is now.
    pub fn parent() -> Peer {
        // SAFETY: getppid has no preconditions and cannot fail.
        let pid = unsafe { libc::getppid() };
        Peer {
            pid: Some(pid),
            relation: Relation::Parent,
        }
    }

    /// Some other process.
    pub fn process(pid: u32) -> Peer {
        Peer {
            pid: i32::try_from(pid).ok(),
            relation: Relation::Other,
        }
    }

    /// A peer whose process is not known (a remote TCP peer, a test thread).
    pub fn unknown() -> Peer {
        Peer {
            pid: None,
            relation: Relation::Unknown,
        }
    }

    /// The peer's process id, when known.
    pub fn pid(&self) -> Option<u32> {
        self.pid.and_then(|p| u32::try_from(p).ok())
    }

    /// True when the peer's process has exited (or been killed).
    pub fn is_gone(&self) -> bool {
        let Some(pid) = self.pid else { return false };
        match self.relation {
            Relation::Unknown => false,
            Relation::Child => {
                // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: `info` is a valid, writable siginfo_t; WNOWAIT leaves the child
                // waitable, so the owner of its `std::process::Child` still reaps it.
                let rc = unsafe {
                    libc::waitid(
                        libc::P_PID,
                        pid as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                    )
                };
                if rc != 0 {
                    // ECHILD: already reaped (or not our child): gone.
                    return true;
                }
                // SAFETY: waitid succeeded, so `info` holds a valid (possibly zeroed) record.
                let exited_pid = unsafe { info.si_pid() };
                exited_pid != 0
            }
            Relation::Parent => {
                // SAFETY: getppid has no preconditions and cannot fail.
                let now = unsafe { libc::getppid() };
                now != pid || !process_exists(pid)
            }
            Relation::Other => !process_exists(pid),
        }
    }

    /// The error for a gone peer.
    pub fn gone_error(&self) -> Error {
        Error::PeerGone {
            pid: self.pid().unwrap_or(0),
        }
    }

    /// `Err(PeerGone)` when the peer is gone.
    pub fn check(&self) -> Result<()> {
        if self.is_gone() {
            Err(self.gone_error())
        } else {
            Ok(())
        }
    }
}

fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 performs only the existence and permission checks.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Spins in a wait loop, yielding now and then and checking the peer every few thousand turns.
pub(crate) struct Spinner {
    peer: Peer,
    turns: u32,
}

/// Turns between two yields of the CPU (a power of two minus one, used as a mask): about ten
/// microseconds of spinning. A yield costs little when nothing else wants the core, and when
/// something does (more spinning processes than cores), it hands the core over instead of
/// spinning out a whole scheduler time slice.
const YIELD_MASK: u32 = (1 << 8) - 1;
/// Turns between two checks of the peer (a multiple of the yield period).
const CHECK_MASK: u32 = (1 << 12) - 1;

impl Spinner {
    pub(crate) fn new(peer: Peer) -> Spinner {
        Spinner { peer, turns: 0 }
    }

    /// One turn of the loop. Every `YIELD_MASK + 1` turns it yields the CPU; every
    /// `CHECK_MASK + 1` turns it also runs `still_open` (a backend's "peer closed" check) and
    /// checks that the peer's process is alive.
    #[inline]
    pub(crate) fn turn(&mut self, still_open: impl FnOnce() -> Result<()>) -> Result<()> {
        self.turns = self.turns.wrapping_add(1);
        if self.turns & YIELD_MASK != 0 {
            std::hint::spin_loop();
            return Ok(());
        }
        self.slow_turn(still_open)
    }

    #[cold]
    fn slow_turn(&mut self, still_open: impl FnOnce() -> Result<()>) -> Result<()> {
        std::thread::yield_now();
        if self.turns & CHECK_MASK != 0 {
            return Ok(());
        }
        still_open()?;
        self.peer.check()
    }
}

/// Polls `attempt` until it yields a value, sleeping briefly in between, failing when the peer
/// dies or `timeout` passes. For accepts and connects, never for the message path.
pub(crate) fn poll_until<T>(
    peer: Peer,
    timeout: Duration,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = attempt()? {
            return Ok(value);
        }
        peer.check()?;
        if Instant::now() >= deadline {
            return Err(Error::Timeout);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits on the listening side until the connecting side has stored 2 in the mapping's `ready`
/// word (failing when the peer dies or `timeout` passes).
pub(crate) fn await_connected(
    ready: &std::sync::atomic::AtomicU32,
    peer: Peer,
    timeout: Duration,
) -> Result<()> {
    poll_until(peer, timeout, || {
        // Acquire: pairs with the Release store of 2 in the transport's `connect`.
        Ok((ready.load(std::sync::atomic::Ordering::Acquire) == 2).then_some(()))
    })
}

/// Code generic over the transport type, run by [`dispatch`].
pub trait Visitor {
    /// What the visit returns.
    type Output;
    /// Runs with `T` as the transport type.
    fn visit<T: Transport>(self) -> Self::Output;
}

/// The error of a bare send or receive on a transport that has no bare form.
fn no_bare_form(kind: Kind) -> Error {
    Error::InvalidConfig(format!(
        "{kind} has no bare form: only {} send unframed messages",
        Kind::names(Kind::has_bare)
    ))
}

fn no_batch_form(kind: Kind) -> Error {
    Error::InvalidConfig(format!(
        "{kind} has no batch form: only {} move many messages per call",
        Kind::names(Kind::has_batch)
    ))
}

/// The error for a peer that closed its end of a transport.
pub fn closed() -> Error {
    Error::Disconnected
}

/// Prefix of the mappings the comparison transports create. Not `shmlink-`: those names belong to
/// the library, whose tools treat every `shmlink-*` object as a channel.
pub const HARNESS_PREFIX: &str = "ipcbench-";

/// The name of a shared-memory mapping this module creates: `ipcbench-<name>-<suffix>`.
pub(crate) fn mapping_id(name: &str, suffix: &str) -> String {
    format!("{HARNESS_PREFIX}{name}-{suffix}")
}

/// Creates a zero-filled shared-memory mapping called `id` of at least `size` bytes; it is
/// unlinked when the returned handle drops.
pub(crate) fn create_mapping(id: &str, size: usize) -> Result<shared_memory::Shmem> {
    shared_memory::ShmemConf::new()
        .os_id(id)
        .size(size)
        .create()
        .map_err(|e| match e {
            shared_memory::ShmemError::MappingIdExists => Error::AlreadyExists(id.to_owned()),
            other => Error::Io(io::Error::other(format!(
                "creating mapping {id:?}: {other}"
            ))),
        })
}

/// Opens the mapping `id`, retrying while it does not exist yet (until the peer dies or the
/// timeout passes), and checks that it holds at least `size` bytes.
pub(crate) fn open_mapping(
    id: &str,
    size: usize,
    peer: Peer,
    timeout: Duration,
) -> Result<shared_memory::Shmem> {
    let shmem = poll_until(peer, timeout, || {
        match shared_memory::ShmemConf::new().os_id(id).open() {
            Ok(m) => Ok(Some(m)),
            Err(shared_memory::ShmemError::MapOpenFailed(_)) => Ok(None),
            Err(other) => Err(Error::Io(io::Error::other(format!(
                "opening mapping {id:?}: {other}"
            )))),
        }
    })
    .map_err(|e| match e {
        Error::Timeout => Error::NotFound(id.to_owned()),
        other => other,
    })?;
    if shmem.len() < size {
        return Err(crate::garbled(format!(
            "mapping {id:?} holds {} bytes, at least {size} expected",
            shmem.len()
        )));
    }
    Ok(shmem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in Kind::ALL {
            assert_eq!(kind.as_str().parse::<Kind>().ok(), Some(kind));
        }
        assert!("carrier-pigeon".parse::<Kind>().is_err());
    }

    #[test]
    fn no_two_entries_of_the_table_share_a_name() {
        let mut names: Vec<&str> = Kind::ALL
            .iter()
            .flat_map(|k| std::iter::once(k.as_str()).chain(k.spec().aliases.iter().copied()))
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a name or alias is used twice");
    }

    #[test]
    fn every_entry_serves_ping_pong_and_only_a_limit_stays_out_of_the_stream() {
        for kind in Kind::ALL {
            assert!(kind.serves(Mode::PingPong), "{kind}");
            assert_eq!(kind.serves(Mode::Stream), !kind.is_limit(), "{kind}");
            assert!(
                !kind.has_bare() || kind.is_kernel(),
                "{kind}: bare rows are the kernel's"
            );
        }
    }

    #[test]
    fn own_process_is_alive_and_a_bogus_child_is_gone() {
        assert!(!Peer::process(std::process::id()).is_gone());
        assert!(Peer::child(std::process::id()).is_gone());
        assert!(!Peer::unknown().is_gone());
    }
}
