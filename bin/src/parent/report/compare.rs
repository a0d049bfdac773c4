//! `compare`: debug and release results side by side.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::parent::document::{BridgeBench, CApiBench, Document, PythonBench, Results};
use crate::parent::tables::short_commit;
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
        Results::Python(PythonBench { workloads, .. })
        | Results::Bridge(BridgeBench { workloads, .. })
        | Results::CApi(CApiBench { workloads, .. }) => (
            "/s",
            workloads
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
        Results::Fanout(f) => (
            "msg/s per subscriber",
            f.results
                .iter()
                .map(|r| Line {
                    label: r.row.clone(),
                    at: format!("x{} {}", r.subscribers, size_label(r.size)),
                    best: r.subscriber_msgs_per_s.best,
                    p50_ns: Some(r.latency_ns.p50),
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

/// `ipc-parent compare`: documents of debug and release builds of the same run (each side one
/// document per round when the rounds were interleaved, as `just compare` runs them), each
/// grouped by the build its document records. Prints every document's commit, date and load,
/// then per row the best over each side's documents and the release / debug ratio.
pub(crate) fn compare(paths: &[PathBuf]) -> anyhow::Result<()> {
    let docs = paths
        .iter()
        .map(|p| Ok((p, Document::read(p)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let side = |profile: &str| -> Vec<&Document> {
        docs.iter()
            .filter(|(_, d)| d.run.profile == profile)
            .map(|(_, d)| d)
            .collect()
    };
    let (debug, release) = (side("debug"), side("release"));
    if debug.is_empty() || release.is_empty() {
        bail!(
            "compare needs documents of both builds: {} debug, {} release among {}",
            debug.len(),
            release.len(),
            paths.len()
        );
    }
    let mut out = std::io::stdout().lock();
    let m = &release[0].run.machine;
    writeln!(out, "machine: {} ({} CPUs), {}", m.cpu, m.cores, m.kernel)?;
    for (path, doc) in &docs {
        writeln!(out, "{}", document_line(path, doc))?;
    }
    let (unit, _) = lines(release[0]);
    let gather = |side: &[&Document]| -> Vec<Line> {
        let mut all: Vec<Line> = Vec::new();
        for doc in side {
            for l in lines(doc).1 {
                match all.iter_mut().find(|a| a.label == l.label && a.at == l.at) {
                    Some(a) => {
                        a.best = a.best.max(l.best);
                        a.p50_ns = match (a.p50_ns, l.p50_ns) {
                            (Some(x), Some(y)) => Some(x.min(y)),
                            (x, y) => x.or(y),
                        };
                    }
                    None => all.push(l),
                }
            }
        }
        all
    };
    let (debug_lines, release_lines) = (gather(&debug), gather(&release));
    writeln!(
        out,
        "\n{:<22} {:>8} {:>16} {:>16} {:>15} {:>14} {:>14}",
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
    writeln!(
        out,
        "\nbest over {} debug and {} release document(s); p50: the lowest of them",
        debug.len(),
        release.len()
    )?;
    Ok(())
}

/// `release results/cmp-release-2.json: commit 0123456789ab, 2025-01-02 03:04:05 UTC, load
/// average 0.21 at the start, steal 0.3%`.
fn document_line(path: &Path, doc: &Document) -> String {
    let run = &doc.run;
    let steal: Vec<f64> = run
        .round_conditions
        .iter()
        .filter_map(|c| c.steal_pct)
        .collect();
    let steal = if steal.is_empty() {
        String::new()
    } else {
        format!(
            ", steal {:.1}%",
            steal.iter().sum::<f64>() / steal.len() as f64
        )
    };
    format!(
        "{} {}: commit {}, {}, load average {:.2} at the start{steal}",
        run.profile,
        path.display(),
        short_commit(&run.commit),
        run.date.replace('T', " ").replace('Z', " UTC"),
        run.load_average
    )
}
