//! Carries shmlink topics and channels between hosts over [zenoh](https://zenoh.io).
//!
//! Shared memory ends at the host. A [`Bridge`] on each host joins the local shmlink names to
//! zenoh key expressions, so that processes keep calling `Publisher::create`,
//! `Subscriber::connect` and `Channel::connect` as they do on one host, and only what must
//! leave the host crosses the network. zenoh does the rest: discovery, reliability, congestion
//! control, TLS, access control, peer to peer or through routers.
//!
//! * **Topics** ([`Bridge::export_topic`], [`Bridge::import_topic`]): every message of a local
//!   topic is put on the key `<prefix>/topic/<NAME>`, one zenoh sample per message, and a bridge
//!   that imports the name republishes each sample into a local topic of the same name.
//!   Message boundaries, order and bytes (so typed values and JSON) are kept. A lossless topic
//!   is exported with zenoh's blocking congestion control, so a slow remote subscriber holds
//!   back the local publisher as a slow local one would; an overwrite topic with drop.
//! * **Channels** ([`Bridge::serve`], [`Bridge::connect`]): a bridge that serves a listener's
//!   name answers the queryable `<prefix>/channel/<NAME>/open`; a bridge that connects to it
//!   binds a local listener of the same name and carries each of its clients to the remote
//!   listener, one zenoh key pair per connection (`<prefix>/channel/<NAME>/<ID>/up`, client to
//!   server, and `.../down`), and a liveliness token per side (`<prefix>/alive/<NAME>/<ID>/client`
//!   and `.../server`), so that either side's death ends the other.
//!
//! A bridge reads and writes its local names as any shmlink process does: it is a subscriber
//! of what it exports, a publisher of what it imports, a client of what it serves, and a
//! listener for what it connects to. `shmlink list` shows it so.
//!
//! ```no_run
//! use shmlink_zenoh::{peer_config, Bridge};
//! // Host A: export the topic "camera", listen for the other bridge.
//! let config = peer_config(&["tcp/0.0.0.0:7447".into()], &[], true)?;
//! let mut bridge = Bridge::open(config, shmlink_zenoh::DEFAULT_PREFIX)?;
//! bridge.export_topic("camera")?;
//! // Host B runs `shmlink-bridge --peer tcp/HOST_A:7447 --import camera`.
//! # Ok::<(), shmlink_zenoh::Error>(())
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shmlink::{
    Channel, Config, Listener, OpenError, Publisher, RecvError, RecvHalf, SendHalf, Subscriber,
    TopicConfig, TopicMode, WaitStrategy,
};
use zenoh::handlers::{FifoChannel, FifoChannelHandler};
use zenoh::pubsub::Publisher as ZPublisher;
use zenoh::qos::CongestionControl;
use zenoh::sample::{Sample, SampleKind};
use zenoh::{Session, Wait};

/// The first chunk of every key a bridge uses, unless it is given another.
pub const DEFAULT_PREFIX: &str = "shmlink";

/// How often a bridge looks again at something it is waiting for while work is under way (room
/// in a full ring, a publisher for a topic a remote subscriber wants).
const POLL: Duration = Duration::from_millis(20);

/// How long an idle loop of a bridge waits (for a message, a client, a remote subscriber, whose
/// arrival wakes it at once) before it looks at what has no event of its own: the bridge's stop
/// flag, the other half of a connection, a local topic's subscribers. An idle bridge so wakes a
/// few times a second per topic, listener and connection.
const IDLE: Duration = Duration::from_millis(250);

/// How long a bridge waits for the serving bridge to answer a connection (and the serving
/// bridge for its local listener to accept it).
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Samples waiting between zenoh's receiving task and a bridge's thread for one key. When it
/// is full, zenoh's receiving task waits: that is how a slow local reader holds back the
/// sender on the other host.
const QUEUE: usize = 256;

/// Most messages an exporting bridge takes from its topic in one receive.
const BATCH: usize = 256;

/// What can go wrong while a bridge is set up. Once it runs, what happens to one topic or
/// connection is written to standard error and does not stop the others.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// zenoh refused a configuration, a session or a declaration.
    #[error("zenoh: {0}")]
    Zenoh(String),
    /// A local name could not be made (a publisher of an imported topic, a listener).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A name that cannot be a chunk of a zenoh key (it holds `/`, `*`, `$`, `?` or `#`).
    #[error("{name:?} cannot be part of a zenoh key: it holds one of / * $ ? #")]
    BadName {
        /// The name.
        name: String,
    },
}

fn zerr(e: impl std::fmt::Display) -> Error {
    Error::Zenoh(e.to_string())
}

/// A zenoh configuration for a peer that listens on `listen` and connects to `connect`
/// (endpoints such as `tcp/127.0.0.1:7447`), with multicast scouting and gossip off when
/// `scouting` is false (only the endpoints given are used).
pub fn peer_config(
    listen: &[String],
    connect: &[String],
    scouting: bool,
) -> Result<zenoh::Config, Error> {
    with_endpoints(zenoh::Config::default(), listen, connect, scouting)
}

/// `config` with the endpoints and scouting of [`peer_config`] set over it (an empty list
/// leaves that part of `config` as it is).
pub fn with_endpoints(
    mut config: zenoh::Config,
    listen: &[String],
    connect: &[String],
    scouting: bool,
) -> Result<zenoh::Config, Error> {
    let list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter()
                .map(|e| format!("{e:?}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    if !listen.is_empty() {
        config
            .insert_json5("listen/endpoints", &list(listen))
            .map_err(zerr)?;
    }
    if !connect.is_empty() {
        config
            .insert_json5("connect/endpoints", &list(connect))
            .map_err(zerr)?;
    }
    if !scouting {
        config
            .insert_json5("scouting/multicast/enabled", "false")
            .map_err(zerr)?;
        config
            .insert_json5("scouting/gossip/enabled", "false")
            .map_err(zerr)?;
    }
    Ok(config)
}

/// The key a topic's messages are put on.
pub fn topic_key(prefix: &str, topic: &str) -> String {
    format!("{prefix}/topic/{topic}")
}

fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.contains(['/', '*', '$', '?', '#']) {
        return Err(Error::BadName { name: name.into() });
    }
    Ok(())
}

/// One bridge: a zenoh session and the topics and channels it carries, each on threads of its
/// own. Dropping it (or [`close`](Bridge::close)) stops them: local subscribers of an imported
/// topic see its publisher close, clients of a connected listener see it close.
pub struct Bridge {
    session: Session,
    prefix: String,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

impl Bridge {
    /// Opens a zenoh session with `config` (see [`peer_config`]); every key this bridge uses
    /// starts with `prefix`.
    pub fn open(config: zenoh::Config, prefix: &str) -> Result<Bridge, Error> {
        let session = zenoh::open(config).wait().map_err(zerr)?;
        Ok(Bridge {
            session,
            prefix: prefix.trim_end_matches('/').to_owned(),
            stop: Arc::new(AtomicBool::new(false)),
            workers: Vec::new(),
        })
    }

    /// Puts every message of the local topic `topic` on [`topic_key`]. The bridge joins the
    /// topic as a subscriber only while some remote subscriber matches the key (so a lossless
    /// topic is never held back for nobody), and joins again when the topic's publisher is
    /// replaced. Messages published while no remote subscriber is there are not carried, as a
    /// subscriber gets only what is published after it joined.
    pub fn export_topic(&mut self, topic: &str) -> Result<(), Error> {
        check_name(topic)?;
        let key = topic_key(&self.prefix, topic);
        // Declared here so that a bad key fails the call; used to learn of remote subscribers.
        let probe = self
            .session
            .declare_publisher(key.clone())
            .wait()
            .map_err(zerr)?;
        let (session, stop, topic) = (self.session.clone(), self.stop.clone(), topic.to_owned());
        self.spawn(format!("export {topic}"), move || {
            export(&session, probe, &key, &topic, &stop)
        });
        Ok(())
    }

    /// Creates the local topic `topic` with `config` and publishes into it every message put
    /// on [`topic_key`] by a bridge that exports it. The bridge subscribes to the key only
    /// while the local topic has a subscriber, so that the exporting bridge holds a lossless
    /// topic back only for subscribers that exist.
    pub fn import_topic(&mut self, topic: &str, config: &TopicConfig) -> Result<(), Error> {
        check_name(topic)?;
        let key = topic_key(&self.prefix, topic);
        let publisher = Publisher::create(topic, config)?;
        let (session, stop) = (self.session.clone(), self.stop.clone());
        self.spawn(format!("import {topic}"), move || {
            import(&session, publisher, &key, &stop)
        });
        Ok(())
    }

    /// Offers the local listener `name` to bridges that [`connect`](Bridge::connect) to it:
    /// each connection they open becomes a local client of the listener.
    pub fn serve(&mut self, name: &str) -> Result<(), Error> {
        check_name(name)?;
        let keys = Keys::new(&self.prefix, name);
        let queryable = self
            .session
            .declare_queryable(keys.open.clone())
            .with(FifoChannel::new(QUEUE))
            .wait()
            .map_err(zerr)?;
        let (session, stop, name) = (self.session.clone(), self.stop.clone(), name.to_owned());
        self.spawn(format!("serve {name}"), move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok(Some(query)) = queryable.recv_timeout(IDLE) else {
                    continue;
                };
                let (session, stop, keys, name) =
                    (session.clone(), stop.clone(), keys.clone(), name.clone());
                spawn_detached(format!("serve {name}"), move || {
                    serve_one(&session, query, &keys, &name, &stop)
                });
            }
        });
        Ok(())
    }

    /// Binds the local listener `name` (with `config` for its clients' channels) and carries
    /// each client to the listener of that name on the bridge that [`serve`](Bridge::serve)s
    /// it. A client whose connection the other side cannot open (no bridge serves the name, or
    /// its listener is not there) is closed, and the reason written to standard error.
    pub fn connect(&mut self, name: &str, config: &Config) -> Result<(), Error> {
        check_name(name)?;
        let keys = Keys::new(&self.prefix, name);
        let listener = Listener::bind(name, config)?;
        let (session, stop) = (self.session.clone(), self.stop.clone());
        let name = name.to_owned();
        self.spawn(format!("connect {name}"), move || {
            let mut opened = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match listener.accept_timeout(IDLE) {
                    Ok(conn) => {
                        opened += 1;
                        let id = format!("{}-{opened}", session.zid());
                        let (session, stop, keys, name) =
                            (session.clone(), stop.clone(), keys.clone(), name.clone());
                        spawn_detached(format!("connect {name}"), move || {
                            carry_client(&session, conn, &keys, &name, &id, &stop)
                        });
                    }
                    Err(e) if e.is_transient() => {}
                    Err(e) => {
                        eprintln!("shmlink-bridge: listener {name}: {e}");
                        std::thread::sleep(POLL);
                    }
                }
            }
        });
        Ok(())
    }

    /// Stops every topic and channel this bridge carries and closes its session.
    pub fn close(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        let _ = self.session.close().wait();
    }

    fn spawn(&mut self, what: String, f: impl FnOnce() + Send + 'static) {
        self.workers.push(spawn_detached(what, f));
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if !self.workers.is_empty() || !self.stop.load(Ordering::Relaxed) {
            self.stop_all();
        }
    }
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("zid", &self.session.zid())
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn spawn_detached(what: String, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(what)
        .spawn(f)
        .expect("a bridge thread could not be started")
}

fn matching(publisher: &ZPublisher<'_>) -> bool {
    publisher
        .matching_status()
        .wait()
        .is_ok_and(|s| s.matching())
}

// --- topics ---------------------------------------------------------------------------------

fn export(
    session: &Session,
    probe: ZPublisher<'static>,
    key: &str,
    topic: &str,
    stop: &AtomicBool,
) {
    // What was last said about the topic, so that a state that lasts is said once.
    let mut said = String::new();
    let mut say = |what: String| {
        if what != said {
            eprintln!("shmlink-bridge: export {topic}: {what}");
            said = what;
        }
    };
    // Told at once of a remote subscriber that comes or goes (the status is also asked
    // directly: a change is never waited for longer than IDLE).
    let changes = match probe.matching_listener().wait() {
        Ok(listener) => listener,
        Err(e) => {
            say(format!("zenoh: {e}"));
            return;
        }
    };
    while !stop.load(Ordering::Relaxed) {
        if !matching(&probe) {
            let _ = changes.recv_timeout(IDLE);
            continue;
        }
        // A topic whose publisher died stays until a new publisher takes the name over: it
        // has nothing more to give.
        match shmlink::segments::inspect(topic) {
            Ok(info) if info.ready && !info.stale => {}
            Ok(_) | Err(OpenError::NotFound { .. }) => {
                say("waiting for a publisher".into());
                std::thread::sleep(POLL);
                continue;
            }
            Err(e) => {
                say(e.to_string());
                std::thread::sleep(POLL);
                continue;
            }
        }
        let mut sub = match Subscriber::connect(topic, WaitStrategy::Block) {
            Ok(sub) => sub,
            Err(e) => {
                say(e.to_string());
                std::thread::sleep(POLL);
                continue;
            }
        };
        let congestion = match sub.mode() {
            TopicMode::Lossless => CongestionControl::Block,
            _ => CongestionControl::Drop,
        };
        let publisher = match session
            .declare_publisher(key.to_owned())
            .congestion_control(congestion)
            .wait()
        {
            Ok(p) => p,
            Err(e) => {
                say(format!("zenoh: {e}"));
                return;
            }
        };
        say(format!("carrying it to {key}"));
        let mut looked = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            // What is waiting, in one receive (one wait, at most one wake-up), each message
            // put as it is read.
            let mut failed = None;
            let got = sub.recv_batch_timeout(BATCH, IDLE, |message| {
                if let Err(e) = publisher.put(message).wait() {
                    failed = Some(e);
                }
            });
            if let Some(e) = failed {
                say(format!("zenoh: {e}"));
            }
            match got {
                Ok(_) => {}
                Err(RecvError::Timeout { .. } | RecvError::Lagged { .. }) => {}
                Err(e) => {
                    say(e.to_string());
                    // Not at once to the same topic: its publisher may be taking it down.
                    std::thread::sleep(POLL);
                    break;
                }
            }
            // A change of the remote subscribers since the last look, or IDLE since it.
            let changed = changes.try_recv().is_ok_and(|c| c.is_some());
            if changed || looked.elapsed() >= IDLE {
                looked = Instant::now();
                if !matching(&publisher) {
                    // Nobody remote: leave the topic so that it is not held back for nobody.
                    say("no remote subscriber: left the topic".into());
                    break;
                }
            }
        }
    }
}

fn import(session: &Session, publisher: Publisher, key: &str, stop: &Arc<AtomicBool>) {
    let topic = publisher.name().to_owned();
    // Shared with zenoh's callback, which publishes each sample as it arrives (on zenoh's
    // receiving task: while it waits for room, zenoh reads no more, and the exporting side is
    // held back through the link).
    let publisher = Arc::new(Mutex::new(publisher));
    let count = |p: &Mutex<Publisher>| p.lock().map_or(0, |p| p.subscriber_count());
    while !stop.load(Ordering::Relaxed) {
        if count(&publisher) == 0 {
            std::thread::sleep(IDLE);
            continue;
        }
        let (target, halt) = (publisher.clone(), stop.clone());
        let declared = session
            .declare_subscriber(key.to_owned())
            .callback(move |sample| {
                if sample.kind() != SampleKind::Put {
                    return;
                }
                let bytes = sample.payload().to_bytes();
                if let Ok(mut p) = target.lock() {
                    publish(&mut p, &bytes, &halt);
                }
            })
            .wait();
        let sub = match declared {
            Ok(sub) => sub,
            Err(e) => {
                eprintln!("shmlink-bridge: import {topic}: zenoh: {e}");
                return;
            }
        };
        while !stop.load(Ordering::Relaxed) && count(&publisher) > 0 {
            std::thread::sleep(IDLE);
        }
        // Undeclared: nobody here to read what would arrive.
        drop(sub);
    }
}

/// Publishes `bytes`, waiting as long as the topic makes it wait, until the bridge stops. A
/// message the topic cannot take (larger than it takes) is dropped and said.
fn publish(publisher: &mut Publisher, bytes: &[u8], stop: &AtomicBool) {
    // Room now, the common case, without a deadline to compute.
    match publisher.try_send(bytes) {
        Ok(()) => return,
        Err(e) if e.is_transient() => {}
        Err(e) => {
            eprintln!(
                "shmlink-bridge: import {}: {e}; the message is dropped",
                publisher.name()
            );
            return;
        }
    }
    loop {
        match publisher.send_timeout(bytes, POLL) {
            Ok(()) => return,
            Err(e) if e.is_transient() => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            Err(e) => {
                eprintln!(
                    "shmlink-bridge: import {}: {e}; the message is dropped",
                    publisher.name()
                );
                return;
            }
        }
    }
}

// --- channels -------------------------------------------------------------------------------

/// The keys of one listener's name.
#[derive(Clone)]
struct Keys {
    open: String,
    channel: String,
    alive: String,
}

impl Keys {
    fn new(prefix: &str, name: &str) -> Keys {
        Keys {
            open: format!("{prefix}/channel/{name}/open"),
            channel: format!("{prefix}/channel/{name}"),
            alive: format!("{prefix}/alive/{name}"),
        }
    }
    fn up(&self, id: &str) -> String {
        format!("{}/{id}/up", self.channel)
    }
    fn down(&self, id: &str) -> String {
        format!("{}/{id}/down", self.channel)
    }
    fn token(&self, id: &str, side: &str) -> String {
        format!("{}/{id}/{side}", self.alive)
    }
}

/// The connecting side: opens the connection at the serving bridge, then carries it.
fn carry_client(
    session: &Session,
    mut conn: shmlink::Connection,
    keys: &Keys,
    name: &str,
    id: &str,
    stop: &AtomicBool,
) {
    // Everything that receives is declared before the open request, which travels after it.
    let declared = (|| -> zenoh::Result<_> {
        let down = session
            .declare_subscriber(keys.down(id))
            .with(FifoChannel::new(QUEUE))
            .wait()?;
        let token = session
            .liveliness()
            .declare_token(keys.token(id, "client"))
            .wait()?;
        let watch = session
            .liveliness()
            .declare_subscriber(keys.token(id, "server"))
            .with(FifoChannel::new(4))
            .wait()?;
        let up = session
            .declare_publisher(keys.up(id))
            .congestion_control(CongestionControl::Block)
            .express(true)
            .wait()?;
        Ok((down, token, watch, up))
    })();
    let (down, _token, watch, up) = match declared {
        Ok(d) => d,
        Err(e) => {
            eprintln!("shmlink-bridge: connect {name}: zenoh: {e}");
            return;
        }
    };
    let refused = open_remote(session, keys, id, name);
    if let Some(why) = refused {
        eprintln!("shmlink-bridge: connect {name}: {why}; the client is closed");
        return;
    }
    carry(conn.channel(), &up, &down, &watch, stop);
}

/// Asks the bridge that serves `name` to open connection `id`: None once it has, or why not.
/// Until [`OPEN_TIMEOUT`] has passed, a query that nobody answered is asked again (the serving
/// bridge may not be reachable yet: just started, or zenoh reconnecting to it).
fn open_remote(session: &Session, keys: &Keys, id: &str, name: &str) -> Option<String> {
    let deadline = Instant::now() + OPEN_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let replies = match session
            .get(keys.open.clone())
            .payload(id.to_owned())
            .timeout(left)
            .wait()
        {
            Ok(r) => r,
            Err(e) => return Some(format!("zenoh: {e}")),
        };
        if let Ok(reply) = replies.recv() {
            return match reply.result() {
                Ok(_) => None,
                Err(e) => Some(
                    e.payload()
                        .try_to_string()
                        .map_or_else(|_| "refused".into(), |s| s.into_owned()),
                ),
            };
        }
        if Instant::now() >= deadline {
            return Some(format!(
                "no bridge serves {name} (nothing answered {} in {OPEN_TIMEOUT:?})",
                keys.open
            ));
        }
        std::thread::sleep(POLL * 5);
    }
}

/// The serving side of one connection: a client of the local listener.
fn serve_one(
    session: &Session,
    query: zenoh::query::Query,
    keys: &Keys,
    name: &str,
    stop: &AtomicBool,
) {
    let id = query
        .payload()
        .and_then(|p| p.try_to_string().ok().map(|s| s.into_owned()))
        .unwrap_or_default();
    if check_name(&id).is_err() {
        let _ = query
            .reply_err(format!("{id:?} is not a connection id"))
            .wait();
        return;
    }
    let declared = (|| -> zenoh::Result<_> {
        let up = session
            .declare_subscriber(keys.up(&id))
            .with(FifoChannel::new(QUEUE))
            .wait()?;
        let token = session
            .liveliness()
            .declare_token(keys.token(&id, "server"))
            .wait()?;
        let watch = session
            .liveliness()
            .declare_subscriber(keys.token(&id, "client"))
            .with(FifoChannel::new(4))
            .wait()?;
        let down = session
            .declare_publisher(keys.down(&id))
            .congestion_control(CongestionControl::Block)
            .express(true)
            .wait()?;
        Ok((up, token, watch, down))
    })();
    let (up, _token, watch, down) = match declared {
        Ok(d) => d,
        Err(e) => {
            let _ = query.reply_err(format!("zenoh: {e}")).wait();
            return;
        }
    };
    let mut channel = match Channel::connect_timeout(name, WaitStrategy::Block, OPEN_TIMEOUT) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shmlink-bridge: serve {name}: {e}");
            let _ = query.reply_err(e.to_string()).wait();
            return;
        }
    };
    if query.reply(query.key_expr().clone(), "ok").wait().is_err() {
        return;
    }
    drop(query);
    carry(&mut channel, &down, &up, &watch, stop);
}

/// Carries one connection until either side ends: what the local channel receives is put on
/// `out`, what arrives on `from` is sent into the local channel. A local end that closes (or
/// dies) is told to the other side by a delete on `out`; a delete on `from`, the other
/// side's token going, or the bridge stopping ends it here, and the local channel is closed.
fn carry(
    channel: &mut Channel,
    out: &ZPublisher<'_>,
    from: &zenoh::pubsub::Subscriber<FifoChannelHandler<Sample>>,
    watch: &zenoh::pubsub::Subscriber<FifoChannelHandler<Sample>>,
    stop: &AtomicBool,
) {
    let ended = AtomicBool::new(false);
    let (tx, rx) = channel.split();
    std::thread::scope(|s| {
        s.spawn(|| {
            local_to_remote(rx, out, &ended, stop);
            ended.store(true, Ordering::Relaxed);
        });
        remote_to_local(tx, from, watch, &ended, stop);
        ended.store(true, Ordering::Relaxed);
    });
}

fn local_to_remote(rx: &mut RecvHalf, out: &ZPublisher<'_>, ended: &AtomicBool, stop: &AtomicBool) {
    while !ended.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(IDLE) {
            Ok(message) => {
                if out.put(&*message).wait().is_err() {
                    return;
                }
            }
            Err(e) if e.is_transient() => {}
            Err(_) => {
                // Closed or gone here: tell the other side, which closes its end.
                let _ = out.delete().wait();
                return;
            }
        }
    }
}

fn remote_to_local(
    tx: &mut SendHalf,
    from: &zenoh::pubsub::Subscriber<FifoChannelHandler<Sample>>,
    watch: &zenoh::pubsub::Subscriber<FifoChannelHandler<Sample>>,
    ended: &AtomicBool,
    stop: &AtomicBool,
) {
    let stopped = || ended.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
    while !stopped() {
        if let Ok(Some(token)) = watch.try_recv() {
            if token.kind() == SampleKind::Delete {
                return;
            }
        }
        match from.recv_timeout(IDLE) {
            Ok(Some(sample)) if sample.kind() == SampleKind::Put => {
                let bytes = sample.payload().to_bytes();
                loop {
                    match tx.send_timeout(&bytes, POLL) {
                        Ok(()) => break,
                        Err(e) if e.is_transient() && !stopped() => {}
                        Err(_) => return,
                    }
                }
            }
            // The other side's local end closed.
            Ok(Some(_)) => return,
            Ok(None) => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_be_a_key_chunk_are_refused_with_the_name() {
        for bad in ["", "a/b", "cam*", "$x", "what?", "#1"] {
            let err = check_name(bad).unwrap_err();
            assert!(
                matches!(&err, Error::BadName { name } if name == bad),
                "{bad:?}: {err}"
            );
        }
        for good in ["camera", "svc.1", "a-b_c"] {
            check_name(good).unwrap();
        }
        assert_eq!(topic_key("shmlink", "camera"), "shmlink/topic/camera");
        let keys = Keys::new("p", "svc");
        assert_eq!(
            (
                keys.open.as_str(),
                keys.up("z-1"),
                keys.down("z-1"),
                keys.token("z-1", "client")
            ),
            (
                "p/channel/svc/open",
                "p/channel/svc/z-1/up".into(),
                "p/channel/svc/z-1/down".into(),
                "p/alive/svc/z-1/client".into()
            )
        );
    }

    #[test]
    fn endpoints_and_scouting_are_set_over_the_configuration() {
        let c = peer_config(
            &["tcp/127.0.0.1:7447".into()],
            &["tcp/127.0.0.2:7447".into()],
            false,
        )
        .unwrap();
        let get = |k: &str| c.get_json(k).unwrap();
        assert_eq!(get("listen/endpoints"), r#"["tcp/127.0.0.1:7447"]"#);
        assert_eq!(get("connect/endpoints"), r#"["tcp/127.0.0.2:7447"]"#);
        assert_eq!(get("scouting/multicast/enabled"), "false");
        assert_eq!(get("scouting/gossip/enabled"), "false");
        // A bad endpoint is zenoh's error, not a panic.
        assert!(peer_config(&["nonsense".into()], &[], false).is_err());
    }

    /// The TLS configuration the README shows is one zenoh takes.
    #[test]
    fn the_readmes_tls_configuration_is_valid() {
        let readme = include_str!("../README.md");
        let start = readme.find("```json5\n").expect("a json5 block") + "```json5\n".len();
        let block = &readme[start..];
        let block = &block[..block.find("```").unwrap()];
        let path =
            std::env::temp_dir().join(format!("shmlink-zenoh-readme-{}.json5", std::process::id()));
        std::fs::write(&path, block).unwrap();
        let parsed = zenoh::Config::from_file(&path);
        let _ = std::fs::remove_file(&path);
        let config = parsed.unwrap_or_else(|e| panic!("the README's configuration: {e}"));
        assert_eq!(
            config.get_json("transport/link/tls/enable_mtls").unwrap(),
            "true"
        );
        assert_eq!(
            config.get_json("listen/endpoints").unwrap(),
            r#"["tls/0.0.0.0:7447"]"#
        );
    }
}
