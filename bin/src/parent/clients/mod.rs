//! `clients N,...`: N client processes (`ipc-child --client ROW`) against one server in this
//! process, per row of [`ClientRow`], for every N. Every round runs every row once, one after
//! the other, so the ratios between rows are taken within a round. A row's figure for a round
//! is the round trips of all its clients together over the span from the first client's start
//! to the last one's end (warmups excluded), and the median and the worst of the clients' p99
//! latencies.

pub(crate) mod tables;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use ipc_channel::ipc::{IpcOneShotServer, IpcReceiverSet, IpcSelectionResult};
use shmlink::tokio::AsyncChannel;
use shmlink::{Channel, Config, Connection, Listener, RecvError, Selector, WaitStrategy};

use crate::Error;

use crate::client::{go_message, ClientResult, ClientRow, CONNECT_LIMIT, MIN_SIZE};
use crate::parent::cli::{ClientsArgs, DEFAULT_RING};
use crate::parent::document::{
    best_and_median, Clients as ClientsDoc, ClientsResult, ClientsRound, Latency, MedianBest,
    Results, RoundTrips,
};
use crate::parent::session::{Schedule, Session};
use crate::parent::spawn::{interrupted, ChildGuard, CHILD_PID};
use crate::transport::HARNESS_PREFIX;

/// What every round of a clients run shares.
struct ClientsPlan<'s> {
    session: &'s Session,
    /// `ipcbench-<--name or h<pid>>`: the start of every name of the run.
    base: String,
    ring_size: usize,
    args: ClientsArgs,
}

/// The rows `--transport` names (`all`: every one), in the table's order.
fn parse_client_rows(list: &str) -> anyhow::Result<Vec<ClientRow>> {
    if list.trim() == "all" {
        return Ok(ClientRow::ALL.to_vec());
    }
    let mut rows = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item.ends_with("-bare") {
            bail!(
                "{item}: bare rows (fixed-size messages, no framing) belong to the one-way stream \
                 (ipc-parent stream), not to a clients run"
            );
        }
        let row: ClientRow = item.parse().context("--transport of a clients run")?;
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    if rows.is_empty() {
        bail!("no clients row given");
    }
    Ok(rows)
}

/// The client children of one round, all in one process group; killed and reaped on drop
/// unless [`collect`](Clients::collect) reaped them. Then the names of the channels that
/// clients made and died with are removed (a server's connection leaves a live client's name
/// to the client).
struct Clients {
    children: Vec<ChildGuard>,
    /// The round's listener or channel name: the clients' channels are `<name>.<pid>.<n>`.
    name: String,
}

impl Drop for Clients {
    fn drop(&mut self) {
        CHILD_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        // Killed (if still running) and reaped, all of them, before any name is judged.
        self.children.clear();
        let prefix = format!("{}.", self.name);
        if let Ok(segments) = shmlink::segments::list() {
            for seg in segments.iter().filter(|s| s.name.starts_with(&prefix)) {
                let _ = shmlink::segments::reclaim(&seg.name);
            }
        }
    }
}

impl Clients {
    /// Spawns one `ipc-child --client ROW` per address.
    fn spawn(
        plan: &ClientsPlan<'_>,
        row: ClientRow,
        round: u32,
        name: &str,
        addresses: &[String],
    ) -> anyhow::Result<Clients> {
        let args = &plan.args;
        let ns = |d: Duration| format!("{}ns", d.as_nanos());
        let mut clients = Clients {
            children: Vec::with_capacity(addresses.len()),
            name: name.to_owned(),
        };
        let placement = &plan.session.placement;
        let mut group = None;
        for (i, address) in addresses.iter().enumerate() {
            let mut command = plan.session.child_command();
            command
                .args(["--client", row.id(), "--address", address])
                .args(["--wait", args.wait.as_str()])
                .args(["--size", &args.size.to_string()])
                .args(["--warmup", &ns(args.common.warmup)])
                .args(["--duration", &ns(args.duration)])
                .args(["--pace", &ns(args.pace)])
                .args(["--parent-pid", &std::process::id().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if let Some(count) = args.count {
                command.args(["--timed-count", &count.to_string()]);
            }
            placement.pin_child(&mut command, i);
            let (child, pgid) = ChildGuard::spawn_in_group(command, group)?;
            group = Some(pgid);
            placement.check_child(child.pid(), i)?;
            clients.children.push(child);
        }
        let pids: Vec<String> = clients
            .children
            .iter()
            .map(|c| c.pid().to_string())
            .collect();
        eprintln!(
            "[info] {} x{} round {round}: client pids {}",
            row.name(),
            addresses.len(),
            pids.join(" ")
        );
        Ok(clients)
    }

    /// Reads every client's result and reaps it; fails if one failed.
    fn collect(mut self) -> anyhow::Result<Vec<ClientResult>> {
        // Cleared before any child is reaped: a signal must not kill a reused process group.
        CHILD_PID.store(0, std::sync::atomic::Ordering::SeqCst);
        let mut results = Vec::with_capacity(self.children.len());
        for guard in &mut self.children {
            let mut text = String::new();
            if let Some(mut stdout) = guard.child.stdout.take() {
                stdout.read_to_string(&mut text)?;
            }
            let status = guard.child.wait()?;
            if !status.success() {
                bail!("client {} failed: {status}", guard.pid());
            }
            results.push(ClientResult::parse(&text)?);
        }
        Ok(results)
    }
}

/// A socket file, removed on drop.
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn accept_all(listener: &Listener, n: usize) -> anyhow::Result<Vec<Connection>> {
    (0..n)
        .map(|i| {
            listener
                .accept_timeout(CONNECT_LIMIT)
                .with_context(|| format!("accepting client {} of {n}", i + 1))
        })
        .collect()
}

/// Accepts `n` Unix-socket clients, giving up after [`CONNECT_LIMIT`].
fn accept_uds(listener: &UnixListener, n: usize) -> anyhow::Result<Vec<UnixStream>> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + CONNECT_LIMIT;
    let mut streams = Vec::with_capacity(n);
    while streams.len() < n {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                streams.push(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline || interrupted() {
                    bail!("{} of {n} uds clients connected", streams.len());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(streams)
}

/// A client that closed its end: the normal end of its part of a round. A client that died
/// (`PeerGone`) fails the round.
fn closed(e: &RecvError) -> bool {
    matches!(e, RecvError::Disconnected { .. })
}

/// Echoes on one channel until its peer leaves (the first message within [`CONNECT_LIMIT`]).
fn echo_channel(ch: &mut Channel) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    match ch.recv_timeout(CONNECT_LIMIT) {
        Ok(m) => buf.extend_from_slice(&m),
        Err(e) if closed(&e) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    ch.send(&buf)?;
    loop {
        match ch.recv_into(&mut buf) {
            Ok(_) => ch.send(&buf)?,
            Err(e) if closed(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Echoes on `conns` from this thread with one selector until every client left.
fn serve_selector(mut conns: Vec<Connection>, size: usize) -> anyhow::Result<()> {
    for c in &mut conns {
        c.send(&go_message(size))?;
    }
    let mut selector = Selector::new();
    let mut buf = Vec::with_capacity(size);
    let mut gone = Vec::new();
    while !conns.is_empty() {
        gone.clear();
        for &i in selector.wait(&mut conns, None) {
            let c = &mut conns[i];
            match c.try_recv() {
                Ok(m) => {
                    buf.clear();
                    buf.extend_from_slice(&m);
                }
                Err(RecvError::Empty { .. }) => continue,
                Err(e) if closed(&e) => {
                    gone.push(i);
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            c.send(&buf)?;
        }
        gone.sort_unstable();
        for &i in gone.iter().rev() {
            conns.swap_remove(i);
        }
    }
    Ok(())
}

/// Echoes on every connection from a thread of its own.
fn serve_threads(conns: Vec<Connection>, size: usize) -> anyhow::Result<()> {
    std::thread::scope(|s| -> anyhow::Result<()> {
        let handles: Vec<_> = conns
            .into_iter()
            .map(|mut c| {
                s.spawn(move || -> anyhow::Result<()> {
                    c.send(&go_message(size))?;
                    echo_channel(&mut c)
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow!("server thread panicked"))??;
        }
        Ok(())
    })
}

/// Echoes on every connection from a task of its own, on a current-thread runtime.
fn serve_async(conns: Vec<Connection>, size: usize) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?
        .block_on(async move {
            let mut tasks = Vec::new();
            for c in conns {
                let mut c = AsyncChannel::new(c)?;
                tasks.push(tokio::spawn(async move {
                    c.send(&go_message(size)).await?;
                    let mut buf = Vec::new();
                    loop {
                        match c.recv_into(&mut buf).await {
                            Ok(_) => c.send(&buf).await?,
                            Err(e) if closed(&e) => return Ok::<(), Error>(()),
                            Err(e) => return Err(e.into()),
                        }
                    }
                }));
            }
            for t in tasks {
                t.await??;
            }
            Ok(())
        })
}

/// Reads one message of `buf.len()` bytes; `false` when the peer closed before it.
fn read_message(s: &mut UnixStream, buf: &mut [u8]) -> anyhow::Result<bool> {
    if s.read(&mut buf[..1])? == 0 {
        return Ok(false);
    }
    s.read_exact(&mut buf[1..])?;
    Ok(true)
}

/// Echoes on `streams` from this thread with one `poll(2)` loop until every client left.
fn serve_uds_poll(mut streams: Vec<UnixStream>, size: usize) -> anyhow::Result<()> {
    for s in &mut streams {
        s.write_all(&go_message(size))?;
    }
    let mut buf = vec![0u8; size];
    let mut fds: Vec<libc::pollfd> = streams
        .iter()
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut open = streams.len();
    while open > 0 {
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd records for the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if r < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == ErrorKind::Interrupted && !interrupted() {
                continue;
            }
            return Err(err.into());
        }
        for (pfd, s) in fds.iter_mut().zip(&mut streams) {
            if pfd.fd < 0 || pfd.revents == 0 {
                continue;
            }
            if read_message(s, &mut buf)? {
                s.write_all(&buf)?;
            } else {
                pfd.fd = -1;
                open -= 1;
            }
        }
    }
    Ok(())
}

/// Echoes on every stream from a thread of its own.
fn serve_uds_threads(streams: Vec<UnixStream>, size: usize) -> anyhow::Result<()> {
    std::thread::scope(|sc| -> anyhow::Result<()> {
        let handles: Vec<_> = streams
            .into_iter()
            .map(|mut s| {
                sc.spawn(move || -> anyhow::Result<()> {
                    s.write_all(&go_message(size))?;
                    let mut buf = vec![0u8; size];
                    while read_message(&mut s, &mut buf)? {
                        s.write_all(&buf)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow!("server thread panicked"))??;
        }
        Ok(())
    })
}

/// Accepts the ipc-channel clients (one one-shot server each), on a thread of its own so that
/// a client that never connects fails the round after [`CONNECT_LIMIT`] instead of hanging it.
fn accept_ipc(
    servers: Vec<IpcOneShotServer<crate::client::IpcHalves>>,
) -> anyhow::Result<Vec<crate::client::IpcHalves>> {
    let n = servers.len();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let halves: Result<Vec<_>, String> = servers
            .into_iter()
            .map(|s| s.accept().map(|(_, h)| h).map_err(|e| format!("{e:?}")))
            .collect();
        let _ = tx.send(halves);
    });
    rx.recv_timeout(CONNECT_LIMIT)
        .map_err(|_| anyhow!("the {n} ipc-channel clients did not all connect"))?
        .map_err(|e| anyhow!("accepting an ipc-channel client: {e}"))
}

/// Echoes from this thread with one `IpcReceiverSet` select loop until every client left.
fn serve_ipc(halves: Vec<crate::client::IpcHalves>, size: usize) -> anyhow::Result<()> {
    let mut set = IpcReceiverSet::new()?;
    let mut replies = HashMap::new();
    for (requests, reply) in halves {
        reply.send(&go_message(size))?;
        replies.insert(set.add(requests)?, reply);
    }
    while !replies.is_empty() {
        for event in set.select()? {
            match event {
                IpcSelectionResult::MessageReceived(id, msg) => {
                    let bytes: Vec<u8> = msg
                        .to()
                        .map_err(|e| anyhow!("ipc-channel request: {e:?}"))?;
                    replies
                        .get(&id)
                        .ok_or_else(|| anyhow!("ipc-channel request from unknown receiver {id}"))?
                        .send(&bytes)?;
                }
                IpcSelectionResult::ChannelClosed(id) => {
                    replies.remove(&id);
                }
            }
        }
    }
    Ok(())
}

/// Runs one round of `row` with `n` clients; returns what each client measured.
fn clients_round(
    plan: &ClientsPlan<'_>,
    row: ClientRow,
    n: usize,
    round: u32,
) -> anyhow::Result<Vec<ClientResult>> {
    let name = format!("{}-c{n}-r{round}-{}", plan.base, row.id());
    let size = plan.args.size;
    let config = |wait| Config {
        capacity: plan.ring_size,
        wait,
    };
    let wait = plan.args.wait;
    let names = |address: &str| vec![address.to_owned(); n];
    match row {
        ClientRow::Plain => {
            if n != 1 {
                bail!("the plain channel row takes one client");
            }
            let mut ch = Channel::create(&name, &config(wait))?;
            ch.send(&go_message(size))?;
            let clients = Clients::spawn(plan, row, round, &name, &names(&name))?;
            echo_channel(&mut ch)?;
            clients.collect()
        }
        ClientRow::Selector | ClientRow::Threads => {
            // The selector does the waiting of its server; a thread per client waits as the
            // clients do.
            let wait = if row == ClientRow::Threads {
                wait
            } else {
                WaitStrategy::Block
            };
            let listener = Listener::bind_with_limit(&name, &config(wait), n)?;
            let clients = Clients::spawn(plan, row, round, &name, &names(&name))?;
            let conns = accept_all(&listener, n)?;
            if row == ClientRow::Selector {
                serve_selector(conns, size)?;
            } else {
                serve_threads(conns, size)?;
            }
            clients.collect()
        }
        ClientRow::Async => {
            let listener = Listener::bind_with_limit(&name, &config(WaitStrategy::Block), n)?;
            let clients = Clients::spawn(plan, row, round, &name, &names(&name))?;
            let conns = accept_all(&listener, n)?;
            serve_async(conns, size)?;
            clients.collect()
        }
        ClientRow::UdsPoll | ClientRow::UdsThreads => {
            let path = std::env::temp_dir().join(format!("{name}.sock"));
            let _ = std::fs::remove_file(&path);
            let listener =
                UnixListener::bind(&path).with_context(|| format!("binding {path:?}"))?;
            let file = SocketFile(path);
            let clients =
                Clients::spawn(plan, row, round, &name, &names(&file.0.to_string_lossy()))?;
            let streams = accept_uds(&listener, n)?;
            drop(file);
            if row == ClientRow::UdsPoll {
                serve_uds_poll(streams, size)?;
            } else {
                serve_uds_threads(streams, size)?;
            }
            clients.collect()
        }
        ClientRow::IpcChannel => {
            let mut servers = Vec::with_capacity(n);
            let mut addresses = Vec::with_capacity(n);
            for _ in 0..n {
                let (server, address) = IpcOneShotServer::new()?;
                servers.push(server);
                addresses.push(address);
            }
            let clients = Clients::spawn(plan, row, round, &name, &addresses)?;
            serve_ipc(accept_ipc(servers)?, size)?;
            clients.collect()
        }
    }
}

/// What one round of one row gave: all clients' round trips, and their p99s.
fn summarise(results: &[ClientResult]) -> ClientsRound {
    let start = results.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let end = results.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let total: u64 = results.iter().map(|r| r.round_trips).sum();
    let seconds = end.saturating_sub(start) as f64 / 1e9;
    let mut p99s: Vec<u64> = results.iter().map(|r| r.p99_ns).collect();
    p99s.sort_unstable();
    ClientsRound {
        total: RoundTrips {
            round_trips: total,
            seconds,
            rt_per_s: if seconds > 0.0 {
                total as f64 / seconds
            } else {
                0.0
            },
            slices: Vec::new(),
        },
        p99_median_client_ns: median_u64(&p99s),
        p99_worst_client_ns: p99s.last().copied().unwrap_or(0),
    }
}

/// The median of sorted values (the lower middle one of an even count).
fn median_u64(sorted: &[u64]) -> u64 {
    match sorted.len() {
        0 => 0,
        n => sorted[(n - 1) / 2],
    }
}

fn median_best(mut values: Vec<u64>) -> MedianBest {
    values.sort_unstable();
    MedianBest {
        median: median_u64(&values),
        best: values.first().copied().unwrap_or(0),
    }
}

/// One row at one client count, over the rounds.
struct Cell {
    row: ClientRow,
    clients: usize,
    rounds: Vec<ClientsRound>,
    results: Vec<ClientResult>,
}

impl Cell {
    fn result(&self) -> ClientsResult {
        let (best, median) = best_and_median(self.rounds.iter().map(|r| r.total.rt_per_s));
        let pick = |f: fn(&ClientResult) -> u64| {
            let mut v: Vec<u64> = self.results.iter().map(f).collect();
            v.sort_unstable();
            median_u64(&v)
        };
        ClientsResult {
            row: self.row.name().to_owned(),
            clients: self.clients,
            rounds: self.rounds.clone(),
            best_rt_per_s: best,
            median_rt_per_s: median,
            latency_ns: Latency {
                p50: pick(|r| r.p50_ns),
                p99: pick(|r| r.p99_ns),
                p999: pick(|r| r.p999_ns),
                max: self.results.iter().map(|r| r.max_ns).max().unwrap_or(0),
            },
            p99_median_client_ns: median_best(
                self.rounds.iter().map(|r| r.p99_median_client_ns).collect(),
            ),
            p99_worst_client_ns: median_best(
                self.rounds.iter().map(|r| r.p99_worst_client_ns).collect(),
            ),
        }
    }
}

/// `ipc-parent clients`.
pub(crate) fn run(args: ClientsArgs) -> anyhow::Result<()> {
    if args.size < MIN_SIZE {
        bail!("clients need --size of at least {MIN_SIZE} bytes (the round-trip number)");
    }
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    if args.counts.is_empty() || args.counts.contains(&0) {
        bail!("every client count must be at least 1");
    }
    let rows = parse_client_rows(&args.transport)?;
    let session = Session::start(args.common.clone(), true)?;
    let plan = ClientsPlan {
        session: &session,
        base: format!("{HARNESS_PREFIX}{}", session.base),
        ring_size: args.common.ring_size.unwrap_or(DEFAULT_RING),
        args,
    };
    let args = &plan.args;
    let timed = match args.count {
        Some(count) => format!("{count} timed round trips per client"),
        None => format!("{:?} of timed round trips", args.duration),
    };
    session.say(&format!(
        "clients {:?}; raw messages of {} B; {timed} after {:?} of warmup; shm clients wait {}; \
         pace {:?}",
        args.counts, args.size, args.common.warmup, args.wait, args.pace,
    ));

    // Every client runs its warmup and its timed round trips (`--count` of them take what they
    // take); starting n clients takes a while.
    let timed = if args.count.is_none() {
        args.duration
    } else {
        Duration::ZERO
    };
    let per_cell = |n: usize| {
        args.common.warmup
            + timed
            + Duration::from_millis(60) * u32::try_from(n).unwrap_or(u32::MAX)
    };
    let planned: Duration = args
        .counts
        .iter()
        .map(|&n| {
            let cells = rows.iter().filter(|row| row.runs_with(n)).count();
            per_cell(n) * u32::try_from(cells).unwrap_or(u32::MAX) * args.common.rounds
        })
        .sum();
    session.announce(
        planned,
        &format!(
            "{} client count(s) x {} row(s) x {} round(s)",
            args.counts.len(),
            rows.len(),
            args.common.rounds
        ),
        args.count.is_some(),
    );
    let mut cells: Vec<Cell> = Vec::new();
    for &n in &args.counts {
        let first = cells.len();
        let schedule = Schedule {
            slices: 1,
            per_piece: per_cell(n),
            part: Some(format!("{n} client{}", if n == 1 { "" } else { "s" })),
        };
        cells.extend(rows.iter().filter(|row| row.runs_with(n)).map(|&row| Cell {
            row,
            clients: n,
            rounds: Vec::new(),
            results: Vec::new(),
        }));
        let label = |cell: &Cell| cell.row.name().to_owned();
        session.rounds(&mut cells[first..], &schedule, label, |cell, round, _| {
            let results = clients_round(&plan, cell.row, n, round)
                .with_context(|| format!("{} with {n} clients, round {round}", cell.row.name()))?;
            let r = summarise(&results);
            session.say(&format!(
                "[{} x{n}] round {round}: [{}] round trips in [{:.3}] seconds ([{:.1}] \
                 round-trips/second), client p99 median {:.1} us, worst {:.1} us",
                cell.row.name(),
                r.total.round_trips,
                r.total.seconds,
                r.total.rt_per_s,
                r.p99_median_client_ns as f64 / 1e3,
                r.p99_worst_client_ns as f64 / 1e3,
            ));
            cell.rounds.push(r);
            cell.results.extend(results);
            Ok(())
        })?;
    }

    let results = Results::Clients(ClientsDoc {
        counts: args.counts.clone(),
        size: args.size,
        count: args.count,
        duration_s: args.duration.as_secs_f64(),
        pace_s: args.pace.as_secs_f64(),
        wait: args.wait.to_string(),
        ring_size: plan.ring_size,
        results: cells.iter().map(Cell::result).collect(),
    });
    drop(plan);
    session.finish(results)
}
