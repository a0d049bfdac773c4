//! The tables and ratios of a clients document.

use crate::parent::document::*;
use crate::parent::tables::*;
use crate::workload::size_label;

pub(crate) fn tables(c: &Clients) -> String {
    let rounds = c.results.first().map_or(0, |r| r.rounds.len());
    let timed = match c.count {
        Some(n) => format!("{n} timed round trips per client"),
        None => format!("{} s of timed round trips per client", c.duration_s),
    };
    let mut out = format!(
        "N clients against one server, raw messages of {}, {timed}, shm clients wait {}, ring {} \
         per direction: round trips per second of all clients together, median and best of \
         {rounds} round(s); client p99: the median of the clients' p99s and the worst client's \
         p99, each the median (and the best) over the rounds, in us\n\n",
        size_label(c.size),
        c.wait,
        size_label(c.ring_size)
    );
    let mut t = Table::new(&[
        ">clients",
        "row",
        ">round trips",
        ">median rt/s",
        ">best rt/s",
        ">p99 median (best)",
        ">p99 worst (best)",
    ]);
    for r in &c.results {
        let total: u64 = r.rounds.iter().map(|x| x.total.round_trips).sum();
        let mb =
            |x: &crate::parent::document::MedianBest| format!("{} ({})", us(x.median), us(x.best));
        t.row(vec![
            r.clients.to_string(),
            r.row.clone(),
            whole(total as f64),
            whole(r.median_rt_per_s),
            whole(r.best_rt_per_s),
            mb(&r.p99_median_client_ns),
            mb(&r.p99_worst_client_ns),
        ]);
    }
    out.push_str(&t.render());
    out.push_str("\nThe plain row runs with one client only.\n");
    out.push_str(&ratios_table(&clients_ratios(c)));
    out
}

/// A ratio of two clients rows the benchmark states a target in.
struct ClientsPair {
    a: &'static str,
    b: &'static str,
    /// The ratio of round-trip times (b's rate over a's) rather than of rates.
    time: bool,
    /// The target, and the client count it is stated for (none: every count).
    target: Option<(&'static str, Option<usize>)>,
}

const CLIENTS_PAIRS: [ClientsPair; 5] = [
    ClientsPair {
        a: "shm selector",
        b: "shm plain",
        time: false,
        target: Some((">= 0.9", None)),
    },
    ClientsPair {
        a: "shm async",
        b: "shm plain",
        time: true,
        target: Some(("<= 1.5", None)),
    },
    ClientsPair {
        a: "shm selector",
        b: "uds poll",
        time: false,
        target: Some((">= 3", Some(4))),
    },
    ClientsPair {
        a: "shm threads",
        b: "uds threads",
        time: false,
        target: None,
    },
    ClientsPair {
        a: "shm selector",
        b: "ipc-channel select",
        time: false,
        target: None,
    },
];

/// The ratios the targets of the clients benchmark are stated in.
fn clients_ratios(c: &Clients) -> Vec<Ratio> {
    let rates =
        |r: &ClientsResult| -> Vec<f64> { r.rounds.iter().map(|x| x.total.rt_per_s).collect() };
    let mut out = Vec::new();
    for &n in &c.counts {
        let find = |row: &str| c.results.iter().find(|r| r.row == row && r.clients == n);
        for pair in &CLIENTS_PAIRS {
            let (Some(x), Some(y)) = (find(pair.a), find(pair.b)) else {
                continue;
            };
            let what = format!(
                "{} / {}, {}, {n} client{}",
                pair.a,
                pair.b,
                if pair.time { "round-trip time" } else { "rt/s" },
                if n == 1 { "" } else { "s" }
            );
            let r = if pair.time {
                Ratio::of(what, &rates(y), &rates(x))
            } else {
                Ratio::of(what, &rates(x), &rates(y))
            };
            out.push(Ratio {
                target: pair
                    .target
                    .filter(|(_, at)| at.is_none_or(|at| at == n))
                    .map(|(t, _)| t),
                ..r
            });
        }
    }
    out
}
