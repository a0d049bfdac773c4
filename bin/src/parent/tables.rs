//! A document as text: what every mode's tables are made of (a padded Markdown table, ratios,
//! figures), and which mode's tables a document gets (each mode's are in its folder). The tables
//! of a mode and the ratios its targets are stated in read the
//! same on standard output after a run and in the results page (`report`). Tables are Markdown
//! pipe tables padded to line up, so they read as well in a terminal as on a page. Nothing here
//! reads a clock or iterates a hash map: the same document always renders the same bytes.

use std::fmt::Write as _;

use super::document::{median, ratio, Document, Results, RowId, Run};
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

/// The tables, notes and ratios of a document's mode, then the machine during each round.
pub(crate) fn body(doc: &Document) -> String {
    let mut out = match &doc.results {
        Results::PingPong(p) => super::ping_pong::tables::tables(p),
        Results::Sweep(s) => super::ping_pong::sweep::tables(s),
        Results::Stream(s) => super::stream::tables::tables(s),
        Results::Clients(c) => super::clients::tables::tables(c),
        Results::Fanout(f) => super::fanout::tables::tables(f, &doc.run),
        Results::Python(p) => super::report::python::python(p),
        Results::Bridge(b) => super::report::bridge::bridge(b),
        Results::CApi(c) => super::report::c_api::c_api(c),
    };
    out.push_str(&rounds_table(&doc.run, &references(&doc.results)));
    out
}

/// The rows whose moves from round to round show the machine changing: the floor of a
/// ping-pong run, the ring of a stream at each size.
pub(crate) fn references(results: &Results) -> Vec<Reference> {
    match results {
        Results::PingPong(p) => p
            .results
            .iter()
            .filter(|r| r.row.limit && r.row.transport == "floor")
            .map(|r| Reference {
                name: "floor".to_owned(),
                rates: r.figures.rounds.iter().map(|x| x.rt_per_s).collect(),
            })
            .collect(),
        Results::Stream(s) => s
            .results
            .iter()
            .filter(|r| r.row.limit && r.row.transport == "ring")
            .map(|r| Reference {
                name: format!("ring {}", size_label(r.size)),
                rates: r.rounds.iter().map(|x| x.msgs_per_s).collect(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A Markdown pipe table, its columns padded to line up.
pub(crate) struct Table {
    header: Vec<String>,
    /// Right-aligned columns (figures).
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Whether no row was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

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

pub(crate) fn times(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{x:.2}x"))
}

pub(crate) fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// A ratio between two rows: best over best, and the median of the per-round ratios (the rows
/// ran in the same rounds, interleaved).
pub(crate) struct Ratio {
    pub(crate) what: String,
    pub(crate) best: Option<f64>,
    pub(crate) median: Option<f64>,
    pub(crate) target: Option<&'static str>,
    /// `--paired`: min, median and max of the ratios of slices that ran side by side.
    pub(crate) paired: Option<[f64; 3]>,
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
            paired: None,
        }
    }

    /// The same ratio taken slice by slice as well: `a` and `b` are the rows' slices of each
    /// round (`--paired`), slice `i` of one beside slice `i` of the other in the same round.
    pub(crate) fn paired(self, a: &[Vec<f64>], b: &[Vec<f64>]) -> Ratio {
        let mut each: Vec<f64> = a
            .iter()
            .zip(b)
            .flat_map(|(x, y)| x.iter().zip(y).filter_map(|(&x, &y)| ratio(x, y)))
            .collect();
        if each.is_empty() {
            return self;
        }
        let mid = median(&mut each);
        Ratio {
            paired: Some([each[0], mid, each[each.len() - 1]]),
            ..self
        }
    }
}

pub(crate) fn ratios_table(ratios: &[Ratio]) -> String {
    if ratios.is_empty() {
        return String::new();
    }
    let paired = ratios.iter().any(|r| r.paired.is_some());
    let mut columns = vec!["ratio", ">best / best", ">median per round"];
    if paired {
        columns.extend([">paired min", ">paired median", ">paired max"]);
    }
    columns.push("target");
    let mut t = Table::new(&columns);
    let two = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.2}"));
    for r in ratios {
        let mut cells = vec![r.what.clone(), two(r.best), two(r.median)];
        if paired {
            cells.extend((0..3).map(|i| two(r.paired.map(|p| p[i]))));
        }
        cells.push(r.target.unwrap_or("").to_owned());
        t.row(cells);
    }
    let note = if paired {
        "\npaired: each ratio taken from the two rows' slices of the same turn (`--paired`: the \
         rows took turns slice by slice, so both sides of a ratio ran at about the same time); \
         min, median and max over all slices of all rounds.\n"
    } else {
        ""
    };
    format!("\n{}{note}", t.render())
}

/// How far a round's reference row (the floor, the ring) may move from its median over the
/// rounds before the round is marked.
pub(crate) const MOVED: f64 = 0.30;

/// A reference row's rates, one per round: the floor of a ping-pong, the ring of a stream at
/// one size.
pub(crate) struct Reference {
    pub(crate) name: String,
    pub(crate) rates: Vec<f64>,
}

/// Each round's move of `r` from its median over the rounds (`0.2`: 20% faster).
fn moves(r: &Reference) -> Vec<f64> {
    let mut sorted = r.rates.clone();
    let mid = median(&mut sorted);
    r.rates
        .iter()
        .map(|&x| ratio(x, mid).map_or(0.0, |q| q - 1.0))
        .collect()
}

/// The rounds whose reference rows moved more than [`MOVED`] from their medians (from 1).
pub(crate) fn moved_rounds(references: &[Reference]) -> Vec<u32> {
    let moved: Vec<Vec<f64>> = references.iter().map(moves).collect();
    let n = moved.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .filter(|&i| {
            moved
                .iter()
                .any(|m| m.get(i).is_some_and(|x| x.abs() > MOVED))
        })
        .map(|i| i as u32 + 1)
        .collect()
}

/// The machine during each round: its load at the start, the CPU time stolen while it ran, and
/// how far the reference rows moved from their medians; a round where one moved more than
/// [`MOVED`] is marked, and a note says what that means. Empty for a document that recorded
/// neither.
pub(crate) fn rounds_table(run: &Run, references: &[Reference]) -> String {
    let conditions = &run.round_conditions;
    let moved: Vec<Vec<f64>> = references.iter().map(moves).collect();
    let n_refs = moved.iter().map(Vec::len).max().unwrap_or(0);
    if conditions.is_empty() && n_refs == 0 {
        return String::new();
    }
    let parts = conditions.iter().any(|c| c.part.is_some());
    let mut columns = vec![">round"];
    if parts {
        columns.push("part");
    }
    let recorded = !conditions.is_empty();
    if recorded {
        columns.extend([">load at start", ">steal %"]);
    }
    let reference_names: Vec<String> = references.iter().map(|r| r.name.clone()).collect();
    let one_reference = references.len() == 1;
    let rate_column = reference_names
        .first()
        .map(|n| format!(">{n} per s"))
        .unwrap_or_default();
    let move_column = match reference_names.first() {
        Some(n) if one_reference => format!(">{n} vs median"),
        Some(n) => format!(">{} vs median (widest)", n.split(' ').next().unwrap_or(n)),
        None => String::new(),
    };
    if one_reference {
        columns.push(&rate_column);
    }
    if !references.is_empty() {
        columns.push(&move_column);
        columns.push("mark");
    }
    let mut t = Table::new(&columns);
    let rows = conditions.len().max(n_refs);
    for i in 0..rows {
        let c = conditions.get(i);
        let round = c.map_or(i as u32 + 1, |c| c.round);
        let mut cells = vec![round.to_string()];
        if parts {
            cells.push(c.and_then(|c| c.part.clone()).unwrap_or_default());
        }
        if recorded {
            cells.push(c.map_or("-".to_owned(), |c| format!("{:.2}", c.load_average)));
            cells.push(
                c.and_then(|c| c.steal_pct)
                    .map_or("-".to_owned(), |s| format!("{s:.1}")),
            );
        }
        if !references.is_empty() {
            // The round's widest move over the reference rows (ping-pong rounds are listed once
            // each, so entry i is round i + 1).
            let widest = moved
                .iter()
                .filter_map(|m| m.get(round as usize - 1).copied())
                .max_by(|a, b| a.abs().total_cmp(&b.abs()));
            if one_reference {
                cells.push(
                    references[0]
                        .rates
                        .get(round as usize - 1)
                        .map_or("-".to_owned(), |&x| whole(x)),
                );
            }
            cells.push(widest.map_or("-".to_owned(), |x| format!("{:+.0}%", x * 100.0)));
            cells.push(
                if widest.is_some_and(|x| x.abs() > MOVED) {
                    "moved"
                } else {
                    ""
                }
                .to_owned(),
            );
        }
        t.row(cells);
    }
    let against = format!(
        "{} against {} median over the rounds",
        reference_names.join(", "),
        if one_reference { "its" } else { "each one's" }
    );
    let mut out = if recorded {
        format!(
            "\nThe machine during each round: the 1-minute load average at its start, the share \
             of the CPUs' time stolen by other guests while it ran (`/proc/stat`){}.\n\n{}",
            if references.is_empty() {
                String::new()
            } else {
                format!(", and {against}")
            },
            t.render()
        )
    } else {
        format!(
            "\nThe machine during each round: {against} (this document recorded no load or \
             steal per round).\n\n{}",
            t.render()
        )
    };
    let marked = moved_rounds(references);
    if !marked.is_empty() {
        let list: Vec<String> = marked.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "\nmoved: in round{} {} the reference row moved more than {:.0}% from its median \
             over the rounds: the machine itself changed under {} (another guest's load, where \
             the two processes landed), so {} figures and the ratios taken in {} say more \
             about the machine than about the rows.",
            if list.len() == 1 { "" } else { "s" },
            list.join(", "),
            MOVED * 100.0,
            if list.len() == 1 {
                "that round"
            } else {
                "those rounds"
            },
            if list.len() == 1 { "its" } else { "their" },
            if list.len() == 1 { "it" } else { "them" },
        );
    }
    out
}

/// Whether a row is a transport the kernel carries (its bare row too).
pub(crate) fn is_kernel(transport: &str) -> bool {
    let framed = framed_of(transport).unwrap_or(transport);
    framed.parse::<Kind>().is_ok_and(Kind::is_kernel)
}

/// Whether a row is a kernel transport's batch row (`pipe-batch`).
pub(crate) fn is_kernel_batch(transport: &str) -> bool {
    transport
        .strip_suffix("-batch")
        .and_then(|t| t.parse::<Kind>().ok())
        .is_some_and(Kind::is_kernel)
}

/// The framed row a bare row stands beside: `pipe-bare` beside `pipe`.
pub(crate) fn framed_of(transport: &str) -> Option<&str> {
    transport.strip_suffix("-bare")
}

pub(crate) fn mq_line(mq: &Option<MqLimits>) -> String {
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

pub(crate) fn limit_notes<'a>(rows: impl Iterator<Item = &'a RowId>) -> String {
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

/// The distinct row labels of a sized run, in the document's order.
pub(crate) fn labels<'a>(rows: impl Iterator<Item = &'a RowId>) -> Vec<String> {
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
pub(crate) fn matrix(
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
pub(crate) fn by_size<R>(
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
