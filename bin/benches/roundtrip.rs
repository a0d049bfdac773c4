//! Cross-process round trips through the harness's `ipc-child` binary.
//!
//! The bench is the parent: it sets up a transport, spawns `ipc-child` (cargo builds it for the
//! bench and tells us where, through `CARGO_BIN_EXE_ipc-child`) with the command line
//! `ipc-parent` would give it, and times one ping and its answer per iteration:
//!
//! - `roundtrip/shm/raw64`: 64 payload bytes echoed back through the shared-memory channel;
//! - `roundtrip/shm/json`: the harness's JSON ping, serialised in place into the ring and decoded
//!   with borrowed ids on both sides, answered by the pong;
//! - `roundtrip/ipc-channel/json`: the same over the ipc-channel fallback.
//!
//! Both processes spin while they wait (the harness's default), so each wants a core of its own.
//! The mapping's name (or the fallback's rendezvous file) is removed as soon as the child has
//! connected, and the child is reaped when its row is done or the bench panics; if the bench is
//! killed, the child dies with it (it asks the kernel for that).

use shmlink_harness::workload as common;

use std::hint::black_box;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{check_stamp, stamp, Ping, PingMsg};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shmlink_harness::transport::{
    ipc_channel::IpcChannel, shm::Shm, ChildStdio, Listener, Options, Peer, Transport,
};

const CHILD: &str = env!("CARGO_BIN_EXE_ipc-child");
const RAW_SIZE: usize = 64;

/// A connected transport to a running `ipc-child`; closes the transport and reaps the child on
/// drop, killing it if it does not exit by itself.
struct Session<T> {
    t: Option<T>,
    child: Child,
    parent_id: String,
    child_id: String,
}

impl<T: Transport> Session<T> {
    fn start(message: &str) -> Session<T> {
        let name = format!("bench-{}-{}", std::process::id(), T::KIND);
        let opts = Options::default();
        let listener = T::listen(&name, &opts).expect("setting up the transport");
        let address = listener.address();
        let parent_id = common::random_id();
        let child_id = common::random_id();
        let mut child = Command::new(CHILD)
            .args(["--transport", T::KIND.as_str(), "--address", &address])
            .args(["--message", message, "--wait", &opts.wait.to_string()])
            .args(["--ring-size", &opts.ring_size.to_string()])
            .args(["--parent-id", &parent_id, "--child-id", &child_id])
            .args(["--parent-pid", &std::process::id().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {CHILD}: {e}"));
        let accepted = listener.accept(ChildStdio::default(), Peer::child(child.id()));
        // Both ends are connected (or never will be): the name has served its purpose.
        forget_name(&address);
        let t = match accepted {
            Ok(t) => t,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the {} child did not connect: {e}", T::KIND);
            }
        };
        Session {
            t: Some(t),
            child,
            parent_id,
            child_id,
        }
    }

    fn t(&mut self) -> &mut T {
        self.t.as_mut().expect("connected")
    }
}

impl<T> Drop for Session<T> {
    fn drop(&mut self) {
        // Closing our end makes the child's next receive fail, and it exits.
        drop(self.t.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes the OS name of channel `name` on whichever backend carries it (the memory stays
/// mapped, the connection open).
fn forget_name(name: &str) {
    let _ = shmlink::testing::unlink(name);
    let _ = std::fs::remove_file(shmlink::testing::rendezvous_path(name));
}

fn raw<T: Transport>(c: &mut Criterion, id: &str) {
    let mut s = Session::<T>::start("raw");
    let mut buf = vec![0u8; RAW_SIZE];
    let mut seq = 0u64;
    c.benchmark_group("roundtrip")
        .throughput(Throughput::Elements(1))
        .bench_function(id, |b| {
            b.iter(|| {
                seq += 1;
                stamp(&mut buf, seq);
                s.t().send(black_box(&buf)).unwrap();
                let good = s
                    .t()
                    .recv_with(|bytes| Ok(check_stamp(bytes, RAW_SIZE, seq)))
                    .unwrap();
                assert!(good, "echo {seq} damaged or out of order");
            })
        });
}

fn json<T: Transport>(c: &mut Criterion, id: &str) {
    let mut s = Session::<T>::start("json");
    let (parent_id, child_id) = (s.parent_id.clone(), s.child_id.clone());
    // A 13-digit millisecond timestamp, as on the wire of the harness.
    let mut sent_at_ms = common::now_ms() as u64;
    c.benchmark_group("roundtrip")
        .throughput(Throughput::Elements(1))
        .bench_function(id, |b| {
            b.iter(|| {
                sent_at_ms += 1;
                let ping = Ping {
                    sender_id: &parent_id,
                    receiver_id: &child_id,
                    sent_at_ms,
                };
                s.t().send_json(black_box(&ping)).unwrap();
                let echoed = s
                    .t()
                    .recv_json::<PingMsg, _>(|pong| {
                        if pong.sender_id != child_id || pong.receiver_id != parent_id {
                            return Err(shmlink_harness::garbled(format!(
                                "unexpected pong {pong:?}"
                            )));
                        }
                        Ok(pong.sent_at_ms)
                    })
                    .unwrap();
                assert_eq!(echoed, sent_at_ms, "pong out of order");
            })
        });
}

fn roundtrip(c: &mut Criterion) {
    raw::<Shm>(c, "shm/raw64");
    json::<Shm>(c, "shm/json");
    json::<IpcChannel>(c, "ipc-channel/json");
}

criterion_group!(benches, roundtrip);
criterion_main!(benches);
