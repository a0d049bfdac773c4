//! `chart`: SVG bar charts of a result document.

use std::path::Path;

use anyhow::{anyhow, bail};

use super::report::{read_report, row_label, Report, TransportResult};
use crate::workload::size_label;

pub(crate) fn chart(input: &Path, output: &Path) -> anyhow::Result<()> {
    use plotters::prelude::*;

    let report = read_report(input)?;
    if report.results.is_empty() {
        bail!("{input:?} has no results");
    }
    if report.sweep {
        let title = format!(
            "payload throughput, MB/s both directions ({} build, ring {}) - {}",
            report.profile,
            size_label(report.ring_size),
            report.machine.cpu
        );
        let y = "best MB/s, both directions (log scale)";
        return sweep_chart(&report, output, &title, y, |r| r.mb_per_s);
    }
    if report.stream {
        let title = format!(
            "one-way stream, messages / s ({} build, ring {}) - {}",
            report.profile,
            size_label(report.ring_size),
            report.machine.cpu
        );
        let y = "best messages per second (log scale)";
        return sweep_chart(&report, output, &title, y, |r| r.msgs_per_s);
    }
    let top = report
        .results
        .iter()
        .map(|r| r.best_rt_per_s)
        .fold(10.0, f64::max)
        * 3.0;
    let n = report.results.len();
    let title = format!(
        "ping-pong round trips / s ({} build, {} messages) - {}",
        report.profile, report.message, report.machine.cpu
    );
    let root = SVGBackend::new(output, (960, 540)).into_drawing_area();
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e:?}");
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n).into_segmented(), (1.0f64..top).log_scale())
        .map_err(draw)?;
    let labels: Vec<String> = report
        .results
        .iter()
        .map(|r| match &r.backend {
            Some(b) if b != &r.transport => format!("{} ({b})", r.transport),
            _ => row_label(r),
        })
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("best round trips per second (log scale)")
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(draw)?;
    chart
        .draw_series(report.results.iter().enumerate().map(|(i, r)| {
            let color = Palette99::pick(i).filled();
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 1.0),
                    (SegmentValue::Exact(i + 1), r.best_rt_per_s.max(1.0)),
                ],
                color,
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        }))
        .map_err(draw)?;
    chart
        .draw_series(report.results.iter().enumerate().map(|(i, r)| {
            Text::new(
                format!("{:.0}", r.best_rt_per_s),
                (SegmentValue::CenterOf(i), r.best_rt_per_s.max(1.0) * 1.15),
                ("sans-serif", 13).into_font(),
            )
        }))
        .map_err(draw)?;
    root.present().map_err(draw)?;
    eprintln!("[info] wrote {output:?}");
    Ok(())
}

/// Grouped bars: one group per message size, one bar per transport (the limit rows last), the
/// `value` of each result (best MB/s of a sweep, best messages/s of a stream) on a log scale.
pub(crate) fn sweep_chart(
    report: &Report,
    output: &Path,
    title: &str,
    y_desc: &str,
    value: impl Fn(&TransportResult) -> Option<f64>,
) -> anyhow::Result<()> {
    use plotters::prelude::*;

    let sizes = report.sizes.clone().unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for r in &report.results {
        if !names.contains(&r.transport) {
            names.push(r.transport.clone());
        }
    }
    if sizes.is_empty() || names.is_empty() {
        bail!("the sweep document has no sizes or no results");
    }
    let mb = |name: &str, size: usize| {
        report
            .results
            .iter()
            .find(|r| r.transport == name && r.size == Some(size))
            .and_then(&value)
    };
    let top = report
        .results
        .iter()
        .filter_map(&value)
        .fold(10.0, f64::max)
        * 3.0;
    let bottom = report
        .results
        .iter()
        .filter_map(&value)
        .filter(|&x| x > 0.0)
        .fold(top, f64::min);
    // Room under the smallest bar so that it shows.
    let bottom = (bottom * 0.5).clamp(0.01, 1.0);
    // Half-bar units on the x axis: each bar is two wide, each group ends with a one-bar gap,
    // so a group's centre (where its size label goes) falls on a whole unit.
    let per_group = 2 * (names.len() + 1);
    let slots = (sizes.len() * per_group) as i32;
    let middle = names.len();
    let root = SVGBackend::new(output, (1100, 560)).into_drawing_area();
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the chart: {e:?}");
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0..slots, (bottom..top).log_scale())
        .map_err(draw)?;
    let label_sizes = sizes.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(slots as usize + 1)
        .y_desc(y_desc)
        .x_label_formatter(&|&x| {
            let group = (x as usize) / per_group;
            if x >= 0 && (x as usize) % per_group == middle {
                label_sizes
                    .get(group)
                    .map(|&s| size_label(s))
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(draw)?;
    for (t, name) in names.iter().enumerate() {
        let color = Palette99::pick(t);
        let bars: Vec<_> = sizes
            .iter()
            .enumerate()
            .filter_map(|(g, &size)| {
                let value = mb(name, size)?.max(bottom);
                let x = (g * per_group + 2 * t) as i32;
                let mut bar = Rectangle::new([(x, bottom), (x + 2, value)], color.filled());
                bar.set_margin(0, 0, 2, 2);
                Some(bar)
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(draw)?
            .label(name.clone())
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
