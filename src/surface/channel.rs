//! The shared-memory surfaces' message methods: the forms of [`Channel`], [`SendHalf`] and
//! [`RecvHalf`] (written by the macros of `forms.rs` as calls of the [`Sender`](crate::Sender)
//! and [`Receiver`](crate::Receiver) methods), and the cores of [`Channel`] and of an accepted
//! [`Connection`], each handed to what it holds in one impl. The halves' cores are the
//! backend's own (`shm/channel/send.rs`, `recv.rs`).

use crate::service::Connection;
use crate::shm::channel::{Channel, RecvHalf, SendHalf};
use crate::shm::ring::{ReadGuard, WriteGrant};

impl Channel {
    send_methods!(
        grant: WriteGrant<'_>,
        setup: "use shmlink::{Channel, Config, WaitStrategy};\n\
         let name = format!(\"doc-channel-send-{}\", std::process::id());\n\
         let mut tx = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;\n\
         let mut rx = Channel::connect(&name, WaitStrategy::Spin)?;",
        commit: "grant.commit(5);",
    );

    recv_methods!(
        guard: ReadGuard<'_>,
        setup: "use shmlink::{Channel, Config, WaitStrategy};\n\
         let name = format!(\"doc-channel-recv-{}\", std::process::id());\n\
         let mut tx = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;\n\
         let mut rx = Channel::connect(&name, WaitStrategy::Spin)?;",
    );
}

impl SendHalf {
    send_methods!(
        grant: WriteGrant<'_>,
        setup: "use shmlink::{Channel, Config, WaitStrategy};\n\
         let name = format!(\"doc-send-half-{}\", std::process::id());\n\
         let a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;\n\
         let b = Channel::connect(&name, WaitStrategy::Spin)?;\n\
         let ((mut tx, _), (_, mut rx)) = (a.into_split(), b.into_split());",
        commit: "grant.commit(5);",
    );
}

impl RecvHalf {
    recv_methods!(
        guard: ReadGuard<'_>,
        setup: "use shmlink::{Channel, Config, WaitStrategy};\n\
         let name = format!(\"doc-recv-half-{}\", std::process::id());\n\
         let a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;\n\
         let b = Channel::connect(&name, WaitStrategy::Spin)?;\n\
         let ((mut tx, _), (_, mut rx)) = (a.into_split(), b.into_split());",
    );
}

cores_through!(
    Channel,
    c => send: c.split().0,
    recv: c.split().1,
    grant: WriteGrant<'a>,
    guard: ReadGuard<'a>,
);

cores_through!(
    Connection,
    c => send: c.channel(),
    recv: c.channel(),
    grant: WriteGrant<'a>,
    guard: ReadGuard<'a>,
);
