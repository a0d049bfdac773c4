//! The tables of a Python benchmark document (`mode: python`).

use std::fmt::Write as _;

use crate::parent::document::*;
use crate::parent::tables::*;

/// The Python benchmark: a table per workload (shmlink's first row against each contender,
/// as the ratio of medians and of bests), the codec measurement and the targets.
pub(crate) fn python(p: &PythonBench) -> String {
    let mut out = format!(
        "Python {}, JSON through {}; {} s per row and round, each row's peer a fresh process.\n\n",
        p.python, p.json_codec, p.duration_s
    );
    out.push_str(&workload_tables(&p.workloads, "shmlink"));
    if !p.codec_round_trips_per_s.is_empty() {
        let codecs: Vec<String> = p
            .codec_round_trips_per_s
            .iter()
            .map(|(name, rate)| format!("{name} {}", whole(*rate)))
            .collect();
        let _ = writeln!(
            out,
            "JSON codec, encode + decode of the message per second in one process: {}.\n",
            codecs.join(", ")
        );
    }
    out.push_str(&python_targets(p));
    out
}

/// A table per workload: each contender's median, best and rounds, and `ours` (the contender of
/// that name) against each other one, as the ratio of medians and of bests.
pub(crate) fn workload_tables(workloads: &[ContenderWorkload], ours: &str) -> String {
    let mut out = String::new();
    for w in workloads {
        let _ = writeln!(out, "**{}** ({}):\n", w.title, w.unit);
        let mine = w.results.iter().find(|r| r.contender == ours);
        let head = format!(">{ours} ÷ it (median / best)");
        let mut t = Table::new(&["contender", ">median", ">best", &head, ">rounds"]);
        for r in &w.results {
            let vs = match mine {
                Some(o) if r.contender != ours => format!(
                    "{} / {}",
                    times(ratio(o.median, r.median)),
                    times(ratio(o.best, r.best))
                ),
                _ => String::new(),
            };
            let rounds: Vec<String> = r.rounds.iter().map(|&v| whole(v)).collect();
            t.row(vec![
                r.contender.clone(),
                whole(r.median),
                whole(r.best),
                vs,
                rounds.join(" "),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    out
}

/// The targets, each met or missed by the medians (bests in brackets).
fn python_targets(p: &PythonBench) -> String {
    let find = |w: &str, c: &str| {
        p.workloads
            .iter()
            .find(|x| x.name == w)
            .and_then(|x| x.results.iter().find(|r| r.contender.starts_with(c)))
    };
    let mut t = Table::new(&["target", ">median", ">best", "met (median)"]);
    let mut at_least = |what: String, r: Option<(f64, f64)>, goal: f64| {
        if let Some((m, b)) = r {
            t.row(vec![
                what,
                format!("{m:.2}x"),
                format!("{b:.2}x"),
                if m >= goal { "yes" } else { "no" }.to_owned(),
            ]);
        }
    };
    let vs = |w: &str, c: &str| {
        let ours = find(w, "shmlink")?;
        let theirs = find(w, c)?;
        Some((
            ratio(ours.median, theirs.median)?,
            ratio(ours.best, theirs.best)?,
        ))
    };
    for (w, label) in [("json", "JSON ping-pong"), ("raw-64", "raw 64 B")] {
        for (c, goal) in [
            ("multiprocessing.Pipe", 5.0),
            ("pyzmq", 2.0),
            ("iceoryx2", 1.0),
        ] {
            at_least(format!("{label}: ≥ {goal}x {c}"), vs(w, c), goal);
        }
    }
    for (c, goal) in [("faster-fifo", 3.0), ("iceoryx2", 1.0)] {
        at_least(
            format!("stream 128 B: ≥ {goal}x {c}"),
            vs("stream-128", c),
            goal,
        );
    }
    // The Rust server's JSON round trip within 1.5x of Python <-> Python: its rate at least
    // two thirds of theirs.
    let rust = find("json", "shmlink, Python client").zip(find("json", "shmlink"));
    at_least(
        "JSON: Python client of a Rust server ≥ 1/1.5 of Python <-> Python".to_owned(),
        rust.and_then(|(r, o)| Some((ratio(r.median, o.median)?, ratio(r.best, o.best)?))),
        1.0 / 1.5,
    );
    if t.is_empty() {
        return String::new();
    }
    format!(
        "Targets (shmlink's rate ÷ the other's):\n\n{}\n",
        t.render()
    )
}
