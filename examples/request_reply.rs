//! Request / reply between two processes, using only shmlink's public API.
//!
//! ```text
//! cargo run --example request_reply
//! ```
//!
//! Run without arguments, the program is the server: it creates a channel, starts itself again
//! as the client (`request_reply client <name>`), answers the client's JSON requests until the
//! client closes, and checks how the client exited. The client sends a few requests (one with
//! text that JSON must escape, one larger than a ring frame) and checks every reply.

use std::borrow::Cow;
use std::process::{Command, ExitCode};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shmlink::{Channel, Config, RecvError, WaitStrategy};

#[derive(Serialize, Deserialize)]
struct Request<'a> {
    id: u64,
    /// `Cow` with `borrow`: borrowed from the message when the text has no escapes.
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct Reply<'a> {
    id: u64,
    #[serde(borrow)]
    echo: Cow<'a, str>,
    chars: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("client") => match args.get(2) {
            Some(name) => client(name),
            None => Err("usage: request_reply [client <name>]".into()),
        },
        _ => server(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("request_reply: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn server() -> Result<()> {
    let name = format!("request-reply-{}", std::process::id());
    let mut channel = Channel::create(&name, &Config::with_wait(WaitStrategy::Block))?;
    let mut client = Command::new(std::env::current_exe()?)
        .args(["client", &name])
        .spawn()?;
    // The reply borrows from the request, which borrows the receiving half: send through the
    // other half.
    let (tx, rx) = channel.split();
    let mut served = 0;
    loop {
        let message = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(message) => message,
            Err(RecvError::Disconnected { .. }) => break, // the client closed after its last request
            Err(e) => {
                let _ = client.kill();
                let _ = client.wait();
                return Err(e.into());
            }
        };
        let request: Request<'_> = message.json()?;
        tx.send_json(&Reply {
            id: request.id,
            chars: request.text.chars().count(),
            echo: request.text,
        })?;
        served += 1;
    }
    let status = client.wait()?;
    if !status.success() {
        return Err(format!("client failed: {status}").into());
    }
    println!("server: answered {served} requests on channel {name:?}");
    Ok(())
}

fn client(name: &str) -> Result<()> {
    let mut channel = Channel::connect_timeout(name, WaitStrategy::Block, Duration::from_secs(5))?;
    let long = "x".repeat(channel.max_frame() * 3);
    let texts = ["hello", "say \"hi\"\n", "grüße", &long];
    for (id, text) in texts.iter().enumerate() {
        let id = id as u64;
        channel.send_json(&Request {
            id,
            text: Cow::Borrowed(text),
        })?;
        let message = channel.recv()?;
        let reply: Reply<'_> = message.json()?;
        if reply.id != id || reply.echo != *text || reply.chars != text.chars().count() {
            return Err(format!("wrong reply to request {id}").into());
        }
    }
    println!("client: {} replies checked", texts.len());
    Ok(())
}
