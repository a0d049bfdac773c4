//! `shmring-echo NAME [spin|yield|block]`: connects to the channel NAME and sends every frame
//! back until the creator closes it. Used by the cross-process tests; handy for trying a channel
//! by hand.

use std::process::ExitCode;
use std::time::Duration;

use shmring::{Channel, Error, WaitStrategy};

fn run(name: &str, wait: WaitStrategy) -> Result<u64, Error> {
    let mut ch = Channel::connect_timeout(name, wait, Duration::from_secs(10))?;
    let mut echoed = 0u64;
    let mut buf = Vec::new();
    loop {
        match ch.recv() {
            Ok(frame) => {
                buf.clear();
                buf.extend_from_slice(&frame);
            }
            Err(Error::Disconnected) => return Ok(echoed),
            Err(e) => return Err(e),
        }
        match ch.send(&buf) {
            Ok(()) => echoed += 1,
            Err(Error::Disconnected) => return Ok(echoed),
            Err(e) => return Err(e),
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: shmring-echo NAME [spin|yield|block]");
        return ExitCode::from(2);
    };
    let wait = match args.next().map(|w| w.parse::<WaitStrategy>()) {
        None => WaitStrategy::Block,
        Some(Ok(w)) => w,
        Some(Err(e)) => {
            eprintln!("shmring-echo: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&name, wait) {
        Ok(n) => {
            eprintln!("shmring-echo: echoed {n} frames");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shmring-echo: {e}");
            ExitCode::FAILURE
        }
    }
}
