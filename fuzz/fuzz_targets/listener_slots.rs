//! A real listener whose slot table (and header) takes bytes chosen by the fuzzer while its
//! server accepts and clients connect, as any process of the user can write them: slot words of
//! every state and pid, connection numbers, start times and accepted counters, slot locks held
//! by a "client" that does nothing more, clients' channels made by hand (of any capacity, under
//! names a forged slot points at), the header's capacity, slot count and doorbell.
//!
//! The server (`try_accept`, `accept_timeout`) and honest clients (`connect_timeout` on threads
//! of their own) run in between. Every outcome must be a typed error or a valid connection: a
//! connection of the listener's name, with rings no larger than the listener's, whose client, if
//! it is one of ours, exchanges a message with it; no two connections on one channel. A panic, a
//! crash, a hang, or a name of the listener left in `/dev/shm` once everything is dropped is a
//! finding.
#![no_main]

use std::fs::File;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::ScopedJoinHandle;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use shmlink::testing::SegmentHeader;
use shmlink::testing::{
    sweep_on_next_accept, take_listener_slot_lock, LISTENER_HEADER_OFFSET, LISTENER_SLOTS_OFFSET,
    LISTENER_SLOT_ACCEPTED, LISTENER_SLOT_PENDING, LISTENER_SLOT_SEQ, LISTENER_SLOT_SIZE,
    LISTENER_SLOT_START_TIME, OS_PREFIX,
};
use shmlink::{Channel, Config, Connection, Listener, OpenError, WaitStrategy};

/// The listener's ring capacity.
const CAP: usize = 1024;
/// Where the capacity honest clients read is in the listener's header.
const CAPACITY_AT: usize = std::mem::offset_of!(SegmentHeader, capacity);
/// How long an honest client waits to be accepted.
const CLIENT_WAIT: Duration = Duration::from_millis(100);
/// Most honest clients and channels made by hand in one case.
const MOST: usize = 8;
static CASE: AtomicU64 = AtomicU64::new(0);

/// The fuzzer's view of the listener's mapping: words it stores atomically, as the library
/// reads them.
struct View {
    map: memmap2::MmapMut,
}

impl View {
    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.map.len());
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); the library reads and
        // writes these words atomically too.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU64) }
    }

    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.map.len());
        // SAFETY: as in `u64_at`.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU32) }
    }

    fn slot(&self, i: usize, field: usize) -> usize {
        LISTENER_SLOTS_OFFSET + i * LISTENER_SLOT_SIZE + field
    }
}

/// Reads the fuzzer's bytes, running out into zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
}

/// A pid for a forged slot word: ours (so the name points at channels this process makes),
/// none, init's, a process that surely is not there, or any.
fn pid(input: &mut Input<'_>) -> u64 {
    match input.byte() % 5 {
        0 => u64::from(std::process::id()),
        1 => 0,
        2 => 1,
        3 => 0x3fff_fff0,
        _ => u64::from(input.u32()),
    }
}

/// Checks a connection the server accepted, and keeps it (or drops it at once).
fn accepted(conn: Connection, name: &str, conns: &mut Vec<Connection>, keep: bool) {
    assert!(
        conn.name().starts_with(&format!("{name}.")),
        "a connection named {}",
        conn.name()
    );
    assert!(
        conn.capacity() <= CAP,
        "a connection with rings of {} bytes, the listener's are {CAP}",
        conn.capacity()
    );
    assert!(
        conns.iter().all(|c| c.name() != conn.name()),
        "two connections on {}",
        conn.name()
    );
    if keep {
        conns.push(conn);
    }
}

fn accept_outcome(
    got: Result<Connection, OpenError>,
    name: &str,
    conns: &mut Vec<Connection>,
    keep: bool,
) {
    match got {
        Ok(conn) => accepted(conn, name, conns, keep),
        // Nothing else reaches the server's accept but what its own look at a slot's lock
        // can return.
        Err(OpenError::NoClient { .. } | OpenError::Timeout { .. } | OpenError::Io(_)) => {}
        Err(e) => panic!("accept: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let limit = usize::from(input.byte() % 4) + 1;
    let name = format!(
        "fzl-{}-{}",
        std::process::id(),
        CASE.fetch_add(1, Ordering::Relaxed)
    );
    let config = Config {
        capacity: CAP,
        wait: WaitStrategy::Spin,
    };
    let listener = Listener::bind_with_limit(&name, &config, limit).expect("bind");
    let path = format!("/dev/shm/{OS_PREFIX}{name}");
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open the listener")
    };
    // SAFETY: the listener's mapping; every access through this view is atomic.
    let view = View {
        map: unsafe { memmap2::MmapMut::map_mut(&open()) }.expect("map the listener"),
    };
    let me = u64::from(std::process::id());
    let mut conns: Vec<Connection> = Vec::new();
    // Channels made by hand for forged slots, by connection number.
    let mut made: Vec<(u64, Channel)> = Vec::new();
    // Slot locks held by a "client" that claimed and went no further.
    let mut held: Vec<File> = Vec::new();
    std::thread::scope(|s| {
        let mut clients: Vec<ScopedJoinHandle<'_, Result<Channel, OpenError>>> = Vec::new();
        while !input.0.is_empty() {
            let op = input.byte();
            let i = usize::from(input.byte()) % limit;
            match op % 12 {
                // A slot word: any state, any pid.
                0 => {
                    let word = pid(&mut input) << 32 | u64::from(input.u32());
                    view.u64_at(view.slot(i, 0)).store(word, Ordering::Release);
                }
                // A slot's state only, its pid ours.
                1 => {
                    let word = me << 32 | u64::from(input.byte() % 6);
                    view.u64_at(view.slot(i, 0)).store(word, Ordering::Release);
                }
                // A connection number, a start time, an accepted counter.
                2 => {
                    let seq = match input.byte() % 3 {
                        0 => u64::from(input.byte() % 8),
                        1 => u64::MAX - u64::from(input.byte()),
                        _ => input.u64(),
                    };
                    view.u64_at(view.slot(i, LISTENER_SLOT_SEQ))
                        .store(seq, Ordering::Relaxed);
                }
                3 => view
                    .u64_at(view.slot(i, LISTENER_SLOT_START_TIME))
                    .store(input.u64(), Ordering::Relaxed),
                4 => {
                    view.u32_at(view.slot(i, LISTENER_SLOT_ACCEPTED))
                        .fetch_add(input.u32(), Ordering::Release);
                }
                // A client's channel made by hand, of any capacity, named in slot `i` and
                // published there as pending.
                5 => {
                    let seq = u64::from(input.byte() % 8);
                    let capacity = 1usize << (8 + input.byte() % 24);
                    if made.len() < MOST && made.iter().all(|(s, _)| *s != seq) {
                        let channel = Channel::create(
                            &format!("{name}.{me}.{seq}"),
                            &Config {
                                capacity,
                                wait: WaitStrategy::Spin,
                            },
                        );
                        if let Ok(channel) = channel {
                            made.push((seq, channel));
                        }
                    }
                    view.u64_at(view.slot(i, LISTENER_SLOT_SEQ))
                        .store(seq, Ordering::Relaxed);
                    view.u64_at(view.slot(i, 0))
                        .store(me << 32 | LISTENER_SLOT_PENDING, Ordering::Release);
                }
                // A claimer that holds slot `i`'s lock and does nothing more, or lets go.
                6 => {
                    if input.byte() % 2 == 0 {
                        let file = open();
                        if take_listener_slot_lock(&file, i).unwrap_or(false) {
                            held.push(file);
                        }
                    } else {
                        held.pop();
                    }
                }
                // The listener's header: the capacity honest clients read, the slot count, the
                // doorbell.
                7 => match input.byte() % 4 {
                    0 => view.u64_at(CAPACITY_AT).store(1 << 31, Ordering::Relaxed),
                    1 => view
                        .u64_at(CAPACITY_AT)
                        .store(input.u64(), Ordering::Relaxed),
                    2 => view
                        .u32_at(LISTENER_HEADER_OFFSET)
                        .store(input.u32(), Ordering::Relaxed),
                    _ => {
                        view.u32_at(LISTENER_HEADER_OFFSET + 128)
                            .fetch_add(1, Ordering::Release);
                    }
                },
                // The server.
                8 => {
                    if input.byte() % 2 == 0 {
                        sweep_on_next_accept(&listener);
                    }
                    let keep = input.byte() % 4 != 0;
                    accept_outcome(listener.try_accept(), &name, &mut conns, keep);
                }
                9 => accept_outcome(
                    listener.accept_timeout(Duration::from_millis(1)),
                    &name,
                    &mut conns,
                    true,
                ),
                // A connection ends.
                10 => {
                    if !conns.is_empty() {
                        conns.swap_remove(i % conns.len());
                    }
                }
                // An honest client.
                _ => {
                    if clients.len() < MOST {
                        let name = &name;
                        clients.push(s.spawn(move || {
                            Channel::connect_timeout(name, WaitStrategy::Spin, CLIENT_WAIT)
                        }));
                    }
                }
            }
        }
        // The hand-made clients give up; the honest ones are served until they return.
        held.clear();
        while clients.iter().any(|c| !c.is_finished()) {
            accept_outcome(
                listener.accept_timeout(Duration::from_millis(1)),
                &name,
                &mut conns,
                true,
            );
        }
        for client in clients {
            match client.join().expect("a client thread panicked") {
                Ok(mut ch) => {
                    assert!(ch.name().starts_with(&format!("{name}.")), "{}", ch.name());
                    // Accepted, and our connection is this client's: a message goes through
                    // (unless the server's end was dropped meanwhile).
                    if let Some(conn) = conns.iter_mut().find(|c| c.name() == ch.name()) {
                        ch.try_send(b"hello").expect("send to the server");
                        let got = conn.try_recv().expect("the client's message");
                        assert_eq!(&*got, b"hello");
                    }
                }
                Err(
                    OpenError::Timeout { .. }
                    | OpenError::TooManyClients { .. }
                    | OpenError::Disconnected { .. }
                    | OpenError::SizeMismatch { .. }
                    | OpenError::NotReady { .. }
                    | OpenError::InvalidConfig { .. }
                    | OpenError::AlreadyExists { .. }
                    | OpenError::Io(_),
                ) => {}
                Err(e) => panic!("connect: {e}"),
            }
        }
    });
    drop(conns);
    drop(made);
    drop(view);
    drop(listener);
    // Nothing of the listener's is left under its name.
    let prefix = format!("{OS_PREFIX}{name}");
    if let Ok(dir) = std::fs::read_dir("/dev/shm") {
        for entry in dir.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            assert!(
                !(file == prefix || file.starts_with(&format!("{prefix}."))),
                "{file} left in /dev/shm"
            );
        }
    }
});
