//! `send_batch` against one-by-one `send` of the same records, between two threads.
//!
//! - `batch/<size>/one_by_one`: the producer sends each record with `send`.
//! - `batch/<size>/send_batch`: the producer hands the records 64 at a time to `send_batch`.
//!
//! In both the consumer thread takes what is there with `recv_batch`, and the figure is the
//! time per record of a run of records through a 256 KiB ring, both ends waiting with `Block`.
//! Compare the two rows of one size in the same run: their ratio is what a batch buys at that
//! size (see `send_batch`'s documentation for where batching stops paying).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shmlink::{Channel, Config, WaitStrategy};

/// Records per `send_batch` call.
const BATCH: usize = 64;
/// Record sizes.
const SIZES: [usize; 7] = [64, 256, 1024, 4096, 8192, 16 * 1024, 64 * 1024];

fn pair(tag: &str) -> (Channel, Channel) {
    let config = Config {
        capacity: 256 * 1024,
        wait: WaitStrategy::Block,
    };
    let name = format!("bb{}-{tag}", std::process::id());
    let tx = Channel::create(&name, &config).expect("create");
    let rx = Channel::connect(&name, WaitStrategy::Block).expect("connect");
    let _ = shmlink::testing::unlink(&name);
    (tx, rx)
}

/// Moves `n` records of `size` bytes from `tx` to a consumer thread on `rx`, in batches if
/// `batched`; returns how long it took.
fn run(tx: &mut Channel, rx: Channel, size: usize, n: u64, batched: bool) -> (Duration, Channel) {
    let consumer = std::thread::spawn(move || {
        let mut rx = rx;
        let mut got = 0u64;
        let mut sum = 0u64;
        while got < n {
            got += rx
                .recv_batch(usize::MAX, |m| sum = sum.wrapping_add(m[0] as u64))
                .expect("recv_batch") as u64;
        }
        std::hint::black_box(sum);
        rx
    });
    let records: Vec<Vec<u8>> = (0..BATCH).map(|i| vec![i as u8; size]).collect();
    let started = Instant::now();
    let mut sent = 0u64;
    while sent < n {
        let want = (n - sent).min(BATCH as u64) as usize;
        if batched {
            let mut done = 0;
            while done < want {
                done += tx.send_batch(&records[done..want]).expect("send_batch");
            }
        } else {
            for r in &records[..want] {
                tx.send(r).expect("send");
            }
        }
        sent += want as u64;
    }
    let rx = consumer.join().expect("consumer");
    (started.elapsed(), rx)
}

fn batch(c: &mut Criterion) {
    for size in SIZES {
        let mut group = c.benchmark_group(format!("batch/{size}"));
        group.throughput(Throughput::Elements(1));
        for batched in [false, true] {
            let id = if batched { "send_batch" } else { "one_by_one" };
            let (mut tx, rx) = pair(&format!("{size}-{id}"));
            let mut rx = Some(rx);
            group.bench_function(BenchmarkId::from_parameter(id), |b| {
                b.iter_custom(|iters| {
                    let (took, back) = run(&mut tx, rx.take().expect("rx"), size, iters, batched);
                    rx = Some(back);
                    took
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = batch
}
criterion_main!(benches);
