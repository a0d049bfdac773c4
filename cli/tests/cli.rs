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
    // The shared-memory channel's connector is its peer.
    let peers = &entry(&doc, &names[0]).unwrap()["peers"];
    assert_eq!(peers[0]["pid"], me, "{peers}");

    let table = shmlink(&["list"]);
    for name in &names {
        assert!(
            table.contains(name.as_str()),
            "{name} not in the table:\n{table}"
        );
    }
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
