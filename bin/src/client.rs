//! `ipc-parent clients`: the rows, and the client side that `ipc-child --client ROW` runs.
//!
//! A client connects to the server the parent runs for its row, waits for a "go" message (the
//! server sends it once every client is connected), makes untimed round trips for the warmup,
//! then timed ones (for a duration, or a fixed count), each a raw payload stamped with its
//! number and checked when it comes back. It prints one [`ClientResult`] line on standard
//! output: its monotonic start and end times, its round trips and its latency percentiles.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;
use ipc_channel::ipc::{self, IpcBytesReceiver, IpcBytesSender, IpcReceiver, IpcSender};
use shmlink::tokio::AsyncChannel;
use shmlink::{Channel, WaitStrategy};

use crate::workload::{check_stamp, stamp};

/// How long a client waits to connect, and a server for its clients.
pub const CONNECT_LIMIT: Duration = Duration::from_secs(30);

/// The smallest payload of a clients run: room for the round-trip number.
pub const MIN_SIZE: usize = 8;

/// One row of a clients run: a server and the clients' way of reaching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientRow {
    /// One `Channel` (create / connect) and one client: the baseline of one client.
    Plain,
    /// A `Listener`; one server thread serves every connection with a `Selector`.
    Selector,
    /// A `Listener`; one server thread per connection.
    Threads,
    /// A `Listener`; a task per connection on a current-thread tokio runtime, the clients
    /// async too.
    Async,
    /// Unix stream sockets; one server thread with a `poll(2)` loop over them all.
    UdsPoll,
    /// Unix stream sockets; one server thread per connection.
    UdsThreads,
    /// ipc-channel: one server thread with an `IpcReceiverSet` select loop over the clients'
    /// request channels, replies on a bytes channel each.
    IpcChannel,
}

impl ClientRow {
    /// Every row, in the table's order.
    pub const ALL: [ClientRow; 7] = [
        ClientRow::Plain,
        ClientRow::Selector,
        ClientRow::Threads,
        ClientRow::Async,
        ClientRow::UdsPoll,
        ClientRow::UdsThreads,
        ClientRow::IpcChannel,
    ];

    /// The word `--transport` and `ipc-child --client` take.
    pub fn id(self) -> &'static str {
        match self {
            ClientRow::Plain => "plain",
            ClientRow::Selector => "selector",
            ClientRow::Threads => "threads",
            ClientRow::Async => "async",
            ClientRow::UdsPoll => "uds-poll",
            ClientRow::UdsThreads => "uds-threads",
            ClientRow::IpcChannel => "ipc-channel",
        }
    }

    /// The name the table and the JSON document give the row.
    pub fn name(self) -> &'static str {
        match self {
            ClientRow::Plain => "shm plain",
            ClientRow::Selector => "shm selector",
            ClientRow::Threads => "shm threads",
            ClientRow::Async => "shm async",
            ClientRow::UdsPoll => "uds poll",
            ClientRow::UdsThreads => "uds threads",
            ClientRow::IpcChannel => "ipc-channel select",
        }
    }

    /// Whether the row runs with `n` clients (the plain channel takes one).
    pub fn runs_with(self, n: usize) -> bool {
        self != ClientRow::Plain || n == 1
    }
}

impl FromStr for ClientRow {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<ClientRow> {
        let s = s.trim();
        ClientRow::ALL
            .into_iter()
            .find(|r| r.id() == s || r.name() == s)
            .ok_or_else(|| {
                let ids: Vec<&str> = ClientRow::ALL.iter().map(|r| r.id()).collect();
                anyhow!("unknown clients row {s:?} (rows: {})", ids.join(", "))
            })
    }
}

/// What one client does.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// The row: which server, reached how.
    pub row: ClientRow,
    /// Listener or channel name, socket path, or ipc-channel one-shot server name.
    pub address: String,
    /// How a shmlink client waits (sync rows).
    pub wait: WaitStrategy,
    /// Bytes per message (at least [`MIN_SIZE`]).
    pub size: usize,
    /// Untimed round trips for this long first.
    pub warmup: Duration,
    /// Timed round trips for this long ...
    pub duration: Duration,
    /// ... or exactly this many.
    pub count: Option<u64>,
    /// A pause before each round trip (not counted in its latency).
    pub pace: Duration,
}

/// What one client measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientResult {
    /// `CLOCK_MONOTONIC` at the first timed round trip, in nanoseconds.
    pub start_ns: u64,
    /// `CLOCK_MONOTONIC` after the last one.
    pub end_ns: u64,
    /// Timed round trips.
    pub round_trips: u64,
    /// Latency percentiles of the timed round trips, in nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// The slowest.
    pub max_ns: u64,
}

impl ClientResult {
    /// The line a client prints.
    pub fn line(&self) -> String {
        format!(
            "result {} {} {} {} {} {} {}",
            self.start_ns,
            self.end_ns,
            self.round_trips,
            self.p50_ns,
            self.p99_ns,
            self.p999_ns,
            self.max_ns
        )
    }

    /// Reads the line [`line`](ClientResult::line) wrote (the last such line of `text`).
    pub fn parse(text: &str) -> anyhow::Result<ClientResult> {
        let line = text
            .lines()
            .rev()
            .find(|l| l.starts_with("result "))
            .ok_or_else(|| anyhow!("no result line in the client's output {text:?}"))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("client result {line:?}"))?;
        let [start_ns, end_ns, round_trips, p50_ns, p99_ns, p999_ns, max_ns] = f[..] else {
            bail!("client result {line:?}");
        };
        Ok(ClientResult {
            start_ns,
            end_ns,
            round_trips,
            p50_ns,
            p99_ns,
            p999_ns,
            max_ns,
        })
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of the machine, so the
/// parent can span the clients' start and end times.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The "go" a server sends each client once they are all connected.
pub fn go_message(size: usize) -> Vec<u8> {
    vec![0u8; size]
}

/// One synchronous round trip of a client: `msg` out, the reply into `reply`.
trait RoundTrip {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> anyhow::Result<()>;
}

impl RoundTrip for Channel {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> anyhow::Result<()> {
        self.send(msg)?;
        self.recv_into(reply)?;
        Ok(())
    }
}

impl RoundTrip for UnixStream {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> anyhow::Result<()> {
        self.write_all(msg)?;
        reply.resize(msg.len(), 0);
        self.read_exact(reply)?;
        Ok(())
    }
}

/// A client's ends of the ipc-channel row.
struct IpcClient {
    requests: IpcSender<Vec<u8>>,
    replies: IpcBytesReceiver,
}

impl RoundTrip for IpcClient {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> anyhow::Result<()> {
        self.requests
            .send(msg.to_vec())
            .map_err(|e| anyhow!("ipc-channel send: {e:?}"))?;
        *reply = self
            .replies
            .recv()
            .map_err(|e| anyhow!("ipc-channel receive: {e:?}"))?;
        Ok(())
    }
}

/// What a client of the ipc-channel row sends the server's one-shot server: the receiver of
/// its requests and the sender of its replies.
pub type IpcHalves = (IpcReceiver<Vec<u8>>, IpcBytesSender);

/// The timed part of a client, shared by the sync and async loops: warmup, measured round
/// trips, latency histogram.
struct Meter {
    spec: ClientSpec,
    histogram: Histogram<u64>,
    msg: Vec<u8>,
    reply: Vec<u8>,
    /// The number of the next round trip.
    seq: u64,
    /// Timed round trips made.
    done: u64,
    warm_until: Instant,
    /// When the timed part started (monotonic ns for the result, and the instant).
    start: Option<(u64, Instant)>,
}

impl Meter {
    fn new(spec: &ClientSpec) -> anyhow::Result<Meter> {
        if spec.size < MIN_SIZE {
            bail!("clients need messages of at least {MIN_SIZE} bytes");
        }
        Ok(Meter {
            spec: spec.clone(),
            histogram: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .map_err(|e| anyhow!("histogram: {e}"))?,
            msg: vec![0xa5; spec.size],
            reply: Vec::with_capacity(spec.size),
            seq: 0,
            done: 0,
            warm_until: Instant::now() + spec.warmup,
            start: None,
        })
    }

    /// Prepares the next round trip: `None` when the timed part is over, else whether it is
    /// timed and the pause to make before it.
    fn next(&mut self) -> Option<(bool, Duration)> {
        let start = match self.start {
            Some((_, start)) => start,
            None if Instant::now() < self.warm_until => {
                stamp(&mut self.msg, self.seq);
                return Some((false, Duration::ZERO));
            }
            None => {
                let start = Instant::now();
                self.start = Some((monotonic_ns(), start));
                start
            }
        };
        let over = match self.spec.count {
            Some(count) => self.done >= count,
            None => self.done > 0 && start.elapsed() >= self.spec.duration,
        };
        if over {
            return None;
        }
        stamp(&mut self.msg, self.seq);
        Some((true, self.spec.pace))
    }

    /// Checks the reply of the round trip that began at `began`, and records it if timed.
    fn finish(&mut self, timed: bool, began: Instant) -> anyhow::Result<()> {
        if timed {
            self.histogram
                .saturating_record(began.elapsed().as_nanos().try_into().unwrap_or(u64::MAX));
            self.done += 1;
        }
        if !check_stamp(&self.reply, self.spec.size, self.seq) {
            bail!(
                "reply {} is wrong ({} bytes, {} expected)",
                self.seq,
                self.reply.len(),
                self.spec.size
            );
        }
        self.seq += 1;
        Ok(())
    }

    fn result(&self) -> ClientResult {
        let h = &self.histogram;
        ClientResult {
            start_ns: self.start.map_or(0, |(ns, _)| ns),
            end_ns: monotonic_ns(),
            round_trips: self.done,
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}

fn run_sync(ch: &mut impl RoundTrip, spec: &ClientSpec) -> anyhow::Result<ClientResult> {
    let mut m = Meter::new(spec)?;
    while let Some((timed, pause)) = m.next() {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let began = Instant::now();
        ch.round_trip(&m.msg, &mut m.reply)?;
        m.finish(timed, began)?;
    }
    Ok(m.result())
}

async fn run_async(ch: &mut AsyncChannel, spec: &ClientSpec) -> anyhow::Result<ClientResult> {
    // The server's "go".
    let mut go = Vec::new();
    ch.recv_into(&mut go).await?;
    let mut m = Meter::new(spec)?;
    while let Some((timed, pause)) = m.next() {
        if !pause.is_zero() {
            // The pause every row makes, a sleep of this thread: tokio's timer rounds a pause up
            // to its next millisecond tick, so `tokio::time::sleep` would pace this row at about
            // half the rate of the others and let its cores idle deeper before each round trip.
            // The client's one task has nothing else to run meanwhile.
            std::thread::sleep(pause);
        }
        let began = Instant::now();
        ch.send(&m.msg).await?;
        ch.recv_into(&mut m.reply).await?;
        m.finish(timed, began)?;
    }
    Ok(m.result())
}

/// Runs one client of `spec.row` to the end: connect, the "go", warmup, timed round trips.
pub fn run_client(spec: &ClientSpec) -> anyhow::Result<ClientResult> {
    let name = spec.address.as_str();
    let mut go = Vec::new();
    match spec.row {
        ClientRow::Plain => {
            let mut ch = Channel::connect_timeout(name, spec.wait, CONNECT_LIMIT)?;
            ch.recv_timeout(CONNECT_LIMIT)?;
            run_sync(&mut ch, spec)
        }
        ClientRow::Selector | ClientRow::Threads => {
            let mut ch = Channel::connect_timeout(name, spec.wait, CONNECT_LIMIT)?;
            ch.recv_timeout(CONNECT_LIMIT)?;
            run_sync(&mut ch, spec)
        }
        ClientRow::UdsPoll | ClientRow::UdsThreads => {
            let mut s = UnixStream::connect(name).with_context(|| format!("connecting {name}"))?;
            go.resize(spec.size, 0);
            s.read_exact(&mut go)?;
            run_sync(&mut s, spec)
        }
        ClientRow::IpcChannel => {
            let server = IpcSender::<IpcHalves>::connect(name.to_owned())
                .with_context(|| format!("connecting to ipc-channel server {name}"))?;
            let (requests, requests_rx) = ipc::channel::<Vec<u8>>()?;
            let (replies_tx, replies) = ipc::bytes_channel()?;
            server
                .send((requests_rx, replies_tx))
                .map_err(|e| anyhow!("ipc-channel handshake: {e:?}"))?;
            let mut client = IpcClient { requests, replies };
            client
                .replies
                .recv()
                .map_err(|e| anyhow!("ipc-channel go: {e:?}"))?;
            run_sync(&mut client, spec)
        }
        ClientRow::Async => {
            let ch = Channel::connect_timeout(name, WaitStrategy::Block, CONNECT_LIMIT)?;
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .enable_io()
                .build()?
                .block_on(async {
                    let mut ch = AsyncChannel::new(ch)?;
                    run_async(&mut ch, spec).await
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_by_id_and_name() {
        for row in ClientRow::ALL {
            assert_eq!(row.id().parse::<ClientRow>().unwrap(), row);
            assert_eq!(row.name().parse::<ClientRow>().unwrap(), row);
        }
        assert!("shm".parse::<ClientRow>().is_err());
    }

    #[test]
    fn result_line_round_trips() {
        let r = ClientResult {
            start_ns: 1,
            end_ns: 2,
            round_trips: 3,
            p50_ns: 4,
            p99_ns: 5,
            p999_ns: 6,
            max_ns: 7,
        };
        assert_eq!(ClientResult::parse(&r.line()).unwrap(), r);
        assert!(ClientResult::parse("result 1 2").is_err());
    }
}
