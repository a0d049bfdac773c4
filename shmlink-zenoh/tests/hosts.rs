//! Two hosts on one machine with nothing shared but zenoh: each host is a mount namespace that
//! this test makes, with a /dev/shm of its own (a fresh tmpfs), so that a shmlink name on one
//! is not there on the other; the two `shmlink-bridge`s are joined only by zenoh over TCP on
//! 127.0.0.1, with explicit endpoints and multicast scouting and gossip off. Every process of a
//! host (its bridge, publishers, subscribers, servers and clients: this binary run again in a
//! role) runs in its namespace through `nsenter`. A namespace ends with its last process: every
//! process is killed and reaped when its host is dropped.
//!
//! Where namespaces cannot be made (no privilege), the run says so and passes only if
//! `SHMLINK_NAMESPACES` is not `required` (CI sets it).
//!
//! Run: `cargo test -p shmlink-zenoh` (or `... --test hosts -- NAME` for the cases whose name
//! contains NAME).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use shmlink::{Channel, Listener, Publisher, Subscriber, TopicConfig, WaitStrategy};

/// How long anything a case waits for may take before the case fails.
const WATCHDOG: Duration = Duration::from_secs(60);
const BRIDGE: &str = env!("CARGO_BIN_EXE_shmlink-bridge");

// --- hosts ----------------------------------------------------------------------------------

/// A process of a host, its standard output read line by line on a thread of its own.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    what: String,
}

impl Proc {
    /// The next line that starts with `prefix` (earlier lines skipped), within the watchdog.
    fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + WATCHDOG;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{}: no line {prefix:?} within {WATCHDOG:?}", self.what)
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().unwrap();
                    panic!("{}: exited ({status}) before a line {prefix:?}", self.what)
                }
            }
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin closed");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the process to exit by itself (within the watchdog) and checks it succeeded.
    fn succeeds(mut self) {
        let deadline = Instant::now() + WATCHDOG;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{} failed: {status}", self.what);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {WATCHDOG:?}",
                self.what
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (a name such as `TERM`) to the process (`nsenter` runs it in place).
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.what);
    }

    /// Every line the process writes until it exits (within the watchdog).
    fn all_lines(self) -> Vec<String> {
        let deadline = Instant::now() + WATCHDOG;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => return out,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{}: still writing after {WATCHDOG:?}", self.what)
                }
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A mount namespace with a /dev/shm of its own, held open by a process that sleeps in it.
struct Host {
    holder: Child,
    name: &'static str,
}

impl Host {
    fn new(name: &'static str) -> Result<Host, String> {
        let mut holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg("mount -t tmpfs -o mode=1777,size=512m shmlink-test /dev/shm && echo ready && exec sleep 600")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("unshare: {e}"))?;
        let mut line = String::new();
        BufReader::new(holder.stdout.take().unwrap())
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if line.trim() != "ready" {
            let _ = holder.kill();
            let out = holder.wait_with_output().map_err(|e| e.to_string())?;
            return Err(format!(
                "unshare --mount: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Host { holder, name })
    }

    /// Runs `program args` in this host's namespace.
    fn spawn(&self, what: &str, program: &str, args: &[&str]) -> Proc {
        let mut child = Command::new("nsenter")
            .arg(format!("--target={}", self.holder.id()))
            .arg("--mount")
            .arg("--")
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nsenter");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            stdin,
            lines,
            what: format!("{what} on host {}", self.name),
        }
    }

    /// This test binary in a role, in this host's namespace.
    fn role(&self, args: &[&str]) -> Proc {
        let me = std::env::current_exe().unwrap();
        let mut all = vec!["role"];
        all.extend_from_slice(args);
        self.spawn(args[0], me.to_str().unwrap(), &all)
    }

    /// The shmlink names in this host's /dev/shm.
    fn shm_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .spawn("ls", "ls", &["-1", "/dev/shm"])
            .all_lines()
            .into_iter()
            .filter_map(|l| l.strip_prefix("shmlink-").map(str::to_owned))
            .collect();
        names.sort();
        names
    }

    /// A bridge with `args`, once it says it is ready.
    fn bridge(&self, args: &[String]) -> Proc {
        let mut all: Vec<&str> = vec!["--no-scouting"];
        all.extend(args.iter().map(String::as_str));
        let mut bridge = self.spawn("shmlink-bridge", BRIDGE, &all);
        bridge.expect("ready");
        bridge
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Two hosts and the endpoint the first one's bridge listens on.
struct Pair {
    a: Host,
    b: Host,
    port: u16,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            a: host("a"),
            b: host("b"),
            port: free_port(),
        }
    }
    fn listen(&self, rest: &[&str]) -> Vec<String> {
        let mut v = vec![
            "--listen".to_owned(),
            format!("tcp/127.0.0.1:{}", self.port),
        ];
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    }
    fn peer(&self, rest: &[&str]) -> Vec<String> {
        let mut v = vec!["--peer".to_owned(), format!("tcp/127.0.0.1:{}", self.port)];
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    }
}

fn host(name: &'static str) -> Host {
    match Host::new(name) {
        Ok(h) => h,
        Err(e) => panic!("a host could not be made: {e}"),
    }
}

// --- the cases ------------------------------------------------------------------------------

/// A topic published on host A, with three subscribers on host B: every message, in order,
/// byte for byte, at each of them.
fn a_topic_reaches_three_remote_subscribers() {
    let hosts = Pair::new();
    let _a = hosts.a.bridge(&hosts.listen(&["--export", "camera"]));
    let _b = hosts.b.bridge(&hosts.peer(&["--import", "camera"]));
    let mut subs: Vec<Proc> = (0..3)
        .map(|_| hosts.b.role(&["subscribe", "camera", "2000", "300", "0"]))
        .collect();
    for s in &mut subs {
        s.expect("joined");
    }
    let mut publisher = hosts
        .a
        .role(&["publish", "camera", "2000", "300", "1048576"]);
    publisher.expect("sent");
    for s in subs {
        s.succeeds();
    }
    publisher.say("done");
    publisher.succeeds();
}

/// A slow subscriber on host B of a lossless topic holds back the publisher on host A: when
/// the publisher's last send returns, the subscriber has read most of what was sent (the rest
/// is what the rings, zenoh's queues and the sockets between them hold), and it gets every
/// message.
fn a_slow_remote_subscriber_holds_back_a_lossless_publisher() {
    let hosts = Pair::new();
    let progress =
        std::env::temp_dir().join(format!("shmlink-zenoh-progress-{}", std::process::id()));
    let _cleanup = (
        RemoveOnDrop(progress.clone()),
        RemoveOnDrop(progress.with_extension("new")),
    );
    let path = progress.to_str().unwrap();
    let _a = hosts.a.bridge(&hosts.listen(&["--export", "slow"]));
    let _b = hosts
        .b
        .bridge(&hosts.peer(&["--import", "slow", "--capacity", "65536"]));
    let mut sub = hosts
        .b
        .role(&["subscribe", "slow", "6000", "8192", "500", path]);
    sub.expect("joined");
    let mut publisher = hosts
        .a
        .role(&["publish", "slow", "6000", "8192", "65536", path]);
    let sent = publisher.expect("sent");
    // "sent <messages> read-by-then <count>"
    let read: u64 = sent.rsplit(' ').next().unwrap().parse().unwrap();
    println!("  the subscriber had read {read} of 6000 when the publisher's last send returned");
    assert!(
        read >= 2000,
        "the publisher's last send returned when the remote subscriber had read {read} of 6000: it was not held back"
    );
    sub.succeeds();
    publisher.say("done");
    publisher.succeeds();
}

/// An overwrite topic crosses too (zenoh's drop congestion control, an overwrite topic on the
/// other side), and a message larger than the importing side's topic takes is dropped there,
/// alone: the messages before and after it arrive.
fn an_overwrite_topic_crosses_and_a_message_too_large_there_is_dropped_alone() {
    let hosts = Pair::new();
    let _a = hosts.a.bridge(&hosts.listen(&["--export", "ow"]));
    let _b = hosts
        .b
        .bridge(&hosts.peer(&["--import", "ow", "--overwrite", "--capacity", "65536"]));
    // 65536 B rings take messages of up to 32,696 B: message 100 is 40,000 B.
    let mut sub = hosts
        .b
        .role(&["subscribe-except", "ow", "200", "300", "100"]);
    sub.expect("joined");
    let mut publisher = hosts
        .a
        .role(&["publish-paced", "ow", "200", "300", "100", "40000"]);
    publisher.expect("sent");
    sub.succeeds();
    publisher.say("done");
    publisher.succeeds();
}

/// A client on host A calls `Channel::connect` to a name served on host B and gets its
/// replies; a second client after it too.
fn a_request_reply_channel_crosses_the_bridges() {
    let hosts = Pair::new();
    let mut server = hosts.b.role(&["echo-server", "svc"]);
    server.expect("ready");
    let _b = hosts.b.bridge(&hosts.listen(&["--serve", "svc"]));
    let _a = hosts.a.bridge(&hosts.peer(&["--connect", "svc"]));
    for _ in 0..2 {
        let client = hosts.a.role(&["client", "svc", "500", "close"]);
        client.succeeds();
    }
}

/// The remote server killed: the client on host A sees its channel end (Disconnected, the
/// bridge closing it), and a client after the server is started again is served.
fn a_killed_remote_server_ends_the_client_and_a_new_one_is_served() {
    let hosts = Pair::new();
    let mut server = hosts.b.role(&["echo-server", "svc"]);
    server.expect("ready");
    let _b = hosts.b.bridge(&hosts.listen(&["--serve", "svc"]));
    let _a = hosts.a.bridge(&hosts.peer(&["--connect", "svc"]));
    let mut client = hosts.a.role(&["client", "svc", "10", "wait"]);
    client.expect("ok");
    server.kill();
    let ended = client.expect("ended");
    assert!(
        ended.contains("Disconnected") || ended.contains("PeerGone"),
        "{ended}"
    );
    client.succeeds();
    let mut server = hosts.b.role(&["echo-server", "svc"]);
    server.expect("ready");
    hosts.a.role(&["client", "svc", "10", "close"]).succeeds();
}

/// The serving bridge killed: the client sees its channel end; the bridge started again
/// serves a new client. The connecting bridge killed: its listener dies, so the client sees
/// PeerGone; started again, it takes new clients.
fn a_killed_bridge_ends_its_connections_and_a_restarted_one_serves_again() {
    let hosts = Pair::new();
    let mut server = hosts.b.role(&["echo-server", "svc"]);
    server.expect("ready");
    let mut b = hosts.b.bridge(&hosts.listen(&["--serve", "svc"]));
    let mut a = hosts.a.bridge(&hosts.peer(&["--connect", "svc"]));
    let mut client = hosts.a.role(&["client", "svc", "10", "wait"]);
    client.expect("ok");
    b.kill();
    let ended = client.expect("ended");
    assert!(
        ended.contains("Disconnected") || ended.contains("PeerGone"),
        "{ended}"
    );
    client.succeeds();
    let _b = hosts.b.bridge(&hosts.listen(&["--serve", "svc"]));
    hosts.a.role(&["client", "svc", "10", "close"]).succeeds();

    let mut client = hosts.a.role(&["client", "svc", "10", "wait"]);
    client.expect("ok");
    a.kill();
    let ended = client.expect("ended");
    assert!(ended.contains("PeerGone"), "{ended}");
    client.succeeds();
    let _a = hosts.a.bridge(&hosts.peer(&["--connect", "svc"]));
    hosts.a.role(&["client", "svc", "10", "close"]).succeeds();
}

/// The README's mutual-TLS configuration, with certificates made here (a CA, and one
/// certificate for each host, for 127.0.0.1): a topic crosses between two bridges that listen
/// and connect only over TLS, every message checked.
fn a_topic_crosses_over_mutual_tls_configured_as_the_readme_shows() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let hosts = Pair::new();
    let dir = std::env::temp_dir().join(format!("shmlink-zenoh-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = RemoveDirOnDrop(dir.clone());

    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "shmlink test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for host in ["host-a", "host-b"] {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, host);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        std::fs::write(dir.join(format!("{host}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{host}-key.pem")), key.serialize_pem()).unwrap();
    }

    // The README's file for host A, its paths and address made this test's; host B's the same
    // with its own certificate, listening on a port of its own.
    let readme = include_str!("../README.md");
    let start = readme.find("```json5\n").expect("a json5 block") + "```json5\n".len();
    let block = &readme[start..];
    let block = &block[..block.find("```").unwrap()];
    assert!(block.contains("tls/0.0.0.0:7447") && block.contains("/etc/shmlink/"));
    let config = |host: &str, port: u16| {
        let text = block
            .replace("/etc/shmlink/", &format!("{}/", dir.display()))
            .replace("host-a", host)
            .replace("tls/0.0.0.0:7447", &format!("tls/127.0.0.1:{port}"));
        let path = dir.join(format!("{host}.json5"));
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (a_config, b_config) = (config("host-a", hosts.port), config("host-b", free_port()));

    let _a = hosts.a.bridge(&[
        "--config".to_owned(),
        a_config,
        "--export".to_owned(),
        "camera".to_owned(),
    ]);
    let _b = hosts.b.bridge(&[
        "--config".to_owned(),
        b_config,
        "--peer".to_owned(),
        format!("tls/127.0.0.1:{}", hosts.port),
        "--import".to_owned(),
        "camera".to_owned(),
    ]);
    let mut sub = hosts.b.role(&["subscribe", "camera", "500", "300", "0"]);
    sub.expect("joined");
    let mut publisher = hosts
        .a
        .role(&["publish", "camera", "500", "300", "1048576"]);
    publisher.expect("sent");
    sub.succeeds();
    publisher.say("done");
    publisher.succeeds();
}

/// A bridge stopped by SIGTERM (as by SIGINT or SIGHUP) closes what it made: the topic it
/// imports and the listener it binds are gone from its host, and it exits with success.
fn a_stopped_bridge_removes_the_topics_and_listeners_it_made() {
    let hosts = Pair::new();
    let bridge = hosts
        .a
        .bridge(&hosts.listen(&["--import", "camera", "--connect", "svc"]));
    assert_eq!(hosts.a.shm_names(), ["camera", "svc"]);
    bridge.signal("TERM");
    bridge.succeeds();
    assert_eq!(hosts.a.shm_names(), Vec::<String>::new());
}

struct RemoveDirOnDrop(std::path::PathBuf);

impl Drop for RemoveDirOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// --- the roles (this binary run again in a host) --------------------------------------------

/// Message `i` of `size` bytes: its index, then bytes that depend on it.
fn message(i: u64, size: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..size).map(|k| (i as usize * 31 + k * 7) as u8).collect();
    m[..8].copy_from_slice(&i.to_le_bytes());
    m
}

fn read_count(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn wait_stdin_line() {
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// `publish TOPIC N SIZE CAPACITY [PROGRESS]`: creates a lossless topic, waits for a subscriber
/// (the exporting bridge joins once a remote subscriber is there), sends N messages, says
/// `sent N read-by-then R` (R: the count in the file PROGRESS, if given), waits for a line on
/// standard input.
fn publish(args: &[String]) {
    let (topic, n, size, capacity) = (
        &args[0],
        args[1].parse().unwrap(),
        args[2].parse().unwrap(),
        args[3].parse().unwrap(),
    );
    let config = TopicConfig {
        capacity,
        ..TopicConfig::default()
    };
    let mut publisher = Publisher::create(topic, &config).unwrap();
    let deadline = Instant::now() + WATCHDOG;
    while publisher.subscriber_count() == 0 {
        assert!(Instant::now() < deadline, "no subscriber joined {topic}");
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..n {
        publisher.send_timeout(&message(i, size), WATCHDOG).unwrap();
    }
    let read = args.get(4).map_or(0, |p| read_count(p));
    println!("sent {n} read-by-then {read}");
    wait_stdin_line();
}

/// `subscribe TOPIC N SIZE DELAY_US [PROGRESS]`: joins the topic, says `joined`, checks N
/// messages in order byte for byte, sleeping DELAY_US after each and writing how many it has
/// read to PROGRESS, if given.
fn subscribe(args: &[String]) {
    let (topic, n, size, delay): (_, u64, usize, u64) = (
        &args[0],
        args[1].parse().unwrap(),
        args[2].parse().unwrap(),
        args[3].parse().unwrap(),
    );
    let progress = args.get(4);
    let mut sub = Subscriber::connect(topic, WaitStrategy::Block).unwrap();
    println!("joined");
    for i in 0..n {
        let got = sub
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|e| panic!("message {i} of {n}: {e}"));
        assert!(
            *got == *message(i, size),
            "message {i} differs (index {:?})",
            &got[..8.min(got.len())]
        );
        drop(got);
        if let Some(p) = progress {
            // Whole or not at all for the reader: written aside, then renamed over.
            let aside = format!("{p}.new");
            std::fs::write(&aside, (i + 1).to_string()).unwrap();
            std::fs::rename(&aside, p).unwrap();
        }
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
    }
    println!("got {n}");
}

/// `publish-paced TOPIC N SIZE BIG BIG_SIZE`: creates an overwrite topic, waits for a
/// subscriber, sends N messages 1 ms apart (message BIG of BIG_SIZE bytes), says `sent`, waits
/// for a line on standard input.
fn publish_paced(args: &[String]) {
    let (topic, n, size, big, big_size): (_, u64, usize, u64, usize) = (
        &args[0],
        args[1].parse().unwrap(),
        args[2].parse().unwrap(),
        args[3].parse().unwrap(),
        args[4].parse().unwrap(),
    );
    let config = TopicConfig {
        mode: shmlink::TopicMode::Overwrite,
        ..TopicConfig::default()
    };
    let mut publisher = Publisher::create(topic, &config).unwrap();
    let deadline = Instant::now() + WATCHDOG;
    while publisher.subscriber_count() == 0 {
        assert!(Instant::now() < deadline, "no subscriber joined {topic}");
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..n {
        let m = message(i, if i == big { big_size } else { size });
        publisher.send(&m).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("sent {n}");
    wait_stdin_line();
}

/// `subscribe-except TOPIC N SIZE SKIP`: joins the topic, says `joined`, checks messages 0 to
/// N - 1 but SKIP in order byte for byte, and that none is missed (no `Lagged`).
fn subscribe_except(args: &[String]) {
    let (topic, n, size, skip): (_, u64, usize, u64) = (
        &args[0],
        args[1].parse().unwrap(),
        args[2].parse().unwrap(),
        args[3].parse().unwrap(),
    );
    let mut sub = Subscriber::connect(topic, WaitStrategy::Block).unwrap();
    println!("joined");
    for i in (0..n).filter(|&i| i != skip) {
        let got = sub
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|e| panic!("message {i} of {n}: {e}"));
        assert!(
            *got == *message(i, size),
            "message {i} differs (index {:?}, {} bytes)",
            &got[..8.min(got.len())],
            got.len()
        );
    }
    println!("got {n}");
}

/// `echo-server NAME`: binds a listener, says `ready`, echoes every client's messages.
fn echo_server(args: &[String]) {
    let listener = Listener::bind(&args[0], &shmlink::Config::default()).unwrap();
    println!("ready");
    loop {
        let mut conn = listener.accept().unwrap();
        std::thread::spawn(move || loop {
            let reply = match conn.recv() {
                Ok(m) => m.to_vec(),
                Err(_) => return,
            };
            if conn.send(&reply).is_err() {
                return;
            }
        });
    }
}

/// `client NAME N close|wait`: connects, checks N round trips, says `ok`; then closes, or
/// waits for its channel to end and says `ended <error>`.
fn client(args: &[String]) {
    let n: u64 = args[1].parse().unwrap();
    let mut ch = Channel::connect_timeout(&args[0], WaitStrategy::Block, WATCHDOG).unwrap();
    for i in 0..n {
        let m = message(i, 64 + (i as usize % 5000));
        ch.send_timeout(&m, WATCHDOG).unwrap();
        let got = ch
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert!(*got == *m, "reply {i} differs");
    }
    println!("ok");
    if args[2] == "wait" {
        let e = ch
            .recv_timeout(WATCHDOG)
            .map(|_| ())
            .expect_err("a message after the last reply");
        println!("ended {e:?}");
    }
}

// --- the runner -----------------------------------------------------------------------------

type Case = (&'static str, fn());

const CASES: &[Case] = &[
    (
        "a_stopped_bridge_removes_the_topics_and_listeners_it_made",
        a_stopped_bridge_removes_the_topics_and_listeners_it_made,
    ),
    (
        "a_topic_crosses_over_mutual_tls_configured_as_the_readme_shows",
        a_topic_crosses_over_mutual_tls_configured_as_the_readme_shows,
    ),
    (
        "a_topic_reaches_three_remote_subscribers",
        a_topic_reaches_three_remote_subscribers,
    ),
    (
        "a_slow_remote_subscriber_holds_back_a_lossless_publisher",
        a_slow_remote_subscriber_holds_back_a_lossless_publisher,
    ),
    (
        "an_overwrite_topic_crosses_and_a_message_too_large_there_is_dropped_alone",
        an_overwrite_topic_crosses_and_a_message_too_large_there_is_dropped_alone,
    ),
    (
        "a_request_reply_channel_crosses_the_bridges",
        a_request_reply_channel_crosses_the_bridges,
    ),
    (
        "a_killed_remote_server_ends_the_client_and_a_new_one_is_served",
        a_killed_remote_server_ends_the_client_and_a_new_one_is_served,
    ),
    (
        "a_killed_bridge_ends_its_connections_and_a_restarted_one_serves_again",
        a_killed_bridge_ends_its_connections_and_a_restarted_one_serves_again,
    ),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("role") {
        let rest = &args[2..];
        match args[1].as_str() {
            "publish" => publish(rest),
            "subscribe" => subscribe(rest),
            "publish-paced" => publish_paced(rest),
            "subscribe-except" => subscribe_except(rest),
            "echo-server" => echo_server(rest),
            "client" => client(rest),
            other => panic!("no role {other}"),
        }
        return;
    }
    // Options cargo passes to test binaries (--nocapture, --test-threads, ...) are ignored;
    // a word is a filter.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if let Err(e) = Host::new("probe") {
        if std::env::var("SHMLINK_NAMESPACES").as_deref() == Ok("required") {
            eprintln!("hosts: namespaces are required here (SHMLINK_NAMESPACES=required) but cannot be made: {e}");
            std::process::exit(1);
        }
        println!("hosts: SKIPPED, every case: mount namespaces cannot be made here ({e})");
        return;
    }
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, case) in CASES {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let start = Instant::now();
        let ok = std::panic::catch_unwind(case).is_ok();
        println!(
            "test {name} ... {} ({:.1} s)",
            if ok { "ok" } else { "FAILED" },
            start.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(*name);
        }
    }
    println!("\n{} passed, {} failed", ran - failed.len(), failed.len());
    if !failed.is_empty() {
        println!("failed: {failed:?}");
        std::process::exit(1);
    }
}
