//! `stream`: one-way streaming throughput. For every size and row, the parent sends a phase of
//! messages (see [`crate::stream_format`]) and the time runs until the receiver's verdict; rounds
//! are interleaved (every size and row once, then again). Two limit rows run in this process:
//! `ring`, the same shmlink ring between two threads, and `memcpy`, one copy of every message
//! into a ring-sized buffer.

pub(crate) mod tables;

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use shmlink::{RecvError, SendError};

use crate::Error;

use crate::parent::cli::{sized_ring, StreamArgs};
use crate::parent::connect::{connect, Plan};
use crate::parent::document::{
    best_and_median, ratio, Results, RowId, Stream, StreamResult, StreamRound,
};
use crate::parent::machine::Placement;
use crate::parent::measure::Timing;
use crate::parent::rows::{parse_stream_rows, Row};
use crate::parent::session::{Schedule, Session};
use crate::stream_format::{self, Verdict, MIN_SIZE};
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
    timing: &Timing,
    count: &mut Option<u64>,
    mut phase: impl FnMut(u64) -> anyhow::Result<Duration>,
) -> anyhow::Result<StreamRound> {
    let warm_until = Instant::now() + timing.warmup;
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
        ((rate * timing.duration.as_secs_f64()) as u64).clamp(MIN_COUNT, MAX_COUNT)
    });
    let seconds = phase(messages)?.as_secs_f64();
    Ok(StreamRound {
        messages,
        seconds,
        msgs_per_s: ratio(messages as f64, seconds).unwrap_or(0.0),
    })
}

/// One round of one transport at one size, with a child in `--mode stream` (framed messages),
/// `--mode bare-stream` or `--mode batch-stream`.
struct StreamPhases<'a, 's> {
    plan: &'a Plan<'s>,
    round: u32,
    size: usize,
    count: &'a mut Option<u64>,
    /// `Row::Ipc`, `Row::Bare` or `Row::Batch`, of the transport visited.
    row: Row,
}

impl Visitor for StreamPhases<'_, '_> {
    type Output = anyhow::Result<(StreamRound, String)>;

    fn visit<T: Transport>(self) -> anyhow::Result<(StreamRound, String)> {
        let row = self.row;
        let (prefix, mode) = match row {
            Row::Bare(_) => ("b", "bare-stream"),
            Row::Batch(_) => ("c", "batch-stream"),
            _ => ("s", "stream"),
        };
        let tag = format!("{prefix}{}-{}", self.round, self.size);
        let mut conn = connect::<T>(
            self.plan,
            self.round,
            &tag,
            MessageKind::Raw,
            &["--mode", mode],
        )?;
        let mut stream = stream_format::Stream::new(self.size);
        let round = measure_stream(&self.plan.timing, self.count, |n| {
            let start = Instant::now();
            let verdict = match row {
                Row::Bare(_) => stream_format::send_bare_phase(&mut conn.t, &mut stream, n)?,
                Row::Batch(_) => stream_format::send_batch_phase(&mut conn.t, &mut stream, n)?,
                _ => stream_format::send_phase(&mut conn.t, &mut stream, n)?,
            };
            let took = start.elapsed();
            verdict.check(&stream, n)?;
            Ok(took)
        })
        .with_context(|| {
            format!(
                "{} {} round {}",
                row.name(),
                size_label(self.size),
                self.round
            )
        })?;
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
fn ring_phase(
    placement: &Placement,
    capacity: usize,
    size: usize,
    n: u64,
) -> anyhow::Result<Duration> {
    let (mut tx, mut rx) = shmlink::ring::new(capacity)?;
    let mut stream = stream_format::Stream::new(size);
    let start_line = Arc::new(Barrier::new(2));
    let abort = Arc::new(AtomicBool::new(false));
    let consumer = {
        let start_line = Arc::clone(&start_line);
        let abort = Arc::clone(&abort);
        let placement = placement.clone();
        std::thread::spawn(move || -> Result<(Verdict, Instant), Error> {
            // Pinned, the consumer stands where a child would.
            let pinned = placement.pin_thread_as_child();
            start_line.wait();
            pinned?;
            let mut verdict = Verdict::default();
            let mut spin = Spin(0);
            while verdict.count < n {
                match rx.try_read() {
                    Ok(frame) => stream_format::take(&mut verdict, &frame, size),
                    Err(RecvError::Empty { .. }) => {
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
                Err(SendError::Full { .. }) => spin.turn(),
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
    let mut stream = stream_format::Stream::new(size);
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
    plan: &Plan<'_>,
    row: Row,
    round: u32,
    size: usize,
    count: &mut Option<u64>,
) -> anyhow::Result<(StreamRound, Option<String>)> {
    let capacity = plan.opts.ring_size;
    let what = || format!("{} {} round {round}", row.name(), size_label(size));
    match row {
        Row::Ipc(kind) | Row::Bare(kind) | Row::Batch(kind) => {
            let (r, backend) = transport::dispatch(
                kind,
                StreamPhases {
                    plan,
                    round,
                    size,
                    count,
                    row,
                },
            )?;
            Ok((r, Some(backend)))
        }
        Row::Ring => {
            let placement = &plan.session.placement;
            let r = measure_stream(&plan.timing, count, |n| {
                ring_phase(placement, capacity, size, n)
            })
            .with_context(what)?;
            Ok((r, None))
        }
        Row::Memcpy => {
            let r = measure_stream(&plan.timing, count, |n| Ok(memcpy_phase(capacity, size, n)))
                .with_context(what)?;
            Ok((r, None))
        }
        Row::Shm(_) | Row::Serde => bail!("{} is not a row of the stream", row.name()),
    }
}

/// One row at one size, over the rounds.
struct Cell {
    row: Row,
    size: usize,
    /// Messages per round: `--count`, or fixed by the first round.
    count: Option<u64>,
    rounds: Vec<StreamRound>,
    backend: Option<String>,
}

/// `ipc-parent stream`.
pub(crate) fn run(args: StreamArgs) -> anyhow::Result<()> {
    let rows = parse_stream_rows(&args.transport)?;
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let sizes = common::parse_sizes(&args.sizes).context("--sizes")?;
    if let Some(&small) = sizes.iter().find(|&&s| s < MIN_SIZE) {
        bail!(
            "--sizes: {small} bytes is too small: a stream message holds an 8-byte sequence number"
        );
    }
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let ring_size = args.common.ring_size.unwrap_or(sized_ring(largest));
    if shmlink::testing::max_payload(ring_size) < largest {
        bail!(
            "--ring-size {}: the ring's largest frame holds {} bytes, less than the {} byte \
             messages (the ring limit row sends each message as one frame)",
            size_label(ring_size),
            shmlink::testing::max_payload(ring_size),
            largest
        );
    }
    let needs_child = rows
        .iter()
        .any(|r| matches!(r, Row::Ipc(_) | Row::Bare(_) | Row::Batch(_)));
    let uses_mq =
        rows.contains(&Row::Ipc(Kind::PosixMq)) || rows.contains(&Row::Bare(Kind::PosixMq));
    // A bare queue message holds a whole message: larger sizes have no posixmq-bare cell.
    let mq_msgsize = uses_mq.then(|| MqLimits::read().msgsize);
    let has_cell = |row: Row, size: usize| {
        row != Row::Bare(Kind::PosixMq) || mq_msgsize.is_some_and(|max| size <= max)
    };
    let session = Session::start(args.common.clone(), needs_child)?;
    let plan = Plan::new(
        &session,
        Options {
            wait: args.wait,
            ring_size,
            max_message: largest.max(Options::default().max_message),
            tcp_addr: args.tcp_addr.clone(),
            connect_timeout: Duration::from_secs(10),
            // One way: Nagle's algorithm fills segments while the sender runs ahead.
            tcp_nodelay: false,
        },
        Timing {
            warmup: args.common.warmup,
            duration: args.duration,
            pace: Duration::ZERO,
        },
    );
    let mq = uses_mq.then(MqLimits::read);
    session.say(&format!(
        "one-way stream of {}; ring {}; shm waits {}; {}",
        sizes
            .iter()
            .map(|&s| size_label(s))
            .collect::<Vec<_>>()
            .join(", "),
        size_label(ring_size),
        args.wait,
        match args.count {
            Some(n) => format!("{n} messages per row"),
            None => format!(
                "messages per row: what fills {:?} (fixed in round 1)",
                args.duration
            ),
        }
    ));

    let bare_mq = Row::Bare(Kind::PosixMq);
    if rows.contains(&bare_mq) && sizes.iter().any(|&size| !has_cell(bare_mq, size)) {
        session.say(&format!(
            "posixmq-bare: no cell over {}, what one queue message holds here \
             (/proc/sys/fs/mqueue/msgsize_max)",
            size_label(mq_msgsize.unwrap_or(0))
        ));
    }
    let mut cells: Vec<Cell> = sizes
        .iter()
        .flat_map(|&size| rows.iter().map(move |&row| (row, size)))
        .filter(|&(row, size)| has_cell(row, size))
        .map(|(row, size)| Cell {
            row,
            size,
            count: args.count,
            rounds: Vec::new(),
            backend: None,
        })
        .collect();
    // A row's default count fills about `--duration` (a given `--count` takes what it takes);
    // a child's start and the warmup come on top.
    let schedule = Schedule {
        slices: 1,
        per_piece: args.common.warmup
            + Duration::from_millis(60)
            + if args.count.is_none() {
                args.duration
            } else {
                Duration::ZERO
            },
        part: None,
    };
    session.announce(
        schedule.estimate(cells.len(), args.common.rounds),
        &format!("{} rows x {} round(s)", cells.len(), args.common.rounds),
        args.count.is_some(),
    );
    let label = |cell: &Cell| format!("{} {}", cell.row.name(), size_label(cell.size));
    session.rounds(&mut cells, &schedule, label, |cell, round, _| {
        let (r, backend) = stream_round(&plan, cell.row, round, cell.size, &mut cell.count)?;
        session.say(&format!(
            "[{} {}] streamed [{}] messages in [{:.3}] seconds ([{:.0}] messages/second, \
             [{:.1}] MB/s)",
            cell.row.name(),
            size_label(cell.size),
            r.messages,
            r.seconds,
            r.msgs_per_s,
            r.msgs_per_s * cell.size as f64 / 1e6
        ));
        cell.backend = backend;
        cell.rounds.push(r);
        Ok(())
    })?;

    let best = |c: &Cell| best_and_median(c.rounds.iter().map(|r| r.msgs_per_s));
    let best_at = |row: Row, size: usize| {
        cells
            .iter()
            .find(|c| c.row == row && c.size == size)
            .map(|c| best(c).0)
    };
    let results = cells
        .iter()
        .map(|c| {
            let (best_rate, median_rate) = best(c);
            let mb = |rate: f64| rate * c.size as f64 / 1e6;
            StreamResult {
                row: RowId {
                    transport: c.row.name().to_owned(),
                    wait: (c.row == Row::Ipc(Kind::Shm)).then(|| args.wait.to_string()),
                    backend: c.backend.clone(),
                    limit: c.row.is_limit(),
                },
                size: c.size,
                count: c.count.unwrap_or(0),
                rounds: c.rounds.clone(),
                msgs_per_s: best_rate,
                median_msgs_per_s: median_rate,
                mb_per_s: mb(best_rate),
                median_mb_per_s: mb(median_rate),
                ring_ratio: best_at(Row::Ring, c.size).and_then(|r| ratio(best_rate, r)),
                memcpy_ratio: best_at(Row::Memcpy, c.size).and_then(|m| ratio(best_rate, m)),
                bare_ratio: match c.row {
                    Row::Ipc(kind) => {
                        best_at(Row::Bare(kind), c.size).and_then(|b| ratio(best_rate, b))
                    }
                    _ => None,
                },
            }
        })
        .collect();
    session.finish(Results::Stream(Stream {
        sizes,
        duration_s: args.duration.as_secs_f64(),
        count: args.count,
        wait: args.wait.to_string(),
        ring_size,
        posixmq: mq,
        results,
    }))
}
