//! The command line of `ipc-parent`: one subcommand per mode, each with its own options, and
//! the options every measuring mode shares ([`Common`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use shmlink::WaitStrategy;

use super::machine::PinRequest;
use crate::workload::{parse_duration, parse_size, MessageKind};

/// Bytes per direction of a ping-pong or clients run unless `--ring-size` says otherwise.
pub(crate) const DEFAULT_RING: usize = 1 << 20;

/// Bytes per direction of a sweep or a stream: the smallest power of two whose largest frame
/// (`capacity / 2 - 72`) holds the largest message, so every message travels as one frame,
/// written and read in place (64 MiB for 16 MiB messages). Small messages do not pay for the
/// size: a lightly used ring rewinds to its start and stays in the caches.
pub(crate) fn sized_ring(largest: usize) -> usize {
    (2 * (largest + 128)).next_power_of_two().max(DEFAULT_RING)
}

/// How fast can two processes on this machine talk? Without a subcommand: `ping-pong`.
#[derive(Debug, Parser)]
#[command(name = "ipc-parent", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
    /// The options of `ping-pong`, which runs when no subcommand is given.
    #[command(flatten)]
    pub ping_pong: PingPongArgs,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Round trips per second over every transport, JSON or raw messages (the default mode).
    PingPong(PingPongArgs),
    /// Payload throughput: raw messages of several sizes echoed back, MB/s beside memcpy.
    Sweep(SweepArgs),
    /// One-way streaming: messages/s and MB/s by size, beside the ring between two threads.
    Stream(StreamArgs),
    /// N client processes against one server, per server design and N.
    Clients(ClientsArgs),
    /// One publisher, N subscriber processes, per fan-out design, size and N.
    Fanout(FanoutArgs),
    /// Past one host: shmlink through two `shmlink-bridge`s (each in a mount namespace of its
    /// own, joined by zenoh over TCP on 127.0.0.1) against zenoh's own round trip and put
    /// throughput, and a TCP round trip (a build with `--features zenoh`; needs root for the
    /// namespaces).
    Bridge(BridgeArgs),
    /// Seed 003's workloads written in C against libshmlink (compiled by the run with the
    /// system's C compiler; `cargo build -p shmlink-c` first), beside the same in Rust and a
    /// pipe in C.
    CApi(CApiArgs),
    /// One process of a `c-api` run (started by it: a role and its arguments).
    #[command(hide = true)]
    CApiPeer {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// One process of a `bridge` run (started by it: a role and its arguments).
    #[command(hide = true)]
    BridgePeer {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Render the saved documents (docs/results/*.json) as the results page.
    Report(ReportArgs),
    /// Draw an SVG bar chart of a saved document.
    Chart {
        /// The JSON document `--json` printed or `--save` wrote.
        input: PathBuf,
        /// Where to write the SVG.
        #[arg(short, long, default_value = "ipc-chart.svg")]
        output: PathBuf,
    },
    /// One table from documents of a debug and a release build (each sorted by the build it
    /// records; several per build when rounds were run one document each, interleaved), with
    /// every document's commit, date and load, and the release / debug ratio.
    Compare {
        /// The documents, debug and release in any order (at least one of each).
        #[arg(required = true, num_args = 2..)]
        documents: Vec<PathBuf>,
    },
    /// The transports, one name a line, in the order runs interleave them (the justfile and CI
    /// read this list).
    Transports {
        /// A Markdown table instead: name, class, the modes each serves, what moves the bytes.
        #[arg(long)]
        describe: bool,
    },
}

/// What every measuring mode takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Rounds per row; the rows are interleaved round by round.
    #[arg(long, short, default_value_t = 1)]
    pub rounds: u32,
    /// Unmeasured work before each round.
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Busy background processes (a shell loop each) started for the run and stopped after
    /// it: a busy machine, reproducibly.
    #[arg(long, default_value_t = 0)]
    pub load: usize,
    /// Pin the parent (the server) and the children (the clients) to CPUs: alone, the parent
    /// on the first CPU and a child on another core; with a list (`--pin 0,1`), the parent on
    /// the first and the children on the others in turn. The document records the CPUs and
    /// the machine's topology.
    #[arg(long, value_name = "CPUS", num_args = 0..=1, default_missing_value = "auto")]
    pub pin: Option<PinRequest>,
    /// Bytes per direction: shm ring, raw-sync mailbox, socket and pipe buffers [default:
    /// 1MiB; for sweep and stream, what holds the largest message in one frame].
    #[arg(long, value_parser = parse_size)]
    pub ring_size: Option<usize>,
    /// Print exactly one JSON document on standard output instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON document to this file (the table still goes to standard output).
    #[arg(long, value_name = "PATH")]
    pub save: Option<PathBuf>,
    /// The child binary (default: `ipc-child` next to this executable).
    #[arg(long)]
    pub child: Option<PathBuf>,
    /// Base of the names of mappings, sockets and rendezvous files (default: `h<pid>`).
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct PingPongArgs {
    /// Rows: a comma list of transports (`ipc-parent transports` lists them, `floor` among them
    /// as a limit row) and the limit row serde (JSON messages only), or `all`.
    #[arg(long, short, default_value = "all")]
    pub transport: String,
    /// Length of one measured round (e.g. 200ms, 5s).
    #[arg(long, short, default_value = "2s", value_parser = parse_duration)]
    pub duration: Duration,
    /// The JSON ping / pong of the reference workload, or raw bytes.
    #[arg(long, value_enum, default_value = "json")]
    pub message: MessageKind,
    /// Bytes per raw message (`--message raw`).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    pub size: usize,
    /// How the shm transport waits: spin, yield or block, a comma list (one shm row each), or
    /// `all`. The default shows the library's default (block) beside spin.
    #[arg(long, default_value = "block,spin", value_parser = parse_waits)]
    pub wait: Waits,
    /// A pause between two round trips (e.g. 1ms), so that the waiting side really sleeps and
    /// the wake-up path is what is measured. The latency columns count only the round trips.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub pace: Duration,
    /// Address the tcp transport binds (the child connects to what it got).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub tcp_addr: String,
    /// Paired slices: cut each round's `--duration` into slices of `--slice` and let the rows
    /// take turns slice by slice (A B C A B C ...), each slice a fresh child after a warmup of
    /// at most a quarter slice, so that rows compared in a ratio ran side by side in time; the
    /// ratios are then also taken slice by slice and reported as min / median / max. For a few
    /// rows (`--transport shm,floor,raw-sync,uds`): the more rows, the further apart their
    /// slices.
    #[arg(long)]
    pub paired: bool,
    /// The length of one slice of `--paired`.
    #[arg(long, default_value = "200ms", value_parser = parse_duration, requires = "paired")]
    pub slice: Duration,
    /// Do not spawn the child: wait for a peer started by hand, for example `ipc-child` on
    /// another host with `--transport tcp --tcp-addr 0.0.0.0:7000` (the parent prints the
    /// command each round). Only for transports a remote peer can reach (`tcp`).
    #[arg(long)]
    pub no_spawn: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Rows: a comma list of transports (`ipc-parent transports --describe` says which serve
    /// the sweep) or `all`; the memcpy limit row is always added.
    #[arg(long, short, default_value = "all")]
    pub transport: String,
    /// Message sizes, a comma list.
    #[arg(long, default_value = "1KiB,64KiB,1MiB,16MiB")]
    pub sizes: String,
    /// Length of one measured round per row and size.
    #[arg(long, short, default_value = "2s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How the shm transport waits: spin, yield or block, a comma list (one shm row each), or
    /// `all`.
    #[arg(long, default_value = "spin", value_parser = parse_waits)]
    pub wait: Waits,
    /// Address the tcp transport binds.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub tcp_addr: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct StreamArgs {
    /// Rows: a comma list of transports, their bare rows (`<transport>-bare`: fixed-size
    /// messages, no framing, one system call per message on each side) and their batch rows
    /// (`<transport>-batch`: the same messages 64 per call), or `all` (every transport that
    /// serves the stream, each followed by its bare and batch rows where it has them; `ipc-parent
    /// transports --describe` says which); the ring and memcpy limit rows are always added.
    #[arg(long, short, default_value = "all")]
    pub transport: String,
    /// Message sizes, a comma list (at least 8 bytes: a message holds its sequence number).
    #[arg(long, default_value = "8,64,128,256,512,1KiB,2KiB,4KiB,64KiB")]
    pub sizes: String,
    /// Messages per row [default: as many as fill `--duration` at the rate the warmup
    /// measured, fixed after the first round].
    #[arg(long)]
    pub count: Option<u64>,
    /// What the default `--count` aims to fill.
    #[arg(long, short, default_value = "1s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How the shm transport waits: spin, yield or block.
    #[arg(long, default_value = "spin")]
    pub wait: WaitStrategy,
    /// Address the tcp transport binds.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub tcp_addr: String,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct ClientsArgs {
    /// The client counts, a comma list: the run measures every row with each.
    #[arg(value_delimiter = ',', default_value = "1,4,16")]
    pub counts: Vec<usize>,
    /// Rows: a comma list of plain, selector, threads, async, uds-poll, uds-threads,
    /// ipc-channel, or `all`.
    #[arg(long, short, default_value = "all")]
    pub transport: String,
    /// Bytes per raw message (at least 8: it holds the round-trip number).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    pub size: usize,
    /// Timed round trips per client [default: for `--duration`].
    #[arg(long)]
    pub count: Option<u64>,
    /// How long every client makes timed round trips.
    #[arg(long, short, default_value = "2s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How the shm clients (and the servers with a thread per client) wait.
    #[arg(long, default_value = "block")]
    pub wait: WaitStrategy,
    /// A pause before each round trip of a client.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub pace: Duration,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct FanoutArgs {
    /// The subscriber counts, a comma list: the run measures every row with each.
    #[arg(value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub counts: Vec<usize>,
    /// Rows: a comma list of shmlink-topic, shmlink-topic-spin (only where the publisher and
    /// every subscriber have a CPU each), shmlink-channels, uds, iceoryx2 (a build with
    /// `--features iceoryx2`), or `all` (every row this build has).
    #[arg(long, short, default_value = "all")]
    pub transport: String,
    /// Message sizes, a comma list (at least 24 bytes: the header).
    #[arg(long, default_value = "64,4KiB")]
    pub sizes: String,
    /// Timed messages the publisher sends per row [default: for `--duration`].
    #[arg(long)]
    pub count: Option<u64>,
    /// How long the publisher sends timed messages per row.
    #[arg(long, short, default_value = "1s", value_parser = parse_duration)]
    pub duration: Duration,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct BridgeArgs {
    /// The stream's message sizes, a comma list (at least 8 bytes).
    #[arg(long, default_value = "64,4KiB")]
    pub sizes: String,
    /// How long each row is measured per round, after `--warmup`.
    #[arg(long, short, default_value = "1s", value_parser = parse_duration)]
    pub duration: Duration,
    /// The shmlink-bridge binary [default: next to this executable; `cargo build --release
    /// -p shmlink-zenoh` builds it there].
    #[arg(long, value_name = "PATH")]
    pub bridge: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct CApiArgs {
    /// The stream's message sizes, a comma list (at least 8 bytes).
    #[arg(long, default_value = "128,4KiB")]
    pub sizes: String,
    /// How long each row is measured per round, after a warm-up of a tenth of it.
    #[arg(long, short, default_value = "1s", value_parser = parse_duration)]
    pub duration: Duration,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The folder of saved documents; the page is written there as README.md.
    #[arg(long, default_value = "docs/results")]
    pub dir: PathBuf,
    /// Write nothing: fail if the page differs from what the documents render.
    #[arg(long)]
    pub check: bool,
}

/// The wait strategies of `--wait`, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waits(pub Vec<WaitStrategy>);

impl Waits {
    /// The first strategy: what the rows other than shm's are told.
    pub(crate) fn first(&self) -> WaitStrategy {
        self.0.first().copied().unwrap_or(WaitStrategy::Block)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ipc-parent").chain(args.iter().copied()))
    }

    fn ping_pong(args: &[&str]) -> PingPongArgs {
        match parse(args) {
            Ok(Cli {
                command: Some(Cmd::PingPong(a)),
                ..
            }) => a,
            Ok(Cli {
                command: None,
                ping_pong,
            }) => ping_pong,
            other => panic!("{args:?}: not a ping-pong run: {other:?}"),
        }
    }

    #[test]
    fn no_arguments_is_a_ping_pong_run_with_block_beside_spin() {
        let a = ping_pong(&[]);
        assert_eq!(a.transport, "all");
        assert_eq!(a.wait, Waits(vec![WaitStrategy::Block, WaitStrategy::Spin]));
        assert_eq!(a.message, MessageKind::Json);
        assert_eq!(a.duration, Duration::from_secs(2));
        assert_eq!(a.common.rounds, 1);
        assert_eq!(a.common.pin, None);
        // The same options work without the subcommand's name.
        let a = ping_pong(&["--transport", "shm,uds", "--wait", "spin", "--rounds", "3"]);
        assert_eq!(a.transport, "shm,uds");
        assert_eq!(a.wait, Waits(vec![WaitStrategy::Spin]));
        assert_eq!(a.common.rounds, 3);
        let a = ping_pong(&["ping-pong", "--message", "raw", "--size", "4KiB", "--json"]);
        assert_eq!(
            (a.message, a.size, a.common.json),
            (MessageKind::Raw, 4096, true)
        );
    }

    #[test]
    fn pin_takes_no_list_or_one() {
        assert_eq!(ping_pong(&["--pin"]).common.pin, Some(PinRequest::Auto));
        assert_eq!(
            ping_pong(&["ping-pong", "--pin", "0,1"]).common.pin,
            Some(PinRequest::Cpus(vec![0, 1]))
        );
        assert_eq!(
            ping_pong(&["--pin", "--rounds", "2"]).common.pin,
            Some(PinRequest::Auto)
        );
        assert!(parse(&["--pin", "one"]).is_err());
    }

    #[test]
    fn every_subcommand_has_its_own_options() {
        let Ok(Cli {
            command: Some(Cmd::Sweep(s)),
            ..
        }) = parse(&["sweep", "--sizes", "4KiB", "--pin", "1", "--save", "x.json"])
        else {
            panic!("not a sweep")
        };
        assert_eq!(s.sizes, "4KiB");
        assert_eq!(s.common.pin, Some(PinRequest::Cpus(vec![1])));
        assert_eq!(s.common.save, Some(PathBuf::from("x.json")));

        let Ok(Cli {
            command: Some(Cmd::Stream(s)),
            ..
        }) = parse(&["stream", "--count", "2000", "--wait", "block"])
        else {
            panic!("not a stream")
        };
        assert_eq!((s.count, s.wait), (Some(2000), WaitStrategy::Block));
        assert_eq!(s.duration, Duration::from_secs(1));

        let Ok(Cli {
            command: Some(Cmd::Clients(c)),
            ..
        }) = parse(&[
            "clients",
            "1,4",
            "--transport",
            "selector",
            "--count",
            "300",
        ])
        else {
            panic!("not a clients run")
        };
        assert_eq!(c.counts, [1, 4]);
        assert_eq!((c.count, c.wait), (Some(300), WaitStrategy::Block));
        let Ok(Cli {
            command: Some(Cmd::Clients(c)),
            ..
        }) = parse(&["clients"])
        else {
            panic!("not a clients run")
        };
        assert_eq!(c.counts, [1, 4, 16]);

        let Ok(Cli {
            command: Some(Cmd::Fanout(f)),
            ..
        }) = parse(&["fanout"])
        else {
            panic!("not a fanout run")
        };
        assert_eq!(f.counts, [1, 2, 4, 8, 16]);
        assert_eq!((f.sizes.as_str(), f.transport.as_str()), ("64,4KiB", "all"));
        assert_eq!((f.count, f.duration), (None, Duration::from_secs(1)));
        let Ok(Cli {
            command: Some(Cmd::Fanout(f)),
            ..
        }) = parse(&[
            "fanout",
            "1,2",
            "--count",
            "300",
            "--rounds",
            "3",
            "--transport",
            "iceoryx2",
            "--sizes",
            "64",
        ])
        else {
            panic!("not a fanout run")
        };
        assert_eq!(f.counts, [1, 2]);
        assert_eq!((f.count, f.common.rounds), (Some(300), 3));
        assert_eq!((f.transport.as_str(), f.sizes.as_str()), ("iceoryx2", "64"));

        let Ok(Cli {
            command: Some(Cmd::Report(r)),
            ..
        }) = parse(&["report", "--check"])
        else {
            panic!("not a report")
        };
        assert!(r.check);
        assert_eq!(r.dir, PathBuf::from("docs/results"));

        let Ok(Cli {
            command: Some(Cmd::Chart { input, output }),
            ..
        }) = parse(&["chart", "a.json", "-o", "a.svg"])
        else {
            panic!("not a chart")
        };
        assert_eq!((input, output), ("a.json".into(), "a.svg".into()));
        let Ok(Cli {
            command: Some(Cmd::Compare { documents }),
            ..
        }) = parse(&["compare", "d.json", "r.json", "r2.json"])
        else {
            panic!("not a compare")
        };
        assert_eq!(
            documents,
            ["d.json", "r.json", "r2.json"].map(PathBuf::from)
        );
        assert!(parse(&["compare", "d.json"]).is_err(), "one document");
    }

    #[test]
    fn options_of_one_mode_are_refused_by_another() {
        for args in [
            &["sweep", "--message", "json"][..],
            &["stream", "--pace", "1ms"],
            &["stream", "--wait", "spin,block"],
            &["clients", "--sizes", "8"],
            &["fanout", "--wait", "spin"],
            &["fanout", "--pace", "1ms"],
            &["fanout", "1,x"],
            &["ping-pong", "--sizes", "8"],
            &["report", "--rounds", "2"],
            // Mode options before a subcommand belong to the default mode.
            &["--rounds", "2", "stream"],
        ] {
            assert!(parse(args).is_err(), "{args:?} must be refused");
        }
    }
}
