//! `shmlink`: what is on this machine.
//!
//! * `shmlink list [--json]`: every channel, listener and topic, on shared memory (from its
//!   mapping: kind, state, size, the creator and its peers with their liveness) and on the
//!   ipc-channel fallback (from its files: kind, creator, liveness).
//! * `shmlink stat NAME [--json | --format prometheus] [--watch [SECS]]`: every counter of a
//!   shared-memory channel, topic or listener, per direction and subscriber, with rates.
//! * `shmlink top [--interval SECS] [--once]`: every shared-memory channel, topic and listener
//!   with its rates, busiest first, refreshed in the terminal until `q` (or printed once).
//! * `shmlink tap TOPIC [--count N] [--hz] [--hex]`: subscribes and prints each message.
//! * `shmlink clean [--dry-run]`: removes the mappings whose creator is gone (never a live one).
//!
//! The JSON documents of `list --json` and `stat --json` are described in `cli/README.md`.

mod stat;
mod tap;
mod top;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde::Serialize;
use shmlink::segments::{self, EndpointInfo, FallbackInfo, SegmentInfo};

#[derive(Parser)]
#[command(name = "shmlink", version, about = "What shmlink has on this machine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every channel, listener and topic on this machine, on either backend.
    List {
        /// One JSON document instead of a table (`--format json`).
        #[arg(long)]
        json: bool,
        /// How to print: `prometheus` gives the counters of every shared-memory channel,
        /// topic and listener in the Prometheus text format.
        #[arg(long, value_enum, default_value = "text")]
        format: stat::Format,
    },
    /// Every counter of a shared-memory channel, topic or listener, per direction.
    Stat {
        /// The channel's, topic's or listener's name.
        name: String,
        /// One JSON document instead of a table (`--format json`).
        #[arg(long)]
        json: bool,
        /// How to print.
        #[arg(long, value_enum, default_value = "text")]
        format: stat::Format,
        /// Print again every SECS seconds (1 if not given), with rates; Ctrl-C ends it.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1")]
        watch: Option<f64>,
    },
    /// Every shared-memory channel, topic and listener with its rates (messages/s, MB/s,
    /// full/s, sleeps/s, fill), busiest first, refreshed until `q`.
    Top {
        /// Seconds between two refreshes.
        #[arg(long, value_name = "SECS", default_value = "1")]
        interval: f64,
        /// Print one refresh as text (an interval after a first look) and exit: no terminal
        /// needed.
        #[arg(long)]
        once: bool,
        /// With `--once`: columns of the text.
        #[arg(long, default_value = "120")]
        width: u16,
    },
    /// Subscribes to a topic (either backend) and prints each message: pretty JSON when it is
    /// JSON, else hex.
    Tap {
        /// The topic's name.
        topic: String,
        /// Stop after this many messages.
        #[arg(long)]
        count: Option<u64>,
        /// Print the rate once a second instead of the messages (and, when `--count` ends the
        /// tap, the rate since the last line).
        #[arg(long)]
        hz: bool,
        /// Hex even for JSON.
        #[arg(long)]
        hex: bool,
    },
    /// Removes the shared-memory mappings whose creator is gone.
    Clean {
        /// Say what would be removed; remove nothing.
        #[arg(long, short = 'n')]
        dry_run: bool,
    },
}

/// One endpoint in the JSON document.
#[derive(Serialize)]
struct Endpoint {
    state: &'static str,
    pid: u32,
    alive: bool,
}

impl From<&EndpointInfo> for Endpoint {
    fn from(e: &EndpointInfo) -> Endpoint {
        Endpoint {
            state: e.state,
            pid: e.pid,
            alive: e.alive,
        }
    }
}

/// One entry of `list --json`.
#[derive(Serialize)]
struct Entry {
    name: String,
    kind: &'static str,
    backend: &'static str,
    /// `live`, `initialising` or `stale` (shared memory); `live` or `stale` (fallback).
    state: &'static str,
    /// Bytes of the mapping (shared memory only).
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    /// Whole seconds since the mapping was made (shared memory only, where the system says).
    #[serde(skip_serializing_if = "Option::is_none")]
    age_s: Option<u64>,
    /// Bytes of each ring, and the fullest ring's fill (live shared-memory channels and topics).
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fill: Option<u64>,
    creator: Endpoint,
    /// A channel's connector, a topic's subscribers, a listener's clients (the creators of its
    /// connections; shared memory only).
    peers: Vec<Endpoint>,
    /// For a listener's connection: the listener's name (the connection is listed right after
    /// it).
    #[serde(skip_serializing_if = "Option::is_none")]
    listener: Option<String>,
}

/// An entry that is named like ours and is not (left alone).
#[derive(Serialize)]
struct SkippedEntry {
    name: String,
    reason: String,
}

#[derive(Serialize)]
struct Document {
    entries: Vec<Entry>,
    skipped: Vec<SkippedEntry>,
}

/// The entry of a segment; a listener's peers (its clients) are added by [`document`].
fn shm_entry(seg: &SegmentInfo) -> Entry {
    let peers = if seg.kind == "topic" {
        seg.subscribers.iter().map(Endpoint::from).collect()
    } else if seg.connector.pid != 0 {
        vec![Endpoint::from(&seg.connector)]
    } else {
        Vec::new()
    };
    // Gone or not ready by now: no counters to show.
    let stats = (seg.ready && !seg.stale)
        .then(|| segments::stats(&seg.name).ok())
        .flatten();
    let rings = stats.as_ref().map_or(&[][..], |s| &s.rings[..]);
    Entry {
        name: seg.name.clone(),
        kind: seg.kind,
        backend: "shm",
        age_s: seg.age.map(|a| a.as_secs()),
        capacity: rings.first().map(|r| r.capacity),
        fill: rings.iter().map(|r| r.fill).max(),
        state: if seg.stale {
            "stale"
        } else if seg.ready {
            "live"
        } else {
            "initialising"
        },
        size: Some(seg.size),
        creator: Endpoint::from(&seg.creator),
        peers,
        listener: seg.listener.clone(),
    }
}

fn fallback_entry(f: &FallbackInfo) -> Entry {
    Entry {
        name: f.name.clone(),
        kind: f.kind,
        backend: "ipc-channel",
        state: if f.alive { "live" } else { "stale" },
        size: None,
        age_s: None,
        capacity: None,
        fill: None,
        creator: Endpoint {
            state: "present",
            pid: f.pid,
            alive: f.alive,
        },
        peers: Vec::new(),
        listener: None,
    }
}

fn document() -> shmlink::Result<Document> {
    let listing = segments::scan()?;
    let all = &listing.channels;
    // Each listener's connections right after it, in name order.
    let mut entries: Vec<Entry> = Vec::new();
    for seg in all.iter().filter(|s| s.listener.is_none()) {
        let conns: Vec<&SegmentInfo> = all
            .iter()
            .filter(|c| c.listener.as_deref() == Some(seg.name.as_str()))
            .collect();
        let mut entry = shm_entry(seg);
        if seg.kind == "listener" {
            entry.peers = conns.iter().map(|c| Endpoint::from(&c.creator)).collect();
        }
        entries.push(entry);
        entries.extend(conns.into_iter().map(shm_entry));
    }
    entries.extend(segments::list_fallback().iter().map(fallback_entry));
    Ok(Document {
        entries,
        skipped: listing
            .skipped
            .into_iter()
            .map(|s| SkippedEntry {
                name: s.name,
                reason: s.reason,
            })
            .collect(),
    })
}

fn pid_of(e: &Endpoint) -> String {
    if e.pid == 0 {
        "-".to_owned()
    } else {
        format!("{}{}", e.pid, if e.alive { "" } else { " (dead)" })
    }
}

fn list(format: stat::Format) -> Result<(), Box<dyn std::error::Error>> {
    let doc = document()?;
    if format == stat::Format::Prometheus {
        // The entries that are gone or not ready by now have no counters to show.
        let all: Vec<_> = doc
            .entries
            .iter()
            .filter(|e| e.backend == "shm" && e.state == "live")
            .filter_map(|e| segments::stats(&e.name).ok())
            .collect();
        print!("{}", segments::prometheus(&all));
        return Ok(());
    }
    if format == stat::Format::Json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "{:<32} {:<8} {:<11} {:<12} {:>10} {:>8} {:>10} {:>6}  {:<14} PEERS",
        "NAME", "KIND", "BACKEND", "STATE", "BYTES", "AGE", "CAPACITY", "FILL", "CREATOR"
    );
    for e in &doc.entries {
        let peers: Vec<String> = e.peers.iter().map(pid_of).collect();
        let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        let fill = e
            .capacity
            .zip(e.fill)
            .map(|(c, f)| format!("{:.1}%", 100.0 * f as f64 / c.max(1) as f64));
        // A listener's connection, indented under it.
        let name = match e.listener {
            Some(_) => format!("  {}", e.name),
            None => e.name.clone(),
        };
        println!(
            "{:<32} {:<8} {:<11} {:<12} {:>10} {:>8} {:>10} {:>6}  {:<14} {}",
            name,
            e.kind,
            e.backend,
            e.state,
            dash(e.size.map(|s| s.to_string())),
            dash(e.age_s.map(|a| format!("{a}s"))),
            dash(e.capacity.map(|c| c.to_string())),
            dash(fill),
            pid_of(&e.creator),
            if peers.is_empty() {
                "-".to_owned()
            } else {
                peers.join(", ")
            }
        );
    }
    for s in &doc.skipped {
        println!("{:<32} skipped: {}", s.name, s.reason);
    }
    Ok(())
}

fn clean(dry_run: bool) -> Result<(), Box<dyn std::error::Error>> {
    if dry_run {
        for seg in segments::list()?.iter().filter(|s| s.stale) {
            println!("would remove {} ({} {})", seg.name, seg.kind, seg.size);
        }
        return Ok(());
    }
    for name in segments::clean_dead()? {
        println!("removed {name}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List { json, format } => list(if json { stat::Format::Json } else { format }),
        Command::Stat {
            name,
            json,
            format,
            watch,
        } => stat::stat(&name, if json { stat::Format::Json } else { format }, watch),
        Command::Top {
            interval,
            once: false,
            ..
        } => top::top(interval),
        Command::Top {
            interval, width, ..
        } => top::once(interval, width),
        Command::Tap {
            topic,
            count,
            hz,
            hex,
        } => tap::tap(&topic, count, hz, hex),
        Command::Clean { dry_run } => clean(dry_run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shmlink: {e}");
            ExitCode::FAILURE
        }
    }
}
