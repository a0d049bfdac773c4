//! `report`: the results page, rendered from the saved documents of a folder (every `*.json`
//! but [`PUBLISHED`]) and the published figures in [`PUBLISHED`]. Each document gets a section:
//! its command, commit, date, machine and pinning, then its mode's tables and ratios (see
//! each mode's `tables.rs`), and beside the stream and the JSON ping-pong tables the published figures they
//! compare with. The page is a pure function of the files: `--check`
//! fails when the committed page differs from it.

pub(crate) mod bridge;
pub(crate) mod c_api;
pub(crate) mod chart;
pub(crate) mod compare;
pub(crate) mod python;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::parent::cli::ReportArgs;
use crate::parent::document::{ratio, Document, PingPong, Results, Stream};
use crate::parent::machine::busy;
use crate::parent::tables::{body, pinning, short_commit, whole, Table};
use crate::workload::size_label;

/// The file of published figures in the results folder.
pub const PUBLISHED: &str = "published.json";
/// The page, in the results folder.
pub const PAGE: &str = "README.md";

/// Figures published elsewhere, kept as published, that the page shows beside ours.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Published {
    /// Tables of one-way messages per second by size, shown beside the stream tables.
    #[serde(default)]
    pub stream: Vec<PublishedStream>,
    /// Ping-pong round trips per second, shown beside the JSON ping-pong tables.
    #[serde(default)]
    pub ping_pong: Vec<PublishedPingPong>,
}

/// A published streaming table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedStream {
    /// Where the figures come from.
    pub source: String,
    /// What was measured, how.
    pub what: String,
    /// The machine, as the source describes it.
    pub machine: String,
    /// The reference row the ratios are taken to (ours of the same name too).
    pub reference: String,
    /// Bytes per message of each column.
    pub sizes: Vec<usize>,
    pub rows: Vec<PublishedStreamRow>,
}

/// A row of a published streaming table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedStreamRow {
    /// The row's name in the source.
    pub published_as: String,
    /// Our transport that does the same (none: no counterpart).
    pub ours: Option<String>,
    /// Messages per second at each size.
    pub msgs_per_s: Vec<f64>,
}

/// Published ping-pong figures, one run per machine and build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedPingPong {
    pub source: String,
    pub what: String,
    /// Our transport the ratios are taken to.
    pub reference: String,
    pub runs: Vec<PublishedRun>,
}

/// One published run: a machine and a build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedRun {
    pub machine: String,
    /// `debug` or `release`: shown beside our documents of the same build.
    pub build: String,
    pub rows: Vec<PublishedPingPongRow>,
}

/// A row of a published ping-pong run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedPingPongRow {
    pub published_as: String,
    pub ours: Option<String>,
    pub rt_per_s: f64,
}

/// `ipc-parent report`.
pub(crate) fn report(args: &ReportArgs) -> anyhow::Result<()> {
    let page_path = args.dir.join(PAGE);
    let (page, docs) = render_dir(&args.dir)?;
    if args.check {
        let mut problems: Vec<String> = docs
            .iter()
            .filter_map(|(name, doc)| measured_busy(name, doc))
            .collect();
        if !problems.is_empty() {
            problems.insert(
                0,
                "a published document must be measured on a quiet machine:".to_owned(),
            );
        }
        let committed = std::fs::read_to_string(&page_path).unwrap_or_default();
        if committed != page {
            problems.push(format!(
                "{page_path:?} differs from what the documents in {:?} render: run `ipc-parent \
                 report` and commit the page",
                args.dir
            ));
        }
        if !problems.is_empty() {
            bail!("{}", problems.join("\n"));
        }
        eprintln!("[info] {page_path:?} is what the documents render");
        return Ok(());
    }
    std::fs::write(&page_path, page).with_context(|| format!("writing {page_path:?}"))?;
    eprintln!("[info] wrote {page_path:?}");
    Ok(())
}

/// Why `--check` refuses document `name`: it was measured on a machine whose load at the start
/// was at least half its CPUs, without `--load` (a run that means to measure a busy machine says
/// so with `--load N`, and its start load is taken before those processes start). None: it is
/// fine.
pub fn measured_busy(name: &str, doc: &Document) -> Option<String> {
    let run = &doc.run;
    (busy(run.load_average, run.machine.cores) && run.load == 0).then(|| {
        format!(
            "- {name}: measured at a load average of {:.2} on {} CPUs (at least half of them \
             busy) without --load, where spinning rows and the floor mean little: measure it \
             again on a quiet machine, or with --load N if a busy machine is what it shows",
            run.load_average, run.machine.cores
        )
    })
}

/// Reads the folder's documents (sorted by file name) and published figures, and renders the
/// page; returns it and the documents.
fn render_dir(dir: &Path) -> anyhow::Result<(String, Vec<(String, Document)>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {dir:?}"))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| {
        p.extension().is_some_and(|e| e == "json") && p.file_name().is_some_and(|n| n != PUBLISHED)
    });
    paths.sort();
    let docs = paths
        .iter()
        .map(|p| {
            let name = p
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            Ok((name, Document::read(p)?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let published_path = dir.join(PUBLISHED);
    let published = if published_path.exists() {
        let text = std::fs::read_to_string(&published_path)
            .with_context(|| format!("reading {published_path:?}"))?;
        serde_json::from_str(&text).with_context(|| format!("{published_path:?}"))?
    } else {
        Published::default()
    };
    Ok((page(&docs, &published), docs))
}

/// The modes in the order the page shows them.
const MODES: [&str; 8] = [
    "ping-pong",
    "sweep",
    "stream",
    "clients",
    "fanout",
    "python",
    "c-api",
    "bridge",
];

/// The page: a section per document, by mode and then by file name.
pub fn page(docs: &[(String, Document)], published: &Published) -> String {
    let mut out = String::from(
        "# Results\n\nGenerated by `ipc-parent report` from the documents in this folder: change \
         a document (or `published.json`), never this page, and run `ipc-parent report` again. \
         Figures from other machines differ: compare ratios within one run.\n",
    );
    if docs.is_empty() {
        out.push_str(
            "\nNo document yet: `ROUNDS=3 just results` measures them (on a quiet machine) and \
             renders this page.\n",
        );
    }
    for mode in MODES {
        for (name, doc) in docs.iter().filter(|(_, d)| d.results.mode() == mode) {
            out.push_str(&section(name, doc, published));
        }
    }
    out
}

fn section(name: &str, doc: &Document, published: &Published) -> String {
    let run = &doc.run;
    let m = &run.machine;
    let mut out = format!(
        "\n## {} (`{name}`)\n\n```sh\n{}\n```\n\n",
        title(doc),
        run.command
    );
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let busy_note = if busy(run.load_average, m.cores) {
        " (busy: spinning rows and the floor mean little)"
    } else {
        ""
    };
    let _ = write!(
        out,
        "- commit: `{}` (the build's)\n- date: {}\n- machine: {}, {} on {}, {}\n- build: {}\n\
         - {}\n- load average at the start: {:.2}{busy_note}; {} added (`--load`)\n\n",
        short_commit(&run.commit),
        run.date.replace('T', " ").replace('Z', " UTC"),
        m.cpu,
        plural(m.cores, "CPU"),
        plural(m.physical_cores, "core"),
        m.kernel,
        run.profile,
        pinning(run),
        run.load_average,
        if run.load == 1 {
            "1 busy process".to_owned()
        } else {
            format!("{} busy processes", run.load)
        },
    );
    out.push_str(&body(doc));
    match &doc.results {
        Results::Stream(s) => {
            for p in &published.stream {
                out.push_str(&beside_stream(s, p));
            }
        }
        Results::PingPong(p) if p.message == "json" => {
            for published in &published.ping_pong {
                out.push_str(&beside_ping_pong(p, &run.profile, published));
            }
        }
        _ => {}
    }
    out
}

fn title(doc: &Document) -> String {
    match &doc.results {
        Results::PingPong(p) => match p.size {
            Some(size) => format!("Ping-pong, raw {} messages", size_label(size)),
            None => format!("Ping-pong, {} messages", p.message),
        },
        Results::Sweep(_) => "Payload sweep".to_owned(),
        Results::Stream(_) => "One-way stream".to_owned(),
        Results::Clients(_) => "Clients against one server".to_owned(),
        Results::Fanout(_) => "Fan-out: one publisher, N subscribers".to_owned(),
        Results::Python(_) => "Python: the package against Python's IPC".to_owned(),
        Results::Bridge(_) => "Past one host: through two zenoh bridges".to_owned(),
        Results::CApi(_) => "C: seed 003's workloads against libshmlink".to_owned(),
    }
}

fn source_line(source: &str, what: &str, machine: Option<&str>) -> String {
    let machine = machine.map_or(String::new(), |m| format!("; machine: {m}"));
    format!("Published: {source}; {what}{machine}.\n\n")
}

/// The published streaming table and ours as ratios to the reference row, at the sizes both
/// have.
fn beside_stream(ours: &Stream, published: &PublishedStream) -> String {
    let reference = &published.reference;
    let columns: Vec<&PublishedStreamRow> = published
        .rows
        .iter()
        .filter(|r| r.ours.as_deref() != Some(reference.as_str()))
        .collect();
    let Some(reference_row) = published
        .rows
        .iter()
        .find(|r| r.ours.as_deref() == Some(reference.as_str()))
    else {
        return String::new();
    };
    let names: Vec<String> = columns
        .iter()
        .map(|r| match &r.ours {
            Some(o) if o != &r.published_as => format!(">{o} ({})", r.published_as),
            _ => format!(">{}", r.published_as),
        })
        .collect();
    let mut header = vec!["size", "figures"];
    header.extend(names.iter().map(String::as_str));
    let mut t = Table::new(&header);
    let ours_at = |transport: &str, size: usize| {
        ours.results
            .iter()
            .find(|r| r.size == size && r.row.transport == transport)
            .map(|r| r.msgs_per_s)
    };
    let cell = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.2}"));
    let mut any = false;
    for (i, &size) in published.sizes.iter().enumerate() {
        let Some(our_ref) = ours_at(reference, size) else {
            continue;
        };
        any = true;
        let their_ref = reference_row.msgs_per_s.get(i).copied().unwrap_or(0.0);
        let mut theirs = vec![size_label(size), "published".to_owned()];
        let mut here = vec![size_label(size), "here".to_owned()];
        for c in &columns {
            theirs.push(cell(c.msgs_per_s.get(i).and_then(|&x| ratio(x, their_ref))));
            here.push(cell(
                c.ours
                    .as_deref()
                    .and_then(|o| ours_at(o, size))
                    .and_then(|x| ratio(x, our_ref)),
            ));
        }
        t.row(theirs);
        t.row(here);
    }
    if !any {
        return String::new();
    }
    format!(
        "\n### Beside the published table\n\nMessages per second relative to {reference} at the \
         same size, best round here. {}{}",
        source_line(&published.source, &published.what, Some(&published.machine)),
        t.render()
    )
}

/// The published ping-pong runs of the same build beside our rows, each as round trips per
/// second and as a ratio to the reference row of its own run.
fn beside_ping_pong(ours: &PingPong, profile: &str, published: &PublishedPingPong) -> String {
    let runs: Vec<&PublishedRun> = published
        .runs
        .iter()
        .filter(|r| r.build == profile)
        .collect();
    if runs.is_empty() {
        return String::new();
    }
    let reference = &published.reference;
    let ours_best = |transport: &str| {
        ours.results
            .iter()
            .filter(|r| r.row.transport == transport)
            .map(|r| r.figures.best_rt_per_s)
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
    };
    let our_ref = ours_best(reference);
    let both = |rt: Option<f64>, reference: Option<f64>| match rt {
        Some(rt) => match reference.and_then(|r| ratio(rt, r)) {
            Some(x) => format!("{} ({x:.2})", whole(rt)),
            None => whole(rt),
        },
        None => "-".to_owned(),
    };
    let names: Vec<String> = runs
        .iter()
        .map(|r| format!(">{} ({})", r.machine, r.build))
        .chain([format!(">here ({profile}, best)")])
        .collect();
    let mut header = vec!["method"];
    header.extend(names.iter().map(String::as_str));
    let mut t = Table::new(&header);
    // The published methods, then our rows that they lack.
    let mut methods: Vec<(String, Option<String>)> = Vec::new();
    for row in runs.iter().flat_map(|r| &r.rows) {
        if !methods.iter().any(|(p, _)| p == &row.published_as) {
            methods.push((row.published_as.clone(), row.ours.clone()));
        }
    }
    for r in &ours.results {
        if !r.row.limit
            && !methods
                .iter()
                .any(|(_, o)| o.as_deref() == Some(r.row.transport.as_str()))
        {
            methods.push((r.row.label(), None));
        }
    }
    for (name, our_name) in &methods {
        let mut cells = vec![name.clone()];
        for run in &runs {
            let find = |f: &dyn Fn(&PublishedPingPongRow) -> bool| {
                run.rows.iter().find(|r| f(r)).map(|r| r.rt_per_s)
            };
            let theirs = find(&|r| &r.published_as == name);
            let their_ref = find(&|r| r.ours.as_deref() == Some(reference.as_str()));
            cells.push(both(theirs, their_ref));
        }
        let here = match our_name {
            Some(o) => ours_best(o),
            None => ours
                .results
                .iter()
                .find(|r| &r.row.label() == name)
                .map(|r| r.figures.best_rt_per_s),
        };
        cells.push(both(here, our_ref));
        t.row(cells);
    }
    let mut out = format!(
        "\n### Beside the published figures\n\nRound trips per second (in brackets: over \
         {reference} of the same column). {}",
        source_line(&published.source, &published.what, None)
    );
    out.push_str(&t.render());
    let _ = writeln!(
        out,
        "\nThe published machines are not this one: compare the ratios, not the figures."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream at two sizes: shm, pipe and its bare row, and the ring limit; pinned.
    const STREAM: &str = r#"{
      "run": {"command": "ipc-parent stream --sizes 128,4KiB --rounds 2 --pin 0,1",
              "commit": "0123456789abcdef0123456789abcdef01234567", "date": "2025-01-02T03:04:05Z",
              "profile": "release",
              "machine": {"cpu": "Test CPU", "cores": 2, "physical_cores": 1, "kernel": "Linux 6.1",
                          "online": "0-1", "topology": [
                            {"cpu": 0, "package": 0, "core": 0, "siblings": "0-1"},
                            {"cpu": 1, "package": 0, "core": 0, "siblings": "0-1"}]},
              "pinning": {"pinned": true, "parent": [0], "children": [1]},
              "load_average": 1.5, "load": 0, "rounds": 2, "warmup_s": 0.25,
              "round_conditions": [
                {"round": 1, "load_average": 1.5, "steal_pct": 2.25, "seconds": 3.0},
                {"round": 2, "load_average": 1.25, "steal_pct": null, "seconds": 3.0}]},
      "mode": "stream", "sizes": [128, 4096], "duration_s": 1.0, "count": 1000, "wait": "spin",
      "ring_size": 1048576, "posixmq": null,
      "results": [
        {"transport": "shm", "wait": "spin", "backend": "shm", "limit": false, "size": 128,
         "count": 1000, "rounds": [{"messages": 1000, "seconds": 0.001, "msgs_per_s": 1000000.0},
                                   {"messages": 1000, "seconds": 0.00125, "msgs_per_s": 800000.0}],
         "msgs_per_s": 1000000.0, "median_msgs_per_s": 900000.0, "mb_per_s": 128.0,
         "median_mb_per_s": 115.2, "ring_ratio": 0.5, "memcpy_ratio": null},
        {"transport": "pipe", "wait": null, "backend": "pipe", "limit": false, "size": 128,
         "count": 1000, "rounds": [{"messages": 1000, "seconds": 0.004, "msgs_per_s": 250000.0},
                                   {"messages": 1000, "seconds": 0.005, "msgs_per_s": 200000.0}],
         "msgs_per_s": 250000.0, "median_msgs_per_s": 225000.0, "mb_per_s": 32.0,
         "median_mb_per_s": 28.8, "ring_ratio": 0.125, "memcpy_ratio": null, "bare_ratio": 0.625},
        {"transport": "pipe-bare", "wait": null, "backend": "pipe", "limit": false, "size": 128,
         "count": 1000, "rounds": [{"messages": 1000, "seconds": 0.0025, "msgs_per_s": 400000.0},
                                   {"messages": 1000, "seconds": 0.0025, "msgs_per_s": 400000.0}],
         "msgs_per_s": 400000.0, "median_msgs_per_s": 400000.0, "mb_per_s": 51.2,
         "median_mb_per_s": 51.2, "ring_ratio": 0.2, "memcpy_ratio": null},
        {"transport": "ring", "wait": null, "backend": null, "limit": true, "size": 128,
         "count": 1000, "rounds": [{"messages": 1000, "seconds": 0.0005, "msgs_per_s": 2000000.0},
                                   {"messages": 1000, "seconds": 0.0005, "msgs_per_s": 2000000.0}],
         "msgs_per_s": 2000000.0, "median_msgs_per_s": 2000000.0, "mb_per_s": 256.0,
         "median_mb_per_s": 256.0, "ring_ratio": 1.0, "memcpy_ratio": null},
        {"transport": "shm", "wait": "spin", "backend": "shm", "limit": false, "size": 4096,
         "count": 1000, "rounds": [{"messages": 1000, "seconds": 0.002, "msgs_per_s": 500000.0},
                                   {"messages": 1000, "seconds": 0.002, "msgs_per_s": 500000.0}],
         "msgs_per_s": 500000.0, "median_msgs_per_s": 500000.0, "mb_per_s": 2048.0,
         "median_mb_per_s": 2048.0, "ring_ratio": null, "memcpy_ratio": null},
        {"transport": "pipe", "wait": null, "backend": "pipe", "limit": false, "size": 4096,
         "count": 1000, "rounds": [{"messages": 1000, "seconds": 0.01, "msgs_per_s": 100000.0},
                                   {"messages": 1000, "seconds": 0.008, "msgs_per_s": 125000.0}],
         "msgs_per_s": 125000.0, "median_msgs_per_s": 112500.0, "mb_per_s": 512.0,
         "median_mb_per_s": 460.8, "ring_ratio": null, "memcpy_ratio": null}]
    }"#;

    /// A JSON ping-pong, not pinned: shm waiting two ways, the reference, a socket, the floor.
    const PING_PONG: &str = r#"{
      "run": {"command": "ipc-parent", "commit": "unknown", "date": "2025-01-02T03:04:05Z",
              "profile": "release",
              "machine": {"cpu": "Test CPU", "cores": 1, "physical_cores": 1, "kernel": "Linux 6.1",
                          "online": "0", "topology": [{"cpu": 0, "package": 0, "core": 0, "siblings": "0"}]},
              "pinning": {"pinned": false, "parent": [0], "children": [0]},
              "load_average": 0.25, "load": 1, "rounds": 1, "warmup_s": 0.25},
      "mode": "ping-pong", "message": "json", "size": null, "duration_s": 2.0, "pace_s": 0.0,
      "ring_size": 1048576, "posixmq": null,
      "results": [
        {"transport": "shm", "wait": "block", "backend": "shm", "limit": false,
         "rounds": [{"round_trips": 600000, "seconds": 2.0, "rt_per_s": 300000.0}],
         "best_rt_per_s": 300000.0, "median_rt_per_s": 300000.0,
         "latency_ns": {"p50": 3000, "p99": 9000, "p999": 20000, "max": 1000000},
         "pct_of_floor": 10.0, "payload": null},
        {"transport": "shm", "wait": "spin", "backend": "shm", "limit": false,
         "rounds": [{"round_trips": 1200000, "seconds": 2.0, "rt_per_s": 600000.0}],
         "best_rt_per_s": 600000.0, "median_rt_per_s": 600000.0,
         "latency_ns": {"p50": 1500, "p99": 4000, "p999": 15000, "max": 900000},
         "pct_of_floor": 20.0, "payload": null},
        {"transport": "raw-sync", "wait": null, "backend": "raw-sync", "limit": false,
         "rounds": [{"round_trips": 800000, "seconds": 2.0, "rt_per_s": 400000.0}],
         "best_rt_per_s": 400000.0, "median_rt_per_s": 400000.0,
         "latency_ns": {"p50": 2300, "p99": 5600, "p999": 20000, "max": 800000},
         "pct_of_floor": 13.333333333333334, "payload": null},
        {"transport": "uds", "wait": null, "backend": "uds", "limit": false,
         "rounds": [{"round_trips": 150000, "seconds": 2.0, "rt_per_s": 75000.0}],
         "best_rt_per_s": 75000.0, "median_rt_per_s": 75000.0,
         "latency_ns": {"p50": 12000, "p99": 30000, "p999": 90000, "max": 2000000},
         "pct_of_floor": 2.5, "payload": null},
        {"transport": "floor", "wait": null, "backend": "floor", "limit": true,
         "rounds": [{"round_trips": 6000000, "seconds": 2.0, "rt_per_s": 3000000.0}],
         "best_rt_per_s": 3000000.0, "median_rt_per_s": 3000000.0,
         "latency_ns": {"p50": 330, "p99": 660, "p999": 2600, "max": 50000},
         "pct_of_floor": 100.0, "payload": null}]
    }"#;

    /// A published table with the reference row and one other, at one of the sizes above; and
    /// published ping-pong runs, one of another build.
    const PUBLISHED_FIXTURE: &str = r#"{
     "ping_pong": [{"source": "a Rust playground", "what": "JSON ping / pong", "reference": "raw-sync",
       "runs": [{"machine": "Laptop", "build": "release",
                 "rows": [{"published_as": "ipc-channel", "ours": "ipc-channel", "rt_per_s": 100000.0},
                          {"published_as": "via raw-sync", "ours": "raw-sync", "rt_per_s": 800000.0}]},
                {"machine": "Laptop", "build": "debug",
                 "rows": [{"published_as": "via raw-sync", "ours": "raw-sync", "rt_per_s": 60000.0}]}]}],
     "stream": [{
      "source": "a C benchmark", "what": "100 messages per size", "machine": "not stated",
      "reference": "pipe", "sizes": [128, 256],
      "rows": [{"published_as": "pipe", "ours": "pipe", "msgs_per_s": [2000.0, 1000.0]},
               {"published_as": "shm", "ours": "shm", "msgs_per_s": [500.0, 250.0]},
               {"published_as": "posixq", "ours": null, "msgs_per_s": [1000.0, 900.0]}]}]}"#;

    const GOLDEN: &str = r#"# Results

Generated by `ipc-parent report` from the documents in this folder: change a document (or `published.json`), never this page, and run `ipc-parent report` again. Figures from other machines differ: compare ratios within one run.

## Ping-pong, json messages (`b.json`)

```sh
ipc-parent
```

- commit: `unknown` (the build's)
- date: 2025-01-02 03:04:05 UTC
- machine: Test CPU, 1 CPU on 1 core, Linux 6.1
- build: release
- not pinned
- load average at the start: 0.25; 1 busy process added (`--load`)

json messages; round trips per second, best and median of 1 round(s); latency over all rounds

| transport     | backend  | best rt/s | median rt/s | p50 ns | p99 ns | p99.9 ns |    max ns | % floor |
| ------------- | -------- | --------: | ----------: | -----: | -----: | -------: | --------: | ------: |
| shm (block)   | shm      |   300,000 |     300,000 |  3,000 |  9,000 |   20,000 | 1,000,000 |    10.0 |
| shm (spin)    | shm      |   600,000 |     600,000 |  1,500 |  4,000 |   15,000 |   900,000 |    20.0 |
| raw-sync      | raw-sync |   400,000 |     400,000 |  2,300 |  5,600 |   20,000 |   800,000 |    13.3 |
| uds           | uds      |    75,000 |      75,000 | 12,000 | 30,000 |   90,000 | 2,000,000 |     2.5 |
| floor [limit] | floor    | 3,000,000 |   3,000,000 |    330 |    660 |    2,600 |    50,000 |   100.0 |

- floor [limit]: two cache lines bounced between the processes, no framing: the hardware's round trip

| ratio                                     | best / best | median per round | target |
| ----------------------------------------- | ----------: | ---------------: | ------ |
| shm (block) / floor                       |        0.10 |             0.10 |        |
| shm (block) / raw-sync                    |        0.75 |             0.75 |        |
| shm (block) / uds (best kernel transport) |        4.00 |             4.00 | >= 1   |
| shm (spin) / floor                        |        0.20 |             0.20 |        |
| shm (spin) / raw-sync                     |        1.50 |             1.50 |        |
| shm (spin) / uds (best kernel transport)  |        8.00 |             8.00 |        |
| shm (block) / shm (spin)                  |        0.50 |             0.50 |        |

The machine during each round: floor against its median over the rounds (this document recorded no load or steal per round).

| round | floor per s | floor vs median | mark |
| ----: | ----------: | --------------: | ---- |
|     1 |   3,000,000 |             +0% |      |

### Beside the published figures

Round trips per second (in brackets: over raw-sync of the same column). Published: a Rust playground; JSON ping / pong.

| method       | Laptop (release) | here (release, best) |
| ------------ | ---------------: | -------------------: |
| ipc-channel  |   100,000 (0.12) |                    - |
| via raw-sync |   800,000 (1.00) |       400,000 (1.00) |
| shm (block)  |                - |       300,000 (0.75) |
| shm (spin)   |                - |       600,000 (1.50) |
| uds          |                - |        75,000 (0.19) |

The published machines are not this one: compare the ratios, not the figures.

## One-way stream (`a.json`)

```sh
ipc-parent stream --sizes 128,4KiB --rounds 2 --pin 0,1
```

- commit: `0123456789ab` (the build's)
- date: 2025-01-02 03:04:05 UTC
- machine: Test CPU, 2 CPUs on 1 core, Linux 6.1
- build: release
- pinned: parent on CPU 0, children on CPU 1
- load average at the start: 1.50 (busy: spinning rows and the floor mean little); 0 busy processes added (`--load`)

one-way stream, ring 1 MiB per direction, shm waits spin: messages/s and MB/s (size x messages / s) until the receiver confirmed them all, best and median of 2 round(s); x ring / x memcpy: best over the limit row's at the same size; x bare: a framed kernel row's best over its bare row's (`<transport>-bare`: fixed-size messages, no framing, one system call per message on each side)

| size  | transport    | backend | messages | best msg/s | median msg/s | best MB/s | median MB/s | x ring | x memcpy | x bare |
| ----- | ------------ | ------- | -------: | ---------: | -----------: | --------: | ----------: | -----: | -------: | -----: |
| 128 B | shm (spin)   | shm     |    1,000 |  1,000,000 |      900,000 |       128 |         115 |  0.50x |        - |      - |
| 128 B | pipe         | pipe    |    1,000 |    250,000 |      225,000 |        32 |          29 |  0.12x |        - |  0.62x |
| 128 B | pipe-bare    | pipe    |    1,000 |    400,000 |      400,000 |        51 |          51 |  0.20x |        - |      - |
| 128 B | ring [limit] | -       |    1,000 |  2,000,000 |    2,000,000 |       256 |         256 |  1.00x |        - |      - |
| 4 KiB | shm (spin)   | shm     |    1,000 |    500,000 |      500,000 |     2,048 |       2,048 |      - |        - |      - |
| 4 KiB | pipe         | pipe    |    1,000 |    125,000 |      112,500 |       512 |         461 |      - |        - |      - |

| best msg/s   |     128 B |   4 KiB |
| ------------ | --------: | ------: |
| shm (spin)   | 1,000,000 | 500,000 |
| pipe         |   250,000 | 125,000 |
| pipe-bare    |   400,000 |       - |
| ring [limit] | 2,000,000 |       - |

| best MB/s    | 128 B | 4 KiB |
| ------------ | ----: | ----: |
| shm (spin)   |   128 | 2,048 |
| pipe         |    32 |   512 |
| pipe-bare    |    51 |     - |
| ring [limit] |   256 |     - |

- ring [limit]: the same shmlink ring (shmlink::ring::new, same capacity) between two threads of this process, checked as the child checks

| ratio                                                   | best / best | median per round | target |
| ------------------------------------------------------- | ----------: | ---------------: | ------ |
| shm (spin) / pipe-bare (best kernel transport) at 128 B |        2.50 |             2.25 |        |
| pipe / pipe-bare at 128 B                               |        0.62 |             0.56 | >= 0.8 |
| shm (spin) / pipe (best kernel transport) at 4 KiB      |        4.00 |             4.50 |        |

The machine during each round: the 1-minute load average at its start, the share of the CPUs' time stolen by other guests while it ran (`/proc/stat`), and ring 128 B against its median over the rounds.

| round | load at start | steal % | ring 128 B per s | ring 128 B vs median | mark |
| ----: | ------------: | ------: | ---------------: | -------------------: | ---- |
|     1 |          1.50 |     2.2 |        2,000,000 |                  +0% |      |
|     2 |          1.25 |       - |        2,000,000 |                  +0% |      |

### Beside the published table

Messages per second relative to pipe at the same size, best round here. Published: a C benchmark; 100 messages per size; machine: not stated.

| size  | figures   |  shm | posixq |
| ----- | --------- | ---: | -----: |
| 128 B | published | 0.25 |   0.50 |
| 128 B | here      | 4.00 |      - |
"#;

    #[test]
    fn documents_render_byte_for_byte() {
        let doc: Document = serde_json::from_str(STREAM).expect("the fixture is a document");
        let published: Published =
            serde_json::from_str(PUBLISHED_FIXTURE).expect("the fixture is published figures");
        let ping: Document = serde_json::from_str(PING_PONG).expect("the fixture is a document");
        // The page orders the sections by mode, then by file.
        let page = page(
            &[("a.json".to_owned(), doc), ("b.json".to_owned(), ping)],
            &published,
        );
        assert_eq!(page, GOLDEN, "the page rendered:\n{page}");
    }

    /// A fan-out at 8 subscribers: the topic, 8 channels and iceoryx2, one round.
    const FANOUT: &str = r#"{
      "run": {"command": "ipc-parent fanout 8 --sizes 64", "commit": "unknown",
              "date": "2025-01-02T03:04:05Z", "profile": "release",
              "machine": {"cpu": "Test CPU", "cores": 2, "physical_cores": 2, "kernel": "Linux 6.1",
                          "online": "0-1", "topology": []},
              "pinning": {"pinned": false, "parent": [0, 1], "children": [0, 1]},
              "load_average": 0.25, "load": 0, "rounds": 1, "warmup_s": 0.25,
              "round_conditions": [{"round": 1, "part": "8 subscribers", "load_average": 0.25,
                                    "steal_pct": 0.5, "seconds": 9.0}]},
      "mode": "fanout", "counts": [8], "sizes": [64], "count": null, "duration_s": 1.0,
      "ring_size": 1048576, "iceoryx2": "0.10.0",
      "skipped": [{"row": "shmlink-topic-spin", "subscribers": 8, "why": "9 processes on 2 CPUs"}],
      "results": [
        {"row": "shmlink-topic", "subscribers": 8, "size": 64,
         "rounds": [{"messages": 300000, "publisher_seconds": 1.0, "publisher_cpu_s": 0.1,
                     "published_per_s": 300000.0, "msgs_per_cpu_s": 3000000.0,
                     "subscriber_msgs_per_s": [300000.0], "median_subscriber_msgs_per_s": 300000.0,
                     "slowest_subscriber_msgs_per_s": 290000.0,
                     "latency_ns": {"p50": 2000, "p99": 9000, "p999": 10000, "max": 20000}}],
         "subscriber_msgs_per_s": {"median": 300000.0, "best": 300000.0},
         "slowest_subscriber_msgs_per_s": {"median": 290000.0, "best": 290000.0},
         "msgs_per_cpu_s": {"median": 3000000.0, "best": 3000000.0},
         "latency_ns": {"p50": 2000, "p99": 9000, "p999": 10000, "max": 20000}},
        {"row": "shmlink-channels", "subscribers": 8, "size": 64,
         "rounds": [{"messages": 100000, "publisher_seconds": 1.0, "publisher_cpu_s": 0.1,
                     "published_per_s": 100000.0, "msgs_per_cpu_s": 1000000.0,
                     "subscriber_msgs_per_s": [100000.0], "median_subscriber_msgs_per_s": 100000.0,
                     "slowest_subscriber_msgs_per_s": 90000.0,
                     "latency_ns": {"p50": 3000, "p99": 9000, "p999": 10000, "max": 20000}}],
         "subscriber_msgs_per_s": {"median": 100000.0, "best": 100000.0},
         "slowest_subscriber_msgs_per_s": {"median": 90000.0, "best": 90000.0},
         "msgs_per_cpu_s": {"median": 1000000.0, "best": 1000000.0},
         "latency_ns": {"p50": 3000, "p99": 9000, "p999": 10000, "max": 20000}},
        {"row": "iceoryx2", "subscribers": 8, "size": 64,
         "rounds": [{"messages": 100000, "publisher_seconds": 1.0, "publisher_cpu_s": 0.5,
                     "published_per_s": 100000.0, "msgs_per_cpu_s": 200000.0,
                     "subscriber_msgs_per_s": [100000.0], "median_subscriber_msgs_per_s": 100000.0,
                     "slowest_subscriber_msgs_per_s": 90000.0,
                     "latency_ns": {"p50": 8000, "p99": 9000, "p999": 10000, "max": 20000}}],
         "subscriber_msgs_per_s": {"median": 100000.0, "best": 100000.0},
         "slowest_subscriber_msgs_per_s": {"median": 90000.0, "best": 90000.0},
         "msgs_per_cpu_s": {"median": 200000.0, "best": 200000.0},
         "latency_ns": {"p50": 8000, "p99": 9000, "p999": 10000, "max": 20000}}]
    }"#;

    #[test]
    fn a_fanout_document_gets_its_section_after_the_clients_with_its_ratios() {
        let fanout: Document = serde_json::from_str(FANOUT).expect("the fixture is a document");
        let stream: Document = serde_json::from_str(STREAM).expect("the fixture is a document");
        let page = page(
            &[
                ("fanout.json".to_owned(), fanout),
                ("stream.json".to_owned(), stream),
            ],
            &Published::default(),
        );
        let stream_at = page.find("## One-way stream (`stream.json`)");
        let fanout_at = page.find("## Fan-out: one publisher, N subscribers (`fanout.json`)");
        assert!(
            stream_at.is_some() && fanout_at.is_some() && stream_at < fanout_at,
            "{page}"
        );
        for needle in [
            "ipc-parent fanout 8 --sizes 64",
            "| shmlink-topic / shmlink-channels, msg per publisher CPU-s, 8 subscribers, 64 B |",
            "one topic moves 3.00x at 64 B the messages per second of publisher CPU that 8 \
             channels do",
            "the topic's median one-way latency is 0.25x at 64 B iceoryx2's",
            "- shmlink-topic-spin skipped with 8 subscribers: 9 processes on 2 CPUs",
            "N + 1 processes sharing this machine's 2 CPUs (not pinned)",
            "|     1 | 8 subscribers |",
        ] {
            assert!(page.contains(needle), "{needle:?} missing from\n{page}");
        }
    }

    /// A bridge run, one round: the round trip through two bridges against zenoh and TCP, and
    /// the 64 B stream.
    const BRIDGE: &str = r#"{
      "run": {"command": "ipc-parent bridge --rounds 1", "commit": "unknown",
              "date": "2025-01-02T03:04:05Z", "profile": "release",
              "machine": {"cpu": "Test CPU", "cores": 2, "physical_cores": 2, "kernel": "Linux 6.1",
                          "online": "0-1", "topology": []},
              "pinning": {"pinned": false, "parent": [0, 1], "children": [0, 1]},
              "load_average": 0.25, "load": 0, "rounds": 1, "warmup_s": 0.25,
              "round_conditions": [{"round": 1, "load_average": 0.25, "steal_pct": 0.5,
                                    "seconds": 9.0}]},
      "mode": "bridge", "zenoh": "1.10.2", "duration_s": 1.0,
      "workloads": [
        {"name": "round-trip-64", "title": "round trip, 64 B", "kind": "ping-pong", "size": 64,
         "unit": "round trips/s", "results": [
           {"contender": "shmlink via two bridges", "rounds": [9000.0], "median": 9000.0, "best": 9000.0},
           {"contender": "zenoh", "rounds": [10000.0], "median": 10000.0, "best": 10000.0},
           {"contender": "tcp", "rounds": [20000.0], "median": 20000.0, "best": 20000.0}]},
        {"name": "stream-64", "title": "one-way stream, 64 B", "kind": "stream", "size": 64,
         "unit": "messages/s", "results": [
           {"contender": "shmlink via two bridges", "rounds": [2000000.0], "median": 2000000.0, "best": 2000000.0},
           {"contender": "zenoh", "rounds": [4000000.0], "median": 4000000.0, "best": 4000000.0}]}]
    }"#;

    #[test]
    fn a_bridge_document_gets_its_section_last_with_its_ratios_and_targets() {
        let bridge: Document = serde_json::from_str(BRIDGE).expect("the fixture is a document");
        let fanout: Document = serde_json::from_str(FANOUT).expect("the fixture is a document");
        let page = page(
            &[
                ("bridge.json".to_owned(), bridge),
                ("fanout.json".to_owned(), fanout),
            ],
            &Published::default(),
        );
        let fanout_at = page.find("(`fanout.json`)");
        let bridge_at = page.find("## Past one host: through two zenoh bridges (`bridge.json`)");
        assert!(
            fanout_at.is_some() && bridge_at.is_some() && fanout_at < bridge_at,
            "{page}"
        );
        for needle in [
            "ipc-parent bridge --rounds 1",
            "zenoh 1.10.2 over TCP on 127.0.0.1",
            "| zenoh                   | 10,000 | 10,000 |                                0.90x / 0.90x | 10,000 |",
            "| round trip 64 B: rate ≥ 1/1.3 of zenoh's (≤ 30% added) |  0.90x | 0.90x | yes          |",
            "| stream 64 B: ≥ 0.8x zenoh's put throughput             |  0.50x | 0.50x | no           |",
        ] {
            assert!(page.contains(needle), "{needle:?} missing from\n{page}");
        }
        assert!(
            !page.contains("stream 4 KiB: ≥"),
            "a target without figures: {page}"
        );
    }

    /// A C API run, one round: the 128 B stream and the ping-pong.
    const C_API: &str = r#"{
      "run": {"command": "ipc-parent c-api --rounds 1", "commit": "unknown",
              "date": "2025-01-02T03:04:05Z", "profile": "release",
              "machine": {"cpu": "Test CPU", "cores": 2, "physical_cores": 2, "kernel": "Linux 6.1",
                          "online": "0-1", "topology": []},
              "pinning": {"pinned": false, "parent": [0, 1], "children": [0, 1]},
              "load_average": 0.25, "load": 0, "rounds": 1, "warmup_s": 0.25,
              "round_conditions": [{"round": 1, "load_average": 0.25, "steal_pct": 0.5,
                                    "seconds": 9.0}]},
      "mode": "c-api", "compiler": "cc (Test) 12.2.0", "duration_s": 1.0,
      "workloads": [
        {"name": "stream-128", "title": "one-way stream, 128 B", "kind": "stream", "size": 128,
         "unit": "messages/s", "results": [
           {"contender": "C (libshmlink)", "rounds": [20000000.0], "median": 20000000.0, "best": 20000000.0},
           {"contender": "Rust (shmlink)", "rounds": [21000000.0], "median": 21000000.0, "best": 21000000.0},
           {"contender": "pipe (C)", "rounds": [1000000.0], "median": 1000000.0, "best": 1000000.0}]},
        {"name": "ping-pong-64", "title": "ping-pong, 64 B", "kind": "ping-pong", "size": 64,
         "unit": "round trips/s", "results": [
           {"contender": "C (libshmlink)", "rounds": [100000.0], "median": 100000.0, "best": 100000.0},
           {"contender": "Rust (shmlink)", "rounds": [125000.0], "median": 125000.0, "best": 125000.0}]}]
    }"#;

    #[test]
    fn a_c_api_document_gets_its_section_with_its_ratios_and_targets() {
        let c: Document = serde_json::from_str(C_API).expect("the fixture is a document");
        let page = page(&[("c-api.json".to_owned(), c)], &Published::default());
        for needle in [
            "## C: seed 003's workloads against libshmlink (`c-api.json`)",
            "C compiled by cc (Test) 12.2.0 (-O2) against libshmlink.a",
            "| stream 128 B: C ≥ 0.9x Rust                |  0.95x |  0.95x | yes          |",
            "| stream 128 B: C ≥ 5x a pipe                | 20.00x | 20.00x | yes          |",
            "| ping-pong 64 B: C's rate ≥ 1/1.1 of Rust's |  0.80x |  0.80x | no           |",
        ] {
            assert!(page.contains(needle), "{needle:?} missing from\n{page}");
        }
        assert!(
            !page.contains("stream 4 KiB: C"),
            "a target without figures: {page}"
        );
    }
}
