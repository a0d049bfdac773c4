//! One busy client's round trip through a server thread, in one process (threads, not
//! processes: the cost of the server's wait is what is measured).
//!
//! - `selector/round_trip/plain`: the server blocks in `recv` on the client's channel alone.
//! - `selector/round_trip/<n>`: the server waits with a `Selector` over `n` channels, the
//!   client's and `n - 1` idle ones (peers alive, never sending), and answers what is ready.
//!
//! Every end waits with `Block`; messages are 64 bytes. The client is on the channel in the
//! middle of the set, so with more than 128 channels it is not among the first words waited on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use shmlink::{Channel, Config, Selector, WaitStrategy};

const SIZE: usize = 64;

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
/// round trips of the client on the middle channel.
fn bench_server(c: &mut Criterion, id: &str, n: Option<usize>) {
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
    c.bench_function(&format!("selector/round_trip/{id}"), |b| {
        b.iter_custom(|iters| {
            let started = Instant::now();
            for _ in 0..iters {
                client.send(&msg).expect("send");
                let reply = client.recv().expect("recv");
                assert_eq!(reply.len(), SIZE);
            }
            started.elapsed()
        })
    });
    stop.store(true, Ordering::Relaxed);
    drop(clients);
    server.join().expect("server thread");
}

fn round_trip(c: &mut Criterion) {
    bench_server(c, "plain", None);
    bench_server(c, "1", Some(1));
    bench_server(c, "1000", Some(1000));
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = round_trip
}
criterion_main!(benches);
