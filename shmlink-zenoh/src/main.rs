//! `shmlink-bridge`: carries this host's shmlink topics and channels to other hosts over zenoh
//! (see the crate's README). It prints `ready` on standard output once everything it was asked
//! to carry is declared, writes what happens to a topic or a connection on standard error, and
//! runs until SIGINT, SIGTERM or SIGHUP, when it closes what it made and exits.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use shmlink::{Config, TopicConfig, TopicMode};
use shmlink_zenoh::{with_endpoints, Bridge, DEFAULT_PREFIX};

/// Carries shmlink topics and channels between hosts over zenoh.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Put every message of this local topic on the key PREFIX/topic/TOPIC (repeatable).
    #[arg(long, value_name = "TOPIC")]
    export: Vec<String>,
    /// Create this local topic and publish into it what another bridge exports (repeatable).
    #[arg(long, value_name = "TOPIC")]
    import: Vec<String>,
    /// Offer this local listener to bridges that --connect to it (repeatable).
    #[arg(long, value_name = "NAME")]
    serve: Vec<String>,
    /// Bind a local listener NAME whose clients are carried to the listener another bridge
    /// serves (repeatable).
    #[arg(long, value_name = "NAME")]
    connect: Vec<String>,
    /// The first chunk of every key.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// A zenoh endpoint to listen on, such as tcp/0.0.0.0:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    listen: Vec<String>,
    /// A zenoh endpoint to connect to, such as tcp/192.0.2.7:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    peer: Vec<String>,
    /// A zenoh configuration file (JSON5) for everything else: mode, TLS, access control,
    /// routers. --listen, --peer and --no-scouting are applied over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Turn zenoh's multicast scouting and gossip off: only the endpoints given are used.
    #[arg(long)]
    no_scouting: bool,
    /// Imported topics overwrite (the publisher never waits) instead of being lossless.
    #[arg(long)]
    overwrite: bool,
    /// Bytes in an imported topic's ring (a power of two).
    #[arg(long, default_value_t = TopicConfig::default().capacity)]
    capacity: usize,
}

fn run(args: Args) -> Result<Bridge, Box<dyn std::error::Error>> {
    if args.export.is_empty()
        && args.import.is_empty()
        && args.serve.is_empty()
        && args.connect.is_empty()
    {
        return Err("nothing to carry: give --export, --import, --serve or --connect".into());
    }
    let base = match &args.config {
        Some(path) => {
            zenoh::Config::from_file(path).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => zenoh::Config::default(),
    };
    let config = with_endpoints(base, &args.listen, &args.peer, !args.no_scouting)?;
    let mut bridge = Bridge::open(config, &args.prefix)?;
    let topic = TopicConfig {
        capacity: args.capacity,
        mode: if args.overwrite {
            TopicMode::Overwrite
        } else {
            TopicMode::Lossless
        },
        ..TopicConfig::default()
    };
    for t in &args.export {
        bridge.export_topic(t)?;
    }
    for t in &args.import {
        bridge
            .import_topic(t, &topic)
            .map_err(|e| format!("import {t}: {e}"))?;
    }
    for n in &args.serve {
        bridge.serve(n)?;
    }
    for n in &args.connect {
        bridge
            .connect(n, &Config::default())
            .map_err(|e| format!("connect {n}: {e}"))?;
    }
    Ok(bridge)
}

/// The signals that stop the command: SIGINT, SIGTERM and SIGHUP.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: `sigemptyset` initialises the zeroed set, `sigaddset` adds valid signals to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

fn main() -> ExitCode {
    // Blocked here, before zenoh or the bridge start a thread (each inherits the mask), so that
    // they are delivered only to the `sigwait` below: the bridge is then closed, which removes
    // the topics and listeners it made, instead of the process dying with them left behind.
    let signals = stop_signals();
    // SAFETY: a valid, initialised set; no old mask is asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };
    match run(Args::parse()) {
        Ok(bridge) => {
            println!("ready");
            let mut signal = 0;
            // SAFETY: a valid set and a place for the signal's number.
            unsafe { libc::sigwait(&signals, &mut signal) };
            eprintln!("shmlink-bridge: signal {signal}: stopping");
            bridge.close();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shmlink-bridge: {e}");
            ExitCode::FAILURE
        }
    }
}
