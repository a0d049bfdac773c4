//! The tables printed on standard output.

use std::io::Write;

use super::report::{row_label, MedianBest, Report, TransportResult};
use crate::workload::size_label;

pub(crate) fn print_table(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<15} {:<6} {:<12} {:>12} {:>14} {:>14} {:>9} {:>9} {:>9} {:>10} {:>8}",
        "transport",
        "wait",
        "backend",
        "round trips",
        "best rt/s",
        "median rt/s",
        "p50 ns",
        "p99 ns",
        "p99.9 ns",
        "max ns",
        "% floor"
    )?;
    // Transports first, then the limits under a rule.
    let (limits, transports): (Vec<&TransportResult>, Vec<&TransportResult>) =
        report.results.iter().partition(|r| r.limit);
    let row = |out: &mut dyn Write, r: &TransportResult| -> std::io::Result<()> {
        let total: u64 = r.rounds.iter().map(|x| x.round_trips).sum();
        writeln!(
            out,
            "{:<15} {:<6} {:<12} {:>12} {:>14.1} {:>14.1} {:>9} {:>9} {:>9} {:>10} {:>8}",
            row_label(r),
            r.wait.as_deref().unwrap_or("-"),
            r.backend.as_deref().unwrap_or("-"),
            total,
            r.best_rt_per_s,
            r.median_rt_per_s,
            r.latency_ns.p50,
            r.latency_ns.p99,
            r.latency_ns.p999,
            r.latency_ns.max,
            r.pct_of_floor.map_or("-".to_owned(), |p| format!("{p:.1}")),
        )
    };
    for r in &transports {
        row(out, r)?;
    }
    if !limits.is_empty() {
        if !transports.is_empty() {
            writeln!(out, "{}", "-".repeat(15))?;
        }
        for r in &limits {
            row(out, r)?;
        }
        writeln!(out)?;
        for r in &limits {
            let note = match r.transport.as_str() {
                "floor" => "floor [limit]: two cache lines bounced between the processes, no framing: the hardware's round trip",
                "serde" => "serde [limit]: the JSON work of one round trip (serialise ping, decode, serialise pong, decode) in one process, no IPC",
                _ => continue,
            };
            writeln!(out, "{note}")?;
        }
    }
    if let Some(mq) = &report.posixmq {
        writeln!(out, "{}", super::stream::mq_line(mq))?;
    }
    Ok(())
}

/// The sweep's table: one line per transport and size, then a matrix of best MB/s.
pub(crate) fn print_sweep(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    let rounds = report.results.first().map_or(0, |r| r.rounds.len());
    writeln!(out)?;
    writeln!(
        out,
        "payload throughput: MB/s with both directions counted (2 x size x round trips / s), \
         best and median of {rounds} round(s); x memcpy: best MB/s over the memcpy row's"
    )?;
    writeln!(
        out,
        "{:<8} {:<16} {:<12} {:>11} {:>12} {:>12} {:>9} {:>11} {:>11}",
        "size",
        "transport",
        "backend",
        "round trips",
        "best MB/s",
        "median MB/s",
        "x memcpy",
        "p50 us",
        "p99 us"
    )?;
    let sizes = report.sizes.clone().unwrap_or_default();
    for (n, &size) in sizes.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        for r in report.results.iter().filter(|r| r.size == Some(size)) {
            let total: u64 = r.rounds.iter().map(|x| x.round_trips).sum();
            writeln!(
                out,
                "{:<8} {:<16} {:<12} {:>11} {:>12.1} {:>12.1} {:>9} {:>11.1} {:>11.1}",
                size_label(size),
                row_label(r),
                r.backend.as_deref().unwrap_or("-"),
                total,
                r.mb_per_s.unwrap_or(0.0),
                r.median_mb_per_s.unwrap_or(0.0),
                r.memcpy_ratio
                    .map_or("-".to_owned(), |x| format!("{x:.2}x")),
                r.latency_ns.p50 as f64 / 1e3,
                r.latency_ns.p99 as f64 / 1e3,
            )?;
        }
    }

    // The same best figures as a matrix, sizes down, transports across (seed 000's layout).
    let mut names: Vec<String> = Vec::new();
    for r in &report.results {
        if !names.contains(&r.transport) {
            names.push(r.transport.clone());
        }
    }
    writeln!(out)?;
    write!(out, "{:<10}", "best MB/s")?;
    for name in &names {
        write!(out, " {name:>12}")?;
    }
    writeln!(out)?;
    for &size in &sizes {
        write!(out, "{:<10}", size_label(size))?;
        for name in &names {
            let cell = report
                .results
                .iter()
                .find(|r| &r.transport == name && r.size == Some(size))
                .and_then(|r| r.mb_per_s)
                .map_or("-".to_owned(), |mb| format!("{mb:.0}"));
            write!(out, " {cell:>12}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The streaming table: one line per transport and size, then the best messages/s and MB/s as
/// matrices, transports down and sizes across.
pub(crate) fn print_stream(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    let rounds = report.results.first().map_or(0, |r| r.rounds.len());
    writeln!(out)?;
    writeln!(
        out,
        "one-way stream: messages/s and MB/s (size x messages / s) until the receiver confirmed \
         them all, best and median of {rounds} round(s); x ring / x memcpy: best over the limit \
         row's at the same size"
    )?;
    writeln!(
        out,
        "{:<8} {:<17} {:<12} {:>11} {:>13} {:>13} {:>10} {:>10} {:>8} {:>9}",
        "size",
        "transport",
        "backend",
        "messages",
        "best msg/s",
        "median msg/s",
        "best MB/s",
        "median MB/s",
        "x ring",
        "x memcpy"
    )?;
    let sizes = report.sizes.clone().unwrap_or_default();
    let ratio = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.2}x"));
    for (n, &size) in sizes.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        for r in report.results.iter().filter(|r| r.size == Some(size)) {
            writeln!(
                out,
                "{:<8} {:<17} {:<12} {:>11} {:>13.0} {:>13.0} {:>10.1} {:>10.1} {:>8} {:>9}",
                size_label(size),
                row_label(r),
                r.backend.as_deref().unwrap_or("-"),
                r.count.map_or("-".to_owned(), |c| c.to_string()),
                r.msgs_per_s.unwrap_or(0.0),
                r.median_msgs_per_s.unwrap_or(0.0),
                r.mb_per_s.unwrap_or(0.0),
                r.median_mb_per_s.unwrap_or(0.0),
                ratio(r.ring_ratio),
                ratio(r.memcpy_ratio),
            )?;
        }
    }
    let mut names: Vec<&TransportResult> = Vec::new();
    for r in &report.results {
        if !names.iter().any(|n| n.transport == r.transport) {
            names.push(r);
        }
    }
    let matrix = |out: &mut dyn Write,
                  title: &str,
                  value: &dyn Fn(&TransportResult) -> Option<f64>|
     -> std::io::Result<()> {
        writeln!(out)?;
        write!(out, "{title:<17}")?;
        for &size in &sizes {
            write!(out, " {:>11}", size_label(size))?;
        }
        writeln!(out)?;
        for first in &names {
            write!(out, "{:<17}", row_label(first))?;
            for &size in &sizes {
                let cell = report
                    .results
                    .iter()
                    .find(|r| r.transport == first.transport && r.size == Some(size))
                    .and_then(value)
                    .map_or("-".to_owned(), |v| format!("{v:.0}"));
                write!(out, " {cell:>11}")?;
            }
            writeln!(out)?;
        }
        Ok(())
    };
    matrix(out, "best msg/s", &|r| r.msgs_per_s)?;
    matrix(out, "best MB/s", &|r| r.mb_per_s)?;
    writeln!(out)?;
    writeln!(
        out,
        "ring [limit]: the same shmlink ring (shmlink::ring::new, same capacity) between two \
         threads of this process, checked as the child checks"
    )?;
    writeln!(
        out,
        "memcpy [limit]: each message copied once into a ring-sized buffer, no check"
    )?;
    if let Some(mq) = &report.posixmq {
        writeln!(out, "{}", super::stream::mq_line(mq))?;
    }
    Ok(())
}

/// The clients table: one line per client count and row, then the ratios of the targets.
pub(crate) fn print_clients(out: &mut impl Write, report: &Report) -> anyhow::Result<()> {
    let rounds = report.results.first().map_or(0, |r| r.rounds.len());
    writeln!(out)?;
    writeln!(
        out,
        "N clients against one server: round trips per second of all clients together (median \
         and best of {rounds} round(s)); client p99: the median of the clients' p99s and the \
         worst client's p99, each the median (and the best) over the rounds, in us"
    )?;
    writeln!(
        out,
        "{:>7}  {:<18} {:>11} {:>13} {:>13} {:>17} {:>16}",
        "clients",
        "row",
        "round trips",
        "median rt/s",
        "best rt/s",
        "p99 median (best)",
        "p99 worst (best)",
    )?;
    let us = |x: Option<MedianBest>| {
        x.map_or("-".to_owned(), |x| {
            format!("{:.1} ({:.1})", x.median as f64 / 1e3, x.best as f64 / 1e3)
        })
    };
    let mut last = None;
    for r in &report.results {
        if last.is_some() && last != r.clients {
            writeln!(out)?;
        }
        last = r.clients;
        let total: u64 = r.rounds.iter().map(|x| x.round_trips).sum();
        writeln!(
            out,
            "{:>7}  {:<18} {:>11} {:>13.0} {:>13.0} {:>17} {:>16}",
            r.clients.map_or("-".to_owned(), |n| n.to_string()),
            r.transport,
            total,
            r.median_rt_per_s,
            r.best_rt_per_s,
            us(r.p99_median_client_ns),
            us(r.p99_worst_client_ns),
        )?;
    }
    let ratios = report.ratios.as_deref().unwrap_or_default();
    if !ratios.is_empty() {
        writeln!(out)?;
        writeln!(out, "ratios (median of the per-round ratios):")?;
        for r in ratios {
            writeln!(
                out,
                "  {:>3} clients: {:<44} {:>7.2}{}",
                r.clients,
                r.what,
                r.median,
                r.target
                    .as_deref()
                    .map_or(String::new(), |t| format!("   (target {t})")),
            )?;
        }
    }
    Ok(())
}
