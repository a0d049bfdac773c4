//! A client for `examples/service_server.rs`: connects to the listener by name, sends a few
//! messages and prints the replies.

use std::time::{Duration, Instant};

use shmlink::{Channel, Error, WaitStrategy};

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "svc".to_owned());
    let who = args.next().unwrap_or_else(|| "client".to_owned());
    // Waits for the listener to appear and for the server to accept us.
    let mut ch = Channel::connect_timeout(&name, WaitStrategy::Block, Duration::from_secs(10))?;
    for i in 0..3 {
        let started = Instant::now();
        ch.send(format!("{who} #{i}").as_bytes())?;
        let reply = ch.recv_timeout(Duration::from_secs(10))?;
        println!(
            "{who}: {} in {:?}",
            String::from_utf8_lossy(&reply),
            started.elapsed()
        );
    }
    // Dropping the channel closes it: the server sees `Disconnected` and frees our slot.
    Ok(())
}
