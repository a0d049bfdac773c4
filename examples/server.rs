//! A server that answers JSON requests over a shmlink channel.
//!
//! ```text
//! cargo run --example server -- demo        # terminal 1
//! cargo run --example client -- demo        # terminal 2
//! ```

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shmlink::{Channel, Config, Error, WaitStrategy};

#[derive(Deserialize)]
struct Request<'a> {
    id: u64,
    /// Borrowed from the frame unless the text has escapes (a `&str` would fail on those).
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Serialize)]
struct Reply<'a> {
    id: u64,
    upper: &'a str,
    length: usize,
}

fn main() -> Result<(), Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "demo".to_owned());
    let mut ch = Channel::create(&name, &Config::with_wait(WaitStrategy::Block))?;
    println!("server: waiting on channel {name:?}");
    let mut served = 0u64;
    loop {
        // Wait for a client, then for each request; give up after a minute of silence.
        let request = match ch.recv_timeout(Duration::from_secs(60)) {
            Ok(frame) => frame,
            Err(e) if e.is_disconnect() => break,
            Err(e) => return Err(e.into()),
        };
        // Borrow the text straight from the ring, copy it out once to transform it.
        let req: Request<'_> = request.json()?;
        let upper = req.text.to_uppercase();
        let id = req.id;
        drop(request);
        ch.send_json(&Reply {
            id,
            upper: &upper,
            length: upper.len(),
        })?;
        served += 1;
    }
    println!("server: client left after {served} requests");
    Ok(())
}
