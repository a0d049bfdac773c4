//! No heap allocation per message on the `shm` JSON path once it is warmed up.
//!
//! This test binary installs a counting global allocator (it affects only this binary). The
//! test process creates a `shm` transport, spawns the real `ipc-child` as the peer, warms up,
//! then runs JSON ping-pongs through exactly the harness's code path (`send_json` into the
//! ring, `guard.json()` with the ids borrowed from the frame, see `json_round_trip` in
//! `bin/src/workload.rs`) and asserts that this thread allocated nothing meanwhile. A few of the
//! round trips stall the child for longer than the library's peer-check interval, so the slow
//! wait path (which looks at the peer's process) is measured too. No timing is asserted.

use shmlink_harness::workload;

use shmlink_test_support as common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{assert_nothing_left, serial, unique, ChildGuard, Watchdog};
use shmlink::WaitStrategy;
use shmlink_harness::transport::shm::Shm;
use shmlink_harness::transport::{ChildStdio, Listener, Options, Peer, Transport};

/// Counts the allocations of each thread; can record where the first one of a measured stretch
/// came from.
struct Counting;

thread_local! {
    /// Allocations made by this thread so far.
    static COUNT: Cell<u64> = const { Cell::new(0) };
    /// Set while a measured stretch wants the first allocation's backtrace.
    static TRACE: Cell<bool> = const { Cell::new(false) };
    /// Set while the hook itself runs (its backtrace allocates).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Backtrace of the first allocation in a measured stretch.
static FIRST: Mutex<Option<String>> = Mutex::new(None);

fn note_allocation() {
    // `try_with`: the thread-locals may be gone while a thread exits.
    if IN_HOOK.try_with(|h| h.get()).unwrap_or(true) {
        return; // the hook's own backtrace
    }
    let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    let tracing = TRACE.try_with(|t| t.get()).unwrap_or(false);
    if tracing && !IN_HOOK.try_with(|h| h.replace(true)).unwrap_or(true) {
        let _ = TRACE.try_with(|t| t.set(false));
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        if let Ok(mut first) = FIRST.lock() {
            first.get_or_insert(trace);
        }
        let _ = IN_HOOK.try_with(|h| h.set(false));
    }
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged;
// counting touches only const-initialised thread-locals without destructors (no allocation, no
// re-entrance), and the backtrace hook is guarded against re-entering itself.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: forwarded as is; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: forwarded as is; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    COUNT.with(Cell::get)
}

const LIMIT: Duration = Duration::from_secs(120);
/// Round trips before counting: the ring's JSON size hint settles, lazy state is set up.
const WARMUP: u32 = 500;
/// Round trips counted.
const MEASURED: u32 = 3000;
/// Every this many measured round trips, the child is stopped for `STALL` first.
const STALL_EVERY: u32 = 600;
/// Longer than the library's peer-check interval (5 ms), so the parent's wait checks the peer.
const STALL: Duration = Duration::from_millis(25);

/// A helper thread that resumes a stopped child `STALL` after being asked to. Created before
/// the measured stretch, so its own allocations are on its own thread.
struct Resumer {
    asked: Arc<AtomicBool>,
    quit: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Resumer {
    fn start(pid: u32) -> Resumer {
        let asked = Arc::new(AtomicBool::new(false));
        let quit = Arc::new(AtomicBool::new(false));
        let (a, q) = (Arc::clone(&asked), Arc::clone(&quit));
        let pid = AtomicU32::new(pid);
        let thread = std::thread::spawn(move || {
            while !q.load(Ordering::Acquire) {
                if a.load(Ordering::Acquire) {
                    std::thread::sleep(STALL);
                    signal(pid.load(Ordering::Relaxed), libc::SIGCONT);
                    a.store(false, Ordering::Release);
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        Resumer {
            asked,
            quit,
            thread: Some(thread),
        }
    }

    /// Stops the child now; the helper resumes it after `STALL`.
    fn stall(&self, pid: u32) {
        while self.asked.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        signal(pid, libc::SIGSTOP);
        self.asked.store(true, Ordering::Release);
    }
}

impl Drop for Resumer {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: kill on this test's own child, which the ChildGuard has not reaped yet.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

#[test]
fn shm_json_round_trips_do_not_allocate() {
    let _serial = serial();
    let _watchdog = Watchdog::arm(LIMIT, "shm JSON allocation test");
    if shmlink::testing::forced() {
        eprintln!("skipped: the ipc-channel fallback is forced, there is no ring to measure");
        return;
    }
    let name = unique("alloc");
    let (parent_id, child_id) = (workload::random_id(), workload::random_id());
    let opts = Options {
        wait: WaitStrategy::Spin,
        ..Options::default()
    };
    let listener = match Shm::listen(&name, &opts) {
        Ok(l) => l,
        Err(e) => panic!("shm listen: {e}"),
    };
    assert_eq!(Listener::backend(&listener), "shm", "a ring is needed");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ipc-child"));
    command
        .args(["--transport", "shm", "--address"])
        .arg(listener.address())
        .args(["--message", "json", "--wait", "spin"])
        .args(["--parent-id", &parent_id, "--child-id", &child_id])
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut child = ChildGuard::spawn(command);
    let pid = child.pid();
    let mut t = match listener.accept(ChildStdio::default(), Peer::child(pid)) {
        Ok(t) => t,
        Err(e) => panic!("accept: {e}"),
    };
    let resumer = Resumer::start(pid);

    for i in 0..WARMUP {
        if let Err(e) = workload::json_round_trip(&mut t, &parent_id, &child_id) {
            panic!("warmup round trip {i}: {e}");
        }
    }
    // One stall in the warmup too: whatever the slow path sets up once is not per message.
    resumer.stall(pid);
    if let Err(e) = workload::json_round_trip(&mut t, &parent_id, &child_id) {
        panic!("stalled warmup round trip: {e}");
    }

    let looks_before = shmlink::testing::peer_looks_on_this_thread();
    TRACE.with(|t| t.set(true));
    let before = allocations();
    let mut failed = None;
    for i in 0..MEASURED {
        if i % STALL_EVERY == STALL_EVERY / 2 {
            resumer.stall(pid);
        }
        if let Err(e) = workload::json_round_trip(&mut t, &parent_id, &child_id) {
            failed = Some((i, e));
            break;
        }
    }
    let allocated = allocations() - before;
    TRACE.with(|t| t.set(false));
    let looks = shmlink::testing::peer_looks_on_this_thread() - looks_before;

    if let Some((i, e)) = failed {
        panic!("measured round trip {i}: {e}");
    }
    let first = FIRST.lock().ok().and_then(|mut f| f.take());
    drop(resumer);
    drop(t);
    let status = child.wait_for(LIMIT);
    assert!(status.success(), "ipc-child exited with {status}");
    // The stalls made the waits take their slow path, which looks at the peer's process.
    assert!(
        looks > 0,
        "no wait looked at the peer during {MEASURED} round trips with stalls of {STALL:?}"
    );
    assert_eq!(
        allocated,
        0,
        "{allocated} allocations in {MEASURED} JSON round trips; the first from:\n{}",
        first.unwrap_or_default()
    );
    assert_nothing_left(&name);
}
