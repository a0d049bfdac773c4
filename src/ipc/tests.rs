//! Unit tests of the duplex: name checks, a round trip in one process, a send with a deadline
//! to a peer that does not read, a name held by its creator, and what a dropped creator leaves
//! (nothing).

use super::*;
use crate::seam::{RecvCore, SendCore};
/// Any error: the library's, or one of the test's own reading.
type Error = Box<dyn std::error::Error>;

fn within(secs: u64) -> Deadline {
    Deadline::after(Duration::from_secs(secs))
}

#[test]
fn names_are_validated() {
    assert!(validate_name("ok-name_1.2").is_ok());
    for bad in ["", ".hidden", "-dash", "a/b", "sp ace", &"x".repeat(201)] {
        assert!(
            matches!(validate_name(bad), Err(OpenError::InvalidName { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn duplex_in_one_process() -> Result<(), Error> {
    let name = format!("fallback-unit-{}", std::process::id());
    let mut a = IpcDuplex::create(&name)?;
    let mut b = IpcDuplex::connect_until(&name, within(5).instant())?;
    a.send_until(b"ping", Deadline::Never)?;
    assert_eq!(&*b.recv_until(Deadline::Never)?, b"ping");
    b.send_json_until(&("pong", 7u64), Deadline::Never)?;
    let (word, n): (String, u64) = serde_json::from_slice(&a.recv_until(Deadline::Never)?)?;
    assert_eq!((word.as_str(), n), ("pong", 7));
    assert!(matches!(
        a.recv_until(Deadline::Now),
        Err(RecvError::Empty { .. })
    ));
    assert!(
        !rendezvous::rendezvous_path(&name).exists(),
        "rendezvous file removed after accept"
    );
    drop(b);
    assert!(matches!(
        a.recv_until(within(5)),
        Err(RecvError::Disconnected { .. })
    ));
    Ok(())
}

#[test]
fn a_send_with_a_deadline_keeps_it_when_the_peer_does_not_read() -> Result<(), Error> {
    let name = format!("fallback-full-{}", std::process::id());
    let mut a = IpcDuplex::create(&name)?;
    let mut b = IpcDuplex::connect_until(&name, within(5).instant())?;
    // The peer reads nothing: its socket buffer fills, then the lane holds a message it
    // cannot send, and the next send with a deadline ends at it.
    let chunk = vec![3u8; 1 << 20];
    let mut sent = 0;
    let timed_out = loop {
        let started = Instant::now();
        match a.send_until(&chunk, Deadline::after(Duration::from_millis(100))) {
            Ok(()) => sent += 1,
            Err(SendError::Timeout { .. }) => break started.elapsed(),
            Err(e) => return Err(e.into()),
        }
        assert!(sent < 64, "a peer that never reads took {sent} MiB");
    };
    assert!(
        timed_out >= Duration::from_millis(100),
        "ended before its deadline"
    );
    assert!(matches!(
        a.send_until(b"x", Deadline::Now),
        Err(SendError::Full { .. })
    ));
    // Once the peer reads, everything handed over arrives, in order, and sends go on.
    for _ in 0..sent {
        assert_eq!(b.recv_until(within(10))?.len(), chunk.len());
    }
    a.send_until(b"after", within(10))?;
    assert_eq!(&*b.recv_until(within(10))?, b"after");
    Ok(())
}

#[test]
fn a_name_in_use_cannot_be_created_again_until_its_creator_drops() -> Result<(), Error> {
    let name = format!("fallback-taken-{}", std::process::id());
    let a = IpcDuplex::create(&name)?;
    assert!(
        matches!(IpcDuplex::create(&name), Err(OpenError::AlreadyExists { channel: ref n }) if *n == name),
        "a second creator of a pending name"
    );
    let b = IpcDuplex::connect_until(&name, within(5).instant())?;
    let mut a = a;
    a.send_until(b"taken", within(5))?;
    assert!(
        matches!(
            IpcDuplex::create(&name),
            Err(OpenError::AlreadyExists { .. })
        ),
        "a second creator of a connected name"
    );
    assert!(matches!(
        listener::IpcListener::bind(&name, 1),
        Err(OpenError::AlreadyExists { .. })
    ));
    drop(b);
    drop(a);
    assert!(!listener::lock_path(&name).exists(), "lock file removed");
    drop(IpcDuplex::create(&name)?);
    Ok(())
}

#[test]
fn dropping_a_pending_creator_cleans_up() -> Result<(), Error> {
    let name = format!("fallback-pending-{}", std::process::id());
    let a = IpcDuplex::create(&name)?;
    assert!(rendezvous::rendezvous_path(&name).exists());
    drop(a);
    assert!(!rendezvous::rendezvous_path(&name).exists());
    assert!(matches!(
        IpcDuplex::connect_until(&name, None),
        Err(OpenError::NotFound { .. })
    ));
    Ok(())
}
