//! `shmlink-echo [OPTIONS] NAME [spin|yield|block]`: connects to the channel NAME and sends every
//! frame back until the creator closes it. Used by the cross-process tests; handy for trying a
//! channel by hand.
//!
//! Options:
//! * `--create`: create the channel instead of connecting to it, and print `ready` on stdout once
//!   it exists. The channel is removed when this process exits normally.
//! * `--stream`: instead of echoing, send numbered frames (an 8-byte little-endian sequence
//!   number, then `seq % 256` bytes of filler) until the peer closes or goes away.
//! * `--capacity BYTES`: ring capacity for `--create` (default 65536).
//! * `--half-create`: make the segment and hold its creator lock like a creator that is still
//!   initialising it, print `ready`, and then never finish (wait until stdin closes). For tests
//!   of segments whose creator died before it was ready; only in builds with the `test-hooks`
//!   feature (the crate's own tests have it).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use shmlink::{Channel, Config, Error, RecvError, SendError, WaitStrategy};

/// What ends the program early: an error of the library or of standard output, or a usage
/// error.
type Failure = Box<dyn std::error::Error>;

struct Options {
    name: String,
    wait: WaitStrategy,
    create: bool,
    stream: bool,
    half_create: bool,
    capacity: usize,
}

const USAGE: &str = "usage: shmlink-echo [--create] [--stream] [--half-create] [--capacity BYTES] \
                     NAME [spin|yield|block]";

fn parse() -> Result<Options, String> {
    let mut opts = Options {
        name: String::new(),
        wait: WaitStrategy::Block,
        create: false,
        stream: false,
        half_create: false,
        capacity: 1 << 16,
    };
    let mut positional = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--create" => opts.create = true,
            "--stream" => opts.stream = true,
            "--half-create" => opts.half_create = true,
            "--capacity" => {
                let v = args.next().ok_or("--capacity needs a value")?;
                opts.capacity = v.parse().map_err(|e| format!("--capacity {v}: {e}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    opts.name = positional.next().ok_or("missing NAME")?;
    if let Some(w) = positional.next() {
        opts.wait = w.parse().map_err(|e: Error| e.to_string())?;
    }
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument {extra:?}"));
    }
    Ok(opts)
}

fn announce() -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    Ok(())
}

fn echo(ch: &mut Channel) -> Result<u64, Failure> {
    let mut echoed = 0u64;
    let mut buf = Vec::new();
    loop {
        match ch.recv_into(&mut buf) {
            Ok(_) => {}
            Err(RecvError::Disconnected { .. }) => return Ok(echoed),
            Err(e) => return Err(e.into()),
        }
        match ch.send(&buf) {
            Ok(()) => echoed += 1,
            Err(SendError::Disconnected { .. }) => return Ok(echoed),
            Err(e) => return Err(e.into()),
        }
    }
}

fn stream(ch: &mut Channel) -> Result<u64, Failure> {
    let mut frame = Vec::with_capacity(8 + 256);
    for seq in 0u64.. {
        frame.clear();
        frame.extend_from_slice(&seq.to_le_bytes());
        frame.resize(8 + (seq % 256) as usize, seq as u8);
        match ch.send(&frame) {
            Ok(()) => {}
            Err(e) if e.is_disconnect() => return Ok(seq),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(u64::MAX)
}

/// Makes the segment the way `Channel::create` does up to the point where it would mark it
/// ready, then stops there.
#[cfg(feature = "test-hooks")]
fn half_create(name: &str, capacity: usize) -> Result<u64, Failure> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    shmlink::testing::validate_name(name)?;
    let dir = shmlink::testing::shm_dir().ok_or("no shared-memory directory")?;
    let path = dir.join(format!("{}{name}", shmlink::testing::OS_PREFIX));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    shmlink::testing::take_creator_lock(&file)?;
    file.set_len(shmlink::testing::segment_size(capacity) as u64)?;
    // SAFETY: a fresh object that only this process and the tests map; all accesses below are
    // atomic.
    let map = unsafe { memmap2::MmapMut::map_mut(&file) }?;
    let base = map.as_ptr();
    // SAFETY: offsets 0 and 8 of a page-aligned mapping of at least 4096 bytes, aligned for
    // their types.
    let (magic, version) = unsafe {
        (
            &*(base as *const AtomicU64),
            &*(base.add(8) as *const AtomicU32),
        )
    };
    // Relaxed: nobody may rely on these until `ready`, which is never written.
    magic.store(shmlink::testing::MAGIC, Ordering::Relaxed);
    version.store(shmlink::testing::LAYOUT_VERSION, Ordering::Relaxed);
    announce()?;
    // Stay "initialising" until killed or until stdin closes, then clean up like a creator
    // that gave up.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(map);
    let _ = std::fs::remove_file(&path);
    Ok(0)
}

fn run(opts: &Options) -> Result<u64, Failure> {
    if opts.half_create {
        #[cfg(feature = "test-hooks")]
        return half_create(&opts.name, opts.capacity);
        #[cfg(not(feature = "test-hooks"))]
        return Err("--half-create is a test hook: build with the test-hooks feature".into());
    }
    let mut ch = if opts.create {
        let ch = Channel::create(
            &opts.name,
            &Config {
                capacity: opts.capacity,
                wait: opts.wait,
            },
        )?;
        announce()?;
        ch
    } else {
        Channel::connect_timeout(&opts.name, opts.wait, Duration::from_secs(10))?
    };
    if opts.stream {
        stream(&mut ch)
    } else {
        echo(&mut ch)
    }
}

fn main() -> ExitCode {
    let opts = match parse() {
        Ok(opts) => opts,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("shmlink-echo: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(n) => {
            let what = if opts.stream { "sent" } else { "echoed" };
            eprintln!("shmlink-echo: {what} {n} frames");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shmlink-echo: {e}");
            ExitCode::FAILURE
        }
    }
}
