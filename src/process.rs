//! Who an endpoint is: its process id and start time, recorded in the segment for error
//! messages and listings. Nothing here decides whether a peer is alive: that is the endpoint
//! lock's job (see `lock.rs`), because pids are reused and differ between PID namespaces.

/// What an endpoint records about its process: the pid plus the process start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (Linux), or 0 where unknown.
    pub start_time: u64,
}

impl ProcessId {
    /// This process.
    pub fn current() -> ProcessId {
        let pid = std::process::id();
        ProcessId {
            pid,
            start_time: start_time(pid).unwrap_or(0),
        }
    }
}

/// Start time of `pid` in clock ticks since boot, where the platform tells.
pub fn start_time(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        stat(pid).map(|(_, start)| start)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// (state, start time) from `/proc/<pid>/stat`.
///
/// Allocation-free (the path and the contents live on the stack).
#[cfg(target_os = "linux")]
fn stat(pid: u32) -> Option<(u8, u64)> {
    use std::io::{Read, Write};

    let mut path = [0u8; 32];
    let mut cursor = std::io::Cursor::new(&mut path[..]);
    write!(cursor, "/proc/{pid}/stat").ok()?;
    let len = usize::try_from(cursor.position()).ok()?;
    let path = std::str::from_utf8(path.get(..len)?).ok()?;
    // Opening a short path converts it to a C string on the stack.
    let mut file = std::fs::File::open(path).ok()?;
    // The line is about 300 bytes: the command name is at most 15 (TASK_COMM_LEN - 1) plus
    // escapes, the other 51 fields are numbers.
    let mut buf = [0u8; 1024];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let text = &buf[..filled];
    // The command name is in parentheses and may contain anything; fields follow the last ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.bytes().next()?;
    // `state` is field 3; start time is field 22, i.e. 19 fields further on.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_process_has_a_start_time() {
        let me = ProcessId::current();
        assert_eq!(me.pid, std::process::id());
        assert_ne!(me.start_time, 0);
        assert_eq!(start_time(me.pid), Some(me.start_time));
    }
}
