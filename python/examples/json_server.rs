//! A Rust JSON service that Python clients (or Rust ones) use: binds a listener and answers
//! each client's requests on its own channel, one selector for all of them.
//!
//! ```text
//! cargo run -p shmlink-python --example json_server -- calc     # then: python examples/client.py calc
//! ```
//!
//! Requests are JSON objects: `{"op": "add", "a": 1, "b": 2}` → `{"sum": 3}`;
//! `{"op": "echo", ...}` → the request itself; `{"op": "stop"}` → `{"stopped": true}`, and the
//! server exits. Prints `ready` once the name is bound.

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};
use shmlink::{Config, Connection, Listener, RecvError, Selector};

fn answer(request: &Value) -> (Value, bool) {
    match request.get("op").and_then(Value::as_str) {
        Some("add") => {
            let a = request.get("a").and_then(Value::as_i64).unwrap_or(0);
            let b = request.get("b").and_then(Value::as_i64).unwrap_or(0);
            (json!({ "sum": a + b, "from": "rust" }), false)
        }
        Some("echo") => (request.clone(), false),
        Some("stop") => (json!({ "stopped": true }), true),
        _ => (json!({ "error": "unknown op" }), false),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "calc".to_owned());
    let listener = Listener::bind(&name, &Config::default())?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut conns: Vec<Connection> = Vec::new();
    let mut selector = Selector::new();
    loop {
        let ready = selector.wait_accept(&listener, &mut conns, Some(Duration::from_secs(1)))?;
        let mut gone = Vec::new();
        let mut stop = false;
        for &i in ready {
            loop {
                match conns[i].try_recv_json::<Value>() {
                    Ok(request) => {
                        let (reply, last) = answer(&request);
                        conns[i].send_json(&reply)?;
                        stop |= last;
                    }
                    Err(RecvError::Empty { .. }) => break,
                    // The client closed or died: drop its channel.
                    Err(e) if e.is_disconnect() => {
                        gone.push(i);
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            conns.swap_remove(i);
        }
        if stop {
            return Ok(());
        }
    }
}
