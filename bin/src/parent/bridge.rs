//! `bridge`: what crossing to another host through `shmlink-bridge` costs, against zenoh alone.
//!
//! Rows, each workload's rows interleaved round by round, every process started afresh for
//! each row and round:
//! * `shmlink via two bridges`: host A and host B are mount namespaces of their own, each with
//!   its own /dev/shm (so no name is shared), joined only by zenoh over TCP on 127.0.0.1 with
//!   scouting off. Round trip: a client on A calls `Channel::connect` on the name that A's
//!   bridge connects to B's, where an echo server listens. Stream: a publisher on A, its topic
//!   exported by A's bridge, imported by B's, read by a subscriber on B.
//! * `zenoh`: two processes with a zenoh session each, on the same kind of link: a ping-pong as
//!   zenoh's own `z_ping` / `z_pong` examples do it (express puts, blocking congestion control),
//!   and a put stream as `z_pub_thr` / `z_sub_thr` do it (blocking congestion control, a
//!   callback that counts).
//! * `tcp`: a TCP round trip between two processes (TCP_NODELAY), for scale.
//!
//! The measuring process (the client, the subscriber, the pinger) prints its rate over
//! `--duration` after `--warmup`. The processes are this executable again (`ipc-parent
//! bridge-peer ROLE ...`), those of a host run through `nsenter` in its namespace.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use super::cli::BridgeArgs;

/// How long any process of a row may take to say it is ready or to give its rate.
#[cfg_attr(not(feature = "zenoh"), allow(dead_code))]
const LIMIT: Duration = Duration::from_secs(30);

/// `ipc-parent bridge`.
pub(crate) fn run(args: BridgeArgs) -> anyhow::Result<()> {
    #[cfg(feature = "zenoh")]
    {
        measure::run(args)
    }
    #[cfg(not(feature = "zenoh"))]
    {
        let _ = args;
        bail!(
            "this ipc-parent was built without the bridge rows; build it with `--features zenoh` \
             (cargo build --release -p shmlink-harness --features zenoh && cargo build --release \
             -p shmlink-zenoh)"
        )
    }
}

/// `ipc-parent bridge-peer ROLE ...`: one process of a bridge run.
pub(crate) fn peer(args: &[String]) -> anyhow::Result<()> {
    #[cfg(feature = "zenoh")]
    {
        roles::run(args)
    }
    #[cfg(not(feature = "zenoh"))]
    {
        let _ = args;
        bail!("this ipc-parent was built without the bridge rows (--features zenoh)")
    }
}

/// The shmlink-bridge binary: `explicit`, or the one next to this executable.
#[cfg_attr(not(feature = "zenoh"), allow(dead_code))]
fn bridge_path(explicit: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let path = exe
        .parent()
        .ok_or_else(|| anyhow!("{exe:?} has no directory"))?
        .join("shmlink-bridge");
    if !path.exists() {
        bail!(
            "no shmlink-bridge next to this executable ({path:?}): build it with `cargo build \
             --{} -p shmlink-zenoh`, or give --bridge",
            super::session::profile()
        );
    }
    Ok(path)
}

#[cfg(feature = "zenoh")]
mod measure {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use anyhow::{anyhow, bail, Context};

    use super::{bridge_path, LIMIT};
    use crate::parent::cli::BridgeArgs;
    use crate::parent::document::{
        median, BridgeBench, ContenderResult, ContenderWorkload, Results,
    };
    use crate::parent::report::bridge::BRIDGED;
    use crate::parent::session::{Schedule, Session};
    use crate::parent::spawn::ChildGuard;
    use crate::workload::{parse_sizes, size_label};

    /// The round trip's message size.
    const ROUND_TRIP_SIZE: usize = 64;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Row {
        Bridged,
        Zenoh,
        Tcp,
    }

    impl Row {
        fn name(self) -> &'static str {
            match self {
                Row::Bridged => BRIDGED,
                Row::Zenoh => "zenoh",
                Row::Tcp => "tcp",
            }
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Kind {
        RoundTrip,
        Stream,
    }

    /// One row of one workload, and its rate in each round.
    struct Cell {
        workload: usize,
        kind: Kind,
        size: usize,
        row: Row,
        rounds: Vec<f64>,
    }

    /// A process of a row, its standard output read line by line on a thread of its own;
    /// killed and reaped on drop.
    struct Proc {
        guard: ChildGuard,
        lines: mpsc::Receiver<String>,
        what: String,
    }

    impl Proc {
        fn spawn(what: String, mut command: Command) -> anyhow::Result<Proc> {
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            let mut guard = ChildGuard::spawn(command)?;
            let stdout = guard.child.stdout.take().context("stdout")?;
            let (tx, lines) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            Ok(Proc { guard, lines, what })
        }

        /// The rest of the next line that starts with `word`, within [`LIMIT`].
        fn expect(&mut self, word: &str) -> anyhow::Result<String> {
            let deadline = Instant::now() + LIMIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.lines.recv_timeout(left) {
                    Ok(line) => {
                        if let Some(rest) = line.strip_prefix(word) {
                            return Ok(rest.trim().to_owned());
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        bail!("{}: no {word:?} within {LIMIT:?}", self.what)
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let status = self.guard.child.wait()?;
                        bail!("{}: exited ({status}) before {word:?}", self.what)
                    }
                }
            }
        }

        fn rate(&mut self) -> anyhow::Result<f64> {
            let rate = self.expect("rate")?;
            rate.parse()
                .with_context(|| format!("{}: rate {rate:?}", self.what))
        }
    }

    /// A mount namespace with a /dev/shm of its own, held by a process that sleeps in it; the
    /// namespace ends with its last process.
    struct Host {
        holder: Proc,
        name: &'static str,
    }

    impl Host {
        fn new(name: &'static str) -> anyhow::Result<Host> {
            let mut command = Command::new("unshare");
            command
                .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(
                    "mount -t tmpfs -o mode=1777,size=1g ipc-bench /dev/shm && echo ready && \
                     exec sleep 3600",
                );
            let mut holder = Proc::spawn(format!("host {name}"), command)?;
            holder
                .expect("ready")
                .context("a host (a mount namespace) could not be made: this needs root")?;
            Ok(Host { holder, name })
        }

        /// `program args` in this host's namespace.
        fn spawn(
            &self,
            what: &str,
            program: &std::path::Path,
            args: &[String],
        ) -> anyhow::Result<Proc> {
            let mut command = Command::new("nsenter");
            command
                .arg(format!("--target={}", self.holder.guard.pid()))
                .args(["--mount", "--"])
                .arg(program)
                .args(args);
            Proc::spawn(format!("{what} on host {}", self.name), command)
        }
    }

    /// What every row of the run shares.
    struct Plan {
        me: std::path::PathBuf,
        bridge: std::path::PathBuf,
        warmup: Duration,
        duration: Duration,
        base: String,
    }

    impl Plan {
        fn peer(&self, role: &str, args: &[String]) -> Vec<String> {
            let mut all = vec!["bridge-peer".to_owned(), role.to_owned()];
            all.extend_from_slice(args);
            all
        }

        fn local(&self, role: &str, args: &[String]) -> anyhow::Result<Proc> {
            let mut command = Command::new(&self.me);
            command.args(self.peer(role, args));
            Proc::spawn(role.to_owned(), command)
        }

        fn times(&self) -> [String; 2] {
            [
                self.warmup.as_secs_f64().to_string(),
                self.duration.as_secs_f64().to_string(),
            ]
        }

        fn bridge(&self, host: &Host, args: &[String]) -> anyhow::Result<Proc> {
            let mut all = vec!["--no-scouting".to_owned()];
            all.extend_from_slice(args);
            let mut bridge = host.spawn("shmlink-bridge", &self.bridge, &all)?;
            bridge.expect("ready")?;
            Ok(bridge)
        }
    }

    fn free_port() -> anyhow::Result<u16> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port())
    }

    pub(super) fn run(args: BridgeArgs) -> anyhow::Result<()> {
        let sizes = parse_sizes(&args.sizes)?;
        if let Some(&s) = sizes.iter().find(|&&s| s < 8) {
            bail!("--sizes: {s} B is less than the 8 bytes a message needs");
        }
        let bridge = bridge_path(args.bridge.as_ref())?;
        let session = Session::start(args.common.clone(), false)?;
        // Fails early, with the reason, where namespaces cannot be made.
        drop(Host::new("probe")?);
        let plan = Plan {
            me: std::env::current_exe()?,
            bridge,
            warmup: session.common.warmup,
            duration: args.duration,
            base: session.base.clone(),
        };
        let mut workloads = vec![ContenderWorkload {
            name: format!("round-trip-{ROUND_TRIP_SIZE}"),
            title: format!("round trip, {ROUND_TRIP_SIZE} B"),
            kind: "ping-pong".into(),
            size: Some(ROUND_TRIP_SIZE),
            unit: "round trips/s".into(),
            results: Vec::new(),
        }];
        let mut cells: Vec<Cell> = [Row::Bridged, Row::Zenoh, Row::Tcp]
            .into_iter()
            .map(|row| Cell {
                workload: 0,
                kind: Kind::RoundTrip,
                size: ROUND_TRIP_SIZE,
                row,
                rounds: Vec::new(),
            })
            .collect();
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
            for row in [Row::Bridged, Row::Zenoh] {
                cells.push(Cell {
                    workload: workloads.len() - 1,
                    kind: Kind::Stream,
                    size,
                    row,
                    rounds: Vec::new(),
                });
            }
        }
        let schedule = Schedule {
            slices: 1,
            per_piece: plan.warmup + plan.duration + Duration::from_millis(800),
            part: None,
        };
        session.announce(
            schedule.estimate(cells.len(), session.common.rounds),
            "bridge",
            false,
        );
        session.rounds(
            &mut cells,
            &schedule,
            |c| format!("{} {}", workloads[c.workload].name, c.row.name()),
            |cell, round, _| {
                let rate = measure(&plan, cell, round)
                    .with_context(|| format!("{} / {}", cell.row.name(), round))?;
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
        let results = Results::Bridge(BridgeBench {
            zenoh: ZENOH_VERSION.to_owned(),
            duration_s: plan.duration.as_secs_f64(),
            workloads,
        });
        session.finish(results)
    }

    /// The zenoh version in Cargo.lock, as the build saw it.
    const ZENOH_VERSION: &str = env!("HARNESS_ZENOH_VERSION");

    fn measure(plan: &Plan, cell: &Cell, round: u32) -> anyhow::Result<f64> {
        let port = free_port()?;
        let listen = format!("tcp/127.0.0.1:{port}");
        let [warmup, duration] = plan.times();
        let size = cell.size.to_string();
        match (cell.kind, cell.row) {
            (Kind::RoundTrip, Row::Bridged) => {
                let (a, b) = (Host::new("a")?, Host::new("b")?);
                let name = format!("{}-br{round}", plan.base);
                let mut server = b.spawn(
                    "echo server",
                    &plan.me,
                    &plan.peer("echo-server", std::slice::from_ref(&name)),
                )?;
                server.expect("ready")?;
                let _b = plan.bridge(
                    &b,
                    &[
                        "--listen".into(),
                        listen.clone(),
                        "--serve".into(),
                        name.clone(),
                    ],
                )?;
                let _a = plan.bridge(
                    &a,
                    &["--peer".into(), listen, "--connect".into(), name.clone()],
                )?;
                let mut client = a.spawn(
                    "client",
                    &plan.me,
                    &plan.peer("rt-client", &[name, size, warmup, duration]),
                )?;
                client.rate()
            }
            (Kind::Stream, Row::Bridged) => {
                let (a, b) = (Host::new("a")?, Host::new("b")?);
                let name = format!("{}-bs{round}-{size}", plan.base);
                let _a = plan.bridge(
                    &a,
                    &[
                        "--listen".into(),
                        listen.clone(),
                        "--export".into(),
                        name.clone(),
                    ],
                )?;
                let _b = plan.bridge(
                    &b,
                    &["--peer".into(), listen, "--import".into(), name.clone()],
                )?;
                let mut sub = b.spawn(
                    "subscriber",
                    &plan.me,
                    &plan.peer("topic-sub", &[name.clone(), warmup, duration]),
                )?;
                sub.expect("joined")?;
                let mut publisher = a.spawn(
                    "publisher",
                    &plan.me,
                    &plan.peer("topic-pub", &[name, size]),
                )?;
                publisher.expect("ready")?;
                sub.rate()
            }
            (Kind::RoundTrip, Row::Zenoh) => {
                let mut pong = plan.local("zenoh-pong", std::slice::from_ref(&listen))?;
                pong.expect("ready")?;
                let mut ping = plan.local("zenoh-ping", &[listen, size, warmup, duration])?;
                ping.rate()
            }
            (Kind::Stream, Row::Zenoh) => {
                let mut sub = plan.local("zenoh-sub", &[listen.clone(), warmup, duration])?;
                sub.expect("ready")?;
                let _put = plan.local("zenoh-put", &[listen, size])?;
                sub.rate()
            }
            (Kind::RoundTrip, Row::Tcp) => {
                let mut server = plan.local("tcp-echo", &[])?;
                let port = server.expect("port")?;
                let mut client = plan.local("tcp-ping", &[port, size, warmup, duration])?;
                client.rate()
            }
            (Kind::Stream, Row::Tcp) => Err(anyhow!("no TCP stream row")),
        }
    }
}

#[cfg(feature = "zenoh")]
mod roles {
    //! The processes of a bridge run. Each prints `ready` (or `joined`, `port N`) when set up
    //! and the measuring one `rate R` at the end; the others run until they are killed.

    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    use anyhow::{bail, Context};
    use shmlink::{Channel, Config, Listener, Publisher, Subscriber, TopicConfig, WaitStrategy};
    use zenoh::qos::CongestionControl;
    use zenoh::Wait;

    use super::LIMIT;

    fn secs(s: &str) -> anyhow::Result<Duration> {
        Ok(Duration::from_secs_f64(s.parse().context("seconds")?))
    }

    fn say(line: &str) {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }

    /// Runs `step` for `warmup`, then counts its calls for `duration` and says the rate.
    fn timed(
        warmup: Duration,
        duration: Duration,
        mut step: impl FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let end = Instant::now() + warmup;
        while Instant::now() < end {
            step()?;
        }
        let start = Instant::now();
        let end = start + duration;
        let mut n = 0u64;
        while Instant::now() < end {
            step()?;
            n += 1;
        }
        say(&format!(
            "rate {}",
            n as f64 / start.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    fn zenoh_config(listen: Option<&str>, connect: Option<&str>) -> anyhow::Result<zenoh::Config> {
        let mut c = zenoh::Config::default();
        let set = |c: &mut zenoh::Config, k: &str, v: &str| {
            c.insert_json5(k, v)
                .map_err(|e| anyhow::anyhow!("{k}: {e}"))
        };
        if let Some(l) = listen {
            set(&mut c, "listen/endpoints", &format!("[{l:?}]"))?;
        }
        if let Some(e) = connect {
            set(&mut c, "connect/endpoints", &format!("[{e:?}]"))?;
        }
        set(&mut c, "scouting/multicast/enabled", "false")?;
        set(&mut c, "scouting/gossip/enabled", "false")?;
        Ok(c)
    }

    fn open(listen: Option<&str>, connect: Option<&str>) -> anyhow::Result<zenoh::Session> {
        zenoh::open(zenoh_config(listen, connect)?)
            .wait()
            .map_err(|e| anyhow::anyhow!("zenoh: {e}"))
    }

    fn until(what: &str, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
        let deadline = Instant::now() + LIMIT;
        while !ready() {
            if Instant::now() > deadline {
                bail!("{what} within {LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    pub(super) fn run(args: &[String]) -> anyhow::Result<()> {
        let a = |i: usize| {
            args.get(i)
                .map(String::as_str)
                .context("a missing argument")
        };
        match a(0)? {
            "echo-server" => {
                let listener = Listener::bind(a(1)?, &Config::default())?;
                say("ready");
                loop {
                    let mut conn = listener.accept()?;
                    std::thread::spawn(move || {
                        let mut buf = Vec::new();
                        while conn.recv_into(&mut buf).is_ok() {
                            if conn.send(&buf).is_err() {
                                return;
                            }
                        }
                    });
                }
            }
            "rt-client" => {
                let size: usize = a(2)?.parse()?;
                let mut ch = Channel::connect_timeout(a(1)?, WaitStrategy::Block, LIMIT)?;
                let msg = vec![7u8; size];
                let mut buf = Vec::new();
                timed(secs(a(3)?)?, secs(a(4)?)?, || {
                    ch.send(&msg)?;
                    ch.recv_into(&mut buf)?;
                    Ok(())
                })
            }
            "topic-pub" => {
                let size: usize = a(2)?.parse()?;
                let mut publisher = Publisher::create(a(1)?, &TopicConfig::default())?;
                say("ready");
                let msg = vec![7u8; size];
                loop {
                    match publisher.send_timeout(&msg, Duration::from_millis(100)) {
                        Ok(()) => {}
                        Err(e) if e.is_transient() => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            "topic-sub" => {
                let name = a(1)?;
                let mut sub = Subscriber::connect(name, WaitStrategy::Block)
                    .with_context(|| format!("topic {name}"))?;
                say("joined");
                // Each receive takes what is waiting (as a reader that keeps up does), counted.
                let (warmup, duration) = (secs(a(2)?)?, secs(a(3)?)?);
                let mut take = || sub.recv_batch_timeout(256, LIMIT, |_| {});
                let end = Instant::now() + warmup;
                while Instant::now() < end {
                    take()?;
                }
                let start = Instant::now();
                let end = start + duration;
                let mut n = 0;
                while Instant::now() < end {
                    n += take()?;
                }
                say(&format!(
                    "rate {}",
                    n as f64 / start.elapsed().as_secs_f64()
                ));
                Ok(())
            }
            "zenoh-pong" => {
                let session = open(Some(a(1)?), None)?;
                let publisher = session
                    .declare_publisher("ipc-bench/pong")
                    .congestion_control(CongestionControl::Block)
                    .express(true)
                    .wait()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let _sub = session
                    .declare_subscriber("ipc-bench/ping")
                    .callback(move |sample| {
                        let _ = publisher.put(sample.payload().clone()).wait();
                    })
                    .wait()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                say("ready");
                loop {
                    std::thread::park();
                }
            }
            "zenoh-ping" => {
                let session = open(None, Some(a(1)?))?;
                let size: usize = a(2)?.parse()?;
                let sub = session
                    .declare_subscriber("ipc-bench/pong")
                    .wait()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let publisher = session
                    .declare_publisher("ipc-bench/ping")
                    .congestion_control(CongestionControl::Block)
                    .express(true)
                    .wait()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                until("the pong's subscriber", || {
                    publisher
                        .matching_status()
                        .wait()
                        .is_ok_and(|s| s.matching())
                })?;
                let msg = vec![7u8; size];
                timed(secs(a(3)?)?, secs(a(4)?)?, || {
                    publisher
                        .put(msg.clone())
                        .wait()
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    sub.recv_timeout(LIMIT)
                        .map_err(|e| anyhow::anyhow!("{e}"))?
                        .context("no pong within the limit")?;
                    Ok(())
                })
            }
            "zenoh-sub" => {
                let session = open(Some(a(1)?), None)?;
                let (warmup, duration) = (secs(a(2)?)?, secs(a(3)?)?);
                let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
                let seen = count.clone();
                let _sub = session
                    .declare_subscriber("ipc-bench/thr")
                    .callback(move |_| {
                        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    })
                    .wait()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                say("ready");
                let load = || count.load(std::sync::atomic::Ordering::Relaxed);
                until("the first message", || load() > 0)?;
                std::thread::sleep(warmup);
                let (start, before) = (Instant::now(), load());
                std::thread::sleep(duration);
                let n = load() - before;
                say(&format!(
                    "rate {}",
                    n as f64 / start.elapsed().as_secs_f64()
                ));
                Ok(())
            }
            "zenoh-put" => {
                let session = open(None, Some(a(1)?))?;
                let size: usize = a(2)?.parse()?;
                let publisher = session
                    .declare_publisher("ipc-bench/thr")
                    .congestion_control(CongestionControl::Block)
                    .wait()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let msg = zenoh::bytes::ZBytes::from(vec![7u8; size]);
                loop {
                    publisher
                        .put(msg.clone())
                        .wait()
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                }
            }
            "tcp-echo" => {
                let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
                say(&format!("port {}", listener.local_addr()?.port()));
                let (mut s, _) = listener.accept()?;
                s.set_nodelay(true)?;
                let mut buf = [0u8; 65536];
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        return Ok(());
                    }
                    s.write_all(&buf[..n])?;
                }
            }
            "tcp-ping" => {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", a(1)?.parse::<u16>()?))?;
                s.set_nodelay(true)?;
                let size: usize = a(2)?.parse()?;
                let msg = vec![7u8; size];
                let mut buf = vec![0u8; size];
                timed(secs(a(3)?)?, secs(a(4)?)?, || {
                    s.write_all(&msg)?;
                    s.read_exact(&mut buf)?;
                    Ok(())
                })
            }
            other => bail!("no bridge role {other:?}"),
        }
    }
}
