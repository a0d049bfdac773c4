//! The tables of a bridge document (`mode: bridge`, written by `ipc-parent bridge`).

use crate::parent::document::*;
use crate::parent::tables::*;

/// The contender every other row of a bridge run is compared with.
pub(crate) const BRIDGED: &str = "shmlink via two bridges";

/// The bridge benchmark: a table per workload (the bridged row against zenoh alone and TCP)
/// and the targets.
pub(crate) fn bridge(b: &BridgeBench) -> String {
    let mut out = format!(
        "zenoh {} over TCP on 127.0.0.1; each bridge in a mount namespace of its own; {} s per \
         row and round, every process started afresh for each.\n\n",
        b.zenoh, b.duration_s
    );
    out.push_str(&super::python::workload_tables(&b.workloads, BRIDGED));
    out.push_str(&targets(b));
    out
}

/// The targets, each met or missed by the medians (bests beside them): the bridged round trip
/// at most 1.3x zenoh's own (its rate at least 1/1.3 of zenoh's), the bridged stream at least
/// 0.8x zenoh's own put throughput.
fn targets(b: &BridgeBench) -> String {
    let find = |w: &str, c: &str| {
        b.workloads
            .iter()
            .find(|x| x.name == w)
            .and_then(|x| x.results.iter().find(|r| r.contender == c))
    };
    let vs = |w: &str| {
        let ours = find(w, BRIDGED)?;
        let theirs = find(w, "zenoh")?;
        Some((
            ratio(ours.median, theirs.median)?,
            ratio(ours.best, theirs.best)?,
        ))
    };
    let mut t = Table::new(&["target", ">median", ">best", "met (median)"]);
    let goals = [
        (
            "round-trip-64",
            "round trip 64 B: rate ≥ 1/1.3 of zenoh's (≤ 30% added)",
            1.0 / 1.3,
        ),
        (
            "stream-64",
            "stream 64 B: ≥ 0.8x zenoh's put throughput",
            0.8,
        ),
        (
            "stream-4k",
            "stream 4 KiB: ≥ 0.8x zenoh's put throughput",
            0.8,
        ),
    ];
    for (w, what, goal) in goals {
        if let Some((m, best)) = vs(w) {
            t.row(vec![
                what.to_owned(),
                format!("{m:.2}x"),
                format!("{best:.2}x"),
                if m >= goal { "yes" } else { "no" }.to_owned(),
            ]);
        }
    }
    if t.is_empty() {
        return String::new();
    }
    format!("Targets (the bridged rate ÷ zenoh's):\n\n{}\n", t.render())
}
