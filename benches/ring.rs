//! The ring in one process, on heap memory (`shmlink::ring::new`): no mapping, no IPC.
//!
//! - `ring/threads/<impl>/<size>`: a producer thread sends fixed-size messages as fast as the
//!   ring takes them, the bench thread reads them. Both spin on full / empty (yielding now and
//!   then, since the machine may have fewer free cores than threads).
//! - `ring/same_thread/<impl>/<size>`: send one message and read it back on one thread: the
//!   protocol's own cost with no cache line moving between cores.
//!
//! Sizes: 8 B, 64 B, 1 KiB, 64 KiB payloads. Every message is copied in by the producer; the
//! consumer checks its length and first and last byte in place (zero copy). Rates are reported
//! both as messages/s and bytes/s of payload.
//!
//! References for small messages (8 B, 64 B), all with 64 KiB of buffer like the shmlink ring:
//! `rtrb` pushing and popping a `[u8; N]` value, `rtrb` moving `N` bytes with
//! `write_chunk_uninit` / `read_chunk` (bytes without framing), and `crossbeam_queue::ArrayQueue`
//! of `[u8; N]`.

use std::hint::{black_box, spin_loop};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use rtrb::{CopyToUninit, RingBuffer};
use shmlink::ring::{Consumer, Producer};
use shmlink::{RecvError, SendError};

const SIZES: [usize; 4] = [8, 64, 1024, 64 * 1024];
/// Bytes of buffer every ring gets (more for 64 KiB frames, which need twice their size).
const RING_BYTES: usize = 64 * 1024;

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Waits politely: spins, and yields the core every so often.
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins % 128 == 0 {
        std::thread::yield_now();
    } else {
        spin_loop();
    }
}

/// Moves `iters` messages from a producer thread to this one; returns the elapsed time.
fn two_threads<P: Send, C>(
    iters: u64,
    tx: &mut P,
    rx: &mut C,
    mut push: impl FnMut(&mut P) -> bool + Send,
    mut pop: impl FnMut(&mut C) -> bool,
) -> Duration {
    std::thread::scope(|s| {
        let start = Instant::now();
        s.spawn(move || {
            let mut spins = 0;
            for _ in 0..iters {
                while !push(tx) {
                    backoff(&mut spins);
                }
            }
        });
        let mut spins = 0;
        for _ in 0..iters {
            while !pop(rx) {
                backoff(&mut spins);
            }
        }
        start.elapsed()
    })
}

fn throughput(size: usize) -> Throughput {
    Throughput::ElementsAndBytes {
        elements: 1,
        bytes: size as u64,
    }
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 7 + 1) as u8).collect()
}

fn shm_ring(size: usize) -> (Producer, Consumer) {
    let capacity = RING_BYTES.max((4 * size).next_power_of_two());
    shmlink::ring::new(capacity).unwrap()
}

#[inline]
fn shm_push(tx: &mut Producer, data: &[u8]) -> bool {
    match tx.try_send(data) {
        Ok(()) => true,
        Err(SendError::Full { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

#[inline]
fn shm_pop(rx: &mut Consumer, size: usize, first: u8, last: u8) -> bool {
    match rx.try_read() {
        Ok(frame) => {
            assert!(frame.len() == size && frame[0] == first && frame[size - 1] == last);
            true
        }
        Err(RecvError::Empty { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

/// Which of the two measurements a row is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Threads,
    SameThread,
}

fn shmlink_row(g: &mut Group<'_>, mode: Mode, size: usize) {
    let data = payload(size);
    let (first, last) = (data[0], data[size - 1]);
    let (mut tx, mut rx) = shm_ring(size);
    g.throughput(throughput(size));
    if mode == Mode::Threads {
        g.bench_function(format!("shmlink/{size}"), |b| {
            b.iter_custom(|iters| {
                two_threads(
                    iters,
                    &mut tx,
                    &mut rx,
                    |tx| shm_push(tx, &data),
                    |rx| shm_pop(rx, size, first, last),
                )
            })
        });
        return;
    }
    g.bench_function(format!("shmlink/{size}"), |b| {
        b.iter(|| {
            assert!(shm_push(&mut tx, black_box(&data)));
            assert!(shm_pop(&mut rx, size, first, last));
        })
    });
}

/// Messages a batch row hands over per call.
const BATCH: usize = 32;

/// `ring/threads/shmlink_batch/<size>`: the same stream with `try_send_batch` and
/// `try_read_batch`, up to [`BATCH`] messages per call.
fn shmlink_batch_row(g: &mut Group<'_>, size: usize) {
    let data = payload(size);
    let (first, last) = (data[0], data[size - 1]);
    let batch = vec![data.as_slice(); BATCH];
    let (mut tx, mut rx) = shm_ring(size);
    g.throughput(throughput(size));
    g.bench_function(format!("shmlink_batch/{size}"), |b| {
        b.iter_custom(|iters| {
            let (tx, rx) = (&mut tx, &mut rx);
            let batch = &batch;
            std::thread::scope(|s| {
                let start = Instant::now();
                s.spawn(move || {
                    let (mut sent, mut spins) = (0, 0);
                    while sent < iters {
                        let n = (iters - sent).min(BATCH as u64) as usize;
                        match tx.try_send_batch(&batch[..n]) {
                            Ok(k) => sent += k as u64,
                            Err(SendError::Full { .. }) => backoff(&mut spins),
                            Err(e) => panic!("{e}"),
                        }
                    }
                });
                let (mut got, mut spins) = (0, 0);
                while got < iters {
                    let check = |msg: &[u8]| {
                        assert!(msg.len() == size && msg[0] == first && msg[size - 1] == last)
                    };
                    match rx.try_read_batch((iters - got) as usize, check) {
                        Ok(k) => got += k as u64,
                        Err(RecvError::Empty { .. }) => backoff(&mut spins),
                        Err(e) => panic!("{e}"),
                    }
                }
                start.elapsed()
            })
        })
    });
}

/// The references, for an `N`-byte message.
fn reference_rows<const N: usize>(g: &mut Group<'_>, mode: Mode) {
    let data = payload(N);
    let value: [u8; N] = data.clone().try_into().unwrap();
    let slots = RING_BYTES / N;

    // rtrb, one `[u8; N]` per slot.
    let (mut p, mut c) = RingBuffer::<[u8; N]>::new(slots);
    g.throughput(throughput(N));
    let threads = mode == Mode::Threads;
    if threads {
        g.bench_function(format!("rtrb/{N}"), |b| {
            b.iter_custom(|iters| {
                two_threads(
                    iters,
                    &mut p,
                    &mut c,
                    |p| p.push(value).is_ok(),
                    |c| c.pop().map(|v| black_box(v)[N - 1] == value[N - 1]).is_ok(),
                )
            })
        });
    } else {
        g.bench_function(format!("rtrb/{N}"), |b| {
            b.iter(|| {
                p.push(black_box(value)).unwrap();
                black_box(c.pop().unwrap());
            })
        });
    }

    // rtrb, a byte ring moving N bytes per message in chunks.
    let (mut p, mut c) = RingBuffer::<u8>::new(RING_BYTES);
    let chunk_push = |p: &mut rtrb::Producer<u8>, data: &[u8]| match p.write_chunk_uninit(N) {
        Ok(mut chunk) => {
            let (a, b) = chunk.as_mut_slices();
            data[..a.len()].copy_to_uninit(a);
            data[a.len()..].copy_to_uninit(b);
            // SAFETY: both slices were just initialised from `data`.
            unsafe { chunk.commit_all() };
            true
        }
        Err(_) => false,
    };
    let chunk_pop = |c: &mut rtrb::Consumer<u8>| match c.read_chunk(N) {
        Ok(chunk) => {
            let (a, b) = chunk.as_slices();
            black_box((a, b));
            chunk.commit_all();
            true
        }
        Err(_) => false,
    };
    if threads {
        g.bench_function(format!("rtrb_chunk/{N}"), |b| {
            b.iter_custom(|iters| {
                two_threads(iters, &mut p, &mut c, |p| chunk_push(p, &data), chunk_pop)
            })
        });
    } else {
        g.bench_function(format!("rtrb_chunk/{N}"), |b| {
            b.iter(|| {
                assert!(chunk_push(&mut p, black_box(&data)));
                assert!(chunk_pop(&mut c));
            })
        });
    }

    // crossbeam's ArrayQueue of `[u8; N]`.
    let q = ArrayQueue::<[u8; N]>::new(slots);
    if threads {
        g.bench_function(format!("array_queue/{N}"), |b| {
            b.iter_custom(|iters| {
                two_threads(
                    iters,
                    &mut &q,
                    &mut &q,
                    |q| q.push(value).is_ok(),
                    |q| q.pop().map(black_box).is_some(),
                )
            })
        });
    } else {
        g.bench_function(format!("array_queue/{N}"), |b| {
            b.iter(|| {
                q.push(black_box(value)).unwrap();
                black_box(q.pop().unwrap());
            })
        });
    }
}

fn ring(c: &mut Criterion) {
    for (name, mode) in [
        ("ring/threads", Mode::Threads),
        ("ring/same_thread", Mode::SameThread),
    ] {
        let mut g = c.benchmark_group(name);
        for size in SIZES {
            shmlink_row(&mut g, mode, size);
        }
        if mode == Mode::Threads {
            shmlink_batch_row(&mut g, 8);
            shmlink_batch_row(&mut g, 64);
        }
        reference_rows::<8>(&mut g, mode);
        reference_rows::<64>(&mut g, mode);
        g.finish();
    }
}

criterion_group!(benches, ring);
criterion_main!(benches);
