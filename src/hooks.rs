//! The test hooks that lower modules call: compiled only with the cargo feature `test-hooks`.
//! Modules of every layer call these (a stop point in `connect`, a system call taken away, a
//! count of wake-up calls); nothing here imports the rest of the crate, so they stay at the
//! bottom of the layers. `crate::testing` re-exports what the tests set and read.

/// The environment variable that puts `Endpoint::create` and `EndpointListener::bind` on the
/// ipc-channel backend when set to anything but `0` or the empty string.
pub const FORCE_FALLBACK_ENV: &str = "SHMLINK_FORCE_FALLBACK";

/// Whether [`FORCE_FALLBACK_ENV`] asks for the ipc-channel backend.
pub(crate) fn fallback_forced_by_env() -> bool {
    std::env::var_os(FORCE_FALLBACK_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The environment variable that names a [`StopPoint`] (by [`StopPoint::name`]): a process
/// started with it stops itself (SIGSTOP) when it gets there, so a test can kill it at exactly
/// that point.
pub const STOP_AT_ENV: &str = "SHMLINK_TEST_STOP_AT";

/// Places where a process stops itself when [`STOP_AT_ENV`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopPoint {
    /// `connect` has taken the connector's lock and claimed the slot (`PEER_CLAIMING`), and has
    /// not yet marked itself present.
    ConnectClaimed,
    /// A listener's client has claimed a slot (holding its lock) and not yet named its channel.
    ListenerClaimed,
    /// A listener's client has named its channel in its slot and made it, and not yet published
    /// the slot as pending.
    ListenerNamed,
}

impl StopPoint {
    /// The value of [`STOP_AT_ENV`] that selects this point.
    pub fn name(self) -> &'static str {
        match self {
            StopPoint::ConnectClaimed => "connect-claimed",
            StopPoint::ListenerClaimed => "listener-claimed",
            StopPoint::ListenerNamed => "listener-named",
        }
    }
}

/// Stops the process (SIGSTOP) if [`STOP_AT_ENV`] names `point`. The variable is read once per
/// process; without it this is one load.
pub(crate) fn stop_point(point: StopPoint) {
    static WANTED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let wanted = WANTED.get_or_init(|| std::env::var(STOP_AT_ENV).ok());
    if wanted.as_deref() == Some(point.name()) {
        // SAFETY: raise takes no pointers; SIGSTOP cannot be caught, so no handler runs.
        unsafe { libc::raise(libc::SIGSTOP) };
    }
}

/// The environment variable that makes this process behave as if its kernel lacked some of
/// the system calls the library has fallbacks for: a comma-separated list of `io_uring` (no
/// futex ring: async tasks sleep through the reactor thread), `futex_waitv` (the selector and
/// the reactor look in short slices instead of sleeping on many words) and `pidfd` (the death
/// watcher covers no peer: a wait looks at its peer every 10 ms). Read once per process.
pub const PRETEND_MISSING_ENV: &str = "SHMLINK_TEST_PRETEND_MISSING";

/// A system call [`PRETEND_MISSING_ENV`] can take away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// `io_uring` futex waits.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    IoUring,
    /// `futex_waitv`.
    FutexWaitv,
    /// `pidfd_open`.
    #[cfg_attr(loom, allow(dead_code))]
    Pidfd,
}

/// Whether [`PRETEND_MISSING_ENV`] takes `call` away. Without the variable this is one load.
pub(crate) fn pretend_missing(call: Missing) -> bool {
    static MISSING: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let missing = MISSING.get_or_init(|| {
        std::env::var(PRETEND_MISSING_ENV)
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    });
    let name = match call {
        Missing::IoUring => "io_uring",
        Missing::FutexWaitv => "futex_waitv",
        Missing::Pidfd => "pidfd",
    };
    missing.iter().any(|m| m == name)
}

thread_local! {
    /// The calling thread's `FUTEX_WAKE` calls (see [`count_wake`]).
    static WAKE_CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// The calling thread's looks at a present peer's lock (see [`count_peer_look`]).
    static PEER_LOOKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts a `FUTEX_WAKE` made by the calling thread.
pub(crate) fn count_wake() {
    WAKE_CALLS.with(|c| c.set(c.get() + 1));
}

/// How many `FUTEX_WAKE` calls the calling thread has made (every wake-up the library makes:
/// a peer's, the selector's, the reactor's, the death watcher's each on its own thread).
pub fn wake_calls_on_this_thread() -> u64 {
    WAKE_CALLS.with(std::cell::Cell::get)
}

/// Counts a look at a present peer's lock (whether its process still holds its end) made by
/// the calling thread.
pub(crate) fn count_peer_look() {
    PEER_LOOKS.with(|c| c.set(c.get() + 1));
}

/// How many times the calling thread looked at a present peer's lock: the slow path of a wait
/// that found nothing for a while (`Spin` and `SpinYield` every 5 ms, `Block` where no death
/// watcher covers the peer), and the look of a send that found its alarm raised.
pub fn peer_looks_on_this_thread() -> u64 {
    PEER_LOOKS.with(std::cell::Cell::get)
}
