//! The running child and Ctrl-C: a signal kills the child, the parent unwinds and cleans up.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

// Both statics are shared with the signal handler. SeqCst throughout: they publish no other
// data, and the strongest order keeps "store pid, then check INTERRUPTED" (spawn) against
// "set INTERRUPTED, then load pid" (handler) from missing each other.

/// The child of the round in progress (0: none); negative: the process group of a round's
/// clients (`-pgid`, as kill(2) takes it).
pub(crate) static CHILD_PID: AtomicI32 = AtomicI32::new(0);
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_signal: libc::c_int) {
    // Only async-signal-safe work: atomics and kill(2).
    INTERRUPTED.store(true, Ordering::SeqCst);
    let pid = CHILD_PID.load(Ordering::SeqCst);
    if pid != 0 {
        // SAFETY: kill is async-signal-safe; `pid` is our own child, not yet reaped, or (when
        // negative) the process group of our client children, none of them reaped yet (the
        // main thread clears CHILD_PID before it reaps).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// SIGINT and SIGTERM kill the running child; its death makes every wait in the parent fail,
/// so the parent unwinds normally, unlinks its mappings and reaps the child. A second signal
/// gets the default action (SA_RESETHAND).
pub(crate) fn install_signal_handlers() -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: an all-zero sigaction is a valid starting value; the handler only touches
        // atomics and calls kill, both async-signal-safe; sigemptyset gets a valid mask.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error()).context("installing signal handler");
        }
    }
    Ok(())
}

pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The running child: killed (if still running) and reaped on drop, whatever happened.
pub(crate) struct ChildGuard {
    pub(crate) child: Child,
}

impl ChildGuard {
    pub(crate) fn spawn(mut command: Command) -> anyhow::Result<ChildGuard> {
        let child = command
            .spawn()
            .with_context(|| format!("spawning {command:?}"))?;
        let pid = i32::try_from(child.id()).unwrap_or(0);
        CHILD_PID.store(pid, Ordering::SeqCst);
        let guard = ChildGuard { child };
        if interrupted() {
            bail!("interrupted");
        }
        Ok(guard)
    }

    /// Spawns one of a round's client children in the process group `group` (the first one
    /// spawned starts it: pass `None`, and the group's id is returned), so that a signal kills
    /// all of them.
    pub(crate) fn spawn_in_group(
        mut command: Command,
        group: Option<u32>,
    ) -> anyhow::Result<(ChildGuard, u32)> {
        use std::os::unix::process::CommandExt;
        let pgid = group.unwrap_or(0);
        command.process_group(i32::try_from(pgid).context("process group id")?);
        let child = command
            .spawn()
            .with_context(|| format!("spawning {command:?}"))?;
        let pgid = group.unwrap_or(child.id());
        CHILD_PID.store(-i32::try_from(pgid).unwrap_or(0), Ordering::SeqCst);
        let guard = ChildGuard { child };
        if interrupted() {
            bail!("interrupted");
        }
        Ok((guard, pgid))
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `grace` for the child to exit by itself, then kills it. Returns its status.
    pub(crate) fn finish(mut self, grace: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            if let Some(status) = self.child.try_wait()? {
                CHILD_PID.store(0, Ordering::SeqCst);
                return Ok(status);
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        CHILD_PID.store(0, Ordering::SeqCst);
        let _ = self.child.kill();
        let status = self.child.wait()?;
        bail!(
            "child {} did not exit by itself; killed ({status})",
            self.child.id()
        )
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        CHILD_PID.store(0, Ordering::SeqCst);
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// `--load`: busy processes that run for as long as this guard lives (killed and reaped on
/// drop; killed by the kernel too if this process dies first).
pub(crate) struct Load(Vec<Child>);

impl Load {
    pub(crate) fn start(n: usize) -> anyhow::Result<Load> {
        let mut load = Load(Vec::with_capacity(n));
        for _ in 0..n {
            let mut command = Command::new("sh");
            command
                .args(["-c", "while :; do :; done"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // SAFETY: the closure runs in the forked child before exec and only calls prctl,
            // which is async-signal-safe.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            load.0
                .push(command.spawn().context("starting a --load process")?);
        }
        Ok(load)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
