//! One connection to a child: the listener set up, the child spawned (or a peer started by
//! hand awaited), the transport accepted; and the end of it, the child reaped.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};

use super::measure::Timing;
use super::session::Session;
use super::spawn::ChildGuard;
use crate::transport::{ChildStdio, Listener, Options, Peer, Transport};
use crate::workload::{self as common, MessageKind};

/// What the rounds of a ping-pong run, a sweep or a stream share.
#[derive(Clone)]
pub(crate) struct Plan<'s> {
    pub(crate) session: &'s Session,
    pub(crate) opts: Options,
    /// The base of the names of the rows' mappings and sockets.
    pub(crate) base: String,
    pub(crate) parent_id: String,
    pub(crate) child_id: String,
    /// Wait for a peer started by hand instead of spawning the child.
    pub(crate) no_spawn: bool,
    pub(crate) timing: Timing,
}

impl<'s> Plan<'s> {
    /// The plan of a run with these options: fresh ids for the two sides.
    pub(crate) fn new(session: &'s Session, opts: Options, timing: Timing) -> Plan<'s> {
        Plan {
            session,
            opts,
            base: session.base.clone(),
            parent_id: common::random_id(),
            child_id: common::random_id(),
            no_spawn: false,
            timing,
        }
    }
}

/// A connected transport and the child on its other end (none for a peer started by hand).
/// Field order: the transport closes before the child is reaped.
pub(crate) struct Connection<T> {
    pub(crate) t: T,
    pub(crate) child: Option<ChildGuard>,
    /// The backend that carries the messages (the listener's word).
    pub(crate) backend: String,
}

/// Sets up `T` under the name `<base>-<tag>`, spawns `ipc-child` for it with `message` and the
/// `extra` arguments (a `--mode`), and waits for it to connect.
pub(crate) fn connect<T: Transport>(
    plan: &Plan,
    round: u32,
    tag: &str,
    message: MessageKind,
    extra: &[&str],
) -> anyhow::Result<Connection<T>> {
    let kind = T::KIND;
    let session = plan.session;
    let name = format!("{}-{tag}", plan.base);
    let listener = T::listen(&name, &plan.opts).with_context(|| format!("setting up {kind}"))?;
    let backend = listener.backend().to_owned();

    let mut child_args: Vec<String> = vec![
        "--transport".into(),
        kind.as_str().into(),
        "--address".into(),
        listener.address(),
        "--message".into(),
        message.as_str().into(),
        "--wait".into(),
        plan.opts.wait.to_string(),
        "--ring-size".into(),
        plan.opts.ring_size.to_string(),
        "--max-message".into(),
        plan.opts.max_message.to_string(),
        "--parent-id".into(),
        plan.parent_id.clone(),
        "--child-id".into(),
        plan.child_id.clone(),
    ];
    child_args.extend(extra.iter().map(|&s| s.to_owned()));
    if plan.no_spawn {
        eprintln!(
            "[info] round {round} {kind}: waiting for a peer; run on the other host (with this \
             host's address if the one shown is loopback):\n  ipc-child {} --standalone",
            child_args.join(" ")
        );
        let t = listener
            .accept(ChildStdio::default(), Peer::unknown())
            .with_context(|| format!("waiting for the {kind} peer to connect"))?;
        return Ok(Connection {
            t,
            child: None,
            backend,
        });
    }
    let mut command = session.child_command();
    command
        .args(&child_args)
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .stderr(Stdio::inherit());
    if kind.needs_stdio() {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
    } else {
        // Standard output is the parent's report: the child stays off it.
        command.stdin(Stdio::null()).stdout(Stdio::null());
    }
    session.placement.pin_child(&mut command, 0);
    let mut child = ChildGuard::spawn(command)?;
    session.placement.check_child(child.pid(), 0)?;
    eprintln!(
        "[info] round {round} {kind}: child pid {} on {}",
        child.pid(),
        listener.address()
    );
    let stdio = ChildStdio {
        stdin: child.child.stdin.take(),
        stdout: child.child.stdout.take(),
    };
    let peer = Peer::child(child.pid());
    let t = listener
        .accept(stdio, peer)
        .with_context(|| format!("waiting for the {kind} child to connect"))?;
    Ok(Connection {
        t,
        child: Some(child),
        backend,
    })
}

impl<T: Transport> Connection<T> {
    /// Closes the transport and waits for the child to exit by itself; fails if it does not,
    /// or exits with an error.
    pub(crate) fn finish(self) -> anyhow::Result<()> {
        let Connection { t, child, .. } = self;
        drop(t);
        if let Some(child) = child {
            let status = child.finish(Duration::from_secs(5))?;
            if !status.success() {
                bail!("{} child exited with {status}", T::KIND);
            }
        }
        Ok(())
    }
}
