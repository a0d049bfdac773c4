//! `ping-pong` and `sweep`: round trips with a child over every transport, round by round. A
//! sweep is a ping-pong of raw messages at several sizes, with MB/s and a memcpy limit row.

mod pinger;
pub(crate) mod sweep;
pub(crate) mod tables;

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;

use crate::parent::cli::{sized_ring, PingPongArgs, SweepArgs, DEFAULT_RING};
use crate::parent::connect::{connect, Plan};
use crate::parent::document::{
    best_and_median, mb_per_s, ratio, Latency, Payload, PingPong, PingPongResult, Results,
    RoundTripFigures, RoundTrips, RowId, Sweep, SweepResult,
};
use crate::parent::limits::{Copier, SerdeWork};
use crate::parent::measure::{measure, new_histogram, Timing};
use crate::parent::rows::{parse_rows, Row};
use crate::parent::session::{Schedule, Session};
use crate::transport::posixmq::MqLimits;
use crate::transport::{self, Kind, Options, Transport, Visitor};
use crate::workload::{self as common, size_label, MessageKind};
use pinger::Pinger;

/// What one round of one row produced.
struct RoundOutcome {
    round: RoundTrips,
    histogram: Histogram<u64>,
    /// The backend that carried the messages (none for the rows measured in this process).
    backend: Option<String>,
}

/// One round of one transport with one kind of message.
struct RunRound<'a, 's> {
    plan: &'a Plan<'s>,
    round: u32,
    message: MessageKind,
    /// Bytes per raw message.
    size: usize,
    /// Names this round's mapping / socket (unique within the run).
    tag: String,
}

impl Visitor for RunRound<'_, '_> {
    type Output = anyhow::Result<RoundOutcome>;

    fn visit<T: Transport>(self) -> anyhow::Result<RoundOutcome> {
        let plan = self.plan;
        let kind = T::KIND;
        let mut conn = connect::<T>(plan, self.round, &self.tag, self.message, &[])?;
        let mut pinger = Pinger::new(plan, kind, self.message, self.size);
        let (round, histogram) = measure(
            &plan.timing,
            || pinger.round_trip(&mut conn.t),
            &format!("{kind} round {}", self.round),
        )?;
        let backend = conn.backend.clone();
        conn.finish()?;
        Ok(RoundOutcome {
            round,
            histogram,
            backend: Some(backend),
        })
    }
}

/// One row at one size (none: JSON messages), over the rounds.
struct Cell {
    row: Row,
    size: Option<usize>,
    rounds: Vec<RoundTrips>,
    histogram: Histogram<u64>,
    backend: Option<String>,
}

impl Cell {
    fn id(&self) -> RowId {
        RowId {
            transport: self.row.name().to_owned(),
            wait: match self.row {
                Row::Shm(wait) => Some(wait.to_string()),
                _ => None,
            },
            backend: self.backend.clone(),
            limit: self.row.is_limit(),
        }
    }

    fn figures(&self) -> RoundTripFigures {
        let (best, median) = best_and_median(self.rounds.iter().map(|r| r.rt_per_s));
        let h = &self.histogram;
        RoundTripFigures {
            rounds: self.rounds.clone(),
            best_rt_per_s: best,
            median_rt_per_s: median,
            latency_ns: Latency {
                p50: h.value_at_quantile(0.5),
                p99: h.value_at_quantile(0.99),
                p999: h.value_at_quantile(0.999),
                max: h.max(),
            },
        }
    }

    /// The payload a round trip moves: the floor's bounce carries none.
    fn payload_size(&self) -> Option<usize> {
        if self.row == Row::Ipc(Kind::Floor) {
            self.size.map(|_| 0)
        } else {
            self.size
        }
    }
}

/// A child's start and connection, beside the warmup and the measured time of a piece.
const SPAWN_ESTIMATE: Duration = Duration::from_millis(60);

/// Runs every cell for every round (`sweep`: tags name the size too). With `slice` (`--paired`)
/// each round's `--duration` is cut into slices of that length, and the cells take turns slice
/// by slice (A B C A B C ...), each slice a fresh child with a warmup of at most a quarter of a
/// slice; a round's figure is then all its slices' round trips over their seconds.
fn run_cells(
    plan: &Plan<'_>,
    rows: &[Row],
    sizes: &[Option<usize>],
    message: MessageKind,
    sweep: bool,
    slice: Option<Duration>,
) -> anyhow::Result<Vec<Cell>> {
    // Each round goes through all sizes and, within a size, all rows.
    let mut cells: Vec<Cell> = sizes
        .iter()
        .flat_map(|&size| rows.iter().map(move |&row| (row, size)))
        .map(|(row, size)| {
            Ok(Cell {
                row,
                size,
                rounds: Vec::new(),
                histogram: new_histogram()?,
                backend: None,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let mut piece_plan = plan.clone();
    let slices = match slice {
        Some(slice) => {
            piece_plan.timing.duration = slice;
            piece_plan.timing.warmup = plan.timing.warmup.min(slice / 4);
            let n = plan.timing.duration.as_secs_f64() / slice.as_secs_f64().max(1e-9);
            (n.round() as u32).max(1)
        }
        None => 1,
    };
    let schedule = Schedule {
        slices,
        per_piece: piece_plan.timing.warmup
            + piece_plan.timing.duration
            + if needs_child(rows) {
                SPAWN_ESTIMATE
            } else {
                Duration::ZERO
            },
        part: None,
    };
    let session = plan.session;
    session.announce(
        schedule.estimate(cells.len(), session.common.rounds),
        &format!(
            "{} rows x {} round(s){}",
            cells.len(),
            session.common.rounds,
            if slices > 1 {
                format!(" x {slices} slices of {:?}", piece_plan.timing.duration)
            } else {
                String::new()
            }
        ),
        false,
    );
    let label = |cell: &Cell| match cell.size.filter(|_| sweep) {
        Some(size) => format!("{} {}", cell.id().label(), size_label(size)),
        None => cell.id().label(),
    };
    session.rounds(&mut cells, &schedule, label, |cell, round, slice| {
        let tag = match cell.size {
            Some(size) if sweep => format!("r{round}-{size}"),
            _ if slices > 1 => format!("r{round}s{slice}"),
            _ => format!("r{round}"),
        };
        let outcome = run_round(&piece_plan, cell.row, round, cell.size, message, tag)?;
        cell.histogram
            .add(&outcome.histogram)
            .map_err(|e| anyhow!("histogram: {e}"))?;
        cell.backend = outcome.backend;
        let piece = outcome.round;
        if slices == 1 {
            cell.rounds.push(piece);
        } else {
            if slice == 0 {
                cell.rounds.push(RoundTrips {
                    round_trips: 0,
                    seconds: 0.0,
                    rt_per_s: 0.0,
                    slices: Vec::new(),
                });
            }
            let Some(r) = cell.rounds.last_mut() else {
                bail!("no round to add slice {slice} to");
            };
            r.round_trips += piece.round_trips;
            r.seconds += piece.seconds;
            r.rt_per_s = ratio(r.round_trips as f64, r.seconds).unwrap_or(0.0);
            r.slices.push(piece.rt_per_s);
            if slice + 1 < slices {
                return Ok(());
            }
        }
        let Some(r) = cell.rounds.last() else {
            return Ok(());
        };
        let what = match cell.size.filter(|_| sweep) {
            Some(size) => format!("{} {}", cell.id().label(), size_label(size)),
            None => cell.id().label(),
        };
        let mb = match cell.size.filter(|_| sweep) {
            Some(size) => format!(", [{:.1}] MB/s", mb_per_s(r.rt_per_s, size)),
            None => String::new(),
        };
        plan.session.say(&format!(
            "[{what}] completed [{}] ping-pong round-trips [{:.3}] seconds ([{:.1}] \
             round-trips/second{mb})",
            r.round_trips, r.seconds, r.rt_per_s
        ));
        Ok(())
    })?;
    Ok(cells)
}

/// Runs one round of `row` (`size`: bytes per raw message).
fn run_round(
    plan: &Plan<'_>,
    row: Row,
    round: u32,
    size: Option<usize>,
    message: MessageKind,
    tag: String,
) -> anyhow::Result<RoundOutcome> {
    let what = match size {
        Some(size) => format!("{} {} round {round}", row.name(), size_label(size)),
        None => format!("{} round {round}", row.name()),
    };
    let in_process = |(round, histogram)| RoundOutcome {
        round,
        histogram,
        backend: None,
    };
    match row {
        Row::Ipc(kind) => transport::dispatch(
            kind,
            RunRound {
                plan,
                round,
                message,
                size: size.unwrap_or(0),
                tag,
            },
        ),
        Row::Shm(wait) => {
            // An shm row per strategy: the plan with that strategy, and names of its own.
            let mut with_wait = plan.clone();
            with_wait.opts.wait = wait;
            with_wait.base = format!("{}-{wait}", plan.base);
            transport::dispatch(
                Kind::Shm,
                RunRound {
                    plan: &with_wait,
                    round,
                    message,
                    size: size.unwrap_or(0),
                    tag,
                },
            )
        }
        Row::Serde => {
            let mut work = SerdeWork::new(plan);
            Ok(in_process(measure(
                &plan.timing,
                || work.round_trip(),
                &what,
            )?))
        }
        Row::Memcpy => {
            let mut copier = Copier::new(size.unwrap_or(0));
            Ok(in_process(measure(
                &plan.timing,
                || copier.round_trip(),
                &what,
            )?))
        }
        Row::Ring => bail!("the ring row belongs to the stream"),
        Row::Bare(_) | Row::Batch(_) => bail!("{} belongs to the stream", row.name()),
    }
}

/// Options of the transports for messages up to `largest` bytes.
fn options(
    wait: shmlink::WaitStrategy,
    ring_size: usize,
    largest: usize,
    tcp_addr: &str,
) -> Options {
    Options {
        wait,
        ring_size,
        max_message: largest.max(Options::default().max_message),
        tcp_addr: tcp_addr.to_owned(),
        connect_timeout: Duration::from_secs(10),
        tcp_nodelay: true,
    }
}

/// Whether a row needs the child binary.
fn needs_child(rows: &[Row]) -> bool {
    rows.iter().any(|r| matches!(r, Row::Ipc(_) | Row::Shm(_)))
}

/// `ipc-parent ping-pong`.
pub(crate) fn ping_pong(args: PingPongArgs) -> anyhow::Result<()> {
    let rows = parse_rows(&args.transport, false, args.message, &args.wait.0)?;
    if args.no_spawn && rows.iter().any(|&r| r != Row::Ipc(Kind::Tcp)) {
        bail!("--no-spawn needs --transport tcp (a peer started by hand reaches only TCP)");
    }
    let raw = args.message == MessageKind::Raw;
    if raw && args.size == 0 {
        bail!("--size must be at least 1 byte");
    }
    let size = raw.then_some(args.size);
    let session = Session::start(args.common.clone(), !args.no_spawn && needs_child(&rows))?;
    let ring_size = args.common.ring_size.unwrap_or(DEFAULT_RING);
    let mut plan = Plan::new(
        &session,
        options(
            args.wait.first(),
            ring_size,
            size.unwrap_or(0),
            &args.tcp_addr,
        ),
        Timing {
            warmup: args.common.warmup,
            duration: args.duration,
            pace: args.pace,
        },
    );
    plan.no_spawn = args.no_spawn;
    if args.no_spawn {
        // A peer started by hand gets minutes.
        plan.opts.connect_timeout = Duration::from_secs(300);
    }
    session.say(&format!(
        "ping-pong of {} messages{}; pace {:?}",
        args.message.as_str(),
        size.map_or(String::new(), |s| format!(" of {s} bytes")),
        args.pace
    ));
    if args.paired && args.no_spawn {
        bail!("--paired starts a child per slice; a peer started by hand (--no-spawn) cannot");
    }
    if args.paired && args.slice.is_zero() {
        bail!("--slice must be longer than 0");
    }
    let slice = args.paired.then_some(args.slice);
    let cells = run_cells(&plan, &rows, &[size], args.message, false, slice)?;

    let floor = cells
        .iter()
        .find(|c| c.row == Row::Ipc(Kind::Floor))
        .map(|c| c.figures().best_rt_per_s);
    let results = cells
        .iter()
        .map(|c| {
            let figures = c.figures();
            PingPongResult {
                row: c.id(),
                pct_of_floor: floor
                    .and_then(|f| ratio(figures.best_rt_per_s, f))
                    .map(|x| x * 100.0),
                payload: c.payload_size().map(|size| Payload {
                    size,
                    mb_per_s: mb_per_s(figures.best_rt_per_s, size),
                    median_mb_per_s: mb_per_s(figures.median_rt_per_s, size),
                }),
                figures,
            }
        })
        .collect();
    let results = Results::PingPong(PingPong {
        message: args.message.as_str().to_owned(),
        size,
        duration_s: args.duration.as_secs_f64(),
        pace_s: args.pace.as_secs_f64(),
        ring_size,
        posixmq: rows.contains(&Row::Ipc(Kind::PosixMq)).then(MqLimits::read),
        slice_s: slice.map(|s| s.as_secs_f64()),
        results,
    });
    session.finish(results)
}
