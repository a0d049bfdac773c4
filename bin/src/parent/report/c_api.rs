//! The tables of a C API document (`mode: c-api`, written by `ipc-parent c-api`).

use crate::parent::document::*;
use crate::parent::tables::*;

/// The contender every other row of a C API run is compared with.
pub(crate) const C: &str = "C (libshmlink)";
/// The same workload in Rust.
pub(crate) const RUST: &str = "Rust (shmlink)";
/// Seed 003's pipe, in C.
pub(crate) const PIPE: &str = "pipe (C)";

/// The C API benchmark: a table per workload and the targets.
pub(crate) fn c_api(c: &CApiBench) -> String {
    let mut out = format!(
        "C compiled by {} (-O2) against libshmlink.a; {} s per row and round, every process \
         started afresh for each.\n\n",
        c.compiler, c.duration_s
    );
    out.push_str(&super::python::workload_tables(&c.workloads, C));
    out.push_str(&targets(c));
    out
}

/// The targets, each met or missed by the medians (bests beside them).
fn targets(c: &CApiBench) -> String {
    let find = |w: &str, who: &str| {
        c.workloads
            .iter()
            .find(|x| x.name == w)
            .and_then(|x| x.results.iter().find(|r| r.contender == who))
    };
    let vs = |w: &str, them: &str| {
        let ours = find(w, C)?;
        let theirs = find(w, them)?;
        Some((
            ratio(ours.median, theirs.median)?,
            ratio(ours.best, theirs.best)?,
        ))
    };
    let mut t = Table::new(&["target", ">median", ">best", "met (median)"]);
    let goals = [
        ("stream-128", RUST, "stream 128 B: C ≥ 0.9x Rust", 0.9),
        ("stream-4k", RUST, "stream 4 KiB: C ≥ 0.9x Rust", 0.9),
        ("stream-128", PIPE, "stream 128 B: C ≥ 5x a pipe", 5.0),
        (
            "ping-pong-64",
            RUST,
            "ping-pong 64 B: C's rate ≥ 1/1.1 of Rust's",
            1.0 / 1.1,
        ),
    ];
    for (w, them, what, goal) in goals {
        if let Some((m, best)) = vs(w, them) {
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
    format!("Targets (C's rate ÷ the other's):\n\n{}\n", t.render())
}
