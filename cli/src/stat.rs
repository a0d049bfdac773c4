//! `shmlink stat NAME`: every counter of a channel, topic or listener, as a table, one JSON
//! document (`shmlink::segments::Stats` serialised) or the Prometheus text format
//! (`shmlink::segments::prometheus`); `--watch` repeats it with rates.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use shmlink::segments::{self, prometheus, Counts, Stats};

/// How `stat` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A table for people.
    Text,
    /// One JSON document (`cli/README.md`).
    Json,
    /// The Prometheus text exposition format, for a textfile collector.
    Prometheus,
}

/// Rates of one side between two looks.
fn rate(now: u64, before: Option<u64>, secs: f64) -> String {
    match before {
        Some(b) if secs > 0.0 => format!("{:.0}/s", now.saturating_sub(b) as f64 / secs),
        _ => "-".into(),
    }
}

fn ago(c: &Counts) -> String {
    c.since_last()
        .map_or("never".into(), |d| format!("{:.1}s ago", d.as_secs_f64()))
}

/// The table of one channel's stats, with rates against `before` (`secs` earlier).
pub(crate) fn table(s: &Stats, before: Option<&Stats>, secs: f64) -> String {
    let mut out = format!("{} ({})\n", s.name, s.kind);
    let side = |out: &mut String, who: &str, c: &Counts, b: Option<&Counts>| {
        let _ = writeln!(
            out,
            "  {who:<10} messages {:>12} ({:>10})  bytes {:>14} ({:>12})  fragments {:>8}  full {:>8} ({:>7})  sleeps {:>8} ({:>7})  wakes {:>8}  missed {:>6}  last {}",
            c.messages,
            rate(c.messages, b.map(|b| b.messages), secs),
            c.bytes,
            rate(c.bytes, b.map(|b| b.bytes), secs),
            c.fragments,
            c.full,
            rate(c.full, b.map(|b| b.full), secs),
            c.sleeps,
            rate(c.sleeps, b.map(|b| b.sleeps), secs),
            c.wakes,
            c.missed,
            ago(c),
        );
    };
    for (i, r) in s.rings.iter().enumerate() {
        let b = before.and_then(|b| b.rings.get(i));
        let _ = writeln!(
            out,
            " {}: capacity {} fill {} ({:.1}%) high water {}",
            r.direction,
            r.capacity,
            r.fill,
            100.0 * r.fill as f64 / r.capacity.max(1) as f64,
            r.sender.high_water
        );
        side(&mut out, "sender", &r.sender, b.map(|b| &b.sender));
        if s.kind != "topic" {
            side(&mut out, "receiver", &r.receiver, b.map(|b| &b.receiver));
        }
    }
    for sub in &s.subscribers {
        let b = before.and_then(|b| b.subscribers.iter().find(|x| x.slot == sub.slot));
        let _ = writeln!(
            out,
            " subscriber slot {} ({}, pid {}{}): lag {} bytes",
            sub.slot,
            sub.state,
            sub.pid,
            if sub.alive { "" } else { ", dead" },
            sub.lag
        );
        side(&mut out, "reader", &sub.counts, b.map(|b| &b.counts));
    }
    for c in &s.clients {
        let _ = writeln!(out, " client {c} (shmlink stat {c})");
    }
    out
}

pub(crate) fn stat(
    name: &str,
    format: Format,
    watch: Option<f64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let Some(every) = watch else {
        let s = segments::stats(name)?;
        match format {
            Format::Text => print!("{}", table(&s, None, 0.0)),
            Format::Json => println!("{}", serde_json::to_string_pretty(&s)?),
            Format::Prometheus => print!("{}", prometheus(std::slice::from_ref(&s))),
        }
        return Ok(());
    };
    let every = Duration::try_from_secs_f64(every)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--watch takes a positive number of seconds")?;
    let mut before: Option<(Stats, Instant)> = None;
    loop {
        let s = segments::stats(name)?;
        let now = Instant::now();
        let secs = before
            .as_ref()
            .map_or(0.0, |(_, t)| (now - *t).as_secs_f64());
        match format {
            Format::Json => println!("{}", serde_json::to_string(&s)?),
            Format::Prometheus => print!("{}", prometheus(std::slice::from_ref(&s))),
            Format::Text => print!("{}", table(&s, before.as_ref().map(|(b, _)| b), secs)),
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        before = Some((s, now));
        std::thread::sleep(every);
    }
}
