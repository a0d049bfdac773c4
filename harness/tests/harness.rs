//! End-to-end tests of the `ipc-parent` binary: the JSON document of a run over every
//! transport, the forced fallback, a child killed mid-run, Ctrl-C, `--clients` (its rows, a
//! client killed, Ctrl-C), and the chart / compare subcommands. No timing is asserted.

#[path = "../../tests/support/common.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    assert_nothing_left, leftovers, process_exists, serial, unique, ChildGuard, Watchdog,
};
use serde_json::Value;

const PARENT: &str = env!("CARGO_BIN_EXE_ipc-parent");
/// Generous: debug builds on a loaded two-core machine, seven transports.
const LIMIT: Duration = Duration::from_secs(180);

/// Runs `ipc-parent` with `args` to completion; returns (success, stdout, stderr).
fn run_parent(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(PARENT);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = ChildGuard::spawn(command);
    let _watchdog = Watchdog::arm(LIMIT, &format!("ipc-parent {args:?}"));
    let stdout = drain(child.child.stdout.take());
    let stderr = drain(child.child.stderr.take());
    let status = child.wait_for(LIMIT);
    let text = |h: std::thread::JoinHandle<String>| h.join().unwrap_or_default();
    (status.success(), text(stdout), text(stderr))
}

/// Reads a pipe to its end on another thread (so neither pipe can fill up and block the child).
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

fn parse(stdout: &str, stderr: &str) -> Value {
    match serde_json::from_str(stdout) {
        Ok(v) => v,
        Err(e) => panic!("stdout is not one JSON document ({e}):\n{stdout}\nstderr:\n{stderr}"),
    }
}

#[test]
fn json_document_of_every_transport() {
    let _serial = serial();
    let name = unique("all");
    let args = [
        "--transport",
        "all",
        "--duration",
        "200ms",
        "--rounds",
        "1",
        "--warmup",
        "50ms",
        "--json",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent failed:\n{stderr}");
    let doc = parse(&stdout, &stderr);

    let machine = &doc["machine"];
    assert!(machine["cpu"].is_string(), "machine.cpu: {machine}");
    assert!(
        machine["cores"].as_u64().is_some_and(|c| c >= 1),
        "machine.cores: {machine}"
    );
    assert!(machine["kernel"].is_string(), "machine.kernel: {machine}");
    assert!(matches!(doc["profile"].as_str(), Some("debug" | "release")));
    assert_eq!(doc["message"], "json");
    assert!(doc["size"].is_null());

    let results = doc["results"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = results
        .iter()
        .filter_map(|r| r["transport"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "shm",
            "ipc-channel",
            "raw-sync",
            "pipe",
            "fifo",
            "socketpair",
            "posixmq",
            "uds",
            "tcp",
            "floor",
            "serde"
        ]
    );
    for r in &results {
        let t = r["transport"].as_str().unwrap_or("?");
        let rounds = r["rounds"].as_array().cloned().unwrap_or_default();
        assert_eq!(rounds.len(), 1, "{t}: rounds");
        assert!(
            rounds[0]["round_trips"].as_u64().is_some_and(|n| n > 0),
            "{t}: {r}"
        );
        assert!(rounds[0]["seconds"].is_f64(), "{t}: seconds");
        assert!(rounds[0]["rt_per_s"].is_f64(), "{t}: rt_per_s");
        assert!(
            r["best_rt_per_s"].as_f64().is_some_and(|x| x > 0.0),
            "{t}: best"
        );
        assert!(r["median_rt_per_s"].is_f64(), "{t}: median");
        for p in ["p50", "p99", "p999", "max"] {
            assert!(r["latency_ns"][p].as_u64().is_some(), "{t}: latency_ns.{p}");
        }
        assert!(r["pct_of_floor"].is_f64(), "{t}: pct_of_floor (floor ran)");
        assert!(r.get("wait").is_some(), "{t}: wait present");
    }
    assert_eq!(results[0]["wait"], "spin");
    assert!(results[1]["wait"].is_null());
    for r in &results {
        let limit = matches!(r["transport"].as_str(), Some("floor" | "serde"));
        assert_eq!(r["limit"], limit, "limit flag: {r}");
    }
    // The serde row runs in this process: no child, no backend.
    let serde = &results[10];
    assert!(serde["backend"].is_null(), "{serde}");
    assert_nothing_left(&name);
}

#[test]
fn raw_messages_report_their_size() {
    let _serial = serial();
    let name = unique("raw");
    let args = [
        "--transport",
        "shm,uds",
        "--message",
        "raw",
        "--size",
        "4KiB",
        "--duration",
        "100ms",
        "--warmup",
        "20ms",
        "--json",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent failed:\n{stderr}");
    let doc = parse(&stdout, &stderr);
    assert_eq!(doc["message"], "raw");
    assert_eq!(doc["size"], 4096);
    for r in doc["results"].as_array().cloned().unwrap_or_default() {
        assert!(r["mb_per_s"].is_f64(), "{r}");
        assert!(r["median_mb_per_s"].is_f64(), "{r}");
        assert_eq!(r["size"], 4096, "{r}");
        assert!(r["pct_of_floor"].is_null(), "no floor ran: {r}");
    }
}

#[test]
fn sweep_reports_every_transport_and_memcpy_at_every_size() {
    let _serial = serial();
    let name = unique("sweep");
    let args = [
        "--sweep",
        "--sizes",
        "1KiB,1MiB",
        "--duration",
        "100ms",
        "--rounds",
        "1",
        "--warmup",
        "20ms",
        "--json",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent --sweep failed:\n{stderr}");
    let doc = parse(&stdout, &stderr);
    assert_eq!(doc["sweep"], true);
    assert_eq!(doc["message"], "raw");
    assert_eq!(doc["sizes"], serde_json::json!([1024, 1 << 20]));
    assert!(doc["ring_size"].as_u64().is_some_and(|r| r > 0));
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    for size in [1024u64, 1 << 20] {
        let at_size: Vec<&Value> = results
            .iter()
            .filter(|r| r["size"].as_u64() == Some(size))
            .collect();
        let names: Vec<&str> = at_size
            .iter()
            .filter_map(|r| r["transport"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "shm",
                "ipc-channel",
                "raw-sync",
                "pipe",
                "fifo",
                "socketpair",
                "posixmq",
                "uds",
                "tcp",
                "memcpy"
            ],
            "size {size}"
        );
        for r in &at_size {
            let t = r["transport"].as_str().unwrap_or("?");
            assert!(
                r["mb_per_s"].as_f64().is_some_and(|mb| mb > 0.0),
                "{t} at {size}: {r}"
            );
            assert!(
                r["median_mb_per_s"].as_f64().is_some_and(|mb| mb > 0.0),
                "{t} at {size}: {r}"
            );
            assert!(
                r["memcpy_ratio"].as_f64().is_some_and(|x| x > 0.0),
                "{t} at {size}: {r}"
            );
            assert!(r["best_rt_per_s"].as_f64().is_some_and(|x| x > 0.0));
            assert_eq!(r["limit"], t == "memcpy", "{t}: limit flag");
        }
    }
    assert_nothing_left(&name);
}

#[test]
fn sweep_and_row_options_are_checked() {
    for args in [
        &["--sweep", "--transport", "floor"][..],
        &["--sweep", "--transport", "shm,serde"],
        &["--sizes", "1KiB"],
        &["--sweep", "--sizes", "0"],
        &["--sweep", "--message", "json"],
        &["--transport", "memcpy"],
        &["--transport", "serde", "--message", "raw"],
    ] {
        let (ok, _, stderr) = run_parent(args, &[]);
        assert!(!ok, "{args:?} must be refused");
        assert!(!stderr.is_empty(), "{args:?}: an explanation expected");
    }
}

#[test]
fn stream_checks_every_transport_at_every_size_beside_ring_and_memcpy() {
    let _serial = serial();
    let name = unique("stream");
    let dir = std::env::temp_dir().join(unique("stream-chart"));
    let _cleanup = RemoveDir(dir.clone());
    std::fs::create_dir_all(&dir).ok();
    let saved = dir.join("stream.json");
    let saved_s = saved.to_string_lossy().into_owned();
    let args = [
        "--stream", "--sizes", "8,9KiB", "--count", "1500", "--rounds", "2", "--warmup", "10ms",
        "--json", "--save", &saved_s, "--name", &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent --stream failed:\n{stderr}");
    let doc = parse(&stdout, &stderr);
    assert_eq!(doc["stream"], true);
    assert_eq!(doc["sweep"], false);
    assert_eq!(doc["sizes"], serde_json::json!([8, 9216]));
    // Every queue message is at most msgsize_max bytes: 9 KiB goes in fragments.
    assert!(
        doc["posixmq"]["msgsize"].as_u64().is_some_and(|s| s > 4),
        "posixmq limits: {}",
        doc["posixmq"]
    );
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    for size in [8u64, 9216] {
        let at_size: Vec<&Value> = results
            .iter()
            .filter(|r| r["size"].as_u64() == Some(size))
            .collect();
        let names: Vec<&str> = at_size
            .iter()
            .filter_map(|r| r["transport"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "shm",
                "ipc-channel",
                "raw-sync",
                "pipe",
                "fifo",
                "socketpair",
                "posixmq",
                "uds",
                "tcp",
                "ring",
                "memcpy"
            ],
            "size {size}"
        );
        for r in &at_size {
            let t = r["transport"].as_str().unwrap_or("?");
            assert_eq!(r["count"], 1500, "{t} at {size}: {r}");
            let rounds = r["rounds"].as_array().cloned().unwrap_or_default();
            assert_eq!(rounds.len(), 2, "{t} at {size}: rounds");
            for round in &rounds {
                assert_eq!(round["messages"], 1500, "{t} at {size}: {round}");
            }
            for field in ["msgs_per_s", "median_msgs_per_s", "mb_per_s", "ring_ratio"] {
                assert!(
                    r[field].as_f64().is_some_and(|x| x > 0.0),
                    "{t} at {size}: {field} in {r}"
                );
            }
            let limit = matches!(t, "ring" | "memcpy");
            assert_eq!(r["limit"], limit, "{t}: limit flag");
        }
    }
    assert_nothing_left(&name);

    // The saved document charts as messages/s grouped by size.
    let svg = dir.join("stream.svg");
    let svg_s = svg.to_string_lossy().into_owned();
    let (ok, _, stderr) = run_parent(&["chart", &saved_s, "--output", &svg_s], &[]);
    assert!(ok, "chart of a stream failed:\n{stderr}");
    let text = std::fs::read_to_string(&svg).unwrap_or_default();
    assert!(
        text.contains("<svg") && text.contains("ring") && text.contains("9 KiB"),
        "not a stream chart:\n{text}"
    );
    let (ok, stdout, stderr) = run_parent(&["compare", &saved_s, &saved_s], &[]);
    assert!(ok, "compare of a stream failed:\n{stderr}");
    assert!(
        stdout.contains("best msg/s") && stdout.contains("1.00x"),
        "{stdout}"
    );
}

#[test]
fn stream_options_are_checked() {
    for args in [
        &["--stream", "--sizes", "4"][..],
        &["--stream", "--count", "0"],
        &["--count", "10"],
        &["--stream", "--sweep"],
        &["--stream", "--transport", "floor"],
        &["--stream", "--message", "json"],
        &["--transport", "ring"],
    ] {
        let (ok, _, stderr) = run_parent(args, &[]);
        assert!(!ok, "{args:?} must be refused");
        assert!(!stderr.is_empty(), "{args:?}: an explanation expected");
    }
}

#[test]
fn serde_row_runs_without_a_child() {
    let args = [
        "--transport",
        "serde",
        "--duration",
        "50ms",
        "--warmup",
        "10ms",
        "--child",
        "/nonexistent/ipc-child",
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "the serde row needs no child:\n{stderr}");
    assert!(stdout.contains("serde [limit]"), "{stdout}");
}

#[test]
fn forced_fallback_runs_shm_over_ipc_channel() {
    let _serial = serial();
    let name = unique("forced");
    let args = [
        "--transport",
        "shm",
        "--duration",
        "100ms",
        "--warmup",
        "20ms",
        "--json",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[("SHMLINK_FORCE_FALLBACK", "1")]);
    assert!(ok, "ipc-parent failed:\n{stderr}");
    let doc = parse(&stdout, &stderr);
    let result = &doc["results"][0];
    assert_eq!(result["transport"], "shm");
    assert_eq!(result["backend"], "ipc-channel", "{result}");
    assert!(result["rounds"][0]["round_trips"]
        .as_u64()
        .is_some_and(|n| n > 0));
    assert_nothing_left(&name);
}

/// Every row of `--clients`, by the name the report gives it.
const CLIENT_ROWS: [&str; 7] = [
    "shm plain",
    "shm selector",
    "shm threads",
    "shm async",
    "uds poll",
    "uds threads",
    "ipc-channel select",
];

#[test]
fn clients_run_reports_every_row_at_every_count() {
    let _serial = serial();
    let name = unique("clients");
    let args = [
        "--clients",
        "1,2",
        "--count",
        "200",
        "--warmup",
        "10ms",
        "--rounds",
        "2",
        "--json",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent --clients failed:\n{stderr}");
    let doc = parse(&stdout, &stderr);
    assert_eq!(doc["clients"], serde_json::json!([1, 2]), "{doc}");
    assert_eq!(doc["message"], "raw");
    assert_eq!(doc["wait"], "block");
    let results = doc["results"].as_array().expect("results");
    for n in [1u64, 2] {
        for row in CLIENT_ROWS {
            let found = results
                .iter()
                .find(|r| r["transport"] == row && r["clients"] == n);
            if row == "shm plain" && n != 1 {
                assert!(found.is_none(), "the plain row takes one client: {doc}");
                continue;
            }
            let Some(r) = found else {
                panic!("no {row} x{n} result:\n{doc}")
            };
            let rounds = r["rounds"].as_array().expect("rounds");
            assert_eq!(rounds.len(), 2, "{r}");
            for round in rounds {
                // Every client made exactly --count timed round trips, all checked.
                assert_eq!(round["round_trips"], 200 * n, "{row} x{n}: {round}");
                assert!(round["rt_per_s"].as_f64().is_some_and(|x| x > 0.0), "{r}");
                assert!(round["p99_worst_client_ns"].as_u64().is_some_and(|x| x > 0));
            }
            assert!(r["median_rt_per_s"].as_f64().is_some_and(|x| x > 0.0));
            let p99 = &r["p99_worst_client_ns"];
            assert!(p99["median"].as_u64().is_some_and(|x| x > 0), "{r}");
            assert!(p99["best"].as_u64() <= p99["median"].as_u64(), "{r}");
            assert!(r["p99_median_client_ns"]["median"].as_u64() <= p99["median"].as_u64());
        }
    }
    let ratios = doc["ratios"].as_array().expect("ratios");
    for what in [
        "shm selector / shm plain, rt/s",
        "shm selector / uds poll, rt/s",
    ] {
        assert!(
            ratios
                .iter()
                .any(|r| r["what"] == what && r["median"].as_f64().is_some_and(|x| x > 0.0)),
            "no ratio {what}: {ratios:?}"
        );
    }
    assert_nothing_left(&name);
}

#[test]
fn clients_table_lists_the_rows_and_the_ratios() {
    let _serial = serial();
    let name = unique("clitable");
    let args = [
        "--clients",
        "1",
        "--transport",
        "plain,selector,uds-poll",
        "--count",
        "100",
        "--warmup",
        "0s",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent --clients failed:\n{stderr}");
    for row in ["shm plain", "shm selector", "uds poll"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("1  ") && l.contains(row))
            .unwrap_or_else(|| panic!("no table line for {row}:\n{stdout}"));
        // clients, row, round trips: 100 round trips of the one client.
        assert!(line.contains(" 100 "), "{line}");
    }
    assert!(
        !stdout.contains("shm threads"),
        "rows not asked for ran:\n{stdout}"
    );
    assert!(
        stdout.contains("shm selector / shm plain"),
        "ratio missing:\n{stdout}"
    );
    assert_nothing_left(&name);
}

#[test]
fn clients_options_are_checked() {
    for args in [
        &["--clients", "0"][..],
        &["--clients", "1", "--size", "4"],
        &["--clients", "1", "--wait", "spin,block"],
        &["--clients", "1", "--transport", "shm"],
        &["--clients", "1", "--sweep"],
        &["--clients", "1", "--stream"],
        &["--clients", "1", "--count", "0"],
    ] {
        let (ok, _, stderr) = run_parent(args, &[]);
        assert!(!ok, "{args:?} must be refused");
        assert!(!stderr.is_empty(), "{args:?}: an explanation expected");
    }
}

/// Starts a long `--clients 3` selector run, waits for its clients, then kills one of them
/// (SIGKILL) or interrupts the parent (SIGINT); returns the parent's (success, stderr, client
/// pids).
fn interrupt_clients_run(name: &str, kill_parent: bool) -> (bool, String, Vec<u32>) {
    let mut command = Command::new(PARENT);
    command
        .args([
            "--clients",
            "3",
            "--transport",
            "selector",
            "--duration",
            "60s",
            "--warmup",
            "10ms",
            "--name",
            name,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut parent = ChildGuard::spawn(command);
    let _watchdog = Watchdog::arm(LIMIT, "interrupted clients run");
    let Some(stderr) = parent.child.stderr.take() else {
        panic!("no stderr")
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut log = String::new();
    let mut pids = Vec::new();
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        log.push_str(&line);
        log.push('\n');
        if let Some(rest) = line.split("client pids ").nth(1) {
            pids = rest
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect();
            break;
        }
    }
    assert_eq!(pids.len(), 3, "no clients started:\n{log}");
    // Let the round trips get going.
    std::thread::sleep(Duration::from_millis(500));
    let (target, signal) = if kill_parent {
        (parent.pid(), libc::SIGINT)
    } else {
        (pids[0], libc::SIGKILL)
    };
    // SAFETY: kill on a process this test started (the parent, or one of its live clients).
    unsafe {
        libc::kill(target as i32, signal);
    }
    let status = parent.wait_for(Duration::from_secs(30));
    for line in lines.map_while(Result::ok) {
        log.push_str(&line);
        log.push('\n');
    }
    (status.success(), log, pids)
}

/// Runs `--clients` and kills one client (or, with `interrupt`, sends Ctrl-C): the run must fail
/// with `expected` in its log, and leave no process or name behind.
fn assert_clients_run_fails_cleanly(tag: &str, interrupt: bool, expected: &str) {
    let _serial = serial();
    let name = unique(tag);
    let (ok, log, pids) = interrupt_clients_run(&name, interrupt);
    assert!(!ok, "the run must fail:\n{log}");
    assert!(log.contains(expected), "{expected:?} expected:\n{log}");
    for pid in pids {
        assert!(!process_exists(pid), "client {pid} not reaped");
    }
    assert_nothing_left(&name);
}

#[test]
fn killing_a_client_fails_the_clients_run_cleanly() {
    assert_clients_run_fails_cleanly("killclient", false, "Error");
}

#[test]
fn ctrl_c_reaps_every_client_and_unlinks_everything() {
    assert_clients_run_fails_cleanly("clisigint", true, "interrupted");
}

/// Starts a long run over `transport`, waits for the first child, then does `act` to it (or to
/// the parent); returns the parent's (success, stderr, child pid).
fn interrupt_run(transport: &str, name: &str, kill_parent: bool) -> (bool, String, u32) {
    let mut command = Command::new(PARENT);
    command
        .args([
            "--transport",
            transport,
            "--duration",
            "60s",
            "--warmup",
            "10ms",
            "--name",
            name,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut parent = ChildGuard::spawn(command);
    let _watchdog = Watchdog::arm(LIMIT, &format!("interrupted {transport} run"));
    let Some(stderr) = parent.child.stderr.take() else {
        panic!("no stderr")
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut log = String::new();
    let mut child_pid = None;
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        log.push_str(&line);
        log.push('\n');
        if let Some(rest) = line.split("child pid ").nth(1) {
            child_pid = rest
                .split_whitespace()
                .next()
                .and_then(|p| p.parse::<u32>().ok());
            break;
        }
    }
    let Some(child_pid) = child_pid else {
        panic!("no child started:\n{log}")
    };
    // Let the ping-pong get going.
    std::thread::sleep(Duration::from_millis(500));
    let target = if kill_parent { parent.pid() } else { child_pid };
    let signal = if kill_parent {
        libc::SIGINT
    } else {
        libc::SIGKILL
    };
    // SAFETY: kill on a process this test started (the parent, or the parent's live child).
    unsafe {
        libc::kill(target as i32, signal);
    }
    let status = parent.wait_for(Duration::from_secs(30));
    for line in lines.map_while(Result::ok) {
        log.push_str(&line);
        log.push('\n');
    }
    (status.success(), log, child_pid)
}

fn killing_the_child_fails_the_parent(transport: &str) {
    let _serial = serial();
    let name = unique(&format!("kill{}", transport.replace('-', "")));
    let (ok, log, child) = interrupt_run(transport, &name, false);
    assert!(
        !ok,
        "{transport}: the parent must fail when its child is killed:\n{log}"
    );
    assert!(
        log.contains("Error"),
        "{transport}: a clear error expected:\n{log}"
    );
    assert!(
        !process_exists(child),
        "{transport}: child {child} not reaped"
    );
    let left = leftovers(&name);
    assert!(left.is_empty(), "{transport}: left behind: {left:?}");
}

#[test]
fn killing_the_shm_child_fails_the_parent_cleanly() {
    killing_the_child_fails_the_parent("shm");
}

#[test]
fn killing_the_floor_child_fails_the_parent_cleanly() {
    killing_the_child_fails_the_parent("floor");
}

#[test]
fn killing_the_raw_sync_child_fails_the_parent_cleanly() {
    killing_the_child_fails_the_parent("raw-sync");
}

#[test]
fn ctrl_c_reaps_the_child_and_unlinks_everything() {
    let _serial = serial();
    let name = unique("sigint");
    let (ok, log, child) = interrupt_run("shm", &name, true);
    assert!(!ok, "an interrupted run is not a success:\n{log}");
    assert!(log.contains("interrupted"), "{log}");
    assert!(!process_exists(child), "child {child} not reaped");
    assert_nothing_left(&name);
}

const SWEEP_FIXTURE: &str = r#"{"machine":{"cpu":"Test CPU","cores":2,"kernel":"Linux 6.1"},
 "profile":"release","message":"raw","size":null,"sweep":true,"sizes":[1024,1048576],"ring_size":8388608,
 "results":[
  {"transport":"shm","wait":"spin","backend":"shm","limit":false,"size":1024,"rounds":[{"round_trips":100,"seconds":1.0,"rt_per_s":100.0}],
   "best_rt_per_s":100.0,"median_rt_per_s":100.0,"latency_ns":{"p50":1,"p99":2,"p999":3,"max":4},"pct_of_floor":null,
   "mb_per_s":0.2,"median_mb_per_s":0.2,"memcpy_ratio":0.5},
  {"transport":"memcpy","wait":null,"backend":null,"limit":true,"size":1024,"rounds":[{"round_trips":200,"seconds":1.0,"rt_per_s":200.0}],
   "best_rt_per_s":200.0,"median_rt_per_s":200.0,"latency_ns":{"p50":1,"p99":2,"p999":3,"max":4},"pct_of_floor":null,
   "mb_per_s":0.4,"median_mb_per_s":0.4,"memcpy_ratio":1.0},
  {"transport":"shm","wait":"spin","backend":"shm","limit":false,"size":1048576,"rounds":[{"round_trips":1000,"seconds":1.0,"rt_per_s":1000.0}],
   "best_rt_per_s":1000.0,"median_rt_per_s":1000.0,"latency_ns":{"p50":1,"p99":2,"p999":3,"max":4},"pct_of_floor":null,
   "mb_per_s":2097.2,"median_mb_per_s":2097.2,"memcpy_ratio":0.5},
  {"transport":"memcpy","wait":null,"backend":null,"limit":true,"size":1048576,"rounds":[{"round_trips":2000,"seconds":1.0,"rt_per_s":2000.0}],
   "best_rt_per_s":2000.0,"median_rt_per_s":2000.0,"latency_ns":{"p50":1,"p99":2,"p999":3,"max":4},"pct_of_floor":null,
   "mb_per_s":4194.3,"median_mb_per_s":4194.3,"memcpy_ratio":1.0}]}"#;

const FIXTURE: &str = r#"{"machine":{"cpu":"Test CPU","cores":2,"kernel":"Linux 6.1"},
 "profile":"release","message":"json","size":null,
 "results":[
  {"transport":"shm","wait":"spin","rounds":[{"round_trips":100,"seconds":1.0,"rt_per_s":100.0}],
   "best_rt_per_s":100.0,"median_rt_per_s":100.0,"latency_ns":{"p50":1,"p99":2,"p999":3,"max":4},"pct_of_floor":50.0},
  {"transport":"floor","wait":null,"rounds":[{"round_trips":200,"seconds":1.0,"rt_per_s":200.0}],
   "best_rt_per_s":200.0,"median_rt_per_s":200.0,"latency_ns":{"p50":1,"p99":2,"p999":3,"max":4},"pct_of_floor":100.0}]}"#;

#[test]
fn chart_and_compare_read_a_result_file() {
    let dir = std::env::temp_dir().join(unique("chart"));
    let _cleanup = RemoveDir(dir.clone());
    std::fs::create_dir_all(&dir).ok();
    let input = dir.join("result.json");
    let svg = dir.join("chart.svg");
    std::fs::write(&input, FIXTURE).ok();
    let (input_s, svg_s) = (
        input.to_string_lossy().into_owned(),
        svg.to_string_lossy().into_owned(),
    );

    let (ok, _, stderr) = run_parent(&["chart", &input_s, "--output", &svg_s], &[]);
    assert!(ok, "chart failed:\n{stderr}");
    let text = std::fs::read_to_string(&svg).unwrap_or_default();
    assert!(
        text.contains("<svg") && text.contains("floor"),
        "not an SVG chart:\n{text}"
    );

    let (ok, stdout, stderr) = run_parent(&["compare", &input_s, &input_s], &[]);
    assert!(ok, "compare failed:\n{stderr}");
    assert!(
        stdout.contains("shm") && stdout.contains("1.00x"),
        "{stdout}"
    );

    // A sweep document: bars grouped by size, one legend entry per transport.
    let sweep = dir.join("sweep.json");
    std::fs::write(&sweep, SWEEP_FIXTURE).ok();
    let sweep_s = sweep.to_string_lossy().into_owned();
    let (ok, _, stderr) = run_parent(&["chart", &sweep_s, "--output", &svg_s], &[]);
    assert!(ok, "chart of a sweep failed:\n{stderr}");
    let text = std::fs::read_to_string(&svg).unwrap_or_default();
    assert!(
        text.contains("<svg") && text.contains("memcpy") && text.contains("1 MiB"),
        "not a sweep chart:\n{text}"
    );

    let (ok, _, _) = run_parent(&["chart", "/nonexistent/result.json"], &[]);
    assert!(!ok, "a missing input is an error");
}

struct RemoveDir(std::path::PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
