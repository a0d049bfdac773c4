//! Traffic to watch: a channel of orders (256-byte messages), a channel of bulk transfers
//! (64 KiB), and a topic of ticks with two subscribers, for `shmlink top`, `stat` and `tap` to
//! show (`cli/capture-observe.sh` captures them for docs/observe.md).
//!
//! `cargo run -p shmlink-cli --example traffic -- [SECONDS] [PREFIX]`: prints `ready` once
//! everything is flowing, and ends after SECONDS (10 by default).

use std::time::{Duration, Instant};

use shmlink::{Channel, Config, Publisher, Subscriber, TopicConfig, WaitStrategy};

/// Sends `size`-byte messages on `tx` at about `per_sec` a second until `end`, while a thread
/// receives them on `rx`.
fn stream(mut tx: Channel, mut rx: Channel, size: usize, per_sec: u64, end: Instant) {
    let reader = std::thread::spawn(move || while rx.recv().is_ok() {});
    let msg = vec![0x5a; size];
    let start = Instant::now();
    let mut sent = 0u64;
    while Instant::now() < end {
        tx.send(&msg).expect("send");
        sent += 1;
        let due = start + Duration::from_secs_f64(sent as f64 / per_sec as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    drop(tx);
    reader.join().expect("reader");
}

fn main() -> shmlink::Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(10.0, |a| a.parse().expect("SECONDS"));
    let prefix = args.next().unwrap_or_else(|| "observe".into());
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let config = Config::default();
    let mut threads = Vec::new();
    for (what, size, rate) in [("orders", 256, 20_000), ("bulk", 64 << 10, 500)] {
        let name = format!("{prefix}-{what}");
        let tx = Channel::create(&name, &config)?;
        let rx = Channel::connect(&name, WaitStrategy::Block)?;
        threads.push(std::thread::spawn(move || stream(tx, rx, size, rate, end)));
    }
    let ticks = format!("{prefix}-ticks");
    let mut publisher = Publisher::create(&ticks, &TopicConfig::default())?;
    for _ in 0..2 {
        let mut sub = Subscriber::connect(&ticks, WaitStrategy::Block)?;
        threads.push(std::thread::spawn(move || while sub.recv().is_ok() {}));
    }
    println!("ready");
    let mut n = 0u64;
    while Instant::now() < end {
        publisher.send_json(&serde_json::json!({ "tick": n, "price": 100.0 + (n % 7) as f64 }))?;
        n += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(publisher);
    for t in threads {
        t.join().expect("traffic thread");
    }
    Ok(())
}
