//! Nothing lost: frames of random size (0 B to 64 KiB, and some up to 256 KiB, far larger than
//! the 4 KiB ring) flow in both directions at once between two processes, each carrying a
//! sequence number and a CRC-32. Every frame is checked on arrival; the test counts frames sent,
//! received, lost, duplicated and corrupt, and fails unless the last three are zero.
//!
//! `SHMLINK_STRESS_FRAMES` sets the frames per direction (default 200,000 in release builds,
//! 20,000 in debug builds); `SHMLINK_STRESS_SEED` the seed of the size sequence.
//!
//! # Why a token
//!
//! A message larger than one frame is sent in fragments by a `send` that waits for room between
//! them, and a channel endpoint cannot receive while it waits. If both sides did that at once,
//! each would wait for the other to read. So each process runs one loop that never blocks
//! except in a `send` it makes while it holds a token: single-frame messages go out with
//! `try_send` at any time, and a message that needs fragments waits for the token. The token
//! travels in a flag on the messages themselves (and on an empty control message when its
//! holder has nothing left to send), so the two sides never both block.

use crate::support;

use std::time::{Duration, Instant};

use shmlink::{Channel, Config, RecvError, SendError, WaitStrategy};
use support::{serial, unique, NameGuard};

const RING: usize = 4096;
const HEADER: usize = 16;
/// The token passes to the receiver of a message carrying this flag.
const PASS: u64 = 1 << 63;
/// A message that only carries the token: no sequence number, not counted.
const CONTROL: u64 = 1 << 62;
const SEQ_MASK: u64 = (1 << 56) - 1;
const POOL: usize = 1 << 19;
const MAX_PAYLOAD: usize = 256 * 1024;
/// Any wait without progress longer than this fails the test.
const STALL: Duration = Duration::from_secs(20);

fn frames_per_direction() -> u64 {
    match std::env::var("SHMLINK_STRESS_FRAMES") {
        Ok(v) => v.parse().expect("SHMLINK_STRESS_FRAMES must be a number"),
        Err(_) if cfg!(debug_assertions) => 20_000,
        Err(_) => 200_000,
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Payload length of message `seq` in direction `dir`: 65% up to 256 B, 25% up to one frame,
/// 9% up to 64 KiB (fragmented), 1% up to 256 KiB.
fn payload_len(seed: u64, dir: u64, seq: u64) -> usize {
    let r = splitmix(seed ^ splitmix(dir.wrapping_add(1) << 32 | seq));
    let x = (r >> 20) as usize;
    let max_single = shmlink::testing::max_payload(RING) - HEADER;
    match r % 1000 {
        0..650 => x % 257,
        650..900 => 257 + x % (max_single - 257 + 1),
        900..990 => max_single + 1 + x % (65536 - max_single),
        _ => 65537 + x % (MAX_PAYLOAD - 65536),
    }
}

fn pool(seed: u64) -> Vec<u8> {
    (0..POOL / 8)
        .flat_map(|i| splitmix(seed.wrapping_mul(31) ^ i as u64).to_le_bytes())
        .collect()
}

fn crc(head: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head);
    h.update(payload);
    h.finalize()
}

fn encode(out: &mut Vec<u8>, word: u64, payload: &[u8]) {
    out.clear();
    out.extend_from_slice(&word.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let sum = crc(&out[..12], payload);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(payload);
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    sent: u64,
    received: u64,
    lost: u64,
    duplicated: u64,
    corrupt: u64,
    /// Messages that needed fragments (sent), to show the large path was exercised.
    fragmented: u64,
    bytes: u64,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sent={} received={} lost={} duplicated={} corrupt={} fragmented={} bytes={}",
            self.sent,
            self.received,
            self.lost,
            self.duplicated,
            self.corrupt,
            self.fragmented,
            self.bytes
        )
    }
}

/// Runs one side until it has sent `n` messages and received the peer's `n`.
/// `dir` is this side's sending direction (0: creator to connector, 1: the other way).
fn run_side(ch: &mut Channel, n: u64, seed: u64, dir: u64) -> Result<Counts, String> {
    let pool = pool(seed ^ dir);
    let peer_dir = 1 - dir;
    let mut counts = Counts::default();
    let mut holding = dir == 0;
    let mut next_send = 0u64;
    let mut expect = 0u64;
    let mut msg = Vec::with_capacity(HEADER + MAX_PAYLOAD);
    let mut built: Option<u64> = None;
    let max_single = ch.max_frame();
    let mut last_progress = Instant::now();

    let absorb = |frame: &[u8], holding: &mut bool, counts: &mut Counts, expect: &mut u64| {
        if frame.len() < HEADER {
            counts.corrupt += 1;
            return;
        }
        let word = u64::from_le_bytes(frame[..8].try_into().unwrap_or_default());
        let len = u32::from_le_bytes(frame[8..12].try_into().unwrap_or_default()) as usize;
        let sum = u32::from_le_bytes(frame[12..16].try_into().unwrap_or_default());
        let payload = &frame[HEADER..];
        if len != payload.len() || crc(&frame[..12], payload) != sum {
            counts.corrupt += 1;
            return;
        }
        if word & PASS != 0 {
            *holding = true;
        }
        if word & CONTROL != 0 {
            return;
        }
        let seq = word & SEQ_MASK;
        if len != payload_len(seed, peer_dir, seq) {
            counts.corrupt += 1;
            return;
        }
        match seq.cmp(expect) {
            std::cmp::Ordering::Equal => {}
            std::cmp::Ordering::Less => {
                counts.duplicated += 1;
                return;
            }
            std::cmp::Ordering::Greater => counts.lost += seq - *expect,
        }
        counts.received += 1;
        *expect = seq + 1;
    };

    while next_send < n || expect < n {
        let mut progressed = false;
        // Send what we can without waiting (or, holding the token, with waiting).
        if next_send < n {
            if built != Some(next_send) {
                let len = payload_len(seed, dir, next_send);
                let off = (next_send as usize).wrapping_mul(7919) % (POOL - MAX_PAYLOAD);
                encode(&mut msg, next_send, &pool[off..off + len]);
                built = Some(next_send);
            }
            if holding {
                // Pass the token with this message; the header word is covered by the CRC,
                // so re-encode it with the flag.
                let word = next_send | PASS;
                let payload = msg[HEADER..].to_vec();
                encode(&mut msg, word, &payload);
                ch.send(&msg)
                    .map_err(|e| format!("send {next_send}: {e}"))?;
                holding = false;
                counts.fragmented += u64::from(msg.len() > max_single);
                progressed = true;
            } else if msg.len() <= max_single {
                match ch.try_send(&msg) {
                    Ok(()) => progressed = true,
                    Err(SendError::Full { .. }) => {}
                    Err(e) => return Err(format!("try_send {next_send}: {e}")),
                }
            }
            if progressed {
                counts.sent += 1;
                counts.bytes += msg.len() as u64;
                next_send += 1;
            }
        } else if holding && expect < n {
            // Nothing left to send, but the peer may need the token for its large messages.
            encode(&mut msg, CONTROL | PASS, &[]);
            built = None;
            match ch.send(&msg) {
                Ok(()) | Err(SendError::Disconnected { .. }) => {}
                Err(e) => return Err(format!("send token: {e}")),
            }
            holding = false;
            progressed = true;
        }
        // Take everything that is there.
        loop {
            match ch.try_recv() {
                Ok(frame) => {
                    absorb(&frame, &mut holding, &mut counts, &mut expect);
                    progressed = true;
                }
                Err(RecvError::Empty { .. }) => break,
                Err(RecvError::Disconnected { .. }) if expect >= n => break,
                Err(e) => return Err(format!("try_recv after {expect}: {e} ({counts})")),
            }
        }
        if progressed {
            last_progress = Instant::now();
            continue;
        }
        if last_progress.elapsed() > STALL {
            return Err(format!(
                "no progress for {STALL:?}: next send {next_send}, expecting {expect}, holding {holding} ({counts})"
            ));
        }
        // Nothing to do right now: wait (with this side's strategy) for the peer's next frame.
        if expect < n || next_send < n {
            match ch.recv_timeout(Duration::from_millis(1)) {
                Ok(frame) => {
                    absorb(&frame, &mut holding, &mut counts, &mut expect);
                    last_progress = Instant::now();
                }
                Err(RecvError::Timeout { .. }) => {}
                Err(RecvError::Disconnected { .. }) if expect >= n => {}
                Err(e) => return Err(format!("recv after {expect}: {e} ({counts})")),
            }
        }
    }
    Ok(counts)
}

/// The role `stress` of a re-run of this binary: the connecting side, given
/// `<name>:<wait>:<frames>:<seed>`.
pub(crate) fn stress_child_process(spec: &str) {
    let mut parts = spec.split(':');
    let (Some(name), Some(wait), Some(n), Some(seed)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        panic!("bad stress role: {spec}");
    };
    let wait: WaitStrategy = wait.parse().expect("wait strategy");
    let n: u64 = n.parse().expect("frame count");
    let seed: u64 = seed.parse().expect("seed");
    let mut ch = Channel::connect_timeout(name, wait, STALL).expect("connect");
    let result = run_side(&mut ch, n, seed, 1);
    match result {
        Ok(counts) => println!("\nSTRESS-CHILD {counts}"),
        Err(e) => println!("\nSTRESS-CHILD-ERROR {e}"),
    }
}

fn parse_counts(line: &str) -> Counts {
    let mut c = Counts::default();
    for field in line.split_whitespace() {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        let v: u64 = v.parse().unwrap_or(u64::MAX);
        match k {
            "sent" => c.sent = v,
            "received" => c.received = v,
            "lost" => c.lost = v,
            "duplicated" => c.duplicated = v,
            "corrupt" => c.corrupt = v,
            "fragmented" => c.fragmented = v,
            "bytes" => c.bytes = v,
            _ => {}
        }
    }
    c
}

fn stress(wait: WaitStrategy) {
    let _serial = serial();
    let n = frames_per_direction();
    let seed: u64 = std::env::var("SHMLINK_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| 0x5EED ^ u64::from(std::process::id()));
    let name = unique(&format!("stress-{wait}"));
    let _unlink = NameGuard(name.clone());
    let mut ch = Channel::create(
        &name,
        &Config {
            capacity: RING,
            wait,
        },
    )
    .expect("create");
    let mut child = crate::roles::spawn("stress", &format!("{name}:{wait}:{n}:{seed}"), &[]);
    let started = Instant::now();
    let mine = run_side(&mut ch, n, seed, 0);
    let elapsed = started.elapsed();
    drop(ch);
    let status = child.reap_within(STALL);
    let out = child.read_all();
    assert!(status.success(), "the child side failed ({status}):\n{out}");
    let theirs = out
        .lines()
        .find_map(|l| l.split_once("STRESS-CHILD ").map(|(_, counts)| counts))
        .map(parse_counts);
    let mine = mine.unwrap_or_else(|e| panic!("creator side: {e}\nchild said:\n{out}"));
    let theirs = theirs.unwrap_or_else(|| panic!("child side failed:\n{out}"));
    let mb = (mine.bytes + theirs.bytes) as f64 / 1e6;
    eprintln!(
        "stress wait={wait} frames/direction={n} seed={seed} ring={RING} in {:.1} s ({:.0} MB/s both ways)\n  creator -> connector: {}\n  connector -> creator: {}",
        elapsed.as_secs_f64(),
        mb / elapsed.as_secs_f64(),
        // What the connector received of what the creator sent, and the other way round.
        Counts { received: theirs.received, lost: theirs.lost, duplicated: theirs.duplicated, corrupt: theirs.corrupt, ..mine },
        Counts { received: mine.received, lost: mine.lost, duplicated: mine.duplicated, corrupt: mine.corrupt, ..theirs },
    );
    for (what, c) in [("creator", mine), ("connector", theirs)] {
        assert_eq!(c.sent, n, "{what} sent");
        assert_eq!(c.received, n, "{what} received");
        assert_eq!(c.lost, 0, "{what} saw lost frames");
        assert_eq!(c.duplicated, 0, "{what} saw duplicated frames");
        assert_eq!(c.corrupt, 0, "{what} saw corrupt frames");
    }
    assert!(
        n < 1000 || (mine.fragmented > 0 && theirs.fragmented > 0),
        "no fragmented messages"
    );
}

#[test]
fn stress_spin() {
    stress(WaitStrategy::Spin);
}

#[test]
fn stress_block() {
    stress(WaitStrategy::Block);
}
