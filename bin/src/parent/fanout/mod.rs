//! `fanout N,...`: one publisher (this process) and N subscriber processes (`ipc-child --fanout
//! ROW`), per row of [`FanoutRow`], message size and N. Every round runs every row and size
//! once, one after the other, so the ratios between rows are taken within a round.
//!
//! In a round the publisher waits until its N subscribers are there, publishes messages for
//! `--warmup`, then the timed messages (`--count` of them, or for `--duration`), then the end
//! message; each message carries its send time and number (`crate::fanout`). The publisher
//! measures its own span and the CPU time of its thread over it; each subscriber its own span,
//! its rate and the one-way latency of every timed message, which it reports back on standard
//! output. A round's figures are the median and the slowest subscriber's rate, the latency over
//! every subscriber's messages, and the timed messages per second of publisher CPU.

pub(crate) mod tables;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use shmlink::{Channel, Config, Publisher, TopicConfig};

use crate::client::{monotonic_ns, CONNECT_LIMIT};
use crate::fanout::{new_histogram, FanoutRow, Header, Phase, SubscriberResult, MIN_SIZE};
use crate::parent::cli::{FanoutArgs, DEFAULT_RING};
use crate::parent::document::{
    median, Fanout as FanoutDoc, FanoutResult, FanoutRound, FanoutSkip, Latency, Rates, Results,
};
use crate::parent::machine::Pinning;
use crate::parent::session::{Schedule, Session};
use crate::parent::spawn::{interrupted, ChildGuard, CHILD_PID};
use crate::transport::uds::{Uds, UdsListener};
use crate::transport::{ChildStdio, Listener, Options, Peer, Transport, HARNESS_PREFIX};
use crate::workload::{parse_sizes, size_label};

/// What every round of a fan-out run shares.
struct FanoutPlan<'s> {
    session: &'s Session,
    /// `ipcbench-<--name or h<pid>>`: the start of every name of the run.
    base: String,
    ring_size: usize,
    args: FanoutArgs,
}

/// The rows `--transport` names (`all`: every row this build has), in the table's order.
fn parse_fanout_rows(list: &str) -> anyhow::Result<Vec<FanoutRow>> {
    if list.trim() == "all" {
        return Ok(FanoutRow::ALL.into_iter().filter(|r| r.built()).collect());
    }
    let mut rows = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item.ends_with("-bare") || item.ends_with("-batch") {
            bail!(
                "{item}: bare and batch rows belong to the one-way stream (ipc-parent stream), \
                 not to a fan-out run"
            );
        }
        let row: FanoutRow = item.parse().context("--transport of a fan-out run")?;
        if !row.built() {
            bail!(
                "{item}: this ipc-parent was built without the iceoryx2 row; build it with \
                 `--features iceoryx2` (cargo run --release --features iceoryx2 --bin \
                 ipc-parent -- fanout ...)"
            );
        }
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    if rows.is_empty() {
        bail!("no fan-out row given");
    }
    Ok(rows)
}

/// The CPUs the run's processes may use: the parent's and the children's.
fn run_cpus(pinning: &Pinning) -> usize {
    let mut cpus: Vec<usize> = pinning
        .parent
        .iter()
        .chain(&pinning.children)
        .copied()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus.len().max(1)
}

/// Why `row` does not run with `n` subscribers on `cpus` CPUs (none: it runs).
fn skip_reason(row: FanoutRow, n: usize, cpus: usize) -> Option<String> {
    (row.spins() && n + 1 > cpus).then(|| {
        format!(
            "its publisher and {n} subscriber{} spin: {} processes that each need a CPU, on {cpus}",
            if n == 1 { "" } else { "s" },
            n + 1
        )
    })
}

/// The subscriber children of one round, all in one process group; killed and reaped on drop
/// unless [`collect`](Subscribers::collect) reaped them. They make no name of their own: the
/// round's topic, channels, sockets and services are the publisher's, removed when it drops
/// them.
struct Subscribers {
    children: Vec<ChildGuard>,
}

impl Drop for Subscribers {
    fn drop(&mut self) {
        CHILD_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        // Killed (if still running) and reaped, all of them.
        self.children.clear();
    }
}

impl Subscribers {
    /// Spawns one `ipc-child --fanout ROW` per address.
    fn spawn(
        plan: &FanoutPlan<'_>,
        row: FanoutRow,
        size: usize,
        round: u32,
        addresses: &[String],
    ) -> anyhow::Result<Subscribers> {
        let mut subs = Subscribers {
            children: Vec::with_capacity(addresses.len()),
        };
        let placement = &plan.session.placement;
        let mut group = None;
        for (i, address) in addresses.iter().enumerate() {
            let mut command = plan.session.child_command();
            command
                .args(["--fanout", row.name(), "--address", address])
                .args(["--size", &size.to_string()])
                .args(["--ring-size", &plan.ring_size.to_string()])
                .args(["--parent-pid", &std::process::id().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            placement.pin_child(&mut command, i);
            let (child, pgid) = ChildGuard::spawn_in_group(command, group)?;
            group = Some(pgid);
            placement.check_child(child.pid(), i)?;
            subs.children.push(child);
        }
        let pids: Vec<String> = subs.children.iter().map(|c| c.pid().to_string()).collect();
        eprintln!(
            "[info] {} x{} {} round {round}: subscriber pids {}",
            row.name(),
            addresses.len(),
            size_label(size),
            pids.join(" ")
        );
        Ok(subs)
    }

    /// The subscribers' processes, for the waits that watch them.
    fn peers(&self) -> Vec<Peer> {
        self.children.iter().map(|c| Peer::child(c.pid())).collect()
    }

    /// Fails if a subscriber has exited: before the end message, only a failed one does.
    fn check_running(&mut self) -> anyhow::Result<()> {
        for child in &mut self.children {
            if let Some(status) = child.child.try_wait()? {
                bail!("subscriber {} exited before the end: {status}", child.pid());
            }
        }
        Ok(())
    }

    /// Waits until `ready` says every subscriber is there; fails when one exited first, when
    /// the run is interrupted, or after [`CONNECT_LIMIT`].
    fn wait_until(
        &mut self,
        mut ready: impl FnMut() -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + CONNECT_LIMIT;
        while !ready()? {
            self.check_running()?;
            if interrupted() {
                bail!("interrupted");
            }
            if Instant::now() >= deadline {
                bail!(
                    "the {} subscribers did not all join within {CONNECT_LIMIT:?}",
                    self.children.len()
                );
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Reads every subscriber's result and reaps it; fails if one failed.
    fn collect(mut self) -> anyhow::Result<Vec<SubscriberResult>> {
        // Cleared before any child is reaped: a signal must not kill a reused process group.
        CHILD_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        let mut results = Vec::with_capacity(self.children.len());
        for guard in &mut self.children {
            let mut text = String::new();
            if let Some(mut stdout) = guard.child.stdout.take() {
                stdout.read_to_string(&mut text)?;
            }
            let status = guard.child.wait()?;
            if !status.success() {
                bail!("subscriber {} failed: {status}", guard.pid());
            }
            results.push(SubscriberResult::parse(&text)?);
        }
        Ok(results)
    }
}

/// The publisher's side of a row: one message to every subscriber.
trait Fan {
    fn publish(&mut self, msg: &[u8]) -> anyhow::Result<()>;
}

impl Fan for Publisher {
    #[inline]
    fn publish(&mut self, msg: &[u8]) -> anyhow::Result<()> {
        self.send(msg)?;
        Ok(())
    }
}

/// The channels row: the message sent on every channel in turn.
struct Channels(Vec<Channel>);

impl Fan for Channels {
    #[inline]
    fn publish(&mut self, msg: &[u8]) -> anyhow::Result<()> {
        for ch in &mut self.0 {
            ch.send(msg)?;
        }
        Ok(())
    }
}

/// The uds row: the message written to every socket in turn.
struct Sockets(Vec<Uds>);

impl Fan for Sockets {
    #[inline]
    fn publish(&mut self, msg: &[u8]) -> anyhow::Result<()> {
        for s in &mut self.0 {
            s.send(msg)?;
        }
        Ok(())
    }
}

#[cfg(feature = "iceoryx2")]
impl Fan for crate::fanout::iceoryx::Iox2Publisher {
    #[inline]
    fn publish(&mut self, msg: &[u8]) -> anyhow::Result<()> {
        self.send(msg)
    }
}

/// What the publisher measured of its timed messages.
#[derive(Debug, Clone, Copy)]
struct Published {
    messages: u64,
    seconds: f64,
    cpu_s: f64,
}

/// The CPU time of the calling thread, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Messages between two looks at the clock (and at Ctrl-C).
const CLOCK_EVERY: u64 = 64;

/// How often the publisher looks whether its subscribers still run: a topic goes on without a
/// subscriber that died, and the round would only fail at its end.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Publishes a round: the warmup's messages, the timed ones, the end message. `watch` runs
/// every [`WATCH_EVERY`] and fails the round when a subscriber is gone.
fn publish<F: Fan>(
    fan: &mut F,
    subs: &mut Subscribers,
    size: usize,
    warmup: Duration,
    count: Option<u64>,
    duration: Duration,
) -> anyhow::Result<Published> {
    let mut msg = vec![0xa5u8; size];
    let mut seq = 0u64;
    let mut next_watch = Instant::now() + WATCH_EVERY;
    // Sends message `seq`; every CLOCK_EVERY messages also the looks at Ctrl-C and the
    // subscribers. Returns the time of the look, when it took one.
    let mut send = |fan: &mut F, msg: &mut [u8], phase: Phase| -> anyhow::Result<Option<Instant>> {
        Header {
            sent_ns: monotonic_ns(),
            seq,
            phase,
        }
        .write(msg);
        seq += 1;
        fan.publish(msg)?;
        // After the end message the subscribers exit by themselves.
        if seq % CLOCK_EVERY != 0 || phase == Phase::End {
            return Ok(None);
        }
        if interrupted() {
            bail!("interrupted");
        }
        let now = Instant::now();
        if now >= next_watch {
            subs.check_running()?;
            next_watch = now + WATCH_EVERY;
        }
        Ok(Some(now))
    };
    let warm_until = Instant::now() + warmup;
    let mut warm = !warmup.is_zero();
    while warm {
        if let Some(now) = send(fan, &mut msg, Phase::Warmup)? {
            warm = now < warm_until;
        }
    }
    let cpu_before = thread_cpu_ns();
    let started = Instant::now();
    let end = started + duration;
    let mut messages = 0u64;
    loop {
        let looked = send(fan, &mut msg, Phase::Timed)?;
        messages += 1;
        let over = match count {
            Some(count) => messages >= count,
            None => looked.is_some_and(|now| now >= end),
        };
        if over {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_s = thread_cpu_ns().saturating_sub(cpu_before) as f64 / 1e9;
    send(fan, &mut msg, Phase::End)?;
    Ok(Published {
        messages,
        seconds,
        cpu_s,
    })
}

/// Runs one round of `row` with `n` subscribers and messages of `size` bytes.
fn fanout_round(
    plan: &FanoutPlan<'_>,
    row: FanoutRow,
    n: usize,
    size: usize,
    round: u32,
) -> anyhow::Result<(Published, Vec<SubscriberResult>)> {
    let name = format!("{}-f{n}-r{round}-{size}-{}", plan.base, row.name());
    let args = &plan.args;
    match row {
        FanoutRow::Topic | FanoutRow::TopicSpin => {
            let config = TopicConfig {
                capacity: plan.ring_size,
                wait: row.wait(),
                max_subscribers: n,
                ..TopicConfig::default()
            };
            let mut publisher =
                Publisher::create(&name, &config).with_context(|| format!("topic {name}"))?;
            let mut subs = Subscribers::spawn(plan, row, size, round, &vec![name.clone(); n])?;
            subs.wait_until(|| Ok(publisher.subscriber_count() >= n))?;
            let published = publish(
                &mut publisher,
                &mut subs,
                size,
                args.common.warmup,
                args.count,
                args.duration,
            )?;
            Ok((published, subs.collect()?))
        }
        FanoutRow::Channels => {
            let config = Config {
                capacity: plan.ring_size,
                wait: row.wait(),
            };
            let names: Vec<String> = (0..n).map(|i| format!("{name}.{i}")).collect();
            let channels = names
                .iter()
                .map(|c| Channel::create(c, &config).with_context(|| format!("channel {c}")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut fan = Channels(channels);
            let mut subs = Subscribers::spawn(plan, row, size, round, &names)?;
            subs.wait_until(|| Ok(fan.0.iter().all(Channel::is_peer_connected)))?;
            let published = publish(
                &mut fan,
                &mut subs,
                size,
                args.common.warmup,
                args.count,
                args.duration,
            )?;
            Ok((published, subs.collect()?))
        }
        FanoutRow::Uds => {
            let opts = Options {
                ring_size: plan.ring_size,
                max_message: size,
                connect_timeout: CONNECT_LIMIT,
                ..Options::default()
            };
            let listeners = (0..n)
                .map(|i| {
                    let socket = format!("{}-f{n}-r{round}-{size}-{i}", plan.session.base);
                    Uds::listen(&socket, &opts).with_context(|| format!("binding {socket}"))
                })
                .collect::<anyhow::Result<Vec<UdsListener>>>()?;
            let addresses: Vec<String> = listeners.iter().map(Listener::address).collect();
            let mut subs = Subscribers::spawn(plan, row, size, round, &addresses)?;
            let sockets = listeners
                .into_iter()
                .zip(subs.peers())
                .map(|(l, peer)| l.accept(ChildStdio::default(), peer))
                .collect::<Result<Vec<_>, _>>()
                .context("accepting the uds subscribers")?;
            let mut fan = Sockets(sockets);
            let published = publish(
                &mut fan,
                &mut subs,
                size,
                args.common.warmup,
                args.count,
                args.duration,
            );
            // On a failure the subscribers go first: closing their sockets under them would
            // only add their complaints to the error.
            let published = published.inspect_err(|_| subs.children.clear())?;
            Ok((published, subs.collect()?))
        }
        FanoutRow::Iceoryx2 => iceoryx2_round(plan, n, size, round, &name),
    }
}

#[cfg(feature = "iceoryx2")]
fn iceoryx2_round(
    plan: &FanoutPlan<'_>,
    n: usize,
    size: usize,
    round: u32,
    name: &str,
) -> anyhow::Result<(Published, Vec<SubscriberResult>)> {
    use crate::fanout::iceoryx::{buffer_for, Iox2Services};
    let args = &plan.args;
    // The services first: the subscribers open them.
    let services = Iox2Services::create(name, n, buffer_for(plan.ring_size, size))?;
    let mut subs = Subscribers::spawn(
        plan,
        FanoutRow::Iceoryx2,
        size,
        round,
        &vec![name.to_owned(); n],
    )?;
    let mut publisher = services.publisher(size, subs.peers(), CONNECT_LIMIT)?;
    subs.wait_until(|| Ok(services.connected(n)))?;
    let published = publish(
        &mut publisher,
        &mut subs,
        size,
        args.common.warmup,
        args.count,
        args.duration,
    )?;
    let results = subs.collect()?;
    drop(publisher);
    Ok((published, results))
}

#[cfg(not(feature = "iceoryx2"))]
fn iceoryx2_round(
    _: &FanoutPlan<'_>,
    _: usize,
    _: usize,
    _: u32,
    _: &str,
) -> anyhow::Result<(Published, Vec<SubscriberResult>)> {
    bail!("the iceoryx2 row needs a harness built with --features iceoryx2")
}

/// What one round of one row gave; fails if a subscriber missed a timed message.
fn summarise(
    published: Published,
    results: &[SubscriberResult],
    histogram: &mut Histogram<u64>,
) -> anyhow::Result<FanoutRound> {
    for (i, r) in results.iter().enumerate() {
        if r.messages != published.messages {
            bail!(
                "subscriber {} received {} of the {} timed messages",
                i + 1,
                r.messages,
                published.messages
            );
        }
    }
    let mut round_histogram = new_histogram()?;
    for r in results {
        for &(value, count) in &r.histogram {
            round_histogram
                .record_n(value, count)
                .context("a subscriber's latency out of range")?;
        }
    }
    histogram
        .add(&round_histogram)
        .context("merging latency histograms")?;
    let rates: Vec<f64> = results.iter().map(SubscriberResult::msgs_per_s).collect();
    let per_s = |seconds: f64| {
        if seconds > 0.0 {
            published.messages as f64 / seconds
        } else {
            0.0
        }
    };
    Ok(FanoutRound {
        messages: published.messages,
        publisher_seconds: published.seconds,
        publisher_cpu_s: published.cpu_s,
        published_per_s: per_s(published.seconds),
        msgs_per_cpu_s: per_s(published.cpu_s),
        median_subscriber_msgs_per_s: median(&mut rates.clone()),
        slowest_subscriber_msgs_per_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
        subscriber_msgs_per_s: rates,
        latency_ns: latency(&round_histogram),
    })
}

fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    Latency {
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// One row at one size and subscriber count, over the rounds.
struct Cell {
    row: FanoutRow,
    subscribers: usize,
    size: usize,
    rounds: Vec<FanoutRound>,
    /// Every subscriber's latencies of every round.
    histogram: Histogram<u64>,
}

impl Cell {
    fn result(&self) -> FanoutResult {
        let rates = |f: fn(&FanoutRound) -> f64| Rates::of(self.rounds.iter().map(f));
        FanoutResult {
            row: self.row.name().to_owned(),
            subscribers: self.subscribers,
            size: self.size,
            rounds: self.rounds.clone(),
            subscriber_msgs_per_s: rates(|r| r.median_subscriber_msgs_per_s),
            slowest_subscriber_msgs_per_s: rates(|r| r.slowest_subscriber_msgs_per_s),
            msgs_per_cpu_s: rates(|r| r.msgs_per_cpu_s),
            latency_ns: latency(&self.histogram),
        }
    }
}

/// `ipc-parent fanout`.
pub(crate) fn run(args: FanoutArgs) -> anyhow::Result<()> {
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    if args.counts.is_empty() || args.counts.contains(&0) {
        bail!("every subscriber count must be at least 1");
    }
    let sizes = parse_sizes(&args.sizes)?;
    if let Some(&small) = sizes.iter().find(|&&s| s < MIN_SIZE) {
        bail!(
            "--sizes: {small} B is too small: a fan-out message is at least {MIN_SIZE} bytes (its \
             send time, number and phase)"
        );
    }
    let ring_size = args.common.ring_size.unwrap_or(DEFAULT_RING);
    // A topic's largest message (a topic does not fragment).
    let largest = shmlink::TopicConfig {
        capacity: ring_size,
        ..shmlink::TopicConfig::default()
    }
    .max_message();
    if let Some(&big) = sizes.iter().find(|&&s| s > largest) {
        bail!(
            "--sizes: {} does not fit one frame of a {} ring (at most {largest} bytes: a topic \
             does not fragment); give a larger --ring-size",
            size_label(big),
            size_label(ring_size)
        );
    }
    let rows = parse_fanout_rows(&args.transport)?;
    let session = Session::start(args.common.clone(), true)?;
    let plan = FanoutPlan {
        session: &session,
        base: format!("{HARNESS_PREFIX}{}", session.base),
        ring_size,
        args,
    };
    let args = &plan.args;
    if args.transport.trim() == "all" && !FanoutRow::Iceoryx2.built() {
        eprintln!(
            "[info] no iceoryx2 row: this ipc-parent was built without it (`--features \
             iceoryx2` adds it)"
        );
    }
    let timed = match args.count {
        Some(count) => format!("{count} timed messages per row"),
        None => format!("{:?} of timed messages per row", args.duration),
    };
    let sizes_text: Vec<String> = sizes.iter().map(|&s| size_label(s)).collect();
    session.say(&format!(
        "fanout {:?} subscribers; messages of {}; {timed} after {:?} of warmup; ring {}",
        args.counts,
        sizes_text.join(", "),
        args.common.warmup,
        size_label(ring_size),
    ));

    let cpus = run_cpus(&session.placement.record());
    let mut skipped = Vec::new();
    let mut runs: Vec<(usize, Vec<FanoutRow>)> = Vec::new();
    for &n in &args.counts {
        let mut here = Vec::new();
        for &row in &rows {
            match skip_reason(row, n, cpus) {
                Some(why) => {
                    eprintln!(
                        "[info] {} skipped with {n} subscriber{}: {why}",
                        row.name(),
                        if n == 1 { "" } else { "s" }
                    );
                    skipped.push(FanoutSkip {
                        row: row.name().to_owned(),
                        subscribers: n,
                        why,
                    });
                }
                None => here.push(row),
            }
        }
        runs.push((n, here));
    }

    // Every subscriber is started and joins, then the warmup and the timed messages (`--count`
    // of them take what they take).
    let timed = if args.count.is_none() {
        args.duration
    } else {
        Duration::ZERO
    };
    let per_cell = |n: usize| {
        args.common.warmup
            + timed
            + Duration::from_millis(60) * u32::try_from(n).unwrap_or(u32::MAX)
    };
    let planned: Duration = runs
        .iter()
        .map(|(n, here)| {
            per_cell(*n)
                * u32::try_from(here.len() * sizes.len()).unwrap_or(u32::MAX)
                * args.common.rounds
        })
        .sum();
    session.announce(
        planned,
        &format!(
            "{} subscriber count(s) x {} row(s) x {} size(s) x {} round(s)",
            args.counts.len(),
            rows.len(),
            sizes.len(),
            args.common.rounds
        ),
        args.count.is_some(),
    );
    let mut cells: Vec<Cell> = Vec::new();
    for (n, here) in &runs {
        let n = *n;
        let first = cells.len();
        for &size in &sizes {
            for &row in here {
                cells.push(Cell {
                    row,
                    subscribers: n,
                    size,
                    rounds: Vec::new(),
                    histogram: new_histogram()?,
                });
            }
        }
        let schedule = Schedule {
            slices: 1,
            per_piece: per_cell(n),
            part: Some(format!("{n} subscriber{}", if n == 1 { "" } else { "s" })),
        };
        let label = |cell: &Cell| format!("{} {}", cell.row.name(), size_label(cell.size));
        session.rounds(&mut cells[first..], &schedule, label, |cell, round, _| {
            let what = || {
                format!(
                    "{} with {n} subscribers, {}, round {round}",
                    cell.row.name(),
                    size_label(cell.size)
                )
            };
            let (published, results) =
                fanout_round(&plan, cell.row, n, cell.size, round).with_context(what)?;
            let r = summarise(published, &results, &mut cell.histogram).with_context(what)?;
            session.say(&format!(
                "[{} x{n} {}] round {round}: [{}] messages to each subscriber, median subscriber \
                 [{:.1}] msgs/s, slowest [{:.1}]; p50 {:.1} us, p99 {:.1} us; publisher [{:.1}] \
                 msgs/s, [{:.1}] per CPU-second",
                cell.row.name(),
                size_label(cell.size),
                r.messages,
                r.median_subscriber_msgs_per_s,
                r.slowest_subscriber_msgs_per_s,
                r.latency_ns.p50 as f64 / 1e3,
                r.latency_ns.p99 as f64 / 1e3,
                r.published_per_s,
                r.msgs_per_cpu_s,
            ));
            cell.rounds.push(r);
            Ok(())
        })?;
    }

    let iceoryx2 = cells
        .iter()
        .any(|c| c.row == FanoutRow::Iceoryx2)
        .then(iceoryx2_version);
    let results = Results::Fanout(FanoutDoc {
        counts: args.counts.clone(),
        sizes,
        count: args.count,
        duration_s: args.duration.as_secs_f64(),
        ring_size,
        iceoryx2,
        skipped,
        results: cells.iter().map(Cell::result).collect(),
    });
    drop(plan);
    session.finish(results)
}

fn iceoryx2_version() -> String {
    #[cfg(feature = "iceoryx2")]
    return crate::fanout::iceoryx::VERSION.to_owned();
    #[cfg(not(feature = "iceoryx2"))]
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_and_a_row_this_build_lacks_is_refused_with_the_feature_to_add() {
        let all = parse_fanout_rows("all").unwrap();
        assert_eq!(
            all.contains(&FanoutRow::Iceoryx2),
            cfg!(feature = "iceoryx2")
        );
        assert_eq!(all[0], FanoutRow::Topic);
        assert_eq!(
            parse_fanout_rows("uds, shmlink-topic,uds").unwrap(),
            [FanoutRow::Uds, FanoutRow::Topic]
        );
        for bad in ["", "shm", "uds-bare", "shm-batch"] {
            assert!(parse_fanout_rows(bad).is_err(), "{bad:?}");
        }
        let iceoryx2 = parse_fanout_rows("iceoryx2");
        if cfg!(feature = "iceoryx2") {
            assert_eq!(iceoryx2.unwrap(), [FanoutRow::Iceoryx2]);
        } else {
            let err = iceoryx2.unwrap_err().to_string();
            assert!(err.contains("--features iceoryx2"), "{err}");
        }
    }

    #[test]
    fn the_spinning_row_runs_only_where_every_process_has_a_cpu() {
        assert_eq!(skip_reason(FanoutRow::TopicSpin, 1, 2), None);
        let why = skip_reason(FanoutRow::TopicSpin, 2, 2).unwrap();
        assert!(why.contains("3 processes") && why.contains("on 2"), "{why}");
        assert_eq!(skip_reason(FanoutRow::TopicSpin, 7, 8), None);
        for row in [FanoutRow::Topic, FanoutRow::Channels, FanoutRow::Uds] {
            assert_eq!(skip_reason(row, 16, 2), None);
        }
        let pinning = Pinning {
            pinned: true,
            parent: vec![0],
            children: vec![1, 2],
        };
        assert_eq!(run_cpus(&pinning), 3);
    }

    fn result(
        messages: u64,
        start_ns: u64,
        seconds: f64,
        latencies: &[(u64, u64)],
    ) -> SubscriberResult {
        SubscriberResult {
            start_ns,
            end_ns: start_ns + (seconds * 1e9) as u64,
            messages,
            histogram: latencies.to_vec(),
        }
    }

    #[test]
    fn a_round_gives_the_median_and_the_slowest_subscriber_and_every_latency() {
        let published = Published {
            messages: 1000,
            seconds: 0.5,
            cpu_s: 0.25,
        };
        let results = [
            result(1000, 0, 1.0, &[(100, 990), (5000, 10)]),
            result(1000, 10, 0.5, &[(200, 1000)]),
            result(1000, 20, 2.0, &[(300, 1000)]),
        ];
        let mut all = new_histogram().unwrap();
        let r = summarise(published, &results, &mut all).unwrap();
        assert_eq!(r.subscriber_msgs_per_s, [1000.0, 2000.0, 500.0]);
        assert_eq!(r.median_subscriber_msgs_per_s, 1000.0);
        assert_eq!(r.slowest_subscriber_msgs_per_s, 500.0);
        assert_eq!((r.published_per_s, r.msgs_per_cpu_s), (2000.0, 4000.0));
        // 3000 latencies: the median is the second subscriber's, the slowest the first's.
        assert_eq!(all.len(), 3000);
        assert!(
            (199..=201).contains(&r.latency_ns.p50),
            "{:?}",
            r.latency_ns
        );
        assert!(
            (4990..=5010).contains(&r.latency_ns.max),
            "{:?}",
            r.latency_ns
        );
        // A subscriber that missed a message fails the round.
        let short = [result(999, 0, 1.0, &[])];
        let err = summarise(published, &short, &mut all)
            .unwrap_err()
            .to_string();
        assert!(err.contains("999 of the 1000"), "{err}");
    }
}
