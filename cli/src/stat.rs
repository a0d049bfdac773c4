//! `shmlink stat NAME`: every counter of a channel, topic or listener, as a table, one JSON
//! document or the Prometheus text format; `--watch` repeats it with rates.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::Serialize;
use shmlink::segments::{self, Counts, RingStats, Stats, SubscriberStats};

/// One side's counts in the JSON document (the fields of `shmlink::segments::Counts`).
#[derive(Serialize)]
pub(crate) struct CountsDoc {
    messages: u64,
    bytes: u64,
    fragments: u64,
    full: u64,
    sleeps: u64,
    wakes: u64,
    high_water: u64,
    last_ns: u64,
    missed: u64,
}

impl From<&Counts> for CountsDoc {
    fn from(c: &Counts) -> CountsDoc {
        CountsDoc {
            messages: c.messages,
            bytes: c.bytes,
            fragments: c.fragments,
            full: c.full,
            sleeps: c.sleeps,
            wakes: c.wakes,
            high_water: c.high_water,
            last_ns: c.last_ns,
            missed: c.missed,
        }
    }
}

#[derive(Serialize)]
struct RingDoc {
    direction: &'static str,
    capacity: u64,
    fill: u64,
    sender: CountsDoc,
    receiver: CountsDoc,
}

#[derive(Serialize)]
struct SubscriberDoc {
    slot: usize,
    state: &'static str,
    pid: u32,
    alive: bool,
    lag: u64,
    counts: CountsDoc,
}

/// The document of `stat --json`.
#[derive(Serialize)]
pub(crate) struct StatDoc {
    name: String,
    kind: &'static str,
    rings: Vec<RingDoc>,
    subscribers: Vec<SubscriberDoc>,
    clients: Vec<String>,
}

pub(crate) fn doc(s: &Stats) -> StatDoc {
    StatDoc {
        name: s.name.clone(),
        kind: s.kind,
        rings: s
            .rings
            .iter()
            .map(|r: &RingStats| RingDoc {
                direction: r.direction,
                capacity: r.capacity,
                fill: r.fill,
                sender: (&r.sender).into(),
                receiver: (&r.receiver).into(),
            })
            .collect(),
        subscribers: s
            .subscribers
            .iter()
            .map(|s: &SubscriberStats| SubscriberDoc {
                slot: s.slot,
                state: s.state,
                pid: s.pid,
                alive: s.alive,
                lag: s.lag,
                counts: (&s.counts).into(),
            })
            .collect(),
        clients: s.clients.clone(),
    }
}

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

/// One counter as a metric: its name, its help and how to read it from a side's counts.
type Metric = (&'static str, &'static str, fn(&Counts) -> u64);

/// The counters, as metrics.
const COUNTERS: [Metric; 7] = [
    ("messages", "Messages through this side of the ring.", |c| {
        c.messages
    }),
    ("bytes", "Payload bytes of those messages.", |c| c.bytes),
    (
        "fragments",
        "Fragments of messages longer than a frame.",
        |c| c.fragments,
    ),
    ("full", "Sends that found the ring full.", |c| c.full),
    ("sleeps", "Blocking waits that slept in the kernel.", |c| {
        c.sleeps
    }),
    ("wakes", "Wake-up calls made to a sleeping peer.", |c| {
        c.wakes
    }),
    ("missed", "Messages a topic subscriber missed.", |c| {
        c.missed
    }),
];

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text format of several channels' stats, each metric's samples together.
pub(crate) fn prometheus(all: &[Stats]) -> String {
    // Every side of every ring and subscriber: its labels and counts.
    let mut sides: Vec<(String, &Counts)> = Vec::new();
    for s in all {
        let base = format!("name=\"{}\",kind=\"{}\"", escape(&s.name), s.kind);
        for r in &s.rings {
            sides.push((
                format!("{base},ring=\"{}\",side=\"sender\"", r.direction),
                &r.sender,
            ));
            if s.kind != "topic" {
                sides.push((
                    format!("{base},ring=\"{}\",side=\"receiver\"", r.direction),
                    &r.receiver,
                ));
            }
        }
        for sub in &s.subscribers {
            sides.push((
                format!(
                    "{base},ring=\"published\",side=\"subscriber\",slot=\"{}\"",
                    sub.slot
                ),
                &sub.counts,
            ));
        }
    }
    let mut out = String::new();
    for (metric, help, get) in COUNTERS {
        let _ = writeln!(out, "# HELP shmlink_{metric}_total {help}");
        let _ = writeln!(out, "# TYPE shmlink_{metric}_total counter");
        for (labels, c) in &sides {
            let _ = writeln!(out, "shmlink_{metric}_total{{{labels}}} {}", get(c));
        }
    }
    let gauge = |out: &mut String, metric: &str, help: &str| {
        let _ = writeln!(out, "# HELP shmlink_{metric} {help}");
        let _ = writeln!(out, "# TYPE shmlink_{metric} gauge");
    };
    gauge(
        &mut out,
        "high_water_bytes",
        "Highest fill of the ring its sender saw.",
    );
    for (labels, c) in sides.iter().filter(|(l, _)| l.contains("side=\"sender\"")) {
        let _ = writeln!(out, "shmlink_high_water_bytes{{{labels}}} {}", c.high_water);
    }
    gauge(
        &mut out,
        "last_message_timestamp_seconds",
        "Time of a recent message.",
    );
    for (labels, c) in sides.iter().filter(|(_, c)| c.last_ns != 0) {
        let _ = writeln!(
            out,
            "shmlink_last_message_timestamp_seconds{{{labels}}} {:.3}",
            c.last_ns as f64 / 1e9
        );
    }
    for (metric, help, get) in [
        (
            "fill_bytes",
            "Bytes in the ring not yet given back by its reader.",
            (|r: &RingStats| r.fill) as fn(&RingStats) -> u64,
        ),
        ("capacity_bytes", "Bytes in the ring.", |r: &RingStats| {
            r.capacity
        }),
    ] {
        gauge(&mut out, metric, help);
        for s in all {
            for r in &s.rings {
                let _ = writeln!(
                    out,
                    "shmlink_{metric}{{name=\"{}\",kind=\"{}\",ring=\"{}\"}} {}",
                    escape(&s.name),
                    s.kind,
                    r.direction,
                    get(r)
                );
            }
        }
    }
    gauge(
        &mut out,
        "subscriber_lag_bytes",
        "Bytes a subscriber is behind its publisher.",
    );
    for s in all {
        for sub in &s.subscribers {
            let _ = writeln!(
                out,
                "shmlink_subscriber_lag_bytes{{name=\"{}\",slot=\"{}\"}} {}",
                escape(&s.name),
                sub.slot,
                sub.lag
            );
        }
    }
    out
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
            Format::Json => println!("{}", serde_json::to_string_pretty(&doc(&s))?),
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
            Format::Json => println!("{}", serde_json::to_string(&doc(&s))?),
            Format::Prometheus => print!("{}", prometheus(std::slice::from_ref(&s))),
            Format::Text => print!("{}", table(&s, before.as_ref().map(|(b, _)| b), secs)),
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        before = Some((s, now));
        std::thread::sleep(every);
    }
}
