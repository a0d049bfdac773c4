//! A document as text: the tables of its mode and the ratios its targets are stated in, the
//! same on standard output after a run and in the results page (`report`). Tables are Markdown
//! pipe tables padded to line up, so they read as well in a terminal as on a page. Nothing here
//! reads a clock or iterates a hash map: the same document always renders the same bytes.

use std::fmt::Write as _;

use super::document::{
    median, ratio, Clients, ClientsResult, Document, PingPong, PingPongResult, PythonBench,
    Results, RowId, Run, Stream, StreamResult, Sweep, SweepResult,
};
use crate::transport::posixmq::MqLimits;
use crate::transport::Kind;
use crate::workload::size_label;

/// The line a run prints first: the machine, the build, the commit, the pinning, the load.
pub(crate) fn run_line(run: &Run) -> String {
    let m = &run.machine;
    format!(
        "machine: {} ({} CPUs, {} cores), {}; build: {}; commit {}; {}; load average {:.2} at \
         the start, --load {}",
        m.cpu,
        m.cores,
        m.physical_cores,
        m.kernel,
        run.profile,
        short_commit(&run.commit),
        pinning(run),
        run.load_average,
        run.load
    )
}

/// `abcdef123456` of a full commit id (with `-dirty` kept).
pub(crate) fn short_commit(commit: &str) -> String {
    match commit.split_once('-') {
        Some((id, rest)) => format!("{}-{rest}", &id[..id.len().min(12)]),
        None => commit[..commit.len().min(12)].to_owned(),
    }
}

/// `pinned: parent on CPU 0, children on CPU 1`, or `not pinned` (in a clients run the parent
/// is the server and the children are the clients).
pub(crate) fn pinning(run: &Run) -> String {
    let p = &run.pinning;
    if !p.pinned {
        return "not pinned".to_owned();
    }
    let cpus = |list: &[usize]| {
        let names: Vec<String> = list.iter().map(usize::to_string).collect();
        format!(
            "CPU{} {}",
            if list.len() == 1 { "" } else { "s" },
            names.join(", ")
        )
    };
    format!(
        "pinned: parent on {}, children on {}",
        cpus(&p.parent),
        cpus(&p.children)
    )
}

/// What a run prints on standard output when it ends.
pub(crate) fn terminal(doc: &Document) -> String {
    let mut out = String::from("\n");
    out.push_str(&body(doc));
    out
}

/// The tables, notes and ratios of a document's mode.
pub(crate) fn body(doc: &Document) -> String {
    match &doc.results {
        Results::PingPong(p) => ping_pong(p),
        Results::Sweep(s) => sweep(s),
        Results::Stream(s) => stream(s),
        Results::Clients(c) => clients(c),
        Results::Python(p) => python(p),
    }
}

/// The Python benchmark: a table per workload (shmlink's first row against each contender,
/// as the ratio of medians and of bests), the codec measurement and the targets.
fn python(p: &PythonBench) -> String {
    let mut out = format!(
        "Python {}, JSON through {}; {} s per row and round, each row's peer a fresh process.\n\n",
        p.python, p.json_codec, p.duration_s
    );
    for w in &p.workloads {
        let _ = writeln!(out, "**{}** ({}):\n", w.title, w.unit);
        let ours = w.results.iter().find(|r| r.contender == "shmlink");
        let mut t = Table::new(&[
            "contender",
            ">median",
            ">best",
            ">shmlink ÷ it (median / best)",
            ">rounds",
        ]);
        for r in &w.results {
            let vs = match ours {
                Some(o) if r.contender != "shmlink" => format!(
                    "{} / {}",
                    times(ratio(o.median, r.median)),
                    times(ratio(o.best, r.best))
                ),
                _ => String::new(),
            };
            let rounds: Vec<String> = r.rounds.iter().map(|&v| whole(v)).collect();
            t.row(vec![
                r.contender.clone(),
                whole(r.median),
                whole(r.best),
                vs,
                rounds.join(" "),
            ]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    if !p.codec_round_trips_per_s.is_empty() {
        let codecs: Vec<String> = p
            .codec_round_trips_per_s
            .iter()
            .map(|(name, rate)| format!("{name} {}", whole(*rate)))
            .collect();
        let _ = writeln!(
            out,
            "JSON codec, encode + decode of the message per second in one process: {}.\n",
            codecs.join(", ")
        );
    }
    out.push_str(&python_targets(p));
    out
}

/// The targets, each met or missed by the medians (bests in brackets).
fn python_targets(p: &PythonBench) -> String {
    let find = |w: &str, c: &str| {
        p.workloads
            .iter()
            .find(|x| x.name == w)
            .and_then(|x| x.results.iter().find(|r| r.contender.starts_with(c)))
    };
    let mut t = Table::new(&["target", ">median", ">best", "met (median)"]);
    let mut at_least = |what: String, r: Option<(f64, f64)>, goal: f64| {
        if let Some((m, b)) = r {
            t.row(vec![
                what,
                format!("{m:.2}x"),
                format!("{b:.2}x"),
                if m >= goal { "yes" } else { "no" }.to_owned(),
            ]);
        }
    };
    let vs = |w: &str, c: &str| {
        let ours = find(w, "shmlink")?;
        let theirs = find(w, c)?;
        Some((
            ratio(ours.median, theirs.median)?,
            ratio(ours.best, theirs.best)?,
        ))
    };
    for (w, label) in [("json", "JSON ping-pong"), ("raw-64", "raw 64 B")] {
        for (c, goal) in [
            ("multiprocessing.Pipe", 5.0),
            ("pyzmq", 2.0),
            ("iceoryx2", 1.0),
        ] {
            at_least(format!("{label}: ≥ {goal}x {c}"), vs(w, c), goal);
        }
    }
    for (c, goal) in [("faster-fifo", 3.0), ("iceoryx2", 1.0)] {
        at_least(
            format!("stream 128 B: ≥ {goal}x {c}"),
            vs("stream-128", c),
            goal,
        );
    }
    // The Rust server's JSON round trip within 1.5x of Python <-> Python: its rate at least
    // two thirds of theirs.
    let rust = find("json", "shmlink, Python client").zip(find("json", "shmlink"));
    at_least(
        "JSON: Python client of a Rust server ≥ 1/1.5 of Python <-> Python".to_owned(),
        rust.and_then(|(r, o)| Some((ratio(r.median, o.median)?, ratio(r.best, o.best)?))),
        1.0 / 1.5,
    );
    if t.rows.is_empty() {
        return String::new();
    }
    format!(
        "Targets (shmlink's rate ÷ the other's):\n\n{}\n",
        t.render()
    )
}

/// A Markdown pipe table, its columns padded to line up.
pub(crate) struct Table {
    header: Vec<String>,
    /// Right-aligned columns (figures).
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns; a name starting with `>` is a right-aligned column.
    pub(crate) fn new(columns: &[&str]) -> Table {
        Table {
            header: columns
                .iter()
                .map(|c| c.trim_start_matches('>').to_owned())
                .collect(),
            right: columns.iter().map(|c| c.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .chain([&self.header[i]])
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(3)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, &w) in widths.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                if self.right[i] {
                    let _ = write!(s, " {cell:>w$} |");
                } else {
                    let _ = write!(s, " {cell:<w$} |");
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.header);
        out.push('|');
        for (i, &w) in widths.iter().enumerate() {
            if self.right[i] {
                let _ = write!(out, " {}: |", "-".repeat(w - 1));
            } else {
                let _ = write!(out, " {} |", "-".repeat(w));
            }
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// `1,234,567`: a figure rounded to a whole number.
pub(crate) fn whole(x: f64) -> String {
    let n = x.round();
    if !n.is_finite() {
        return "-".to_owned();
    }
    let digits = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 {
        out.insert(0, '-');
    }
    out
}

fn times(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{x:.2}x"))
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// A ratio between two rows: best over best, and the median of the per-round ratios (the rows
/// ran in the same rounds, interleaved).
pub(crate) struct Ratio {
    pub(crate) what: String,
    pub(crate) best: Option<f64>,
    pub(crate) median: Option<f64>,
    pub(crate) target: Option<&'static str>,
}

impl Ratio {
    /// `a` over `b` from their per-round rates.
    pub(crate) fn of(what: String, a: &[f64], b: &[f64]) -> Ratio {
        let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let mut per_round: Vec<f64> = a.iter().zip(b).filter_map(|(&x, &y)| ratio(x, y)).collect();
        Ratio {
            what,
            best: ratio(best(a), best(b)),
            median: (!per_round.is_empty()).then(|| median(&mut per_round)),
            target: None,
        }
    }
}

fn ratios_table(ratios: &[Ratio]) -> String {
    if ratios.is_empty() {
        return String::new();
    }
    let mut t = Table::new(&["ratio", ">best / best", ">median per round", "target"]);
    for r in ratios {
        t.row(vec![
            r.what.clone(),
            r.best.map_or("-".to_owned(), |x| format!("{x:.2}")),
            r.median.map_or("-".to_owned(), |x| format!("{x:.2}")),
            r.target.unwrap_or("").to_owned(),
        ]);
    }
    format!("\n{}", t.render())
}

/// Whether a row is a transport the kernel carries (its bare row too).
fn is_kernel(transport: &str) -> bool {
    let framed = framed_of(transport).unwrap_or(transport);
    framed.parse::<Kind>().is_ok_and(Kind::is_kernel)
}

/// Whether a row is a kernel transport's batch row (`pipe-batch`).
fn is_kernel_batch(transport: &str) -> bool {
    transport
        .strip_suffix("-batch")
        .and_then(|t| t.parse::<Kind>().ok())
        .is_some_and(Kind::is_kernel)
}

/// The framed row a bare row stands beside: `pipe-bare` beside `pipe`.
fn framed_of(transport: &str) -> Option<&str> {
    transport.strip_suffix("-bare")
}

fn mq_line(mq: &Option<MqLimits>) -> String {
    let Some(mq) = mq else { return String::new() };
    let show = |v: Option<usize>| v.map_or("?".to_owned(), |v| v.to_string());
    format!(
        "\nposixmq: /proc/sys/fs/mqueue/msgsize_max {}, msg_max {}; queues of {} messages of {} \
         bytes, larger messages in fragments\n",
        show(mq.msgsize_max),
        show(mq.msg_max),
        mq.maxmsg,
        mq.msgsize
    )
}

fn limit_notes<'a>(rows: impl Iterator<Item = &'a RowId>) -> String {
    let mut out = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for row in rows.filter(|r| r.limit) {
        if seen.contains(&row.transport.as_str()) {
            continue;
        }
        seen.push(&row.transport);
        let note = match row.transport.as_str() {
            "floor" => "two cache lines bounced between the processes, no framing: the hardware's round trip",
            "serde" => "the JSON work of one round trip (serialise ping, decode, serialise pong, decode) in one process, no IPC",
            "memcpy" => "the copies of the messages in one process (twice per round trip in a sweep, once per message in a stream), no check",
            "ring" => "the same shmlink ring (shmlink::ring::new, same capacity) between two threads of this process, checked as the child checks",
            _ => continue,
        };
        let _ = writeln!(out, "- {} [limit]: {note}", row.transport);
    }
    if out.is_empty() {
        out
    } else {
        format!("\n{out}")
    }
}

// ---------------------------------------------------------------------------------------------
// ping-pong

fn ping_pong(p: &PingPong) -> String {
    let rounds = p.results.first().map_or(0, |r| r.figures.rounds.len());
    let mut out = format!(
        "{} messages{}; round trips per second, best and median of {rounds} round(s); \
         latency over all rounds\n\n",
        p.message,
        p.size
            .map_or(String::new(), |s| format!(" of {}", size_label(s))),
    );
    let raw = p.results.iter().any(|r| r.payload.is_some());
    let mut columns = vec![
        "transport",
        "backend",
        ">best rt/s",
        ">median rt/s",
        ">p50 ns",
        ">p99 ns",
        ">p99.9 ns",
        ">max ns",
        ">% floor",
    ];
    if raw {
        columns.push(">best MB/s");
    }
    let mut t = Table::new(&columns);
    // Transports first, then the limits.
    let ordered = p
        .results
        .iter()
        .filter(|r| !r.row.limit)
        .chain(p.results.iter().filter(|r| r.row.limit));
    for r in ordered {
        let f = &r.figures;
        let mut cells = vec![
            r.row.label(),
            r.row.backend.clone().unwrap_or_else(|| "-".to_owned()),
            whole(f.best_rt_per_s),
            whole(f.median_rt_per_s),
            whole(f.latency_ns.p50 as f64),
            whole(f.latency_ns.p99 as f64),
            whole(f.latency_ns.p999 as f64),
            whole(f.latency_ns.max as f64),
            r.pct_of_floor.map_or("-".to_owned(), |x| format!("{x:.1}")),
        ];
        if raw {
            cells.push(
                r.payload
                    .as_ref()
                    .map_or("-".to_owned(), |p| whole(p.mb_per_s)),
            );
        }
        t.row(cells);
    }
    out.push_str(&t.render());
    out.push_str(&limit_notes(p.results.iter().map(|r| &r.row)));
    out.push_str(&mq_line(&p.posixmq));
    out.push_str(&ratios_table(&ping_pong_ratios(&p.results)));
    out
}

fn rates(r: &PingPongResult) -> Vec<f64> {
    r.figures.rounds.iter().map(|x| x.rt_per_s).collect()
}

/// shm against the floor, the reference method (raw-sync), the best kernel transport, and
/// Block against Spin.
fn ping_pong_ratios(results: &[PingPongResult]) -> Vec<Ratio> {
    let find = |name: &str| results.iter().find(|r| r.row.transport == name);
    let shm: Vec<&PingPongResult> = results
        .iter()
        .filter(|r| r.row.transport == "shm")
        .collect();
    let best_kernel = results
        .iter()
        .filter(|r| is_kernel(&r.row.transport))
        .max_by(|a, b| a.figures.best_rt_per_s.total_cmp(&b.figures.best_rt_per_s));
    let mut out = Vec::new();
    for s in &shm {
        let label = s.row.label();
        for other in ["floor", "raw-sync"] {
            if let Some(o) = find(other) {
                out.push(Ratio::of(
                    format!("{label} / {other}"),
                    &rates(s),
                    &rates(o),
                ));
            }
        }
        if let Some(k) = best_kernel {
            let what = format!("{label} / {} (best kernel transport)", k.row.transport);
            out.push(Ratio {
                target: (s.row.wait.as_deref() == Some("block")).then_some(">= 1"),
                ..Ratio::of(what, &rates(s), &rates(k))
            });
        }
    }
    let wait = |w: &str| shm.iter().find(|r| r.row.wait.as_deref() == Some(w));
    if let (Some(block), Some(spin)) = (wait("block"), wait("spin")) {
        out.push(Ratio::of(
            "shm (block) / shm (spin)".to_owned(),
            &rates(block),
            &rates(spin),
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// sweep and stream: rows by size

/// The distinct row labels of a sized run, in the document's order.
fn labels<'a>(rows: impl Iterator<Item = &'a RowId>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        let label = r.label();
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out
}

/// Rows down, sizes across: one figure per cell.
fn matrix(
    title: &str,
    rows: &[String],
    sizes: &[usize],
    cell: impl Fn(&str, usize) -> Option<f64>,
) -> String {
    let size_names: Vec<String> = sizes
        .iter()
        .map(|&s| format!(">{}", size_label(s)))
        .collect();
    let mut columns = vec![title];
    columns.extend(size_names.iter().map(String::as_str));
    let mut t = Table::new(&columns);
    for label in rows {
        let mut cells = vec![label.clone()];
        cells.extend(
            sizes
                .iter()
                .map(|&s| cell(label, s).map_or("-".to_owned(), whole)),
        );
        t.row(cells);
    }
    format!("\n{}", t.render())
}

/// A table of results by size: for every size, its rows in the document's order, each the size,
/// the row's label and backend, then `cells`.
fn by_size<R>(
    columns: &[&str],
    sizes: &[usize],
    results: &[R],
    id: impl Fn(&R) -> (usize, &RowId),
    cells: impl Fn(&R) -> Vec<String>,
) -> Table {
    let mut all = vec!["size", "transport", "backend"];
    all.extend_from_slice(columns);
    let mut t = Table::new(&all);
    for &size in sizes {
        for r in results.iter().filter(|r| id(r).0 == size) {
            let row = id(r).1;
            let mut line = vec![
                size_label(size),
                row.label(),
                row.backend.clone().unwrap_or_else(|| "-".to_owned()),
            ];
            line.extend(cells(r));
            t.row(line);
        }
    }
    t
}

fn sweep(s: &Sweep) -> String {
    let rounds = s.results.first().map_or(0, |r| r.figures.rounds.len());
    let mut out = format!(
        "payload throughput, ring {} per direction: MB/s with both directions counted (2 x size \
         x round trips / s), best and median of {rounds} round(s); x memcpy: best MB/s over the \
         memcpy row's\n\n",
        size_label(s.ring_size)
    );
    let t = by_size(
        &[
            ">best MB/s",
            ">median MB/s",
            ">x memcpy",
            ">p50 us",
            ">p99 us",
        ],
        &s.sizes,
        &s.results,
        |r| (r.size, &r.row),
        |r| {
            vec![
                whole(r.mb_per_s),
                whole(r.median_mb_per_s),
                times(r.memcpy_ratio),
                us(r.figures.latency_ns.p50),
                us(r.figures.latency_ns.p99),
            ]
        },
    );
    out.push_str(&t.render());
    let find = |label: &str, size: usize| {
        s.results
            .iter()
            .find(|r| r.size == size && r.row.label() == label)
    };
    out.push_str(&matrix(
        "best MB/s",
        &labels(s.results.iter().map(|r| &r.row)),
        &s.sizes,
        |label, size| find(label, size).map(|r| r.mb_per_s),
    ));
    out.push_str(&limit_notes(s.results.iter().map(|r| &r.row)));
    out.push_str(&mq_line(&s.posixmq));
    let mut ratios = Vec::new();
    for &size in &s.sizes {
        let at: Vec<&SweepResult> = s.results.iter().filter(|r| r.size == size).collect();
        // At one size, MB/s and round trips per second are in the same proportion.
        let mb =
            |r: &SweepResult| -> Vec<f64> { r.figures.rounds.iter().map(|x| x.rt_per_s).collect() };
        let best_kernel = at
            .iter()
            .filter(|r| is_kernel(&r.row.transport))
            .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
        for shm in at.iter().filter(|r| r.row.transport == "shm") {
            for other in at.iter().filter(|r| r.row.transport == "memcpy") {
                ratios.push(Ratio::of(
                    format!("{} / memcpy at {}", shm.row.label(), size_label(size)),
                    &mb(shm),
                    &mb(other),
                ));
            }
            if let Some(k) = best_kernel {
                ratios.push(Ratio::of(
                    format!(
                        "{} / {} (best kernel transport) at {}",
                        shm.row.label(),
                        k.row.transport,
                        size_label(size)
                    ),
                    &mb(shm),
                    &mb(k),
                ));
            }
        }
    }
    out.push_str(&ratios_table(&ratios));
    out
}

fn stream(s: &Stream) -> String {
    let rounds = s.results.first().map_or(0, |r| r.rounds.len());
    let mut out = format!(
        "one-way stream, ring {} per direction, shm waits {}: messages/s and MB/s (size x \
         messages / s) until the receiver confirmed them all, best and median of {rounds} \
         round(s); x ring / x memcpy: best over the limit row's at the same size; x bare: a \
         framed kernel row's best over its bare row's (`<transport>-bare`: fixed-size \
         messages, no framing, one system call per message on each side){}\n\n",
        size_label(s.ring_size),
        s.wait,
        if s.results
            .iter()
            .any(|r| r.row.transport.ends_with("-batch"))
        {
            "; `<transport>-batch`: the same messages 64 per call (shm: `send_batch` / \
             `recv_batch`, each message framed; a kernel stream: one `write` of the 64 back to \
             back, `read`s of all there is)"
        } else {
            ""
        }
    );
    let t = by_size(
        &[
            ">messages",
            ">best msg/s",
            ">median msg/s",
            ">best MB/s",
            ">median MB/s",
            ">x ring",
            ">x memcpy",
            ">x bare",
        ],
        &s.sizes,
        &s.results,
        |r| (r.size, &r.row),
        |r| {
            vec![
                whole(r.count as f64),
                whole(r.msgs_per_s),
                whole(r.median_msgs_per_s),
                whole(r.mb_per_s),
                whole(r.median_mb_per_s),
                times(r.ring_ratio),
                times(r.memcpy_ratio),
                times(r.bare_ratio),
            ]
        },
    );
    out.push_str(&t.render());
    let rows = labels(s.results.iter().map(|r| &r.row));
    let find = |label: &str, size: usize| {
        s.results
            .iter()
            .find(|r| r.size == size && r.row.label() == label)
    };
    out.push_str(&matrix("best msg/s", &rows, &s.sizes, |label, size| {
        find(label, size).map(|r| r.msgs_per_s)
    }));
    out.push_str(&matrix("best MB/s", &rows, &s.sizes, |label, size| {
        find(label, size).map(|r| r.mb_per_s)
    }));
    out.push_str(&limit_notes(s.results.iter().map(|r| &r.row)));
    out.push_str(&mq_line(&s.posixmq));
    out.push_str(&ratios_table(&stream_ratios(s)));
    out
}

fn stream_rates(r: &StreamResult) -> Vec<f64> {
    r.rounds.iter().map(|x| x.msgs_per_s).collect()
}

/// Per size: shm over the best kernel row (framed or bare), shm's batch row over the best kernel
/// batch row, and every framed kernel row over its bare row.
fn stream_ratios(s: &Stream) -> Vec<Ratio> {
    let mut out = Vec::new();
    for &size in &s.sizes {
        let at: Vec<&StreamResult> = s.results.iter().filter(|r| r.size == size).collect();
        // shm against the kernel rows of its own kind: one by one, and in batches.
        type Theirs = fn(&str) -> bool;
        let against: [(&str, Theirs, &str); 2] = [
            ("shm", is_kernel, "best kernel transport"),
            ("shm-batch", is_kernel_batch, "best kernel batch"),
        ];
        for (ours, theirs, what) in against {
            let best = at
                .iter()
                .filter(|r| theirs(&r.row.transport))
                .max_by(|a, b| a.msgs_per_s.total_cmp(&b.msgs_per_s));
            let Some(k) = best else { continue };
            for shm in at.iter().filter(|r| r.row.transport == ours) {
                out.push(Ratio::of(
                    format!(
                        "{} / {} ({what}) at {}",
                        shm.row.label(),
                        k.row.transport,
                        size_label(size)
                    ),
                    &stream_rates(shm),
                    &stream_rates(k),
                ));
            }
        }
        for bare in &at {
            let Some(framed) = framed_of(&bare.row.transport) else {
                continue;
            };
            if let Some(f) = at.iter().find(|r| r.row.transport == framed) {
                out.push(Ratio {
                    target: Some(">= 0.8"),
                    ..Ratio::of(
                        format!("{framed} / {} at {}", bare.row.transport, size_label(size)),
                        &stream_rates(f),
                        &stream_rates(bare),
                    )
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// clients

fn clients(c: &Clients) -> String {
    let rounds = c.results.first().map_or(0, |r| r.rounds.len());
    let timed = match c.count {
        Some(n) => format!("{n} timed round trips per client"),
        None => format!("{} s of timed round trips per client", c.duration_s),
    };
    let mut out = format!(
        "N clients against one server, raw messages of {}, {timed}, shm clients wait {}, ring {} \
         per direction: round trips per second of all clients together, median and best of \
         {rounds} round(s); client p99: the median of the clients' p99s and the worst client's \
         p99, each the median (and the best) over the rounds, in us\n\n",
        size_label(c.size),
        c.wait,
        size_label(c.ring_size)
    );
    let mut t = Table::new(&[
        ">clients",
        "row",
        ">round trips",
        ">median rt/s",
        ">best rt/s",
        ">p99 median (best)",
        ">p99 worst (best)",
    ]);
    for r in &c.results {
        let total: u64 = r.rounds.iter().map(|x| x.total.round_trips).sum();
        let mb = |x: &super::document::MedianBest| format!("{} ({})", us(x.median), us(x.best));
        t.row(vec![
            r.clients.to_string(),
            r.row.clone(),
            whole(total as f64),
            whole(r.median_rt_per_s),
            whole(r.best_rt_per_s),
            mb(&r.p99_median_client_ns),
            mb(&r.p99_worst_client_ns),
        ]);
    }
    out.push_str(&t.render());
    out.push_str("\nThe plain row runs with one client only.\n");
    out.push_str(&ratios_table(&clients_ratios(c)));
    out
}

/// A ratio of two clients rows the benchmark states a target in.
struct ClientsPair {
    a: &'static str,
    b: &'static str,
    /// The ratio of round-trip times (b's rate over a's) rather than of rates.
    time: bool,
    /// The target, and the client count it is stated for (none: every count).
    target: Option<(&'static str, Option<usize>)>,
}

const CLIENTS_PAIRS: [ClientsPair; 5] = [
    ClientsPair {
        a: "shm selector",
        b: "shm plain",
        time: false,
        target: Some((">= 0.9", None)),
    },
    ClientsPair {
        a: "shm async",
        b: "shm plain",
        time: true,
        target: Some(("<= 1.5", None)),
    },
    ClientsPair {
        a: "shm selector",
        b: "uds poll",
        time: false,
        target: Some((">= 3", Some(4))),
    },
    ClientsPair {
        a: "shm threads",
        b: "uds threads",
        time: false,
        target: None,
    },
    ClientsPair {
        a: "shm selector",
        b: "ipc-channel select",
        time: false,
        target: None,
    },
];

/// The ratios the targets of the clients benchmark are stated in.
fn clients_ratios(c: &Clients) -> Vec<Ratio> {
    let rates =
        |r: &ClientsResult| -> Vec<f64> { r.rounds.iter().map(|x| x.total.rt_per_s).collect() };
    let mut out = Vec::new();
    for &n in &c.counts {
        let find = |row: &str| c.results.iter().find(|r| r.row == row && r.clients == n);
        for pair in &CLIENTS_PAIRS {
            let (Some(x), Some(y)) = (find(pair.a), find(pair.b)) else {
                continue;
            };
            let what = format!(
                "{} / {}, {}, {n} client{}",
                pair.a,
                pair.b,
                if pair.time { "round-trip time" } else { "rt/s" },
                if n == 1 { "" } else { "s" }
            );
            let r = if pair.time {
                Ratio::of(what, &rates(y), &rates(x))
            } else {
                Ratio::of(what, &rates(x), &rates(y))
            };
            out.push(Ratio {
                target: pair
                    .target
                    .filter(|(_, at)| at.is_none_or(|at| at == n))
                    .map(|(t, _)| t),
                ..r
            });
        }
    }
    out
}
