//! A publisher: creates the topic `ticks` and publishes a numbered tick (a plain value, read in
//! place by every subscriber) ten times a second, saying how many subscribers it has.
//!
//! ```text
//! cargo run --example topic_pub            # in one terminal
//! cargo run --example topic_sub            # in as many others as you like
//! ```
//!
//! `--count N` stops after N ticks (the subscribers then see the topic close).

use std::time::Duration;

use shmlink::zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
use shmlink::{Publisher, TopicConfig};

/// What each message carries.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Debug)]
#[repr(C)]
struct Tick {
    seq: u64,
    unix_millis: u64,
}

fn main() -> Result<(), shmlink::Error> {
    let args: Vec<String> = std::env::args().collect();
    let count = match args.iter().position(|a| a == "--count") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .expect("--count takes a number"),
        None => u64::MAX,
    };
    let name = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with("--") && a.parse::<u64>().is_err())
        .map_or("ticks", String::as_str);
    let mut publisher = Publisher::create(name, &TopicConfig::default())?;
    println!("publishing on {name}");
    for seq in 0..count {
        let unix_millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        publisher.send_value(&Tick { seq, unix_millis })?;
        if seq % 10 == 0 {
            println!("tick {seq}: {} subscribers", publisher.subscriber_count());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
