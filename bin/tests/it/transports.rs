//! One behaviour suite, generic over the transport, run against every backend: messages arrive
//! in order, a large message arrives whole, a peer that closes is seen as closed, a peer that is
//! killed is an error, never a hang, bare messages (kernel transports) arrive whole and in
//! order while the other transports refuse them, and so do batches (shm and the kernel byte
//! streams).
//!
//! This test process is the parent; the other end is the real `ipc-child` binary in one of its
//! test modes.

use shmlink_test_support as common;

use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use common::{leftovers, serial, unique, ChildGuard, Watchdog};
use shmlink_harness::stream_format::{self, Stream, Verdict};
use shmlink_harness::transport::{
    fifo::Fifo, floor::Floor, ipc_channel::IpcChannel, memfd::Memfd, pipe::Pipe, posixmq::PosixMq,
    raw_sync::RawSync, shm::Shm, socketpair::Socketpair, tcp::Tcp, uds::Uds, ChildStdio, Kind,
    Listener, Options, Peer, Transport, HARNESS_PREFIX,
};
use shmlink_harness::Error;

/// Generous: debug builds on a loaded two-core machine.
const LIMIT: Duration = Duration::from_secs(60);

/// A connected transport and the child on the other end. Field order: the transport closes
/// before the child is reaped.
struct Session<T> {
    t: T,
    child: ChildGuard,
    name: String,
}

fn start<T: Transport>(mode: &str, count: u64) -> Session<T> {
    let name = unique(T::KIND.as_str());
    let opts = Options::default();
    let listener = match T::listen(&name, &opts) {
        Ok(l) => l,
        Err(e) => panic!("{}: listen: {e}", T::KIND),
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_ipc-child"));
    command
        .args(["--transport", T::KIND.as_str(), "--address"])
        .arg(listener.address())
        .args(["--message", "raw", "--mode", mode, "--count"])
        .arg(count.to_string())
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .stderr(Stdio::inherit());
    if T::KIND.needs_stdio() {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
    } else {
        command.stdin(Stdio::null()).stdout(Stdio::null());
    }
    let mut child = ChildGuard::spawn(command);
    let stdio = ChildStdio {
        stdin: child.child.stdin.take(),
        stdout: child.child.stdout.take(),
    };
    let t = match listener.accept(stdio, Peer::child(child.pid())) {
        Ok(t) => t,
        Err(e) => panic!("{}: accept: {e}", T::KIND),
    };
    Session { t, child, name }
}

impl<T: Transport> Session<T> {
    /// Closes the transport, reaps the child and checks that nothing named after the session
    /// is left in /dev/shm, the temporary directories or (posixmq) the message queues.
    fn finish(self) {
        self.finish_as("exited cleanly", |status| status.success());
    }

    /// [`finish`](Session::finish) for a child the test killed: it must have died of SIGKILL.
    fn finish_killed(self) {
        self.finish_as("was killed", |status| {
            std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGKILL)
        });
    }

    fn finish_as(self, expected: &str, ended_as_expected: impl Fn(ExitStatus) -> bool) {
        let Session { t, mut child, name } = self;
        drop(t);
        let status = child.wait_for(LIMIT);
        assert!(
            ended_as_expected(status),
            "{}: the child should have {expected}, but {status}",
            T::KIND
        );
        let mut left = leftovers(&name);
        if T::KIND == Kind::PosixMq {
            left.extend(queues_left(&name));
        }
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// The message queues of the posixmq transport named after `name` that still exist (the queue
/// file system may not be mounted, so each name is tried with `mq_open`).
fn queues_left(name: &str) -> Vec<String> {
    let mut left = Vec::new();
    for dir in ["p2c", "c2p"] {
        let queue = format!("/{HARNESS_PREFIX}{name}-mq-{dir}");
        let Ok(c) = std::ffi::CString::new(queue.clone()) else {
            continue;
        };
        // SAFETY: `c` is NUL-terminated; without O_CREAT no further argument is read.
        let mqd = unsafe { libc::mq_open(c.as_ptr(), libc::O_RDONLY) };
        if mqd >= 0 {
            // SAFETY: `mqd` was just opened here.
            unsafe { libc::mq_close(mqd) };
            // SAFETY: as above.
            unsafe { libc::mq_unlink(c.as_ptr()) };
            left.push(queue);
        }
    }
    left
}

/// The child's `burst` message `i` (same formula as `ipc-child`).
fn burst_message(i: u64, max: usize) -> Vec<u8> {
    let len = (8 + (i as usize * 7) % 56).min(max);
    let mut buf = vec![(i as u8).wrapping_mul(31); len];
    let head = i.to_le_bytes();
    let n = len.min(8);
    buf[..n].copy_from_slice(&head[..n]);
    if len > 8 {
        if let Some(last) = buf.last_mut() {
            *last = i as u8;
        }
    }
    buf
}

fn order<T: Transport>() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, &format!("{} order", T::KIND));
    const COUNT: u64 = 300;
    let mut s = start::<T>("burst", COUNT);
    let max = s.t.max_message();
    for i in 0..COUNT {
        let expected = burst_message(i, max);
        let got = s.t.recv_with(|b| Ok(b.to_vec()));
        assert_eq!(
            got.ok().as_deref(),
            Some(&expected[..]),
            "{}: message {i}",
            T::KIND
        );
    }
    for i in 0..COUNT {
        if let Err(e) = s.t.send(&burst_message(i, max)) {
            panic!("{}: send {i}: {e}", T::KIND);
        }
    }
    let verdict =
        s.t.recv_with(|b| Ok(String::from_utf8_lossy(b).into_owned()));
    match verdict {
        Ok(v) => assert_eq!(v, "ok", "{}: child's verdict", T::KIND),
        Err(e) => panic!("{}: receiving the child's verdict: {e}", T::KIND),
    }
    s.finish();
}

fn large_message<T: Transport>() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, &format!("{} large message", T::KIND));
    let mut s = start::<T>("echo", 0);
    let max = s.t.max_message();
    let len = max.min(256 * 1024);
    let msg: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
    for _ in 0..3 {
        if let Err(e) = s.t.send(&msg) {
            panic!("{}: send {len} bytes: {e}", T::KIND);
        }
        let echoed = s.t.recv_with(|b| Ok(b == &msg[..]));
        assert!(
            matches!(echoed, Ok(true)),
            "{}: {len}-byte echo differs",
            T::KIND
        );
    }
    if max <= 32 << 20 {
        let too_large = vec![0u8; max + 1];
        assert!(
            matches!(s.t.send(&too_large), Err(Error::TooLarge { .. })),
            "{}: a message over the maximum must be refused",
            T::KIND
        );
    }
    s.finish();
}

fn peer_closes<T: Transport>() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, &format!("{} peer closes", T::KIND));
    let mut s = start::<T>("close-after", 1);
    assert!(s.t.send(b"one").is_ok(), "{}: send", T::KIND);
    let echoed = s.t.recv_with(|b| Ok(b.to_vec()));
    assert_eq!(
        echoed.ok().as_deref(),
        Some(&b"one"[..]),
        "{}: echo",
        T::KIND
    );
    // The child closed its end and stays alive for two seconds: only the close tells, and it
    // is a close, not a death.
    match s.t.recv_with(|b| Ok(b.len())) {
        Err(Error::Disconnected) => {}
        other => panic!("{}: expected a disconnect, got {other:?}", T::KIND),
    }
    s.finish();
}

fn peer_killed<T: Transport>() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, &format!("{} peer killed", T::KIND));
    let mut s = start::<T>("echo", 0);
    assert!(s.t.send(b"ping").is_ok(), "{}: send", T::KIND);
    assert!(
        s.t.recv_with(|b| Ok(b == b"ping")).unwrap_or(false),
        "{}: echo",
        T::KIND
    );
    s.child.signal(libc::SIGKILL);
    // The child was killed mid-conversation: the next receive must fail, not hang.
    match s.t.recv_with(|b| Ok(b.len())) {
        Err(Error::Disconnected | Error::PeerGone { .. }) => {}
        other => panic!(
            "{}: expected the dead peer to be noticed, got {other:?}",
            T::KIND
        ),
    }
    s.finish_killed();
}

fn bare_messages<T: Transport>() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, &format!("{} bare messages", T::KIND));
    if !T::KIND.has_bare() {
        let mut s = start::<T>("echo", 0);
        assert!(
            matches!(s.t.send_bare(b"12345678"), Err(Error::InvalidConfig(_))),
            "{}: a transport without a bare row refuses bare messages",
            T::KIND
        );
        s.finish();
        return;
    }
    let mut s = start::<T>("bare-stream", 0);
    // Sizes that fill pipe pages exactly, straddle them, and (but posixmq, whose bare message is
    // one queue message) outgrow the frame reader's buffer.
    let mut sizes = vec![8, 129, 4096, 4100];
    if T::KIND != Kind::PosixMq {
        sizes.push(100_000);
    }
    phases(&mut s.t, "bare", &sizes, stream_format::send_bare_phase);
    s.finish();
}

/// Runs phases of one and of 700 messages of each of `sizes` through `phase` (the sending
/// side of a `what` phase), each verdict checked.
fn phases<T: Transport>(
    t: &mut T,
    what: &str,
    sizes: &[usize],
    phase: fn(&mut T, &mut Stream, u64) -> Result<Verdict, Error>,
) {
    for &size in sizes {
        let mut stream = Stream::new(size);
        for count in [1, 700] {
            let verdict = match phase(t, &mut stream, count) {
                Ok(v) => v,
                Err(e) => panic!("{}: {what} phase of {count} x {size} B: {e}", T::KIND),
            };
            if let Err(e) = verdict.check(&stream, count) {
                panic!("{}: {what} phase of {count} x {size} B: {e}", T::KIND);
            }
        }
    }
}

fn batches<T: Transport>() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, &format!("{} batches", T::KIND));
    if !T::KIND.has_batch() {
        let mut s = start::<T>("echo", 0);
        assert!(
            matches!(
                s.t.send_batch(&[b"12345678".to_vec()]),
                Err(Error::InvalidConfig(_))
            ),
            "{}: a transport without a batch row refuses batches",
            T::KIND
        );
        s.finish();
        return;
    }
    let mut s = start::<T>("batch-stream", 0);
    // Batches whose bytes fill pipe pages exactly, straddle them and outgrow the frame
    // reader's buffer; counts that leave a partial batch.
    phases(
        &mut s.t,
        "batch",
        &[8, 129, 4096, 4100, 100_000],
        stream_format::send_batch_phase,
    );
    s.finish();
}

macro_rules! conformance {
    ($($module:ident => $transport:ty),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[test]
            fn messages_arrive_in_order() {
                order::<$transport>();
            }

            #[test]
            fn a_large_message_arrives_whole() {
                large_message::<$transport>();
            }

            #[test]
            fn a_peer_that_closes_is_seen() {
                peer_closes::<$transport>();
            }

            #[test]
            fn a_killed_peer_is_an_error_not_a_hang() {
                peer_killed::<$transport>();
            }

            #[test]
            fn bare_messages_arrive_whole_or_are_refused() {
                bare_messages::<$transport>();
            }

            #[test]
            fn batches_arrive_whole_and_in_order_or_are_refused() {
                batches::<$transport>();
            }
        }
    )*};
}

conformance! {
    shm => Shm,
    ipc_channel => IpcChannel,
    raw_sync => RawSync,
    memfd => Memfd,
    pipe => Pipe,
    fifo => Fifo,
    socketpair => Socketpair,
    posixmq => PosixMq,
    uds => Uds,
    tcp => Tcp,
    floor => Floor,
}
