//! A Rust publisher for Python subscribers (or Rust ones): makes the topic NAME, waits until
//! SUBSCRIBERS have joined, publishes COUNT JSON messages `{"seq": i, "from": "rust"}` and
//! closes the topic.
//!
//! ```text
//! cargo run -p shmlink-python --example topic_publisher -- ticks 10 1
//! # then: python examples/topic.py sub ticks
//! ```
//!
//! Prints `ready` once the topic exists and `sent` once every message went.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::json;
use shmlink::{Publisher, TopicConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args
        .next()
        .ok_or("usage: topic_publisher NAME COUNT SUBSCRIBERS")?;
    let count: u64 = args.next().map_or(Ok(10), |c| c.parse())?;
    let subscribers: usize = args.next().map_or(Ok(1), |c| c.parse())?;
    let mut publisher = Publisher::create(&name, &TopicConfig::default())?;
    println!("ready");
    std::io::stdout().flush()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while publisher.subscriber_count() < subscribers {
        if Instant::now() > deadline {
            return Err("the subscribers did not come within a minute".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for seq in 0..count {
        publisher.send_json(&json!({ "seq": seq, "from": "rust" }))?;
    }
    println!("sent");
    Ok(())
}
