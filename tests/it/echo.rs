//! Across processes: the `shmlink-echo` binary connects by name and echoes every frame.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use shmlink::{Channel, Config, OpenError, RecvError, WaitStrategy};

use crate::support::{serial, unique, ChildGuard};

/// xorshift64*: a reproducible stream of sizes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn frame(seq: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend((0..len).map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i) as u8));
    let crc = crc32fast::hash(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

fn check(seq: u64, bytes: &[u8]) {
    assert!(
        bytes.len() >= 12,
        "echo {seq} is only {} bytes",
        bytes.len()
    );
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    assert_eq!(
        crc32fast::hash(body).to_le_bytes(),
        crc,
        "echo {seq}: checksum mismatch"
    );
    assert_eq!(
        u64::from_le_bytes(body[..8].try_into().unwrap()),
        seq,
        "echo out of order"
    );
}

fn echo_frames(wait: WaitStrategy, frames: u64) {
    // Two busy-spinning processes need both cores: one such test at a time in this binary, as
    // the other tests that spin take the same lock.
    let _serial = serial();
    let name = unique(&format!("echo-{wait}"));
    let config = Config {
        capacity: 64 * 1024,
        wait,
    };
    let mut ch = Channel::create(&name, &config).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_shmlink-echo"));
    command
        .args([name.as_str(), wait.as_str()])
        .stderr(Stdio::piped());
    let mut child = ChildGuard::spawn(command);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ frames);
    let mut buf = Vec::new();
    // Keep a few frames in flight so both rings are exercised without ever filling both.
    let window = 8u64;
    let (mut sent, mut received) = (0u64, 0u64);
    let watchdog = Duration::from_secs(30);
    while received < frames {
        while sent < frames && sent - received < window {
            let len = (rng.next() % 2048) as usize;
            frame(sent, len, &mut buf);
            ch.send_timeout(&buf, watchdog).unwrap();
            sent += 1;
        }
        let echo = ch.recv_timeout(watchdog).unwrap();
        check(received, &echo);
        received += 1;
    }
    // Every frame came back once: nothing more is on its way.
    assert!(
        matches!(
            ch.recv_timeout(Duration::from_millis(50)),
            Err(RecvError::Timeout { .. })
        ),
        "an echo arrived after the last frame's"
    );
    drop(ch);
    // The echo saw the close, counted exactly the frames sent, and exited cleanly.
    let status = child.reap();
    let mut said = String::new();
    if let Some(mut stderr) = child.child.stderr.take() {
        stderr.read_to_string(&mut said).unwrap();
    }
    assert!(status.success(), "shmlink-echo failed ({status}): {said}");
    assert!(
        said.contains(&format!("echoed {frames} frames")),
        "shmlink-echo did not echo exactly {frames} frames: {said:?}"
    );
    // The creator removed the name.
    assert!(matches!(
        Channel::connect(&name, wait),
        Err(OpenError::NotFound { .. })
    ));
}

#[test]
fn echo_100k_frames_spin() {
    echo_frames(WaitStrategy::Spin, 100_000);
}

#[test]
fn echo_100k_frames_block() {
    echo_frames(WaitStrategy::Block, 100_000);
}

#[test]
fn echo_20k_frames_yield() {
    echo_frames(WaitStrategy::SpinYield, 20_000);
}
