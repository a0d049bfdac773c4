//! `memfd`: a ring of messages per direction in a `memfd_create`d buffer, handed over with
//! eventfds: what a minimal C program does with those two primitives.
//!
//! The parent makes the buffer and four eventfds (two per direction) before the spawn and leaves
//! them inheritable (no `FD_CLOEXEC`), so the child finds them open under the numbers the address
//! names (`fd:<memfd>,<full 0>,<free 0>,<full 1>,<free 1>`); no name exists in any file system.
//! The parent marks its own copies close-on-exec again as it accepts.
//!
//! Each direction is a byte ring of records (a length word, the bytes, padded to 8); a record
//! never wraps: one that does not fit before the end is preceded by a skip word. Two eventfd
//! counters carry the hand-over (non-semaphore mode, so one `read` takes every count there is):
//! - `full` counts the messages the sender published: one `write` of 1 per message;
//! - `free` counts the bytes the receiver handed back: it starts at the ring's capacity, and the
//!   receiver hands back everything it read in one `write` when it has read all it was told of
//!   (before it would wait), so a stream of small messages costs the receiver one `read` and one
//!   `write` per batch the kernel delivered, and a ping-pong one of each per message.
//!
//! The eventfds are non-blocking: a wait first tries the `read` (a stream rarely waits), then
//! `poll`s in 50 ms slices, checking between slices that the peer's process is alive, so a
//! killed peer is an error, never a hang. A closing end adds `CLOSED` to both counters the peer
//! may wait on, which the peer reads as the end.
//!
//! The kernel's eventfd lock orders a `write` before the `read` that sees its count; the
//! Release fence before each `write` and the Acquire fence after each `read` say so to the
//! compiler and the memory model.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use serde::Serialize;

use super::{
    await_connected, closed, ChildStdio, Kind, Listener, Options, Peer, Result, Transport,
    HARNESS_PREFIX,
};
use crate::Error;

const MAGIC: u64 = 0x6970_636d_656d_6664; // "ipcmemfd"
/// Bytes before the first ring: the [`Header`].
const HEADER: usize = 64;
/// The length word of a skip record: the rest of the ring up to its end is unused.
const SKIP: u64 = u64::MAX;
/// What a closing end adds to the counters its peer waits on (more than any ring holds).
const CLOSED: u64 = 1 << 40;
/// How long one `poll` lasts before the peer's process is checked.
const SLICE_MS: libc::c_int = 50;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    capacity: AtomicU64,
    ready: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<Header>() <= HEADER);

/// The sending side of one direction.
struct Sender {
    /// Offset of the ring in the mapping.
    ring: usize,
    full: RawFd,
    free: RawFd,
    /// Bytes written so far (the ring position is this modulo the capacity).
    head: u64,
    /// Bytes the receiver handed back and this side has not used yet.
    room: u64,
}

/// The receiving side of one direction.
struct Receiver {
    ring: usize,
    full: RawFd,
    free: RawFd,
    /// Bytes read so far.
    tail: u64,
    /// Messages published and not read yet.
    avail: u64,
    /// Bytes read and not handed back yet.
    read: u64,
}

/// One end of the memfd transport.
pub struct Memfd {
    map: NonNull<u8>,
    len: usize,
    /// The memfd and the four eventfds (full 0, free 0, full 1, free 1), closed on drop.
    fds: Vec<OwnedFd>,
    capacity: u64,
    out: Sender,
    inp: Receiver,
    /// Reused for `send_json`: no allocation per message once it has grown.
    scratch: Vec<u8>,
    peer: Peer,
    peer_closed: bool,
}

// SAFETY: `map` points to a shared mapping owned by this value alone (unmapped in Drop); nothing
// in it is tied to the thread that made it.
unsafe impl Send for Memfd {}

/// The buffer and the eventfds, made before the spawn, waiting for the child.
pub struct MemfdListener {
    end: Memfd,
    opts: Options,
}

fn last_error() -> Error {
    Error::Io(io::Error::last_os_error())
}

fn record_size(len: usize) -> u64 {
    8 + (len as u64).next_multiple_of(8)
}

fn set_cloexec(fd: RawFd, on: bool) -> Result<()> {
    let flags = if on { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: F_SETFD on a descriptor this end owns; a bad descriptor is reported as an error.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } != 0 {
        return Err(last_error());
    }
    Ok(())
}

/// Adds `n` to the eventfd `fd`'s counter.
fn signal(fd: RawFd, n: u64) -> Result<()> {
    // SAFETY: writes the 8 bytes of `n`, a live local, to a descriptor this end owns.
    let rc = unsafe { libc::write(fd, (&n as *const u64).cast(), 8) };
    if rc != 8 {
        return Err(last_error());
    }
    Ok(())
}

/// Takes the eventfd `fd`'s whole count, or `None` when it is zero.
fn take(fd: RawFd) -> Result<Option<u64>> {
    let mut n = 0u64;
    // SAFETY: reads at most 8 bytes into `n`, a live local, from a descriptor this end owns.
    let rc = unsafe { libc::read(fd, (&mut n as *mut u64).cast(), 8) };
    if rc == 8 {
        return Ok(Some(n));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(Error::Io(e)),
    }
}

impl Memfd {
    fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned and holds at least HEADER bytes (checked at create
        // and connect); the header is only accessed through atomics, all-zero bytes are valid
        // for them, and the borrow cannot outlive the mapping.
        unsafe { &*self.map.as_ptr().cast::<Header>() }
    }

    /// The length word at byte `at` of the ring at `ring`.
    fn word(&self, ring: usize, at: usize) -> &AtomicU64 {
        // SAFETY: `ring + at` is 8-aligned (HEADER, the capacity and every record are multiples
        // of 8) and `at + 8 <= capacity`, inside the mapping; the word is only accessed
        // atomically.
        unsafe { &*self.map.as_ptr().add(ring + at).cast::<AtomicU64>() }
    }

    fn bytes_at(&self, ring: usize, at: usize) -> *mut u8 {
        // SAFETY: `ring + at` lies inside the mapping (callers keep `at <= capacity`).
        unsafe { self.map.as_ptr().add(ring + at) }
    }

    /// Waits until the eventfd `fd` counts something and takes the count: a `read` first, then
    /// `poll` slices with the peer checked between them.
    fn wait(&self, fd: RawFd) -> Result<u64> {
        loop {
            if let Some(n) = take(fd)? {
                // Acquire: pairs with the Release fence before the peer's `signal`.
                fence(Ordering::Acquire);
                return Ok(n);
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one live pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, SLICE_MS) };
            if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(last_error());
            }
            if rc == 0 && self.peer.is_gone() {
                // One last look: the peer may have signalled just before it exited.
                if let Some(n) = take(fd)? {
                    // Acquire: as above.
                    fence(Ordering::Acquire);
                    return Ok(n);
                }
                return Err(self.peer.gone_error());
            }
        }
    }

    /// Hands the bytes read so far back to the sender.
    fn hand_back(&mut self) -> Result<()> {
        if self.inp.read == 0 {
            return Ok(());
        }
        // Release: pairs with the Acquire fence after the sender's wait on `free`: our reads of
        // those bytes are done before it writes them again.
        fence(Ordering::Release);
        signal(self.inp.free, self.inp.read)?;
        self.inp.read = 0;
        Ok(())
    }

    /// The offset and length of the next message's bytes, waiting for one.
    fn next_message(&mut self) -> Result<(usize, usize)> {
        if self.inp.avail == 0 {
            self.hand_back()?;
            if self.peer_closed {
                return Err(closed());
            }
            let mut n = self.wait(self.inp.full)?;
            if n >= CLOSED {
                self.peer_closed = true;
                n -= CLOSED;
            }
            if n == 0 {
                return Err(closed());
            }
            self.inp.avail = n;
        }
        let capacity = self.capacity as usize;
        loop {
            let at = (self.inp.tail % self.capacity) as usize;
            // Relaxed: ordered by the Acquire fence after the wait on `full`.
            let len = self.word(self.inp.ring, at).load(Ordering::Relaxed);
            if len == SKIP {
                let rest = (capacity - at) as u64;
                self.inp.tail += rest;
                self.inp.read += rest;
                continue;
            }
            let fits = usize::try_from(len)
                .ok()
                .filter(|&l| record_size(l) <= (capacity - at) as u64);
            let Some(len) = fits else {
                return Err(crate::garbled(format!(
                    "memfd record of {len} bytes at {at} of a {capacity} byte ring"
                )));
            };
            return Ok((at + 8, len));
        }
    }

    /// Marks the message at the tail read, and hands everything back when it was the last one
    /// this side knows of (the sender may be waiting for the room).
    fn finish_message(&mut self, len: usize) -> Result<()> {
        let size = record_size(len);
        self.inp.tail += size;
        self.inp.read += size;
        self.inp.avail -= 1;
        if self.inp.avail == 0 {
            self.hand_back()?;
        }
        Ok(())
    }

    /// Sends `msg`: waits for the room of its record (and of a skip before it at the ring's
    /// end), writes it and counts it on `full`.
    fn publish(&mut self, msg: &[u8]) -> Result<()> {
        let max = self.max_message();
        if msg.len() > max {
            return Err(Error::TooLarge {
                len: msg.len(),
                max,
            });
        }
        let need = record_size(msg.len());
        let mut at = (self.out.head % self.capacity) as usize;
        let rest = self.capacity - at as u64;
        let total = if need > rest { rest + need } else { need };
        while self.out.room < total {
            let n = self.wait(self.out.free)?;
            if n >= CLOSED {
                return Err(closed());
            }
            self.out.room += n;
        }
        if need > rest {
            // Relaxed: published by the Release fence below.
            self.word(self.out.ring, at).store(SKIP, Ordering::Relaxed);
            self.out.head += rest;
            self.out.room -= rest;
            at = 0;
        }
        // SAFETY: the record fits before the ring's end (`need <= rest` now), the receiver
        // handed these bytes back (counted in `room`), and `msg` is a separate buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(
                msg.as_ptr(),
                self.bytes_at(self.out.ring, at + 8),
                msg.len(),
            )
        };
        // Relaxed: published by the Release fence below.
        self.word(self.out.ring, at)
            .store(msg.len() as u64, Ordering::Relaxed);
        self.out.head += need;
        self.out.room -= need;
        // Release: pairs with the Acquire fence after the receiver's wait on `full`.
        fence(Ordering::Release);
        signal(self.out.full, 1)
    }

    /// Maps the memfd and sets up the end `me` (0: the parent, 1: the child).
    fn with_fds(fds: Vec<OwnedFd>, me: usize, peer: Peer) -> Result<Memfd> {
        // SAFETY: an all-zero stat is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is a live stat to fill; fds[0] is the memfd this end owns.
        if unsafe { libc::fstat(fds[0].as_raw_fd(), &mut st) } != 0 {
            return Err(last_error());
        }
        let len = usize::try_from(st.st_size).unwrap_or(0);
        if len < HEADER + 128 {
            return Err(crate::garbled(format!("memfd of {len} bytes")));
        }
        // SAFETY: maps `len` bytes (the file's size) of a descriptor this end owns, shared; the
        // result is checked, and unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fds[0].as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last_error());
        }
        let Some(map) = NonNull::new(ptr.cast::<u8>()) else {
            return Err(crate::garbled("mmap returned null".to_owned()));
        };
        let capacity = ((len - HEADER) / 2) as u64;
        let raw = |i: usize| fds[i].as_raw_fd();
        // Direction 0 carries parent -> child.
        let (send_dir, recv_dir) = if me == 0 { (0, 1) } else { (1, 0) };
        let out = Sender {
            ring: HEADER + send_dir * capacity as usize,
            full: raw(1 + 2 * send_dir),
            free: raw(2 + 2 * send_dir),
            head: 0,
            room: 0,
        };
        let inp = Receiver {
            ring: HEADER + recv_dir * capacity as usize,
            full: raw(1 + 2 * recv_dir),
            free: raw(2 + 2 * recv_dir),
            tail: 0,
            avail: 0,
            read: 0,
        };
        Ok(Memfd {
            map,
            len,
            fds,
            capacity,
            out,
            inp,
            scratch: Vec::new(),
            peer,
            peer_closed: false,
        })
    }
}

/// A fresh eventfd whose count starts at `initial`, non-blocking (the flag belongs to the open
/// file, so the child's copy is non-blocking too).
fn eventfd(initial: u64) -> Result<OwnedFd> {
    // SAFETY: eventfd has no memory-safety preconditions; failure is reported as -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: `fd` is fresh and owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if initial > 0 {
        signal(fd.as_raw_fd(), initial)?;
    }
    Ok(fd)
}

/// What the descriptor `fd` of this process is (`/memfd:...`, `anon_inode:[eventfd]`).
fn describe(fd: RawFd) -> Result<String> {
    let target = fs::read_link(format!("/proc/self/fd/{fd}"))
        .map_err(|e| Error::InvalidConfig(format!("descriptor {fd}: {e}")))?;
    Ok(target.to_string_lossy().into_owned())
}

impl Transport for Memfd {
    type Listener = MemfdListener;
    const KIND: Kind = Kind::Memfd;

    fn listen(name: &str, opts: &Options) -> Result<MemfdListener> {
        // A ring holds at least two of the largest records, so one that must skip the ring's
        // end still fits beside the skip.
        let capacity = opts
            .ring_size
            .max(2 * (opts.max_message + 8))
            .checked_next_multiple_of(64)
            .ok_or_else(|| Error::InvalidConfig("memfd ring size overflows".to_owned()))?;
        let len = HEADER + 2 * capacity;
        let id = std::ffi::CString::new(format!("{HARNESS_PREFIX}{name}-memfd"))
            .map_err(|_| Error::InvalidConfig(format!("name {name:?} holds a NUL")))?;
        // SAFETY: `id` is NUL-terminated; failure is reported as -1.
        let mem = unsafe { libc::memfd_create(id.as_ptr(), libc::MFD_CLOEXEC) };
        if mem < 0 {
            return Err(last_error());
        }
        // SAFETY: `mem` is fresh and owned by nothing else.
        let mem = unsafe { OwnedFd::from_raw_fd(mem) };
        let size = libc::off_t::try_from(len)
            .map_err(|_| Error::InvalidConfig(format!("memfd of {len} bytes")))?;
        // SAFETY: ftruncate on a descriptor this end owns; failure is reported as -1.
        if unsafe { libc::ftruncate(mem.as_raw_fd(), size) } != 0 {
            return Err(last_error());
        }
        let room = capacity as u64;
        let fds = vec![mem, eventfd(0)?, eventfd(room)?, eventfd(0)?, eventfd(room)?];
        for fd in &fds {
            set_cloexec(fd.as_raw_fd(), false)?;
        }
        let end = Memfd::with_fds(fds, 0, Peer::unknown())?;
        let header = end.header();
        // Relaxed: the child maps the buffer after the spawn, which orders these stores.
        header.magic.store(MAGIC, Ordering::Relaxed);
        // Relaxed: as `magic`.
        header.capacity.store(room, Ordering::Relaxed);
        Ok(MemfdListener {
            end,
            opts: opts.clone(),
        })
    }

    /// `address` is `fd:<memfd>,<full 0>,<free 0>,<full 1>,<free 1>`: descriptors this process
    /// inherited for the transport, which nothing else in it uses; the transport takes them
    /// over (and closes them when dropped).
    fn connect(address: &str, _opts: &Options, peer: Peer) -> Result<Memfd> {
        let bad = || Error::InvalidConfig(format!("memfd address {address:?} is not fd:<5 fds>"));
        let numbers: Vec<RawFd> = address
            .strip_prefix("fd:")
            .ok_or_else(bad)?
            .split(',')
            .map(|n| n.parse::<RawFd>().ok().filter(|&n| n > 2))
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        let mut distinct = numbers.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if numbers.len() != 5 || distinct.len() != 5 {
            return Err(bad());
        }
        for (i, &fd) in numbers.iter().enumerate() {
            let what = describe(fd)?;
            let ok = if i == 0 {
                what.starts_with("/memfd:")
            } else {
                what == "anon_inode:[eventfd]"
            };
            if !ok {
                return Err(Error::InvalidConfig(format!(
                    "descriptor {fd} is {what}, not the memfd transport's"
                )));
            }
            // Our own children must not inherit it.
            set_cloexec(fd, true)?;
        }
        let fds = numbers
            .into_iter()
            // SAFETY: by the contract above each descriptor was inherited for this transport
            // alone, and it is open (checked); the transport becomes its only owner.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
            .collect();
        let end = Memfd::with_fds(fds, 1, peer)?;
        let header = end.header();
        // Relaxed: stored before the spawn, which orders them before this load.
        let magic = header.magic.load(Ordering::Relaxed);
        // Relaxed: as `magic`.
        let capacity = header.capacity.load(Ordering::Relaxed);
        if magic != MAGIC || capacity != end.capacity || capacity % 64 != 0 {
            return Err(crate::garbled(format!(
                "memfd of {} bytes: magic {magic:#x}, capacity {capacity}",
                end.len
            )));
        }
        // The rings start with all their room handed to the senders (the `free` counters).
        // Release: pairs with the Acquire load of `ready` in `MemfdListener::accept`.
        header.ready.store(2, Ordering::Release);
        Ok(end)
    }

    fn max_message(&self) -> usize {
        // Half the ring less a length word: a record and a skip before it always fit.
        (self.capacity / 2) as usize - 8
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        self.publish(msg)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let result = serde_json::to_writer(&mut scratch, value)
            .map_err(Error::from)
            .and_then(|()| self.publish(&scratch));
        self.scratch = scratch;
        result
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let (at, len) = self.next_message()?;
        // SAFETY: `next_message` checked that the record lies inside the ring; the count on
        // `full` means the sender finished writing it, and it does not write there again until
        // these bytes are handed back. (A peer that breaks the protocol can change the bytes
        // while we read them, as with raw-sync's slot; it cannot make us read outside the
        // mapping.)
        let bytes = unsafe { std::slice::from_raw_parts(self.bytes_at(self.inp.ring, at), len) };
        let result = read(bytes);
        self.finish_message(len)?;
        result
    }
}

impl Drop for Memfd {
    fn drop(&mut self) {
        // Wakes a peer waiting for a message or for room; errors change nothing now.
        let _ = signal(self.out.full, CLOSED);
        let _ = signal(self.inp.free, CLOSED);
        // SAFETY: `map` and `len` are the mapping made in `with_fds`, unmapped once, here; no
        // borrow of it outlives `self`.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.len) };
    }
}

impl Listener for MemfdListener {
    type Transport = Memfd;

    fn address(&self) -> String {
        let numbers: Vec<String> = self
            .end
            .fds
            .iter()
            .map(|fd| fd.as_raw_fd().to_string())
            .collect();
        format!("fd:{}", numbers.join(","))
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<Memfd> {
        // The spawned child holds its own copies now; later children must not.
        for fd in &self.end.fds {
            set_cloexec(fd.as_raw_fd(), true)?;
        }
        self.end.peer = peer;
        await_connected(&self.end.header().ready, peer, self.opts.connect_timeout)?;
        Ok(self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Both ends in this process: the connecting end gets duplicates of the listener's
    /// descriptors, as a child would inherit them.
    fn pair(opts: &Options) -> (Memfd, Memfd) {
        let listener = Memfd::listen(&format!("test-{}", std::process::id()), opts).unwrap();
        let dups: Vec<String> = listener
            .end
            .fds
            .iter()
            .map(|fd| {
                // SAFETY: F_DUPFD_CLOEXEC on a descriptor the listener owns.
                let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
                assert!(dup > 2, "dup: {}", io::Error::last_os_error());
                dup.to_string()
            })
            .collect();
        let address = format!("fd:{}", dups.join(","));
        let child = Memfd::connect(&address, opts, Peer::unknown()).unwrap();
        let parent = listener
            .accept(ChildStdio::default(), Peer::unknown())
            .unwrap();
        (parent, child)
    }

    #[test]
    fn messages_of_every_size_wrap_the_ring_many_times_in_order() {
        let opts = Options {
            ring_size: 4096,
            max_message: 1000,
            ..Options::default()
        };
        let (mut parent, mut child) = pair(&opts);
        assert_eq!(child.max_message(), 2048 - 8);
        let count = 20_000u32;
        let (done, finished) = mpsc::channel();
        let sender = std::thread::spawn(move || {
            for i in 0..count {
                let len = 4 + (i as usize * 37) % 997;
                let mut msg = vec![i as u8; len];
                msg[..4].copy_from_slice(&i.to_le_bytes());
                parent.send(&msg).unwrap();
            }
            parent
        });
        let receiver = std::thread::spawn(move || {
            for i in 0..count {
                child
                    .recv_with(|bytes| {
                        assert_eq!(bytes.len(), 4 + (i as usize * 37) % 997, "message {i}");
                        assert_eq!(bytes[..4], i.to_le_bytes(), "message {i}");
                        assert!(bytes[4..].iter().all(|&b| b == i as u8), "message {i}");
                        Ok(())
                    })
                    .unwrap();
            }
            let _ = done.send(());
            child
        });
        // A ring that loses room stalls the sender for good: a bounded wait, not a hang.
        finished
            .recv_timeout(Duration::from_secs(20))
            .expect("every message within 20 s");
        let mut parent = sender.join().unwrap();
        let mut child = receiver.join().unwrap();
        drop(parent.send(b"last"));
        child.recv_with(|bytes| {
            assert_eq!(bytes, b"last");
            Ok(())
        })
        .unwrap();
        drop(parent);
        assert!(matches!(
            child.recv_with(|_| Ok(())),
            Err(Error::Disconnected)
        ));
    }
}
