//! The duplex channel: two rings in one named mapping, one per direction.
//!
//! [`Channel::create`] makes the mapping and owns the name; [`Channel::connect`] finds it by name.
//! Ring 0 carries frames from the creator to the connector, ring 1 the other way.

use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::layout::{
    check_capacity, segment_size, PeerInfo, RingHeader, SegmentHeader, HEADER_SIZE, LAYOUT_VERSION,
    MAGIC, MODE_BLOCK, MODE_SPIN, PEER_ABSENT, PEER_CLOSED, PEER_PRESENT, READY, RINGS_OFFSET,
};
use crate::mapping::{self, Mapping};
use crate::process::ProcessId;
use crate::ring::{kind, Consumer, Frame, Producer, ReadGuard, RingPtrs, WriteGrant};
use crate::wait::{self, WaitStrategy, CHECK_INTERVAL};

/// Default for [`Channel::max_message`]: 1 GiB.
pub const DEFAULT_MAX_MESSAGE: usize = 1 << 30;

/// [`PeerInfo::state`] while a connector is filling in its details.
const PEER_CLAIMING: u32 = 3;

/// How a channel is made.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes in each direction's ring: a power of two from 256 B to 2 GiB. A single frame can
    /// carry up to `capacity / 2 - 72` bytes.
    pub capacity: usize,
    /// How this endpoint waits for data or room.
    pub wait: WaitStrategy,
}

impl Default for Config {
    /// 1 MiB per direction, [`WaitStrategy::Block`].
    fn default() -> Self {
        Config {
            capacity: 1 << 20,
            wait: WaitStrategy::Block,
        }
    }
}

impl Config {
    /// A default configuration with another wait strategy.
    pub fn with_wait(wait: WaitStrategy) -> Self {
        Config {
            wait,
            ..Config::default()
        }
    }
}

/// Which end of a channel this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Made the mapping and owns its name.
    Creator,
    /// Found the mapping by name.
    Connector,
}

/// Watches the other endpoint: did it close, is its process still running?
#[derive(Clone)]
struct PeerWatch {
    info: NonNull<PeerInfo>,
    id: Option<ProcessId>,
    last_check: Option<Instant>,
}

impl PeerWatch {
    fn info(&self) -> &PeerInfo {
        // SAFETY: points into the channel's mapping, which outlives the watch; all fields are
        // atomics.
        unsafe { self.info.as_ref() }
    }

    fn state(&self) -> u32 {
        // Acquire: pairs with the Release store of PEER_PRESENT (so pid and start time are
        // visible) and of PEER_CLOSED in `Channel::drop` (so every frame sent before the close
        // is visible).
        self.info().state.load(Ordering::Acquire)
    }

    /// Err(Disconnected) once the peer closed, Err(PeerGone) once its process is gone.
    fn check(&mut self) -> Result<()> {
        match self.state() {
            PEER_ABSENT | PEER_CLAIMING => Ok(()),
            PEER_PRESENT => {
                // SAFETY: as in `info`; a copy of the pointer so `self.id` can be borrowed.
                let info = unsafe { self.info.as_ref() };
                let id = *self.id.get_or_insert_with(|| ProcessId {
                    // Relaxed: published before PEER_PRESENT, which `state` read with Acquire.
                    pid: info.pid.load(Ordering::Relaxed),
                    start_time: info.start_time.load(Ordering::Relaxed),
                });
                if id.is_alive() {
                    // Only a live verdict is cached: a dead process stays dead, and every call
                    // after the first `PeerGone` must report it too.
                    self.last_check = Some(Instant::now());
                    Ok(())
                } else {
                    Err(Error::PeerGone { pid: id.pid })
                }
            }
            PEER_CLOSED => Err(Error::Disconnected),
            other => Err(Error::corrupt(format!("peer state {other:#x} is unknown"))),
        }
    }

    /// Like `check`, but looks at the process at most once per check interval.
    fn check_throttled(&mut self) -> Result<()> {
        let state = self.state();
        if state == PEER_PRESENT {
            if let Some(last) = self.last_check {
                if last.elapsed() < CHECK_INTERVAL {
                    return Ok(());
                }
            }
        }
        self.check()
    }
}

/// One end of a duplex shared-memory channel.
///
/// Both ends can send and receive. Sending copies the bytes into the ring (or lets you write
/// them in place with [`reserve`](Channel::reserve) / [`send_json`](Channel::send_json));
/// receiving hands out a [`ReadGuard`] that borrows the frame in place until it is dropped.
///
/// ```no_run
/// use shmlink::{Channel, Config};
/// let mut server = Channel::create("demo", &Config::default())?;
/// // ... in another process: let mut client = Channel::connect("demo", Default::default())?;
/// let request = server.recv()?;
/// println!("got {} bytes", request.len());
/// # Ok::<(), shmlink::Error>(())
/// ```
pub struct Channel {
    sender: SendHalf,
    receiver: RecvHalf,
    me: NonNull<PeerInfo>,
    wait: WaitStrategy,
    role: Role,
    name: String,
    // Declared last: dropped after the ring ends that point into it. Only kept alive.
    _map: Mapping,
}

// SAFETY: every pointer in a channel points into `map`, which moves with it; cross-process
// access goes through atomics and the frame protocol. A channel is not `Sync`: each end is
// single-producer and single-consumer.
unsafe impl Send for Channel {}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("wait", &self.wait)
            .field("capacity", &self.capacity())
            .finish()
    }
}

fn mode_of(wait: WaitStrategy) -> u32 {
    match wait {
        WaitStrategy::Block => MODE_BLOCK,
        WaitStrategy::Spin | WaitStrategy::SpinYield => MODE_SPIN,
    }
}

fn segment(map: &Mapping) -> &SegmentHeader {
    // SAFETY: callers only use this on mappings at least HEADER_SIZE bytes long (checked at
    // create/open); the mapping is page-aligned and `SegmentHeader` is all atomics, valid for
    // any bit pattern.
    unsafe { map.ptr().cast::<SegmentHeader>().as_ref() }
}

impl Channel {
    /// Creates the channel `name` (a mapping named `/shmlink-<name>`, mode 0600) and becomes
    /// its creator. The name is removed again when the channel drops.
    ///
    /// If a mapping with that name exists and its creator process is gone, the stale mapping is
    /// removed and replaced; if the creator is alive, this fails with [`Error::AlreadyExists`].
    pub fn create(name: &str, config: &Config) -> Result<Channel> {
        mapping::validate_name(name)?;
        check_capacity(config.capacity)?;
        let size = segment_size(config.capacity);
        let map = match Mapping::create_named(name, size) {
            Err(Error::AlreadyExists(_)) if crate::segments::reclaim_if_dead(name)? => {
                Mapping::create_named(name, size)?
            }
            other => other?,
        };
        Self::init_creator(map, name.to_owned(), config)
    }

    /// Like [`create`](Channel::create), backed by a new file at `path` (for example on a tmpfs
    /// or hugetlbfs mount). The file is created exclusively with mode 0600 and removed on drop.
    pub fn create_at(path: &Path, config: &Config) -> Result<Channel> {
        check_capacity(config.capacity)?;
        let map = Mapping::create_file(path, segment_size(config.capacity))?;
        Self::init_creator(map, path.display().to_string(), config)
    }

    fn init_creator(map: Mapping, name: String, config: &Config) -> Result<Channel> {
        let hdr = segment(&map);
        let me = ProcessId::current();
        // Relaxed stores: all published by the Release store of `ready` below, which openers
        // read with Acquire before anything else.
        hdr.magic.store(MAGIC, Ordering::Relaxed);
        hdr.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        hdr.header_size.store(HEADER_SIZE as u32, Ordering::Relaxed);
        hdr.capacity
            .store(config.capacity as u64, Ordering::Relaxed);
        hdr.total_size
            .store(segment_size(config.capacity) as u64, Ordering::Relaxed);
        let info = &hdr.creator;
        info.pid.store(me.pid, Ordering::Relaxed);
        info.start_time.store(me.start_time, Ordering::Relaxed);
        info.wait_mode
            .store(mode_of(config.wait), Ordering::Relaxed);
        info.state.store(PEER_PRESENT, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `ready` in `connect_at_mapping`: publishes
        // every field above.
        hdr.ready.store(READY, Ordering::Release);
        Self::assemble(map, name, config.capacity, Role::Creator, config.wait)
    }

    /// Connects to the channel `name` made by another process (or thread).
    ///
    /// Fails with [`Error::NotFound`] or [`Error::NotReady`] if it is not there yet (see
    /// [`connect_timeout`](Channel::connect_timeout) to wait for it), with
    /// [`Error::AlreadyConnected`] if another endpoint holds the connecting end, and with
    /// [`Error::BadMagic`], [`Error::VersionMismatch`] or [`Error::SizeMismatch`] if the mapping
    /// is not one this build understands.
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<Channel> {
        let map = Mapping::open_named(name)?;
        Self::connect_mapping(map, name.to_owned(), wait)
    }

    /// Like [`connect`](Channel::connect), retrying while the channel is missing or not ready,
    /// until `timeout` has passed.
    pub fn connect_timeout(name: &str, wait: WaitStrategy, timeout: Duration) -> Result<Channel> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(50);
        loop {
            match Self::connect(name, wait) {
                Err(Error::NotFound(_) | Error::NotReady(_)) if Instant::now() < deadline => {
                    std::thread::sleep(
                        pause.min(deadline.saturating_duration_since(Instant::now())),
                    );
                    pause = (pause * 2).min(Duration::from_millis(10));
                }
                Err(Error::NotFound(_) | Error::NotReady(_)) => return Err(Error::Timeout),
                other => return other,
            }
        }
    }

    /// Connects to a channel backed by the file at `path` (see [`create_at`](Channel::create_at)).
    pub fn connect_at(path: &Path, wait: WaitStrategy) -> Result<Channel> {
        let map = Mapping::open_file(path)?;
        Self::connect_mapping(map, path.display().to_string(), wait)
    }

    fn connect_mapping(map: Mapping, name: String, wait: WaitStrategy) -> Result<Channel> {
        if map.len() < HEADER_SIZE {
            return Err(Error::SizeMismatch(format!(
                "mapping of {} bytes is smaller than the {HEADER_SIZE}-byte header",
                map.len()
            )));
        }
        let hdr = segment(&map);
        // Acquire: pairs with the Release store of `ready` in `init_creator`.
        if hdr.ready.load(Ordering::Acquire) != READY {
            // A mapping that does not even carry our magic is not ours at all.
            let magic = hdr.magic.load(Ordering::Relaxed);
            if magic != 0 && magic != MAGIC {
                return Err(Error::BadMagic(magic));
            }
            return Err(Error::NotReady(name));
        }
        let capacity = hdr.validate(map.len())?;
        let info = &hdr.connector;
        // Acquire on success: pairs with the Release of a previous holder (none for a fresh
        // channel); the claim makes us the only connector.
        if info
            .state
            .compare_exchange(
                PEER_ABSENT,
                PEER_CLAIMING,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Err(Error::AlreadyConnected);
        }
        let me = ProcessId::current();
        info.pid.store(me.pid, Ordering::Relaxed);
        info.start_time.store(me.start_time, Ordering::Relaxed);
        info.wait_mode.store(mode_of(wait), Ordering::Relaxed);
        // Release: pairs with the Acquire load in `PeerWatch::state` on the creator's side.
        info.state.store(PEER_PRESENT, Ordering::Release);
        Self::assemble(map, name, capacity, Role::Connector, wait)
    }

    fn assemble(
        mut map: Mapping,
        name: String,
        capacity: usize,
        role: Role,
        wait: WaitStrategy,
    ) -> Result<Channel> {
        let base = map.ptr();
        let hdr = segment(&map);
        let (me, peer) = match role {
            Role::Creator => (&hdr.creator, &hdr.connector),
            Role::Connector => (&hdr.connector, &hdr.creator),
        };
        let me = NonNull::from(&**me);
        let peer = NonNull::from(&**peer);
        // SAFETY: `peer` points into the mapping; `wait_mode` is a field of it.
        let peer_mode: NonNull<AtomicU32> = NonNull::from(&unsafe { peer.as_ref() }.wait_mode);
        let ring = |i: usize| {
            // SAFETY: the two ring headers sit at RINGS_OFFSET inside the header page and the
            // two regions right after it; `validate` (or our own sizing) checked that the
            // mapping holds HEADER_SIZE + 2 * capacity bytes. The mapping is page-aligned, so
            // both are aligned for their types.
            unsafe {
                RingPtrs {
                    header: NonNull::new_unchecked(
                        base.as_ptr()
                            .add(RINGS_OFFSET + i * std::mem::size_of::<RingHeader>())
                            as *mut RingHeader,
                    ),
                    region: NonNull::new_unchecked(base.as_ptr().add(HEADER_SIZE + i * capacity)),
                    capacity,
                    peer_mode,
                }
            }
        };
        let (tx_ring, rx_ring) = match role {
            Role::Creator => (ring(0), ring(1)),
            Role::Connector => (ring(1), ring(0)),
        };
        // SAFETY: the rings live in `map`, which the channel owns and drops after the ends; the
        // role split gives each ring exactly one producer and one consumer per channel.
        let built = unsafe { Producer::new(tx_ring, None) }
            .and_then(|tx| Ok((tx, unsafe { Consumer::new(rx_ring, None) }?)));
        let (tx, rx) = match built {
            Ok(ends) => ends,
            Err(e) => {
                if role == Role::Connector {
                    // Give the connecting end back so the mapping is not left half-claimed.
                    // SAFETY: `me` points into `map`, still alive here.
                    unsafe { me.as_ref() }
                        .state
                        .store(PEER_ABSENT, Ordering::Release);
                }
                map.set_owner(role == Role::Creator);
                return Err(e);
            }
        };
        let peer = PeerWatch {
            info: peer,
            id: None,
            last_check: None,
        };
        Ok(Channel {
            sender: SendHalf {
                tx,
                peer: peer.clone(),
                wait,
                json_hint: 256,
                max_message: DEFAULT_MAX_MESSAGE,
                scratch: Vec::new(),
            },
            receiver: RecvHalf {
                rx,
                peer,
                wait,
                max_message: DEFAULT_MAX_MESSAGE,
                assembly: Vec::new(),
                assembling: None,
            },
            me,
            wait,
            role,
            name,
            _map: map,
        })
    }

    /// The name given at create / connect time (or the file path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which end this is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// How this end waits.
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.wait
    }

    /// Bytes in each ring.
    pub fn capacity(&self) -> usize {
        self.sender.tx.capacity()
    }

    /// Largest payload one frame carries (`capacity / 2 - 72`).
    pub fn max_frame(&self) -> usize {
        self.sender.tx.max_len()
    }

    /// True while the peer endpoint is connected and its process runs.
    pub fn is_peer_connected(&mut self) -> bool {
        let peer = &mut self.receiver.peer;
        peer.state() == PEER_PRESENT && peer.check().is_ok()
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&mut self) -> Option<u32> {
        let _ = self.receiver.peer.check();
        self.receiver.peer.id.map(|id| id.pid)
    }

    /// Splits the channel into its sending and receiving halves, which can be used from two
    /// threads at once (for example with `std::thread::scope`).
    ///
    /// A [`Channel`] cannot receive while it is blocked in [`send`](Channel::send); when both
    /// peers may send messages larger than the ring at the same time, each needs a thread that
    /// keeps receiving, or the two sends wait on each other forever.
    pub fn split(&mut self) -> (&mut SendHalf, &mut RecvHalf) {
        (&mut self.sender, &mut self.receiver)
    }

    /// Largest message [`send`](Channel::send) accepts and [`recv`](Channel::recv) reassembles
    /// (default 1 GiB). Messages up to [`max_frame`](Channel::max_frame) travel in one frame;
    /// larger ones are split into fragments.
    pub fn max_message(&self) -> usize {
        self.sender.max_message
    }

    /// Sets [`max_message`](Channel::max_message) for both directions. The receiving side
    /// refuses (as [`Error::Corrupt`]) a fragmented message announced larger than its own limit.
    pub fn set_max_message(&mut self, max: usize) {
        self.sender.max_message = max;
        self.receiver.max_message = max;
    }

    /// Reserves room for a frame of `len` bytes (at most [`max_frame`](Channel::max_frame)),
    /// waiting for the peer to make room if needed.
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.sender.reserve(len)
    }

    /// Reserves room for a frame of `len` bytes if there is room now ([`Error::Full`] if not).
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.sender.try_reserve(len)
    }

    /// Sends one message, waiting for room. See [`SendHalf::send`].
    #[inline]
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.sender.send(bytes)
    }

    /// Sends one frame if there is room now ([`Error::Full`] if not). Never fragments.
    #[inline]
    pub fn try_send(&mut self, bytes: &[u8]) -> Result<()> {
        self.sender.try_send(bytes)
    }

    /// Like [`send`](Channel::send), giving up with [`Error::Timeout`] after `timeout`.
    pub fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<()> {
        self.sender.send_timeout(bytes, timeout)
    }

    /// Serialises `value` as JSON straight into the ring. See [`SendHalf::send_json`].
    #[inline]
    pub fn send_json<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.sender.send_json(value)
    }

    /// Receives the next message, waiting for it. See [`RecvHalf::recv`].
    #[inline]
    pub fn recv(&mut self) -> Result<ReadGuard<'_>> {
        self.receiver.recv()
    }

    /// Like [`recv`](Channel::recv), giving up with [`Error::Timeout`] after `timeout`.
    #[inline]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<ReadGuard<'_>> {
        self.receiver.recv_timeout(timeout)
    }

    /// Receives the next message if one is there. See [`RecvHalf::try_recv`].
    #[inline]
    pub fn try_recv(&mut self) -> Result<ReadGuard<'_>> {
        self.receiver.try_recv()
    }

    /// Receives one message and copies it into `buf`. See [`RecvHalf::recv_into`].
    pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        self.receiver.recv_into(buf)
    }

    /// Receives one message and decodes it as JSON into an owned value.
    pub fn recv_json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        self.receiver.recv_json()
    }
}

/// The sending half of a [`Channel`], from [`Channel::split`]: it can move to another thread
/// while the receiving half keeps working, so two peers can each stream large messages to the
/// other at once without waiting on each other.
pub struct SendHalf {
    tx: Producer,
    peer: PeerWatch,
    wait: WaitStrategy,
    json_hint: usize,
    /// Largest message accepted (fragmented messages included).
    max_message: usize,
    /// Serialisation buffer for JSON values too large for one frame.
    scratch: Vec<u8>,
}

impl SendHalf {
    /// Largest payload one frame carries (`capacity / 2 - 72`).
    pub fn max_frame(&self) -> usize {
        self.tx.max_len()
    }

    fn send_allowed(&self) -> Result<()> {
        if self.peer.state() == PEER_CLOSED {
            return Err(Error::Disconnected);
        }
        Ok(())
    }

    /// Largest message [`send`](Channel::send) accepts.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Sets the largest message this half sends.
    pub fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
    }

    /// Reserves room for a frame of `len` bytes (at most [`max_frame`](Channel::max_frame)),
    /// waiting for the peer to make room if needed.
    pub fn reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.reserve_kind(len, kind::DATA, None)
    }

    /// Reserves room for a frame of `len` bytes if there is room now ([`Error::Full`] if not).
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.send_allowed()?;
        self.tx.try_reserve(len)
    }

    #[inline]
    fn reserve_kind(
        &mut self,
        len: usize,
        kind: u8,
        deadline: Option<Instant>,
    ) -> Result<WriteGrant<'_>> {
        self.send_allowed()?;
        if len > self.tx.max_len() {
            return Err(Error::TooLarge {
                len,
                max: self.tx.max_len(),
            });
        }
        let start = loop {
            match self.tx.room_for(len)? {
                Some(start) => break start,
                None => self.wait_room(len, deadline)?,
            }
        };
        Ok(self.tx.grant_at(start, len, kind))
    }

    #[inline]
    fn wait_room(&mut self, len: usize, deadline: Option<Instant>) -> Result<()> {
        let tx = &mut self.tx;
        let peer = &mut self.peer;
        let cell = tx.space_cell() as *const _;
        // SAFETY: the cell lives in the mapping, not in `tx`, so the reference stays valid while
        // `tx` is borrowed mutably by the closure below.
        let cell = unsafe { &*cell };
        wait::wait_until(
            self.wait,
            cell,
            deadline,
            // A corrupt index makes `has_room` fail; report "ready" so the caller's reserve
            // returns that error.
            || tx.has_room(len).unwrap_or(true),
            || peer.check(),
        )
    }

    /// Sends one message, waiting for room.
    ///
    /// A message up to [`max_frame`](Channel::max_frame) bytes is one frame; a larger one, up to
    /// [`max_message`](Channel::max_message), is streamed in fragments as the peer reads them.
    /// Fails with [`Error::TooLarge`] past `max_message` (before anything is written),
    /// [`Error::Disconnected`] once the peer closed, and [`Error::PeerGone`] if the peer died
    /// while we waited for room.
    #[inline]
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.send_deadline(bytes, None)
    }

    /// Sends one frame if there is room now ([`Error::Full`] if not). Never fragments.
    #[inline]
    pub fn try_send(&mut self, bytes: &[u8]) -> Result<()> {
        self.send_allowed()?;
        self.tx.try_send(bytes)
    }

    /// Like [`send`](Channel::send), giving up with [`Error::Timeout`] after `timeout`. A
    /// fragmented message that times out part-way leaves the channel unusable for sending.
    pub fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<()> {
        self.send_deadline(bytes, Some(Instant::now() + timeout))
    }

    #[inline]
    fn send_deadline(&mut self, bytes: &[u8], deadline: Option<Instant>) -> Result<()> {
        if bytes.len() <= self.tx.max_len() {
            let mut grant = self.reserve_kind(bytes.len(), kind::DATA, deadline)?;
            grant.copy_from_slice(bytes);
            grant.commit(bytes.len());
            Ok(())
        } else {
            self.send_fragments(bytes, deadline)
        }
    }

    #[inline(never)]
    fn send_fragments(&mut self, bytes: &[u8], deadline: Option<Instant>) -> Result<()> {
        if bytes.len() > self.max_message {
            return Err(Error::TooLarge {
                len: bytes.len(),
                max: self.max_message,
            });
        }
        let chunk = self.tx.max_len();
        let mut grant = self.reserve_kind(chunk, kind::FRAG_FIRST, deadline)?;
        let (total, rest) = grant.split_at_mut(8);
        total.copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        let mut sent = rest.len();
        rest.copy_from_slice(&bytes[..sent]);
        grant.commit(chunk);
        while sent < bytes.len() {
            let n = chunk.min(bytes.len() - sent);
            let kind = if sent + n == bytes.len() {
                kind::FRAG_LAST
            } else {
                kind::FRAG_MORE
            };
            let mut grant = self.reserve_kind(n, kind, deadline)?;
            grant.copy_from_slice(&bytes[sent..sent + n]);
            grant.commit(n);
            sent += n;
        }
        Ok(())
    }

    /// Serialises `value` as JSON straight into the ring: no intermediate buffer.
    ///
    /// The frame is reserved at a size learnt from earlier messages; if the value does not fit,
    /// the grant is dropped and a larger one reserved. Values larger than
    /// [`max_frame`](Channel::max_frame) fail with [`Error::TooLarge`].
    pub fn send_json<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let max = self.tx.max_len();
        let mut want = self.json_hint.min(max);
        loop {
            let mut grant = self.reserve(want)?;
            let mut out = SliceWriter::new(&mut grant);
            match serde_json::to_writer(&mut out, value) {
                Ok(()) => {
                    let used = out.written();
                    grant.commit(used);
                    if used * 2 > self.json_hint {
                        self.json_hint = (used * 2).next_power_of_two().min(max);
                    }
                    return Ok(());
                }
                Err(e) if e.is_io() => {
                    drop(grant);
                    if want >= max {
                        return self.send_json_large(value);
                    }
                    want = (want * 4).min(max);
                    self.json_hint = want;
                }
                Err(e) => return Err(Error::Json(e)),
            }
        }
    }

    #[inline(never)]
    fn send_json_large<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let result = serde_json::to_writer(&mut buf, value)
            .map_err(Error::from)
            .and_then(|()| self.send(&buf));
        self.scratch = buf;
        result
    }
}

/// The receiving half of a [`Channel`], from [`Channel::split`].
pub struct RecvHalf {
    rx: Consumer,
    peer: PeerWatch,
    wait: WaitStrategy,
    /// Largest message reassembled from fragments.
    max_message: usize,
    /// Reassembly buffer for fragmented messages, kept between messages.
    assembly: Vec<u8>,
    /// Total length of the fragmented message being reassembled, if one is under way.
    assembling: Option<usize>,
}

impl RecvHalf {
    /// Largest message [`recv`](Channel::recv) reassembles.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Sets the largest message this half reassembles; a longer announced length is
    /// [`Error::Corrupt`].
    pub fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
    }

    /// Receives the next frame, waiting for it. The frame stays in the ring until the guard
    /// drops.
    ///
    /// Fails with [`Error::Disconnected`] once the peer closed and everything it sent was
    /// received, [`Error::PeerGone`] within a few milliseconds of the peer process dying, and
    /// [`Error::Corrupt`] if the ring holds an invalid frame.
    #[inline]
    pub fn recv(&mut self) -> Result<ReadGuard<'_>> {
        self.recv_deadline(None)
    }

    /// Like [`recv`](Channel::recv), giving up with [`Error::Timeout`] after `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<ReadGuard<'_>> {
        self.recv_deadline(Some(Instant::now() + timeout))
    }

    /// Receives the next frame if one is there: [`Error::Empty`] if not, [`Error::Disconnected`]
    /// or [`Error::PeerGone`] if none will come.
    /// A fragmented message is returned once its last fragment is there.
    #[inline]
    pub fn try_recv(&mut self) -> Result<ReadGuard<'_>> {
        self.next_message(None)
    }

    #[inline]
    fn recv_deadline(&mut self, deadline: Option<Instant>) -> Result<ReadGuard<'_>> {
        self.next_message(Some(deadline))
    }

    /// The next whole message. `wait`: `None` to return [`Error::Empty`] at once (after a
    /// throttled look at the peer), `Some(deadline)` to wait for it.
    #[inline]
    fn next_message(&mut self, wait: Option<Option<Instant>>) -> Result<ReadGuard<'_>> {
        loop {
            match self.rx.next_frame() {
                Ok(frame) if frame.kind() == kind::DATA && self.assembling.is_none() => {
                    return Ok(self.rx.guard(frame))
                }
                Ok(frame) => {
                    if self.absorb_fragment(frame)? {
                        return Ok(ReadGuard::assembled(&self.assembly));
                    }
                }
                Err(Error::Empty) => match wait {
                    Some(deadline) => self.wait_data(deadline)?,
                    None => {
                        self.peer.check_throttled()?;
                        return Err(Error::Empty);
                    }
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// Copies a fragment into the reassembly buffer; true once the message is complete.
    #[inline(never)]
    fn absorb_fragment(&mut self, frame: Frame) -> Result<bool> {
        let guard = self.rx.guard(frame);
        let result = match (self.assembling, guard.kind()) {
            (None, kind::FRAG_FIRST) => match guard.get(..8) {
                Some(prefix) => {
                    let mut total = [0u8; 8];
                    total.copy_from_slice(prefix);
                    let total = u64::from_le_bytes(total);
                    let body = &guard[8..];
                    match usize::try_from(total) {
                        Ok(t) if t <= self.max_message && body.len() <= t => {
                            self.assembly.clear();
                            self.assembly.reserve(t);
                            self.assembly.extend_from_slice(body);
                            self.assembling = Some(t);
                            Ok(false)
                        }
                        _ => Err(format!(
                            "fragmented message of {total} bytes (limit {})",
                            self.max_message
                        )),
                    }
                }
                None => Err("first fragment shorter than its length prefix".to_owned()),
            },
            (Some(total), k @ (kind::FRAG_MORE | kind::FRAG_LAST)) => {
                if self.assembly.len() + guard.len() > total {
                    Err(format!("fragments exceed the announced {total} bytes"))
                } else {
                    self.assembly.extend_from_slice(&guard);
                    if k == kind::FRAG_MORE {
                        Ok(false)
                    } else if self.assembly.len() == total {
                        self.assembling = None;
                        Ok(true)
                    } else {
                        Err(format!(
                            "message ended at {} of the announced {total} bytes",
                            self.assembly.len()
                        ))
                    }
                }
            }
            (state, k) => Err(format!(
                "frame kind {k} out of sequence (reassembling: {})",
                state.is_some()
            )),
        };
        drop(guard);
        result.map_err(|what| {
            self.assembling = None;
            Error::Corrupt(what)
        })
    }

    /// Receives one message (of any size) and copies it into `buf`, replacing its contents.
    /// Returns the length. `buf` keeps its capacity, so a caller that reuses it allocates only
    /// when a message is larger than any before.
    ///
    /// A message that arrived in fragments is handed over without a further copy: `buf` and the
    /// reassembly buffer trade places, and the channel keeps `buf`'s old allocation for the next
    /// one.
    pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        let msg = self.recv()?;
        if !msg.is_assembled() {
            buf.clear();
            buf.extend_from_slice(&msg);
            return Ok(buf.len());
        }
        drop(msg);
        std::mem::swap(buf, &mut self.assembly);
        Ok(buf.len())
    }

    #[inline]
    fn wait_data(&mut self, deadline: Option<Instant>) -> Result<()> {
        let rx = &self.rx;
        let peer = &mut self.peer;
        let result = wait::wait_until(
            self.wait,
            rx.data_cell(),
            deadline,
            || rx.has_data(),
            || peer.check(),
        );
        match result {
            Err(e @ (Error::Disconnected | Error::PeerGone { .. })) => {
                // Frames published before the close are visible now (Acquire in `state`).
                if rx.has_data() {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    /// Receives one frame and decodes it as JSON into an owned value. To borrow `&str` fields
    /// from the frame instead, use [`recv`](Channel::recv) and [`ReadGuard::json`].
    pub fn recv_json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        let guard = self.recv()?;
        guard.json()
    }
}

// SAFETY: the halves hold pointers into the channel's mapping, which outlives them (they are
// only handed out as borrows of the channel); all shared access goes through atomics and the
// frame protocol, and each half is the only user of its ring end.
unsafe impl Send for SendHalf {}
// SAFETY: as for `SendHalf`.
unsafe impl Send for RecvHalf {}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: `me` points into `self.map`, still alive.
        let me = unsafe { self.me.as_ref() };
        // Release: pairs with the Acquire in the peer's `PeerWatch::state`: every frame we
        // published is visible to a peer that sees the close.
        me.state.store(PEER_CLOSED, Ordering::Release);
        // Wake a peer that sleeps waiting for data from us or for room in our inbound ring.
        wait::wake(self.sender.tx.data_cell());
        wait::wake(self.receiver.rx.space_cell());
    }
}

/// `io::Write` into a fixed slice, failing with `WriteZero` once it is full: what
/// [`Channel::send_json`] gives serde_json over a write grant, public so that the same work can
/// be measured or reused outside a ring.
///
/// ```
/// let mut buf = [0u8; 64];
/// let mut out = shmlink::testing::SliceWriter::new(&mut buf);
/// serde_json::to_writer(&mut out, &[1, 2, 3]).unwrap();
/// assert_eq!(out.written(), 7);
/// ```
pub struct SliceWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> SliceWriter<'a> {
    /// A writer at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceWriter { buf, pos: 0 }
    }

    /// Bytes written so far.
    #[inline]
    pub fn written(&self) -> usize {
        self.pos
    }
}

impl std::io::Write for SliceWriter<'_> {
    #[inline]
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    #[inline]
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        let end = self.pos + data.len();
        match self.buf.get_mut(self.pos..end) {
            Some(dst) => {
                dst.copy_from_slice(data);
                self.pos = end;
                Ok(())
            }
            None => Err(std::io::ErrorKind::WriteZero.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn unique(tag: &str) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        format!(
            "ut-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn small(wait: WaitStrategy) -> Config {
        Config {
            capacity: 4096,
            wait,
        }
    }

    fn shm_path(name: &str) -> std::path::PathBuf {
        Path::new("/dev/shm").join(format!("shmlink-{name}"))
    }

    #[test]
    fn both_directions_and_cleanup() {
        let name = unique("both");
        {
            let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
            let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
            assert_eq!(a.role(), Role::Creator);
            assert_eq!(b.role(), Role::Connector);
            a.send(b"to b").unwrap();
            b.send(b"to a").unwrap();
            assert_eq!(&*b.recv().unwrap(), b"to b");
            assert_eq!(&*a.recv().unwrap(), b"to a");
            assert!(a.is_peer_connected());
            assert_eq!(b.peer_pid(), Some(std::process::id()));
            if Path::new("/dev/shm").is_dir() {
                let mode = std::fs::metadata(shm_path(&name)).unwrap().permissions();
                use std::os::unix::fs::PermissionsExt;
                assert_eq!(mode.mode() & 0o777, 0o600);
            }
        }
        assert!(matches!(
            Channel::connect(&name, WaitStrategy::Spin),
            Err(Error::NotFound(_))
        ));
        assert!(!shm_path(&name).exists());
    }

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Ping<'a> {
        sender_id: &'a str,
        receiver_id: &'a str,
        sent_at_ms: u64,
    }

    #[test]
    fn json_in_place_with_borrowed_fields() {
        let name = unique("json");
        let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
        let mut b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
        let ping = Ping {
            sender_id: "11111111-2222-3333-4444-555555555555",
            receiver_id: "66666666-7777-8888-9999-000000000000",
            sent_at_ms: 1_764_000_000_000,
        };
        for _ in 0..1000 {
            a.send_json(&ping).unwrap();
            let frame = b.recv().unwrap();
            let got: Ping<'_> = frame.json().unwrap();
            assert_eq!(got, ping);
        }
        // A value larger than one frame goes out in fragments and comes back whole.
        let big: Vec<u32> = (0..5000).collect();
        let expected = big.clone();
        let sender = std::thread::spawn(move || {
            a.send_json(&big).unwrap();
            a
        });
        let back: Vec<u32> = b.recv_json().unwrap();
        assert_eq!(back, expected);
        let mut a = sender.join().unwrap();
        // Invalid JSON is a typed error, not a panic.
        a.send(b"{not json").unwrap();
        assert!(matches!(b.recv_json::<Vec<u32>>(), Err(Error::Json(_))));
    }

    #[test]
    fn connect_errors_are_typed() {
        let name = unique("errs");
        assert!(matches!(
            Channel::connect(&name, WaitStrategy::Spin),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            Channel::connect_timeout(&name, WaitStrategy::Spin, Duration::from_millis(20)),
            Err(Error::Timeout)
        ));
        let _a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
        assert!(matches!(
            Channel::create(&name, &small(WaitStrategy::Spin)),
            Err(Error::AlreadyExists(_))
        ));
        let _b = Channel::connect(&name, WaitStrategy::Spin).unwrap();
        assert!(matches!(
            Channel::connect(&name, WaitStrategy::Spin),
            Err(Error::AlreadyConnected)
        ));
        for bad in ["", "../x", "a\0b"] {
            assert!(matches!(
                Channel::create(bad, &Config::default()),
                Err(Error::InvalidName { .. })
            ));
        }
        assert!(matches!(
            Channel::create(
                &unique("cap"),
                &Config {
                    capacity: 1000,
                    ..Config::default()
                }
            ),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn close_is_seen_after_the_last_frame() {
        let name = unique("close");
        let mut a = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
        let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
        for i in 0..3u8 {
            a.send(&[i; 10]).unwrap();
        }
        drop(a);
        for i in 0..3u8 {
            assert_eq!(&*b.recv_timeout(Duration::from_secs(10)).unwrap(), &[i; 10]);
        }
        assert!(matches!(
            b.recv_timeout(Duration::from_secs(10)),
            Err(Error::Disconnected)
        ));
        assert!(matches!(b.try_recv(), Err(Error::Disconnected)));
        assert!(matches!(b.send(b"x"), Err(Error::Disconnected)));
    }

    #[test]
    fn empty_and_timeout() {
        let name = unique("empty");
        let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
        let _b = Channel::connect(&name, WaitStrategy::Block).unwrap();
        assert!(matches!(a.try_recv(), Err(Error::Empty)));
        for wait in WaitStrategy::ALL {
            a.receiver.wait = wait;
            assert!(matches!(
                a.recv_timeout(Duration::from_millis(30)),
                Err(Error::Timeout)
            ));
        }
    }

    #[test]
    fn fragmented_messages_of_every_interesting_size() {
        let name = unique("frag");
        let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
        let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
        let max = a.max_frame();
        let sizes = [0, 1, max - 1, max, max + 1, 4096 * 7 / 2, 100_000];
        let sender = std::thread::spawn(move || {
            for (i, &n) in sizes.iter().enumerate() {
                let data: Vec<u8> = (0..n).map(|j| (i * 7 + j * 13) as u8).collect();
                a.send(&data).unwrap();
            }
            a
        });
        let mut buf = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(b.recv_into(&mut buf).unwrap(), n);
            assert!(buf
                .iter()
                .enumerate()
                .all(|(j, &x)| x == (i * 7 + j * 13) as u8));
        }
        let mut a = sender.join().unwrap();
        a.set_max_message(10_000);
        assert!(matches!(
            a.send(&vec![0; 10_001]),
            Err(Error::TooLarge {
                len: 10_001,
                max: 10_000
            })
        ));
        // Nothing of the refused message was written.
        assert!(matches!(b.try_recv(), Err(Error::Empty)));
    }

    #[test]
    fn split_halves_stream_large_messages_both_ways_at_once() {
        let name = unique("split");
        let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
        let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
        let big = |seed: u8| -> Vec<u8> { (0..50_000).map(|i| (i as u8) ^ seed).collect() };
        // Each end sends messages 12x the ring while the other does the same: with one thread
        // per end this would deadlock; with split halves each end keeps receiving.
        let run = |ch: &mut Channel, seed: u8, other: u8| {
            let (tx, rx) = ch.split();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..5 {
                        tx.send_timeout(&big(seed), Duration::from_secs(20))
                            .unwrap();
                    }
                });
                let mut buf = Vec::new();
                for _ in 0..5 {
                    let msg = rx.recv_timeout(Duration::from_secs(20)).unwrap();
                    buf.clear();
                    buf.extend_from_slice(&msg);
                    assert_eq!(buf, big(other));
                }
            });
        };
        std::thread::scope(|s| {
            s.spawn(|| run(&mut a, 1, 2));
            s.spawn(|| run(&mut b, 2, 1));
        });
    }

    #[test]
    fn block_ping_pong_between_threads() {
        let name = unique("block");
        let mut a = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
        let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();
        let n = 20_000u32;
        let echo = std::thread::spawn(move || {
            for _ in 0..n {
                let v = u32::from_le_bytes(
                    b.recv_timeout(Duration::from_secs(10)).unwrap()[..4]
                        .try_into()
                        .unwrap(),
                );
                b.send(&(v + 1).to_le_bytes()).unwrap();
            }
        });
        for i in 0..n {
            a.send(&i.to_le_bytes()).unwrap();
            let r = a.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(u32::from_le_bytes(r[..4].try_into().unwrap()), i + 1);
        }
        echo.join().unwrap();
    }

    /// Writes a header by hand and expects `connect` to refuse it with the right error.
    fn connect_to_forged(edit: impl FnOnce(&SegmentHeader)) -> Error {
        let name = unique("forged");
        let mut map = Mapping::create_named(&name, segment_size(4096)).unwrap();
        {
            let hdr = segment(&map);
            hdr.magic.store(MAGIC, Ordering::Relaxed);
            hdr.version.store(LAYOUT_VERSION, Ordering::Relaxed);
            hdr.header_size.store(HEADER_SIZE as u32, Ordering::Relaxed);
            hdr.capacity.store(4096, Ordering::Relaxed);
            hdr.total_size
                .store(segment_size(4096) as u64, Ordering::Relaxed);
            hdr.creator.pid.store(std::process::id(), Ordering::Relaxed);
            hdr.creator.state.store(PEER_PRESENT, Ordering::Relaxed);
            hdr.ready.store(READY, Ordering::Release);
            edit(hdr);
        }
        let err = Channel::connect(&name, WaitStrategy::Spin).unwrap_err();
        map.set_owner(true);
        err
    }

    #[test]
    fn hostile_headers_are_refused() {
        assert!(matches!(
            connect_to_forged(|h| h.magic.store(0xdead_beef, Ordering::Relaxed)),
            Error::BadMagic(0xdead_beef)
        ));
        assert!(matches!(
            connect_to_forged(|h| h.version.store(99, Ordering::Relaxed)),
            Error::VersionMismatch { found: 99, .. }
        ));
        assert!(matches!(
            connect_to_forged(|h| h.capacity.store(1 << 20, Ordering::Relaxed)),
            Error::SizeMismatch(_)
        ));
        assert!(matches!(
            connect_to_forged(|h| h.capacity.store(3000, Ordering::Relaxed)),
            Error::SizeMismatch(_)
        ));
        assert!(matches!(
            connect_to_forged(|h| h.total_size.store(u64::MAX, Ordering::Relaxed)),
            Error::SizeMismatch(_)
        ));
        assert!(matches!(
            connect_to_forged(|h| h.header_size.store(8, Ordering::Relaxed)),
            Error::SizeMismatch(_)
        ));
        assert!(matches!(
            connect_to_forged(|h| h.ready.store(0, Ordering::Relaxed)),
            Error::NotReady(_)
        ));
        assert!(matches!(
            connect_to_forged(|h| h.connector.state.store(PEER_PRESENT, Ordering::Relaxed)),
            Error::AlreadyConnected
        ));
        // Indices that disagree with each other.
        assert!(matches!(
            connect_to_forged(|h| {
                let ring0 = (h as *const SegmentHeader as *const u8).wrapping_add(RINGS_OFFSET)
                    as *const RingHeader;
                // SAFETY: the ring headers lie inside the mapping at RINGS_OFFSET.
                unsafe { &*ring0 }.head.store(64, Ordering::Relaxed);
            }),
            Error::Corrupt(_)
        ));
    }

    #[test]
    fn a_dead_creator_is_reclaimed_and_a_live_one_is_not() {
        let name = unique("stale");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = ProcessId {
            pid: child.id(),
            start_time: crate::process::start_time(child.id()).unwrap_or(0),
        };
        child.wait().unwrap();
        let mut map = Mapping::create_named(&name, segment_size(4096)).unwrap();
        map.set_owner(false);
        {
            let hdr = segment(&map);
            hdr.magic.store(MAGIC, Ordering::Relaxed);
            hdr.creator.pid.store(dead.pid, Ordering::Relaxed);
            hdr.creator
                .start_time
                .store(dead.start_time, Ordering::Relaxed);
            hdr.creator.state.store(PEER_PRESENT, Ordering::Relaxed);
            hdr.ready.store(READY, Ordering::Release);
        }
        // A dead creator also no longer holds its creator lock: let go of the segment (without
        // removing its name) like a process that died.
        drop(map);
        let fresh = Channel::create(&name, &small(WaitStrategy::Spin)).unwrap();
        assert!(matches!(
            Channel::create(&name, &small(WaitStrategy::Spin)),
            Err(Error::AlreadyExists(_))
        ));
        drop(fresh);
        assert!(!shm_path(&name).exists());
    }

    #[test]
    fn file_backed_channels() {
        let dir = std::env::temp_dir().join(unique("file"));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ring");
        {
            let mut a = Channel::create_at(&path, &small(WaitStrategy::Spin)).unwrap();
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
            let mut b = Channel::connect_at(&path, WaitStrategy::Spin).unwrap();
            a.send(b"via a file").unwrap();
            assert_eq!(&*b.recv().unwrap(), b"via a file");
        }
        assert!(!path.exists());
        std::fs::remove_dir(&dir).unwrap();
    }
}
