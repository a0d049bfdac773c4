//! A server for many clients: one listener, one thread, one selector.
//!
//! ```text
//! cargo run --example service_server -- svc            # terminal 1
//! cargo run --example service_client -- svc alice      # terminals 2, 3, ...
//! cargo run --example service_client -- svc bob
//! ```
//!
//! Each client gets its own channel (its own rings); the selector sleeps until any of them has
//! a message, or a new client knocks, and serves the ready ones in turn. Stops after ten
//! seconds without clients.

use std::time::{Duration, Instant};

use shmlink::{Config, Connection, Error, Listener, RecvError, Selector};

fn main() -> Result<(), Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "svc".to_owned());
    let listener = Listener::bind(&name, &Config::default())?;
    println!(
        "server: listening on {name:?} (up to {} clients)",
        listener.max_clients()
    );
    let mut conns: Vec<Connection> = Vec::new();
    let mut selector = Selector::new();
    let mut idle_since = Instant::now();
    loop {
        let known = conns.len();
        // The ready indices borrow the selector, not `conns`.
        let ready = selector.wait_accept(&listener, &mut conns, Some(Duration::from_secs(1)))?;
        if conns.len() > known {
            println!("server: {} client(s) connected", conns.len());
        }
        let mut gone = Vec::new();
        for &i in ready {
            let conn = &mut conns[i];
            // Serve one message per ready client per round: a chatty client cannot starve the
            // others.
            let reply = match conn.try_recv() {
                Ok(request) => format!("got {:?}", String::from_utf8_lossy(&request)),
                Err(RecvError::Empty { .. }) => continue,
                Err(e) if e.is_disconnect() => {
                    gone.push(i);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if conn.send(reply.as_bytes()).is_err() {
                gone.push(i);
            }
        }
        // Dropping a connection frees the client's slot (and its name, if the client died).
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            conns.swap_remove(i);
            println!("server: a client left, {} remain", conns.len());
        }
        if !conns.is_empty() {
            idle_since = Instant::now();
        } else if idle_since.elapsed() > Duration::from_secs(10) {
            println!("server: no clients for 10 s, stopping");
            return Ok(());
        }
    }
}
