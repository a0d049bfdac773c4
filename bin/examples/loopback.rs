//! N raw round trips over one transport with both ends in this one thread, so that no side ever
//! waits: what is counted is the path of a message that finds room and data at once, for
//! counting instructions per round trip (`valgrind --tool=callgrind`, see docs/design.md).
//!
//! ```text
//! cargo build --release -p shmlink-harness --example loopback
//! valgrind --tool=callgrind target/release/examples/loopback shm 56 100000
//! ```
//!
//! Arguments: the transport (`shm`, with the Spin wait, or `floor`), the message size (the
//! floor carries at most 40 bytes) and the number of round trips. Run it twice with two counts
//! and divide the difference of the totals by the difference of the counts: the set-up cancels.

use shmlink_harness::transport::{
    floor::Floor, shm::Shm, ChildStdio, Listener, Options, Peer, Transport,
};

fn run<T: Transport>(size: usize, count: u64) {
    let name = format!("loopback-{}", std::process::id());
    let opts = Options::default();
    let listener = T::listen(&name, &opts).expect("listen");
    let mut b = T::connect(&listener.address(), &opts, Peer::unknown()).expect("connect");
    let mut a = listener
        .accept(ChildStdio::default(), Peer::unknown())
        .expect("accept");
    let ping = vec![1u8; size];
    let pong = vec![2u8; size];
    for _ in 0..count {
        a.send(&ping).expect("send ping");
        b.recv_with(|m| {
            assert_eq!(m.len(), size);
            Ok(())
        })
        .expect("recv ping");
        b.send(&pong).expect("send pong");
        a.recv_with(|m| {
            assert_eq!(m.len(), size);
            Ok(())
        })
        .expect("recv pong");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: loopback shm|floor SIZE COUNT";
    let size: usize = args.get(2).and_then(|s| s.parse().ok()).expect(usage);
    let count: u64 = args.get(3).and_then(|s| s.parse().ok()).expect(usage);
    match args.get(1).map(String::as_str) {
        Some("shm") => run::<Shm>(size, count),
        Some("floor") => run::<Floor>(size, count),
        _ => panic!("{usage}"),
    }
}
