//! The errors of the hot path allocate nothing: `Empty` from a `try_recv` on an empty channel,
//! `Full` from a `try_send` on a full one, `Timeout` from a receive on an empty one and from a
//! send on a full one, and `Disconnected` or `PeerGone` from a receive or send after the peer
//! closed or died, on `Channel` and on `Endpoint` over shared memory. They name their channel
//! with the name the endpoint holds, shared, not copied.
//!
//! The test binary has a counting global allocator (it affects only this binary); these tests
//! count the allocations of the test's own thread while it makes each call.

use crate::support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use shmlink::{Backend, Channel, Config, Endpoint, RecvError, SendError, WaitStrategy};
use support::{reap_killed, unique, NameGuard, WATCHDOG};

struct Counting;

thread_local! {
    /// Allocations made by this thread so far.
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged;
// counting touches only a const-initialised thread-local without a destructor (no allocation,
// no re-entrance).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded as is; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
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

/// Runs `call` and asserts that this thread allocated nothing meanwhile and that the call
/// returned what `expected` says.
fn allocates_nothing<T: std::fmt::Debug>(
    what: &str,
    call: impl FnOnce() -> T,
    expected: impl FnOnce(&T) -> bool,
) {
    let before = COUNT.with(Cell::get);
    let got = call();
    let allocations = COUNT.with(Cell::get) - before;
    assert!(expected(&got), "{what}: got {got:?}");
    assert_eq!(allocations, 0, "{what} allocated");
}

/// A channel end, as the hot path sees it: [`Channel`] or [`Endpoint`] on shared memory.
trait End {
    fn try_send(&mut self, bytes: &[u8]) -> Result<(), SendError>;
    fn send(&mut self, bytes: &[u8]) -> Result<(), SendError>;
    fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SendError>;
    fn try_recv_len(&mut self) -> Result<usize, RecvError>;
    fn recv_len(&mut self) -> Result<usize, RecvError>;
    fn recv_timeout_len(&mut self, timeout: Duration) -> Result<usize, RecvError>;
}

macro_rules! end {
    ($ty:ty) => {
        impl End for $ty {
            fn try_send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
                <$ty>::try_send(self, bytes)
            }
            fn send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
                <$ty>::send(self, bytes)
            }
            fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SendError> {
                <$ty>::send_timeout(self, bytes, timeout)
            }
            fn try_recv_len(&mut self) -> Result<usize, RecvError> {
                <$ty>::try_recv(self).map(|m| m.len())
            }
            fn recv_len(&mut self) -> Result<usize, RecvError> {
                <$ty>::recv(self).map(|m| m.len())
            }
            fn recv_timeout_len(&mut self, timeout: Duration) -> Result<usize, RecvError> {
                <$ty>::recv_timeout(self, timeout).map(|m| m.len())
            }
        }
    };
}

end!(Channel);
end!(Endpoint);

/// Empty, Full, Timeout, then Disconnected on both sides of a close, between `a` and `b`.
fn not_now_and_closed(mut a: impl End, mut b: impl End) {
    // Warm up: the first calls look at the peer and register with the death watcher.
    assert!(matches!(b.try_recv_len(), Err(RecvError::Empty { .. })));
    assert!(matches!(
        b.recv_timeout_len(Duration::from_millis(1)),
        Err(RecvError::Timeout { .. })
    ));
    allocates_nothing(
        "try_recv on an empty channel",
        || b.try_recv_len(),
        |r| matches!(r, Err(RecvError::Empty { .. })),
    );
    allocates_nothing(
        "recv_timeout on an empty channel",
        || b.recv_timeout_len(Duration::from_millis(2)),
        |r| matches!(r, Err(RecvError::Timeout { .. })),
    );
    let mut sent = 0;
    while a.try_send(&[7; 100]).is_ok() {
        sent += 1;
    }
    allocates_nothing(
        "try_send on a full channel",
        || a.try_send(&[7; 100]),
        |r| matches!(r, Err(SendError::Full { .. })),
    );
    // Warm up the sender's wait, then count one.
    assert!(matches!(
        a.send_timeout(&[7; 100], Duration::from_millis(1)),
        Err(SendError::Timeout { .. })
    ));
    allocates_nothing(
        "send_timeout on a full channel",
        || a.send_timeout(&[7; 100], Duration::from_millis(2)),
        |r| matches!(r, Err(SendError::Timeout { .. })),
    );
    drop(a);
    for _ in 0..sent {
        assert_eq!(b.recv_len().unwrap(), 100);
    }
    allocates_nothing(
        "recv after the peer closed",
        || b.recv_len(),
        |r| matches!(r, Err(RecvError::Disconnected { .. })),
    );
    allocates_nothing(
        "try_recv after the peer closed",
        || b.try_recv_len(),
        |r| matches!(r, Err(RecvError::Disconnected { .. })),
    );
    allocates_nothing(
        "send after the peer closed",
        || b.send(b"x"),
        |r| matches!(r, Err(SendError::Disconnected { .. })),
    );
}

fn small(wait: WaitStrategy) -> Config {
    Config {
        capacity: 4096,
        wait,
    }
}

#[test]
fn a_channels_not_now_and_closed_errors_allocate_nothing() {
    for wait in [WaitStrategy::Spin, WaitStrategy::Block] {
        let name = unique("alloc-channel");
        let _guard = NameGuard(name.clone());
        let a = Channel::create(&name, &small(wait)).unwrap();
        let b = Channel::connect(&name, wait).unwrap();
        not_now_and_closed(a, b);
    }
}

#[test]
fn an_endpoints_not_now_and_closed_errors_allocate_nothing() {
    let name = unique("alloc-endpoint");
    let _guard = NameGuard(name.clone());
    let a = Endpoint::create_with(&name, &small(WaitStrategy::Block), Backend::Shm).unwrap();
    let b = Endpoint::connect(&name, WaitStrategy::Block).unwrap();
    not_now_and_closed(a, b);
}

/// Sends to `end`'s peer, an echo process, once it was killed: every send allocates nothing,
/// those that still go through and the `PeerGone` they end with (soon: the death watcher
/// hears of the death through the peer's pidfd).
fn sends_after_the_peer_died(mut end: impl End, name: &str) {
    let mut peer = support::echo(&[name, "block"]);
    end.send(b"hello").unwrap();
    assert_eq!(end.recv_timeout_len(WATCHDOG).unwrap(), 5);
    // Warm up: the first send once the peer is there registers it with the death watcher.
    end.send(b"again").unwrap();
    assert_eq!(end.recv_timeout_len(WATCHDOG).unwrap(), 5);
    let pid = peer.pid();
    peer.kill();
    reap_killed(&mut peer);
    let killed = std::time::Instant::now();
    loop {
        let before = COUNT.with(Cell::get);
        let got = end.try_send(b"x");
        let allocations = COUNT.with(Cell::get) - before;
        assert_eq!(allocations, 0, "a send to a dead peer allocated ({got:?})");
        match got {
            Err(SendError::PeerGone { pid: p, .. }) => {
                assert_eq!(p, pid);
                break;
            }
            Ok(()) | Err(SendError::Full { .. }) => assert!(
                killed.elapsed() < Duration::from_secs(1),
                "sends still went through {:?} after the kill",
                killed.elapsed()
            ),
            Err(e) => panic!("a send to a dead peer: {e:?}"),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    allocates_nothing(
        "a send after the peer died",
        || end.send(b"x"),
        |r| matches!(r, Err(SendError::PeerGone { pid: p, .. }) if *p == pid),
    );
}

#[test]
fn a_channels_send_after_the_peer_died_allocates_nothing() {
    let name = unique("alloc-send-gone");
    let _guard = NameGuard(name.clone());
    let ch = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    sends_after_the_peer_died(ch, &name);
}

#[test]
fn an_endpoints_send_after_the_peer_died_allocates_nothing() {
    let name = unique("alloc-ep-gone");
    let _guard = NameGuard(name.clone());
    let end = Endpoint::create_with(&name, &small(WaitStrategy::Block), Backend::Shm).unwrap();
    sends_after_the_peer_died(end, &name);
}

#[test]
fn a_receive_after_the_peer_died_allocates_nothing() {
    let name = unique("alloc-gone");
    let _guard = NameGuard(name.clone());
    let mut ch = Channel::create(&name, &small(WaitStrategy::Block)).unwrap();
    let mut peer = support::echo(&[name.as_str(), "block"]);
    ch.send(b"hello").unwrap();
    assert_eq!(&*ch.recv_timeout(WATCHDOG).unwrap(), b"hello");
    // Warm up the wait (its registration with the death watcher).
    assert!(matches!(
        ch.recv_timeout(Duration::from_millis(5)),
        Err(RecvError::Timeout { .. })
    ));
    let pid = peer.pid();
    peer.kill();
    reap_killed(&mut peer);
    allocates_nothing(
        "recv after the peer died",
        || ch.recv().map(|m| m.len()),
        |r| matches!(r, Err(RecvError::PeerGone { pid: p, .. }) if *p == pid),
    );
}
