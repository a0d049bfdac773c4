//! `shmlink tap TOPIC`: subscribes to a topic (on either backend) and prints each message, as
//! pretty JSON when it is JSON and as hex when it is not; or, with `--hz`, the rate once a
//! second.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use shmlink::{EndpointSubscriber, RecvError, WaitStrategy};

/// A message as it is printed: pretty JSON, or a hex dump of 16 bytes a line.
pub(crate) fn show(bytes: &[u8], hex: bool) -> String {
    if !hex {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) {
            if let Ok(text) = serde_json::to_string_pretty(&v) {
                return text;
            }
        }
    }
    let mut out = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x} ", i * 16);
        for b in line {
            let _ = write!(out, " {b:02x}");
        }
        let _ = write!(out, "{}  ", "   ".repeat(16 - line.len()));
        out.extend(line.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    out.pop();
    out
}

pub(crate) fn tap(
    topic: &str,
    count: Option<u64>,
    hz: bool,
    hex: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut sub = EndpointSubscriber::connect(topic, WaitStrategy::Block)?;
    let mut out = std::io::stdout().lock();
    let (mut seen, mut in_second, mut second) = (0u64, 0u64, Instant::now());
    while count.is_none_or(|c| seen < c) {
        let left = Duration::from_secs(1).saturating_sub(second.elapsed());
        match sub.recv_timeout(left) {
            Ok(msg) => {
                seen += 1;
                in_second += 1;
                if !hz {
                    writeln!(out, "#{seen} ({} bytes)\n{}", msg.len(), show(&msg, hex))?;
                    out.flush()?;
                }
            }
            Err(RecvError::Timeout { .. }) => {}
            Err(RecvError::Lagged { missed, .. }) => {
                writeln!(out, "(missed {missed} messages)")?;
            }
            Err(e) => return Err(e.into()),
        }
        if second.elapsed() >= Duration::from_secs(1) {
            if hz {
                rate(&mut out, topic, in_second, second)?;
            }
            (in_second, second) = (0, Instant::now());
        }
    }
    // Stopped by `--count`: the rate of the part of a second since the last line.
    if hz && in_second > 0 {
        rate(&mut out, topic, in_second, second)?;
    }
    Ok(())
}

fn rate(out: &mut impl std::io::Write, topic: &str, n: u64, since: Instant) -> std::io::Result<()> {
    let secs = since.elapsed().as_secs_f64();
    writeln!(out, "{topic}: {:.1} messages/s", n as f64 / secs)?;
    out.flush()
}
