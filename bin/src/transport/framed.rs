//! Length-prefixed framing over any byte stream (pipe, Unix socket, TCP).
//!
//! A frame is a little-endian `u32` length followed by that many bytes. The writer sends a frame
//! with one system call: header and payload copied into one buffer for a plain `write` up to
//! [`COPY_LIMIT`] bytes, one `writev` of both, uncopied, above. The reader lends whole frames
//! straight from its buffer (a partial frame moves to the front for the next `read`), reading in
//! one of two ways ([`Reads`]):
//!
//! - [`Reads::Bulk`] (sockets): each `read` asks for all the room in its [`READ_BUFFER`]-byte
//!   buffer, so many small frames cost one `read`.
//! - `framed::Reads::Bounded` (pipes and named pipes): each `read` asks for at most the rest of the
//!   frame and the next frame's header (before a header is known: a frame of the last length
//!   and the header after it). A pipe's writer wakes the reader only when it writes into an empty
//!   pipe; a reader that drains the pipe at every `read` goes to sleep at once and must be woken
//!   for the next message, one wake-up per message, while a reader that takes one frame per
//!   `read` leaves the writer's next messages in the pipe and is not woken while it works,
//!   which is what a bare reader (one message per `read`) gets.
//!
//! The same stream also carries *bare* messages ([`Framed::send_bare`], [`Framed::recv_bare`]):
//! no header, one `write` of the message, and `read`s of exactly the rest of the message until it
//! is whole, as a minimal C program does when both sides know the size.

use std::io::{self, ErrorKind, IoSlice, Read, Write};

use serde::Serialize;

use super::{Options, Result};
use crate::Error;

/// Bytes in a frame header.
const HEADER: usize = 4;

/// Bytes the reader asks for per `read`: many small frames, or several 4 KiB ones, per call.
pub(crate) const READ_BUFFER: usize = 64 * 1024;

/// The largest payload the writer copies behind its header for one plain `write`; larger ones
/// go out with the header in one `writev`, uncopied.
const COPY_LIMIT: usize = 4096;

/// How the reader asks for bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reads {
    /// All the room of the buffer per `read`.
    Bulk,
    /// At most the rest of the frame and the next header per `read`.
    Bounded,
}

/// The frame limit of the stream backends: sixteen times the buffer size (at least 16 MiB), or
/// [`Options::max_message`] when that is larger; never past the `u32` length header.
pub(crate) fn max_message(opts: &Options) -> usize {
    opts.ring_size
        .max(1 << 20)
        .saturating_mul(16)
        .max(opts.max_message)
        .min(u32::MAX as usize)
}

/// The receiving half: a buffer the frames are read into and lent from.
struct Incoming<R> {
    inner: R,
    /// Storage; `buf[start..end]` holds received bytes not yet consumed. It grows to hold a
    /// frame larger than [`READ_BUFFER`].
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The length of the last frame received (`framed::Reads::Bounded` reads one more of it with a
    /// header before it knows the next length).
    last_len: usize,
}

impl<R: Read> Incoming<R> {
    fn new(inner: R) -> Self {
        Incoming {
            inner,
            buf: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
            last_len: 0,
        }
    }

    /// Reads until `need` bytes are buffered. Each `read` asks for all the room there is
    /// (`ahead` none: frames, many per call) or for at most `ahead` bytes past what is needed
    /// (0 for bare messages, which a read must not run past; a header for bounded frames).
    fn fill(&mut self, need: usize, ahead: Option<usize>) -> Result<()> {
        if self.end - self.start >= need {
            return Ok(());
        }
        let span = need.saturating_add(ahead.unwrap_or(0));
        // Move the partial frame to the front: the room after it is for reading.
        if self.start > 0 && (ahead.is_none() || self.start + span > self.buf.len()) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.start + span > self.buf.len() {
            self.buf.resize(self.start + span, 0);
        }
        while self.end - self.start < need {
            let limit = match ahead {
                None => self.buf.len(),
                Some(_) => self.start + span,
            };
            match self.inner.read(&mut self.buf[self.end..limit]) {
                Ok(0) => return Err(super::closed()),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_disconnect(&e) => return Err(super::closed()),
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(())
    }

    /// Lends the next `len` buffered bytes to `read` and consumes them.
    fn lend<T>(&mut self, len: usize, read: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
        let at = self.start;
        self.start += len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        read(&self.buf[at..at + len])
    }
}

/// A framed duplex stream.
pub(crate) struct Framed<R: Read, W: Write> {
    reader: Incoming<R>,
    writer: W,
    /// Reused for outgoing JSON frames.
    out: Vec<u8>,
    max: usize,
    reads: Reads,
}

impl<R: Read, W: Write> Framed<R, W> {
    /// A framed stream whose reader takes all there is per `read` ([`Reads::Bulk`]).
    pub(crate) fn new(reader: R, writer: W, max: usize) -> Self {
        Framed::with_reads(reader, writer, max, Reads::Bulk)
    }

    /// A framed stream whose reader asks for bytes as `reads` says.
    pub(crate) fn with_reads(reader: R, writer: W, max: usize, reads: Reads) -> Self {
        Framed {
            reader: Incoming::new(reader),
            writer,
            out: Vec::new(),
            max: max.min(u32::MAX as usize),
            reads,
        }
    }

    pub(crate) fn max_message(&self) -> usize {
        self.max
    }

    fn too_large(&self, len: usize) -> Error {
        Error::TooLarge { len, max: self.max }
    }

    pub(crate) fn send(&mut self, msg: &[u8]) -> Result<()> {
        if msg.len() > self.max {
            return Err(self.too_large(msg.len()));
        }
        let header = (msg.len() as u32).to_le_bytes();
        if msg.len() <= COPY_LIMIT {
            // One contiguous `write`: the copy costs less than a second I/O vector.
            self.out.clear();
            self.out.extend_from_slice(&header);
            self.out.extend_from_slice(msg);
            return write_all(&mut self.writer, &self.out);
        }
        write_frame(&mut self.writer, &header, msg)
    }

    /// Sends `msg` as it is, no header: one `write` (more only if the kernel takes part of it).
    pub(crate) fn send_bare(&mut self, msg: &[u8]) -> Result<()> {
        write_all(&mut self.writer, msg)
    }

    /// Receives one bare message of `size` bytes: `read`s of exactly what is missing until it is
    /// whole (never past it, so the stream stays in step), then lends it to `read`.
    pub(crate) fn recv_bare<T>(
        &mut self,
        size: usize,
        read: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        if size > self.max {
            return Err(self.too_large(size));
        }
        self.reader.fill(size, Some(0))?;
        self.reader.lend(size, read)
    }

    /// Sends `msgs` back to back, no headers, with one `write` (more only if the kernel takes
    /// part of it), as a C program writing a buffer of fixed-size records does.
    pub(crate) fn send_batch(&mut self, msgs: &[Vec<u8>]) -> Result<()> {
        self.out.clear();
        for msg in msgs {
            self.out.extend_from_slice(msg);
        }
        write_all(&mut self.writer, &self.out)
    }

    /// Receives bare messages of `size` bytes sent by `send_batch`: waits until one is whole,
    /// each `read` asking for all the room of the buffer, and hands `read` every whole one there
    /// (at most `max`); a partial one stays for the next call. The sender writes nothing else
    /// until the receiver answers, so a read never runs past the batch.
    pub(crate) fn recv_batch(
        &mut self,
        size: usize,
        max: usize,
        mut read: impl FnMut(&[u8]),
    ) -> Result<usize> {
        if size > self.max || size == 0 {
            return Err(self.too_large(size));
        }
        self.reader.fill(size, None)?;
        let mut n = 0;
        while n < max && self.reader.end - self.reader.start >= size {
            let at = self.reader.start;
            read(&self.reader.buf[at..at + size]);
            self.reader.start += size;
            n += 1;
        }
        if self.reader.start == self.reader.end {
            self.reader.start = 0;
            self.reader.end = 0;
        }
        Ok(n)
    }

    pub(crate) fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.out.clear();
        self.out.extend_from_slice(&[0; HEADER]);
        serde_json::to_writer(&mut self.out, value)?;
        let len = self.out.len() - HEADER;
        if len > self.max {
            return Err(self.too_large(len));
        }
        self.out[..HEADER].copy_from_slice(&(len as u32).to_le_bytes());
        write_all(&mut self.writer, &self.out)
    }

    pub(crate) fn recv_with<T>(&mut self, read: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
        // Bounded: the header, a frame of the last length, and the header after it.
        let (ahead_of_header, ahead_of_frame) = match self.reads {
            Reads::Bulk => (None, None),
            Reads::Bounded => (Some(self.reader.last_len + HEADER), Some(HEADER)),
        };
        self.reader.fill(HEADER, ahead_of_header)?;
        let at = self.reader.start;
        let mut header = [0u8; HEADER];
        header.copy_from_slice(&self.reader.buf[at..at + HEADER]);
        let len = u32::from_le_bytes(header) as usize;
        if len > self.max {
            return Err(crate::garbled(format!(
                "frame of {len} bytes announced, the maximum is {}",
                self.max
            )));
        }
        self.reader.fill(HEADER + len, ahead_of_frame)?;
        self.reader.last_len = len;
        self.reader.start += HEADER;
        self.reader.lend(len, read)
    }

    pub(crate) fn writer(&self) -> &W {
        &self.writer
    }
}

/// Writes header and payload with one vectored write, finishing with plain writes if the
/// kernel took only part of them.
fn write_frame<W: Write>(writer: &mut W, header: &[u8], msg: &[u8]) -> Result<()> {
    let total = header.len() + msg.len();
    let written = loop {
        match writer.write_vectored(&[IoSlice::new(header), IoSlice::new(msg)]) {
            Ok(n) => break n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if is_disconnect(&e) => return Err(super::closed()),
            Err(e) => return Err(Error::Io(e)),
        }
    };
    if written == 0 && total > 0 {
        return Err(super::closed());
    }
    if written < header.len() {
        write_all(writer, &header[written..])?;
        write_all(writer, msg)
    } else if written < total {
        write_all(writer, &msg[written - header.len()..])
    } else {
        Ok(())
    }
}

fn write_all<W: Write>(writer: &mut W, bytes: &[u8]) -> Result<()> {
    match writer.write_all(bytes).and_then(|()| writer.flush()) {
        Ok(()) => Ok(()),
        Err(e) if is_disconnect(&e) => Err(super::closed()),
        Err(e) => Err(Error::Io(e)),
    }
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::UnexpectedEof
            | ErrorKind::BrokenPipe
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::NotConnected
    )
}

/// Sets `SO_SNDBUF` and `SO_RCVBUF` on a socket (best effort: the kernel may clamp the values).
pub(crate) fn set_socket_buffers(fd: std::os::fd::RawFd, bytes: usize) -> Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for option in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: `fd` is an open socket owned by the caller for the duration of the call, and
        // the option value points at a live c_int of the stated length.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::Io(io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte stream that hands out at most `step` bytes per `read` and counts the calls.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
        reads: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            let n = buf.len().min(self.step).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn frames_in_pieces_and_bare_messages_arrive_whole_and_in_step() {
        let big: Vec<u8> = (0..3 * READ_BUFFER + 17).map(|i| (i * 7) as u8).collect();
        let mid: Vec<u8> = (0..4096).map(|i| (i * 3) as u8).collect();
        let mut wire = Vec::new();
        {
            let mut f = Framed::new(io::empty(), &mut wire, 1 << 20);
            for _ in 0..40 {
                f.send(b"small").ok();
                f.send(&mid).ok();
            }
            f.send(&big).ok();
            f.send_bare(&mid[..100]).ok();
            f.send_bare(&big).ok();
            f.send(b"after").ok();
        }
        for (step, reads) in [1, 3, 4099, usize::MAX]
            .into_iter()
            .flat_map(|step| [(step, Reads::Bulk), (step, Reads::Bounded)])
        {
            let mut f = Framed::with_reads(
                Trickle {
                    bytes: &wire,
                    step,
                    reads: 0,
                },
                io::sink(),
                1 << 20,
                reads,
            );
            for i in 0..40 {
                assert_eq!(f.recv_with(|b| Ok(b == b"small")).ok(), Some(true), "{i}");
                assert_eq!(f.recv_with(|b| Ok(b == &mid[..])).ok(), Some(true), "{i}");
            }
            assert_eq!(f.recv_with(|b| Ok(b == &big[..])).ok(), Some(true));
            assert_eq!(f.recv_bare(100, |b| Ok(b == &mid[..100])).ok(), Some(true));
            assert_eq!(
                f.recv_bare(big.len(), |b| Ok(b == &big[..])).ok(),
                Some(true)
            );
            assert_eq!(f.recv_with(|b| Ok(b == b"after")).ok(), Some(true));
            assert!(matches!(
                f.recv_with(|b| Ok(b.len())),
                Err(Error::Disconnected)
            ));
        }
    }

    #[test]
    fn a_bare_read_never_runs_past_its_message() {
        // Two bare messages on the wire: the first receive must leave the second in the stream.
        let wire = [1u8; 64];
        let mut f = Framed::new(
            Trickle {
                bytes: &wire,
                step: usize::MAX,
                reads: 0,
            },
            io::sink(),
            1024,
        );
        assert_eq!(f.recv_bare(24, |b| Ok(b.len())).ok(), Some(24));
        assert_eq!(f.reader.inner.bytes.len(), 40, "read past the bare message");
        assert_eq!(
            f.reader.inner.reads, 1,
            "one read for a message that is there whole"
        );
        assert_eq!(f.recv_bare(40, |b| Ok(b.len())).ok(), Some(40));
        assert!(matches!(
            f.recv_bare(1, |b| Ok(b.len())),
            Err(Error::Disconnected)
        ));
    }

    /// A bounded reader asks each `read` for no more than the rest of its frame and the next
    /// header: frames of one length cost one `read` each (after the first header), and a read
    /// never takes a byte of the frame after next.
    #[test]
    fn a_bounded_reader_reads_a_frame_and_the_next_header_per_call() {
        let mut wire = Vec::new();
        {
            let mut f = Framed::new(io::empty(), &mut wire, 1 << 20);
            for i in 0..10u8 {
                f.send(&[i; 128]).ok();
            }
            f.send(&[7; 300]).ok();
            f.send(&[8; 128]).ok();
        }
        let mut f = Framed::with_reads(
            Trickle {
                bytes: &wire,
                step: usize::MAX,
                reads: 0,
            },
            io::sink(),
            1 << 20,
            Reads::Bounded,
        );
        for i in 0..10u8 {
            assert_eq!(f.recv_with(|b| Ok(b == [i; 128])).ok(), Some(true), "{i}");
            // Never more than the next frame's header waits in the buffer.
            assert!(f.reader.end - f.reader.start <= HEADER, "{i}");
        }
        // First read: the header alone (no length known yet); then one read per frame.
        assert_eq!(f.reader.inner.reads, 1 + 10);
        assert_eq!(f.recv_with(|b| Ok(b == [7; 300])).ok(), Some(true));
        assert_eq!(f.recv_with(|b| Ok(b == [8; 128])).ok(), Some(true));
        assert!(matches!(
            f.recv_with(|b| Ok(b.len())),
            Err(Error::Disconnected)
        ));
        // The bulk reader takes it all at once.
        let mut f = Framed::new(
            Trickle {
                bytes: &wire,
                step: usize::MAX,
                reads: 0,
            },
            io::sink(),
            1 << 20,
        );
        for _ in 0..12 {
            assert!(f.recv_with(|b| Ok(b.len())).is_ok());
        }
        assert_eq!(f.reader.inner.reads, 1);
    }

    #[test]
    fn frames_round_trip_and_bad_lengths_are_corrupt() {
        let mut wire = Vec::new();
        {
            let mut f = Framed::new(io::empty(), &mut wire, 1024);
            f.send(b"hello").ok();
            f.send_json(&("a", 1)).ok();
            f.send(&[]).ok();
            assert!(matches!(f.send(&[0; 2000]), Err(Error::TooLarge { .. })));
        }
        let mut f = Framed::new(&wire[..], io::sink(), 1024);
        assert_eq!(
            f.recv_with(|b| Ok(b.to_vec())).ok(),
            Some(b"hello".to_vec())
        );
        assert_eq!(
            f.recv_with(|b| Ok(b.to_vec())).ok(),
            Some(br#"["a",1]"#.to_vec())
        );
        assert_eq!(f.recv_with(|b| Ok(b.len())).ok(), Some(0));
        assert!(matches!(
            f.recv_with(|b| Ok(b.len())),
            Err(Error::Disconnected)
        ));

        let bogus = [0xff, 0xff, 0xff, 0x7f, 1, 2, 3];
        let mut f = Framed::new(&bogus[..], io::sink(), 1024);
        assert!(matches!(
            f.recv_with(|b| Ok(b.len())),
            Err(Error::Garbled(_))
        ));
    }
}
