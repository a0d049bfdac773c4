//! The tables and ratios of a ping-pong document.

use crate::parent::document::*;
use crate::parent::tables::*;
use crate::workload::size_label;

pub(crate) fn tables(p: &PingPong) -> String {
    let rounds = p.results.first().map_or(0, |r| r.figures.rounds.len());
    let mut out = format!(
        "{} messages{}; round trips per second, best and median of {rounds} round(s){}; \
         latency over all rounds\n\n",
        p.message,
        p.size
            .map_or(String::new(), |s| format!(" of {}", size_label(s))),
        p.slice_s.map_or(String::new(), |s| format!(
            ", each round in slices of {:.0} ms that the rows took in turns (`--paired`)",
            s * 1e3
        )),
    );
    let raw = p.results.iter().any(|r| r.payload.is_some());
    let mut columns = vec![
        "transport",
        "backend",
        ">best rt/s",
        ">median rt/s",
        ">p50 ns",
        ">p99 ns",
        ">p99.9 ns",
        ">max ns",
        ">% floor",
    ];
    if raw {
        columns.push(">best MB/s");
    }
    let mut t = Table::new(&columns);
    // Transports first, then the limits.
    let ordered = p
        .results
        .iter()
        .filter(|r| !r.row.limit)
        .chain(p.results.iter().filter(|r| r.row.limit));
    for r in ordered {
        let f = &r.figures;
        let mut cells = vec![
            r.row.label(),
            r.row.backend.clone().unwrap_or_else(|| "-".to_owned()),
            whole(f.best_rt_per_s),
            whole(f.median_rt_per_s),
            whole(f.latency_ns.p50 as f64),
            whole(f.latency_ns.p99 as f64),
            whole(f.latency_ns.p999 as f64),
            whole(f.latency_ns.max as f64),
            r.pct_of_floor.map_or("-".to_owned(), |x| format!("{x:.1}")),
        ];
        if raw {
            cells.push(
                r.payload
                    .as_ref()
                    .map_or("-".to_owned(), |p| whole(p.mb_per_s)),
            );
        }
        t.row(cells);
    }
    out.push_str(&t.render());
    out.push_str(&limit_notes(p.results.iter().map(|r| &r.row)));
    out.push_str(&mq_line(&p.posixmq));
    out.push_str(&ratios_table(&ping_pong_ratios(&p.results)));
    out
}

fn rates(r: &PingPongResult) -> Vec<f64> {
    r.figures.rounds.iter().map(|x| x.rt_per_s).collect()
}

/// `--paired`: each round's slices.
fn slices(r: &PingPongResult) -> Vec<Vec<f64>> {
    r.figures.rounds.iter().map(|x| x.slices.clone()).collect()
}

/// `a` over `b`, per round and, for a paired run, slice by slice.
fn of(what: String, a: &PingPongResult, b: &PingPongResult) -> Ratio {
    Ratio::of(what, &rates(a), &rates(b)).paired(&slices(a), &slices(b))
}

/// shm against the floor, the reference method (raw-sync), the best kernel transport, and
/// Block against Spin.
fn ping_pong_ratios(results: &[PingPongResult]) -> Vec<Ratio> {
    let find = |name: &str| results.iter().find(|r| r.row.transport == name);
    let shm: Vec<&PingPongResult> = results
        .iter()
        .filter(|r| r.row.transport == "shm")
        .collect();
    let best_kernel = results
        .iter()
        .filter(|r| is_kernel(&r.row.transport))
        .max_by(|a, b| a.figures.best_rt_per_s.total_cmp(&b.figures.best_rt_per_s));
    let mut out = Vec::new();
    for s in &shm {
        let label = s.row.label();
        for other in ["floor", "raw-sync"] {
            if let Some(o) = find(other) {
                out.push(of(format!("{label} / {other}"), s, o));
            }
        }
        if let Some(k) = best_kernel {
            let what = format!("{label} / {} (best kernel transport)", k.row.transport);
            out.push(Ratio {
                target: (s.row.wait.as_deref() == Some("block")).then_some(">= 1"),
                ..of(what, s, k)
            });
        }
    }
    let wait = |w: &str| shm.iter().find(|r| r.row.wait.as_deref() == Some(w));
    if let (Some(block), Some(spin)) = (wait("block"), wait("spin")) {
        out.push(of("shm (block) / shm (spin)".to_owned(), block, spin));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// sweep and stream: rows by size
