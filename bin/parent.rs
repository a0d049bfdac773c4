//! `ipc-parent`: spawns `ipc-child` over each transport, runs timed ping-pong rounds (the
//! transports interleaved round by round), and prints a table, or one JSON document with
//! `--json`.
//!
//! Subcommands: `chart` draws an SVG bar chart of a `--json` result; `compare` puts a debug
//! and a release result side by side with the release / debug ratio.

#[path = "common.rs"]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::{Parser, Subcommand};
use common::{check_stamp, stamp, MessageKind, OwnedPing, Ping, PingMsg, Workload};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use shmring::transport::{self, ChildStdio, Kind, Listener, Options, Peer, Transport, Visitor};
use shmring::{Error, WaitStrategy};

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
    /// Draw an SVG bar chart (best round trips per second, log scale) of a `--json` result.
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
    /// Transports to run: a comma list of shm, ipc-channel, raw-sync, pipe, uds, tcp, floor,
    /// or `all`.
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
    /// How the shm transport waits: spin, yield or block.
    #[arg(long, default_value = "spin")]
    wait: WaitStrategy,
    /// Bytes per direction: shm ring, raw-sync mailbox, socket and pipe buffers.
    #[arg(long, default_value = "1MiB", value_parser = common::parse_size)]
    ring_size: usize,
    /// Address the tcp transport binds (the child connects to what it got).
    #[arg(long, default_value = "127.0.0.1:0")]
    tcp_addr: String,
    /// Print exactly one JSON document on standard output instead of the table.
    #[arg(long)]
    json: bool,
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
    /// The backend that actually ran (differs from `transport` when shm fell back).
    #[serde(default)]
    backend: Option<String>,
    rounds: Vec<RoundResult>,
    best_rt_per_s: f64,
    median_rt_per_s: f64,
    latency_ns: Latency,
    pct_of_floor: Option<f64>,
    /// Payload megabytes per second at the best round (raw messages, both directions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mb_per_s: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Report {
    machine: Machine,
    profile: String,
    message: String,
    size: Option<usize>,
    #[serde(default)]
    duration_s: f64,
    #[serde(default)]
    warmup_s: f64,
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

struct Plan {
    kinds: Vec<Kind>,
    opts: Options,
    args: RunArgs,
    child_path: PathBuf,
    base: String,
    parent_id: String,
    child_id: String,
}

/// What one round of one transport produced.
struct RoundOutcome {
    round: RoundResult,
    histogram: Histogram<u64>,
    backend: String,
}

fn parse_transports(list: &str) -> anyhow::Result<Vec<Kind>> {
    if list.trim() == "all" {
        return Ok(Kind::ALL.to_vec());
    }
    let mut kinds = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let kind: Kind = item.parse()?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        bail!("no transport given");
    }
    Ok(kinds)
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

struct RunRound<'a> {
    plan: &'a Plan,
    round: u32,
}

impl Visitor for RunRound<'_> {
    type Output = anyhow::Result<RoundOutcome>;

    fn visit<T: Transport>(self) -> anyhow::Result<RoundOutcome> {
        let plan = self.plan;
        let kind = T::KIND;
        let name = format!("{}-r{}", plan.base, self.round);
        let listener =
            T::listen(&name, &plan.opts).with_context(|| format!("setting up {kind}"))?;
        let backend = listener.backend().to_owned();

        let child_args: Vec<String> = vec![
            "--transport".into(),
            kind.as_str().into(),
            "--address".into(),
            listener.address(),
            "--message".into(),
            plan.args.message.as_str().into(),
            "--wait".into(),
            plan.opts.wait.to_string(),
            "--ring-size".into(),
            plan.opts.ring_size.to_string(),
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

        let mut workload = Pinger::new(plan, kind);
        let mut histogram = new_histogram()?;
        workload
            .run(&mut t, plan.args.warmup, None)
            .with_context(|| format!("{kind} warmup"))?;
        let (round_trips, seconds) = workload
            .run(&mut t, plan.args.duration, Some(&mut histogram))
            .with_context(|| format!("{kind} round {}", self.round))?;
        drop(t);
        if let Some(child) = child {
            let status = child.finish(Duration::from_secs(5))?;
            if !status.success() {
                bail!("{kind} child exited with {status}");
            }
        }
        let rt_per_s = if seconds > 0.0 {
            round_trips as f64 / seconds
        } else {
            0.0
        };
        Ok(RoundOutcome {
            round: RoundResult {
                round_trips,
                seconds,
                rt_per_s,
            },
            histogram,
            backend,
        })
    }
}

fn new_histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
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
    fn new(plan: &'a Plan, kind: Kind) -> Self {
        let workload = Workload::of(kind, plan.args.message);
        let size = if workload == Workload::Raw {
            plan.args.size
        } else {
            0
        };
        Pinger {
            workload,
            parent_id: &plan.parent_id,
            child_id: &plan.child_id,
            raw: vec![0xa5; size],
            seq: 0,
        }
    }

    /// Ping-pongs for `duration`; returns (round trips, seconds).
    fn run<T: Transport>(
        &mut self,
        t: &mut T,
        duration: Duration,
        mut histogram: Option<&mut Histogram<u64>>,
    ) -> Result<(u64, f64), Error> {
        let start = Instant::now();
        let deadline = start + duration;
        let mut count = 0u64;
        let mut before = start;
        loop {
            self.round_trip(t)?;
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

    #[inline]
    fn round_trip<T: Transport>(&mut self, t: &mut T) -> Result<(), Error> {
        self.seq = self.seq.wrapping_add(1);
        match self.workload {
            Workload::Json => {
                let sent_at_ms = common::now_ms() as u64;
                let ping = Ping {
                    sender_id: self.parent_id,
                    receiver_id: self.child_id,
                    sent_at_ms,
                };
                t.send_json(&ping)?;
                t.recv_json::<PingMsg, _>(|pong| {
                    if pong.sender_id != self.child_id
                        || pong.receiver_id != self.parent_id
                        || pong.sent_at_ms != sent_at_ms
                    {
                        return Err(Error::Corrupt(format!("unexpected pong {pong:?}")));
                    }
                    Ok(())
                })
            }
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
    let kinds = parse_transports(&args.transport)?;
    if args.no_spawn && kinds.iter().any(|&k| k != Kind::Tcp) {
        bail!("--no-spawn needs --transport tcp (a peer started by hand reaches only TCP)");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.message == MessageKind::Raw && args.size == 0 {
        bail!("--size must be at least 1 byte");
    }
    let opts = Options {
        wait: args.wait,
        ring_size: args.ring_size,
        tcp_addr: args.tcp_addr.clone(),
        // A peer started by hand gets minutes, a spawned child seconds.
        connect_timeout: Duration::from_secs(if args.no_spawn { 300 } else { 10 }),
    };
    let plan = Plan {
        kinds,
        opts,
        child_path: if args.no_spawn {
            PathBuf::new()
        } else {
            child_path(args.child.as_deref())?
        },
        base: args
            .name
            .clone()
            .unwrap_or_else(|| format!("h{}", std::process::id())),
        parent_id: common::random_id(),
        child_id: common::random_id(),
        args,
    };
    shmring::fallback::validate_name(&plan.base).map_err(|e| anyhow!("--name: {e}"))?;
    let machine = machine();
    if !plan.args.json {
        println!(
            "machine: {} ({} cores), {}; build: {}; message: {}{}",
            machine.cpu,
            machine.cores,
            machine.kernel,
            profile(),
            plan.args.message.as_str(),
            if plan.args.message == MessageKind::Raw {
                format!(" ({} bytes)", plan.args.size)
            } else {
                String::new()
            },
        );
    }

    let mut rounds: Vec<Vec<RoundResult>> = vec![Vec::new(); plan.kinds.len()];
    let mut histograms: Vec<Histogram<u64>> = plan
        .kinds
        .iter()
        .map(|_| new_histogram())
        .collect::<anyhow::Result<_>>()?;
    let mut backends: Vec<String> = plan.kinds.iter().map(|k| k.to_string()).collect();
    for round in 1..=plan.args.rounds {
        for (i, &kind) in plan.kinds.iter().enumerate() {
            if interrupted() {
                bail!("interrupted");
            }
            let outcome = transport::dispatch(kind, RunRound { plan: &plan, round });
            let outcome = match outcome {
                Err(_) if interrupted() => bail!("interrupted"),
                other => other?,
            };
            let line = format!(
                "completed [{}] ping-pong round-trips [{:.3}] seconds ([{:.1}] round-trips/second)",
                outcome.round.round_trips, outcome.round.seconds, outcome.round.rt_per_s
            );
            if plan.args.json {
                eprintln!("[{kind}] {line}");
            } else {
                println!("[{kind}] {line}");
            }
            histograms[i]
                .add(&outcome.histogram)
                .map_err(|e| anyhow!("histogram: {e}"))?;
            backends[i] = outcome.backend;
            rounds[i].push(outcome.round);
        }
    }

    let floor_best = plan
        .kinds
        .iter()
        .position(|&k| k == Kind::Floor)
        .and_then(|i| rounds[i].iter().map(|r| r.rt_per_s).reduce(f64::max));
    let raw_size = (plan.args.message == MessageKind::Raw).then_some(plan.args.size);
    let results: Vec<TransportResult> = plan
        .kinds
        .iter()
        .enumerate()
        .map(|(i, &kind)| {
            let mut rates: Vec<f64> = rounds[i].iter().map(|r| r.rt_per_s).collect();
            let best = rates.iter().copied().fold(0.0, f64::max);
            let h = &histograms[i];
            let payload = if kind == Kind::Floor {
                Some(0)
            } else {
                raw_size
            };
            TransportResult {
                transport: kind.to_string(),
                wait: (kind == Kind::Shm).then(|| plan.opts.wait.to_string()),
                backend: Some(backends[i].clone()),
                rounds: rounds[i].clone(),
                best_rt_per_s: best,
                median_rt_per_s: median(&mut rates),
                latency_ns: Latency {
                    p50: h.value_at_quantile(0.5),
                    p99: h.value_at_quantile(0.99),
                    p999: h.value_at_quantile(0.999),
                    max: h.max(),
                },
                pct_of_floor: floor_best.filter(|&f| f > 0.0).map(|f| best / f * 100.0),
                mb_per_s: payload.map(|size| best * 2.0 * size as f64 / 1e6),
            }
        })
        .collect();
    let report = Report {
        machine,
        profile: profile().to_owned(),
        message: plan.args.message.as_str().to_owned(),
        size: raw_size,
        duration_s: plan.args.duration.as_secs_f64(),
        warmup_s: plan.args.warmup.as_secs_f64(),
        results,
    };
    let mut out = std::io::stdout().lock();
    if plan.args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        print_table(&mut out, &report)?;
    }
    Ok(())
}

fn print_table(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<12} {:<6} {:<12} {:>12} {:>14} {:>14} {:>9} {:>9} {:>9} {:>10} {:>8}",
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
    for r in &report.results {
        let total: u64 = r.rounds.iter().map(|x| x.round_trips).sum();
        writeln!(
            out,
            "{:<12} {:<6} {:<12} {:>12} {:>14.1} {:>14.1} {:>9} {:>9} {:>9} {:>10} {:>8}",
            r.transport,
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
        )?;
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
            _ => r.transport.clone(),
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
        "{:<12} {:>16} {:>16} {:>15} {:>14} {:>14}",
        "transport",
        "debug best rt/s",
        "release best rt/s",
        "release/debug",
        "debug p50 ns",
        "release p50 ns"
    )?;
    for r in &release.results {
        let d = debug.results.iter().find(|d| d.transport == r.transport);
        let ratio = d
            .filter(|d| d.best_rt_per_s > 0.0)
            .map(|d| r.best_rt_per_s / d.best_rt_per_s);
        writeln!(
            out,
            "{:<12} {:>16} {:>17.1} {:>15} {:>14} {:>14}",
            r.transport,
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
