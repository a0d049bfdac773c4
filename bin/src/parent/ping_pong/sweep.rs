//! `sweep`: a ping-pong of raw messages at several sizes over every transport that serves it,
//! in MB/s beside a memcpy row; and its document's tables.

use super::*;
use crate::parent::tables::*;

/// `ipc-parent sweep`.
pub(crate) fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let rows = parse_rows(&args.transport, true, MessageKind::Raw, &args.wait.0)?;
    let sizes = common::parse_sizes(&args.sizes).context("--sizes")?;
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let session = Session::start(args.common.clone(), needs_child(&rows))?;
    let ring_size = args.common.ring_size.unwrap_or(sized_ring(largest));
    let plan = Plan::new(
        &session,
        options(args.wait.first(), ring_size, largest, &args.tcp_addr),
        Timing {
            warmup: args.common.warmup,
            duration: args.duration,
            pace: Duration::ZERO,
        },
    );
    session.say(&format!(
        "payload sweep, raw messages of {} echoed back; ring {} per direction",
        sizes
            .iter()
            .map(|&s| size_label(s))
            .collect::<Vec<_>>()
            .join(", "),
        size_label(ring_size)
    ));
    let sized: Vec<Option<usize>> = sizes.iter().map(|&s| Some(s)).collect();
    let cells = run_cells(&plan, &rows, &sized, MessageKind::Raw, true, None)?;

    let memcpy = |size| {
        cells
            .iter()
            .find(|c| c.row == Row::Memcpy && c.size == Some(size))
            .map(|c| mb_per_s(c.figures().best_rt_per_s, size))
    };
    let results = cells
        .iter()
        .map(|c| {
            let figures = c.figures();
            let size = c.size.unwrap_or(0);
            let mb = mb_per_s(figures.best_rt_per_s, size);
            SweepResult {
                row: c.id(),
                size,
                mb_per_s: mb,
                median_mb_per_s: mb_per_s(figures.median_rt_per_s, size),
                memcpy_ratio: memcpy(size).and_then(|m| ratio(mb, m)),
                figures,
            }
        })
        .collect();
    let results = Results::Sweep(Sweep {
        sizes,
        duration_s: args.duration.as_secs_f64(),
        ring_size,
        posixmq: rows.contains(&Row::Ipc(Kind::PosixMq)).then(MqLimits::read),
        results,
    });
    session.finish(results)
}

pub(crate) fn tables(s: &Sweep) -> String {
    let rounds = s.results.first().map_or(0, |r| r.figures.rounds.len());
    let mut out = format!(
        "payload throughput, ring {} per direction: MB/s with both directions counted (2 x size \
         x round trips / s), best and median of {rounds} round(s); x memcpy: best MB/s over the \
         memcpy row's\n\n",
        size_label(s.ring_size)
    );
    let t = by_size(
        &[
            ">best MB/s",
            ">median MB/s",
            ">x memcpy",
            ">p50 us",
            ">p99 us",
        ],
        &s.sizes,
        &s.results,
        |r| (r.size, &r.row),
        |r| {
            vec![
                whole(r.mb_per_s),
                whole(r.median_mb_per_s),
                times(r.memcpy_ratio),
                us(r.figures.latency_ns.p50),
                us(r.figures.latency_ns.p99),
            ]
        },
    );
    out.push_str(&t.render());
    let find = |label: &str, size: usize| {
        s.results
            .iter()
            .find(|r| r.size == size && r.row.label() == label)
    };
    out.push_str(&matrix(
        "best MB/s",
        &labels(s.results.iter().map(|r| &r.row)),
        &s.sizes,
        |label, size| find(label, size).map(|r| r.mb_per_s),
    ));
    out.push_str(&limit_notes(s.results.iter().map(|r| &r.row)));
    out.push_str(&mq_line(&s.posixmq));
    let mut ratios = Vec::new();
    for &size in &s.sizes {
        let at: Vec<&SweepResult> = s.results.iter().filter(|r| r.size == size).collect();
        // At one size, MB/s and round trips per second are in the same proportion.
        let mb =
            |r: &SweepResult| -> Vec<f64> { r.figures.rounds.iter().map(|x| x.rt_per_s).collect() };
        let best_kernel = at
            .iter()
            .filter(|r| is_kernel(&r.row.transport))
            .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
        for shm in at.iter().filter(|r| r.row.transport == "shm") {
            for other in at.iter().filter(|r| r.row.transport == "memcpy") {
                ratios.push(Ratio::of(
                    format!("{} / memcpy at {}", shm.row.label(), size_label(size)),
                    &mb(shm),
                    &mb(other),
                ));
            }
            if let Some(k) = best_kernel {
                ratios.push(Ratio::of(
                    format!(
                        "{} / {} (best kernel transport) at {}",
                        shm.row.label(),
                        k.row.transport,
                        size_label(size)
                    ),
                    &mb(shm),
                    &mb(k),
                ));
            }
        }
    }
    out.push_str(&ratios_table(&ratios));
    out
}
