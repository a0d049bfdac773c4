//! A subscriber: joins the topic `ticks` (made by `examples/topic_pub.rs`), asks for the last
//! ticks published before it came, and prints each tick until the publisher closes.
//!
//! ```text
//! cargo run --example topic_pub            # in one terminal
//! cargo run --example topic_sub            # in another
//! ```

use std::time::Duration;

use shmlink::zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
use shmlink::{RecvError, Subscriber, SubscriberConfig, WaitStrategy};

/// What each message carries (the publisher's type).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Debug)]
#[repr(C)]
struct Tick {
    seq: u64,
    unix_millis: u64,
}

fn main() -> Result<(), shmlink::Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "ticks".into());
    // The publisher may not be there yet: try for ten seconds.
    let config = SubscriberConfig {
        wait: WaitStrategy::Block,
        history: 3,
    };
    let mut subscriber = (0..100)
        .find_map(|_| match Subscriber::connect_with(&name, &config) {
            Ok(s) => Some(Ok(s)),
            Err(shmlink::OpenError::NotFound { .. } | shmlink::OpenError::NotReady { .. }) => {
                std::thread::sleep(Duration::from_millis(100));
                None
            }
            Err(e) => Some(Err(e)),
        })
        .unwrap_or(Err(shmlink::OpenError::NotFound {
            channel: name.as_str().into(),
        }))?;
    println!("subscribed to {name} (slot {})", subscriber.slot());
    loop {
        match subscriber.recv_value::<Tick>() {
            Ok(tick) => println!("tick {} at {} ms", tick.seq, tick.unix_millis),
            Err(RecvError::Disconnected { .. }) => {
                println!("the publisher closed {name}");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
    }
}
