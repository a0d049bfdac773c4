//! The topic surfaces' message methods: the forms of [`Publisher`] and [`Subscriber`] (written
//! by the macros of `forms.rs` as calls of the [`Sender`](crate::Sender) and
//! [`Receiver`](crate::Receiver) methods). Their cores are the backend's own
//! (`shm/topic/publisher.rs`, `subscriber.rs`).

use crate::shm::ring::{ReadGuard, WriteGrant};
use crate::shm::topic::{Publisher, Subscriber};

impl Publisher {
    send_methods!(
        grant: WriteGrant<'_>,
        setup: "use shmlink::{Publisher, Subscriber, TopicConfig, WaitStrategy};\n\
         let name = format!(\"doc-publisher-{}\", std::process::id());\n\
         let config = TopicConfig { capacity: 8 << 20, ..TopicConfig::default() };\n\
         let mut tx = Publisher::create(&name, &config)?;\n\
         let mut rx = Subscriber::connect(&name, WaitStrategy::Spin)?;",
        commit: "grant.commit(5);",
        long: " // 3 MiB: one frame of this 8 MiB ring (a topic does not fragment).",
    );
}

impl Subscriber {
    recv_methods!(
        guard: ReadGuard<'_>,
        setup: "use shmlink::{Publisher, Subscriber, TopicConfig, WaitStrategy};\n\
         let name = format!(\"doc-subscriber-{}\", std::process::id());\n\
         let mut tx = Publisher::create(&name, &TopicConfig::default())?;\n\
         let mut rx = Subscriber::connect(&name, WaitStrategy::Spin)?;",
    );
}
