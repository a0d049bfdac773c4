//! What a wait costs: the CPU time and the voluntary context switches (one per sleep that ended)
//! of a thread, for the tests that check that an idle wait sleeps instead of polling.

use std::time::{Duration, Instant};

/// Of its wall time, an idle wait may spend at most this share on a CPU (a sleeping one spends
/// well under a thousandth; one that spins, or yields in a loop, nearly all of it).
pub const IDLE_CPU_SHARE: u32 = 20;

/// What the calling thread spent while `f` ran.
#[derive(Clone, Copy, Debug)]
pub struct Cost {
    /// How long `f` took.
    pub wall: Duration,
    /// CPU time the thread used meanwhile.
    pub cpu: Duration,
    /// Voluntary context switches the thread made meanwhile: each sleep that ended.
    pub switches: u64,
}

impl Cost {
    /// Fails the test unless the thread was idle: at most `max_switches` wake-ups, and a CPU
    /// time under 1/[`IDLE_CPU_SHARE`] of the wall time.
    pub fn assert_idle(&self, what: &str, max_switches: u64) {
        eprintln!(
            "{what}: {:.0} ms, {:.2} ms of CPU, {} voluntary context switches",
            self.wall.as_secs_f64() * 1e3,
            self.cpu.as_secs_f64() * 1e3,
            self.switches
        );
        assert!(
            self.switches <= max_switches,
            "{what}: {} wake-ups in {:?} (at most {max_switches})",
            self.switches,
            self.wall
        );
        assert!(
            self.cpu * IDLE_CPU_SHARE <= self.wall,
            "{what}: used {:?} of CPU in {:?}: it did not sleep",
            self.cpu,
            self.wall
        );
    }
}

/// Runs `f` and measures what the calling thread spent on it.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Cost) {
    let (cpu, switches, started) = (thread_cpu(), voluntary_switches(), Instant::now());
    let got = f();
    let cost = Cost {
        wall: started.elapsed(),
        cpu: thread_cpu() - cpu,
        switches: voluntary_switches() - switches,
    };
    (got, cost)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(r, 0, "clock_gettime({clock})");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time this process (all its threads) has used so far.
pub fn process_cpu() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// `voluntary_ctxt_switches` from a `/proc` status file.
fn switches_in(status: &std::path::Path) -> u64 {
    std::fs::read_to_string(status)
        .unwrap_or_else(|e| panic!("read {}: {e}", status.display()))
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no voluntary_ctxt_switches in {}", status.display()))
}

/// Voluntary context switches of the calling thread so far.
pub fn voluntary_switches() -> u64 {
    switches_in("/proc/thread-self/status".as_ref())
}

/// Voluntary context switches so far of this process's thread called `name` (`shmlink-watch`,
/// `shmlink-reactor`); `None` if there is no such thread.
pub fn thread_switches(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("task entry").path();
        if std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim() == name) {
            return Some(switches_in(&dir.join("status")));
        }
    }
    None
}
