//! The async API (`--features tokio`): a server task accepting clients, a task per client, and
//! client tasks, all on one current-thread runtime (they could as well be separate processes).
//!
//! ```text
//! cargo run --example service_async --features tokio
//! ```

use shmlink::tokio::{connect, AsyncListener};
use shmlink::{Config, Error};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(async {
        let name = format!("async-demo-{}", std::process::id());
        let mut listener = AsyncListener::bind(&name, &Config::default())?;
        // The server: one task accepting, one task per connection; no thread per channel.
        tokio::spawn(async move {
            while let Ok(mut conn) = listener.accept().await {
                tokio::spawn(async move {
                    // The request is copied out: the reply goes through the same channel.
                    while let Ok(msg) = conn.recv().await.map(|m| m.to_vec()) {
                        if conn.send(&msg).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        // Three clients at once.
        let clients: Vec<_> = (0..3)
            .map(|i| {
                let name = name.clone();
                tokio::spawn(async move {
                    let mut ch = connect(&name).await?;
                    ch.send(format!("hello from task {i}").as_bytes()).await?;
                    let reply = ch.recv().await?;
                    println!("task {i}: echo {:?}", String::from_utf8_lossy(&reply));
                    drop(reply);
                    Ok::<(), Error>(())
                })
            })
            .collect();
        for c in clients {
            c.await.expect("client task panicked")?;
        }
        Ok::<(), Error>(())
    })?;
    Ok(())
}
