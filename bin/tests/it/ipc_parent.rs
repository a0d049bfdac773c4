//! End-to-end tests of the `ipc-parent` binary: the document of every mode (read back as the
//! harness's own types), `--pin`, the forced fallback, a child killed mid-run, Ctrl-C, the
//! clients run (its rows, a client killed, Ctrl-C), the fan-out run (its rows, a subscriber
//! killed, Ctrl-C), and the chart / compare subcommands. No timing is asserted.

use shmlink_test_support as common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    assert_nothing_left, leftovers, process_exists, serial, unique, ChildGuard, Watchdog,
};
use shmlink_harness::client::ClientRow;
use shmlink_harness::fanout::FanoutRow;
use shmlink_harness::parent::document::{
    Document, Latency, PingPong, PingPongResult, Results, RoundConditions, RoundTripFigures,
    RoundTrips, RowId, Run, Sweep, SweepResult,
};
use shmlink_harness::parent::machine::Machine;
use shmlink_harness::transport::Kind;

const PARENT: &str = env!("CARGO_BIN_EXE_ipc-parent");
/// Generous: debug builds on a loaded two-core machine, seven transports.
const LIMIT: Duration = Duration::from_secs(180);

/// Runs `ipc-parent` with `args` to completion; returns (success, stdout, stderr).
fn run_parent(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    run_program(std::path::Path::new(PARENT), args, env)
}

/// Runs `program` (an `ipc-parent`) with `args` to completion; returns (success, stdout, stderr).
fn run_program(
    program: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let mut command = Command::new(program);
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

/// Runs `ipc-parent` with `args` (words separated by spaces), `--json` and, when given,
/// `--name NAME`: it must succeed and print one document.
fn document(args: &str, name: Option<&str>, env: &[(&str, &str)]) -> Document {
    let mut args: Vec<&str> = args.split_whitespace().collect();
    args.push("--json");
    if let Some(name) = name {
        args.extend(["--name", name]);
    }
    let (ok, stdout, stderr) = run_parent(&args, env);
    assert!(ok, "ipc-parent {args:?} failed:\n{stderr}");
    match serde_json::from_str(&stdout) {
        Ok(doc) => doc,
        Err(e) => panic!("stdout is not one document ({e}):\n{stdout}\nstderr:\n{stderr}"),
    }
}

/// Runs `ipc-parent` with each of `cases`: every one must be refused with an explanation.
fn refused(cases: &[&[&str]]) {
    for args in cases {
        let (ok, _, stderr) = run_parent(args, &[]);
        assert!(!ok, "{args:?} must be refused");
        assert!(!stderr.is_empty(), "{args:?}: an explanation expected");
        assert!(
            !stderr.contains("panicked"),
            "{args:?} must be refused with an explanation, not a panic:\n{stderr}"
        );
    }
}

/// What every document says about its run.
fn check_run(doc: &Document, mode: &str, rounds: u32) {
    let run = &doc.run;
    assert!(
        run.command.starts_with(&format!("ipc-parent {mode}"))
            || (mode == "ping-pong" && run.command.starts_with("ipc-parent --")),
        "command: {}",
        run.command
    );
    assert!(!run.commit.is_empty(), "commit");
    assert!(
        run.date.len() == 20 && run.date.ends_with('Z'),
        "date: {}",
        run.date
    );
    assert!(matches!(run.profile.as_str(), "debug" | "release"));
    let m = &run.machine;
    assert!(
        m.cores >= 1 && !m.cpu.is_empty() && !m.kernel.is_empty(),
        "{m:?}"
    );
    assert_eq!(
        m.topology.len(),
        m.cores,
        "one topology entry per online CPU: {m:?}"
    );
    assert!(
        !run.pinning.pinned && !run.pinning.parent.is_empty(),
        "{:?}",
        run.pinning
    );
    assert_eq!(run.rounds, rounds);
    assert_eq!(doc.results.mode(), mode);
}

/// The transports of a mode: every kind but those left out, each shm row once per wait.
fn transports(leave_out: &[Kind], shm_waits: &[&str]) -> Vec<(String, Option<String>)> {
    Kind::ALL
        .iter()
        .filter(|k| !leave_out.contains(k))
        .flat_map(|&k| {
            if k == Kind::Shm {
                shm_waits
                    .iter()
                    .map(|w| ("shm".to_owned(), Some(w.to_string())))
                    .collect()
            } else {
                vec![(k.as_str().to_owned(), None)]
            }
        })
        .collect()
}

fn row_names<'a>(rows: impl Iterator<Item = &'a RowId>) -> Vec<(String, Option<String>)> {
    rows.map(|r| (r.transport.clone(), r.wait.clone()))
        .collect()
}

fn with_limits(
    mut rows: Vec<(String, Option<String>)>,
    limits: &[&str],
) -> Vec<(String, Option<String>)> {
    rows.extend(limits.iter().map(|l| (l.to_string(), None)));
    rows
}

fn ping_pong(doc: &Document) -> &PingPong {
    match &doc.results {
        Results::PingPong(p) => p,
        other => panic!("not a ping-pong document: {}", other.mode()),
    }
}

#[test]
fn default_ping_pong_document_has_every_transport_and_block_beside_spin() {
    let _serial = serial();
    let name = unique("all");
    let doc = document(
        "--duration 200ms --rounds 1 --warmup 50ms",
        Some(&name),
        &[],
    );
    check_run(&doc, "ping-pong", 1);
    let p = ping_pong(&doc);
    assert_eq!(p.message, "json");
    assert_eq!(p.size, None);
    assert_eq!(
        row_names(p.results.iter().map(|r| &r.row)),
        with_limits(transports(&[], &["block", "spin"]), &["serde"])
    );
    for r in &p.results {
        let t = r.row.label();
        assert_eq!(r.figures.rounds.len(), 1, "{t}: rounds");
        assert!(r.figures.rounds[0].round_trips > 0, "{t}: {r:?}");
        assert!(r.figures.best_rt_per_s > 0.0, "{t}: best");
        assert!(
            r.figures.latency_ns.p50 <= r.figures.latency_ns.max,
            "{t}: latency"
        );
        assert!(
            r.pct_of_floor.is_some_and(|x| x > 0.0),
            "{t}: % of floor (floor ran)"
        );
        assert!(
            r.payload.is_none(),
            "{t}: JSON messages have no payload size"
        );
        assert_eq!(
            r.row.limit,
            matches!(t.as_str(), "floor [limit]" | "serde [limit]")
        );
    }
    // The serde row runs in this process: no child, no backend.
    let serde = p.results.last().map(|r| &r.row);
    assert!(serde.is_some_and(|r| r.transport == "serde" && r.backend.is_none()));
    assert_nothing_left(&name);
}

#[test]
fn raw_messages_report_their_size() {
    let _serial = serial();
    let name = unique("raw");
    let doc = document(
        "ping-pong --transport shm,uds --wait spin --message raw --size 4KiB --duration 100ms --warmup 20ms",
        Some(&name),
        &[],
    );
    check_run(&doc, "ping-pong", 1);
    let p = ping_pong(&doc);
    assert_eq!((p.message.as_str(), p.size), ("raw", Some(4096)));
    for r in &p.results {
        let payload = r.payload.as_ref().expect("a raw row has a payload");
        assert_eq!(payload.size, 4096, "{r:?}");
        assert!(
            payload.mb_per_s > 0.0 && payload.median_mb_per_s > 0.0,
            "{r:?}"
        );
        assert!(r.pct_of_floor.is_none(), "no floor ran: {r:?}");
    }
}

#[test]
fn pinned_runs_record_their_cpus_and_the_topology() {
    let _serial = serial();
    let name = unique("pin");
    let machine = Machine::read();
    let cpus: Vec<usize> = machine.topology.iter().map(|t| t.cpu).take(2).collect();
    let list = cpus
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let doc = document(
        &format!(
            "ping-pong --transport shm --wait block --pin {list} --duration 100ms --warmup 20ms"
        ),
        Some(&name),
        &[],
    );
    let pinning = &doc.run.pinning;
    assert!(pinning.pinned, "{pinning:?}");
    assert_eq!(pinning.parent, [cpus[0]], "{pinning:?}");
    assert_eq!(
        pinning.children,
        [*cpus.last().unwrap_or(&0)],
        "{pinning:?}"
    );
    assert_eq!(doc.run.machine.topology.len(), machine.topology.len());
    assert!(ping_pong(&doc).results[0].figures.rounds[0].round_trips > 0);
    assert_nothing_left(&name);

    // Alone, --pin chooses: the parent on one CPU, the child on one (another where there is
    // another).
    let doc = document(
        "--transport serde --pin --duration 20ms --warmup 0s",
        None,
        &[],
    );
    let pinning = &doc.run.pinning;
    assert!(pinning.pinned && pinning.parent.len() == 1 && pinning.children.len() == 1);
    assert_eq!(
        pinning.parent != pinning.children,
        machine.cores > 1,
        "{pinning:?}"
    );
    refused(&[&["--transport", "serde", "--pin", "99999"], &["--pin", "x"]]);
}

#[test]
fn sweep_reports_every_transport_and_memcpy_at_every_size() {
    let _serial = serial();
    let name = unique("sweep");
    let doc = document(
        "sweep --sizes 1KiB,1MiB --duration 100ms --rounds 1 --warmup 20ms",
        Some(&name),
        &[],
    );
    check_run(&doc, "sweep", 1);
    let Results::Sweep(s) = &doc.results else {
        unreachable!("checked")
    };
    assert_eq!(s.sizes, [1024, 1 << 20]);
    assert!(s.ring_size >= 2 << 20);
    for size in [1024, 1 << 20] {
        let at: Vec<_> = s.results.iter().filter(|r| r.size == size).collect();
        assert_eq!(
            row_names(at.iter().map(|r| &r.row)),
            with_limits(transports(&[Kind::Floor], &["spin"]), &["memcpy"]),
            "size {size}"
        );
        for r in at {
            let t = r.row.label();
            assert!(
                r.mb_per_s > 0.0 && r.median_mb_per_s > 0.0,
                "{t} at {size}: {r:?}"
            );
            assert!(r.memcpy_ratio.is_some_and(|x| x > 0.0), "{t} at {size}");
            assert_eq!(r.row.limit, r.row.transport == "memcpy", "{t}");
        }
    }
    assert_nothing_left(&name);
}

#[test]
fn mode_options_are_checked() {
    refused(&[
        &["sweep", "--transport", "floor"],
        &["sweep", "--transport", "shm,serde"],
        &["sweep", "--sizes", "0"],
        &["sweep", "--message", "json"],
        &["--sizes", "1KiB"],
        &["--transport", "memcpy"],
        &["--transport", "serde", "--message", "raw"],
        &["--rounds", "0"],
        &["stream", "--sizes", "4"],
        &["stream", "--count", "0"],
        &["--count", "10"],
        &["stream", "--transport", "floor"],
        &["stream", "--message", "json"],
        &["--transport", "ring"],
        &["clients", "0"],
        &["clients", "1", "--size", "4"],
        &["clients", "1", "--wait", "spin,block"],
        &["clients", "1", "--transport", "shm"],
        &["clients", "1", "--count", "0"],
        &["clients", "--sweep"],
        &["fanout", "0"],
        &["fanout", "1", "--sizes", "16"],
        &["fanout", "1", "--sizes", "1MiB"],
        &["fanout", "1", "--transport", "shm"],
        &["fanout", "1", "--transport", "uds-bare"],
        &["fanout", "1", "--count", "0"],
        &["fanout", "1", "--wait", "spin"],
        // Bare rows belong to the stream, and only the kernel transports have one.
        &["--transport", "pipe-bare"],
        &["ping-pong", "--message", "raw", "--transport", "tcp-bare"],
        &["sweep", "--transport", "uds-bare"],
        &["clients", "1", "--transport", "pipe-bare"],
        &["stream", "--transport", "shm-bare"],
        &["stream", "--transport", "floor-bare"],
        // Batch rows too, and only shm and the kernel byte streams have one.
        &["--transport", "shm-batch"],
        &["clients", "1", "--transport", "uds-batch"],
        &["stream", "--transport", "posixmq-batch"],
        &["stream", "--transport", "ipc-channel-batch"],
    ]);
}

#[test]
fn stream_checks_every_transport_bare_and_batch_row_at_every_size_beside_ring_and_memcpy() {
    let _serial = serial();
    let name = unique("stream");
    let dir = std::env::temp_dir().join(unique("stream-chart"));
    let _cleanup = RemoveDir(dir.clone());
    std::fs::create_dir_all(&dir).ok();
    let saved = dir.join("stream.json");
    let saved_s = saved.to_string_lossy().into_owned();
    let doc = document(
        &format!("stream --sizes 8,9KiB --count 1500 --rounds 2 --warmup 10ms --save {saved_s}"),
        Some(&name),
        &[],
    );
    check_run(&doc, "stream", 2);
    let Results::Stream(s) = &doc.results else {
        unreachable!("checked")
    };
    assert_eq!(s.sizes, [8, 9216]);
    assert_eq!((s.count, s.wait.as_str()), (Some(1500), "spin"));
    // Every queue message is at most msgsize_max bytes: 9 KiB goes in fragments.
    assert!(
        s.posixmq.as_ref().is_some_and(|mq| mq.msgsize > 4),
        "{:?}",
        s.posixmq
    );
    let msgsize = s.posixmq.as_ref().map_or(0, |mq| mq.msgsize);
    for size in [8, 9216] {
        let at: Vec<_> = s.results.iter().filter(|r| r.size == size).collect();
        // Every kernel transport is followed by its bare row (posixmq's only where one queue
        // message holds the message), and every transport with a batch form by its batch row.
        let expected: Vec<_> = transports(&[Kind::Floor], &["spin"])
            .into_iter()
            .flat_map(|(t, wait)| {
                let kind: Kind = t.parse().expect("a transport");
                let bare = kind.has_bare() && (kind != Kind::PosixMq || size <= msgsize);
                let mut rows = vec![(t.clone(), wait)];
                if bare {
                    rows.push((format!("{t}-bare"), None));
                }
                if kind.has_batch() {
                    rows.push((format!("{t}-batch"), None));
                }
                rows
            })
            .collect();
        assert_eq!(
            row_names(at.iter().map(|r| &r.row)),
            with_limits(expected, &["ring", "memcpy"]),
            "size {size}"
        );
        for r in &at {
            let t = r.row.label();
            assert_eq!(r.count, 1500, "{t} at {size}");
            assert_eq!(r.rounds.len(), 2, "{t} at {size}: rounds");
            assert!(r.rounds.iter().all(|x| x.messages == 1500), "{t} at {size}");
            assert!(r.msgs_per_s > 0.0 && r.median_msgs_per_s > 0.0 && r.mb_per_s > 0.0);
            assert!(r.ring_ratio.is_some_and(|x| x > 0.0), "{t} at {size}");
            assert_eq!(
                r.row.limit,
                matches!(r.row.transport.as_str(), "ring" | "memcpy")
            );
            // A framed kernel row carries its ratio to its bare row, where that row ran.
            let has_bare = at
                .iter()
                .any(|b| b.row.transport == format!("{}-bare", r.row.transport));
            assert_eq!(
                r.bare_ratio.is_some_and(|x| x > 0.0),
                has_bare,
                "{t} at {size}: bare ratio {:?}",
                r.bare_ratio
            );
        }
    }
    assert_nothing_left(&name);
    // The saved document is the printed one.
    let read: Document = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap_or_default())
        .expect("the saved document");
    assert_eq!(read.run.date, doc.run.date);

    // It charts as messages/s grouped by size, and compares with itself.
    let svg = dir.join("stream.svg");
    let svg_s = svg.to_string_lossy().into_owned();
    let (ok, _, stderr) = run_parent(&["chart", &saved_s, "--output", &svg_s], &[]);
    assert!(ok, "chart of a stream failed:\n{stderr}");
    let text = std::fs::read_to_string(&svg).unwrap_or_default();
    assert!(
        text.contains("<svg") && text.contains("ring") && text.contains("9 KiB"),
        "not a stream chart:\n{text}"
    );
    // compare takes one document of each build: the same one, as the other build too.
    let mut other = read.clone();
    other.run.profile = if read.run.profile == "debug" {
        "release"
    } else {
        "debug"
    }
    .to_owned();
    let other_path = dir.join("other-build.json");
    std::fs::write(&other_path, other.to_text().unwrap_or_default()).ok();
    let other_s = other_path.to_string_lossy().into_owned();
    let (ok, stdout, stderr) = run_parent(&["compare", &saved_s, &other_s], &[]);
    assert!(ok, "compare of a stream failed:\n{stderr}");
    assert!(
        stdout.contains("best msg/s") && stdout.contains("1.00x"),
        "{stdout}"
    );
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

/// `cargo run --release` on a fresh checkout builds `ipc-parent` alone: with no `ipc-child`
/// beside it, it is its own child, in every mode.
#[test]
fn ipc_parent_alone_in_its_directory_is_its_own_child() {
    // Three measuring runs: not beside the other measuring tests.
    let _serial = serial();
    let name = unique("alone");
    let dir = std::env::temp_dir().join(format!("ipc-parent-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alone = dir.join("ipc-parent");
    std::fs::copy(PARENT, &alone).unwrap();
    let runs: [&[&str]; 3] = [
        &[
            "ping-pong",
            "--transport",
            "shm,pipe",
            "--duration",
            "50ms",
            "--warmup",
            "10ms",
        ],
        &[
            "stream",
            "--transport",
            "shm,pipe-bare",
            "--sizes",
            "64",
            "--count",
            "500",
            "--warmup",
            "10ms",
        ],
        &[
            "clients",
            "1",
            "--transport",
            "plain,uds-poll",
            "--count",
            "50",
            "--warmup",
            "10ms",
        ],
    ];
    // Each run's rows: ours, and the kernel transport's beside it.
    let rows = [["shm", "pipe"], ["shm", "pipe-bare"], ["plain", "uds"]];
    let outcomes: Vec<_> = runs
        .iter()
        .map(|args| {
            let mut args = args.to_vec();
            args.extend(["--name", &name]);
            let outcome = run_program(&alone, &args, &[]);
            (args.join(" "), outcome)
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    for ((args, (ok, stdout, stderr)), rows) in outcomes.into_iter().zip(rows) {
        assert!(ok, "ipc-parent {args} alone failed:\n{stderr}");
        for row in rows {
            assert!(
                stdout.contains(row),
                "ipc-parent {args}: no {row} row in\n{stdout}"
            );
        }
    }
    // Its children were its own: they left nothing named after the run.
    assert_nothing_left(&name);
}

#[test]
fn forced_fallback_runs_shm_over_ipc_channel() {
    let _serial = serial();
    let name = unique("forced");
    let doc = document(
        "--transport shm --wait spin --duration 100ms --warmup 20ms",
        Some(&name),
        &[("SHMLINK_FORCE_FALLBACK", "1")],
    );
    let r = &ping_pong(&doc).results[0];
    assert_eq!(r.row.transport, "shm");
    assert_eq!(r.row.backend.as_deref(), Some("ipc-channel"), "{r:?}");
    assert!(r.figures.rounds[0].round_trips > 0);
    assert_nothing_left(&name);
}

#[test]
fn clients_run_reports_every_row_at_every_count() {
    let _serial = serial();
    let name = unique("clients");
    let doc = document(
        "clients 1,2 --count 200 --warmup 10ms --rounds 2",
        Some(&name),
        &[],
    );
    check_run(&doc, "clients", 2);
    let Results::Clients(c) = &doc.results else {
        unreachable!("checked")
    };
    assert_eq!(c.counts, [1, 2]);
    assert_eq!((c.wait.as_str(), c.size), ("block", 64));
    for n in [1, 2] {
        for row in ClientRow::ALL {
            let found = c
                .results
                .iter()
                .find(|r| r.row == row.name() && r.clients == n);
            if !row.runs_with(n) {
                assert!(found.is_none(), "{} takes one client: {c:?}", row.name());
                continue;
            }
            let Some(r) = found else {
                panic!("no {} x{n} result:\n{c:?}", row.name())
            };
            assert_eq!(r.rounds.len(), 2, "{r:?}");
            for round in &r.rounds {
                // Every client made exactly --count timed round trips, all checked.
                assert_eq!(round.total.round_trips, 200 * n as u64, "{r:?}");
                assert!(
                    round.total.rt_per_s > 0.0 && round.p99_worst_client_ns > 0,
                    "{r:?}"
                );
            }
            assert!(r.median_rt_per_s > 0.0);
            let p99 = &r.p99_worst_client_ns;
            assert!(p99.median > 0 && p99.best <= p99.median, "{r:?}");
            assert!(r.p99_median_client_ns.median <= p99.median, "{r:?}");
        }
    }
    assert_nothing_left(&name);
}

#[test]
fn clients_table_lists_the_rows_and_the_ratios() {
    let _serial = serial();
    let name = unique("clitable");
    let args = [
        "clients",
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
    assert!(ok, "ipc-parent clients failed:\n{stderr}");
    for row in ["shm plain", "shm selector", "uds poll"] {
        let line = stdout
            .lines()
            .find(|l| l.contains(&format!(" {row} ")))
            .unwrap_or_else(|| panic!("no table line for {row}:\n{stdout}"));
        // clients, row, round trips: 100 round trips of the one client.
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells.get(1..4), Some(&["1", row, "100"][..]), "{line}");
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

/// Starts a long `clients 3` selector run, waits for its clients, then kills one of them
/// (SIGKILL) or interrupts the parent (SIGINT); returns the parent's (success, stderr, client
/// pids).
fn interrupt_clients_run(name: &str, kill_parent: bool) -> (bool, String, Vec<u32>) {
    interrupt_many_run(
        &[
            "clients",
            "3",
            "--transport",
            "selector",
            "--duration",
            "60s",
            "--warmup",
            "10ms",
            "--name",
            name,
        ],
        "client pids ",
        kill_parent,
    )
}

/// Starts a long run of `args` with three children, waits for the line that lists their pids
/// (after `marker`), then kills the first child (SIGKILL) or interrupts the parent (SIGINT);
/// returns the parent's (success, stderr, child pids).
fn interrupt_many_run(args: &[&str], marker: &str, kill_parent: bool) -> (bool, String, Vec<u32>) {
    let mut command = Command::new(PARENT);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut parent = ChildGuard::spawn(command);
    let _watchdog = Watchdog::arm(LIMIT, &format!("interrupted run {args:?}"));
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
        if let Some(rest) = line.split(marker).nth(1) {
            pids = rest
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect();
            break;
        }
    }
    assert_eq!(pids.len(), 3, "no children started:\n{log}");
    // Let the messages get going.
    std::thread::sleep(Duration::from_millis(500));
    let (target, signal) = if kill_parent {
        (parent.pid(), libc::SIGINT)
    } else {
        (pids[0], libc::SIGKILL)
    };
    // SAFETY: kill on a process this test started (the parent, or one of its live children).
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

#[test]
fn fanout_run_reports_every_row_at_every_count_and_size() {
    let _serial = serial();
    let name = unique("fanout");
    let doc = document(
        "fanout 1,2 --count 300 --warmup 10ms --rounds 2 --sizes 64,4KiB",
        Some(&name),
        &[],
    );
    check_run(&doc, "fanout", 2);
    let Results::Fanout(f) = &doc.results else {
        unreachable!("checked")
    };
    assert_eq!(
        (f.counts.as_slice(), f.sizes.as_slice()),
        (&[1, 2][..], &[64, 4096][..])
    );
    assert_eq!((f.count, f.ring_size), (Some(300), 1 << 20));
    assert_eq!(f.iceoryx2.is_some(), cfg!(feature = "iceoryx2"));
    // The spinning row runs only where the publisher and every subscriber have a CPU.
    let pinning = &doc.run.pinning;
    let mut cpus: Vec<usize> = pinning
        .parent
        .iter()
        .chain(&pinning.children)
        .copied()
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    for n in [1, 2] {
        for row in FanoutRow::ALL.into_iter().filter(|r| r.built()) {
            let skipped = f
                .skipped
                .iter()
                .any(|s| s.row == row.name() && s.subscribers == n);
            assert_eq!(
                skipped,
                row.spins() && n + 1 > cpus.len(),
                "{row:?} x{n}: {f:?}"
            );
            for size in [64, 4096] {
                let found = f
                    .results
                    .iter()
                    .find(|r| r.row == row.name() && r.subscribers == n && r.size == size);
                if skipped {
                    assert!(found.is_none(), "{} ran x{n}", row.name());
                    continue;
                }
                let Some(r) = found else {
                    panic!("no {} x{n} {size} result:\n{f:?}", row.name())
                };
                assert_eq!(r.rounds.len(), 2, "{r:?}");
                for round in &r.rounds {
                    // Every subscriber received exactly the --count timed messages, all checked.
                    assert_eq!(round.messages, 300, "{r:?}");
                    assert_eq!(round.subscriber_msgs_per_s.len(), n, "{r:?}");
                    assert!(
                        round.slowest_subscriber_msgs_per_s > 0.0
                            && round.slowest_subscriber_msgs_per_s
                                <= round.median_subscriber_msgs_per_s
                            && round.publisher_cpu_s > 0.0
                            && round.msgs_per_cpu_s > 0.0,
                        "{r:?}"
                    );
                    let l = round.latency_ns;
                    assert!(l.p50 > 0 && l.p50 <= l.p99 && l.p99 <= l.max, "{r:?}");
                }
                assert!(r.subscriber_msgs_per_s.best >= r.subscriber_msgs_per_s.median);
            }
        }
    }
    assert_nothing_left(&name);
}

#[test]
fn fanout_table_lists_the_rows_and_the_ratios() {
    let _serial = serial();
    let name = unique("fantable");
    let args = [
        "fanout",
        "8",
        "--transport",
        "shmlink-topic,shmlink-channels",
        "--sizes",
        "64",
        "--count",
        "200",
        "--warmup",
        "0s",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent fanout failed:\n{stderr}");
    for row in ["shmlink-topic", "shmlink-channels"] {
        let line = stdout
            .lines()
            .find(|l| l.contains(&format!(" {row} ")))
            .unwrap_or_else(|| panic!("no table line for {row}:\n{stdout}"));
        // subscribers, size, row, messages: 200 timed messages to each subscriber.
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(
            cells.get(1..5),
            Some(&["8", "64 B", row, "200"][..]),
            "{line}"
        );
    }
    for needle in [
        "shmlink-topic / shmlink-channels, msg per publisher CPU-s, 8 subscribers, 64 B",
        "With 8 subscribers, one topic moves",
        "N + 1 processes sharing this machine's",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    assert!(
        !stdout.contains(" uds "),
        "rows not asked for ran:\n{stdout}"
    );
    assert_nothing_left(&name);
}

/// Runs a long `fanout 3` over `row` and kills one subscriber (or, with `interrupt`, sends
/// Ctrl-C): the run must fail with `expected` in its log, and leave no process or name behind.
fn assert_fanout_run_fails_cleanly(tag: &str, row: &str, interrupt: bool, expected: &str) {
    let _serial = serial();
    let name = unique(tag);
    let args = [
        "fanout",
        "3",
        "--transport",
        row,
        "--sizes",
        "64",
        "--duration",
        "60s",
        "--warmup",
        "10ms",
        "--name",
        &name,
    ];
    let (ok, log, pids) = interrupt_many_run(&args, "subscriber pids ", interrupt);
    assert!(!ok, "the {row} run must fail:\n{log}");
    assert!(
        log.contains(expected),
        "{row}: {expected:?} expected:\n{log}"
    );
    for pid in pids {
        assert!(!process_exists(pid), "{row}: subscriber {pid} not reaped");
    }
    assert_nothing_left(&name);
}

#[test]
fn killing_a_subscriber_fails_the_fanout_run_cleanly() {
    // A topic goes on without a dead subscriber: the publisher must notice it itself.
    assert_fanout_run_fails_cleanly("killsub", "shmlink-topic", false, "exited before the end");
    assert_fanout_run_fails_cleanly("killsubuds", "uds", false, "Error");
    if cfg!(feature = "iceoryx2") {
        assert_fanout_run_fails_cleanly("killsubiox", "iceoryx2", false, "Error");
    }
}

#[test]
fn ctrl_c_reaps_every_subscriber_and_unlinks_everything() {
    assert_fanout_run_fails_cleanly("fansigint", "shmlink-channels", true, "interrupted");
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

/// A small document of `mode` made in this process, written where `chart` and `compare` read.
fn fixture(results: Results) -> Document {
    Document {
        run: Run {
            command: "ipc-parent test".to_owned(),
            commit: "0123456789abcdef".to_owned(),
            date: "2025-01-02T03:04:05Z".to_owned(),
            profile: "release".to_owned(),
            machine: Machine::read(),
            pinning: Default::default(),
            load_average: 0.0,
            load: 0,
            rounds: 1,
            warmup_s: 0.0,
            round_conditions: Vec::new(),
        },
        results,
    }
}

fn round_trips(transport: &str, limit: bool, rate: f64) -> (RowId, RoundTripFigures) {
    let row = RowId {
        transport: transport.to_owned(),
        wait: None,
        backend: (!limit).then(|| transport.to_owned()),
        limit,
    };
    let figures = RoundTripFigures {
        rounds: vec![RoundTrips {
            round_trips: rate as u64,
            seconds: 1.0,
            rt_per_s: rate,
            slices: Vec::new(),
        }],
        best_rt_per_s: rate,
        median_rt_per_s: rate,
        latency_ns: Latency {
            p50: 1,
            p99: 2,
            p999: 3,
            max: 4,
        },
    };
    (row, figures)
}

#[test]
fn chart_and_compare_read_a_result_file() {
    let dir = std::env::temp_dir().join(unique("chart"));
    let _cleanup = RemoveDir(dir.clone());
    std::fs::create_dir_all(&dir).ok();
    let write = |file: &str, doc: &Document| {
        let path = dir.join(file);
        std::fs::write(&path, serde_json::to_string(doc).unwrap_or_default()).ok();
        path.to_string_lossy().into_owned()
    };
    let ping = fixture(Results::PingPong(PingPong {
        message: "json".to_owned(),
        size: None,
        duration_s: 1.0,
        pace_s: 0.0,
        ring_size: 1 << 20,
        posixmq: None,
        slice_s: None,
        results: [("shm", false, 100.0), ("floor", true, 200.0)]
            .into_iter()
            .map(|(t, limit, rate)| {
                let (row, figures) = round_trips(t, limit, rate);
                PingPongResult {
                    row,
                    figures,
                    pct_of_floor: Some(rate / 2.0),
                    payload: None,
                }
            })
            .collect(),
    }));
    let input_s = write("result.json", &ping);
    let svg_s = dir.join("chart.svg").to_string_lossy().into_owned();

    let (ok, _, stderr) = run_parent(&["chart", &input_s, "--output", &svg_s], &[]);
    assert!(ok, "chart failed:\n{stderr}");
    let text = std::fs::read_to_string(&svg_s).unwrap_or_default();
    assert!(
        text.contains("<svg") && text.contains("floor"),
        "not an SVG chart:\n{text}"
    );
    // The chart says which build of which commit measured it, when, and how busy the machine was.
    assert!(
        text.contains("commit 0123456789ab")
            && text.contains("2025-01-02")
            && text.contains("load 0.00"),
        "the chart's title lacks the commit, date or load:\n{text}"
    );

    // compare: the documents sorted by the build they record, each with its commit and load; the
    // best of a build's documents (one per round when interleaved) against the other's.
    let mut debug = ping.clone();
    debug.run.profile = "debug".to_owned();
    debug.run.commit = "fedcba9876543210".to_owned();
    debug.run.load_average = 0.75;
    if let Results::PingPong(p) = &mut debug.results {
        for r in &mut p.results {
            r.figures.best_rt_per_s /= 4.0;
        }
    }
    let debug_s = write("debug.json", &debug);
    let mut release2 = ping.clone();
    if let Results::PingPong(p) = &mut release2.results {
        p.results[0].figures.best_rt_per_s = 150.0;
    }
    let release2_s = write("release2.json", &release2);
    let (ok, stdout, stderr) = run_parent(&["compare", &input_s, &debug_s, &release2_s], &[]);
    assert!(ok, "compare failed:\n{stderr}");
    assert!(
        stdout.contains("debug") && stdout.contains("commit fedcba987654"),
        "{stdout}"
    );
    assert!(
        stdout.contains("commit 0123456789ab") && stdout.contains("load average 0.75"),
        "{stdout}"
    );
    // shm: the best release document (150) over the debug one (25).
    let shm = stdout.lines().find(|l| l.starts_with("shm")).unwrap_or("");
    assert!(shm.contains("6.00x"), "{stdout}");
    let (ok, _, stderr) = run_parent(&["compare", &input_s, &release2_s], &[]);
    assert!(
        !ok && stderr.contains("0 debug"),
        "two release documents are not a comparison:\n{stderr}"
    );

    // A sweep document: bars grouped by size, one legend entry per transport.
    let sweep = fixture(Results::Sweep(Sweep {
        sizes: vec![1024, 1 << 20],
        duration_s: 1.0,
        ring_size: 8 << 20,
        posixmq: None,
        results: [1024, 1 << 20]
            .into_iter()
            .flat_map(|size| [("shm", false, 100.0), ("memcpy", true, 200.0)].map(|x| (size, x)))
            .map(|(size, (t, limit, rate))| {
                let (row, figures) = round_trips(t, limit, rate);
                SweepResult {
                    row,
                    size,
                    figures,
                    mb_per_s: rate * size as f64 * 2e-6,
                    median_mb_per_s: rate * size as f64 * 2e-6,
                    memcpy_ratio: Some(rate / 200.0),
                }
            })
            .collect(),
    }));
    let sweep_s = write("sweep.json", &sweep);
    let (ok, _, stderr) = run_parent(&["chart", &sweep_s, "--output", &svg_s], &[]);
    assert!(ok, "chart of a sweep failed:\n{stderr}");
    let text = std::fs::read_to_string(&svg_s).unwrap_or_default();
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

/// `report --check` passes on the committed page and fails, naming the page, when the page or a
/// document it is rendered from changed, or when the page is missing.
#[test]
fn report_check_fails_when_the_page_and_the_documents_disagree() {
    let results = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results");
    let dir = std::env::temp_dir().join(unique("report-check"));
    std::fs::create_dir(&dir).unwrap();
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(dir.clone());
    for entry in std::fs::read_dir(&results).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let dir_arg = dir.to_str().unwrap();
    let check = || run_parent(&["report", "--check", "--dir", dir_arg], &[]);
    // The documents measured on a busy machine fail the check on their own (see
    // report_check_refuses_a_document_measured_busy): here they are made quiet, the page
    // rendered again.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") && !path.ends_with("published.json") {
            let mut value: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            value["run"]["load_average"] = serde_json::json!(0.25);
            std::fs::write(&path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
        }
    }
    let (ok, _, stderr) = run_parent(&["report", "--dir", dir_arg], &[]);
    assert!(ok, "report failed:\n{stderr}");
    let (ok, _, stderr) = check();
    assert!(ok, "a page just rendered must pass:\n{stderr}");

    let page = dir.join("README.md");
    let committed = std::fs::read_to_string(&page).unwrap();
    let must_fail = |what: &str| {
        let (ok, _, stderr) = check();
        assert!(!ok, "report --check passed with {what}");
        assert!(
            stderr.contains("README.md") && !stderr.contains("panicked"),
            "with {what}, the failure must name the page:\n{stderr}"
        );
    };
    std::fs::write(&page, format!("{committed}\none more line\n")).unwrap();
    must_fail("a line added to the page");
    std::fs::remove_file(&page).unwrap();
    must_fail("the page missing");

    std::fs::write(&page, &committed).unwrap();
    let doc = dir.join("ping-pong.json");
    let text = std::fs::read_to_string(&doc).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["run"]["commit"] = serde_json::Value::String("0000000".into());
    std::fs::write(&doc, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    must_fail("a document's commit changed");

    // Writing the page again makes it pass once more.
    let (ok, _, stderr) = run_parent(&["report", "--dir", dir_arg], &[]);
    assert!(ok, "report failed:\n{stderr}");
    let (ok, _, stderr) = check();
    assert!(ok, "a freshly written page must pass:\n{stderr}");
}

/// A ping-pong document with a floor row of these per-round rates beside an shm row, at this
/// start load, with `--load`.
fn floor_document(floor: &[f64], load_average: f64, load: usize) -> Document {
    let rounds = |rates: &[f64]| RoundTripFigures {
        rounds: rates
            .iter()
            .map(|&r| RoundTrips {
                round_trips: r as u64,
                seconds: 1.0,
                rt_per_s: r,
                slices: Vec::new(),
            })
            .collect(),
        best_rt_per_s: rates.iter().copied().fold(0.0, f64::max),
        median_rt_per_s: rates[rates.len() / 2],
        latency_ns: Latency::default(),
    };
    let shm: Vec<f64> = floor.iter().map(|r| r / 2.0).collect();
    let mut doc = fixture(Results::PingPong(PingPong {
        message: "raw".to_owned(),
        size: Some(56),
        duration_s: 1.0,
        pace_s: 0.0,
        ring_size: 1 << 20,
        posixmq: None,
        slice_s: None,
        results: [("shm", false, &shm[..]), ("floor", true, floor)]
            .into_iter()
            .map(|(t, limit, rates)| PingPongResult {
                row: round_trips(t, limit, 1.0).0,
                figures: rounds(rates),
                pct_of_floor: None,
                payload: None,
            })
            .collect(),
    }));
    doc.run.rounds = floor.len() as u32;
    doc.run.load_average = load_average;
    doc.run.load = load;
    doc.run.machine.cores = 2;
    doc.run.round_conditions = (1..=floor.len() as u32)
        .map(|round| RoundConditions {
            round,
            part: None,
            load_average: 0.5 + f64::from(round),
            steal_pct: Some(f64::from(round) * 1.5),
            seconds: 1.0,
        })
        .collect();
    doc
}

/// Writes `docs` into a fresh folder and renders its page; returns the folder (removed on
/// drop) and the page.
fn rendered(tag: &str, docs: &[(&str, &Document)]) -> (RemoveDir, String) {
    let dir = std::env::temp_dir().join(unique(tag));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, doc) in docs {
        std::fs::write(dir.join(name), doc.to_text().unwrap()).unwrap();
    }
    let (ok, _, stderr) = run_parent(&["report", "--dir", dir.to_str().unwrap()], &[]);
    assert!(ok, "report failed:\n{stderr}");
    let page = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
    (RemoveDir(dir), page)
}

/// The table of the machine during each round: load and steal per round, and a round whose
/// floor moved more than 30% from the median marked, with the note that says so.
#[test]
fn a_round_whose_floor_moved_is_marked_beside_its_load_and_steal() {
    let moved = floor_document(&[2.0e6, 2.1e6, 1.0e6, 2.0e6, 2.2e6], 0.2, 0);
    let steady = floor_document(&[2.0e6, 2.3e6, 1.8e6], 0.2, 0);
    let (_dir, page) = rendered("moved", &[("moved.json", &moved)]);
    let line = |round: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("| {round:>5} |")))
            .unwrap_or("")
            .to_owned()
    };
    // Round 3: 1.0 M against a median of 2.0 M.
    let third = line("3");
    assert!(
        third.contains("3.50") && third.contains("4.5") && third.contains("-50%"),
        "round 3 shows its load, steal and move:\n{page}"
    );
    assert!(third.contains("moved"), "round 3 must be marked:\n{page}");
    for round in ["1", "2", "4", "5"] {
        assert!(
            !line(round).contains("moved") && !line(round).is_empty(),
            "only round 3 moved:\n{page}"
        );
    }
    assert!(
        page.contains("in round 3 the reference row moved more than 30%"),
        "the note naming the round:\n{page}"
    );
    let (_dir, page) = rendered("steady", &[("steady.json", &steady)]);
    assert!(
        page.contains("steal %") && !page.contains("moved"),
        "a floor within 30% of its median marks nothing:\n{page}"
    );
}

/// `report --check` refuses a document whose start load was at least half the CPUs unless it
/// was measured with `--load`, and names it; a quiet one, or one measured with `--load`, passes.
#[test]
fn report_check_refuses_a_document_measured_busy() {
    let quiet = floor_document(&[2.0e6], 0.5, 0);
    let busy = floor_document(&[2.0e6], 1.5, 0);
    let loaded = floor_document(&[2.0e6], 3.0, 2);
    let check = |dir: &RemoveDir| {
        run_parent(
            &["report", "--check", "--dir", dir.0.to_str().unwrap()],
            &[],
        )
    };

    let (dir, _) = rendered("quiet", &[("quiet.json", &quiet), ("loaded.json", &loaded)]);
    let (ok, _, stderr) = check(&dir);
    assert!(
        ok,
        "a quiet document and one measured with --load pass:\n{stderr}"
    );

    let (dir, _) = rendered("busy", &[("quiet.json", &quiet), ("busy.json", &busy)]);
    let (ok, _, stderr) = check(&dir);
    assert!(
        !ok,
        "a document measured busy without --load must be refused"
    );
    assert!(
        stderr.contains("busy.json")
            && stderr.contains("1.50 on 2 CPUs")
            && stderr.contains("--load"),
        "the refusal names the document, its load and the way out:\n{stderr}"
    );
    assert!(!stderr.contains("quiet.json"), "{stderr}");
    assert!(
        !stderr.contains("differs"),
        "the page itself is current:\n{stderr}"
    );
}

/// Every round of a run records its load and the CPU time stolen while it ran; the run says
/// before it starts how long it will take, and a run that long prints progress lines on
/// standard error, never in the document on standard output.
#[test]
fn runs_record_steal_per_round_and_print_their_progress_on_stderr() {
    let name = unique("steal");
    let args = [
        "ping-pong",
        "--transport",
        "uds,floor",
        "--duration",
        "600ms",
        "--warmup",
        "10ms",
        "--rounds",
        "3",
        "--json",
        "--name",
        &name,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    assert!(ok, "ipc-parent {args:?} failed:\n{stderr}");
    let doc: Document = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is one document ({e}):\n{stdout}"));
    let c = &doc.run.round_conditions;
    assert_eq!(
        c.iter().map(|c| c.round).collect::<Vec<_>>(),
        [1, 2, 3],
        "{c:?}"
    );
    for c in c {
        let steal = c.steal_pct.unwrap_or(-1.0);
        assert!((0.0..=100.0).contains(&steal), "{c:?}");
        assert!(c.load_average >= 0.0 && c.seconds > 0.5, "{c:?}");
    }
    // 2 rows x 3 rounds of 0.6 s and a child's start: past the 3 s from which progress shows.
    let about = stderr.find("in all").unwrap_or(usize::MAX);
    let first = stderr.find("[progress]").unwrap_or(0);
    assert!(
        about < first,
        "the estimate comes before the progress:\n{stderr}"
    );
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("[progress]"))
        .collect();
    assert_eq!(progress.len(), 6, "one line per row and round:\n{stderr}");
    assert!(
        progress[2].contains("uds: round 2/3") && progress[2].contains("left"),
        "{progress:?}"
    );
    assert!(!stdout.contains("[progress]"));
    assert_nothing_left(&name);

    // A short run says how long it takes, and prints no progress.
    let (ok, _, stderr) = run_parent(
        &[
            "ping-pong",
            "--transport",
            "uds",
            "--duration",
            "50ms",
            "--warmup",
            "10ms",
            "--name",
            &name,
        ],
        &[],
    );
    assert!(ok && stderr.contains("in all"), "{stderr}");
    assert!(!stderr.contains("[progress]"), "{stderr}");
    assert_nothing_left(&name);
}

/// `--paired`: the rows take turns slice by slice within each round (A B A B ...), each slice
/// recorded, and the ratio table gives the spread of the ratios of slices run side by side.
#[test]
fn paired_slices_alternate_and_report_the_spread_of_their_ratios() {
    let name = unique("paired");
    let save = std::env::temp_dir().join(format!("{name}.json"));
    let save_s = save.to_string_lossy().into_owned();
    let args = [
        "ping-pong",
        "--transport",
        "shm,uds,floor",
        "--wait",
        "block",
        "--duration",
        "150ms",
        "--paired",
        "--slice",
        "50ms",
        "--warmup",
        "10ms",
        "--rounds",
        "2",
        "--name",
        &name,
        "--save",
        &save_s,
    ];
    let (ok, stdout, stderr) = run_parent(&args, &[]);
    let text = std::fs::read_to_string(&save).unwrap_or_default();
    let _ = std::fs::remove_file(&save);
    assert!(ok, "ipc-parent {args:?} failed:\n{stderr}");
    let doc: Document = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let p = ping_pong(&doc);
    assert_eq!(p.slice_s, Some(0.05));
    for r in &p.results {
        assert_eq!(r.figures.rounds.len(), 2, "{r:?}");
        for round in &r.figures.rounds {
            assert_eq!(
                round.slices.len(),
                3,
                "three slices of 50 ms in 150 ms: {round:?}"
            );
            assert!(round.slices.iter().all(|&x| x > 0.0), "{round:?}");
            let whole = round.round_trips as f64 / round.seconds;
            assert!((whole - round.rt_per_s).abs() < 1e-6 * whole, "{round:?}");
        }
    }
    // The children started in turn: every row once per slice, slice after slice.
    let order: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.split(" on ").nth(1))
        .filter_map(|n| n.split(&name).nth(1))
        .map(|n| n.trim_end_matches(".sock").to_owned())
        .collect();
    let expected: Vec<String> = (1..=2)
        .flat_map(|round| (0..3).map(move |slice| (round, slice)))
        .flat_map(|(round, slice)| {
            [
                format!("-block-r{round}s{slice}-shm"),
                format!("-r{round}s{slice}-uds"),
                format!("-r{round}s{slice}-floor"),
            ]
        })
        .collect();
    assert_eq!(order, expected, "{stderr}");
    assert!(
        stdout.contains("paired min")
            && stdout.contains("paired median")
            && stdout.contains("paired max"),
        "{stdout}"
    );
    let ratio = stdout
        .lines()
        .find(|l| l.starts_with("| shm (block) / floor"))
        .unwrap_or_default();
    assert_eq!(
        ratio.split('|').count(),
        9,
        "ratio, best, median, 3 paired, target: {ratio}"
    );
    refused(&[
        &["ping-pong", "--slice", "50ms"],
        &["ping-pong", "--paired", "--slice", "0s"],
    ]);
    assert_nothing_left(&name);
}

/// Every recipe of the justfile that measures says first whether it measures a debug or a
/// release build, and `compare` runs its debug and release rounds in turn.
#[test]
fn measuring_recipes_say_which_build_they_measure() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../justfile");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut recipes: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with(char::is_alphabetic) && line.contains(':') && !line.contains(":=") {
            recipes.push((
                line.split_whitespace().next().unwrap_or("").to_owned(),
                String::new(),
            ));
        } else if line.starts_with("    ") {
            if let Some((_, body)) = recipes.last_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    let measuring: Vec<&(String, String)> = recipes
        .iter()
        .filter(|(_, body)| {
            [
                "ping-pong",
                "sweep --",
                "stream --",
                "clients {{",
                "fanout {{",
            ]
            .iter()
            .any(|m| body.contains(&format!("ipc-parent {m}")))
        })
        .collect();
    assert!(measuring.len() >= 8, "{measuring:?}");
    for (name, body) in measuring {
        let says = body.contains("{{measures}}")
            || body.contains("measuring a release build")
            || body.contains("measuring a debug and a release build");
        assert!(
            says,
            "recipe {name} measures without saying which build:\n{body}"
        );
    }
    let compare = recipes
        .iter()
        .find(|(n, _)| n == "compare")
        .map(|(_, b)| b.as_str());
    let compare = compare.unwrap_or_default();
    assert!(
        compare.contains("for round in")
            && compare.contains("for mode in debug release")
            && compare.contains("--rounds 1"),
        "compare interleaves its rounds:\n{compare}"
    );
}
