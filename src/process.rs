//! Who is on the other side: process ids with start times, and whether they still run.

/// A process identity that survives pid reuse: the pid plus the process start time.
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

    /// True while the process runs (a zombie or a different process with the same pid counts
    /// as gone).
    pub fn is_alive(&self) -> bool {
        if self.pid == 0 || self.pid > i32::MAX as u32 {
            return false;
        }
        #[cfg(target_os = "linux")]
        {
            match stat(self.pid) {
                Some((state, start)) => {
                    !matches!(state, b'Z' | b'X' | b'x')
                        && (self.start_time == 0 || start == self.start_time)
                }
                None => false,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            // SAFETY: kill with signal 0 sends nothing; it only checks the pid exists.
            let r = unsafe { libc::kill(self.pid as libc::pid_t, 0) };
            r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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
/// Allocation-free (the path and the contents live on the stack): a receiver waiting for data
/// checks its peer this way every few milliseconds, and the message path must not allocate.
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
    fn current_process_is_alive_and_a_reaped_child_is_not() {
        let me = ProcessId::current();
        assert!(me.is_alive());
        assert_ne!(me.start_time, 0);
        let wrong_start = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!wrong_start.is_alive(), "pid reuse must not look alive");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = ProcessId {
            pid: child.id(),
            start_time: start_time(child.id()).unwrap_or(0),
        };
        child.wait().unwrap();
        assert!(!id.is_alive());
    }

    #[test]
    fn a_zombie_counts_as_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = ProcessId {
            pid: child.id(),
            start_time: 0,
        };
        // Wait until it has exited but do not reap it yet.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while id.is_alive() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(!id.is_alive());
        child.wait().unwrap();
    }
}
