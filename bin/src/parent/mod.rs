//! `ipc-parent`: spawns `ipc-child` over each transport, measures, and prints the tables, or
//! one JSON document with `--json`. One subcommand per mode:
//!
//! - `ping-pong` (the default): timed rounds of round trips per transport, interleaved round by
//!   round. Two rows are limits rather than transports: `floor` (two cache lines bounced
//!   between the processes, no framing) and `serde` (the JSON work of one round trip in one
//!   process, no IPC).
//! - `sweep`: raw messages of several sizes echoed back, in MB/s with both directions counted,
//!   against a `memcpy` row measured in the same run.
//! - `stream`: `--count` messages of every size sent one way, every one checked by the child,
//!   in messages/s and MB/s, against the same ring between two threads and a `memcpy` row.
//! - `clients 1,4,16`: N client processes (`ipc-child --client ROW`) against one server in this
//!   process, per row (shm selector, a thread per client, async, uds with a poll loop or
//!   threads, ipc-channel with a receiver set), in aggregate round trips per second and
//!   per-client p99.
//! - `fanout 1,2,4,8,16`: one publisher (this process) and N subscriber processes
//!   (`ipc-child --fanout ROW`), per row (a shmlink topic, N shmlink channels, N Unix sockets,
//!   iceoryx2 with `--features iceoryx2`) and message size, in per-subscriber messages per
//!   second, one-way latency and messages per second of publisher CPU.
//! - `report`: the results page rendered from the saved documents; `chart`: an SVG bar chart
//!   of a document; `compare`: a debug and a release document side by side.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `cli` | the command line: a subcommand per mode, the options they share |
//! | `session` | what every measuring mode does around its rows: checks, Ctrl-C, `--load`, `--pin`, the interleaved rounds, the document at the end |
//! | `spawn` | the spawned child process, Ctrl-C, `--load` |
//! | `connect` | one connection to a spawned child |
//! | `measure` | the timed loop every round-trip row goes through |
//! | `rows` | the rows of a table and `--transport` parsing (from the transport table) |
//! | `limits` | the limit rows measured in this process (`serde`, `memcpy`) |
//! | `machine` | the machine as the OS reports it, the load, `--pin` |
//! | `document` | the JSON document: the run's description and one result type per mode |
//! | `tables` | what every mode's tables are made of, and which mode's tables a document gets |
//! | `ping_pong/` | `ping-pong` (`mod.rs`, the parent's side in `pinger.rs`), `sweep` (`sweep.rs`), and their tables (`tables.rs`, `sweep.rs`) |
//! | `stream/` | `stream`: one-way streaming with the ring and memcpy limit rows, and its tables |
//! | `clients/` | `clients`: the servers of N client processes, per row, and its tables (the client side is `crate::client`) |
//! | `fanout/` | `fanout`: the publisher of N subscriber processes, per row, and its tables (the subscriber side and the message format are `crate::fanout`) |
//! | `report/` | `report`: the results page from the saved documents and the published figures; `chart.rs` (SVG bar charts), `compare.rs` (debug against release), `python.rs` (the Python benchmark's tables) |

mod bridge;
mod c_api;
pub mod cli;
mod clients;
mod connect;
pub mod document;
mod fanout;
mod limits;
pub mod machine;
mod measure;
mod ping_pong;
pub mod report;
mod rows;
mod session;
mod spawn;
mod stream;
mod tables;

// The iceoryx2 row's publisher gives up its retries on Ctrl-C.
#[cfg(feature = "iceoryx2")]
pub(crate) use spawn::interrupted;

use clap::Parser;

use cli::{Cli, Cmd};

/// What `ipc-parent transports` prints: the names of the transport table, one a line, or with
/// `describe` the table itself in Markdown.
pub fn transports(describe: bool) -> String {
    use crate::transport::{Class, Kind};
    let mut out = String::new();
    if describe {
        out.push_str(
            "| name | class | modes | what moves the bytes |\n| --- | --- | --- | --- |\n",
        );
    }
    for kind in Kind::ALL {
        let spec = kind.spec();
        if !describe {
            out.push_str(spec.name);
            out.push('\n');
            continue;
        }
        let class = match spec.class {
            Class::Memory => "memory",
            Class::Kernel => "kernel",
            Class::Limit => "limit",
        };
        let modes: Vec<&str> = spec.modes.iter().map(|m| m.as_str()).collect();
        out.push_str(&format!(
            "| `{}` | {class} | {} | {} |\n",
            spec.name,
            modes.join(", "),
            spec.about
        ));
    }
    out
}

/// The `ipc-parent` binary: parses the command line, runs it, reports an error on standard
/// error and in the exit code.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => ping_pong::ping_pong(cli.ping_pong),
        Some(Cmd::PingPong(args)) => ping_pong::ping_pong(args),
        Some(Cmd::Sweep(args)) => ping_pong::sweep::sweep(args),
        Some(Cmd::Stream(args)) => stream::run(args),
        Some(Cmd::Clients(args)) => clients::run(args),
        Some(Cmd::Fanout(args)) => fanout::run(args),
        Some(Cmd::Bridge(args)) => bridge::run(args),
        Some(Cmd::BridgePeer { args }) => bridge::peer(&args),
        Some(Cmd::CApi(args)) => c_api::run(args),
        Some(Cmd::CApiPeer { args }) => c_api::peer(&args),
        Some(Cmd::Report(args)) => report::report(&args),
        Some(Cmd::Chart { input, output }) => report::chart::chart(&input, &output),
        Some(Cmd::Compare { documents }) => report::compare::compare(&documents),
        Some(Cmd::Transports { describe }) => {
            print!("{}", transports(describe));
            Ok(())
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
