//! `--stream`: one-way streaming throughput. For every size and row, the parent sends a phase of
//! messages (see [`crate::streaming`]) and the time runs until the receiver's verdict; rounds
//! are interleaved (every size and row once, then again). Two limit rows run in this process:
//! `ring`, the same shmlink ring between two threads, and `memcpy`, one copy of every message
//! into a ring-sized buffer.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use shmlink::{RecvError, SendError};

use crate::Error;

use super::child::{install_signal_handlers, interrupted};
use super::cli::{sweep_ring, RunArgs};
use super::connect::connect;
use super::report::{machine, median, profile, Latency, Report, RoundResult, TransportResult};
use super::rows::{parse_stream_rows, Row};
use super::run::Plan;
use super::table::print_stream;
use crate::streaming::{self, Stream, Verdict, MIN_SIZE};
use crate::transport::posixmq::MqLimits;
use crate::transport::{self, Kind, Options, Transport, Visitor};
use crate::workload::{self as common, size_label, MessageKind};

/// Messages of the first warmup phase.
const FIRST_PHASE: u64 = 1000;
/// The fewest messages a default `--count` asks for.
const MIN_COUNT: u64 = 10_000;
/// The most messages a default `--count` asks for.
const MAX_COUNT: u64 = 1 << 31;

/// Runs the warmup phases (at least one), fixes the count if it is not fixed yet (what fills
/// the round's duration at the warmup's overall rate, and at least [`MIN_COUNT`] so that a
/// warmup stalled by the scheduler does not shrink the row to nothing), and runs the measured
/// phase. `phase(n)` moves `n` messages and returns the time until the receiver confirmed them.
fn measure_stream(
    args: &RunArgs,
    count: &mut Option<u64>,
    mut phase: impl FnMut(u64) -> anyhow::Result<Duration>,
) -> anyhow::Result<RoundResult> {
    let warm_until = Instant::now() + args.warmup;
    let mut n = FIRST_PHASE;
    let (mut warm_messages, mut warm_seconds) = (0u64, 0.0f64);
    loop {
        let took = phase(n).context("warmup")?;
        let rate = n as f64 / took.as_secs_f64().max(1e-9);
        warm_messages += n;
        warm_seconds += took.as_secs_f64();
        let now = Instant::now();
        if now >= warm_until {
            break;
        }
        let left = (warm_until - now).as_secs_f64();
        n = ((rate * left) as u64).clamp(FIRST_PHASE, n.saturating_mul(4));
    }
    let messages = *count.get_or_insert_with(|| {
        let rate = warm_messages as f64 / warm_seconds.max(1e-9);
        ((rate * args.duration().as_secs_f64()) as u64).clamp(MIN_COUNT, MAX_COUNT)
    });
    let seconds = phase(messages)?.as_secs_f64();
    Ok(RoundResult {
        round_trips: 0,
        seconds,
        rt_per_s: 0.0,
        messages: Some(messages),
        msgs_per_s: Some(if seconds > 0.0 {
            messages as f64 / seconds
        } else {
            0.0
        }),
        p99_median_client_ns: None,
        p99_worst_client_ns: None,
    })
}

/// One round of one transport at one size, with a child in `--mode stream`.
struct StreamRound<'a> {
    plan: &'a Plan,
    round: u32,
    size: usize,
    count: &'a mut Option<u64>,
}

impl Visitor for StreamRound<'_> {
    type Output = anyhow::Result<(RoundResult, String)>;

    fn visit<T: Transport>(self) -> anyhow::Result<(RoundResult, String)> {
        let tag = format!("s{}-{}", self.round, self.size);
        let mut conn = connect::<T>(
            self.plan,
            self.round,
            &tag,
            MessageKind::Raw,
            &["--mode", "stream"],
        )?;
        let mut stream = Stream::new(self.size);
        let round = measure_stream(&self.plan.args, self.count, |n| {
            let start = Instant::now();
            let verdict = streaming::send_phase(&mut conn.t, &mut stream, n)?;
            let took = start.elapsed();
            verdict.check(&stream, n)?;
            Ok(took)
        })
        .with_context(|| format!("{} {} round {}", T::KIND, size_label(self.size), self.round))?;
        let backend = conn.backend.clone();
        conn.finish()?;
        Ok((round, backend))
    }
}

/// Spins until told to stop, yielding now and then (the machine may have fewer cores than
/// spinning threads).
struct Spin(u32);

impl Spin {
    #[inline]
    fn turn(&mut self) {
        self.0 = self.0.wrapping_add(1);
        if self.0 % 256 == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One phase of the `ring` limit row: `n` messages through `shmlink::ring` from this thread to
/// another, which checks them exactly as the child does. Returns the time until that thread
/// had them all.
fn ring_phase(capacity: usize, size: usize, n: u64) -> anyhow::Result<Duration> {
    let (mut tx, mut rx) = shmlink::ring::new(capacity)?;
    let mut stream = Stream::new(size);
    let start_line = Arc::new(Barrier::new(2));
    let abort = Arc::new(AtomicBool::new(false));
    let consumer = {
        let start_line = Arc::clone(&start_line);
        let abort = Arc::clone(&abort);
        std::thread::spawn(move || -> Result<(Verdict, Instant), Error> {
            start_line.wait();
            let mut verdict = Verdict {
                count: 0,
                digest: 0,
                first_bad: None,
            };
            let mut spin = Spin(0);
            while verdict.count < n {
                match rx.try_read() {
                    Ok(frame) => streaming::take(&mut verdict, &frame, size),
                    Err(RecvError::Empty) => {
                        // Relaxed: a plain stop flag; it orders no other data.
                        if abort.load(Ordering::Relaxed) {
                            return Err(transport::closed());
                        }
                        spin.turn();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Ok((verdict, Instant::now()))
        })
    };
    start_line.wait();
    let start = Instant::now();
    let mut spin = Spin(0);
    let mut sent: Result<(), Error> = Ok(());
    'send: for seq in 0..n {
        let msg = stream.message(seq);
        loop {
            match tx.try_send(msg) {
                Ok(()) => break,
                Err(SendError::Full) => spin.turn(),
                Err(e) => {
                    sent = Err(e.into());
                    break 'send;
                }
            }
        }
    }
    if sent.is_err() {
        // Relaxed: see the load.
        abort.store(true, Ordering::Relaxed);
    }
    let received = consumer
        .join()
        .map_err(|_| anyhow!("the ring's consumer thread panicked"))?;
    sent?;
    let (verdict, end) = received?;
    verdict.check(&stream, n)?;
    Ok(end - start)
}

/// One phase of the `memcpy` limit row: every message stamped and copied once into a
/// ring-sized buffer, at the offsets the ring's frames would take (whole cache lines, a header
/// word first).
fn memcpy_phase(capacity: usize, size: usize, n: u64) -> Duration {
    let mut stream = Stream::new(size);
    let mut region = vec![0u8; capacity];
    let step = (8 + size).div_ceil(64) * 64;
    let mut offset = 0;
    let start = Instant::now();
    for seq in 0..n {
        if offset + 8 + size > capacity {
            offset = 0;
        }
        let msg = black_box(stream.message(seq));
        region[offset + 8..offset + 8 + size].copy_from_slice(msg);
        black_box(&mut region);
        offset += step;
    }
    start.elapsed()
}

/// One round of one row at one size; returns the round and the backend that ran (if any).
fn stream_round(
    plan: &Plan,
    row: Row,
    round: u32,
    size: usize,
    count: &mut Option<u64>,
) -> anyhow::Result<(RoundResult, Option<String>)> {
    let capacity = plan.opts.ring_size;
    let what = || format!("{} {} round {round}", row.name(), size_label(size));
    match row {
        Row::Ipc(kind) => {
            let (r, backend) = transport::dispatch(
                kind,
                StreamRound {
                    plan,
                    round,
                    size,
                    count,
                },
            )?;
            Ok((r, Some(backend)))
        }
        Row::Shm(_) => bail!("a stream runs one shm row (--wait with one strategy)"),
        Row::Ring => {
            let r = measure_stream(&plan.args, count, |n| ring_phase(capacity, size, n))
                .with_context(what)?;
            Ok((r, None))
        }
        Row::Memcpy => {
            let r = measure_stream(&plan.args, count, |n| Ok(memcpy_phase(capacity, size, n)))
                .with_context(what)?;
            Ok((r, None))
        }
        Row::Serde => bail!("the serde row belongs to the ping-pong run"),
    }
}

/// `ipc-parent --stream`.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    install_signal_handlers()?;
    let rows = parse_stream_rows(&args.transport)?;
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let sizes = common::parse_sizes(args.sizes()).context("--sizes")?;
    if let Some(&small) = sizes.iter().find(|&&s| s < MIN_SIZE) {
        bail!(
            "--sizes: {small} bytes is too small: a stream message holds an 8-byte sequence number"
        );
    }
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let ring_size = args.ring_size.unwrap_or(sweep_ring(largest));
    if shmlink::testing::max_payload(ring_size) < largest {
        bail!(
            "--ring-size {}: the ring's largest frame holds {} bytes, less than the {} byte \
             messages (the ring limit row sends each message as one frame)",
            size_label(ring_size),
            shmlink::testing::max_payload(ring_size),
            largest
        );
    }
    let opts = Options {
        wait: args.waits().first(),
        ring_size,
        max_message: largest.max(Options::default().max_message),
        tcp_addr: args.tcp_addr.clone(),
        connect_timeout: Duration::from_secs(10),
    };
    let needs_child = rows.iter().any(|r| matches!(r, Row::Ipc(_)));
    let mq = rows.contains(&Row::Ipc(Kind::PosixMq)).then(MqLimits::read);
    let plan = Plan::new(rows, sizes, opts, needs_child, args)?;
    let machine = machine();
    if !plan.args.json {
        println!(
            "machine: {} ({} cores), {}; build: {}; one-way stream of {}; ring {}; {}",
            machine.cpu,
            machine.cores,
            machine.kernel,
            profile(),
            plan.sizes
                .iter()
                .map(|&s| size_label(s))
                .collect::<Vec<_>>()
                .join(", "),
            size_label(plan.opts.ring_size),
            match plan.args.count {
                Some(n) => format!("{n} messages per row"),
                None => format!(
                    "messages per row: what fills {:?} (fixed in round 1)",
                    plan.args.duration()
                ),
            }
        );
        if let Some(mq) = &mq {
            println!("{}", mq_line(mq));
        }
    }

    let cells: Vec<(Row, usize)> = plan
        .sizes
        .iter()
        .flat_map(|&size| plan.rows.iter().map(move |&row| (row, size)))
        .collect();
    let mut rounds: Vec<Vec<RoundResult>> = vec![Vec::new(); cells.len()];
    let mut counts: Vec<Option<u64>> = vec![plan.args.count; cells.len()];
    let mut backends: Vec<Option<String>> = vec![None; cells.len()];
    for round in 1..=plan.args.rounds {
        for (i, &(row, size)) in cells.iter().enumerate() {
            if interrupted() {
                bail!("interrupted");
            }
            let (r, backend) = match stream_round(&plan, row, round, size, &mut counts[i]) {
                Err(_) if interrupted() => bail!("interrupted"),
                other => other?,
            };
            let rate = r.msgs_per_s.unwrap_or(0.0);
            let line = format!(
                "[{} {}] streamed [{}] messages in [{:.3}] seconds ([{:.0}] messages/second, \
                 [{:.1}] MB/s)",
                row.name(),
                size_label(size),
                r.messages.unwrap_or(0),
                r.seconds,
                rate,
                rate * size as f64 / 1e6
            );
            if plan.args.json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
            backends[i] = backend;
            rounds[i].push(r);
        }
    }

    let best_of = |i: usize| {
        rounds[i]
            .iter()
            .filter_map(|r| r.msgs_per_s)
            .fold(0.0, f64::max)
    };
    let best_at = |row: Row, size: usize| {
        cells
            .iter()
            .position(|&cell| cell == (row, size))
            .map(best_of)
            .filter(|&b| b > 0.0)
    };
    let results: Vec<TransportResult> = cells
        .iter()
        .enumerate()
        .map(|(i, &(row, size))| {
            let mut rates: Vec<f64> = rounds[i].iter().filter_map(|r| r.msgs_per_s).collect();
            let best = best_of(i);
            let median_rate = median(&mut rates);
            let mb = best * size as f64 / 1e6;
            TransportResult {
                transport: row.name().to_owned(),
                wait: (row == Row::Ipc(Kind::Shm)).then(|| plan.opts.wait.to_string()),
                backend: backends[i].clone(),
                limit: row.is_limit(),
                size: Some(size),
                rounds: rounds[i].clone(),
                best_rt_per_s: 0.0,
                median_rt_per_s: 0.0,
                latency_ns: Latency {
                    p50: 0,
                    p99: 0,
                    p999: 0,
                    max: 0,
                },
                pct_of_floor: None,
                mb_per_s: Some(mb),
                median_mb_per_s: Some(median_rate * size as f64 / 1e6),
                memcpy_ratio: best_at(Row::Memcpy, size).map(|m| best / m),
                count: counts[i],
                msgs_per_s: Some(best),
                median_msgs_per_s: Some(median_rate),
                ring_ratio: best_at(Row::Ring, size).map(|r| best / r),
                clients: None,
                p99_median_client_ns: None,
                p99_worst_client_ns: None,
            }
        })
        .collect();
    let report = Report {
        machine,
        profile: profile().to_owned(),
        message: MessageKind::Raw.as_str().to_owned(),
        size: None,
        sweep: false,
        stream: true,
        sizes: Some(plan.sizes.clone()),
        ring_size: plan.opts.ring_size,
        duration_s: plan.args.duration().as_secs_f64(),
        warmup_s: plan.args.warmup.as_secs_f64(),
        pace_s: 0.0,
        load: plan.args.load,
        clients: None,
        wait: None,
        ratios: None,
        posixmq: mq,
        results,
    };
    report.emit(plan.args.save.as_ref(), plan.args.json, print_stream)
}

/// The line that reports the message queue limits.
pub(crate) fn mq_line(mq: &MqLimits) -> String {
    let show = |v: Option<usize>| v.map_or("?".to_owned(), |v| v.to_string());
    format!(
        "posixmq: /proc/sys/fs/mqueue/msgsize_max {}, msg_max {}; queues of {} messages of {} \
         bytes, larger messages in fragments",
        show(mq.msgsize_max),
        show(mq.msg_max),
        mq.maxmsg,
        mq.msgsize
    )
}
