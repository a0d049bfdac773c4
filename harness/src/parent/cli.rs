//! The command line of `ipc-parent`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use shmlink::WaitStrategy;

use crate::workload::{self as common, MessageKind};

/// Message sizes of `--sweep` unless `--sizes` says otherwise.
pub(crate) const DEFAULT_SIZES: &str = "1KiB,64KiB,1MiB,16MiB";

/// Message sizes of `--stream` unless `--sizes` says otherwise.
pub(crate) const DEFAULT_STREAM_SIZES: &str = "8,64,128,256,512,1KiB,2KiB,4KiB,64KiB";

/// Bytes per direction of a ping-pong run unless `--ring-size` says otherwise.
pub(crate) const DEFAULT_RING: usize = 1 << 20;

/// Bytes per direction of a sweep: the smallest power of two whose largest frame
/// (`capacity / 2 - 72`) holds the largest message of the sweep, so every message travels as
/// one frame, written and read in place (64 MiB for 16 MiB messages). Small messages do not pay
/// for the size: a lightly used ring rewinds to its start and stays in the caches.
pub(crate) fn sweep_ring(largest: usize) -> usize {
    (2 * (largest + 128)).next_power_of_two().max(DEFAULT_RING)
}

/// How fast can two processes on this machine talk? Ping-pong over every transport.
#[derive(Debug, Parser)]
#[command(name = "ipc-parent", version, args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Cmd>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Draw an SVG bar chart of a `--json` result: best round trips per second, or for a
    /// `--sweep` result MB/s grouped by message size (log scale).
    Chart {
        /// The JSON document `ipc-parent --json` wrote.
        input: PathBuf,
        /// Where to write the SVG.
        #[arg(short, long, default_value = "ipc-chart.svg")]
        output: PathBuf,
    },
    /// One table from a debug and a release `--json` result, with the release / debug ratio.
    Compare {
        /// Result of a debug build.
        debug: PathBuf,
        /// Result of a release build.
        release: PathBuf,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunArgs {
    /// Rows to run: a comma list of shm, ipc-channel, raw-sync, pipe, fifo, socketpair, posixmq,
    /// uds, tcp, and the limit rows floor and serde (JSON messages only), or `all`. With
    /// `--sweep`, `all` is every transport but floor, and the memcpy limit row is always added;
    /// with `--stream`, likewise, and the ring limit row too. With `--clients`, the clients rows:
    /// plain, selector, threads, async, uds-poll, uds-threads, ipc-channel.
    #[arg(long, short, default_value = "all")]
    pub(crate) transport: String,
    /// Length of one measured round (e.g. 200ms, 5s); with `--stream`, what the default
    /// `--count` aims at [default: 2s, 1s with --stream].
    #[arg(long, short, value_parser = common::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Rounds per transport; the transports are interleaved round by round.
    #[arg(long, short, default_value_t = 1)]
    pub(crate) rounds: u32,
    /// Unmeasured ping-pong before each round.
    #[arg(long, default_value = "250ms", value_parser = common::parse_duration)]
    pub(crate) warmup: Duration,
    /// The JSON ping / pong of the reference workload, or raw bytes.
    #[arg(long, value_enum, default_value = "json")]
    pub(crate) message: MessageKind,
    /// Bytes per raw message (`--message raw`).
    #[arg(long, default_value = "64", value_parser = common::parse_size)]
    pub(crate) size: usize,
    /// Payload sweep: raw messages of every `--sizes` size echoed back over every transport,
    /// in MB/s with both directions counted, beside a memcpy row measured in the same run.
    #[arg(long, group = "mode", conflicts_with_all = ["message", "size", "no_spawn"])]
    pub(crate) sweep: bool,
    /// One-way streaming: the parent sends `--count` messages of every `--sizes` size, the child
    /// checks each one (sequence number, a digest of every byte) and confirms the count; the
    /// time runs until that confirmation. Reports messages/s and MB/s per transport and size,
    /// beside the ring between two threads and memcpy.
    #[arg(long, group = "mode", conflicts_with_all = ["message", "size", "no_spawn"])]
    pub(crate) stream: bool,
    /// N client processes against one server in this process, for every N of this comma list
    /// (e.g. 1,4,16): aggregate round trips per second and per-client p99 of checked raw
    /// `--size` messages, per row of `--transport` (plain, selector, threads, async,
    /// uds-poll, uds-threads, ipc-channel, or `all`).
    #[arg(
        long,
        value_delimiter = ',',
        conflicts_with_all = ["sweep", "stream", "message", "sizes", "no_spawn"]
    )]
    pub(crate) clients: Vec<usize>,
    /// Messages per row of `--stream` [default: as many as fill `--duration` at the rate the
    /// warmup measured, fixed after the first round]; with `--clients`, timed round trips per
    /// client instead of `--duration`.
    #[arg(long)]
    pub(crate) count: Option<u64>,
    /// Message sizes of `--sweep` or `--stream`, a comma list [default: 1KiB,64KiB,1MiB,16MiB
    /// for --sweep; 8,64,128,256,512,1KiB,2KiB,4KiB,64KiB for --stream].
    #[arg(long, requires = "mode")]
    pub(crate) sizes: Option<String>,
    /// How the shm transport waits: spin, yield or block, a comma list, or `all` (one shm row
    /// per strategy); with `--clients`, one strategy, for the shm clients and the servers with a
    /// thread per client [default: spin; block with --clients].
    #[arg(long, value_parser = parse_waits)]
    pub(crate) wait: Option<Waits>,
    /// A pause between two round trips (e.g. 1ms), so that the waiting side really sleeps and
    /// the wake-up path is what is measured. The latency columns count only the round trips.
    #[arg(long, default_value = "0s", value_parser = common::parse_duration)]
    pub(crate) pace: Duration,
    /// Busy background processes (a shell loop each) started for the run and stopped after
    /// it: a busy machine, reproducibly.
    #[arg(long, default_value_t = 0)]
    pub(crate) load: usize,
    /// Bytes per direction: shm ring, raw-sync mailbox, socket and pipe buffers [default: 1MiB,
    /// 8MiB with --sweep].
    #[arg(long, value_parser = common::parse_size)]
    pub(crate) ring_size: Option<usize>,
    /// Address the tcp transport binds (the child connects to what it got).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) tcp_addr: String,
    /// Print exactly one JSON document on standard output instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the JSON document to this file (the table still goes to standard output).
    #[arg(long, value_name = "PATH")]
    pub(crate) save: Option<PathBuf>,
    /// The child binary (default: `ipc-child` next to this executable).
    #[arg(long)]
    pub(crate) child: Option<PathBuf>,
    /// Do not spawn the child: wait for a peer started by hand, for example `ipc-child` on
    /// another host with `--transport tcp --tcp-addr 0.0.0.0:7000` (the parent prints the
    /// command each round). Only for transports a remote peer can reach (`tcp`).
    #[arg(long)]
    pub(crate) no_spawn: bool,
    /// Base of the names of mappings, sockets and rendezvous files (default: `h<pid>`).
    #[arg(long)]
    pub(crate) name: Option<String>,
}

impl RunArgs {
    /// Length of one measured round (or what a stream row aims at).
    pub(crate) fn duration(&self) -> Duration {
        self.duration
            .unwrap_or(Duration::from_secs(if self.stream { 1 } else { 2 }))
    }

    /// The wait strategies of `--wait` (spin unless given).
    pub(crate) fn waits(&self) -> Waits {
        self.wait
            .clone()
            .unwrap_or_else(|| Waits(vec![WaitStrategy::Spin]))
    }

    /// The message sizes of a sweep or a stream.
    pub(crate) fn sizes(&self) -> &str {
        match &self.sizes {
            Some(sizes) => sizes,
            None if self.stream => DEFAULT_STREAM_SIZES,
            None => DEFAULT_SIZES,
        }
    }
}

/// The wait strategies of `--wait`, in the order given.
#[derive(Debug, Clone)]
pub(crate) struct Waits(pub(crate) Vec<WaitStrategy>);

impl Waits {
    /// The first strategy: what the rows other than shm's are told.
    pub(crate) fn first(&self) -> WaitStrategy {
        self.0.first().copied().unwrap_or(WaitStrategy::Spin)
    }
}

fn parse_waits(s: &str) -> anyhow::Result<Waits> {
    if s.trim() == "all" {
        return Ok(Waits(WaitStrategy::ALL.to_vec()));
    }
    let mut waits = Vec::new();
    for item in s.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let w: WaitStrategy = item.parse()?;
        if !waits.contains(&w) {
            waits.push(w);
        }
    }
    if waits.is_empty() {
        anyhow::bail!("no wait strategy given");
    }
    Ok(Waits(waits))
}
