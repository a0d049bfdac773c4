//! `c-api`: seed 003's workloads written in C against libshmlink (`shmlink-c/bench/bench.c`,
//! compiled by this run with the system's C compiler against the `libshmlink.a` beside this
//! executable), beside the same workloads written in Rust against shmlink (this executable
//! again, `ipc-parent c-api-peer ROLE ...`) and, for the stream, seed 003's pipe in C.
//!
//! Workloads: a one-way stream at each `--sizes` (default 128 B and 4 KiB) and a ping-pong of
//! 64 B messages. The sender sends for `--duration` after a warm-up of a tenth of it, then an
//! empty-ish end message; the receiver (the pinger) gives the rate over the measured span.
//! The rows of a workload are interleaved round by round, every process started afresh.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use shmlink::{Channel, Config, WaitStrategy};

use super::cli::CApiArgs;
use super::document::{median, CApiBench, ContenderResult, ContenderWorkload, Results};
use super::report::c_api::{C, PIPE, RUST};
use super::session::{Schedule, Session};
use super::spawn::ChildGuard;
use crate::workload::{parse_sizes, size_label};

const BENCH_C: &str = include_str!("../../../shmlink-c/bench/bench.c");
const HEADER: &str = include_str!("../../../shmlink-c/include/shmlink.h");
/// The ping-pong's message size.
const PING_SIZE: usize = 64;
/// How long any process of a row may take.
const LIMIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq)]
enum Row {
    C,
    Rust,
    Pipe,
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::C => C,
            Row::Rust => RUST,
            Row::Pipe => PIPE,
        }
    }
}

struct Cell {
    workload: usize,
    stream: bool,
    size: usize,
    row: Row,
    rounds: Vec<f64>,
}

/// The C program, compiled into a directory removed when the run ends.
struct Compiled {
    dir: PathBuf,
    exe: PathBuf,
    compiler: String,
}

impl Drop for Compiled {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn compile() -> anyhow::Result<Compiled> {
    let exe_dir = std::env::current_exe()?
        .parent()
        .ok_or_else(|| anyhow!("this executable has no directory"))?
        .to_owned();
    let lib = exe_dir.join("libshmlink.a");
    if !lib.exists() {
        bail!(
            "no libshmlink.a beside this executable ({lib:?}): build it with `cargo build --{} -p \
             shmlink-c`",
            super::session::profile()
        );
    }
    let dir = std::env::temp_dir().join(format!("ipc-parent-c-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut compiled = Compiled {
        exe: dir.join("bench"),
        compiler: String::new(),
        dir,
    };
    std::fs::write(compiled.dir.join("bench.c"), BENCH_C)?;
    std::fs::write(compiled.dir.join("shmlink.h"), HEADER)?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let version = Command::new(&cc)
        .arg("--version")
        .output()
        .with_context(|| format!("running {cc} (a C compiler is needed)"))?;
    let compiler = String::from_utf8_lossy(&version.stdout)
        .lines()
        .next()
        .unwrap_or(&cc)
        .to_owned();
    let status = Command::new(&cc)
        .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", compiled.dir.display()))
        .arg(compiled.dir.join("bench.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&compiled.exe)
        .status()?;
    if !status.success() {
        bail!("shmlink-c/bench/bench.c did not compile");
    }
    compiled.compiler = compiler;
    Ok(compiled)
}

/// Runs `command`, whose standard output ends with a line `rate R`, and returns R.
fn rate_of(mut command: Command, what: &str) -> anyhow::Result<f64> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut guard = ChildGuard::spawn(command)?;
    let stdout = guard.child.stdout.take().context("stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Some(r) = line.strip_prefix("rate ") {
                    let rate = r
                        .trim()
                        .parse()
                        .with_context(|| format!("{what}: {line:?}"))?;
                    guard.finish(Duration::from_secs(10))?;
                    return Ok(rate);
                }
            }
            Err(_) => bail!("{what} gave no rate within {LIMIT:?}"),
        }
    }
}

pub(crate) fn run(args: CApiArgs) -> anyhow::Result<()> {
    let sizes = parse_sizes(&args.sizes)?;
    if let Some(&s) = sizes.iter().find(|&&s| s < 8) {
        bail!("--sizes: {s} B is less than the 8 bytes a message needs");
    }
    let compiled = compile()?;
    let session = Session::start(args.common.clone(), false)?;
    let me = std::env::current_exe()?;
    let mut workloads = Vec::new();
    let mut cells = Vec::new();
    for &size in &sizes {
        workloads.push(ContenderWorkload {
            name: format!(
                "stream-{}",
                size_label(size)
                    .replace(" KiB", "k")
                    .replace(" MiB", "m")
                    .replace(" B", "")
            ),
            title: format!("one-way stream, {}", size_label(size)),
            kind: "stream".into(),
            size: Some(size),
            unit: "messages/s".into(),
            results: Vec::new(),
        });
        for row in [Row::C, Row::Rust, Row::Pipe] {
            cells.push(Cell {
                workload: workloads.len() - 1,
                stream: true,
                size,
                row,
                rounds: Vec::new(),
            });
        }
    }
    workloads.push(ContenderWorkload {
        name: format!("ping-pong-{PING_SIZE}"),
        title: format!("ping-pong, {PING_SIZE} B"),
        kind: "ping-pong".into(),
        size: Some(PING_SIZE),
        unit: "round trips/s".into(),
        results: Vec::new(),
    });
    for row in [Row::C, Row::Rust] {
        cells.push(Cell {
            workload: workloads.len() - 1,
            stream: false,
            size: PING_SIZE,
            row,
            rounds: Vec::new(),
        });
    }
    let seconds = args.duration.as_secs_f64();
    let schedule = Schedule {
        slices: 1,
        per_piece: args.duration.mul_f64(1.1) + Duration::from_millis(100),
        part: None,
    };
    session.announce(
        schedule.estimate(cells.len(), session.common.rounds),
        "c-api",
        false,
    );
    session.rounds(
        &mut cells,
        &schedule,
        |c| format!("{} {}", workloads[c.workload].name, c.row.name()),
        |cell, round, _| {
            let name = format!(
                "{}-c{round}-{}-{}",
                session.base, cell.size, cell.stream as u8
            );
            let (size, secs) = (cell.size.to_string(), seconds.to_string());
            let rate = match (cell.row, cell.stream) {
                (Row::C, true) => {
                    let mut c = Command::new(&compiled.exe);
                    c.args(["stream-shm", &name, &size, &secs]);
                    rate_of(c, "the C stream")?
                }
                (Row::Pipe, _) => {
                    let mut c = Command::new(&compiled.exe);
                    c.args(["stream-pipe", &size, &secs]);
                    rate_of(c, "the pipe stream")?
                }
                (Row::C, false) => {
                    let mut c = Command::new(&compiled.exe);
                    c.args(["ping-shm", &name, &size, &secs]);
                    rate_of(c, "the C ping-pong")?
                }
                (Row::Rust, stream) => {
                    let (receiver, sender) = if stream {
                        ("stream-recv", "stream-send")
                    } else {
                        ("ping", "pong")
                    };
                    let mut peer = Command::new(&me);
                    peer.args(["c-api-peer", sender, &name, &size, &secs])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null());
                    let _peer = ChildGuard::spawn(peer)?;
                    let mut c = Command::new(&me);
                    c.args(["c-api-peer", receiver, &name, &size, &secs]);
                    rate_of(c, "the Rust twin")?
                }
            };
            cell.rounds.push(rate);
            Ok(())
        },
    )?;
    for cell in cells {
        let best = cell.rounds.iter().copied().fold(0.0, f64::max);
        let mut sorted = cell.rounds.clone();
        workloads[cell.workload].results.push(ContenderResult {
            contender: cell.row.name().to_owned(),
            median: median(&mut sorted),
            best,
            rounds: cell.rounds,
        });
    }
    session.finish(Results::CApi(CApiBench {
        compiler: compiled.compiler.clone(),
        duration_s: seconds,
        workloads,
    }))
}

/// `ipc-parent c-api-peer ROLE NAME SIZE SECONDS`: the Rust twin of bench.c's processes, the
/// same loops: `stream-recv` (creates, counts, says the rate) and `stream-send` (connects,
/// sends for SECONDS after a tenth of it as warm-up, then the end); `ping` (creates, round trips,
/// says the rate) and `pong` (connects, echoes).
pub(crate) fn peer(args: &[String]) -> anyhow::Result<()> {
    let [role, name, size, seconds] = args else {
        bail!("c-api-peer ROLE NAME SIZE SECONDS");
    };
    let size: usize = size.parse()?;
    let seconds: f64 = seconds.parse()?;
    let config = Config::default();
    let connect = |name: &str| Channel::connect_timeout(name, WaitStrategy::Block, LIMIT);
    match role.as_str() {
        "stream-recv" => {
            let mut rx = Channel::create(name, &config)?;
            let (mut n, mut first) = (0u64, None);
            loop {
                let tag = rx.recv()?[0];
                if tag == 0 {
                    break;
                }
                if tag == 2 {
                    first.get_or_insert_with(Instant::now);
                    n += 1;
                }
            }
            let span = first.map_or(f64::INFINITY, |f| f.elapsed().as_secs_f64());
            println!("rate {:.0}", n as f64 / span);
        }
        "stream-send" => {
            let mut tx = connect(name)?;
            let mut m = vec![7u8; size];
            m[0] = 1;
            let start = Instant::now();
            let (warm, end) = (seconds / 10.0, seconds / 10.0 + seconds);
            loop {
                for _ in 0..256 {
                    tx.send(&m)?;
                }
                let t = start.elapsed().as_secs_f64();
                if t >= end {
                    break;
                }
                if t >= warm {
                    m[0] = 2;
                }
            }
            tx.send(&[0])?;
        }
        "ping" => {
            let mut ch = Channel::create(name, &config)?;
            let m = vec![7u8; size];
            let mut back = Vec::with_capacity(size);
            let start = Instant::now();
            let (warm, end) = (seconds / 10.0, seconds / 10.0 + seconds);
            let (mut n, mut first) = (0u64, None);
            loop {
                ch.send(&m)?;
                ch.recv_into(&mut back)?;
                let t = start.elapsed().as_secs_f64();
                if t >= warm {
                    first.get_or_insert_with(Instant::now);
                    n += 1;
                    if t >= end {
                        break;
                    }
                }
            }
            let span = first.map_or(f64::INFINITY, |f: Instant| f.elapsed().as_secs_f64());
            println!("rate {:.0}", n as f64 / span);
        }
        "pong" => {
            let mut ch = connect(name)?;
            let mut buf = Vec::with_capacity(size);
            while ch.recv_into(&mut buf).is_ok() {
                ch.send(&buf)?;
            }
        }
        other => bail!("no c-api-peer role {other:?}"),
    }
    Ok(())
}
