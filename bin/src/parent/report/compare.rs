//! `compare`: a debug and a release result side by side.

use std::io::Write;
use std::path::Path;

use crate::parent::document::{Document, Results};
use crate::workload::size_label;

/// One row of a document at one size (or client count): its headline figure and p50.
struct Line {
    label: String,
    at: String,
    best: f64,
    p50_ns: Option<u64>,
}

/// The headline figure of every result, and its unit: messages/s for a stream, round trips
/// per second otherwise.
fn lines(doc: &Document) -> (&'static str, Vec<Line>) {
    match &doc.results {
        Results::PingPong(p) => (
            "rt/s",
            p.results
                .iter()
                .map(|r| Line {
                    label: r.row.label(),
                    at: p.size.map_or("-".to_owned(), size_label),
                    best: r.figures.best_rt_per_s,
                    p50_ns: Some(r.figures.latency_ns.p50),
                })
                .collect(),
        ),
        Results::Sweep(s) => (
            "rt/s",
            s.results
                .iter()
                .map(|r| Line {
                    label: r.row.label(),
                    at: size_label(r.size),
                    best: r.figures.best_rt_per_s,
                    p50_ns: Some(r.figures.latency_ns.p50),
                })
                .collect(),
        ),
        Results::Stream(s) => (
            "msg/s",
            s.results
                .iter()
                .map(|r| Line {
                    label: r.row.label(),
                    at: size_label(r.size),
                    best: r.msgs_per_s,
                    p50_ns: None,
                })
                .collect(),
        ),
        Results::Python(p) => (
            "/s",
            p.workloads
                .iter()
                .flat_map(|w| {
                    w.results.iter().map(|r| Line {
                        label: r.contender.clone(),
                        at: w.name.clone(),
                        best: r.best,
                        p50_ns: None,
                    })
                })
                .collect(),
        ),
        Results::Clients(c) => (
            "rt/s",
            c.results
                .iter()
                .map(|r| Line {
                    label: r.row.clone(),
                    at: format!("x{}", r.clients),
                    best: r.best_rt_per_s,
                    p50_ns: Some(r.latency_ns.p50),
                })
                .collect(),
        ),
    }
}

pub(crate) fn compare(debug: &Path, release: &Path) -> anyhow::Result<()> {
    let debug = Document::read(debug)?;
    let release = Document::read(release)?;
    let mut out = std::io::stdout().lock();
    let m = &release.run.machine;
    writeln!(out, "machine: {} ({} CPUs), {}", m.cpu, m.cores, m.kernel)?;
    let (unit, release_lines) = lines(&release);
    let (_, debug_lines) = lines(&debug);
    writeln!(
        out,
        "{:<22} {:>8} {:>16} {:>16} {:>15} {:>14} {:>14}",
        "transport",
        "size",
        format!("debug best {unit}"),
        format!("release best {unit}"),
        "release/debug",
        "debug p50 ns",
        "release p50 ns"
    )?;
    let p50 = |x: Option<u64>| x.map_or("-".to_owned(), |x| x.to_string());
    for r in &release_lines {
        let d = debug_lines
            .iter()
            .find(|d| d.label == r.label && d.at == r.at);
        let ratio = d.filter(|d| d.best > 0.0).map(|d| r.best / d.best);
        writeln!(
            out,
            "{:<22} {:>8} {:>16} {:>17.1} {:>15} {:>14} {:>14}",
            r.label,
            r.at,
            d.map_or("-".to_owned(), |d| format!("{:.1}", d.best)),
            r.best,
            ratio.map_or("-".to_owned(), |x| format!("{x:.2}x")),
            d.map_or("-".to_owned(), |d| p50(d.p50_ns)),
            p50(r.p50_ns),
        )?;
    }
    Ok(())
}
