//! `ipc-clients`: N client processes against one server, aggregate round trips per second and
//! per-client p99, beside the same over a Unix socket served by one `poll(2)` loop.
//!
//! ```text
//! cargo run --release -p shmlink-harness --bin ipc-clients -- --clients 1,4,16
//! ```
//!
//! Rows (`--modes`):
//! * `plain`: one `Channel` (create/connect), one client only: the baseline for `--clients 1`;
//! * `selector`: a `Listener`, and one server thread serving every connection with a `Selector`;
//! * `threads`: a `Listener`, and one server thread per connection;
//! * `async`: an `AsyncListener` and a task per connection on a current-thread tokio runtime,
//!   the clients async too (a current-thread runtime each);
//! * `uds`: Unix stream sockets, one server thread with a `poll(2)` loop over all of them.
//!
//! Every client is a process (this binary run again with `--child`). It connects, waits for a
//! "go" that the server sends once every client is connected, makes `--warmup` untimed round
//! trips, then `--msgs` timed ones of `--size` bytes, checking each reply, and prints its
//! monotonic start and end times and its p99. The aggregate is all timed round trips over the
//! span from the first client's start to the last one's end. Modes run interleaved, `--rounds`
//! times; the table gives the median round (and every round's figure).

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use shmlink::tokio::{AsyncChannel, AsyncListener};
use shmlink::{Channel, Config, Connection, Error, Listener, Selector, WaitStrategy};

#[derive(Parser, Debug)]
#[command(about = "N client processes against one server: shmlink listener vs uds poll loop")]
struct Args {
    /// Client counts to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    clients: Vec<usize>,
    /// Rows to run, comma-separated: plain, selector, threads, async, uds.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "plain,selector,threads,async,uds"
    )]
    modes: Vec<String>,
    /// Timed round trips per client.
    #[arg(long, default_value_t = 20_000)]
    msgs: u64,
    /// Untimed round trips per client before the timed ones.
    #[arg(long, default_value_t = 2_000)]
    warmup: u64,
    /// Payload bytes per message (at least 8).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Rounds per mode (interleaved); the median is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// How shmlink clients wait (`plain` and `threads` servers too): spin, yield or block.
    #[arg(long, default_value = "block")]
    wait: WaitStrategy,
    /// Internal: run as a client (MODE NAME MSGS WARMUP SIZE).
    #[arg(long, num_args = 5, hide = true)]
    child: Option<Vec<String>>,
}

/// What one client measured.
struct ClientResult {
    start_ns: u64,
    end_ns: u64,
    count: u64,
    p99_ns: u64,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn payload(i: u64, size: usize) -> Vec<u8> {
    let mut p = vec![0xa5u8; size];
    p[..8].copy_from_slice(&i.to_le_bytes());
    p
}

fn check(reply: &[u8], i: u64, size: usize) -> Result<()> {
    if reply.len() != size || reply[..8] != i.to_le_bytes() {
        bail!("reply {i} is wrong ({} bytes)", reply.len());
    }
    Ok(())
}

fn p99(mut lat: Vec<u64>) -> u64 {
    if lat.is_empty() {
        return 0;
    }
    lat.sort_unstable();
    lat[(lat.len() * 99 / 100).min(lat.len() - 1)]
}

/// A synchronous round trip, for the client loop.
trait RoundTrip {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> Result<()>;
}

impl RoundTrip for Channel {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> Result<()> {
        self.send(msg)?;
        self.recv_into(reply)?;
        Ok(())
    }
}

impl RoundTrip for UnixStream {
    fn round_trip(&mut self, msg: &[u8], reply: &mut Vec<u8>) -> Result<()> {
        self.write_all(msg)?;
        reply.resize(msg.len(), 0);
        self.read_exact(reply)?;
        Ok(())
    }
}

fn client_loop(
    ch: &mut impl RoundTrip,
    msgs: u64,
    warmup: u64,
    size: usize,
) -> Result<ClientResult> {
    let mut reply = Vec::with_capacity(size);
    for i in 0..warmup {
        ch.round_trip(&payload(i, size), &mut reply)?;
        check(&reply, i, size)?;
    }
    let mut lat = Vec::with_capacity(msgs as usize);
    let msg = payload(0, size);
    let start_ns = monotonic_ns();
    let mut msg = msg;
    for i in 0..msgs {
        msg[..8].copy_from_slice(&i.to_le_bytes());
        let t = Instant::now();
        ch.round_trip(&msg, &mut reply)?;
        lat.push(t.elapsed().as_nanos() as u64);
        check(&reply, i, size)?;
    }
    Ok(ClientResult {
        start_ns,
        end_ns: monotonic_ns(),
        count: msgs,
        p99_ns: p99(lat),
    })
}

fn run_child(spec: &[String], wait: WaitStrategy) -> Result<ClientResult> {
    let [mode, name, msgs, warmup, size] = spec else {
        bail!("--child needs MODE NAME MSGS WARMUP SIZE");
    };
    let (msgs, warmup, size): (u64, u64, usize) = (msgs.parse()?, warmup.parse()?, size.parse()?);
    let limit = Duration::from_secs(30);
    match mode.as_str() {
        "plain" => {
            let mut ch = Channel::connect_timeout(name, wait, limit)?;
            ch.recv_timeout(limit)?;
            client_loop(&mut ch, msgs, warmup, size)
        }
        "selector" | "threads" => {
            let mut ch = Listener::connect_timeout(name, wait, limit)?;
            ch.recv_timeout(limit)?;
            client_loop(&mut ch, msgs, warmup, size)
        }
        "uds" => {
            let mut s = UnixStream::connect(name)?;
            let mut go = vec![0u8; size];
            s.read_exact(&mut go)?;
            client_loop(&mut s, msgs, warmup, size)
        }
        "async" => tokio::runtime::Builder::new_current_thread()
            .build()?
            .block_on(async_client(name, msgs, warmup, size)),
        other => bail!("unknown mode {other}"),
    }
}

async fn async_client(name: &str, msgs: u64, warmup: u64, size: usize) -> Result<ClientResult> {
    let mut ch = shmlink::tokio::connect(name).await?;
    let mut reply = Vec::with_capacity(size);
    ch.recv_into(&mut reply).await?;
    for i in 0..warmup {
        ch.send(&payload(i, size)).await?;
        ch.recv_into(&mut reply).await?;
        check(&reply, i, size)?;
    }
    let mut lat = Vec::with_capacity(msgs as usize);
    let mut msg = payload(0, size);
    let start_ns = monotonic_ns();
    for i in 0..msgs {
        msg[..8].copy_from_slice(&i.to_le_bytes());
        let t = Instant::now();
        ch.send(&msg).await?;
        ch.recv_into(&mut reply).await?;
        lat.push(t.elapsed().as_nanos() as u64);
        check(&reply, i, size)?;
    }
    Ok(ClientResult {
        start_ns,
        end_ns: monotonic_ns(),
        count: msgs,
        p99_ns: p99(lat),
    })
}

/// Child processes, killed and reaped if the round fails.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn_clients(args: &Args, mode: &str, name: &str, n: usize) -> Result<Children> {
    let exe = std::env::current_exe()?;
    let mut children = Children(Vec::new());
    for _ in 0..n {
        children.0.push(
            Command::new(&exe)
                .arg("--wait")
                .arg(args.wait.as_str())
                .arg("--child")
                .args([
                    mode,
                    name,
                    &args.msgs.to_string(),
                    &args.warmup.to_string(),
                    &args.size.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()?,
        );
    }
    Ok(children)
}

fn collect(mut children: Children) -> Result<Vec<ClientResult>> {
    let mut out = Vec::new();
    for c in &mut children.0 {
        let mut text = String::new();
        if let Some(mut stdout) = c.stdout.take() {
            stdout.read_to_string(&mut text)?;
        }
        let status = c.wait()?;
        if !status.success() {
            bail!("client {} failed: {status}", c.id());
        }
        let f: Vec<u64> = text
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("client output {text:?}"))?;
        let [start_ns, end_ns, count, p99_ns] = f[..] else {
            bail!("client output {text:?}");
        };
        out.push(ClientResult {
            start_ns,
            end_ns,
            count,
            p99_ns,
        });
    }
    children.0.clear();
    Ok(out)
}

/// Echoes on `conns` from one thread with a selector until every client left.
fn serve_selector(mut conns: Vec<Connection>, size: usize) -> Result<()> {
    for c in &mut conns {
        c.send(&vec![0u8; size])?;
    }
    let mut selector = Selector::new();
    let mut buf = Vec::with_capacity(size);
    let mut gone = Vec::new();
    while !conns.is_empty() {
        gone.clear();
        for &i in selector.wait(&mut conns, None)? {
            let c = &mut conns[i];
            match c.try_recv() {
                Ok(m) => {
                    buf.clear();
                    buf.extend_from_slice(&m);
                }
                Err(Error::Empty) => continue,
                Err(e) if e.is_disconnect() => {
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

fn echo_channel(ch: &mut Channel) -> Result<()> {
    let mut buf = Vec::new();
    loop {
        match ch.recv_into(&mut buf) {
            Ok(_) => ch.send(&buf)?,
            Err(e) if e.is_disconnect() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

fn serve_uds(mut streams: Vec<UnixStream>, size: usize) -> Result<()> {
    for s in &mut streams {
        s.write_all(&vec![0u8; size])?;
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
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err.into());
        }
        for (i, pfd) in fds.iter_mut().enumerate() {
            if pfd.fd < 0 || pfd.revents == 0 {
                continue;
            }
            let s = &mut streams[i];
            let n = s.read(&mut buf[..1])?;
            if n == 0 {
                pfd.fd = -1;
                open -= 1;
                continue;
            }
            s.read_exact(&mut buf[1..])?;
            s.write_all(&buf)?;
        }
    }
    Ok(())
}

async fn serve_async(mut listener: AsyncListener, n: usize, size: usize) -> Result<()> {
    let mut conns: Vec<AsyncChannel<Connection>> = Vec::new();
    for _ in 0..n {
        conns.push(listener.accept().await?);
    }
    let mut tasks = Vec::new();
    for mut c in conns {
        tasks.push(tokio::spawn(async move {
            c.send(&vec![0u8; size]).await?;
            let mut buf = Vec::new();
            loop {
                match c.recv_into(&mut buf).await {
                    Ok(_) => c.send(&buf).await?,
                    Err(e) if e.is_disconnect() => return Ok::<(), Error>(()),
                    Err(e) => return Err(e),
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

fn accept_all(listener: &Listener, n: usize) -> Result<Vec<Connection>> {
    (0..n)
        .map(|_| {
            listener
                .accept_timeout(Duration::from_secs(30))
                .map_err(anyhow::Error::from)
        })
        .collect()
}

/// Runs one round of `mode` with `n` clients; `None` when the mode does not apply.
fn round(args: &Args, mode: &str, n: usize, seq: usize) -> Result<Option<Vec<ClientResult>>> {
    let name = format!("ipcclients-{}-{seq}", std::process::id());
    let server_cfg = Config {
        capacity: 1 << 20,
        wait: WaitStrategy::Block,
    };
    let results = match mode {
        "plain" => {
            if n != 1 {
                return Ok(None);
            }
            let mut ch = Channel::create(
                &name,
                &Config {
                    wait: args.wait,
                    ..server_cfg.clone()
                },
            )?;
            ch.send(&vec![0u8; args.size])?;
            let children = spawn_clients(args, mode, &name, 1)?;
            echo_channel(&mut ch)?;
            collect(children)?
        }
        "selector" => {
            let listener = Listener::bind_with_limit(&name, &server_cfg, n.max(1))?;
            let children = spawn_clients(args, mode, &name, n)?;
            let conns = accept_all(&listener, n)?;
            serve_selector(conns, args.size)?;
            collect(children)?
        }
        "threads" => {
            let cfg = Config {
                wait: args.wait,
                ..server_cfg.clone()
            };
            let listener = Listener::bind_with_limit(&name, &cfg, n.max(1))?;
            let children = spawn_clients(args, mode, &name, n)?;
            let conns = accept_all(&listener, n)?;
            let size = args.size;
            std::thread::scope(|s| -> Result<()> {
                let handles: Vec<_> = conns
                    .into_iter()
                    .map(|mut c| {
                        s.spawn(move || -> Result<()> {
                            c.send(&vec![0u8; size])?;
                            echo_channel(&mut c)
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().map_err(|_| anyhow!("server thread panicked"))??;
                }
                Ok(())
            })?;
            collect(children)?
        }
        "async" => {
            let listener = AsyncListener::bind(&name, &server_cfg)?;
            let children = spawn_clients(args, mode, &name, n)?;
            tokio::runtime::Builder::new_current_thread()
                .build()?
                .block_on(serve_async(listener, n, args.size))?;
            collect(children)?
        }
        "uds" => {
            let path = std::env::temp_dir().join(format!("{name}.sock"));
            let _ = std::fs::remove_file(&path);
            let listener = UnixListener::bind(&path)?;
            let children = spawn_clients(args, mode, &path.to_string_lossy(), n)?;
            let streams = (0..n)
                .map(|_| listener.accept().map(|(s, _)| s))
                .collect::<Result<Vec<_>, _>>();
            let _ = std::fs::remove_file(&path);
            serve_uds(streams?, args.size)?;
            collect(children)?
        }
        other => bail!("unknown mode {other}"),
    };
    Ok(Some(results))
}

struct Summary {
    rt_per_s: f64,
    p99_median_us: f64,
    p99_max_us: f64,
}

fn summarise(results: &[ClientResult]) -> Summary {
    let start = results.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let end = results.iter().map(|r| r.end_ns).max().unwrap_or(0);
    let total: u64 = results.iter().map(|r| r.count).sum();
    let mut p99s: Vec<u64> = results.iter().map(|r| r.p99_ns).collect();
    p99s.sort_unstable();
    Summary {
        rt_per_s: total as f64 / ((end - start).max(1) as f64 / 1e9),
        p99_median_us: p99s.get(p99s.len() / 2).copied().unwrap_or(0) as f64 / 1e3,
        p99_max_us: p99s.last().copied().unwrap_or(0) as f64 / 1e3,
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(spec) = &args.child {
        let r = run_child(spec, args.wait)?;
        println!(
            "result {} {} {} {}",
            r.start_ns, r.end_ns, r.count, r.p99_ns
        );
        return Ok(());
    }
    if args.size < 8 {
        bail!("--size must be at least 8");
    }
    println!(
        "ipc-clients: {} timed round trips of {} B per client (after {} untimed), {} rounds, clients wait {}",
        args.msgs, args.size, args.warmup, args.rounds, args.wait
    );
    println!(
        "{:>7}  {:<9} {:>14} {:>13} {:>11}  rounds (rt/s)",
        "clients", "mode", "median rt/s", "p99 median", "p99 max"
    );
    let mut seq = 0;
    for &n in &args.clients {
        let mut per_mode: Vec<(String, Vec<Summary>)> =
            args.modes.iter().map(|m| (m.clone(), Vec::new())).collect();
        for _ in 0..args.rounds {
            for (mode, sums) in &mut per_mode {
                seq += 1;
                if let Some(results) = round(&args, mode, n, seq)? {
                    sums.push(summarise(&results));
                }
            }
        }
        for (mode, mut sums) in per_mode {
            if sums.is_empty() {
                continue;
            }
            let rounds: Vec<String> = sums.iter().map(|s| format!("{:.0}", s.rt_per_s)).collect();
            sums.sort_by(|a, b| a.rt_per_s.total_cmp(&b.rt_per_s));
            let m = &sums[sums.len() / 2];
            println!(
                "{n:>7}  {mode:<9} {:>14.0} {:>10.1} us {:>8.1} us  {}",
                m.rt_per_s,
                m.p99_median_us,
                m.p99_max_us,
                rounds.join(" ")
            );
        }
    }
    Ok(())
}
