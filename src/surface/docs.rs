//! The documentation of each operation of the method set, shared by the trait methods, the
//! inherent methods of every blocking surface and the async forms.

macro_rules! doc_send {
    () => {
        "Sends one message, waiting for room for as long as it takes.\n\n\
         A message of up to `max_frame` bytes travels as one frame; a longer one, up to \
         `max_message`, in fragments as the peer reads them, and the receiver gets it whole. \
         Fails with [`SendError::TooLarge`](crate::SendError::TooLarge) past the receiver's \
         limit or this side's (before anything is written; the channel keeps working), \
         [`SendError::Disconnected`](crate::SendError::Disconnected) once the peer closed, and \
         [`SendError::PeerGone`](crate::SendError::PeerGone) once its process is known dead, \
         whether or not the ring has room: on shared memory the process's death watcher hears \
         of the death at once (through the peer's pidfd; a peer that recorded another process \
         is found by its look at every peer's lock, within about a second) and every send form \
         looks at what it heard, one load per send; where no watcher covers the peer (no \
         pidfds, a peer in another pid namespace) only a send that waits for room finds out. \
         On the ipc-channel backend the first send to a dead peer fails (a send with a \
         deadline, handed to the lane, may be accepted first and the next one fail), and every \
         send after it."
    };
}

macro_rules! doc_try_send {
    () => {
        "Sends one message if it can go out whole now, else \
         [`SendError::Full`](crate::SendError::Full), with nothing sent.\n\n\
         A message longer than one frame goes only if the ring has room for all its fragments \
         now (one that needs more than about half the ring may have to wait until the peer \
         has read and moved on: use `send` or `send_timeout` for those); one that could never \
         fit the ring at once is [`SendError::TooLarge`](crate::SendError::TooLarge)."
    };
}

macro_rules! doc_send_timeout {
    () => {
        "Like `send`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) once \
         `timeout` has passed.\n\n\
         A message sent in fragments that times out part-way is withdrawn: the receiver drops \
         the part it got and never sees the message, and the next send goes through as usual."
    };
}

macro_rules! doc_send_json {
    () => {
        "Serialises `value` as JSON and sends it as one message, waiting for room.\n\n\
         On shared memory the text is written straight into the ring, in a grant sized from \
         earlier messages; a value that does not fit it is serialised again into a buffer the \
         endpoint keeps and sent from there, in fragments if it is longer than a frame. Values \
         of any size up to `max_message` go through. A value that cannot be serialised fails \
         with [`SendError::Json`](crate::SendError::Json) and sends nothing."
    };
}

macro_rules! doc_try_send_json {
    () => {
        "Like `send_json`, if the message can go out whole now (see `try_send`), else \
         [`SendError::Full`](crate::SendError::Full), with nothing sent."
    };
}

macro_rules! doc_send_json_timeout {
    () => {
        "Like `send_json`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) \
         once `timeout` has passed; a value sent in fragments that times out part-way is \
         withdrawn, as with `send_timeout`."
    };
}

macro_rules! doc_reserve {
    () => {
        "Reserves room for a message of `len` bytes (at most `max_frame`), waiting for it, and \
         lends it out to be written in place; `commit(used)` sends the first `used` bytes as \
         one message, and a grant dropped without a commit sends nothing.\n\n\
         On shared memory the grant is the frame itself, in the ring; on the ipc-channel \
         backend it is a buffer of the endpoint's that the commit sends. Fails with \
         [`SendError::TooLarge`](crate::SendError::TooLarge) for a `len` past one frame or the \
         receiver's limit."
    };
}

macro_rules! doc_try_reserve {
    () => {
        "Like `reserve`, if there is room now, else [`SendError::Full`](crate::SendError::Full)."
    };
}

macro_rules! doc_reserve_timeout {
    () => {
        "Like `reserve`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) once \
         `timeout` has passed."
    };
}

macro_rules! doc_recv {
    () => {
        "Receives the next message, waiting for it for as long as it takes, and lends it out: \
         the guard derefs to the bytes (on shared memory, read in place in the ring, which \
         the guard releases when it drops).\n\n\
         A message that came in fragments is handed over whole, reassembled. Fails with \
         [`RecvError::Disconnected`](crate::RecvError::Disconnected) once the peer closed and \
         everything it sent has been received, \
         [`RecvError::PeerGone`](crate::RecvError::PeerGone) soon after its process died, and \
         [`RecvError::Corrupt`](crate::RecvError::Corrupt) if the ring holds something that is \
         not a valid message."
    };
}

macro_rules! doc_try_recv {
    () => {
        "Receives the next message if a whole one is there now, else \
         [`RecvError::Empty`](crate::RecvError::Empty).\n\n\
         One call takes at most a ring's worth of fragments of a long message; the part \
         received is kept, and a later call hands the message over once it is complete."
    };
}

macro_rules! doc_recv_timeout {
    () => {
        "Like `recv`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) once \
         `timeout` has passed (also while the fragments of a long message keep arriving: the \
         part received is kept for the next call)."
    };
}

macro_rules! doc_recv_into {
    () => {
        "Receives the next message into `buf`, replacing its contents, and returns its length, \
         waiting for it.\n\n\
         `buf` keeps its capacity, so a caller that reuses it allocates only for a message \
         longer than any before. A message that was reassembled (or, on the ipc-channel \
         backend, received into a buffer of its own) trades places with `buf` instead of being \
         copied."
    };
}

macro_rules! doc_try_recv_into {
    () => {
        "Like `recv_into`, if a whole message is there now (see `try_recv`), else \
         [`RecvError::Empty`](crate::RecvError::Empty)."
    };
}

macro_rules! doc_recv_into_timeout {
    () => {
        "Like `recv_into`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) \
         once `timeout` has passed."
    };
}

macro_rules! doc_recv_json {
    () => {
        "Receives the next message and decodes it as JSON into an owned value, waiting for \
         it.\n\n\
         To borrow string fields from the message instead, `recv` it and decode it with the \
         guard's `json`. A message that is not valid JSON for `T` is \
         [`RecvError::Json`](crate::RecvError::Json) (the message is consumed; the channel \
         keeps working)."
    };
}

macro_rules! doc_try_recv_json {
    () => {
        "Like `recv_json`, if a whole message is there now (see `try_recv`), else \
         [`RecvError::Empty`](crate::RecvError::Empty)."
    };
}

macro_rules! doc_recv_json_timeout {
    () => {
        "Like `recv_json`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) \
         once `timeout` has passed."
    };
}

macro_rules! doc_send_batch {
    () => {
        "Sends the messages of `batch` in order, waiting for room for as long as it takes, and \
         returns how many went out.\n\n\
         Each message travels as `send` sends it and is received on its own (by `recv`, or \
         many at a time by `recv_batch`). On shared memory the messages of up to a frame are \
         written as many at a time as the ring has room for and published together, with one \
         release and one look at whether the receiver sleeps for the lot where `send` takes \
         one per message: the way to stream small messages fast. That pays while the copy of \
         a message costs little beside its publish: a message of 8 KiB or more (or a quarter \
         of the ring) goes out on its own, as `send` sends it, between the runs of smaller \
         ones, so the receiver copies it out while the next is written (measured between two \
         threads, `benches/batch.rs`, batches of 64: 256 B to 8 KiB messages at 3-13x the \
         rate of one-by-one sends, 64 KiB the same; 64 B from 0.5x, where one-by-one sends \
         met a receiver that never slept, to 15x; see docs/design.md). The count is the whole \
         batch unless a message could not go after others had (the peer closed, its process \
         died, the message is too large): the count then says which one, and the next call, \
         starting with it, returns the error. A call fails only when its first message did \
         not go."
    };
}

macro_rules! doc_try_send_batch {
    () => {
        "Like `send_batch`, for the messages that can go out now (one longer than a frame only \
         whole, as with `try_send`): [`SendError::Full`](crate::SendError::Full) when not even \
         the first can."
    };
}

macro_rules! doc_send_batch_timeout {
    () => {
        "Like `send_batch`, stopping once `timeout` has passed: the count says how many went \
         out, and [`SendError::Timeout`](crate::SendError::Timeout) is returned when not even \
         the first did."
    };
}

macro_rules! doc_recv_batch {
    () => {
        "Receives the next message, waiting for it for as long as it takes, then the messages \
         that are there now behind it, up to `max` in all; hands each to `f`, in order, and \
         returns how many it handed.\n\n\
         On shared memory the messages are read in place and their room goes back to the \
         sender in batches, not message by message: the way to drain a stream of small \
         messages fast. A message that came in fragments is handed over whole. `f` borrows \
         each message for its call only; the bytes of a frame read in place are in memory the \
         peer can write, so decode JSON from a copy (as `recv_json` does). An error met after \
         the first message ends the batch and the next call returns it: a call fails only when \
         it handed nothing. A `max` of 0 returns 0 at once.\n\n\
         One call does bounded work whatever `max` is, so `usize::MAX` is safe against a \
         sender that never lets the channel run empty: on shared memory it takes, after the \
         first message, no more once it has read a ring's capacity of bytes (about a ring's \
         worth of messages); on the ipc-channel backend at most 1024 messages, and none more \
         once they came to 1 MiB. The deadline forms also stop handing messages once their \
         deadline has passed (looked at every 64 messages on shared memory, at every message \
         on the ipc-channel backend); the async forms hand over one such call's worth per \
         operation and take a unit of the task's tokio budget per message handed, so a task \
         that drains a busy channel yields to the other tasks of its thread."
    };
}

macro_rules! doc_try_recv_batch {
    () => {
        "Like `recv_batch`, without waiting for the first message: \
         [`RecvError::Empty`](crate::RecvError::Empty) when no whole message is there now."
    };
}

macro_rules! doc_recv_batch_timeout {
    () => {
        "Like `recv_batch`, waiting for the first message until `timeout` has passed, then \
         [`RecvError::Timeout`](crate::RecvError::Timeout)."
    };
}

macro_rules! doc_send_value {
    () => {
        "Sends a plain value as one message: its bytes as they are in memory, waiting for room \
         for as long as it takes.\n\n\
         `T` is a type whose every byte is initialised and which has no interior mutability: \
         zerocopy's [`IntoBytes`](zerocopy::IntoBytes) and [`Immutable`](zerocopy::Immutable) \
         (derive them on a `#[repr(C)]` struct; [`zerocopy`](crate::zerocopy) is re-exported). \
         The bytes are written straight into the ring, as `send` writes a slice, and received \
         by `recv_value` as a `&T` read in place. The receiver must use \
         the same type (same layout: same crate version, same target); nothing about the type \
         travels with the message. Fails as `send` does."
    };
}

macro_rules! doc_try_send_value {
    () => {
        "Like `send_value`, if the message can go out whole now (see `try_send`), else \
         [`SendError::Full`](crate::SendError::Full), with nothing sent."
    };
}

macro_rules! doc_send_value_timeout {
    () => {
        "Like `send_value`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) \
         once `timeout` has passed."
    };
}

macro_rules! doc_recv_value {
    () => {
        "Receives the next message as a plain value of type `T`, waiting for it, and lends it \
         out: the [`Value`](crate::Value) derefs to a `&T` read in place in the ring (frames \
         are 8-byte aligned), and gives the frame back when it drops.\n\n\
         `T` is a type every byte pattern of which is a valid value, with no interior \
         mutability: zerocopy's [`FromBytes`](zerocopy::FromBytes), \
         [`KnownLayout`](zerocopy::KnownLayout) and [`Immutable`](zerocopy::Immutable). A \
         message that is not exactly `size_of::<T>()` bytes long is \
         [`RecvError::WrongSize`](crate::RecvError::WrongSize) (the message is consumed; the \
         channel keeps working), never a value made of the wrong bytes. Where the bytes are \
         not aligned for `T` (a type aligned past 8 bytes, a message that came in fragments, \
         the ipc-channel backend, whose messages are buffers of their own) the value is copied \
         out once instead of read in place. The bytes of a frame read in place are in memory \
         the peer can write: a peer can change the value read, never make it invalid. Fails \
         otherwise as `recv` does."
    };
}

macro_rules! doc_try_recv_value {
    () => {
        "Like `recv_value`, if a whole message is there now (see `try_recv`), else \
         [`RecvError::Empty`](crate::RecvError::Empty)."
    };
}

macro_rules! doc_recv_value_timeout {
    () => {
        "Like `recv_value`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) \
         once `timeout` has passed."
    };
}
