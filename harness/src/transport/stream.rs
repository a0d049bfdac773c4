//! Length-prefixed framing over any byte stream (pipe, Unix socket, TCP).
//!
//! A frame is a little-endian `u32` length followed by that many bytes. The reader reads up to
//! [`READ_BUFFER`] bytes per `read` system call and lends whole frames straight from that buffer,
//! so many small frames cost one `read`; the writer hands header and payload to one `writev`, so a
//! frame costs one system call and no copy in this process.
//!
//! The same stream also carries *bare* messages ([`Framed::send_bare`], [`Framed::recv_bare`]):
//! no header, one `write` of the message, and `read`s of exactly the rest of the message until it
//! is whole, as a minimal C program does when both sides know the size.

use std::io::{self, BufRead, BufReader, ErrorKind, IoSlice, Read, Write};

use serde::Serialize;

use super::{Options, Result};
use crate::Error;

/// Bytes in a frame header.
const HEADER: usize = 4;

/// Bytes the reader asks for per `read`: many small frames, or several 4 KiB ones, per call.
pub(crate) const READ_BUFFER: usize = 64 * 1024;

/// The frame limit of the stream backends: sixteen times the buffer size (at least 16 MiB), or
/// [`Options::max_message`] when that is larger; never past the `u32` length header.
pub(crate) fn max_message(opts: &Options) -> usize {
    opts.ring_size
        .max(1 << 20)
        .saturating_mul(16)
        .max(opts.max_message)
        .min(u32::MAX as usize)
}

/// A framed duplex stream.
pub(crate) struct Framed<R: Read, W: Write> {
    reader: BufReader<R>,
    writer: W,
    /// Reused for outgoing JSON frames.
    out: Vec<u8>,
    /// Reused for incoming frames that do not sit whole in the reader's buffer, and for bare
    /// messages.
    inc: Vec<u8>,
    max: usize,
}

impl<R: Read, W: Write> Framed<R, W> {
    pub(crate) fn new(reader: R, writer: W, max: usize) -> Self {
        Framed {
            reader: BufReader::with_capacity(READ_BUFFER, reader),
            writer,
            out: Vec::new(),
            inc: Vec::new(),
            max: max.min(u32::MAX as usize),
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
        write_frame(&mut self.writer, &header, msg)
    }

    /// Sends `msg` as it is, no header: one `write` (more only if the kernel takes part of it).
    pub(crate) fn send_bare(&mut self, msg: &[u8]) -> Result<()> {
        write_all(&mut self.writer, msg)
    }

    /// Receives one bare message of `size` bytes: `read`s of exactly what is missing until it is
    /// whole (never past it, so the stream stays in step), then lends it to `read`. Bytes the
    /// frame reader had already buffered come first.
    pub(crate) fn recv_bare<T>(
        &mut self,
        size: usize,
        read: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        if size > self.max {
            return Err(self.too_large(size));
        }
        self.inc.resize(size, 0);
        let buffered = self.reader.buffer().len().min(size);
        if buffered > 0 {
            self.inc[..buffered].copy_from_slice(&self.reader.buffer()[..buffered]);
            self.reader.consume(buffered);
        }
        // The frame reader's buffer is empty now (or the message was whole in it): read from
        // the stream itself.
        read_exact(self.reader.get_mut(), &mut self.inc[buffered..])?;
        read(&self.inc)
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
        let mut header = [0u8; HEADER];
        read_exact(&mut self.reader, &mut header)?;
        let len = u32::from_le_bytes(header) as usize;
        if len > self.max {
            return Err(crate::garbled(format!(
                "frame of {len} bytes announced, the maximum is {}",
                self.max
            )));
        }
        // Lend straight from the reader's buffer when the whole frame is already there.
        let buffered = self.reader.buffer();
        if buffered.len() >= len {
            let result = read(&buffered[..len]);
            self.reader.consume(len);
            return result;
        }
        self.inc.resize(len, 0);
        read_exact(&mut self.reader, &mut self.inc)?;
        read(&self.inc)
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

/// Reads exactly `buf.len()` bytes. End of file, whether between frames (a clean close) or
/// inside one (a peer that died mid-write), is `Disconnected`: nothing more will come.
fn read_exact<R: Read>(reader: &mut R, buf: &mut [u8]) -> Result<()> {
    match reader.read_exact(buf) {
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
