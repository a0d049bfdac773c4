//! A client for `examples/server.rs`: connects by name, sends a few JSON requests and prints
//! the replies.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use shmlink::{Channel, Error, WaitStrategy};

#[derive(Serialize)]
struct Request<'a> {
    id: u64,
    text: &'a str,
}

#[derive(Deserialize, Debug)]
struct Reply<'a> {
    id: u64,
    upper: &'a str,
    length: usize,
}

fn main() -> Result<(), Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "demo".to_owned());
    let mut ch = Channel::connect_timeout(&name, WaitStrategy::Block, Duration::from_secs(10))?;
    for (id, text) in ["hello", "shared memory", "goodbye"]
        .into_iter()
        .enumerate()
    {
        let id = id as u64;
        let started = Instant::now();
        ch.send_json(&Request { id, text })?;
        let frame = ch.recv_timeout(Duration::from_secs(10))?;
        let reply: Reply<'_> = frame.json()?;
        println!("client: {reply:?} in {:?}", started.elapsed());
        assert_eq!(reply.id, id);
        let _ = (reply.upper, reply.length);
    }
    Ok(())
}
