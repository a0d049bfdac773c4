//! `posixmq`: two POSIX message queues (`mq_open`), one per direction.
//!
//! A queue holds at most `/proc/sys/fs/mqueue/msg_max` messages of at most
//! `/proc/sys/fs/mqueue/msgsize_max` bytes (10 and 8192 by default). The transport opens its
//! queues with those limits ([`MqLimits`], reported by the harness) and carries larger messages
//! in fragments: the first queue message of every transport message starts with its total length
//! as a little-endian `u32`, and as many further queue messages as needed carry the rest. An
//! empty queue message says "closed" (a first fragment is never empty).
//!
//! The queues are `/ipcbench-<name>-mq-p2c` and `/ipcbench-<name>-mq-c2p`. The parent creates
//! both, the child opens them and sends a hello, and the parent unlinks both names as soon as the
//! hello arrives (or when the listener is dropped): the open descriptors keep working.
//!
//! A bare message ([`Transport::send_bare`]) is one queue message holding exactly the message,
//! so it must fit in one.
//!
//! A queue does not notice a dead peer, so every wait is `mq_timedsend` / `mq_timedreceive` in
//! slices of 50 ms with a check of the peer's process between slices.

use std::ffi::CString;
use std::io;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;

/// How long one wait lasts before the peer is checked.
const SLICE: Duration = Duration::from_millis(50);
/// Bytes of a first fragment's length header.
const HEADER: usize = 4;
/// What the child sends first.
const HELLO: &[u8] = b"ipcbench-mq-hello";

/// This machine's message queue limits and the attributes the transport opens its queues with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MqLimits {
    /// `/proc/sys/fs/mqueue/msgsize_max` (none when unreadable).
    pub msgsize_max: Option<usize>,
    /// `/proc/sys/fs/mqueue/msg_max` (none when unreadable).
    pub msg_max: Option<usize>,
    /// Bytes per queue message the transport asks for (`mq_msgsize`).
    pub msgsize: usize,
    /// Messages per queue the transport asks for (`mq_maxmsg`).
    pub maxmsg: usize,
}

impl MqLimits {
    /// Reads the limits. The attributes are the limits themselves (the kernel's defaults, 8192
    /// and 10, when they cannot be read), capped at 1 MiB and 64 messages.
    pub fn read() -> MqLimits {
        let read = |file: &str| {
            std::fs::read_to_string(format!("/proc/sys/fs/mqueue/{file}"))
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
        };
        let msgsize_max = read("msgsize_max");
        let msg_max = read("msg_max");
        MqLimits {
            msgsize_max,
            msg_max,
            msgsize: msgsize_max.unwrap_or(8192).clamp(HEADER + 1, 1 << 20),
            maxmsg: msg_max.unwrap_or(10).clamp(1, 64),
        }
    }
}

/// One open queue descriptor; closed on drop.
struct Queue {
    mqd: libc::mqd_t,
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: `mqd` is an open descriptor this value owns; it is closed once.
        unsafe {
            libc::mq_close(self.mqd);
        }
    }
}

/// Unlinks a queue name on drop unless disarmed.
struct Name {
    name: CString,
    armed: bool,
}

impl Name {
    fn unlink(&mut self) {
        if self.armed {
            self.armed = false;
            // SAFETY: `name` is a valid NUL-terminated string.
            unsafe {
                libc::mq_unlink(self.name.as_ptr());
            }
        }
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        self.unlink();
    }
}

fn queue_names(base: &str) -> Result<(CString, CString)> {
    let c = |suffix: &str| {
        CString::new(format!("{base}-{suffix}"))
            .map_err(|_| Error::InvalidConfig(format!("queue name {base:?} holds a NUL byte")))
    };
    Ok((c("p2c")?, c("c2p")?))
}

fn open(name: &CString, flags: libc::c_int, attr: Option<&MqLimits>) -> io::Result<Queue> {
    let mqd = match attr {
        Some(limits) => {
            // SAFETY: an all-zero mq_attr is a valid value of this plain C struct.
            let mut a: libc::mq_attr = unsafe { std::mem::zeroed() };
            a.mq_maxmsg = limits.maxmsg as _;
            a.mq_msgsize = limits.msgsize as _;
            // SAFETY: `name` is NUL-terminated; with O_CREAT mq_open reads a mode and a pointer
            // to a live mq_attr, both passed.
            unsafe {
                libc::mq_open(
                    name.as_ptr(),
                    flags | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o600 as libc::c_uint,
                    &a as *const libc::mq_attr,
                )
            }
        }
        // SAFETY: `name` is NUL-terminated; without O_CREAT no further argument is read.
        None => unsafe { libc::mq_open(name.as_ptr(), flags | libc::O_CLOEXEC) },
    };
    if mqd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Queue { mqd })
}

/// The queue's real attributes: (message size, maximum messages).
fn attributes(q: &Queue) -> Result<(usize, usize)> {
    // SAFETY: an all-zero mq_attr is valid; mq_getattr fills it.
    let mut a: libc::mq_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `q.mqd` is open and `a` is a live, writable mq_attr.
    if unsafe { libc::mq_getattr(q.mqd, &mut a) } != 0 {
        return Err(Error::Io(io::Error::last_os_error()));
    }
    Ok((a.mq_msgsize as usize, a.mq_maxmsg as usize))
}

/// `CLOCK_REALTIME` now plus `after`: the absolute timeout the `mq_timed*` calls take.
fn deadline_in(after: Duration) -> libc::timespec {
    // SAFETY: an all-zero timespec is valid; clock_gettime fills it.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `now` is a live, writable timespec; CLOCK_REALTIME always exists.
    unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut now);
    }
    let nanos = now.tv_nsec as u64 + u64::from(after.subsec_nanos());
    now.tv_sec += (after.as_secs() + nanos / 1_000_000_000) as libc::time_t;
    now.tv_nsec = (nanos % 1_000_000_000) as _;
    now
}

/// One end of the message queue transport.
pub struct PosixMq {
    tx: Queue,
    rx: Queue,
    /// Bytes per queue message (the receive buffer must hold one).
    msgsize: usize,
    /// Receive buffer: one queue message.
    chunk: Vec<u8>,
    /// Reassembly buffer for messages that came in fragments.
    assembled: Vec<u8>,
    /// Assembles a first fragment (header and start of the payload).
    out: Vec<u8>,
    /// Serialised JSON messages.
    json: Vec<u8>,
    max: usize,
    peer: Peer,
    /// The peer sent the close marker.
    closed: bool,
}

/// The created queues, waiting for the child's hello.
pub struct PosixMqListener {
    tx: Queue,
    rx: Queue,
    names: [Name; 2],
    base: String,
    opts: Options,
}

impl PosixMq {
    fn new(tx: Queue, rx: Queue, opts: &Options, peer: Peer) -> Result<PosixMq> {
        let (tx_size, _) = attributes(&tx)?;
        let (rx_size, _) = attributes(&rx)?;
        if tx_size <= HEADER || rx_size <= HEADER {
            return Err(Error::InvalidConfig(format!(
                "message queues of {tx_size} / {rx_size} bytes per message are too small"
            )));
        }
        Ok(PosixMq {
            tx,
            rx,
            msgsize: tx_size,
            chunk: vec![0; rx_size],
            assembled: Vec::new(),
            out: Vec::with_capacity(tx_size),
            json: Vec::new(),
            max: super::framed::max_message(opts),
            peer,
            closed: false,
        })
    }

    /// The bytes per queue message of the sending queue.
    pub fn msgsize(&self) -> usize {
        self.msgsize
    }

    fn send_chunk(&mut self, bytes: &[u8]) -> Result<()> {
        send_chunk(&self.tx, bytes, self.peer, None)
    }

    /// Receives one queue message into `self.chunk`; returns its length.
    fn recv_chunk(&mut self, deadline: Option<Instant>) -> Result<usize> {
        if self.closed {
            return Err(super::closed());
        }
        loop {
            let timeout = deadline_in(SLICE);
            // SAFETY: `rx.mqd` is open; `chunk` is a live, writable buffer of `chunk.len()`
            // bytes (at least the queue's message size); the priority pointer may be null;
            // `timeout` is a live timespec.
            let n = unsafe {
                libc::mq_timedreceive(
                    self.rx.mqd,
                    self.chunk.as_mut_ptr().cast(),
                    self.chunk.len(),
                    std::ptr::null_mut(),
                    &timeout,
                )
            };
            if n >= 0 {
                let n = n as usize;
                if n == 0 {
                    self.closed = true;
                    return Err(super::closed());
                }
                return Ok(n);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ETIMEDOUT) => {
                    self.peer.check()?;
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(Error::Timeout);
                    }
                }
                Some(libc::EINTR) => {}
                _ => return Err(Error::Io(e)),
            }
        }
    }

    fn recv_message<R>(
        &mut self,
        deadline: Option<Instant>,
        read: impl FnOnce(&[u8]) -> Result<R>,
    ) -> Result<R> {
        let n = self.recv_chunk(deadline)?;
        if n < HEADER {
            return Err(crate::garbled(format!(
                "queue message of {n} bytes where a message starts"
            )));
        }
        let mut header = [0u8; HEADER];
        header.copy_from_slice(&self.chunk[..HEADER]);
        let len = u32::from_le_bytes(header) as usize;
        if len > self.max {
            return Err(crate::garbled(format!(
                "message of {len} bytes announced, the maximum is {}",
                self.max
            )));
        }
        let first = n - HEADER;
        if first == len {
            return read(&self.chunk[HEADER..n]);
        }
        if first > len {
            return Err(crate::garbled(format!(
                "first fragment of {first} bytes for a message of {len}"
            )));
        }
        let mut assembled = std::mem::take(&mut self.assembled);
        assembled.clear();
        assembled.extend_from_slice(&self.chunk[HEADER..n]);
        while assembled.len() < len {
            let n = match self.recv_chunk(deadline) {
                Ok(n) => n,
                Err(e) => {
                    self.assembled = assembled;
                    return Err(e);
                }
            };
            if assembled.len() + n > len {
                self.assembled = assembled;
                return Err(crate::garbled(format!(
                    "fragments run past the announced {len} bytes"
                )));
            }
            assembled.extend_from_slice(&self.chunk[..n]);
        }
        let result = read(&assembled);
        self.assembled = assembled;
        result
    }
}

fn send_chunk(q: &Queue, bytes: &[u8], peer: Peer, deadline: Option<Instant>) -> Result<()> {
    loop {
        let timeout = deadline_in(SLICE);
        // SAFETY: `q.mqd` is open; `bytes` is a live buffer of `bytes.len()` bytes (at most the
        // queue's message size); `timeout` is a live timespec.
        let rc =
            unsafe { libc::mq_timedsend(q.mqd, bytes.as_ptr().cast(), bytes.len(), 0, &timeout) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ETIMEDOUT) => {
                peer.check()?;
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(Error::Timeout);
                }
            }
            Some(libc::EINTR) => {}
            _ => return Err(Error::Io(e)),
        }
    }
}

impl Drop for PosixMq {
    fn drop(&mut self) {
        // The close marker, if there is room for it right now (best effort).
        let now = deadline_in(Duration::ZERO);
        // SAFETY: `tx.mqd` is open; a zero-length message needs no buffer, but the pointer must
        // be valid: an empty slice's pointer is; `now` is a live timespec.
        unsafe {
            libc::mq_timedsend(self.tx.mqd, [0u8; 0].as_ptr().cast(), 0, 0, &now);
        }
    }
}

impl Transport for PosixMq {
    type Listener = PosixMqListener;
    const KIND: Kind = Kind::PosixMq;

    fn listen(name: &str, opts: &Options) -> Result<PosixMqListener> {
        let base = format!("/{}{name}-mq", super::HARNESS_PREFIX);
        let (p2c, c2p) = queue_names(&base)?;
        let mut limits = MqLimits::read();
        loop {
            let created = open(&p2c, libc::O_WRONLY, Some(&limits)).and_then(|tx| {
                let tx_name = Name {
                    name: p2c.clone(),
                    armed: true,
                };
                match open(&c2p, libc::O_RDONLY, Some(&limits)) {
                    Ok(rx) => Ok((tx, rx, tx_name)),
                    Err(e) => Err(e),
                }
            });
            match created {
                Ok((tx, rx, tx_name)) => {
                    let rx_name = Name {
                        name: c2p,
                        armed: true,
                    };
                    return Ok(PosixMqListener {
                        tx,
                        rx,
                        names: [tx_name, rx_name],
                        base,
                        opts: opts.clone(),
                    });
                }
                // Over RLIMIT_MSGQUEUE: fewer messages per queue.
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) && limits.maxmsg > 1 => {
                    limits.maxmsg /= 2;
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    return Err(Error::AlreadyExists(base))
                }
                Err(e) => {
                    return Err(Error::Io(io::Error::new(
                        e.kind(),
                        format!("creating message queue {base}-*: {e}"),
                    )))
                }
            }
        }
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<PosixMq> {
        let (p2c, c2p) = queue_names(address)?;
        let (rx, tx) = super::poll_until(peer, opts.connect_timeout, || {
            let rx = match open(&p2c, libc::O_RDONLY, None) {
                Ok(q) => q,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
                Err(e) => return Err(Error::Io(e)),
            };
            match open(&c2p, libc::O_WRONLY, None) {
                Ok(tx) => Ok(Some((rx, tx))),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
                Err(e) => Err(Error::Io(e)),
            }
        })
        .map_err(|e| match e {
            Error::Timeout => Error::NotFound(address.to_owned()),
            other => other,
        })?;
        let mut t = PosixMq::new(tx, rx, opts, peer)?;
        t.send(HELLO)?;
        Ok(t)
    }

    fn max_message(&self) -> usize {
        self.max
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        if msg.len() > self.max {
            return Err(Error::TooLarge {
                len: msg.len(),
                max: self.max,
            });
        }
        let first = msg.len().min(self.msgsize - HEADER);
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
        out.extend_from_slice(&msg[..first]);
        let sent = self.send_chunk(&out);
        self.out = out;
        sent?;
        for piece in msg[first..].chunks(self.msgsize) {
            self.send_chunk(piece)?;
        }
        Ok(())
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let mut json = std::mem::take(&mut self.json);
        json.clear();
        let sent = match serde_json::to_writer(&mut json, value) {
            Ok(()) => self.send(&json),
            Err(e) => Err(e.into()),
        };
        self.json = json;
        sent
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        self.recv_message(None, read)
    }

    /// One queue message holding exactly `msg` (so at most the queue's message size; an empty
    /// one would read as the close marker).
    fn send_bare(&mut self, msg: &[u8]) -> Result<()> {
        if msg.is_empty() || msg.len() > self.msgsize {
            return Err(Error::TooLarge {
                len: msg.len(),
                max: self.msgsize,
            });
        }
        self.send_chunk(msg)
    }

    /// One queue message, which must hold exactly `size` bytes.
    fn recv_bare<R>(&mut self, size: usize, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let n = self.recv_chunk(None)?;
        if n != size {
            return Err(crate::garbled(format!(
                "bare queue message of {n} bytes, {size} expected"
            )));
        }
        read(&self.chunk[..n])
    }
}

impl PosixMqListener {
    /// The attributes the queues were created with: (bytes per message, messages per queue).
    pub fn attributes(&self) -> Result<(usize, usize)> {
        attributes(&self.tx)
    }
}

impl Listener for PosixMqListener {
    type Transport = PosixMq;

    fn address(&self) -> String {
        self.base.clone()
    }

    fn accept(self, _stdio: ChildStdio, peer: Peer) -> Result<PosixMq> {
        let PosixMqListener {
            tx,
            rx,
            mut names,
            opts,
            ..
        } = self;
        let mut t = PosixMq::new(tx, rx, &opts, peer)?;
        let deadline = Instant::now() + opts.connect_timeout;
        let hello = t.recv_message(Some(deadline), |b| Ok(b == HELLO))?;
        if !hello {
            return Err(crate::garbled("unexpected handshake message".to_owned()));
        }
        // Both ends are open: the names are no longer needed.
        for name in &mut names {
            name.unlink();
        }
        Ok(t)
    }
}
