//! A `SelectorWaker` ends a selector's wait: from another thread, before the wait starts, and
//! from a signal handler.

use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use shmlink::{Channel, Config, Selector, SelectorWaker, WaitStrategy};

use crate::support::{unique, NameGuard, Watchdog, WATCHDOG};

/// A channel pair: the creator (the sender here) and a `Block` receiver for the selector.
fn pair(tag: &str) -> (NameGuard, Channel, Channel) {
    let name = unique(tag);
    let guard = NameGuard(name.clone());
    let tx = Channel::create(&name, &Config::default()).unwrap();
    let rx = Channel::connect(&name, WaitStrategy::Block).unwrap();
    (guard, tx, rx)
}

/// What two waits in turn returned, and whether each was woken.
type Waits = (Vec<usize>, bool, Vec<usize>, bool);

/// Runs `selector.wait(channels, None)` on a thread of its own, and sends back what it
/// returned, whether it was woken, and then what a second wait of 50 ms returned.
fn wait_on_a_thread(
    mut selector: Selector,
    mut channels: Vec<Channel>,
) -> (mpsc::Receiver<Waits>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let first = selector.wait(&mut channels, None).to_vec();
        let first_woken = selector.woken();
        let second = selector
            .wait(&mut channels, Some(Duration::from_millis(50)))
            .to_vec();
        tx.send((first, first_woken, second, selector.woken()))
            .unwrap();
    });
    (rx, thread)
}

#[test]
fn a_waker_on_another_thread_ends_a_wait_that_has_no_deadline() {
    let _watchdog = Watchdog::arm(WATCHDOG * 2, "selector waker");
    let (_name, _tx, rx) = pair("wk");
    let mut selector = Selector::new();
    let waker = selector.waker();
    let (results, thread) = wait_on_a_thread(selector, vec![rx]);
    // Give the selector time to fall asleep (a bounded sleep: nothing to poll for).
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        results.try_recv().is_err(),
        "the wait ended before the wake"
    );
    waker.wake();
    let (first, woken, second, woken_again) = results
        .recv_timeout(WATCHDOG)
        .expect("the wake did not end the wait");
    assert!(first.is_empty(), "a wake reports no channel: {first:?}");
    assert!(woken, "the wait does not say that it was woken");
    assert!(second.is_empty(), "{second:?}");
    assert!(!woken_again, "one wake ended two waits");
    thread.join().unwrap();
}

#[test]
fn a_wake_before_the_wait_ends_the_next_wait() {
    let _watchdog = Watchdog::arm(WATCHDOG * 2, "selector waker");
    let (_name, mut tx, mut rx) = pair("wkb");
    let mut selector = Selector::new();
    let waker = selector.waker();
    // Cloned, sent to another thread and back: the handle is Send and Sync.
    let other = waker.clone();
    std::thread::spawn(move || other.wake()).join().unwrap();
    waker.wake();
    let (results, thread) = wait_on_a_thread(selector, vec![]);
    let (first, woken, second, woken_again) = results
        .recv_timeout(WATCHDOG)
        .expect("a wake made before the wait did not end it");
    assert!(first.is_empty() && woken, "{first:?} {woken}");
    assert!(
        second.is_empty() && !woken_again,
        "two wakes before a wait end one wait"
    );
    thread.join().unwrap();
    // The channel is untouched by the waker: a message still reaches a selector.
    let mut selector = Selector::new();
    let _waker = selector.waker();
    tx.try_send(b"after").unwrap();
    let ready = selector
        .wait(std::slice::from_mut(&mut rx), Some(WATCHDOG))
        .to_vec();
    assert_eq!(ready, vec![0]);
    assert!(!selector.woken());
}

static SIGNAL_WAKER: OnceLock<SelectorWaker> = OnceLock::new();

extern "C" fn on_sigusr1(_signal: libc::c_int) {
    if let Some(waker) = SIGNAL_WAKER.get() {
        waker.wake();
    }
}

#[test]
fn a_wake_from_a_signal_handler_ends_the_wait() {
    let _watchdog = Watchdog::arm(WATCHDOG * 2, "selector waker from a signal");
    let (_name, _tx, rx) = pair("wks");
    let mut selector = Selector::new();
    SIGNAL_WAKER
        .set(selector.waker())
        .expect("the signal's waker is set once");
    // SAFETY: the handler only calls `SelectorWaker::wake` (an atomic store and a futex wake,
    // async-signal-safe) through a `OnceLock` set before the handler is installed; the action
    // is zeroed, then its handler and empty mask filled in.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigusr1 as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let (results, thread) = wait_on_a_thread(selector, vec![rx]);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        results.try_recv().is_err(),
        "the wait ended before the signal"
    );
    // From another thread, to the whole process: whichever thread the kernel picks runs the
    // handler.
    std::thread::spawn(|| {
        // SAFETY: kill with our own pid and a signal whose handler is installed above.
        assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) }, 0);
    })
    .join()
    .unwrap();
    let (first, woken, _, _) = results
        .recv_timeout(WATCHDOG)
        .expect("the signal's wake did not end the wait");
    assert!(first.is_empty() && woken, "{first:?} {woken}");
    thread.join().unwrap();
}
