//! The JSON document of a run: what every mode records about the run ([`Run`]: the command, the
//! commit, the date, the machine, the pinning) and one result type per mode ([`Results`]).
//!
//! ```json
//! {"run": {"command": "ipc-parent stream --rounds 3", "commit": "…", ...},
//!  "mode": "stream", "sizes": [8, 64], ..., "results": [...]}
//! ```
//!
//! `ipc-parent --json` prints one; `--save PATH` writes one; `report`, `chart` and `compare`
//! read them back.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::machine::{Machine, Pinning};
use crate::transport::posixmq::MqLimits;

/// One run of one mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Document {
    /// What was run, where, when.
    pub run: Run,
    /// The mode and its results (a `mode` field names it).
    #[serde(flatten)]
    pub results: Results,
}

/// What every mode records about its run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// The command line, `ipc-parent` and its arguments as given.
    pub command: String,
    /// The commit the binary was built from (`git rev-parse HEAD` when cargo built it,
    /// `-dirty` appended when the sources differed from it; `unknown` outside a checkout).
    pub commit: String,
    /// When the run started, UTC (RFC 3339, seconds).
    pub date: String,
    /// `debug` or `release`: the build of `ipc-parent`.
    pub profile: String,
    /// The machine as the OS reports it.
    pub machine: Machine,
    /// Where the processes ran (`--pin`).
    pub pinning: Pinning,
    /// The 1-minute load average when the run started, before any `--load` process.
    pub load_average: f64,
    /// `--load`: busy background processes started for the run.
    pub load: usize,
    /// Rounds per row; the rows are interleaved round by round.
    pub rounds: u32,
    /// Unmeasured work before each round, in seconds.
    pub warmup_s: f64,
    /// The machine during each round, in the order measured (a clients run: each round of each
    /// client count). Documents written before it was recorded have none.
    #[serde(default)]
    pub round_conditions: Vec<RoundConditions>,
}

/// What else the machine did while one round ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundConditions {
    /// The round (from 1).
    pub round: u32,
    /// The part of the run the round belongs to, when a run has several (`4 clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// The 1-minute load average when the round started (`/proc/loadavg`).
    pub load_average: f64,
    /// The share of all CPUs' time the hypervisor gave to other guests while the round ran, in
    /// percent (`/proc/stat`: steal ticks over all ticks; none when unreadable).
    pub steal_pct: Option<f64>,
    /// How long the round took, in seconds.
    pub seconds: f64,
}

/// The results of one mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Results {
    /// `ping-pong`: round trips per second per transport.
    PingPong(PingPong),
    /// `sweep`: payload MB/s per transport and size.
    Sweep(Sweep),
    /// `stream`: one-way messages/s and MB/s per transport and size.
    Stream(Stream),
    /// `clients`: N clients against one server, per row and N.
    Clients(Clients),
    /// `fanout`: one publisher, N subscribers, per row, size and N.
    Fanout(Fanout),
    /// `python`: the Python package against Python's IPC, written by `python/bench/bench.py`.
    Python(PythonBench),
    /// `bridge`: shmlink through two zenoh bridges against zenoh's own round trip and put
    /// throughput, and a TCP round trip.
    Bridge(BridgeBench),
    /// `c-api`: seed 003's workloads written in C against libshmlink, beside the same in Rust
    /// and through a pipe.
    CApi(CApiBench),
}

impl Results {
    /// The mode's name, as the `mode` field and the subcommand give it.
    pub fn mode(&self) -> &'static str {
        match self {
            Results::PingPong(_) => "ping-pong",
            Results::Sweep(_) => "sweep",
            Results::Stream(_) => "stream",
            Results::Clients(_) => "clients",
            Results::Fanout(_) => "fanout",
            Results::Python(_) => "python",
            Results::Bridge(_) => "bridge",
            Results::CApi(_) => "c-api",
        }
    }
}

/// A run of the Python benchmark (`python/bench/bench.py`): each workload's rows, one per
/// contender, with their per-round rates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PythonBench {
    /// The interpreter's version.
    pub python: String,
    /// The JSON codec the package used (`orjson` or `json`).
    pub json_codec: String,
    /// Encode and decode of the JSON workload's message per second, in one process, by codec.
    pub codec_round_trips_per_s: std::collections::BTreeMap<String, f64>,
    /// Seconds measured per row and round.
    pub duration_s: f64,
    pub workloads: Vec<ContenderWorkload>,
}

/// A run of `ipc-parent bridge`: each workload's rows (shmlink through two `shmlink-bridge`s,
/// zenoh alone, TCP), with their per-round rates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BridgeBench {
    /// The zenoh version the bridges and the zenoh rows were built with.
    pub zenoh: String,
    /// Seconds measured per row and round.
    pub duration_s: f64,
    pub workloads: Vec<ContenderWorkload>,
}

/// A run of `ipc-parent c-api`: each workload's rows (C against libshmlink, the same in Rust,
/// a pipe in C), with their per-round rates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CApiBench {
    /// The C compiler's version line.
    pub compiler: String,
    /// Seconds measured per row and round.
    pub duration_s: f64,
    pub workloads: Vec<ContenderWorkload>,
}

/// One workload of a benchmark whose rows are contenders (the Python benchmark, the bridge).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContenderWorkload {
    /// Short name: `json`, `raw-64`, `raw-64k`, `stream-128`, `stream-4k` (Python);
    /// `round-trip-64`, `stream-64`, `stream-4k` (bridge).
    pub name: String,
    pub title: String,
    /// `ping-pong` or `stream`.
    pub kind: String,
    /// Message size in bytes (none for JSON).
    pub size: Option<usize>,
    /// What a rate counts: `round trips/s` or `messages/s`.
    pub unit: String,
    pub results: Vec<ContenderResult>,
}

/// One contender's rates in one workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContenderResult {
    pub contender: String,
    /// The rate of each round, in the order measured.
    pub rounds: Vec<f64>,
    pub median: f64,
    pub best: f64,
}

/// Which row a result is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowId {
    /// The transport (or limit row) name.
    pub transport: String,
    /// How the shm row waited (shm rows only).
    pub wait: Option<String>,
    /// The backend that carried the messages (`ipc-channel` when shm fell back); none for the
    /// rows measured in one process.
    pub backend: Option<String>,
    /// A limit the transports are measured against (`floor`, `serde`, `memcpy`, `ring`).
    pub limit: bool,
}

impl RowId {
    /// The name a table gives the row: the shm rows with their wait, limits marked.
    pub fn label(&self) -> String {
        match (&self.wait, self.limit) {
            (_, true) => format!("{} [limit]", self.transport),
            (Some(wait), false) => format!("{} ({wait})", self.transport),
            (None, false) => self.transport.clone(),
        }
    }
}

/// One round of round trips.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoundTrips {
    pub round_trips: u64,
    pub seconds: f64,
    pub rt_per_s: f64,
    /// `--paired`: the round trips per second of each slice of the round, in order (the rows'
    /// slices alternate, so slice `i` of two rows ran side by side in time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<f64>,
}

/// Round-trip latency percentiles over all rounds of a row, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Latency {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// The figures of a row of round trips.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoundTripFigures {
    pub rounds: Vec<RoundTrips>,
    /// The best round (interference only ever slows a round down).
    pub best_rt_per_s: f64,
    pub median_rt_per_s: f64,
    pub latency_ns: Latency,
}

/// `ping-pong`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingPong {
    /// `json` (the reference workload's ping / pong) or `raw`.
    pub message: String,
    /// Bytes per raw message (none for JSON).
    pub size: Option<usize>,
    /// One measured round, in seconds.
    pub duration_s: f64,
    /// `--pace`: the pause between two round trips, in seconds.
    pub pace_s: f64,
    /// Bytes per direction (shm ring, socket and pipe buffers).
    pub ring_size: usize,
    /// The message queue limits, when posixmq ran.
    pub posixmq: Option<MqLimits>,
    /// `--paired`: the length of one slice, in seconds (each round's rows alternate slice by
    /// slice; none: each row ran its round in one piece).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_s: Option<f64>,
    pub results: Vec<PingPongResult>,
}

/// One row of a ping-pong run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingPongResult {
    #[serde(flatten)]
    pub row: RowId,
    #[serde(flatten)]
    pub figures: RoundTripFigures,
    /// Best round trips per second as a percentage of the floor row's (when it ran).
    pub pct_of_floor: Option<f64>,
    /// Raw messages: the payload moved, both directions counted (the floor's bounce moves
    /// none).
    pub payload: Option<Payload>,
}

/// What a row of raw round trips moved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payload {
    /// Bytes per message.
    pub size: usize,
    /// Payload megabytes per second at the best round, both directions.
    pub mb_per_s: f64,
    /// The same at the median round.
    pub median_mb_per_s: f64,
}

/// `sweep`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sweep {
    pub sizes: Vec<usize>,
    pub duration_s: f64,
    pub ring_size: usize,
    pub posixmq: Option<MqLimits>,
    pub results: Vec<SweepResult>,
}

/// One row of a sweep at one size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    #[serde(flatten)]
    pub row: RowId,
    pub size: usize,
    #[serde(flatten)]
    pub figures: RoundTripFigures,
    /// Payload megabytes per second at the best round, both directions.
    pub mb_per_s: f64,
    pub median_mb_per_s: f64,
    /// Best MB/s over the memcpy row's at the same size.
    pub memcpy_ratio: Option<f64>,
}

/// `stream`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stream {
    pub sizes: Vec<usize>,
    /// What a row's count aims to fill, in seconds (when `count` was not given).
    pub duration_s: f64,
    /// `--count`, when given.
    pub count: Option<u64>,
    /// How the shm row waited.
    pub wait: String,
    pub ring_size: usize,
    pub posixmq: Option<MqLimits>,
    pub results: Vec<StreamResult>,
}

/// One round of a stream row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamRound {
    /// Messages moved one way, confirmed by the receiver.
    pub messages: u64,
    pub seconds: f64,
    pub msgs_per_s: f64,
}

/// One row of a stream at one size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamResult {
    #[serde(flatten)]
    pub row: RowId,
    pub size: usize,
    /// Messages per round.
    pub count: u64,
    pub rounds: Vec<StreamRound>,
    /// Messages per second at the best round.
    pub msgs_per_s: f64,
    pub median_msgs_per_s: f64,
    /// One-way payload megabytes per second at the best round.
    pub mb_per_s: f64,
    pub median_mb_per_s: f64,
    /// Best messages/s over the ring row's at the same size.
    pub ring_ratio: Option<f64>,
    /// Best messages/s over the memcpy row's at the same size.
    pub memcpy_ratio: Option<f64>,
    /// A framed kernel row: its best messages/s over its bare row's (`<transport>-bare`) at the
    /// same size, when that row ran.
    #[serde(default)]
    pub bare_ratio: Option<f64>,
}

/// `clients`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Clients {
    /// The client counts (one result per row and count).
    pub counts: Vec<usize>,
    /// Bytes per raw message.
    pub size: usize,
    /// Timed round trips per client (none: for `duration_s`).
    pub count: Option<u64>,
    pub duration_s: f64,
    pub pace_s: f64,
    /// How the shm clients (and the servers with a thread per client) waited.
    pub wait: String,
    pub ring_size: usize,
    pub results: Vec<ClientsResult>,
}

/// One round of a clients row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientsRound {
    /// Round trips of all clients together, over the span from the first client's start to
    /// the last one's end.
    #[serde(flatten)]
    pub total: RoundTrips,
    /// The median of the clients' p99 latencies, in nanoseconds.
    pub p99_median_client_ns: u64,
    /// The worst client's p99 latency, in nanoseconds.
    pub p99_worst_client_ns: u64,
}

/// A figure over the rounds of a row: the median round's and the best round's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct MedianBest {
    pub median: u64,
    pub best: u64,
}

/// One row of a clients run at one client count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientsResult {
    /// The row's name (`shm selector`, `uds poll`, ...).
    pub row: String,
    /// Client processes.
    pub clients: usize,
    pub rounds: Vec<ClientsRound>,
    pub best_rt_per_s: f64,
    pub median_rt_per_s: f64,
    /// The median over all clients of all rounds of each client's percentiles, and the slowest
    /// round trip.
    pub latency_ns: Latency,
    /// The median of the clients' p99s: median and best (lowest) over the rounds.
    pub p99_median_client_ns: MedianBest,
    /// The worst client's p99: median and best (lowest) over the rounds.
    pub p99_worst_client_ns: MedianBest,
}

/// `fanout`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fanout {
    /// The subscriber counts (one result per row, size and count).
    pub counts: Vec<usize>,
    /// Bytes per message.
    pub sizes: Vec<usize>,
    /// Timed messages the publisher sent per row and round (none: for `duration_s`).
    pub count: Option<u64>,
    pub duration_s: f64,
    /// Bytes of the topic's ring, of each channel's, of each socket's buffers; iceoryx2: a
    /// subscriber's buffer holds as many samples as this ring holds messages.
    pub ring_size: usize,
    /// The iceoryx2 version, when its row ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iceoryx2: Option<String>,
    /// Rows left out at some subscriber count, and why.
    #[serde(default)]
    pub skipped: Vec<FanoutSkip>,
    pub results: Vec<FanoutResult>,
}

/// A row left out of a fan-out run at one subscriber count.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FanoutSkip {
    pub row: String,
    pub subscribers: usize,
    pub why: String,
}

/// One round of a fan-out row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FanoutRound {
    /// Timed messages the publisher sent (every subscriber received each one).
    pub messages: u64,
    /// The publisher's span, from its first timed message to its last, in seconds.
    pub publisher_seconds: f64,
    /// The publisher thread's CPU time over that span (`CLOCK_THREAD_CPUTIME_ID`), in seconds.
    pub publisher_cpu_s: f64,
    /// Timed messages over the publisher's span.
    pub published_per_s: f64,
    /// Timed messages per second of the publisher's CPU time.
    pub msgs_per_cpu_s: f64,
    /// Each subscriber's timed messages over its own span (first timed message received to
    /// the last), in the order they were started.
    pub subscriber_msgs_per_s: Vec<f64>,
    /// The median subscriber's rate.
    pub median_subscriber_msgs_per_s: f64,
    /// The slowest subscriber's rate.
    pub slowest_subscriber_msgs_per_s: f64,
    /// One-way latency over every timed message of every subscriber.
    pub latency_ns: Latency,
}

/// A rate over the rounds of a row: the median round's and the best round's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Rates {
    pub median: f64,
    pub best: f64,
}

impl Rates {
    /// The median and the best (highest) of per-round rates.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Rates {
        let (best, median) = best_and_median(values);
        Rates { median, best }
    }
}

/// One row of a fan-out run at one size and subscriber count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FanoutResult {
    /// The row's name (`shmlink-topic`, `uds`, ...).
    pub row: String,
    /// Subscriber processes.
    pub subscribers: usize,
    /// Bytes per message.
    pub size: usize,
    pub rounds: Vec<FanoutRound>,
    /// The median subscriber's messages per second, over the rounds.
    pub subscriber_msgs_per_s: Rates,
    /// The slowest subscriber's, over the rounds.
    pub slowest_subscriber_msgs_per_s: Rates,
    /// Messages per second of the publisher's CPU time, over the rounds.
    pub msgs_per_cpu_s: Rates,
    /// One-way latency over every timed message of every subscriber of all rounds.
    pub latency_ns: Latency,
}

/// The best and the median of per-round values (0 for none).
pub fn best_and_median(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let mut values: Vec<f64> = values.into_iter().collect();
    let best = values.iter().copied().fold(0.0, f64::max);
    (best, median(&mut values))
}

/// The median (the mean of the middle two of an even count; 0 for none).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// `a / b`, when `b` is a positive figure.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// Payload megabytes per second, both directions counted: 2 x size x round trips / s.
pub fn mb_per_s(rt_per_s: f64, size: usize) -> f64 {
    rt_per_s * 2.0 * size as f64 / 1e6
}

impl Document {
    /// Reads a saved document.
    pub fn read(path: &Path) -> anyhow::Result<Document> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{path:?} is not an ipc-parent result document"))
    }

    /// The document as the file `--save` writes: pretty JSON and a final newline.
    pub fn to_text(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }
}
