//! One busy client's round trip through a server thread, in one process (threads, not
//! processes: the cost of the server's wait is what is measured).
//!
//! - `selector/round_trip/plain`: the server blocks in `recv` on the client's channel alone.
//! - `selector/round_trip/<n>`: the server waits with a `Selector` over `n` channels, the
//!   client's and `n - 1` idle ones (peers alive, never sending), and answers what is ready.
//!
//! - `selector/paced/<plain|1|1000>`: the same servers, the client pausing [`PACE`] (1 ms)
//!   before each round trip, so that the server really goes to sleep between two: the time of
//!   a round trip alone (the pause is not counted). After the group the bench prints the median
//!   and the 99th percentile of the round trips it timed.
//!
//! Every end waits with `Block`; messages are 64 bytes. The client is on the channel in the
//! middle of the set, so with more than 128 channels it is not among the first words waited on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use shmlink::{Channel, Config, Selector, WaitStrategy};

const SIZE: usize = 64;
/// The client's pause before each round trip of the paced rows.
const PACE: Duration = Duration::from_millis(1);

/// `n` channels: the client ends (creators) and the server ends (connectors).
fn channels(tag: &str, n: usize) -> (Vec<Channel>, Vec<Channel>) {
    let config = Config {
        capacity: 64 * 1024,
        wait: WaitStrategy::Block,
    };
    let (mut clients, mut servers) = (Vec::new(), Vec::new());
    for i in 0..n {
        let name = format!("b{}-{tag}-{i}", std::process::id());
        let client = Channel::create(&name, &config).expect("create");
        servers.push(Channel::connect(&name, WaitStrategy::Block).expect("connect"));
        // The name is only needed to connect.
        let _ = shmlink::testing::unlink(&name);
        clients.push(client);
    }
    (clients, servers)
}

/// Runs a server thread over `n` channels (`None`: a plain `recv` loop on one), and measures
/// round trips of the client on the middle channel (after a pause of [`PACE`] each if `paced`).
fn bench_server(c: &mut Criterion, id: &str, n: Option<usize>, paced: bool) {
    let count = n.unwrap_or(1);
    let (mut clients, mut servers) = channels(id, count);
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; SIZE];
        if n.is_none() {
            let ch = &mut servers[0];
            loop {
                match ch.recv() {
                    Ok(msg) => buf.copy_from_slice(&msg),
                    Err(_) => return,
                }
                if ch.send(&buf).is_err() {
                    return;
                }
            }
        }
        let mut selector = Selector::new();
        while !stopping.load(Ordering::Relaxed) {
            let ready = selector
                .wait(&mut servers, Some(Duration::from_millis(100)))
                .to_vec();
            for i in ready {
                let ch = &mut servers[i];
                match ch.try_recv() {
                    Ok(msg) => buf.copy_from_slice(&msg),
                    Err(_) => continue,
                }
                let _ = ch.send(&buf);
            }
        }
    });
    let client = &mut clients[count / 2];
    let msg = [7u8; SIZE];
    let mut samples = Vec::new();
    let group = if paced { "paced" } else { "round_trip" };
    c.bench_function(&format!("selector/{group}/{id}"), |b| {
        b.iter_custom(|iters| {
            if !paced {
                let started = Instant::now();
                for _ in 0..iters {
                    client.send(&msg).expect("send");
                    let reply = client.recv().expect("recv");
                    assert_eq!(reply.len(), SIZE);
                }
                return started.elapsed();
            }
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                std::thread::sleep(PACE);
                let started = Instant::now();
                client.send(&msg).expect("send");
                let reply = client.recv().expect("recv");
                assert_eq!(reply.len(), SIZE);
                let one = started.elapsed();
                samples.push(one);
                took += one;
            }
            took
        })
    });
    if paced {
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
        eprintln!(
            "selector/paced/{id}: {} round trips, median {:?}, p99 {:?}",
            samples.len(),
            at(0.5),
            at(0.99)
        );
    }
    stop.store(true, Ordering::Relaxed);
    drop(clients);
    server.join().expect("server thread");
}

fn round_trip(c: &mut Criterion) {
    bench_server(c, "plain", None, false);
    bench_server(c, "1", Some(1), false);
    bench_server(c, "1000", Some(1000), false);
}

fn paced(c: &mut Criterion) {
    bench_server(c, "plain", None, true);
    bench_server(c, "1", Some(1), true);
    bench_server(c, "1000", Some(1000), true);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = round_trip
}
criterion_group! {
    name = paced_benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = paced
}
criterion_main!(benches, paced_benches);
