//! The JSON document of a run (its schema), the machine it ran on, and the figures derived
//! from rounds.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Machine {
    pub(crate) cpu: String,
    pub(crate) cores: usize,
    pub(crate) kernel: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RoundResult {
    /// Round trips of a ping-pong round (0 in a stream round).
    pub(crate) round_trips: u64,
    pub(crate) seconds: f64,
    pub(crate) rt_per_s: f64,
    /// Messages a stream round moved one way, confirmed by the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) messages: Option<u64>,
    /// Messages per second of a stream round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) msgs_per_s: Option<f64>,
    /// A clients round: the median of the clients' p99 latencies, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) p99_median_client_ns: Option<u64>,
    /// A clients round: the worst client's p99 latency, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) p99_worst_client_ns: Option<u64>,
}

/// A figure over the rounds of a row: the median round's and the best round's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct MedianBest {
    pub(crate) median: u64,
    pub(crate) best: u64,
}

/// A ratio between two rows of a clients run, the median of the per-round ratios (every round
/// runs both rows, one after the other).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ClientsRatio {
    pub(crate) clients: usize,
    /// What is divided by what, e.g. "shm selector / shm plain rt/s".
    pub(crate) what: String,
    pub(crate) median: f64,
    /// The target for the ratio, when there is one (e.g. ">= 0.9").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) target: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Latency {
    pub(crate) p50: u64,
    pub(crate) p99: u64,
    pub(crate) p999: u64,
    pub(crate) max: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TransportResult {
    pub(crate) transport: String,
    pub(crate) wait: Option<String>,
    /// The backend that actually ran (differs from `transport` when shm fell back; null for
    /// the limit rows measured in one process).
    #[serde(default)]
    pub(crate) backend: Option<String>,
    /// A limit row (`floor`, `serde`, `memcpy`, `ring`): what the transports are measured
    /// against.
    #[serde(default)]
    pub(crate) limit: bool,
    /// Bytes per message (raw messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<usize>,
    pub(crate) rounds: Vec<RoundResult>,
    pub(crate) best_rt_per_s: f64,
    pub(crate) median_rt_per_s: f64,
    pub(crate) latency_ns: Latency,
    pub(crate) pct_of_floor: Option<f64>,
    /// Payload megabytes per second at the best round (raw messages, both directions; one way
    /// in a stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mb_per_s: Option<f64>,
    /// Payload megabytes per second at the median round (raw messages, both directions; one
    /// way in a stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) median_mb_per_s: Option<f64>,
    /// Best MB/s as a fraction of the memcpy row's at the same size (sweeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) memcpy_ratio: Option<f64>,
    /// Messages per round of a stream row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) count: Option<u64>,
    /// Messages per second at the best round of a stream row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) msgs_per_s: Option<f64>,
    /// Messages per second at the median round of a stream row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) median_msgs_per_s: Option<f64>,
    /// Best messages per second as a fraction of the ring row's at the same size (streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ring_ratio: Option<f64>,
    /// Client processes of a clients row. Its rounds count the round trips of all clients
    /// together over the span from the first client's start to the last one's end; its
    /// `latency_ns` gives the median over all clients of all rounds of each client's p50, p99
    /// and p99.9, and the slowest round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clients: Option<usize>,
    /// A clients row: the median of the clients' p99s, median and best (lowest) over the
    /// rounds, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) p99_median_client_ns: Option<MedianBest>,
    /// A clients row: the worst client's p99, median and best (lowest) over the rounds, in
    /// nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) p99_worst_client_ns: Option<MedianBest>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Report {
    pub(crate) machine: Machine,
    pub(crate) profile: String,
    pub(crate) message: String,
    pub(crate) size: Option<usize>,
    /// A payload sweep: one result per transport and size.
    #[serde(default)]
    pub(crate) sweep: bool,
    /// One-way streaming: one result per transport and size, in messages/s and MB/s (the
    /// ping-pong fields of its results are zero).
    #[serde(default)]
    pub(crate) stream: bool,
    /// The message sizes of a sweep or a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sizes: Option<Vec<usize>>,
    /// The POSIX message queue limits of this machine and the queue attributes the posixmq
    /// transport used (when it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) posixmq: Option<crate::transport::posixmq::MqLimits>,
    /// Bytes per direction (shm ring, socket and pipe buffers).
    #[serde(default)]
    pub(crate) ring_size: usize,
    #[serde(default)]
    pub(crate) duration_s: f64,
    #[serde(default)]
    pub(crate) warmup_s: f64,
    /// `--pace`: the pause between two round trips, in seconds (0: back to back).
    #[serde(default)]
    pub(crate) pace_s: f64,
    /// `--load`: busy background processes during the run.
    #[serde(default)]
    pub(crate) load: usize,
    /// `--clients`: the client counts of a clients run (one result per row and count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clients: Option<Vec<usize>>,
    /// `--wait` of a clients run: how the shm clients wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wait: Option<String>,
    /// The ratios a clients run prints under its table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ratios: Option<Vec<ClientsRatio>>,
    pub(crate) results: Vec<TransportResult>,
}

pub(crate) fn machine() -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| {
                    l.starts_with("model name")
                        || l.starts_with("Model")
                        || l.starts_with("Hardware")
                })
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    Machine {
        cpu,
        cores,
        kernel: kernel(),
    }
}

pub(crate) fn kernel() -> String {
    // SAFETY: an all-zero utsname is valid; uname fills it with NUL-terminated strings.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return std::env::consts::OS.to_owned();
    }
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {}", field(&uts.sysname), field(&uts.release))
}

pub(crate) fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

pub(crate) fn read_report(path: &Path) -> anyhow::Result<Report> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{path:?} is not an ipc-parent --json result"))
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Payload megabytes per second, both directions counted: 2 x size x round trips / s.
pub(crate) fn mb_per_s(rt_per_s: f64, size: usize) -> f64 {
    rt_per_s * 2.0 * size as f64 / 1e6
}

/// The name a table shows for a result: limit rows say so.
pub(crate) fn row_label(r: &TransportResult) -> String {
    if r.limit {
        format!("{} [limit]", r.transport)
    } else if let Some(n) = r.clients {
        format!("{} x{n}", r.transport)
    } else {
        r.transport.clone()
    }
}

impl Report {
    /// Writes the document to `save` if given, then prints it: as JSON with `json`, else as the
    /// mode's table (`table`).
    pub(crate) fn emit(
        &self,
        save: Option<&PathBuf>,
        json: bool,
        table: impl FnOnce(&mut std::io::StdoutLock<'static>, &Report) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if let Some(path) = save {
            let text = serde_json::to_string_pretty(self)?;
            std::fs::write(path, text + "\n").with_context(|| format!("writing {path:?}"))?;
            eprintln!("[info] wrote {path:?}");
        }
        let mut out = std::io::stdout().lock();
        if json {
            serde_json::to_writer_pretty(&mut out, self)?;
            writeln!(out)?;
            Ok(())
        } else {
            table(&mut out, self)
        }
    }
}
