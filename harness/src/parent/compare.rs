//! `compare`: a debug and a release result side by side.

use std::io::Write;
use std::path::Path;

use super::report::{read_report, row_label, TransportResult};
use crate::workload::size_label;

pub(crate) fn compare(debug: &Path, release: &Path) -> anyhow::Result<()> {
    let debug = read_report(debug)?;
    let release = read_report(release)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "machine: {} ({} cores), {}",
        release.machine.cpu, release.machine.cores, release.machine.kernel
    )?;
    // A stream compares messages per second; a ping-pong run or a sweep, round trips.
    let stream = release.stream;
    let rate = |r: &TransportResult| {
        if stream {
            r.msgs_per_s.unwrap_or(0.0)
        } else {
            r.best_rt_per_s
        }
    };
    let unit = if stream { "msg/s" } else { "rt/s" };
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
    for r in &release.results {
        let d = debug
            .results
            .iter()
            .find(|d| d.transport == r.transport && d.size == r.size && d.clients == r.clients);
        let ratio = d.filter(|d| rate(d) > 0.0).map(|d| rate(r) / rate(d));
        writeln!(
            out,
            "{:<22} {:>8} {:>16} {:>17.1} {:>15} {:>14} {:>14}",
            row_label(r),
            r.size.map_or("-".to_owned(), size_label),
            d.map_or("-".to_owned(), |d| format!("{:.1}", rate(d))),
            rate(r),
            ratio.map_or("-".to_owned(), |x| format!("{x:.2}x")),
            d.map_or("-".to_owned(), |d| d.latency_ns.p50.to_string()),
            r.latency_ns.p50,
        )?;
    }
    Ok(())
}
