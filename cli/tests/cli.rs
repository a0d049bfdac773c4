//! `shmlink` as a person runs it: `list --json` parsed while a channel, a listener and a topic
//! of each backend are in use, the table, and `clean --dry-run` leaving live ones alone.

use std::process::Command;

use serde_json::Value;
use shmlink::{
    Backend, Config, Endpoint, EndpointListener, EndpointPublisher, Listener, Publisher,
    TopicConfig,
};
use shmlink_test_support::{unique, FallbackFiles, NameGuard};

fn shmlink(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shmlink"))
        .args(args)
        .output()
        .expect("run shmlink");
    assert!(
        out.status.success(),
        "shmlink {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn entry<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    doc["entries"]
        .as_array()
        .expect("an entries array")
        .iter()
        .find(|e| e["name"] == name)
}

#[test]
fn list_shows_every_kind_on_either_backend_with_its_creator() {
    let names: Vec<String> = (0..6).map(|i| unique(&format!("cli-{i}"))).collect();
    let _shm: Vec<NameGuard> = names.iter().map(|n| NameGuard(n.clone())).collect();
    let _files: Vec<FallbackFiles> = names.iter().map(|n| FallbackFiles(n.clone())).collect();
    let config = Config::default();
    let channel = Endpoint::create_with(&names[0], &config, Backend::Shm).unwrap();
    let listener = Listener::bind(&names[1], &config).unwrap();
    let topic = Publisher::create(&names[2], &TopicConfig::default()).unwrap();
    let ipc_channel = Endpoint::create_with(&names[3], &config, Backend::IpcChannel).unwrap();
    let ipc_listener =
        EndpointListener::bind_with(&names[4], &config, Backend::IpcChannel, 4).unwrap();
    let ipc_topic =
        EndpointPublisher::create_with(&names[5], &TopicConfig::default(), Backend::IpcChannel)
            .unwrap();
    let mut connector = Endpoint::connect(&names[0], shmlink::WaitStrategy::Block).unwrap();
    connector.send(b"hello").unwrap();
    // A client of the shared-memory listener: its connection is listed under the listener.
    let connecting = {
        let name = names[1].clone();
        std::thread::spawn(move || shmlink::Channel::connect(&name, shmlink::WaitStrategy::Block))
    };
    let accepted = listener
        .accept_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    let client = connecting.join().unwrap().unwrap();

    let doc: Value =
        serde_json::from_str(&shmlink(&["list", "--json"])).expect("one JSON document");
    let me = u64::from(std::process::id());
    let want = [
        ("channel", "shm"),
        ("listener", "shm"),
        ("topic", "shm"),
        ("channel", "ipc-channel"),
        ("listener", "ipc-channel"),
        ("topic", "ipc-channel"),
    ];
    for (name, (kind, backend)) in names.iter().zip(want) {
        let e = entry(&doc, name).unwrap_or_else(|| panic!("{name} not listed: {doc}"));
        assert_eq!(e["kind"], kind, "{e}");
        assert_eq!(e["backend"], backend, "{e}");
        assert_eq!(e["state"], "live", "{e}");
        assert_eq!(e["creator"]["pid"], me, "{e}");
        assert_eq!(e["creator"]["alive"], true, "{e}");
        assert_eq!(e["size"].is_u64(), backend == "shm", "{e}");
    }
    // The shared-memory channel's connector is its peer; its rings' size and fill (the message
    // sent, not yet read: a 16-byte frame), and its age.
    let shm_channel = entry(&doc, &names[0]).unwrap();
    assert_eq!(shm_channel["peers"][0]["pid"], me, "{shm_channel}");
    assert_eq!(shm_channel["capacity"], 1 << 20, "{shm_channel}");
    assert_eq!(shm_channel["fill"], 16, "{shm_channel}");
    assert!(
        shm_channel["age_s"].as_u64().is_some_and(|a| a < 60),
        "{shm_channel}"
    );
    assert_eq!(entry(&doc, &names[2]).unwrap()["capacity"], 1 << 20);
    assert!(entry(&doc, &names[1]).unwrap().get("capacity").is_none());
    assert!(entry(&doc, &names[3]).unwrap().get("age_s").is_none());
    // The listener's connection: right after the listener, naming it; the listener's peers are
    // its clients.
    let entries = doc["entries"].as_array().unwrap();
    let at = entries
        .iter()
        .position(|e| e["name"] == names[1].as_str())
        .unwrap();
    let conn = &entries[at + 1];
    let conn_name = conn["name"].as_str().unwrap().to_owned();
    assert!(
        conn_name.starts_with(&format!("{}.{me}.", names[1])),
        "{doc}"
    );
    assert_eq!(conn["listener"], names[1].as_str(), "{conn}");
    assert_eq!(conn["kind"], "channel", "{conn}");
    assert_eq!(entries[at]["peers"][0]["pid"], me, "{doc}");
    assert_eq!(entries[at]["peers"].as_array().unwrap().len(), 1, "{doc}");
    assert!(entries[at].get("listener").is_none(), "{doc}");
    assert!(entry(&doc, &names[0]).unwrap().get("listener").is_none());

    let table = shmlink(&["list"]);
    for name in &names {
        assert!(
            table.contains(name.as_str()),
            "{name} not in the table:\n{table}"
        );
    }
    let lines: Vec<&str> = table.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("{} ", names[1])))
        .unwrap();
    assert!(
        lines[at + 1].starts_with(&format!("  {conn_name} ")),
        "the connection is not indented under its listener:\n{table}"
    );
    // Nothing live is cleaned, or said to be.
    let dry = shmlink(&["clean", "--dry-run"]);
    for name in &names {
        assert!(
            !dry.contains(name.as_str()),
            "{name} would be removed:\n{dry}"
        );
    }

    drop((
        channel,
        connector,
        client,
        accepted,
        listener,
        topic,
        ipc_channel,
        ipc_listener,
        ipc_topic,
    ));
    let doc: Value = serde_json::from_str(&shmlink(&["list", "--json"])).unwrap();
    for name in &names {
        assert!(
            entry(&doc, name).is_none(),
            "{name} still listed after its drop"
        );
    }
}

/// `stat` while a channel and a topic carry messages: the JSON document's counts are the
/// messages sent, the table and the Prometheus text say the same, and `--watch` prints rates.
#[test]
fn stat_shows_the_counters_of_a_channel_and_a_topic_in_use() {
    let (chan, topic_name) = (unique("cli-stat"), unique("cli-stat-topic"));
    let _guards = [NameGuard(chan.clone()), NameGuard(topic_name.clone())];
    let mut a = shmlink::Channel::create(&chan, &Config::default()).unwrap();
    let mut b = shmlink::Channel::connect(&chan, shmlink::WaitStrategy::Block).unwrap();
    for i in 0..25u8 {
        a.send(&[i; 40]).unwrap();
    }
    for _ in 0..20 {
        b.recv().unwrap();
    }
    b.send(b"back").unwrap();
    let mut publisher = Publisher::create(&topic_name, &TopicConfig::default()).unwrap();
    let mut sub = shmlink::Subscriber::connect(&topic_name, shmlink::WaitStrategy::Block).unwrap();
    for _ in 0..7 {
        publisher.send(b"tick").unwrap();
    }
    sub.recv().unwrap();

    let doc: Value = serde_json::from_str(&shmlink(&["stat", &chan, "--json"])).unwrap();
    assert_eq!(doc["kind"], "channel");
    let there = &doc["rings"][0];
    assert_eq!(there["direction"], "creator->connector");
    assert_eq!(there["sender"]["messages"], 25, "{doc}");
    assert_eq!(there["sender"]["bytes"], 1000, "{doc}");
    assert_eq!(there["receiver"]["messages"], 20, "{doc}");
    assert!(there["fill"].as_u64().unwrap() >= 5 * 48, "{doc}");
    assert_eq!(doc["rings"][1]["sender"]["messages"], 1, "{doc}");

    let doc: Value = serde_json::from_str(&shmlink(&["stat", &topic_name, "--json"])).unwrap();
    assert_eq!(doc["kind"], "topic");
    assert_eq!(doc["rings"][0]["sender"]["messages"], 7, "{doc}");
    assert_eq!(doc["subscribers"][0]["counts"]["messages"], 1, "{doc}");
    assert_eq!(doc["subscribers"][0]["alive"], true, "{doc}");

    let table = shmlink(&["stat", &chan]);
    assert!(table.contains("messages           25"), "{table}");
    let prom = shmlink(&["stat", &chan, "--format", "prometheus"]);
    let line = format!(
        "shmlink_messages_total{{name=\"{chan}\",kind=\"channel\",ring=\"creator->connector\",side=\"sender\"}} 25"
    );
    assert!(prom.contains(&line), "{line} not in:\n{prom}");
    assert!(
        prom.contains("# TYPE shmlink_messages_total counter"),
        "{prom}"
    );
    let all = shmlink(&["list", "--format", "prometheus"]);
    assert!(all.contains(&line), "{line} not in list's:\n{all}");

    // `--watch 0.2` prints a table, then one with rates: ended by a kill after two.
    let mut watch = Command::new(env!("CARGO_BIN_EXE_shmlink"))
        .args(["stat", &chan, "--watch", "0.2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(watch.stdout.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while seen.matches(" (channel)").count() < 4 {
        line.clear();
        if std::io::BufRead::read_line(&mut out, &mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if seen.matches(" (channel)").count() == 2 {
            // Between the second look and the third, more messages: a rate above zero.
            for _ in 0..5 {
                b.send(b"more").unwrap();
            }
        }
    }
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert!(seen.contains("/s)"), "{seen}");
    assert!(
        seen.lines().any(|l| l.contains("sender")
            && l.contains("messages")
            && !l.contains("(         -)")
            && !l.contains("(       0/s)")),
        "no rate above zero:\n{seen}"
    );
    drop((a, b, publisher, sub));
}

/// `tap` as a person runs it against a topic on either backend: JSON pretty, the rest in hex,
/// and it ends after `--count` messages.
/// Starts `shmlink ARGS` (a tap) and waits until the topic counts it as a subscriber.
fn spawn_tap(args: &[&str], subscribers: impl Fn() -> usize) -> std::process::Child {
    let tap = Command::new(env!("CARGO_BIN_EXE_shmlink"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while subscribers() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "never subscribed: {args:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tap
}

#[test]
fn tap_prints_a_topics_messages_as_json_or_hex() {
    for backend in [Backend::Shm, Backend::IpcChannel] {
        let name = unique("cli-tap");
        let _guards = (NameGuard(name.clone()), FallbackFiles(name.clone()));
        let mut publisher =
            EndpointPublisher::create_with(&name, &TopicConfig::default(), backend).unwrap();
        let tap = spawn_tap(&["tap", &name, "--count", "2"], || {
            publisher.subscriber_count()
        });
        publisher.send(br#"{"price":101.5,"side":"buy"}"#).unwrap();
        publisher.send(&[0xde, 0xad, 0xbe, 0xef, b'A']).unwrap();
        let out = tap.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{backend:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("#1 (28 bytes)"), "{backend:?}:\n{text}");
        assert!(text.contains("  \"price\": 101.5,"), "{backend:?}:\n{text}");
        assert!(text.contains("#2 (5 bytes)"), "{backend:?}:\n{text}");
        assert!(
            text.contains("00000000  de ad be ef 41"),
            "{backend:?}:\n{text}"
        );
        assert!(text.trim_end().ends_with("A"), "{backend:?}:\n{text}");
    }
}

/// `tap --hz`: a rate line once a second, and one for the last part of a second when `--count`
/// ends it, each a positive rate.
#[test]
fn tap_hz_says_the_rate() {
    let name = unique("cli-hz");
    let _guard = NameGuard(name.clone());
    let mut publisher = Publisher::create(&name, &TopicConfig::default()).unwrap();
    let tap = spawn_tap(&["tap", &name, "--hz", "--count", "300"], || {
        publisher.subscriber_count()
    });
    // 300 messages over about 1.5 s: one rate line after a second, one when the count ends it.
    let start = std::time::Instant::now();
    for i in 0..300u32 {
        publisher.send(&i.to_le_bytes()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = tap.wait_with_output().unwrap();
    let spent = start.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rates: Vec<f64> = text
        .lines()
        .map(|l| {
            let rest = l
                .strip_prefix(&format!("{name}: "))
                .and_then(|r| r.strip_suffix(" messages/s"))
                .unwrap_or_else(|| panic!("not a rate line: {l:?} in\n{text}"));
            rest.parse().unwrap()
        })
        .collect();
    // Sending took over a second, so a line came after the first second; the messages after
    // it get a line of their own when the count ends the tap.
    assert!(spent > 1.0 && rates.len() >= 2, "{spent} s:\n{text}");
    assert!(rates.iter().all(|r| r.is_finite() && *r > 0.0), "{text}");
}
