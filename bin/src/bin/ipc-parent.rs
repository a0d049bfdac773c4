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
//! Subcommands: `chart` draws an SVG bar chart of a `--json` result (grouped by size for a
//! sweep); `compare` puts a debug and a release result side by side with the release / debug
//! ratio.

use shmlink_harness::workload as common;

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::{Parser, Subcommand};
use common::{check_stamp, size_label, stamp, MessageKind, OwnedPing, Ping, Workload};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use shmlink::testing::SliceWriter;
use shmlink::{Error, WaitStrategy};
use shmlink_harness::transport::{
    self, ChildStdio, Kind, Listener, Options, Peer, Transport, Visitor,
};

/// Message sizes of `--sweep` unless `--sizes` says otherwise.
const DEFAULT_SIZES: &str = "1KiB,64KiB,1MiB,16MiB";
/// Bytes per direction of a ping-pong run unless `--ring-size` says otherwise.
const DEFAULT_RING: usize = 1 << 20;
/// Bytes per direction of a sweep: the smallest power of two whose largest frame
/// (`capacity / 2 - 72`) holds the largest message of the sweep, so every message travels as
/// one frame, written and read in place (64 MiB for 16 MiB messages). Small messages do not pay
/// for the size: a lightly used ring rewinds to its start and stays in the caches.
fn sweep_ring(largest: usize) -> usize {
    (2 * (largest + 128)).next_power_of_two().max(DEFAULT_RING)
}

/// How fast can two processes on this machine talk? Ping-pong over every transport.
#[derive(Debug, Parser)]
#[command(name = "ipc-parent", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Cmd {
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

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Rows to run: a comma list of shm, ipc-channel, raw-sync, pipe, uds, tcp, and the limit
    /// rows floor and serde (JSON messages only), or `all`. With `--sweep`, `all` is every
    /// transport but floor, and the memcpy limit row is always added.
    #[arg(long, short, default_value = "all")]
    transport: String,
    /// Length of one measured round (e.g. 200ms, 5s).
    #[arg(long, short, default_value = "2s", value_parser = common::parse_duration)]
    duration: Duration,
    /// Rounds per transport; the transports are interleaved round by round.
    #[arg(long, short, default_value_t = 1)]
    rounds: u32,
    /// Unmeasured ping-pong before each round.
    #[arg(long, default_value = "250ms", value_parser = common::parse_duration)]
    warmup: Duration,
    /// The JSON ping / pong of the reference workload, or raw bytes.
    #[arg(long, value_enum, default_value = "json")]
    message: MessageKind,
    /// Bytes per raw message (`--message raw`).
    #[arg(long, default_value = "64", value_parser = common::parse_size)]
    size: usize,
    /// Payload sweep: raw messages of every `--sizes` size echoed back over every transport,
    /// in MB/s with both directions counted, beside a memcpy row measured in the same run.
    #[arg(long, conflicts_with_all = ["message", "size", "no_spawn"])]
    sweep: bool,
    /// Message sizes of `--sweep`, a comma list.
    #[arg(long, default_value = DEFAULT_SIZES, requires = "sweep")]
    sizes: String,
    /// How the shm transport waits: spin, yield or block, a comma list, or `all` (one shm row
    /// per strategy).
    #[arg(long, default_value = "spin", value_parser = parse_waits)]
    wait: Waits,
    /// A pause between two round trips (e.g. 1ms), so that the waiting side really sleeps and
    /// the wake-up path is what is measured. The latency columns count only the round trips.
    #[arg(long, default_value = "0s", value_parser = common::parse_duration)]
    pace: Duration,
    /// Busy background processes (a shell loop each) started for the run and stopped after
    /// it: a busy machine, reproducibly.
    #[arg(long, default_value_t = 0)]
    load: usize,
    /// Bytes per direction: shm ring, raw-sync mailbox, socket and pipe buffers [default: 1MiB,
    /// 8MiB with --sweep].
    #[arg(long, value_parser = common::parse_size)]
    ring_size: Option<usize>,
    /// Address the tcp transport binds (the child connects to what it got).
    #[arg(long, default_value = "127.0.0.1:0")]
    tcp_addr: String,
    /// Print exactly one JSON document on standard output instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON document to this file (the table still goes to standard output).
    #[arg(long, value_name = "PATH")]
    save: Option<PathBuf>,
    /// The child binary (default: `ipc-child` next to this executable).
    #[arg(long)]
    child: Option<PathBuf>,
    /// Do not spawn the child: wait for a peer started by hand, for example `ipc-child` on
    /// another host with `--transport tcp --tcp-addr 0.0.0.0:7000` (the parent prints the
    /// command each round). Only for transports a remote peer can reach (`tcp`).
    #[arg(long)]
    no_spawn: bool,
    /// Base of the names of mappings, sockets and rendezvous files (default: `h<pid>`).
    #[arg(long)]
    name: Option<String>,
}

/// The wait strategies of `--wait`.
#[derive(Debug, Clone)]
struct Waits(Vec<WaitStrategy>);

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
        bail!("no wait strategy given");
    }
    Ok(Waits(waits))
}

/// `--load`: busy processes that run for as long as this guard lives (killed and reaped on
/// drop; killed by the kernel too if this process dies first).
struct Load(Vec<Child>);

impl Load {
    fn start(n: usize) -> anyhow::Result<Load> {
        let mut load = Load(Vec::with_capacity(n));
        for _ in 0..n {
            let mut command = Command::new("sh");
            command
                .args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // SAFETY: the closure runs in the forked child before exec and only calls prctl,
            // which is async-signal-safe.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            load.0
                .push(command.spawn().context("starting a --load process")?);
        }
        Ok(load)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ctrl-C: kill the child, let the parent unwind and clean up.

// Both statics are shared with the signal handler. SeqCst throughout: they publish no other
// data, and the strongest order keeps "store pid, then check INTERRUPTED" (spawn) against
// "set INTERRUPTED, then load pid" (handler) from missing each other.

/// The child of the round in progress (0: none).
static CHILD_PID: AtomicI32 = AtomicI32::new(0);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    // Only async-signal-safe work: atomics and kill(2).
    INTERRUPTED.store(true, Ordering::SeqCst);
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; `pid` is our own child, not yet reaped (the main
        // thread clears CHILD_PID before it reaps).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// SIGINT and SIGTERM kill the running child; its death makes every wait in the parent fail,
/// so the parent unwinds normally, unlinks its mappings and reaps the child. A second signal
/// gets the default action (SA_RESETHAND).
fn install_signal_handlers() -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: an all-zero sigaction is a valid starting value; the handler only touches
        // atomics and calls kill, both async-signal-safe; sigemptyset gets a valid mask.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("installing signal handler");
        }
    }
    Ok(())
}

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The running child: killed (if still running) and reaped on drop, whatever happened.
struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    fn spawn(mut command: Command) -> anyhow::Result<ChildGuard> {
        let child = command
            .spawn()
            .with_context(|| format!("spawning {command:?}"))?;
        let pid = i32::try_from(child.id()).unwrap_or(0);
        CHILD_PID.store(pid, Ordering::SeqCst);
        let guard = ChildGuard { child };
        if interrupted() {
            bail!("interrupted");
        }
        Ok(guard)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `grace` for the child to exit by itself, then kills it. Returns its status.
    fn finish(mut self, grace: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = self.child.try_wait()? {
                CHILD_PID.store(0, Ordering::SeqCst);
                return Ok(status);
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        CHILD_PID.store(0, Ordering::SeqCst);
        let _ = self.child.kill();
        let status = self.child.wait()?;
        bail!(
            "child {} did not exit by itself; killed ({status})",
            self.child.id()
        )
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        CHILD_PID.store(0, Ordering::SeqCst);
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Results.

#[derive(Debug, Serialize, Deserialize)]
struct Machine {
    cpu: String,
    cores: usize,
    kernel: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RoundResult {
    round_trips: u64,
    seconds: f64,
    rt_per_s: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Latency {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct TransportResult {
    transport: String,
    wait: Option<String>,
    /// The backend that actually ran (differs from `transport` when shm fell back; null for
    /// the limit rows measured in one process).
    #[serde(default)]
    backend: Option<String>,
    /// A limit row (`floor`, `serde`, `memcpy`): what the transports are measured against.
    #[serde(default)]
    limit: bool,
    /// Bytes per message (raw messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<usize>,
    rounds: Vec<RoundResult>,
    best_rt_per_s: f64,
    median_rt_per_s: f64,
    latency_ns: Latency,
    pct_of_floor: Option<f64>,
    /// Payload megabytes per second at the best round (raw messages, both directions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mb_per_s: Option<f64>,
    /// Payload megabytes per second at the median round (raw messages, both directions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    median_mb_per_s: Option<f64>,
    /// Best MB/s as a fraction of the memcpy row's at the same size (sweeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memcpy_ratio: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Report {
    machine: Machine,
    profile: String,
    message: String,
    size: Option<usize>,
    /// A payload sweep: one result per transport and size.
    #[serde(default)]
    sweep: bool,
    /// The sweep's message sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sizes: Option<Vec<usize>>,
    /// Bytes per direction (shm ring, socket and pipe buffers).
    #[serde(default)]
    ring_size: usize,
    #[serde(default)]
    duration_s: f64,
    #[serde(default)]
    warmup_s: f64,
    /// `--pace`: the pause between two round trips, in seconds (0: back to back).
    #[serde(default)]
    pace_s: f64,
    /// `--load`: busy background processes during the run.
    #[serde(default)]
    load: usize,
    results: Vec<TransportResult>,
}

fn machine() -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| {
                    l.starts_with("model name")
                        || l.starts_with("Model")
                        || l.starts_with("Hardware")
                })
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    Machine {
        cpu,
        cores,
        kernel: kernel(),
    }
}

fn kernel() -> String {
    // SAFETY: an all-zero utsname is valid; uname fills it with NUL-terminated strings.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return std::env::consts::OS.to_owned();
    }
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {}", field(&uts.sysname), field(&uts.release))
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

// ---------------------------------------------------------------------------------------------
// Running rounds.

/// One row of the table: a transport between two processes, or a limit measured in this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    /// Ping-pong with a child over a transport (`floor` included).
    Ipc(Kind),
    /// Ping-pong with a child over shared memory, waiting this way.
    Shm(WaitStrategy),
    /// The JSON work of one round trip, in this process, no IPC.
    Serde,
    /// Two copies of the message per round trip, in this process: the sweep's limit.
    Memcpy,
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::Ipc(kind) => kind.as_str(),
            Row::Shm(_) => Kind::Shm.as_str(),
            Row::Serde => "serde",
            Row::Memcpy => "memcpy",
        }
    }

    /// A limit the transports are measured against, not a transport.
    fn is_limit(self) -> bool {
        matches!(self, Row::Ipc(Kind::Floor) | Row::Serde | Row::Memcpy)
    }
}

struct Plan {
    rows: Vec<Row>,
    /// Message sizes of a sweep (empty for a ping-pong run).
    sizes: Vec<usize>,
    opts: Options,
    args: RunArgs,
    child_path: PathBuf,
    base: String,
    parent_id: String,
    child_id: String,
}

/// What one round of one row produced.
struct RoundOutcome {
    round: RoundResult,
    histogram: Histogram<u64>,
    /// The backend that carried the messages (none for the rows measured in this process).
    backend: Option<String>,
}

/// The rows `--transport` names, in its order (`all`: every transport, then the limits); the
/// shm row once per wait strategy.
fn parse_rows(
    list: &str,
    sweep: bool,
    message: MessageKind,
    waits: &[WaitStrategy],
) -> anyhow::Result<Vec<Row>> {
    let rows = parse_transports(list, sweep, message)?;
    Ok(rows
        .into_iter()
        .flat_map(|row| match row {
            Row::Ipc(Kind::Shm) => waits.iter().map(|&w| Row::Shm(w)).collect(),
            other => vec![other],
        })
        .collect())
}

fn parse_transports(list: &str, sweep: bool, message: MessageKind) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    if list.trim() == "all" {
        rows.extend(Kind::ALL.iter().map(|&k| Row::Ipc(k)));
        if sweep {
            rows.retain(|&r| r != Row::Ipc(Kind::Floor));
        } else if message == MessageKind::Json {
            rows.push(Row::Serde);
        }
    } else {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let row = match item {
                "serde" => Row::Serde,
                "memcpy" => Row::Memcpy,
                other => Row::Ipc(other.parse()?),
            };
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
    }
    if sweep {
        if rows.contains(&Row::Ipc(Kind::Floor)) || rows.contains(&Row::Serde) {
            bail!(
                "floor and serde are limits of the ping-pong run; the sweep's limit is the memcpy \
                 row, which it always measures"
            );
        }
        rows.retain(|&r| r != Row::Memcpy);
        rows.push(Row::Memcpy);
    } else {
        if rows.contains(&Row::Memcpy) {
            bail!("the memcpy row belongs to the payload sweep (--sweep)");
        }
        if message == MessageKind::Raw && rows.contains(&Row::Serde) {
            bail!("the serde row measures the JSON workload; drop it or --message raw");
        }
    }
    if rows.is_empty() {
        bail!("no transport given");
    }
    Ok(rows)
}

fn child_path(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_owned());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("executable {exe:?} has no directory"))?;
    let path = dir.join(format!("ipc-child{}", std::env::consts::EXE_SUFFIX));
    if !path.exists() {
        bail!("child binary not found at {path:?} (build it, or pass --child PATH)");
    }
    Ok(path)
}

/// One round of one transport with one kind of message.
struct RunRound<'a> {
    plan: &'a Plan,
    round: u32,
    message: MessageKind,
    /// Bytes per raw message.
    size: usize,
    /// Names this round's mapping / socket (unique within the run).
    tag: String,
    /// The plan's options with this row's wait strategy.
    opts: Options,
}

impl Visitor for RunRound<'_> {
    type Output = anyhow::Result<RoundOutcome>;

    fn visit<T: Transport>(self) -> anyhow::Result<RoundOutcome> {
        let plan = self.plan;
        let kind = T::KIND;
        let name = format!("{}-{}", plan.base, self.tag);
        let listener =
            T::listen(&name, &self.opts).with_context(|| format!("setting up {kind}"))?;
        let backend = listener.backend().to_owned();

        let child_args: Vec<String> = vec![
            "--transport".into(),
            kind.as_str().into(),
            "--address".into(),
            listener.address(),
            "--message".into(),
            self.message.as_str().into(),
            "--wait".into(),
            self.opts.wait.to_string(),
            "--ring-size".into(),
            self.opts.ring_size.to_string(),
            "--max-message".into(),
            self.opts.max_message.to_string(),
            "--parent-id".into(),
            plan.parent_id.clone(),
            "--child-id".into(),
            plan.child_id.clone(),
        ];
        let (mut t, child) = if plan.args.no_spawn {
            eprintln!(
                "[info] round {} {kind}: waiting for a peer; run on the other host (with this \
                 host's address if the one shown is loopback):\n  ipc-child {} --standalone",
                self.round,
                child_args.join(" ")
            );
            let t = listener
                .accept(ChildStdio::default(), Peer::unknown())
                .with_context(|| format!("waiting for the {kind} peer to connect"))?;
            (t, None)
        } else {
            let mut command = Command::new(&plan.child_path);
            command
                .args(&child_args)
                .arg("--parent-pid")
                .arg(std::process::id().to_string())
                .stderr(Stdio::inherit());
            if kind.needs_stdio() {
                command.stdin(Stdio::piped()).stdout(Stdio::piped());
            } else {
                // Standard output is the parent's report: the child stays off it.
                command.stdin(Stdio::null()).stdout(Stdio::null());
            }
            let mut child = ChildGuard::spawn(command)?;
            eprintln!(
                "[info] round {} {kind}: child pid {} on {}",
                self.round,
                child.pid(),
                listener.address()
            );
            let stdio = ChildStdio {
                stdin: child.child.stdin.take(),
                stdout: child.child.stdout.take(),
            };
            let peer = Peer::child(child.pid());
            let t = listener
                .accept(stdio, peer)
                .with_context(|| format!("waiting for the {kind} child to connect"))?;
            (t, Some(child))
        };

        let mut pinger = Pinger::new(plan, kind, self.message, self.size);
        let (round, histogram) = measure(
            &plan.args,
            || pinger.round_trip(&mut t),
            &format!("{kind} round {}", self.round),
        )?;
        drop(t);
        if let Some(child) = child {
            let status = child.finish(Duration::from_secs(5))?;
            if !status.success() {
                bail!("{kind} child exited with {status}");
            }
        }
        Ok(RoundOutcome {
            round,
            histogram,
            backend: Some(backend),
        })
    }
}

fn new_histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
}

/// Runs `round_trip` unmeasured for the warmup, then for one measured round; returns the round
/// and its latency histogram. Every row, limits included, goes through this same loop.
fn measure(
    args: &RunArgs,
    mut round_trip: impl FnMut() -> Result<(), Error>,
    what: &str,
) -> anyhow::Result<(RoundResult, Histogram<u64>)> {
    let mut histogram = new_histogram()?;
    timed(args.warmup, args.pace, None, &mut round_trip)
        .with_context(|| format!("{what}: warmup"))?;
    let (round_trips, seconds) = timed(
        args.duration,
        args.pace,
        Some(&mut histogram),
        &mut round_trip,
    )
    .context(what.to_owned())?;
    let rt_per_s = if seconds > 0.0 {
        round_trips as f64 / seconds
    } else {
        0.0
    };
    Ok((
        RoundResult {
            round_trips,
            seconds,
            rt_per_s,
        },
        histogram,
    ))
}

/// Repeats `round_trip` for `duration` (at least once), `pace` apart; returns (round trips,
/// seconds). The histogram records each round trip alone, without the pause before it.
#[inline]
fn timed(
    duration: Duration,
    pace: Duration,
    mut histogram: Option<&mut Histogram<u64>>,
    round_trip: &mut impl FnMut() -> Result<(), Error>,
) -> Result<(u64, f64), Error> {
    let start = Instant::now();
    let deadline = start + duration;
    let mut count = 0u64;
    let mut before = start;
    loop {
        if !pace.is_zero() {
            std::thread::sleep(pace);
            before = Instant::now();
        }
        round_trip()?;
        count += 1;
        let now = Instant::now();
        if let Some(h) = histogram.as_deref_mut() {
            h.saturating_record(u64::try_from((now - before).as_nanos()).unwrap_or(u64::MAX));
        }
        before = now;
        if now >= deadline {
            return Ok((count, (now - start).as_secs_f64()));
        }
    }
}

/// The parent's side of the workload.
struct Pinger<'a> {
    workload: Workload,
    parent_id: &'a str,
    child_id: &'a str,
    raw: Vec<u8>,
    seq: u64,
}

impl<'a> Pinger<'a> {
    fn new(plan: &'a Plan, kind: Kind, message: MessageKind, size: usize) -> Self {
        let workload = Workload::of(kind, message);
        let size = if workload == Workload::Raw { size } else { 0 };
        Pinger {
            workload,
            parent_id: &plan.parent_id,
            child_id: &plan.child_id,
            raw: vec![0xa5; size],
            seq: 0,
        }
    }

    #[inline]
    fn round_trip<T: Transport>(&mut self, t: &mut T) -> Result<(), Error> {
        self.seq = self.seq.wrapping_add(1);
        match self.workload {
            Workload::Json => common::json_round_trip(t, self.parent_id, self.child_id),
            Workload::ReferenceJson => {
                let ping = OwnedPing {
                    sender_id: self.parent_id.to_owned(),
                    receiver_id: self.child_id.to_owned(),
                    sent_at_ms: common::now_ms(),
                };
                let bytes = serde_json::to_vec(&ping)?;
                t.send(&bytes)?;
                let pong: OwnedPing = t.recv_with(|b| Ok(serde_json::from_slice(b)?))?;
                if pong.sender_id != self.child_id
                    || pong.receiver_id != self.parent_id
                    || pong.sent_at_ms != ping.sent_at_ms
                {
                    return Err(Error::Corrupt(format!("unexpected pong {pong:?}")));
                }
                Ok(())
            }
            Workload::Raw => {
                let seq = self.seq;
                stamp(&mut self.raw, seq);
                t.send(&self.raw)?;
                let len = self.raw.len();
                if !t.recv_with(|b| Ok(check_stamp(b, len, seq)))? {
                    return Err(Error::Corrupt(format!("echo of message {seq} damaged")));
                }
                Ok(())
            }
            Workload::Bounce => {
                t.send(&[])?;
                t.recv_with(|_| Ok(()))
            }
        }
    }
}

/// The `serde` row: both processes' JSON work of one round trip, done in this one, exactly as
/// the `shm` transport does it around the ring: the ping serialised into a 256-byte slice (the
/// size of the ring grant `Channel::send_json` reserves for it) with borrowed `&str` ids and a
/// `u64` timestamp, decoded in place and checked as the child does, the pong likewise, each
/// direction in its own buffer as each has its own ring.
struct SerdeWork<'a> {
    parent_id: &'a str,
    child_id: &'a str,
    ping_buf: [u8; 256],
    pong_buf: [u8; 256],
}

impl<'a> SerdeWork<'a> {
    fn new(plan: &'a Plan) -> Self {
        SerdeWork {
            parent_id: &plan.parent_id,
            child_id: &plan.child_id,
            ping_buf: [0; 256],
            pong_buf: [0; 256],
        }
    }

    /// Serialises `value` into `buf` the way `Channel::send_json` writes into a grant.
    #[inline]
    fn encode(buf: &mut [u8], value: &Ping<'_>) -> Result<usize, Error> {
        let mut out = SliceWriter::new(buf);
        serde_json::to_writer(&mut out, value)?;
        Ok(out.written())
    }

    #[inline]
    fn round_trip(&mut self) -> Result<(), Error> {
        // Parent: stamp and send the ping.
        let sent_at_ms = common::now_ms() as u64;
        let ping = Ping {
            sender_id: self.parent_id,
            receiver_id: self.child_id,
            sent_at_ms,
        };
        let n = Self::encode(&mut self.ping_buf, &ping)?;
        // Child: decode the ping in place, check it, answer.
        let frame = black_box(&self.ping_buf[..n]);
        let got: Ping<'_> = serde_json::from_slice(frame)?;
        if got.sender_id != self.parent_id || got.receiver_id != self.child_id {
            return Err(Error::Corrupt(format!("unexpected ping {got:?}")));
        }
        let pong = Ping {
            sender_id: self.child_id,
            receiver_id: self.parent_id,
            sent_at_ms: got.sent_at_ms,
        };
        let m = Self::encode(&mut self.pong_buf, &pong)?;
        // Parent: decode the pong in place and check it.
        let frame = black_box(&self.pong_buf[..m]);
        let back: Ping<'_> = serde_json::from_slice(frame)?;
        if back.sender_id != self.child_id
            || back.receiver_id != self.parent_id
            || back.sent_at_ms != sent_at_ms
        {
            return Err(Error::Corrupt(format!("unexpected pong {back:?}")));
        }
        Ok(())
    }
}

/// The `memcpy` row: one message-sized copy per direction, in one process. Both buffers are
/// written before the round, so page faults stay out of it.
struct Copier {
    a: Vec<u8>,
    b: Vec<u8>,
}

impl Copier {
    fn new(size: usize) -> Self {
        Copier {
            a: vec![0xa5; size],
            b: vec![0x5a; size],
        }
    }

    #[inline]
    fn round_trip(&mut self) -> Result<(), Error> {
        self.b.copy_from_slice(black_box(&self.a));
        self.a.copy_from_slice(black_box(&self.b));
        black_box(&mut self.a);
        Ok(())
    }
}

/// Runs one round of `row` (`size`: bytes per raw message of a sweep or a raw run).
fn run_round(
    plan: &Plan,
    row: Row,
    round: u32,
    size: Option<usize>,
) -> anyhow::Result<RoundOutcome> {
    let what = match size {
        Some(size) => format!("{} {} round {round}", row.name(), size_label(size)),
        None => format!("{} round {round}", row.name()),
    };
    match row {
        Row::Ipc(_) | Row::Shm(_) => {
            let (kind, opts) = match row {
                Row::Shm(wait) => (
                    Kind::Shm,
                    Options {
                        wait,
                        ..plan.opts.clone()
                    },
                ),
                Row::Ipc(kind) => (kind, plan.opts.clone()),
                _ => unreachable!("matched above"),
            };
            // Several shm rows (one per strategy) share a round: each its own names.
            let row_tag = |t: String| match row {
                Row::Shm(wait) if plan.args.wait.0.len() > 1 => format!("{t}-{wait}"),
                _ => t,
            };
            let (message, size, tag) = match size {
                Some(size) if plan.args.sweep => {
                    (MessageKind::Raw, size, format!("r{round}-{size}"))
                }
                Some(size) => (MessageKind::Raw, size, format!("r{round}")),
                None => (plan.args.message, 0, format!("r{round}")),
            };
            transport::dispatch(
                kind,
                RunRound {
                    plan,
                    round,
                    message,
                    size,
                    tag: row_tag(tag),
                    opts,
                },
            )
        }
        Row::Serde => {
            let mut work = SerdeWork::new(plan);
            let (round, histogram) = measure(&plan.args, || work.round_trip(), &what)?;
            Ok(RoundOutcome {
                round,
                histogram,
                backend: None,
            })
        }
        Row::Memcpy => {
            let mut copier = Copier::new(size.unwrap_or(0));
            let (round, histogram) = measure(&plan.args, || copier.round_trip(), &what)?;
            Ok(RoundOutcome {
                round,
                histogram,
                backend: None,
            })
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    install_signal_handlers()?;
    let rows = parse_rows(&args.transport, args.sweep, args.message, &args.wait.0)?;
    if args.no_spawn && rows.iter().any(|&r| r != Row::Ipc(Kind::Tcp)) {
        bail!("--no-spawn needs --transport tcp (a peer started by hand reaches only TCP)");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if !args.sweep && args.message == MessageKind::Raw && args.size == 0 {
        bail!("--size must be at least 1 byte");
    }
    let sizes = if args.sweep {
        common::parse_sizes(&args.sizes).context("--sizes")?
    } else {
        Vec::new()
    };
    // The largest message of the run: raw-sync's mailbox slot and the stream framing grow to it.
    let largest = if args.sweep {
        sizes.iter().copied().max().unwrap_or(0)
    } else if args.message == MessageKind::Raw {
        args.size
    } else {
        0
    };
    let ring_size = args.ring_size.unwrap_or(if args.sweep {
        sweep_ring(largest)
    } else {
        DEFAULT_RING
    });
    let opts = Options {
        wait: args.wait.0[0],
        ring_size,
        max_message: largest.max(Options::default().max_message),
        tcp_addr: args.tcp_addr.clone(),
        // A peer started by hand gets minutes, a spawned child seconds.
        connect_timeout: Duration::from_secs(if args.no_spawn { 300 } else { 10 }),
    };
    let needs_child = !args.no_spawn && rows.iter().any(|r| matches!(r, Row::Ipc(_) | Row::Shm(_)));
    let plan = Plan {
        rows,
        sizes,
        opts,
        child_path: if needs_child {
            child_path(args.child.as_deref())?
        } else {
            PathBuf::new()
        },
        base: args
            .name
            .clone()
            .unwrap_or_else(|| format!("h{}", std::process::id())),
        parent_id: common::random_id(),
        child_id: common::random_id(),
        args,
    };
    shmlink::testing::validate_fallback_name(&plan.base).map_err(|e| anyhow!("--name: {e}"))?;
    let machine = machine();
    let raw_size =
        (!plan.args.sweep && plan.args.message == MessageKind::Raw).then_some(plan.args.size);
    if !plan.args.json {
        let what = if plan.args.sweep {
            format!(
                "payload sweep, raw messages of {} echoed back; ring {} per direction",
                plan.sizes
                    .iter()
                    .map(|&s| size_label(s))
                    .collect::<Vec<_>>()
                    .join(", "),
                size_label(plan.opts.ring_size)
            )
        } else {
            match raw_size {
                Some(size) => format!("message: raw ({size} bytes)"),
                None => "message: json".to_owned(),
            }
        };
        println!(
            "machine: {} ({} cores), {}; build: {}; {what}; pace {:?}; load {}",
            machine.cpu,
            machine.cores,
            machine.kernel,
            profile(),
            plan.args.pace,
            plan.args.load,
        );
    }
    // Started after the child binary was found, stopped (on drop) after the last round.
    let _load = Load::start(plan.args.load)?;

    // The cells of the table: (row, bytes per raw message). A sweep runs every row at every
    // size; each round goes through all sizes and, within a size, all rows.
    let cells: Vec<(Row, Option<usize>)> = if plan.args.sweep {
        plan.sizes
            .iter()
            .flat_map(|&size| plan.rows.iter().map(move |&row| (row, Some(size))))
            .collect()
    } else {
        plan.rows.iter().map(|&row| (row, raw_size)).collect()
    };
    let mut rounds: Vec<Vec<RoundResult>> = vec![Vec::new(); cells.len()];
    let mut histograms: Vec<Histogram<u64>> = cells
        .iter()
        .map(|_| new_histogram())
        .collect::<anyhow::Result<_>>()?;
    let mut backends: Vec<Option<String>> = vec![None; cells.len()];
    for round in 1..=plan.args.rounds {
        for (i, &(row, size)) in cells.iter().enumerate() {
            if interrupted() {
                bail!("interrupted");
            }
            let outcome = match run_round(&plan, row, round, size) {
                Err(_) if interrupted() => bail!("interrupted"),
                other => other?,
            };
            let r = &outcome.round;
            let line = match size.filter(|_| plan.args.sweep) {
                Some(size) => format!(
                    "[{} {}] completed [{}] ping-pong round-trips [{:.3}] seconds ([{:.1}] \
                     round-trips/second, [{:.1}] MB/s)",
                    row.name(),
                    size_label(size),
                    r.round_trips,
                    r.seconds,
                    r.rt_per_s,
                    mb_per_s(r.rt_per_s, size)
                ),
                None => format!(
                    "[{}] completed [{}] ping-pong round-trips [{:.3}] seconds ([{:.1}] \
                     round-trips/second)",
                    row.name(),
                    r.round_trips,
                    r.seconds,
                    r.rt_per_s
                ),
            };
            if plan.args.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
            histograms[i]
                .add(&outcome.histogram)
                .map_err(|e| anyhow!("histogram: {e}"))?;
            backends[i] = outcome.backend;
            rounds[i].push(outcome.round);
        }
    }

    let best_of = |i: usize| rounds[i].iter().map(|r| r.rt_per_s).fold(0.0, f64::max);
    let floor_best = cells
        .iter()
        .position(|&(row, _)| row == Row::Ipc(Kind::Floor))
        .map(best_of);
    let memcpy_best = |size: Option<usize>| {
        cells
            .iter()
            .position(|&cell| cell == (Row::Memcpy, size))
            .map(|i| mb_per_s(best_of(i), size.unwrap_or(0)))
    };
    let results: Vec<TransportResult> = cells
        .iter()
        .enumerate()
        .map(|(i, &(row, size))| {
            let mut rates: Vec<f64> = rounds[i].iter().map(|r| r.rt_per_s).collect();
            let best = best_of(i);
            let median_rt = median(&mut rates);
            let h = &histograms[i];
            // The payload a round trip moves: floor's bounce carries none.
            let payload = if row == Row::Ipc(Kind::Floor) {
                size.map(|_| 0)
            } else {
                size
            };
            let mb = payload.map(|p| mb_per_s(best, p));
            TransportResult {
                transport: row.name().to_owned(),
                wait: match row {
                    Row::Shm(wait) => Some(wait.to_string()),
                    _ => None,
                },
                backend: backends[i].clone(),
                limit: row.is_limit(),
                size: payload,
                rounds: rounds[i].clone(),
                best_rt_per_s: best,
                median_rt_per_s: median_rt,
                latency_ns: Latency {
                    p50: h.value_at_quantile(0.5),
                    p99: h.value_at_quantile(0.99),
                    p999: h.value_at_quantile(0.999),
                    max: h.max(),
                },
                pct_of_floor: floor_best.filter(|&f| f > 0.0).map(|f| best / f * 100.0),
                mb_per_s: mb,
                median_mb_per_s: payload.map(|p| mb_per_s(median_rt, p)),
                memcpy_ratio: mb
                    .and_then(|mb| memcpy_best(size).filter(|&m| m > 0.0).map(|m| mb / m)),
            }
        })
        .collect();
    let report = Report {
        machine,
        profile: profile().to_owned(),
        message: if plan.args.sweep {
            MessageKind::Raw
        } else {
            plan.args.message
        }
        .as_str()
        .to_owned(),
        size: raw_size,
        sweep: plan.args.sweep,
        sizes: plan.args.sweep.then(|| plan.sizes.clone()),
        ring_size: plan.opts.ring_size,
        duration_s: plan.args.duration.as_secs_f64(),
        warmup_s: plan.args.warmup.as_secs_f64(),
        pace_s: plan.args.pace.as_secs_f64(),
        load: plan.args.load,
        results,
    };
    if let Some(path) = &plan.args.save {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {path:?}"))?;
        eprintln!("[info] wrote {path:?}");
    }
    let mut out = std::io::stdout().lock();
    if plan.args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if report.sweep {
        print_sweep(&mut out, &report)?;
    } else {
        print_table(&mut out, &report)?;
    }
    Ok(())
}

/// Payload megabytes per second, both directions counted: 2 x size x round trips / s.
fn mb_per_s(rt_per_s: f64, size: usize) -> f64 {
    rt_per_s * 2.0 * size as f64 / 1e6
}

/// The name a table shows for a result: limit rows say so.
fn row_label(r: &TransportResult) -> String {
    if r.limit {
        format!("{} [limit]", r.transport)
    } else {
        r.transport.clone()
    }
}

fn print_table(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<15} {:<6} {:<12} {:>12} {:>14} {:>14} {:>9} {:>9} {:>9} {:>10} {:>8}",
        "transport",
        "wait",
        "backend",
        "round trips",
        "best rt/s",
        "median rt/s",
        "p50 ns",
        "p99 ns",
        "p99.9 ns",
        "max ns",
        "% floor"
    )?;
    // Transports first, then the limits under a rule.
    let (limits, transports): (Vec<&TransportResult>, Vec<&TransportResult>) =
        report.results.iter().partition(|r| r.limit);
    let row = |out: &mut dyn Write, r: &TransportResult| -> std::io::Result<()> {
        let total: u64 = r.rounds.iter().map(|x| x.round_trips).sum();
        writeln!(
            out,
            "{:<15} {:<6} {:<12} {:>12} {:>14.1} {:>14.1} {:>9} {:>9} {:>9} {:>10} {:>8}",
            row_label(r),
            r.wait.as_deref().unwrap_or("-"),
            r.backend.as_deref().unwrap_or("-"),
            total,
            r.best_rt_per_s,
            r.median_rt_per_s,
            r.latency_ns.p50,
            r.latency_ns.p99,
            r.latency_ns.p999,
            r.latency_ns.max,
            r.pct_of_floor.map_or("-".to_owned(), |p| format!("{p:.1}")),
        )
    };
    for r in &transports {
        row(out, r)?;
    }
    if !limits.is_empty() {
        if !transports.is_empty() {
            writeln!(out, "{}", "-".repeat(15))?;
        }
        for r in &limits {
            row(out, r)?;
        }
        writeln!(out)?;
        for r in &limits {
            let note = match r.transport.as_str() {
                "floor" => "floor [limit]: two cache lines bounced between the processes, no framing: the hardware's round trip",
                "serde" => "serde [limit]: the JSON work of one round trip (serialise ping, decode, serialise pong, decode) in one process, no IPC",
                _ => continue,
            };
            writeln!(out, "{note}")?;
        }
    }
    Ok(())
}

/// The sweep's table: one line per transport and size, then a matrix of best MB/s.
fn print_sweep(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    let rounds = report.results.first().map_or(0, |r| r.rounds.len());
    writeln!(out)?;
    writeln!(
        out,
        "payload throughput: MB/s with both directions counted (2 x size x round trips / s), \
         best and median of {rounds} round(s); x memcpy: best MB/s over the memcpy row's"
    )?;
    writeln!(
        out,
        "{:<8} {:<16} {:<12} {:>11} {:>12} {:>12} {:>9} {:>11} {:>11}",
        "size",
        "transport",
        "backend",
        "round trips",
        "best MB/s",
        "median MB/s",
        "x memcpy",
        "p50 us",
        "p99 us"
    )?;
    let sizes = report.sizes.clone().unwrap_or_default();
    for (n, &size) in sizes.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        for r in report.results.iter().filter(|r| r.size == Some(size)) {
            let total: u64 = r.rounds.iter().map(|x| x.round_trips).sum();
            writeln!(
                out,
                "{:<8} {:<16} {:<12} {:>11} {:>12.1} {:>12.1} {:>9} {:>11.1} {:>11.1}",
                size_label(size),
                row_label(r),
                r.backend.as_deref().unwrap_or("-"),
                total,
                r.mb_per_s.unwrap_or(0.0),
                r.median_mb_per_s.unwrap_or(0.0),
                r.memcpy_ratio
                    .map_or("-".to_owned(), |x| format!("{x:.2}x")),
                r.latency_ns.p50 as f64 / 1e3,
                r.latency_ns.p99 as f64 / 1e3,
            )?;
        }
    }

    // The same best figures as a matrix, sizes down, transports across (seed 000's layout).
    let mut names: Vec<String> = Vec::new();
    for r in &report.results {
        if !names.contains(&r.transport) {
            names.push(r.transport.clone());
        }
    }
    writeln!(out)?;
    write!(out, "{:<10}", "best MB/s")?;
    for name in &names {
        write!(out, " {name:>12}")?;
    }
    writeln!(out)?;
    for &size in &sizes {
        write!(out, "{:<10}", size_label(size))?;
        for name in &names {
            let cell = report
                .results
                .iter()
                .find(|r| &r.transport == name && r.size == Some(size))
                .and_then(|r| r.mb_per_s)
                .map_or("-".to_owned(), |mb| format!("{mb:.0}"));
            write!(out, " {cell:>12}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// chart and compare.

fn read_report(path: &Path) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{path:?} is not an ipc-parent --json result"))
}

fn chart(input: &Path, output: &Path) -> anyhow::Result<()> {
    use plotters::prelude::*;

    let report = read_report(input)?;
    if report.results.is_empty() {
        bail!("{input:?} has no results");
    }
    if report.sweep {
        return sweep_chart(&report, output);
    }
    let top = report
        .results
        .iter()
        .map(|r| r.best_rt_per_s)
        .fold(10.0, f64::max)
        * 3.0;
    let n = report.results.len();
    let title = format!(
        "ping-pong round trips / s ({} build, {} messages) - {}",
        report.profile, report.message, report.machine.cpu
    );
    let root = SVGBackend::new(output, (960, 540)).into_drawing_area();
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e:?}");
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n).into_segmented(), (1.0f64..top).log_scale())
        .map_err(draw)?;
    let labels: Vec<String> = report
        .results
        .iter()
        .map(|r| match &r.backend {
            Some(b) if b != &r.transport => format!("{} ({b})", r.transport),
            _ => row_label(r),
        })
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("best round trips per second (log scale)")
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(draw)?;
    chart
        .draw_series(report.results.iter().enumerate().map(|(i, r)| {
            let color = Palette99::pick(i).filled();
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 1.0),
                    (SegmentValue::Exact(i + 1), r.best_rt_per_s.max(1.0)),
                ],
                color,
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        }))
        .map_err(draw)?;
    chart
        .draw_series(report.results.iter().enumerate().map(|(i, r)| {
            Text::new(
                format!("{:.0}", r.best_rt_per_s),
                (SegmentValue::CenterOf(i), r.best_rt_per_s.max(1.0) * 1.15),
                ("sans-serif", 13).into_font(),
            )
        }))
        .map_err(draw)?;
    root.present().map_err(draw)?;
    eprintln!("[info] wrote {output:?}");
    Ok(())
}

/// Grouped bars: one group per message size, one bar per transport (memcpy last), best MB/s
/// on a log scale.
fn sweep_chart(report: &Report, output: &Path) -> anyhow::Result<()> {
    use plotters::prelude::*;

    let sizes = report.sizes.clone().unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for r in &report.results {
        if !names.contains(&r.transport) {
            names.push(r.transport.clone());
        }
    }
    if sizes.is_empty() || names.is_empty() {
        bail!("the sweep document has no sizes or no results");
    }
    let mb = |name: &str, size: usize| {
        report
            .results
            .iter()
            .find(|r| r.transport == name && r.size == Some(size))
            .and_then(|r| r.mb_per_s)
    };
    let top = report
        .results
        .iter()
        .filter_map(|r| r.mb_per_s)
        .fold(10.0, f64::max)
        * 3.0;
    let bottom = report
        .results
        .iter()
        .filter_map(|r| r.mb_per_s)
        .filter(|&x| x > 0.0)
        .fold(top, f64::min);
    // Room under the smallest bar so that it shows.
    let bottom = (bottom * 0.5).clamp(0.01, 1.0);
    // Half-bar units on the x axis: each bar is two wide, each group ends with a one-bar gap,
    // so a group's centre (where its size label goes) falls on a whole unit.
    let per_group = 2 * (names.len() + 1);
    let slots = (sizes.len() * per_group) as i32;
    let middle = names.len();
    let title = format!(
        "payload throughput, MB/s both directions ({} build, ring {}) - {}",
        report.profile,
        size_label(report.ring_size),
        report.machine.cpu
    );
    let root = SVGBackend::new(output, (1100, 560)).into_drawing_area();
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e:?}");
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0..slots, (bottom..top).log_scale())
        .map_err(draw)?;
    let label_sizes = sizes.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(slots as usize + 1)
        .y_desc("best MB/s, both directions (log scale)")
        .x_label_formatter(&|&x| {
            let group = (x as usize) / per_group;
            if x >= 0 && (x as usize) % per_group == middle {
                label_sizes
                    .get(group)
                    .map(|&s| size_label(s))
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(draw)?;
    for (t, name) in names.iter().enumerate() {
        let color = Palette99::pick(t);
        let bars: Vec<_> = sizes
            .iter()
            .enumerate()
            .filter_map(|(g, &size)| {
                let value = mb(name, size)?.max(bottom);
                let x = (g * per_group + 2 * t) as i32;
                let mut bar = Rectangle::new([(x, bottom), (x + 2, value)], color.filled());
                bar.set_margin(0, 0, 2, 2);
                Some(bar)
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(draw)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    eprintln!("[info] wrote {output:?}");
    Ok(())
}

fn compare(debug: &Path, release: &Path) -> anyhow::Result<()> {
    let debug = read_report(debug)?;
    let release = read_report(release)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "machine: {} ({} cores), {}",
        release.machine.cpu, release.machine.cores, release.machine.kernel
    )?;
    writeln!(
        out,
        "{:<16} {:>8} {:>16} {:>16} {:>15} {:>14} {:>14}",
        "transport",
        "size",
        "debug best rt/s",
        "release best rt/s",
        "release/debug",
        "debug p50 ns",
        "release p50 ns"
    )?;
    for r in &release.results {
        let d = debug
            .results
            .iter()
            .find(|d| d.transport == r.transport && d.size == r.size);
        let ratio = d
            .filter(|d| d.best_rt_per_s > 0.0)
            .map(|d| r.best_rt_per_s / d.best_rt_per_s);
        writeln!(
            out,
            "{:<16} {:>8} {:>16} {:>17.1} {:>15} {:>14} {:>14}",
            row_label(r),
            r.size.map_or("-".to_owned(), size_label),
            d.map_or("-".to_owned(), |d| format!("{:.1}", d.best_rt_per_s)),
            r.best_rt_per_s,
            ratio.map_or("-".to_owned(), |x| format!("{x:.2}x")),
            d.map_or("-".to_owned(), |d| d.latency_ns.p50.to_string()),
            r.latency_ns.p50,
        )?;
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Cmd::Chart { input, output }) => chart(&input, &output),
        Some(Cmd::Compare { debug, release }) => compare(&debug, &release),
        None => run(cli.run),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
