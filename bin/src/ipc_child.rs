//! The child process: `ipc-child`, or `ipc-parent` itself when no `ipc-child` was built next to
//! it (it then runs this with [`AS_CHILD_ENV`] in its environment). The far end of the
//! ping-pong: the parent spawns it with the transport and the address to connect to; it answers
//! until the parent closes the transport or goes away.
//!
//! With `--client ROW` it is one client of an `ipc-parent clients` run instead (see
//! `shmlink_harness::client`): it connects to the parent's server for that row, makes checked
//! round trips and prints its result line on standard output. With `--fanout ROW` it is one
//! subscriber of an `ipc-parent fanout` run (see `shmlink_harness::fanout`): it joins the
//! parent's publisher for that row, checks and times every message until the end message, and
//! prints its result lines on standard output.
//!
//! Otherwise it never writes to standard output (that may be the `pipe` transport); diagnostics
//! go to standard error. It exits on its own when the parent dies: `PR_SET_PDEATHSIG` on Linux, and
//! every wait of every transport checks the parent's liveness.

use crate::workload as common;

use std::process::ExitCode;
use std::time::Duration;

use crate::client::{run_client, ClientRow, ClientSpec};
use crate::fanout::{run_subscriber, FanoutRow, SubscriberSpec};
use crate::stream_format;
use crate::transport::{self, Kind, Options, Peer, Transport, Visitor};
use crate::Error;
use anyhow::{bail, Context};
use clap::Parser;
use common::{check_stamp, MessageKind, OwnedPing, Ping, PingMsg, Workload};
use shmlink::WaitStrategy;

/// Answers the parent's pings over one transport.
#[derive(Debug, Parser)]
#[command(name = "ipc-child", version)]
#[command(group(clap::ArgGroup::new("role").args(["client", "fanout"])))]
struct Args {
    /// Transport to connect with.
    #[arg(long, required_unless_present_any = ["client", "fanout"])]
    transport: Option<Kind>,
    /// What the parent's listener reported: mapping name, socket path, TCP address, ...
    #[arg(long)]
    address: String,
    /// Workload: the JSON ping / pong, or raw bytes echoed back.
    #[arg(long, value_enum, default_value = "json")]
    message: MessageKind,
    /// Wait strategy of the `shm` transport.
    #[arg(long, default_value = "spin")]
    wait: WaitStrategy,
    /// Bytes per direction (ring, mailbox, socket buffers).
    #[arg(long, default_value = "1MiB", value_parser = common::parse_size)]
    ring_size: usize,
    /// The largest message the parent will send (frame limit of the stream transports).
    #[arg(long, default_value = "1MiB", value_parser = common::parse_size)]
    max_message: usize,
    /// The parent's id (JSON workload).
    #[arg(long, default_value = "")]
    parent_id: String,
    /// This child's id (JSON workload).
    #[arg(long, default_value = "")]
    child_id: String,
    /// The parent's process id; the child exits if it is not (or no longer) its parent. Without
    /// it, the process that spawned the child is watched.
    #[arg(long)]
    parent_pid: Option<u32>,
    /// Do not watch any process: only the transport's own end-of-file (a remote TCP peer).
    #[arg(long)]
    standalone: bool,
    /// What to do once connected (the modes other than `ping-pong` serve the tests).
    #[arg(long, value_enum, default_value = "ping-pong")]
    mode: Mode,
    /// Message count for `burst` and `close-after`.
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// Be one client of an `ipc-parent clients` run, over this row (`--address`: the row's
    /// server), instead of the far end of a transport.
    #[arg(long, conflicts_with_all = ["transport", "mode"])]
    client: Option<ClientRow>,
    /// Be one subscriber of an `ipc-parent fanout` run, over this row (`--address`: the
    /// row's topic, channel, socket or service), instead of the far end of a transport.
    #[arg(long, conflicts_with_all = ["transport", "mode", "client"])]
    fanout: Option<FanoutRow>,
    /// Bytes per message of a client or a subscriber.
    #[arg(long, default_value = "64", value_parser = common::parse_size, requires = "role")]
    size: usize,
    /// A client's untimed round trips: for this long.
    #[arg(long, default_value = "250ms", value_parser = common::parse_duration, requires = "client")]
    warmup: Duration,
    /// A client's timed round trips: for this long ...
    #[arg(long, default_value = "2s", value_parser = common::parse_duration, requires = "client")]
    duration: Duration,
    /// ... or exactly this many.
    #[arg(long, requires = "client")]
    timed_count: Option<u64>,
    /// A client's pause before each round trip.
    #[arg(long, default_value = "0s", value_parser = common::parse_duration, requires = "client")]
    pace: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// Answer the workload of `--message` (the harness).
    PingPong,
    /// Send every message back as it came.
    Echo,
    /// Send `--count` numbered messages, then receive `--count` and check their order, then
    /// send `ok` (or what was wrong).
    Burst,
    /// Echo `--count` messages, close the transport cleanly, stay alive two seconds.
    CloseAfter,
    /// Receive one-way stream phases: check every message's sequence number and digest every
    /// byte, confirm each phase with a verdict (see `shmlink_harness::stream_format`).
    Stream,
    /// The same with bare messages: fixed-size, unframed, one system call per message (kernel
    /// transports only).
    BareStream,
    /// The same in batches: many fixed-size messages per call (shm and the kernel byte
    /// streams).
    BatchStream,
}

impl Mode {
    /// Whether the child only receives (a stream), so that TCP may hold small segments back
    /// (Nagle's algorithm on); every other mode answers each message, and waits for no segment.
    fn is_one_way(self) -> bool {
        match self {
            Mode::PingPong | Mode::Echo | Mode::Burst | Mode::CloseAfter => false,
            Mode::Stream | Mode::BareStream | Mode::BatchStream => true,
        }
    }
}

/// Set in the environment of every child the parent spawns: `ipc-parent` started with it runs
/// as the child (the parent spawns itself when no `ipc-child` binary is next to it).
pub const AS_CHILD_ENV: &str = "IPC_PARENT_AS_CHILD";

/// The child's `main`.
pub fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ipc-child: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    let peer = if args.standalone {
        Peer::unknown()
    } else {
        die_with_parent();
        let peer = Peer::parent();
        if let Some(expected) = args.parent_pid {
            if peer.pid() != Some(expected) {
                bail!("parent {expected} is already gone");
            }
        }
        peer
    };
    if let Some(row) = args.client {
        let spec = ClientSpec {
            row,
            address: args.address.clone(),
            wait: args.wait,
            size: args.size,
            warmup: args.warmup,
            duration: args.duration,
            count: args.timed_count,
            pace: args.pace,
        };
        let result = run_client(&spec).with_context(|| format!("{} client", row.name()))?;
        println!("{}", result.line());
        return Ok(());
    }
    if let Some(row) = args.fanout {
        let spec = SubscriberSpec {
            row,
            address: args.address.clone(),
            size: args.size,
            ring_size: args.ring_size,
        };
        let result = run_subscriber(&spec).with_context(|| format!("{} subscriber", row.name()))?;
        println!("{}", result.lines());
        return Ok(());
    }
    let Some(kind) = args.transport else {
        bail!("--transport is required");
    };
    let opts = Options {
        wait: args.wait,
        ring_size: args.ring_size,
        max_message: args.max_message,
        connect_timeout: Duration::from_secs(10),
        // A stream is one way: Nagle's algorithm on, as on the parent's side.
        tcp_nodelay: !args.mode.is_one_way(),
        ..Options::default()
    };
    transport::dispatch(
        kind,
        Serve {
            args: &args,
            opts: &opts,
            peer,
        },
    )
}

#[cfg(target_os = "linux")]
fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG, SIGKILL) only sets a flag on this process.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent() {}

struct Serve<'a> {
    args: &'a Args,
    opts: &'a Options,
    peer: Peer,
}

impl Visitor for Serve<'_> {
    type Output = anyhow::Result<()>;

    fn visit<T: Transport>(self) -> anyhow::Result<()> {
        let mut t = T::connect(&self.args.address, self.opts, self.peer)
            .with_context(|| format!("connecting {} to {}", T::KIND, self.args.address))?;
        let result = match self.args.mode {
            Mode::PingPong => ping_pong(&mut t, self.args),
            Mode::Echo => echo(&mut t, u64::MAX),
            Mode::Burst => burst(&mut t, self.args.count),
            Mode::Stream => stream(&mut t),
            Mode::BareStream => bare_stream(&mut t),
            Mode::BatchStream => batch_stream(&mut t),
            Mode::CloseAfter => {
                let r = echo(&mut t, self.args.count);
                drop(t);
                std::thread::sleep(Duration::from_secs(2));
                return r.map_err(anyhow::Error::from);
            }
        };
        match result {
            // The parent closed the transport or exited: the normal end.
            Err(e) if e.is_disconnect() => Ok(()),
            other => other.map_err(anyhow::Error::from),
        }
    }
}

fn ping_pong<T: Transport>(t: &mut T, args: &Args) -> Result<(), Error> {
    match Workload::of(T::KIND, args.message) {
        Workload::Json => loop {
            let sent_at_ms = t.recv_json::<PingMsg, _>(|ping| {
                if ping.sender_id != args.parent_id || ping.receiver_id != args.child_id {
                    return Err(crate::garbled(format!("unexpected ping {ping:?}")));
                }
                Ok(ping.sent_at_ms)
            })?;
            let pong = Ping {
                sender_id: &args.child_id,
                receiver_id: &args.parent_id,
                sent_at_ms,
            };
            t.send_json(&pong)?;
        },
        Workload::ReferenceJson => loop {
            let ping: OwnedPing = t.recv_with(|bytes| Ok(serde_json::from_slice(bytes)?))?;
            if ping.sender_id != args.parent_id || ping.receiver_id != args.child_id {
                return Err(crate::garbled(format!("unexpected ping {ping:?}")));
            }
            let pong = OwnedPing {
                sender_id: args.child_id.clone(),
                receiver_id: args.parent_id.clone(),
                sent_at_ms: ping.sent_at_ms,
            };
            let bytes = serde_json::to_vec(&pong)?;
            t.send(&bytes)?;
        },
        Workload::Raw | Workload::Bounce => echo(t, u64::MAX),
    }
}

fn echo<T: Transport>(t: &mut T, count: u64) -> Result<(), Error> {
    let mut buf = Vec::new();
    for _ in 0..count {
        t.echo(&mut buf)?;
    }
    Ok(())
}

/// Message `i` of a burst: `i` stamped over a length that varies with `i`.
fn burst_message(i: u64, max: usize, buf: &mut Vec<u8>) {
    let len = (8 + (i as usize * 7) % 56).min(max);
    buf.clear();
    buf.resize(len, (i as u8).wrapping_mul(31));
    common::stamp(buf, i);
}

fn burst<T: Transport>(t: &mut T, count: u64) -> Result<(), Error> {
    let mut buf = Vec::new();
    let max = t.max_message();
    for i in 0..count {
        burst_message(i, max, &mut buf);
        t.send(&buf)?;
    }
    let mut verdict = String::from("ok");
    for i in 0..count {
        burst_message(i, max, &mut buf);
        let expected_len = buf.len();
        let good = t.recv_with(|bytes| Ok(check_stamp(bytes, expected_len, i)))?;
        if !good && verdict == "ok" {
            verdict = format!("message {i} out of order or damaged");
        }
    }
    t.send(verdict.as_bytes())
}

fn stream<T: Transport>(t: &mut T) -> Result<(), Error> {
    loop {
        stream_format::receive_phase(t)?;
    }
}

fn bare_stream<T: Transport>(t: &mut T) -> Result<(), Error> {
    loop {
        stream_format::receive_bare_phase(t)?;
    }
}

fn batch_stream<T: Transport>(t: &mut T) -> Result<(), Error> {
    loop {
        stream_format::receive_batch_phase(t)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The modes the parent starts for a one-way stream (by their command-line names) are the
    /// ones that leave Nagle's algorithm on; every mode that answers turns it off.
    #[test]
    fn nagle_stays_on_for_the_stream_modes_and_off_for_every_mode_that_answers() {
        for mode in Mode::value_variants() {
            let name = mode.to_possible_value().expect("every mode has a name");
            let streams = matches!(name.get_name(), "stream" | "bare-stream" | "batch-stream");
            assert_eq!(mode.is_one_way(), streams, "mode {}", name.get_name());
        }
    }
}
