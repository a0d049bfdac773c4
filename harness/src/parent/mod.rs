//! `ipc-parent`: spawns `ipc-child` over each transport, runs timed ping-pong rounds (the
//! transports interleaved round by round), and prints a table, or one JSON document with
//! `--json`.
//!
//! Two rows are limits rather than transports: `floor` (two cache lines bounced between the
//! processes, no framing) and `serde` (the JSON work of one round trip in one process, no IPC).
//!
//! `--sweep` measures payload throughput instead: raw messages of several sizes echoed back,
//! in MB/s with both directions counted, against a `memcpy` row measured in the same run.
//!
//! `--stream` measures one-way streaming: `--count` messages of every size sent one way, every
//! one checked by the child, in messages/s and MB/s, against the same ring between two threads
//! and a `memcpy` row.
//!
//! `--clients 1,4,16` measures services: N client processes (`ipc-child --client ROW`) against
//! one server in this process, per row (shm selector, a thread per client, async, uds with a
//! poll loop or threads, ipc-channel with a receiver set), in aggregate round trips per second
//! and per-client p99.
//!
//! Subcommands: `chart` draws an SVG bar chart of a `--json` result (grouped by size for a
//! sweep); `compare` puts a debug and a release result side by side with the release / debug
//! ratio.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `cli` | the command line |
//! | `clients` | `--clients`: N client processes against one server, per row |
//! | `child` | the running child and Ctrl-C |
//! | `report` | the JSON document's schema, the machine, derived figures |
//! | `rows` | the rows of a table and `--transport` parsing |
//! | `measure` | the timed loop every row goes through |
//! | `pinger` | the parent's side of the ping-pong workload |
//! | `limits` | the limit rows measured in this process (`serde`, `memcpy`) |
//! | `run` | a ping-pong run or a sweep, round by round |
//! | `connect` | one connection to a spawned child |
//! | `stream` | `--stream`: one-way streaming, with the ring and memcpy limit rows |
//! | `table` | the tables on standard output |
//! | `chart` | `chart`: SVG bar charts |
//! | `compare` | `compare`: debug against release |

mod chart;
mod child;
mod cli;
mod clients;
mod compare;
mod connect;
mod limits;
mod measure;
mod pinger;
mod report;
mod rows;
mod run;
mod stream;
mod table;

use clap::Parser;

use cli::{Cli, Cmd};

/// The `ipc-parent` binary: parses the command line, runs it, reports an error on standard
/// error and in the exit code.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Cmd::Chart { input, output }) => chart::chart(&input, &output),
        Some(Cmd::Compare { debug, release }) => compare::compare(&debug, &release),
        None => run::run(cli.run),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
