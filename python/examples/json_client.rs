//! A Rust client of a JSON service (`examples/server.py`, or `json_server`): connects to the
//! listener by name, sends `COUNT` additions, checks every sum, and prints `ok COUNT`. With
//! `--stop` it then asks the server to stop.
//!
//! ```text
//! python examples/server.py calc                                      # terminal 1
//! cargo run -p shmlink-python --example json_client -- calc 1000      # terminals 2, 3, ...
//! ```

use std::time::Duration;

use serde_json::{json, Value};
use shmlink::{Channel, WaitStrategy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stop = args.iter().any(|a| a == "--stop");
    let mut rest = args.iter().filter(|a| !a.starts_with("--"));
    let name = rest.next().cloned().unwrap_or_else(|| "calc".to_owned());
    let count: i64 = rest.next().map(|c| c.parse()).transpose()?.unwrap_or(100);
    // Waits for the listener to appear and for the server to accept us.
    let mut ch = Channel::connect_timeout(&name, WaitStrategy::Block, Duration::from_secs(10))?;
    for i in 0..count {
        ch.send_json(&json!({ "op": "add", "a": i, "b": 2 * i }))?;
        let reply: Value = ch.recv_json_timeout(Duration::from_secs(10))?;
        if reply["sum"] != json!(3 * i) {
            return Err(format!("request {i}: wrong reply {reply}").into());
        }
    }
    if stop {
        ch.send_json(&json!({ "op": "stop" }))?;
        let _: Value = ch.recv_json_timeout(Duration::from_secs(10))?;
    }
    println!("ok {count}");
    Ok(())
}
