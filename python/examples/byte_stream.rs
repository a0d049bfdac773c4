//! A sender that never lets up: connects to the channel named `NAME` and sends 1-byte messages
//! as fast as the ring takes them for `SECONDS` (default 10), or until the receiver closes or
//! dies, then prints how many went. It prints `streaming` once connected and `full` the first
//! time the ring has no room. The Python tests use it to check that a batch receive
//! against a stream that never runs dry still ends, releases the GIL and lets Ctrl-C in.
//!
//! ```text
//! cargo run -p shmlink-python --example byte_stream -- NAME 3
//! ```

use std::time::{Duration, Instant};

use shmlink::{Channel, SendError, WaitStrategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().ok_or("usage: byte_stream NAME [SECONDS]")?;
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10.0);
    let mut ch = Channel::connect_timeout(&name, WaitStrategy::Block, Duration::from_secs(10))?;
    println!("streaming");
    let batch = [[0x2au8]; 4096];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut sent: u64 = 0;
    let mut filled = false;
    while Instant::now() < end {
        match ch.try_send_batch(&batch) {
            Ok(n) => sent += n as u64,
            Err(SendError::Full { .. }) if !filled => {
                filled = true;
                println!("full");
            }
            Err(SendError::Full { .. }) => std::hint::spin_loop(),
            Err(SendError::Disconnected { .. } | SendError::PeerGone { .. }) => break,
            Err(e) => return Err(e.into()),
        }
    }
    println!("{sent}");
    Ok(())
}
