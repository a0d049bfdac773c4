//! # shmlink
//!
//! Low-latency messaging between processes on one host: a lock-free single-producer /
//! single-consumer ring of byte frames in a *named* shared-memory mapping, two rings (one per
//! direction) making a duplex [`Channel`]. [`Endpoint`] offers the same calls over an
//! `ipc-channel` backend where no mapping can be made; a [`Listener`], a [`Selector`] and an
//! async API (`shmlink::tokio`, feature `tokio`) serve many clients from one server.
//!
//! shmlink runs on Linux only: it sleeps on futexes in shared memory, learns of a dead peer
//! from pidfds and open-file-description locks, and does not compile for other targets.
//!
//! ## A first channel
//!
//! One process creates the channel by name, the other connects to it by name; then both can
//! send and receive. Here both ends live in one process, so that the example runs as it is:
//!
//! ```
//! use shmlink::{Channel, Config, WaitStrategy};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     let name = format!("doc-first-{}", std::process::id());
//!
//!     let mut server = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
//!     let mut client = Channel::connect(&name, WaitStrategy::Spin)?;
//!
//!     client.send(b"ping")?;
//!     assert_eq!(&*server.recv()?, b"ping"); // read in place in the ring
//!     server.send_json(&serde_json::json!({"pong": true}))?;
//!     let reply: serde_json::Value = client.recv_json()?;
//!     assert_eq!(reply["pong"], true);
//!     Ok(())
//! }
//! ```
//!
//! Across two processes the calls are the same; the connecting side usually waits for the
//! channel to appear with [`Channel::connect_timeout`]. A whole request/reply program that runs
//! as both processes is `examples/request_reply.rs` (`cargo run --example request_reply`):
//!
//! ```no_run
//! use shmlink::{Channel, Config};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     // Process A, the server: answers each request with the same bytes reversed.
//!     let mut server = Channel::create("demo", &Config::default())?;
//!     let (tx, rx) = server.split();
//!     loop {
//!         let request = rx.recv()?; // Err(Disconnected) once the client has gone
//!         let mut reply = request.to_vec();
//!         reply.reverse();
//!         drop(request);
//!         tx.send(&reply)?;
//!     }
//! }
//! ```
//!
//! ```no_run
//! use std::time::Duration;
//! use shmlink::{Channel, WaitStrategy};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     // Process B, the client.
//!     let wait = Duration::from_secs(5);
//!     let mut client = Channel::connect_timeout("demo", WaitStrategy::Block, wait)?;
//!     client.send(b"hello")?;
//!     assert_eq!(&*client.recv()?, b"olleh");
//!     Ok(())
//! }
//! ```
//!
//! ## One method set
//!
//! Every message surface, [`Channel`] (and its halves, [`SendHalf`] and [`RecvHalf`]),
//! [`Endpoint`] on either backend and `shmlink::tokio::AsyncChannel`, offers the
//! same operations under the same names, with the same meaning:
//!
//! | | blocking | now | deadline |
//! | --- | --- | --- | --- |
//! | send bytes (fragmented past one frame) | `send(&[u8])` | `try_send` | `send_timeout(&[u8], Duration)` |
//! | send JSON (in place in the ring) | `send_json(&T)` | `try_send_json` | `send_json_timeout` |
//! | write in place | `reserve(len)` → grant, `commit(used)` | `try_reserve` | `reserve_timeout` |
//! | receive in place | `recv()` → guard | `try_recv` | `recv_timeout` |
//! | receive into the caller's buffer | `recv_into(&mut Vec<u8>)` → length | `try_recv_into` | `recv_into_timeout` |
//! | receive JSON (owned) | `recv_json::<T>()` | `try_recv_json` | `recv_json_timeout` |
//! | send many, published together | `send_batch(&[B])` → count | `try_send_batch` | `send_batch_timeout` |
//! | receive many, each to a closure | `recv_batch(max, FnMut(&[u8]))` → count | `try_recv_batch` | `recv_batch_timeout` |
//!
//! The blocking form waits for as long as it takes (until the peer closes or dies), the `try_`
//! form not at all (`Full` or `Empty` when it cannot act now), the `_timeout` form until its
//! deadline (`Timeout`). On the async surface the blocking and deadline forms are `async` and
//! the `try_` forms are plain methods. The grant is a [`WriteGrant`] on [`Channel`] and the
//! async channel, a [`Reserved`] on [`Endpoint`] (whose `commit` returns a `Result`, since the
//! ipc-channel backend sends on commit); the guard is a [`ReadGuard`] or a [`Received`]. Both
//! deref to the bytes.
//!
//! ## Messages and limits
//!
//! A message of up to [`Channel::max_frame`] bytes (`capacity / 2 - 72`) travels as one frame;
//! a longer one, up to [`Channel::max_message`] (1 GiB unless changed), is split into fragments
//! as the peer reads them and reassembled: every send fragments, on every surface. A message is
//! whole or absent: a send whose deadline passes part-way, or an async send dropped part-way,
//! is withdrawn, and the receiver drops what it got of it. `try_send` of a message longer than
//! a frame sends it only if all its fragments fit in the ring now, else `Full` with nothing
//! sent.
//!
//! Each side publishes its `max_message` in the mapping ([`Channel::set_max_message`]); a
//! message longer than the receiver's limit fails *at the sender* with
//! [`SendError::TooLarge`], before anything is written, and the channel keeps working.
//!
//! A received message is a [`ReadGuard`]: it borrows the frame in place and releases it when
//! dropped. Because it borrows the channel, a reply that uses the request's bytes needs the
//! channel's two halves, from [`Channel::split`] (see its example). The halves also serve two
//! threads, one sending and one receiving; [`Channel::into_split`] gives owned, `Send` halves.
//! Each half keeps the mapping alive, and the endpoint closes when both are gone.
//!
//! ## Writing in place
//!
//! [`Channel::reserve`] lends the frame itself: write the message where the peer will read
//! it, and `commit` the bytes used. A grant dropped without a commit sends nothing.
//!
//! ```
//! use std::io::Write;
//! use shmlink::{Channel, Config, WaitStrategy};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let name = format!("doc-grant-{}", std::process::id());
//!     let mut a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
//!     let mut b = Channel::connect(&name, WaitStrategy::Spin)?;
//!     let mut grant = a.reserve(64)?;
//!     let used = {
//!         let mut out = &mut grant[..];
//!         write!(out, "reading {} at {}", "temperature", 21)?;
//!         64 - out.len()
//!     };
//!     grant.commit(used);
//!     assert_eq!(&*b.recv()?, b"reading temperature at 21");
//!     Ok(())
//! }
//! ```
//!
//! ## JSON
//!
//! [`Channel::send_json`] serialises a value straight into the ring; values of any size go
//! through (a long one is fragmented like any long message). [`Channel::recv_json`] decodes
//! into an owned value; [`ReadGuard::json`] decodes a received message with fields that
//! borrow from it. A borrowed `&str` field only works while the string has no escapes (JSON
//! writes `"` as `\"`, a newline as `\n`, and so on): for text that may contain them, use
//! `Cow<str>` with `#[serde(borrow)]`, which borrows when it can and allocates when it must.
//!
//! The codec is serde_json. With the cargo feature `sonic-json` it is sonic-rs, a SIMD JSON
//! library (faster in the crate's JSON bench, built with LTO; no faster in the harness's
//! release build without it: docs/design.md has the figures), which serialises
//! into the sending half's buffer and copies the text into the ring. Errors stay serde_json's
//! (where sonic-rs fails, serde_json redoes the work and reports), and so do the values, but
//! for `-0` (`0.0`, not `-0.0`), the last bit of a rare float (serde_json's default parsing is
//! not always correctly rounded), and nesting from 129 to 255 levels (decoded, where serde_json
//! refuses it).
//!
//! ```
//! use std::borrow::Cow;
//! use shmlink::{Channel, Config, WaitStrategy};
//!
//! #[derive(serde::Deserialize)]
//! struct Note<'a> {
//!     #[serde(borrow)]
//!     text: Cow<'a, str>,
//! }
//!
//! #[derive(serde::Deserialize)]
//! struct Fragile<'a> {
//!     #[allow(dead_code)]
//!     text: &'a str,
//! }
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     let name = format!("doc-json-{}", std::process::id());
//!     let mut a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
//!     let mut b = Channel::connect(&name, WaitStrategy::Spin)?;
//!     a.send_json(&serde_json::json!({ "text": "say \"hi\"" }))?;
//!     let msg = b.recv()?;
//!     assert!(msg.json::<Fragile<'_>>().is_err()); // the escaped quotes cannot be borrowed
//!     let note: Note<'_> = msg.json()?;
//!     assert_eq!(note.text, "say \"hi\"");
//!     Ok(())
//! }
//! ```
//!
//! ## Errors
//!
//! Each kind of call has its own error type, which says what it can return:
//!
//! * [`OpenError`] from making, finding and joining: `create`, `connect`, `bind`, `accept`
//!   (`NoClient` from a `try_accept` with no client waiting: not now);
//! * [`SendError`] from `send`, `send_json`, `reserve`: `Full` (not now), `Timeout`,
//!   `TooLarge` (never: over the receiver's limit), `Disconnected`, `PeerGone`, `Corrupt`,
//!   `Json`, `Io`;
//! * [`RecvError`] from `recv`, `recv_into`, `recv_json`: `Empty` (not now), `Timeout`,
//!   `Disconnected` (the peer closed and everything it sent has been received), `PeerGone`
//!   (its process died), `Corrupt`, `TooLarge` (a message over this side's limit was on its
//!   way), `Json`, `Io`.
//!
//! Each has `is_transient()` (not now: try again), `is_disconnect()` (the peer is gone) and
//! `channel()`. Each converts into [`Error`], which holds it nested (`Error::Open(..)`,
//! `Error::Send(..)`, `Error::Recv(..)`) and displays as it does, so `?` works in a function
//! that returns [`Result`]. Every variant about a channel or listener names it in a field
//! called `channel`, and its message says what to do where there is something to do (`channel
//! "jobs" is full now: nothing was sent; retry once the receiver has read, or use send or
//! send_timeout to wait for room`). The name is the one the endpoint holds, shared: on shared
//! memory, from a [`Channel`], its halves or an [`Endpoint`], `Full`, `Empty`,
//! `Timeout`, `Disconnected` and `PeerGone` allocate nothing (once the endpoint has waited
//! once and, for a sender, sent once since the peer connected: those register the peer with
//! the death watcher). The ipc-channel backend (whose sockets allocate for every message) and
//! the async surface (whose waits register with the runtime) make no such promise.
//!
//! ```
//! use std::time::Duration;
//! use shmlink::{Channel, Config, RecvError, SendError, WaitStrategy};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     let name = format!("doc-errors-{}", std::process::id());
//!     let a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
//!     let mut b = Channel::connect(&name, WaitStrategy::Spin)?;
//!     assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
//!     let err = b.recv_timeout(Duration::from_millis(1)).unwrap_err();
//!     assert!(err.is_transient());
//!     drop(a);
//!     match b.recv() {
//!         Err(RecvError::Disconnected { channel }) => assert_eq!(channel, name),
//!         other => panic!("{:?}", other.map(|m| m.len())),
//!     }
//!     assert!(matches!(b.send(b"x"), Err(SendError::Disconnected { .. })));
//!     Ok(())
//! }
//! ```
//!
//! ## Connecting: one way
//!
//! `connect(name, ..)` and `connect_timeout` reach whatever the name holds: a channel (this end
//! becomes its connector) or a listener (this end becomes a new client of it, with a channel of
//! its own, once the server accepts). [`Channel::connect`], [`Endpoint::connect`] (on either
//! backend: it finds the one its creator used) and `shmlink::tokio::connect` all work so.
//! Every `connect_timeout` ends the same way: [`OpenError::NotFound`], naming it, if nothing by
//! that name appeared, and [`OpenError::Timeout`] if something did that was not ready in time,
//! or a listener that is alive but did not accept in time (its message says so: the server must
//! call `accept`, or poll its [`Selector`] and accept when the listener is ready).
//!
//! Every name, of a channel or a listener, on either backend, follows one rule: 1 to
//! [`MAX_NAME_LEN`] (200) bytes of ASCII letters, digits, `.`, `_` and `-`, not starting with
//! `.` or `-`. Any other name is refused at once with [`OpenError::InvalidName`], by the calls
//! that make and by the calls that connect:
//!
//! ```
//! use shmlink::{Channel, Config, Listener, OpenError, WaitStrategy, MAX_NAME_LEN};
//! let long = "x".repeat(MAX_NAME_LEN + 1);
//! assert!(matches!(Listener::bind(&long, &Config::default()), Err(OpenError::InvalidName { .. })));
//! assert!(matches!(Channel::connect(".hidden", WaitStrategy::Block), Err(OpenError::InvalidName { .. })));
//! ```
//!
//! ## Services: many clients, many channels, async
//!
//! A channel joins one pair of endpoints for its whole life. A server that outlives its
//! clients, or serves several at once, binds a [`Listener`]: each client that connects to its
//! name gets its own channel, the server a [`Connection`] per client, up to a limit on
//! concurrent clients ([`OpenError::TooManyClients`] past it). A [`Selector`] lets one thread
//! wait on many channels at once and serve the ready ones in turn. With the `tokio` feature,
//! `shmlink::tokio` offers the method set in async form, and an async `accept`: a sleeping
//! task is woken through the runtime's I/O driver (an `io_uring` futex ring, Linux 6.7+, the
//! rings holding at most a quarter of the process's descriptor limit), else through one
//! reactor thread per process.
//!
//! ```
//! use shmlink::{Channel, Config, Listener, WaitStrategy};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     let name = format!("doc-svc-{}", std::process::id());
//!     let listener = Listener::bind(&name, &Config::default())?;
//!     let clients: Vec<_> = (0..2)
//!         .map(|_| {
//!             let name = name.clone();
//!             std::thread::spawn(move || -> shmlink::Result<Vec<u8>> {
//!                 let mut ch = Channel::connect(&name, WaitStrategy::Block)?;
//!                 ch.send(b"hi")?;
//!                 let reply = ch.recv()?.to_vec();
//!                 Ok(reply)
//!             })
//!         })
//!         .collect();
//!     for _ in 0..2 {
//!         let mut conn = listener.accept()?;
//!         let request = conn.recv()?.to_vec();
//!         conn.send(&request)?;
//!     }
//!     for client in clients {
//!         assert_eq!(client.join().unwrap()?, b"hi");
//!     }
//!     Ok(())
//! }
//! ```
//!
//! ## Topics: one publisher, many subscribers
//!
//! A [`Publisher`] writes each message once into one ring that every [`Subscriber`] follows at
//! its own position (the Disruptor's multicast): a camera feeding a recorder, a detector and a
//! display, market data fanned out to strategies. The publisher has the whole send set of a
//! channel, each subscriber the whole receive set, reading in place. What a slow subscriber
//! costs is chosen when the topic is made ([`TopicConfig::mode`]): [`TopicMode::Lossless`] (the
//! default: the publisher reuses space only behind the slowest live subscriber, so a full ring
//! makes `send` wait and `try_send` fail with [`SendError::Full`]; a subscriber that dies, or
//! that the publisher drops with [`Publisher::drop_subscriber`], holds nothing back) or
//! [`TopicMode::Overwrite`] (the publisher never waits; a subscriber that falls a ring behind
//! gets [`RecvError::Lagged`] once, with how many messages it missed, then the oldest one still
//! there). A subscriber that joins late may ask for up to [`TopicConfig::history`] messages
//! published before it ([`Subscriber::connect_with`]). Messages are at most
//! `capacity / 2 - 72` bytes: a topic does not fragment.
//!
//! ```
//! use shmlink::{Publisher, RecvError, Subscriber, TopicConfig, TopicMode, WaitStrategy};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     let name = format!("doc-topic-{}", std::process::id());
//!     let config = TopicConfig { capacity: 4096, mode: TopicMode::Overwrite, ..TopicConfig::default() };
//!     let mut camera = Publisher::create(&name, &config)?;
//!     let mut display = Subscriber::connect(&name, WaitStrategy::Block)?;
//!     let mut recorder = Subscriber::connect(&name, WaitStrategy::Block)?;
//!
//!     camera.send(b"frame 0")?;
//!     assert_eq!(&*display.recv()?, b"frame 0");
//!     assert_eq!(&*recorder.recv()?, b"frame 0");
//!
//!     // The display falls far behind: the camera does not wait for it.
//!     for i in 1..=500u32 {
//!         camera.send(format!("frame {i}").as_bytes())?;
//!         assert!(recorder.recv()?.starts_with(b"frame"));
//!     }
//!     match display.recv() {
//!         Err(RecvError::Lagged { missed, .. }) => assert!(missed > 0),
//!         other => panic!("expected Lagged, got {other:?}"),
//!     }
//!     assert!(display.recv()?.starts_with(b"frame")); // the oldest still there
//!     Ok(())
//! }
//! ```
//!
//! A [`Selector`] waits on subscribers beside channels ([`Selectable`]), and the async API has
//! a topic's two ends (`shmlink::tokio::AsyncPublisher`, `AsyncSubscriber`, feature `tokio`).
//! [`EndpointPublisher`] and [`EndpointSubscriber`] carry a topic on either backend, as
//! [`Endpoint`] carries a channel: shared memory where a mapping can be made, else
//! `ipc-channel`, where the publisher sends each subscriber a copy of each message (the costs
//! are in [`EndpointPublisher`]'s docs); the same calls, errors and modes.
//!
//! Across processes the calls are the same: `examples/topic_pub.rs` and
//! `examples/topic_sub.rs` (`cargo run --example topic_pub` in one terminal, `cargo run
//! --example topic_sub` in others). [`segments::list`] and `shmlink-clean` show topics with
//! their subscribers and whether each is alive; [`Publisher::subscribers`] says which
//! subscriber holds a lossless publisher back.

//! ## Writing a service
//!
//! * **Signals do not end a wait.** A thread blocked in `recv`, `send`, `accept` or
//!   [`Selector::wait`] runs the signal's handler and sleeps again, with or without
//!   `SA_RESTART`: every wait treats a futex wake-up it cannot explain as spurious and looks
//!   again. A `_timeout` form still ends at its deadline, however many signals arrive. To stop
//!   a server on `SIGTERM`, wake its selector from the handler through the selector's waker
//!   (`Selector::waker()`, a handle another thread or a signal handler uses to end a `wait`
//!   at once), or wait with a deadline and look at a flag the handler sets.
//! * **Connections outlive their listener.** Dropping a [`Listener`] (or an
//!   [`EndpointListener`]) removes its name, so no new client gets in; the connections it
//!   accepted keep working until they are dropped.
//! * **A late reply stays in the ring.** A `recv_timeout` that gave up does not take the reply
//!   it was waiting for off the channel: the reply arrives later and the next receive returns
//!   it. Put an id of your own in each request and its reply, and match them.
//! * **Slow requests on worker threads.** A channel has one sender and one receiver at each
//!   end. Split the connection ([`Channel::split`], or [`Channel::into_split`] for a channel
//!   you own), read requests on one thread, hand each (copied out) to a worker, and send the
//!   workers' replies from the thread that holds the send half (or share it behind a
//!   `Mutex`); replies then leave out of order, so they carry the request's id. Or give each
//!   worker a channel of its own: a client may connect to a listener once per worker.
//!
//! ```
//! use std::time::Duration;
//! use shmlink::{Channel, Config, Listener, WaitStrategy};
//!
//! fn main() -> Result<(), shmlink::Error> {
//!     let name = format!("doc-workers-{}", std::process::id());
//!     let listener = Listener::bind(&name, &Config::default())?;
//!     let connecting = {
//!         let name = name.clone();
//!         std::thread::spawn(move || Channel::connect(&name, WaitStrategy::Block))
//!     };
//!     let mut conn = listener.accept()?;
//!     let mut client = connecting.join().unwrap()?;
//!     drop(listener); // the connection stays
//!
//!     // The server: a request is "<id> <milliseconds of work>", its reply "<id> done".
//!     let server = std::thread::spawn(move || -> Result<(), shmlink::Error> {
//!         let (tx, rx) = conn.split();
//!         std::thread::scope(|s| -> Result<(), shmlink::Error> {
//!             let (done, replies) = std::sync::mpsc::channel::<String>();
//!             s.spawn(move || {
//!                 // Ends with Err(Disconnected) once the client has closed.
//!                 while let Ok(request) = rx.recv() {
//!                     let request = String::from_utf8_lossy(&request).into_owned();
//!                     let done = done.clone();
//!                     std::thread::spawn(move || {
//!                         let (id, work) = request.split_once(' ').unwrap();
//!                         std::thread::sleep(Duration::from_millis(work.parse().unwrap()));
//!                         let _ = done.send(format!("{id} done"));
//!                     });
//!                 }
//!             });
//!             // Ends once the reader and every worker are done.
//!             for reply in replies {
//!                 tx.send(reply.as_bytes())?;
//!             }
//!             Ok(())
//!         })
//!     });
//!
//!     client.send(b"1 200")?;
//!     // Gives up before request 1 is answered; its reply will still come.
//!     assert!(client.recv_timeout(Duration::from_millis(20)).is_err());
//!     client.send(b"2 0")?;
//!     let mut replies = Vec::new();
//!     for _ in 0..2 {
//!         replies.push(String::from_utf8_lossy(&client.recv()?).into_owned());
//!     }
//!     replies.sort(); // matched by id, whatever order they came in
//!     assert_eq!(replies, ["1 done", "2 done"]);
//!     drop(client);
//!     server.join().unwrap()
//! }
//! ```
//!
//! ## Backends
//!
//! [`Endpoint`] runs on the shared-memory [`Channel`] where a mapping can be made and on an
//! `ipc-channel` backend where it cannot (or when the `force-fallback` feature asks for it);
//! [`Endpoint::create_with`] chooses explicitly. The connecting side finds whichever its creator
//! used, by what is under the name ([`Endpoint::connect`] says how). The same code runs on both:
//! grants ([`Endpoint::reserve`]) are the frame on shared memory and a buffer of the endpoint's on
//! ipc-channel, sent on commit; deadlines hold on both (on ipc-channel a send with a deadline hands
//! its message to a thread of the endpoint's, waiting only for that thread to be free, since the
//! crate's sockets offer no timed send). Both report a killed peer as `PeerGone`. An
//! [`EndpointListener`] is the listener on either backend; the selector and the async API are
//! shared-memory only.
//!
//! Mappings whose creator died can be listed and removed with [`segments`] (or the
//! `shmlink-clean` program). [`ring::new`] runs the same ring on the heap, between threads.
//!
//! ## Waiting and liveness
//!
//! Each endpoint picks a [`WaitStrategy`]: `Block` (the default: spin only while recent spins
//! found data, else sleep on a futex word in the mapping; the sender only makes the wake-up
//! call when a sleeper announced itself), `Spin` (lowest latency, a core at 100% while
//! waiting: only where each endpoint has a core of its own) or `SpinYield`. A wait ends when
//! the peer closes (`Disconnected`, after everything it sent has been read) or dies
//! (`PeerGone`). Whether the peer is alive is not read from its pid: each endpoint holds a lock
//! on its own byte of the shared object (an open-file-description lock), which the kernel
//! releases when the process dies, however it dies. So pid reuse is never mistaken for the
//! peer, and peers in different PID namespaces see each other correctly; the recorded pid only
//! names the peer in errors and listings. A sleeping `Block` wait makes no timed wake-ups: a
//! watcher thread holds a pidfd for each peer process and wakes the sleepers of a peer that
//! dies. That thread, one per process, also looks at every watched peer's lock once a second
//! while any peer is watched (a peer may have recorded another process's pid): an idle
//! process wakes once a second there, and (with pidfds and `futex_waitv` at hand) nowhere else.
//!
//! ## Memory layout and the ring protocol
//!
//! One mapping, `/shmlink-<name>` (`/dev/shm/shmlink-<name>`), created exclusively with mode
//! 0600: a 4 KiB header page (magic, layout version, sizes, layout parameters, a ready word
//! written last, and per endpoint its state, wait mode, pid and max message, each on its own
//! 128-byte cell; then the two ring headers) and the two ring regions. [`Channel::connect`]
//! refuses a mapping whose version or layout parameters differ from its own
//! ([`OpenError::VersionMismatch`], [`OpenError::LayoutMismatch`]).
//!
//! Frames are packed on 8-byte boundaries: one `u64` header word (length, kind, and a tag derived
//! from the frame's position) followed by the payload; a message of up to 56 bytes never straddles
//! two cache lines (a SKIP word moves it to the next one). A frame never wraps: a PAD word sends
//! the reader back to offset 0, so every payload is one contiguous slice. The producer publishes a
//! frame by storing its header word with `Release` after the payload; the consumer polls the word
//! at its position with `Acquire`, so a message moves only the cache lines that hold it. See
//! [`ring`] for the details.
//!
//! ## Safety against the peer
//!
//! The other process can write anything into the mapping. Every value read from it is checked
//! before use: a bad header is refused by `connect` ([`OpenError::BadMagic`],
//! [`OpenError::SizeMismatch`]...), and a frame with a wrong tag, an unknown kind or a length
//! past the region is [`RecvError::Corrupt`]. None of these panic, read outside the mapping or
//! loop forever. What a hostile peer *can* do: change the bytes of a frame while you hold its
//! [`ReadGuard`] (copy them out first if that matters), stop answering (use timeouts), or
//! shrink the shared object under you, which makes the kernel raise `SIGBUS` on the next
//! access: share names only with processes you trust that much.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks, unreachable_pub)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "shmlink runs on Linux only: it sleeps on futexes in shared memory, learns of a peer's death \
     from pidfds and open-file-description locks, and has no other implementation of these"
);

mod error;
mod ipc;
mod json;
mod seam;
mod service;
mod shm;
mod surface;
mod sync;
mod sys;
mod wait;

pub use error::{ChannelName, Error, OpenError, RecvError, Result, SendError};
pub use seam::{Grant, Message};
pub use service::{Connection, Listener, Selectable, Selector, SelectorWaker, DEFAULT_MAX_CLIENTS};
pub use shm::channel::{Channel, Config, RecvHalf, Role, SendHalf, DEFAULT_MAX_MESSAGE};
pub use shm::layout::listener::MAX_CLIENTS;
pub use shm::layout::topic::MAX_SUBSCRIBERS;
pub use shm::mapping::MAX_NAME_LEN;
pub use shm::ring;
pub use shm::ring::{ReadGuard, WriteGrant};
pub use shm::topic::{
    Publisher, Subscriber, SubscriberConfig, SubscriberInfo, TopicConfig, TopicMode,
    DEFAULT_MAX_SUBSCRIBERS,
};

/// What is on this machine: the shared-memory channels, listeners and topics (their mappings:
/// [`list`](segments::list), [`scan`](segments::scan), [`inspect`](segments::inspect),
/// [`reclaim`](segments::reclaim), [`clean_dead`](segments::clean_dead)) and those of the
/// ipc-channel fallback (their files: [`list_fallback`](segments::list_fallback)), and what the
/// counters in a mapping say ([`stats`](segments::stats)). The `shmlink` command (package
/// `shmlink-cli`) shows them.
pub mod segments {
    pub use crate::ipc::listing::{list_fallback, FallbackInfo};
    pub use crate::shm::segments::*;
    pub use crate::shm::stats::{prometheus, stats, Counts, RingStats, Stats, SubscriberStats};
}
pub use surface::endpoint::{
    Backend, Endpoint, EndpointListener, EndpointPublisher, EndpointSubscriber, Received, Reserved,
};
#[cfg(feature = "tokio")]
pub use surface::tokio;
pub use surface::{Receiver, Sender, Value};
pub use wait::WaitStrategy;
/// The crate [`send_value`](Sender::send_value) and [`recv_value`](Receiver::recv_value) take
/// their bounds from, re-exported so that a dependent names the same version.
pub use zerocopy;

#[cfg(feature = "test-hooks")]
mod hooks;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod testing;

#[cfg(all(test, loom))]
mod loom_tests;

/// The code blocks of the README and of `docs/`, compiled and run as doctests by
/// `cargo test --doc`, so that no example there goes stale.
#[cfg(doctest)]
mod doc_files {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/design.md")]
    struct Design;
    #[doc = include_str!("../docs/safety.md")]
    struct Safety;
    #[doc = include_str!("../docs/testing.md")]
    struct Testing;
    #[doc = include_str!("../docs/observe.md")]
    struct Observe;
}
