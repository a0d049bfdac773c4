//! `chart`: SVG bar charts of a result document.

use std::path::Path;

use anyhow::{anyhow, bail};

use crate::parent::document::{BridgeBench, CApiBench, Document, PythonBench, Results};
use crate::parent::tables::short_commit;
use crate::workload::size_label;

pub(crate) fn chart(input: &Path, output: &Path) -> anyhow::Result<()> {
    let doc = Document::read(input)?;
    let sized = |sizes: &[usize]| sizes.iter().map(|&s| size_label(s)).collect::<Vec<_>>();
    let (what, y_desc) = match &doc.results {
        Results::PingPong(p) => (
            format!("ping-pong round trips / s, {} messages", p.message),
            "best round trips per second (log scale)",
        ),
        Results::Sweep(s) => (
            format!(
                "payload throughput, MB/s both directions, ring {}",
                size_label(s.ring_size)
            ),
            "best MB/s, both directions (log scale)",
        ),
        Results::Stream(s) => (
            format!(
                "one-way stream, messages / s, ring {}",
                size_label(s.ring_size)
            ),
            "best messages per second (log scale)",
        ),
        Results::Clients(c) => (
            format!("N clients against one server, {} B messages", c.size),
            "best round trips per second, all clients (log scale)",
        ),
        Results::Fanout(f) => (
            format!(
                "fan-out: one publisher, N subscribers, {} messages",
                size_label(chart_size(&f.sizes))
            ),
            "median subscriber's messages per second, best round (log scale)",
        ),
        Results::Python(p) => (
            format!("Python {}: shmlink against Python's IPC", p.python),
            "median round trips (ping-pong) or messages (stream) / s (log scale)",
        ),
        Results::Bridge(b) => (
            format!(
                "through two zenoh {} bridges, against zenoh alone and TCP",
                b.zenoh
            ),
            "median round trips (round trip) or messages (stream) / s (log scale)",
        ),
        Results::CApi(_) => (
            "seed 003 in C against libshmlink, beside Rust and a pipe".to_owned(),
            "median messages (stream) or round trips (ping-pong) / s (log scale)",
        ),
    };
    let run = &doc.run;
    let title = format!(
        "{what} ({} build) - {} - commit {}, {}, load {:.2}{}",
        run.profile,
        run.machine.cpu,
        short_commit(&run.commit),
        run.date.split('T').next().unwrap_or(&run.date),
        run.load_average,
        if run.load > 0 {
            format!(" + --load {}", run.load)
        } else {
            String::new()
        }
    );
    // (bar, group, value) of every result.
    let (groups, bars): (Vec<String>, Vec<(String, usize, f64)>) = match &doc.results {
        Results::PingPong(p) => {
            let bars = p.results.iter().map(|r| {
                let label = match &r.row.backend {
                    Some(b) if b != &r.row.transport => format!("{} via {b}", r.row.label()),
                    _ => r.row.label(),
                };
                (label, 0, r.figures.best_rt_per_s)
            });
            return single_chart(output, &title, y_desc, bars.collect());
        }
        Results::Sweep(s) => (
            sized(&s.sizes),
            s.results
                .iter()
                .map(|r| (r.row.label(), index(&s.sizes, r.size), r.mb_per_s))
                .collect(),
        ),
        Results::Stream(s) => (
            sized(&s.sizes),
            s.results
                .iter()
                .map(|r| (r.row.label(), index(&s.sizes, r.size), r.msgs_per_s))
                .collect(),
        ),
        Results::Python(PythonBench { workloads, .. })
        | Results::Bridge(BridgeBench { workloads, .. })
        | Results::CApi(CApiBench { workloads, .. }) => (
            workloads.iter().map(|w| w.title.clone()).collect(),
            workloads
                .iter()
                .enumerate()
                .flat_map(|(i, w)| {
                    w.results
                        .iter()
                        .map(move |r| (r.contender.clone(), i, r.median))
                })
                .collect(),
        ),
        Results::Fanout(f) => {
            let size = chart_size(&f.sizes);
            (
                f.counts
                    .iter()
                    .map(|&n| format!("{n} subscriber{}", if n == 1 { "" } else { "s" }))
                    .collect(),
                f.results
                    .iter()
                    .filter(|r| r.size == size)
                    .map(|r| {
                        (
                            r.row.clone(),
                            index(&f.counts, r.subscribers),
                            r.subscriber_msgs_per_s.best,
                        )
                    })
                    .collect(),
            )
        }
        Results::Clients(c) => (
            c.counts.iter().map(|n| format!("{n} clients")).collect(),
            c.results
                .iter()
                .map(|r| (r.row.clone(), index(&c.counts, r.clients), r.best_rt_per_s))
                .collect(),
        ),
    };
    grouped_chart(output, &title, y_desc, &groups, &bars)
}

/// The size a fan-out chart shows: 64 B when it was measured, else the smallest.
fn chart_size(sizes: &[usize]) -> usize {
    if sizes.contains(&64) {
        64
    } else {
        sizes.iter().copied().min().unwrap_or(64)
    }
}

fn index(list: &[usize], value: usize) -> usize {
    list.iter().position(|&v| v == value).unwrap_or(usize::MAX)
}

/// One bar per result, its value on a log scale.
fn single_chart(
    output: &Path,
    title: &str,
    y_desc: &str,
    bars: Vec<(String, usize, f64)>,
) -> anyhow::Result<()> {
    use plotters::prelude::*;

    if bars.is_empty() {
        bail!("the document has no results");
    }
    let top = bars.iter().map(|b| b.2).fold(10.0, f64::max) * 3.0;
    let n = bars.len();
    let root = SVGBackend::new(output, (960, 540)).into_drawing_area();
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e:?}");
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        // The title carries the build, CPU, commit, date and load: a smaller face keeps it on the
        // chart.
        .caption(title, ("sans-serif", 15))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n).into_segmented(), (1.0f64..top).log_scale())
        .map_err(draw)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => bars.get(*i).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(draw)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 1.0),
                    (SegmentValue::Exact(i + 1), b.2.max(1.0)),
                ],
                Palette99::pick(i).filled(),
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        }))
        .map_err(draw)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(
                format!("{:.0}", b.2),
                (SegmentValue::CenterOf(i), b.2.max(1.0) * 1.15),
                ("sans-serif", 13).into_font(),
            )
        }))
        .map_err(draw)?;
    root.present().map_err(draw)?;
    eprintln!("[info] wrote {output:?}");
    Ok(())
}

/// Grouped bars: one group per size (or client count), one bar per row (the limit rows last),
/// each bar `(row, group, value)` on a log scale.
fn grouped_chart(
    output: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    bars: &[(String, usize, f64)],
) -> anyhow::Result<()> {
    use plotters::prelude::*;

    let mut names: Vec<&str> = Vec::new();
    for (name, _, _) in bars {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    if groups.is_empty() || names.is_empty() {
        bail!("the document has no sizes or no results");
    }
    let value_of = |name: &str, group: usize| {
        bars.iter()
            .find(|(n, g, _)| n == name && *g == group)
            .map(|b| b.2)
    };
    let top = bars.iter().map(|b| b.2).fold(10.0, f64::max) * 3.0;
    let bottom = bars
        .iter()
        .map(|b| b.2)
        .filter(|&x| x > 0.0)
        .fold(top, f64::min);
    // Room under the smallest bar so that it shows.
    let bottom = (bottom * 0.5).clamp(0.01, 1.0);
    // Half-bar units on the x axis: each bar is two wide, each group ends with a one-bar gap,
    // so a group's centre (where its size label goes) falls on a whole unit.
    let per_group = 2 * (names.len() + 1);
    let slots = (groups.len() * per_group) as i32;
    let middle = names.len();
    let root = SVGBackend::new(output, (1100, 560)).into_drawing_area();
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e:?}");
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        // The title carries the build, CPU, commit, date and load: a smaller face keeps it on the
        // chart.
        .caption(title, ("sans-serif", 15))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0..slots, (bottom..top).log_scale())
        .map_err(draw)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(slots as usize + 1)
        .y_desc(y_desc)
        .x_label_formatter(&|&x| {
            let group = (x as usize) / per_group;
            if x >= 0 && (x as usize) % per_group == middle {
                groups.get(group).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(draw)?;
    for (t, name) in names.iter().enumerate() {
        let color = Palette99::pick(t);
        let rects: Vec<_> = (0..groups.len())
            .filter_map(|g| {
                let value = value_of(name, g)?.max(bottom);
                let x = (g * per_group + 2 * t) as i32;
                let mut bar = Rectangle::new([(x, bottom), (x + 2, value)], color.filled());
                bar.set_margin(0, 0, 2, 2);
                Some(bar)
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(draw)?
            .label(name.to_string())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    eprintln!("[info] wrote {output:?}");
    Ok(())
}
