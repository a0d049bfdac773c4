//! Making a channel: create a mapping or connect to one, claim an end, assemble the halves.

use crate::error::{ChannelName, OpenError};
use crate::shm::layout::counters::{Counters, COUNTERS_OFFSET};
use crate::shm::layout::{
    check_capacity, segment_size, RingHeader, CELL_ALIGN, CONNECTOR_LOCK, CREATOR_LOCK,
    HEADER_SIZE, LAYOUT_VERSION, MAGIC, PEER_ABSENT, PEER_CLAIMING, PEER_PRESENT, READY,
    RINGS_OFFSET,
};
use crate::shm::mapping::{self, Mapping};
use crate::shm::ring::{Consumer, Producer, RingPtrs};
use crate::sys::{lock, ProcessId};
use crate::wait::{WaitStrategy, Waiter};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::*;

type Result<T, E = OpenError> = std::result::Result<T, E>;

impl Channel {
    /// Creates the channel `name` (a mapping named `/shmlink-<name>`, mode 0600) and becomes
    /// its creator. The name is removed again when the channel drops.
    ///
    /// The name follows the one rule for every name ([`OpenError::InvalidName`] if not): at most
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes of ASCII letters, digits, `.`, `_` and `-`,
    /// not starting with `.` or `-`. If a channel or listener with that name exists and its
    /// creator process is gone, the stale mapping is removed and replaced; if the creator is
    /// alive, this fails with [`OpenError::AlreadyExists`]. An entry under the name that is not a
    /// channel at all (a directory, a link, a FIFO, a file without the shmlink magic) is left
    /// alone: [`OpenError::NotAChannel`], saying what it is.
    ///
    /// ```
    /// use shmlink::{Channel, Config, OpenError};
    /// # let name = format!("doc-create-{}", std::process::id());
    /// let channel = Channel::create(&name, &Config::default())?;
    /// assert_eq!(channel.name(), name);
    /// let again = Channel::create(&name, &Config::default());
    /// assert!(matches!(again, Err(OpenError::AlreadyExists { channel: n }) if n == name));
    /// # Ok::<(), shmlink::Error>(())
    /// ```
    pub fn create(name: &str, config: &Config) -> Result<Channel> {
        mapping::validate_name(name)?;
        Self::create_for_listener(name, config)
    }

    /// [`create`](Channel::create) without the length limit on user-chosen names: for a
    /// listener's connection (`<listener>.<pid>.<seq>`).
    pub(crate) fn create_for_listener(name: &str, config: &Config) -> Result<Channel> {
        check_capacity(name, config.capacity)?;
        let size = segment_size(config.capacity);
        let map = match Mapping::create_named(name, size) {
            Err(OpenError::AlreadyExists { .. })
                if crate::shm::segments::reclaim_if_dead(name)? =>
            {
                Mapping::create_named(name, size)?
            }
            other => other?,
        };
        Self::init_creator(map, name.into(), config)
    }

    /// Like [`create`](Channel::create), backed by a new file at `path` (for example on a tmpfs
    /// or hugetlbfs mount). The file is created exclusively with mode 0600 and removed on drop.
    pub fn create_at(path: &Path, config: &Config) -> Result<Channel> {
        check_capacity(&path.display().to_string(), config.capacity)?;
        let map = Mapping::create_file(path, segment_size(config.capacity))?;
        Self::init_creator(map, path.display().to_string().into(), config)
    }

    fn init_creator(map: Mapping, name: ChannelName, config: &Config) -> Result<Channel> {
        let hdr = segment(&map);
        let me = ProcessId::current();
        // Relaxed stores: all published by the Release store of `ready` below, which openers
        // read with Acquire before anything else.
        hdr.write_fixed(
            MAGIC,
            LAYOUT_VERSION,
            config.capacity,
            segment_size(config.capacity),
        );
        hdr.write_layout();
        let info = &hdr.creator;
        info.record(me, mode_of(config.wait));
        info.max_message
            .store(DEFAULT_MAX_MESSAGE as u64, Ordering::Relaxed);
        info.state.store(PEER_PRESENT, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `ready` in `connect_at_mapping`: publishes
        // every field above.
        hdr.ready.store(READY, Ordering::Release);
        Self::assemble(map, name, config.capacity, Role::Creator, config.wait)
    }

    /// Connects to the channel `name` (not a listener) whose rings hold at most `max_capacity`
    /// bytes each: how a listener's server reaches the channel a client made for it
    /// (`<listener>.<pid>.<seq>`, longer than user-chosen names), whose size the client chose. A
    /// larger one is refused ([`OpenError::SizeMismatch`], naming it) before it is mapped.
    pub(crate) fn connect_channel(
        name: &str,
        wait: WaitStrategy,
        max_capacity: usize,
    ) -> Result<Channel> {
        let map = Mapping::open_named_within(name, segment_size(max_capacity))?;
        let magic = peek_magic(&map);
        // `validate` checks that the header's total size, two rings of its capacity, fits the
        // mapping: the capacity is at most `max_capacity`.
        Self::connect_mapping(map, name.into(), wait, magic)
    }

    /// Connects to a channel backed by the file at `path` (see [`create_at`](Channel::create_at)).
    pub fn connect_at(path: &Path, wait: WaitStrategy) -> Result<Channel> {
        let map = Mapping::open_file(path)?;
        let magic = peek_magic(&map);
        Self::connect_mapping(map, path.display().to_string().into(), wait, magic)
    }

    /// Connects to the channel in `map`, whose first word read `magic` (read once, by the
    /// caller, which chose this path by it).
    pub(crate) fn connect_mapping(
        map: Mapping,
        name: ChannelName,
        wait: WaitStrategy,
        magic: u64,
    ) -> Result<Channel> {
        if map.len() < HEADER_SIZE {
            return Err(OpenError::size_mismatch(
                &name,
                format!(
                    "mapping of {} bytes is smaller than the {HEADER_SIZE}-byte header",
                    map.len()
                ),
            ));
        }
        let hdr = segment(&map);
        // Acquire: pairs with the Release store of `ready` in `init_creator`.
        let ready = hdr.ready.load(Ordering::Acquire);
        // The caller read the magic before `ready`: a 0 there may be a creator that had not
        // written it yet (it writes it before `ready`), so it is not ready for us either.
        if ready != READY || magic == 0 {
            // A mapping that does not even carry our magic is not ours at all.
            if magic != 0 && magic != MAGIC {
                return Err(OpenError::BadMagic {
                    channel: name,
                    magic,
                });
            }
            return Err(OpenError::NotReady { channel: name });
        }
        let capacity = hdr.validate(magic, map.len(), &name)?;
        let info = &hdr.connector;
        // Read before claiming: nothing to do with the slot.
        let me = ProcessId::current();
        // Acquire: pairs with the Release store of a previous holder's state.
        let seen = info.state.load(Ordering::Acquire);
        match seen {
            PEER_ABSENT | PEER_CLAIMING => {}
            // Held, or held by a connector that closed or died since: a channel serves one
            // connection (its rings may still hold that connection's frames).
            PEER_PRESENT | PEER_CLOSED => {
                return Err(OpenError::AlreadyConnected { channel: name })
            }
            other => {
                return Err(OpenError::corrupt(
                    &name,
                    format!("connector state {other:#x} is unknown"),
                ))
            }
        }
        // The claim is the connector's lock: held by another open of the object means another
        // connector holds (or is claiming) the end. It stays ours until this mapping's
        // descriptor closes, which the kernel does if we die, so a claimer that dies before it
        // is present leaves a slot the next connector can take.
        if !lock::take(map.file(), CONNECTOR_LOCK, false)? {
            return Err(OpenError::AlreadyConnected { channel: name });
        }
        // Holding the lock, we are the only connector that writes the slot. ABSENT, or CLAIMING
        // left by a claimer that died; anything else means the slot changed under us.
        // Acquire on success: pairs with the Release of a previous holder (none for a fresh
        // channel).
        if info
            .state
            .compare_exchange(seen, PEER_CLAIMING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(OpenError::AlreadyConnected { channel: name });
        }
        #[cfg(feature = "test-hooks")]
        crate::hooks::stop_point(crate::hooks::StopPoint::ConnectClaimed);
        info.record(me, mode_of(wait));
        info.max_message
            .store(DEFAULT_MAX_MESSAGE as u64, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `PeerWatch::state` on the creator's side.
        info.state.store(PEER_PRESENT, Ordering::Release);
        Self::assemble(map, name, capacity, Role::Connector, wait)
    }

    fn assemble(
        mut map: Mapping,
        name: ChannelName,
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
        let peer_mode = NonNull::from(&unsafe { peer.as_ref() }.wait_mode);
        // Ring `i`'s sender counts in the counters' cell `2 i`, its receiver in `2 i + 1`.
        let ring = |i: usize, receiver: bool| {
            // SAFETY: the two ring headers sit at RINGS_OFFSET inside the header page, the
            // four counters (128 bytes apart) at COUNTERS_OFFSET, and the two regions after it; `validate` (or our own sizing) checked that the
            // mapping holds HEADER_SIZE + 2 * capacity bytes. The mapping is page-aligned, so
            // both are aligned for their types.
            unsafe {
                let header = NonNull::new_unchecked(
                    base.as_ptr()
                        .add(RINGS_OFFSET + i * std::mem::size_of::<RingHeader>())
                        as *mut RingHeader,
                );
                RingPtrs {
                    header,
                    head: NonNull::from(&*header.as_ref().head),
                    data_cell: NonNull::from(&*header.as_ref().data_wait),
                    region: NonNull::new_unchecked(base.as_ptr().add(HEADER_SIZE + i * capacity)),
                    capacity,
                    peer_mode,
                    counters: NonNull::new_unchecked(
                        base.as_ptr()
                            .add(COUNTERS_OFFSET + (2 * i + receiver as usize) * CELL_ALIGN)
                            .cast::<Counters>(),
                    ),
                }
            }
        };
        let (tx_ring, rx_ring) = match role {
            Role::Creator => (ring(0, false), ring(1, true)),
            Role::Connector => (ring(1, false), ring(0, true)),
        };
        // SAFETY: the rings live in `map`, which moves into the `Shared` that both halves hold
        // alongside these ends (or is dropped right here, together with them, on failure); the
        // role split gives each ring exactly one producer and one consumer per channel.
        let built = unsafe { Producer::new(tx_ring, None, name.clone()) }
            .and_then(|tx| Ok((tx, unsafe { Consumer::new(rx_ring, None, name.clone()) }?)));
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
        let peer_lock = match role {
            Role::Creator => CONNECTOR_LOCK,
            Role::Connector => CREATOR_LOCK,
        };
        let peer = PeerWatch::new(peer, map.file().as_raw_fd(), peer_lock, name.clone());
        let shared = Arc::new(Shared {
            me,
            out_data: NonNull::from(tx.data_cell()),
            in_space: NonNull::from(rx.space_cell()),
            name,
            _map: map,
        });
        Ok(Channel {
            sender: SendHalf {
                tx,
                peer: peer.clone(),
                wait: Waiter::new(wait),
                json_hint: 256,
                max_message: DEFAULT_MAX_MESSAGE,
                scratch: Vec::new(),
                unfinished: false,
                shared: shared.clone(),
            },
            receiver: RecvHalf {
                rx,
                peer,
                wait: Waiter::new(wait),
                max_message: DEFAULT_MAX_MESSAGE,
                assembly: Vec::new(),
                assembling: super::recv::Assembling::Idle,
                overtaken: None,
                shared,
            },
            wait,
            role,
        })
    }
}

/// The first word of a mapping, read once: what kind of object it is (a channel, a listener,
/// one not made yet, or none of ours). A mapping too small to hold it reads as 0.
pub(crate) fn peek_magic(map: &Mapping) -> u64 {
    if map.len() < HEADER_SIZE {
        return 0;
    }
    // Relaxed: only compared; a creator publishes its header with `ready`, which the path
    // chosen by this value reads with Acquire before it trusts anything.
    segment(map).magic.load(Ordering::Relaxed)
}

impl RecvHalf {
    /// The receiving half of a reader of a ring with many readers (a topic's subscriber), as
    /// `reader` describes it, waiting with `wait`.
    ///
    /// # Safety
    /// Every pointer of `reader` must point into `map`; this half must be the only consumer
    /// of the cursor in `reader.ptrs`.
    pub(crate) unsafe fn reader_of_many(
        map: Mapping,
        name: ChannelName,
        reader: super::recv::Reader,
        wait: WaitStrategy,
    ) -> Result<RecvHalf> {
        // SAFETY: per the contract: the ring lives in `map`, which moves into the `Shared`
        // this half holds (or drops right here with the consumer on failure).
        let rx = unsafe { Consumer::new(reader.ptrs, None, name.clone()) }?;
        let peer = PeerWatch::new(
            reader.writer,
            map.file().as_raw_fd(),
            reader.writer_lock,
            name.clone(),
        );
        let shared = Arc::new(Shared {
            me: reader.me,
            out_data: NonNull::from(rx.data_cell()),
            in_space: NonNull::from(rx.space_cell()),
            name,
            _map: map,
        });
        Ok(RecvHalf {
            rx,
            peer,
            wait: Waiter::new(wait),
            max_message: DEFAULT_MAX_MESSAGE,
            assembly: Vec::new(),
            assembling: super::recv::Assembling::Idle,
            overtaken: Some(reader.overtaken),
            shared,
        })
    }
}
