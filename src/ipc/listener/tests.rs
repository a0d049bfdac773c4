//! Unit tests of the listener: racing and silent clients, concurrent accepts, a name bound
//! twice, garbage hellos, and the files a listener leaves (none).

use std::path::Path;

use super::*;
use crate::ipc::rendezvous::Published;
use crate::{Receiver, Sender};

type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

const LIMIT: Duration = Duration::from_secs(10);

fn deadline() -> Option<Instant> {
    Some(Instant::now() + LIMIT)
}

#[test]
fn files_left_by_a_publisher_killed_half_way_are_removed_by_the_next_bind() -> Result {
    let name = format!("ipc-listener-unpublished-{}", std::process::id());
    let path = rendezvous::checked_path(&name, Kind::Rendezvous, true)?;
    let leftover = path.with_extension("ipc.tmp-4242-7");
    std::fs::write(&leftover, "half-published")?;
    let listener = IpcListener::bind(&name, 1)?;
    let gone = !leftover.exists();
    let _ = std::fs::remove_file(&leftover);
    drop(listener);
    assert!(gone, "{} was left", leftover.display());
    assert!(!path.exists());
    Ok(())
}

#[test]
fn clients_racing_for_one_server_all_get_in() -> Result {
    let name = format!("ipc-listener-race-{}", std::process::id());
    let listener = IpcListener::bind(&name, 8)?;
    let clients: Vec<_> = (0..8u8)
        .map(|i| {
            let name = name.clone();
            std::thread::spawn(move || -> Result<u8> {
                let mut duplex = connect(&name, deadline(), false)?;
                duplex.send(&[i])?;
                let reply = duplex.recv_timeout(LIMIT)?.to_vec();
                Ok(reply[0])
            })
        })
        .collect();
    let mut accepted = Vec::new();
    for _ in 0..8 {
        let (mut duplex, lease) = listener.accept(deadline())?;
        let msg = duplex.recv_timeout(LIMIT)?.to_vec();
        duplex.send(&msg)?;
        accepted.push((duplex, lease));
    }
    let mut ids: Vec<u8> = clients
        .into_iter()
        .map(|c| c.join().expect("client thread"))
        .collect::<Result<_>>()?;
    ids.sort_unstable();
    assert_eq!(ids, (0..8).collect::<Vec<u8>>());
    // The ninth is refused while the eight are held.
    assert!(matches!(
        connect(&name, deadline(), false),
        Err(Error::TooManyClients { limit: 8, .. })
    ));
    assert!(matches!(listener.try_accept(), Err(Error::NoClient { .. })));
    Ok(())
}

#[test]
fn concurrent_accepts_each_keep_their_deadline() -> Result {
    let name = format!("ipc-listener-accepts-{}", std::process::id());
    let listener = Arc::new(IpcListener::bind(&name, 2)?);
    let long = {
        let listener = Arc::clone(&listener);
        std::thread::spawn(move || listener.accept(deadline()).map(|(duplex, _)| duplex))
    };
    // Whichever of the two waits first, the short one ends at its deadline.
    assert!(matches!(
        listener.accept(Some(Instant::now() + Duration::from_millis(50))),
        Err(Error::Timeout { .. })
    ));
    assert!(!long.is_finished(), "the long accept is still waiting");
    let mut client = connect(&name, deadline(), false)?;
    let mut server = long.join().expect("accept thread")?;
    client.send(b"late")?;
    assert_eq!(&*server.recv_timeout(LIMIT)?, b"late");
    Ok(())
}

#[test]
fn a_live_name_is_not_bound_twice_and_a_closed_one_leaves_nothing() -> Result {
    let name = format!("ipc-listener-twice-{}", std::process::id());
    let listener = IpcListener::bind(&name, 1)?;
    assert!(
        matches!(IpcListener::bind(&name, 1), Err(Error::AlreadyExists { channel: n }) if n == name)
    );
    assert!(
        matches!(IpcDuplex::create(&name), Err(Error::AlreadyExists { channel: n }) if n == name)
    );
    assert!(alive(&name)?);
    drop(listener);
    assert!(!rendezvous::rendezvous_path(&name).exists());
    assert!(!lock_path(&name).exists());
    assert!(!alive(&name)?);
    assert!(matches!(
        connect(&name, deadline(), false),
        Err(Error::NotFound { .. })
    ));
    drop(IpcListener::bind(&name, 1)?);
    Ok(())
}

#[test]
fn garbage_hellos_do_not_stop_the_listener() -> Result {
    let name = format!("ipc-listener-garbage-{}", std::process::id());
    let listener = IpcListener::bind(&name, 4)?;
    for _ in 0..3 {
        let Ok(Published::Listener { server, .. }) = rendezvous::read(&name) else {
            panic!("listener not published");
        };
        if let Ok(sender) = IpcSender::<(u64, String)>::connect(server.clone()) {
            let _ = sender.send((u64::MAX, "not a hello".to_owned()));
        }
        // Wait until the thread has moved on to its next server.
        let start = Instant::now();
        while start.elapsed() < LIMIT
            && matches!(rendezvous::read(&name),
                Ok(Published::Listener { server: now, .. }) if now == server)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut client = connect(&name, deadline(), false)?;
    let (mut server, _lease) = listener.accept(deadline())?;
    client.send(b"still here")?;
    assert_eq!(&*server.recv_timeout(LIMIT)?, b"still here");
    Ok(())
}

/// The server the rendezvous file of `name` names now.
fn published(name: &str) -> String {
    match rendezvous::read(name) {
        Ok(Published::Listener { server, .. }) => server,
        other => panic!("listener {name} not published: {other:?}"),
    }
}

/// A connection to the server published now that sends nothing (until it is dropped).
fn silent_connection(name: &str) -> IpcSender<Hello> {
    let start = Instant::now();
    loop {
        // Just after a client got in, the file may still name the server that took it.
        if let Ok(sender) = IpcSender::<Hello>::connect(published(name)) {
            return sender;
        }
        assert!(start.elapsed() < LIMIT, "no server of {name} to connect to");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A client gets in and its first message reaches the server.
fn gets_in(listener: &IpcListener, name: &str) -> Result {
    let mut client = connect(name, deadline(), false)?;
    let (mut server, _lease) = listener.accept(deadline())?;
    client.send(b"in")?;
    assert_eq!(&*server.recv_timeout(LIMIT)?, b"in");
    Ok(())
}

#[test]
fn a_silent_connection_does_not_keep_other_clients_out() -> Result {
    let name = format!("ipc-listener-silent-{}", std::process::id());
    let listener = IpcListener::bind(&name, 4)?;
    // Connected to the current server for the whole test, and never says anything.
    let silent = silent_connection(&name);
    gets_in(&listener, &name)?;
    gets_in(&listener, &name)?;
    drop(silent);
    Ok(())
}

#[test]
fn a_full_queue_of_silent_connections_does_not_keep_other_clients_out() -> Result {
    let name = format!("ipc-listener-queue-{}", std::process::id());
    let listener = IpcListener::bind(&name, 4)?;
    // One silent connection taken by the server's thread, and as many more as its queue
    // holds: a connect to it would now wait until one of them goes. (Filled again after a
    // pause until nothing more fits, since the thread takes its one connection meanwhile.)
    let server = published(&name);
    let mut silent = Vec::new();
    loop {
        let before = silent.len();
        silent.extend(std::iter::from_fn(|| crate::sys::connect_seqpacket_now(&server)).take(100));
        assert!(silent.len() < 1000, "the queue of connections never filled");
        if silent.len() == before {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // On a thread of its own: a connect that waited on the full queue would fail the
    // accept below at its deadline instead of hanging the test.
    let client = {
        let name = name.clone();
        std::thread::spawn(move || -> Result {
            let mut client = connect(&name, deadline(), false)?;
            client.send(b"in")?;
            Ok(client.recv_timeout(LIMIT).map(drop)?)
        })
    };
    let (mut server, _lease) = listener.accept(deadline())?;
    assert_eq!(&*server.recv_timeout(LIMIT)?, b"in");
    server.send(b"bye")?;
    client.join().expect("client thread")?;
    drop(silent);
    Ok(())
}

#[test]
fn silent_connections_hold_a_bounded_number_of_servers() -> Result {
    let name = format!("ipc-listener-bounded-{}", std::process::id());
    let listener = IpcListener::bind(&name, 1)?;
    let mut silent = Vec::new();
    // Each silent connection holds one server (and its thread); the listener publishes
    // another one while it has room for its thread.
    for _ in 1..MAX_SERVING {
        silent.push(silent_connection(&name));
        gets_in(&listener, &name)?;
    }
    silent.push(silent_connection(&name));
    let short = Some(Instant::now() + 4 * HELLO_WAIT);
    assert!(matches!(
        connect(&name, short, false),
        Err(Error::Timeout { .. })
    ));
    // Once they go, their servers' threads end and clients get in again.
    drop(silent);
    gets_in(&listener, &name)
}

#[test]
fn a_listener_held_by_a_silent_connection_drops_cleanly() -> Result {
    let name = format!("ipc-listener-silent-drop-{}", std::process::id());
    let listener = IpcListener::bind(&name, 1)?;
    let server = published(&name);
    let silent = IpcSender::<Hello>::connect(server.clone()).expect("connect");
    drop(listener);
    assert!(!rendezvous::rendezvous_path(&name).exists());
    assert!(!lock_path(&name).exists());
    assert!(!Path::new(&server).exists(), "{server} left");
    assert!(matches!(
        connect(&name, deadline(), false),
        Err(Error::NotFound { .. })
    ));
    // Once the connection goes, the server's thread ends and removes its directory.
    drop(silent);
    let dir = Path::new(&server).parent().expect("a directory");
    let start = Instant::now();
    while dir.exists() && start.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!dir.exists(), "{} left", dir.display());
    Ok(())
}
