//! Who an endpoint is: its process id and start time, recorded in the segment for error
//! messages and listings. Nothing here decides whether a peer is alive: that is the endpoint
//! lock's job (see `lock.rs`), because pids are reused and differ between PID namespaces.

/// What an endpoint records about its process: the pid plus the process start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcessId {
    /// The process id.
    pub(crate) pid: u32,
    /// Start time in clock ticks since boot, or 0 where unknown.
    pub(crate) start_time: u64,
}

impl ProcessId {
    /// This process. The start time comes from `/proc/self`, which names this process even
    /// when `/proc` belongs to another PID namespace than ours.
    pub(crate) fn current() -> ProcessId {
        ProcessId {
            pid: std::process::id(),
            start_time: start_time_at("/proc/self/stat").unwrap_or(0),
        }
    }
}

/// Start time (clock ticks since boot) from a `stat` file of `/proc`, allocation-free.
pub(crate) fn start_time_at(path: &str) -> Option<u64> {
    use std::io::Read;

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
    // Field 3 (the state) comes first; the start time is field 22.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_process_has_a_start_time() {
        let me = ProcessId::current();
        assert_eq!(me.pid, std::process::id());
        assert_ne!(me.start_time, 0);
    }
}
