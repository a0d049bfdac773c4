//! The errors a user meets, provoked one by one on each surface and backend: each displays the
//! name of its channel or listener (quoted, as `{:?}` writes it), the not-now ones and the
//! timeouts say what to do, and each has the nested shape `shmlink::Error::{Open, Send,
//! Recv}(..)` once converted.
//!
//! Run with `--nocapture` to see every message.

use crate::support;

use std::time::Duration;

use shmlink::{
    Backend, Channel, Config, Endpoint, EndpointListener, Error, Listener, OpenError, RecvError,
    SendError, WaitStrategy,
};
use support::{unique, NameGuard};

/// A wait the tests expect to run out: short, as nothing can end it early.
const SHORT: Duration = Duration::from_millis(20);

/// A small ring, so that a few messages fill it.
fn small() -> Config {
    Config {
        capacity: 4096,
        wait: WaitStrategy::Block,
    }
}

/// Checks that `err` names `name` and says `advice` (if given), prints it, and returns it as
/// the catch-all for the caller's `matches!`.
fn named(what: &str, name: &str, advice: &[&str], err: impl Into<Error>) -> Error {
    let err: Error = err.into();
    let shown = err.to_string();
    println!("{what}: {shown}");
    assert!(
        shown.contains(&format!("{name:?}")),
        "{what}: {shown:?} does not name {name:?}"
    );
    for words in advice {
        assert!(
            shown.contains(words),
            "{what}: {shown:?} does not say {words:?}"
        );
    }
    assert_eq!(
        err.channel().map(|c| c.as_str()),
        Some(name),
        "{what}: channel()"
    );
    err
}

#[test]
fn a_channels_errors_name_it_and_say_what_to_do() {
    let name = unique("err-shm");
    let _guard = NameGuard(name.clone());
    let mut a = Channel::create(&name, &small()).unwrap();
    let mut b = Channel::connect(&name, WaitStrategy::Block).unwrap();

    let e = named(
        "try_recv",
        &name,
        &["recv_timeout"],
        b.try_recv().unwrap_err(),
    );
    assert!(matches!(e, Error::Recv(RecvError::Empty { .. })), "{e:?}");
    let e = named(
        "recv_timeout",
        &name,
        &["timed out", "no message arrived"],
        b.recv_timeout(SHORT).unwrap_err(),
    );
    assert!(matches!(e, Error::Recv(RecvError::Timeout { .. })), "{e:?}");

    // A message the receiver cannot decode as the type asked for.
    a.send(b"nope").unwrap();
    let e = named(
        "recv_json",
        &name,
        &["not valid JSON for the requested type", "line 1 column 2"],
        b.recv_json::<Vec<u32>>().unwrap_err(),
    );
    assert!(matches!(e, Error::Recv(RecvError::Json { .. })), "{e:?}");
    // A value JSON cannot hold (a map with non-string keys).
    let bad: std::collections::HashMap<(u8, u8), u8> = [((1, 2), 3)].into();
    let e = named(
        "send_json",
        &name,
        &["JSON"],
        a.send_json(&bad).unwrap_err(),
    );
    assert!(matches!(e, Error::Send(SendError::Json { .. })), "{e:?}");

    // Longer than the receiver accepts.
    b.set_max_message(100);
    let e = named(
        "send past max_message",
        &name,
        &["101 bytes", "nothing was sent"],
        a.send(&[0; 101]).unwrap_err(),
    );
    assert!(
        matches!(
            e,
            Error::Send(SendError::TooLarge {
                len: 101,
                max: 100,
                ..
            })
        ),
        "{e:?}"
    );

    while a.try_send(&[1; 64]).is_ok() {}
    let e = named(
        "try_send",
        &name,
        &["full", "send_timeout"],
        a.try_send(&[1; 64]).unwrap_err(),
    );
    assert!(matches!(e, Error::Send(SendError::Full { .. })), "{e:?}");
    let e = named(
        "send_timeout",
        &name,
        &["timed out", "did not take messages"],
        a.send_timeout(&[1; 64], SHORT).unwrap_err(),
    );
    assert!(matches!(e, Error::Send(SendError::Timeout { .. })), "{e:?}");

    drop(b);
    let e = named("send after close", &name, &[], a.send(&[1]).unwrap_err());
    assert!(
        matches!(e, Error::Send(SendError::Disconnected { .. })),
        "{e:?}"
    );
}

#[test]
fn opening_errors_name_the_channel() {
    let name = unique("err-open");
    let _guard = NameGuard(name.clone());
    let e = named(
        "connect to nothing",
        &name,
        &["must create or bind it"],
        Channel::connect(&name, WaitStrategy::Block).unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::NotFound { .. })),
        "{e:?}"
    );
    let bad = Config {
        capacity: 1000,
        ..small()
    };
    let e = named(
        "create with a bad capacity",
        &name,
        &["power of two"],
        Channel::create(&name, &bad).unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::InvalidConfig { .. })),
        "{e:?}"
    );
    let _a = Channel::create(&name, &small()).unwrap();
    let e = named(
        "create twice",
        &name,
        &["pick another name"],
        Channel::create(&name, &small()).unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::AlreadyExists { .. })),
        "{e:?}"
    );
    // The one error that names no channel: the string it refused is not one.
    let e: Error = Channel::connect("-bad", WaitStrategy::Block)
        .unwrap_err()
        .into();
    println!("connect to an invalid name: {e}");
    assert!(
        matches!(&e, Error::Open(OpenError::InvalidName { name, .. }) if name == "-bad"),
        "{e:?}"
    );
    assert!(e.channel().is_none());
    let e: Error = "nap".parse::<WaitStrategy>().unwrap_err();
    println!("parse a wait strategy: {e}");
    assert!(matches!(e, Error::UnknownWaitStrategy { .. }), "{e:?}");
}

#[test]
fn a_listeners_errors_name_it_and_a_connect_it_never_accepts_says_so() {
    let name = unique("err-listen");
    let _guard = NameGuard(name.clone());
    let e = named(
        "bind with max_clients 0",
        &name,
        &["max_clients"],
        Listener::bind_with_limit(&name, &small(), 0).unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::InvalidConfig { .. })),
        "{e:?}"
    );
    let listener = Listener::bind(&name, &small()).unwrap();
    let e = named(
        "try_accept",
        &name,
        &["no client waiting"],
        listener.try_accept().unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::NoClient { .. })),
        "{e:?}"
    );
    assert!(e.is_transient());
    let e = named(
        "accept_timeout",
        &name,
        &["timed out", "no client connected"],
        listener.accept_timeout(SHORT).unwrap_err(),
    );
    assert!(matches!(e, Error::Open(OpenError::Timeout { .. })), "{e:?}");
    // The listener is alive and never accepts.
    let e = named(
        "connect_timeout to a listener that does not accept",
        &name,
        &["alive", "did not accept", "must call accept"],
        Channel::connect_timeout(&name, WaitStrategy::Block, SHORT).unwrap_err(),
    );
    assert!(matches!(e, Error::Open(OpenError::Timeout { .. })), "{e:?}");
}

/// The errors of an `Endpoint` and its listener on `backend`.
fn an_endpoints_errors_name_it(backend: Backend) {
    let name = unique(&format!("err-{}", backend.as_str()));
    let _guard = NameGuard(name.clone());
    let mut a = Endpoint::create_with(&name, &small(), backend).unwrap();
    let tag = |what: &str| format!("{} {what}", backend.as_str());
    if backend == Backend::IpcChannel {
        // No connector yet: nothing can go out now, nor within the wait.
        let e = named(
            &tag("try_send"),
            &name,
            &["full"],
            a.try_send(b"x").unwrap_err(),
        );
        assert!(matches!(e, Error::Send(SendError::Full { .. })), "{e:?}");
        let e = named(
            &tag("send_timeout"),
            &name,
            &["timed out"],
            a.send_timeout(b"x", SHORT).unwrap_err(),
        );
        assert!(matches!(e, Error::Send(SendError::Timeout { .. })), "{e:?}");
    }
    let mut b = Endpoint::connect_timeout(&name, WaitStrategy::Block, support::WATCHDOG).unwrap();
    assert_eq!(b.backend(), backend);
    let e = named(
        &tag("try_recv"),
        &name,
        &["recv_timeout"],
        b.try_recv().unwrap_err(),
    );
    assert!(matches!(e, Error::Recv(RecvError::Empty { .. })), "{e:?}");
    let e = named(
        &tag("recv_timeout"),
        &name,
        &["timed out"],
        b.recv_timeout(SHORT).unwrap_err(),
    );
    assert!(matches!(e, Error::Recv(RecvError::Timeout { .. })), "{e:?}");
    a.send(b"nope").unwrap();
    let e = named(
        &tag("recv_json"),
        &name,
        &["not valid JSON for the requested type"],
        b.recv_json::<Vec<u32>>().unwrap_err(),
    );
    assert!(matches!(e, Error::Recv(RecvError::Json { .. })), "{e:?}");
    // Past what this backend carries: for a reservation, one frame of the ring, or the
    // fallback's largest message.
    let past = a.max_frame() + 1;
    let e = named(
        &tag("try_reserve past the largest"),
        &name,
        &["exceeds the maximum", "nothing was sent"],
        a.try_reserve(past).map(|_| ()).unwrap_err(),
    );
    assert!(
        matches!(e, Error::Send(SendError::TooLarge { .. })),
        "{e:?}"
    );
    if backend == Backend::Shm {
        while a.try_send(&[1; 64]).is_ok() {}
        let e = named(
            &tag("try_send"),
            &name,
            &["full"],
            a.try_send(&[1; 64]).unwrap_err(),
        );
        assert!(matches!(e, Error::Send(SendError::Full { .. })), "{e:?}");
        let e = named(
            &tag("send_timeout"),
            &name,
            &["timed out"],
            a.send_timeout(&[1; 64], SHORT).unwrap_err(),
        );
        assert!(matches!(e, Error::Send(SendError::Timeout { .. })), "{e:?}");
    }
    drop(a);
    let e = loop {
        // Everything sent before the close is received first.
        match b.recv_timeout(support::WATCHDOG) {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    let e = named(&tag("recv after close"), &name, &[], e);
    assert!(
        matches!(e, Error::Recv(RecvError::Disconnected { .. })),
        "{e:?}"
    );

    let lname = unique(&format!("err-{}-listen", backend.as_str()));
    let _lguard = NameGuard(lname.clone());
    let e = named(
        &tag("bind with max_clients 0"),
        &lname,
        &["max_clients"],
        EndpointListener::bind_with(&lname, &small(), backend, 0).unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::InvalidConfig { .. })),
        "{e:?}"
    );
    let listener = EndpointListener::bind_with(&lname, &small(), backend, 4).unwrap();
    let e = named(
        &tag("try_accept"),
        &lname,
        &["no client waiting"],
        listener.try_accept().unwrap_err(),
    );
    assert!(
        matches!(e, Error::Open(OpenError::NoClient { .. })),
        "{e:?}"
    );
    let e = named(
        &tag("accept_timeout"),
        &lname,
        &["no client connected"],
        listener.accept_timeout(SHORT).unwrap_err(),
    );
    assert!(matches!(e, Error::Open(OpenError::Timeout { .. })), "{e:?}");
    if backend == Backend::Shm {
        let e = named(
            &tag("connect_timeout to a listener that does not accept"),
            &lname,
            &["alive", "did not accept", "must call accept"],
            Endpoint::connect_timeout(&lname, WaitStrategy::Block, SHORT).unwrap_err(),
        );
        assert!(matches!(e, Error::Open(OpenError::Timeout { .. })), "{e:?}");
    } else {
        // The fallback listener's own thread takes a client in and queues it for `accept`: the
        // connect ends without the server.
        let client = Endpoint::connect_timeout(&lname, WaitStrategy::Block, support::WATCHDOG);
        assert!(client.is_ok(), "{client:?}");
    }
}

#[test]
fn an_endpoints_errors_name_it_on_shared_memory() {
    an_endpoints_errors_name_it(Backend::Shm);
}

#[test]
fn an_endpoints_errors_name_it_on_the_fallback() {
    an_endpoints_errors_name_it(Backend::IpcChannel);
}
