//! A ping-pong run or a sweep: the plan, one round of one row, and the run as a whole.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;

use super::child::{install_signal_handlers, interrupted, Load};
use super::cli::{sweep_ring, RunArgs, DEFAULT_RING};
use super::connect::connect;
use super::limits::{Copier, SerdeWork};
use super::measure::{measure, new_histogram};
use super::pinger::Pinger;
use super::report::{
    machine, mb_per_s, median, profile, Latency, Report, RoundResult, TransportResult,
};
use super::rows::{parse_rows, Row};
use super::table::{print_sweep, print_table};
use crate::transport::{self, Kind, Options, Transport, Visitor};
use crate::workload::{self as common, size_label, MessageKind};

#[derive(Clone)]
pub(crate) struct Plan {
    pub(crate) rows: Vec<Row>,
    /// Message sizes of a sweep (empty for a ping-pong run).
    pub(crate) sizes: Vec<usize>,
    pub(crate) opts: Options,
    pub(crate) args: RunArgs,
    pub(crate) child_path: PathBuf,
    pub(crate) base: String,
    pub(crate) parent_id: String,
    pub(crate) child_id: String,
}

impl Plan {
    /// The plan of a run: the child binary found if a row needs one, the base of the run's
    /// names (`--name`, or `h<pid>`) checked, fresh ids for the two sides.
    pub(crate) fn new(
        rows: Vec<Row>,
        sizes: Vec<usize>,
        opts: Options,
        needs_child: bool,
        args: RunArgs,
    ) -> anyhow::Result<Plan> {
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
        Ok(plan)
    }
}

/// What one round of one row produced.
pub(crate) struct RoundOutcome {
    pub(crate) round: RoundResult,
    pub(crate) histogram: Histogram<u64>,
    /// The backend that carried the messages (none for the rows measured in this process).
    pub(crate) backend: Option<String>,
}

pub(crate) fn child_path(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
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
pub(crate) struct RunRound<'a> {
    pub(crate) plan: &'a Plan,
    pub(crate) round: u32,
    pub(crate) message: MessageKind,
    /// Bytes per raw message.
    pub(crate) size: usize,
    /// Names this round's mapping / socket (unique within the run).
    pub(crate) tag: String,
}

impl Visitor for RunRound<'_> {
    type Output = anyhow::Result<RoundOutcome>;

    fn visit<T: Transport>(self) -> anyhow::Result<RoundOutcome> {
        let plan = self.plan;
        let kind = T::KIND;
        let mut conn = connect::<T>(plan, self.round, &self.tag, self.message, &[])?;
        let mut pinger = Pinger::new(plan, kind, self.message, self.size);
        let (round, histogram) = measure(
            &plan.args,
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

/// Runs one round of `row` (`size`: bytes per raw message of a sweep or a raw run).
pub(crate) fn run_round(
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
            let (kind, wait) = match row {
                Row::Shm(wait) => (Kind::Shm, Some(wait)),
                Row::Ipc(kind) => (kind, None),
                _ => unreachable!("matched above"),
            };
            // A shm row with a strategy of its own: the plan with that strategy, and names of
            // its own (several shm rows share a round).
            let with_wait;
            let plan = match wait {
                Some(wait) if wait != plan.opts.wait || plan.args.waits().0.len() > 1 => {
                    let mut p = plan.clone();
                    p.opts.wait = wait;
                    p.base = format!("{}-{wait}", plan.base);
                    with_wait = p;
                    &with_wait
                }
                _ => plan,
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
                    tag,
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
        Row::Ring => bail!("the ring row belongs to the streaming run (--stream)"),
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

pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    // Stopped (on drop) when the run ends, however it ends.
    let _load = Load::start(args.load)?;
    if !args.clients.is_empty() {
        return super::clients::run(args);
    }
    if args.count.is_some() && !args.stream {
        bail!("--count needs --stream or --clients");
    }
    if args.stream {
        return super::stream::run(args);
    }
    install_signal_handlers()?;
    let rows = parse_rows(&args.transport, args.sweep, args.message, &args.waits().0)?;
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
        common::parse_sizes(args.sizes()).context("--sizes")?
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
        wait: args.waits().first(),
        ring_size,
        max_message: largest.max(Options::default().max_message),
        tcp_addr: args.tcp_addr.clone(),
        // A peer started by hand gets minutes, a spawned child seconds.
        connect_timeout: Duration::from_secs(if args.no_spawn { 300 } else { 10 }),
    };
    let needs_child = !args.no_spawn && rows.iter().any(|r| matches!(r, Row::Ipc(_) | Row::Shm(_)));
    let plan = Plan::new(rows, sizes, opts, needs_child, args)?;
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
                count: None,
                msgs_per_s: None,
                median_msgs_per_s: None,
                ring_ratio: None,
                clients: None,
                p99_median_client_ns: None,
                p99_worst_client_ns: None,
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
        stream: false,
        sizes: plan.args.sweep.then(|| plan.sizes.clone()),
        ring_size: plan.opts.ring_size,
        duration_s: plan.args.duration().as_secs_f64(),
        warmup_s: plan.args.warmup.as_secs_f64(),
        pace_s: plan.args.pace.as_secs_f64(),
        load: plan.args.load,
        clients: None,
        wait: None,
        ratios: None,
        posixmq: plan
            .rows
            .contains(&Row::Ipc(Kind::PosixMq))
            .then(crate::transport::posixmq::MqLimits::read),
        results,
    };
    report.emit(plan.args.save.as_ref(), plan.args.json, |out, report| {
        if report.sweep {
            print_sweep(out, report)
        } else {
            print_table(out, report)
        }
    })
}
