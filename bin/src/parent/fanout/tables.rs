//! The tables and ratios of a fan-out document.

use std::fmt::Write as _;

use crate::fanout::FanoutRow;
use crate::parent::document::*;
use crate::parent::tables::*;
use crate::workload::size_label;

/// The subscriber count the headline ratios are stated at.
const HEADLINE_AT: usize = 8;

pub(crate) fn tables(f: &Fanout, run: &Run) -> String {
    let rounds = f.results.first().map_or(0, |r| r.rounds.len());
    let timed = match f.count {
        Some(n) => format!("{n} timed messages per row and round"),
        None => format!("{} s of timed messages per row and round", f.duration_s),
    };
    let mut out = format!(
        "One publisher (ipc-parent) and N subscriber processes, {timed}, ring {} (the topic's, \
         each channel's, each socket's buffers; an iceoryx2 subscriber's buffer holds as many \
         samples as that ring holds messages), median and best of {rounds} round(s). sub msg/s: \
         a subscriber's timed messages over its own span (its first to its last), of the median \
         subscriber (median round, best round) and of the slowest (median round); latency: \
         one-way, from the publisher's clock reading before the send to the subscriber's after \
         the receive (CLOCK_MONOTONIC), over every timed message of every subscriber of every \
         round, in us (at full rate it is mostly the time a message waits in a full queue); \
         msg per CPU-s: timed messages per second of the publisher thread's CPU time while it \
         sent them (median round)\n\n",
        size_label(f.ring_size)
    );
    let mut t = Table::new(&[
        ">subs",
        "size",
        "row",
        ">messages",
        ">sub msg/s median",
        ">sub msg/s best",
        ">slowest sub msg/s",
        ">p50 us",
        ">p99 us",
        ">max us",
        ">published msg/s",
        ">msg per CPU-s",
    ]);
    for r in &f.results {
        let messages: u64 = r.rounds.iter().map(|x| x.messages).sum();
        let mut published: Vec<f64> = r.rounds.iter().map(|x| x.published_per_s).collect();
        t.row(vec![
            r.subscribers.to_string(),
            size_label(r.size),
            r.row.clone(),
            whole(messages as f64),
            whole(r.subscriber_msgs_per_s.median),
            whole(r.subscriber_msgs_per_s.best),
            whole(r.slowest_subscriber_msgs_per_s.median),
            us(r.latency_ns.p50),
            us(r.latency_ns.p99),
            us(r.latency_ns.max),
            whole(median(&mut published)),
            whole(r.msgs_per_cpu_s.median),
        ]);
    }
    out.push_str(&t.render());
    out.push('\n');
    for row in FanoutRow::ALL {
        if f.results.iter().any(|r| r.row == row.name()) {
            let _ = writeln!(out, "- {}: {}", row.name(), row.about());
        }
    }
    if let Some(version) = &f.iceoryx2 {
        let _ = writeln!(out, "- iceoryx2 version: {version}");
    }
    for s in &f.skipped {
        let _ = writeln!(
            out,
            "- {} skipped with {} subscriber{}: {}",
            s.row,
            s.subscribers,
            if s.subscribers == 1 { "" } else { "s" },
            s.why
        );
    }
    let cores = run.machine.cores;
    let _ = writeln!(
        out,
        "\nThe publisher and its N subscribers are N + 1 processes sharing this machine's {cores} \
         CPU{} ({}): from N = {cores} on there are more of them than CPUs, they take turns, and \
         a subscriber's rate says as much about its share of the CPUs as about the row.",
        if cores == 1 { "" } else { "s" },
        pinning(run)
    );
    out.push_str(&headline(f));
    out.push_str(&ratios_table(&fanout_ratios(f)));
    out
}

fn find(f: &Fanout, row: FanoutRow, n: usize, size: usize) -> Option<&FanoutResult> {
    f.results
        .iter()
        .find(|r| r.row == row.name() && r.subscribers == n && r.size == size)
}

fn per_round(r: &FanoutResult, figure: fn(&FanoutRound) -> f64) -> Vec<f64> {
    r.rounds.iter().map(figure).collect()
}

/// The p50 latency of each round as a rate (1 / latency), so that a ratio of two rows' rates
/// is the inverse ratio of their latencies, and the best round the lowest latency.
fn inverse_p50(round: &FanoutRound) -> f64 {
    if round.latency_ns.p50 > 0 {
        1.0 / round.latency_ns.p50 as f64
    } else {
        0.0
    }
}

/// The topic against N channels in messages per second of publisher CPU, and its median
/// latency against iceoryx2's, at every subscriber count and size both rows ran.
fn fanout_ratios(f: &Fanout) -> Vec<Ratio> {
    let mut out = Vec::new();
    for &n in &f.counts {
        for &size in &f.sizes {
            let at = format!(
                "{n} subscriber{}, {}",
                if n == 1 { "" } else { "s" },
                size_label(size)
            );
            let topic = find(f, FanoutRow::Topic, n, size);
            if let (Some(t), Some(c)) = (topic, find(f, FanoutRow::Channels, n, size)) {
                out.push(Ratio::of(
                    format!("shmlink-topic / shmlink-channels, msg per publisher CPU-s, {at}"),
                    &per_round(t, |x| x.msgs_per_cpu_s),
                    &per_round(c, |x| x.msgs_per_cpu_s),
                ));
            }
            if let (Some(t), Some(i)) = (topic, find(f, FanoutRow::Iceoryx2, n, size)) {
                out.push(Ratio::of(
                    format!("shmlink-topic / iceoryx2, p50 latency, {at}"),
                    &per_round(i, inverse_p50),
                    &per_round(t, inverse_p50),
                ));
            }
        }
    }
    out
}

/// The two ratios the fan-out benchmark is stated in, at [`HEADLINE_AT`] subscribers, in words
/// (medians of the per-round ratios); empty when that count was not measured.
fn headline(f: &Fanout) -> String {
    let n = HEADLINE_AT;
    if !f.counts.contains(&n) {
        return String::new();
    }
    let mut cpu = Vec::new();
    let mut latency = Vec::new();
    for &size in &f.sizes {
        let topic = find(f, FanoutRow::Topic, n, size);
        if let (Some(t), Some(c)) = (topic, find(f, FanoutRow::Channels, n, size)) {
            let r = Ratio::of(
                String::new(),
                &per_round(t, |x| x.msgs_per_cpu_s),
                &per_round(c, |x| x.msgs_per_cpu_s),
            );
            if let Some(x) = r.median {
                cpu.push(format!("{x:.2}x at {}", size_label(size)));
            }
        }
        if let (Some(t), Some(i)) = (topic, find(f, FanoutRow::Iceoryx2, n, size)) {
            let r = Ratio::of(
                String::new(),
                &per_round(i, inverse_p50),
                &per_round(t, inverse_p50),
            );
            if let Some(x) = r.median {
                latency.push(format!("{x:.2}x at {}", size_label(size)));
            }
        }
    }
    let mut out = String::new();
    if !cpu.is_empty() {
        let _ = writeln!(
            out,
            "\nWith {n} subscribers, one topic moves {} the messages per second of publisher CPU \
             that {n} channels do (the median of the per-round ratios).",
            cpu.join(", ")
        );
    }
    if !latency.is_empty() {
        let _ = writeln!(
            out,
            "\nWith {n} subscribers, the topic's median one-way latency is {} iceoryx2's (the \
             median of the per-round ratios; below 1: the topic's messages arrive sooner).",
            latency.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(cpu: f64, sub: f64, p50: u64) -> FanoutRound {
        FanoutRound {
            messages: 1000,
            publisher_seconds: 0.01,
            publisher_cpu_s: 1000.0 / cpu,
            published_per_s: 100_000.0,
            msgs_per_cpu_s: cpu,
            subscriber_msgs_per_s: vec![sub, sub],
            median_subscriber_msgs_per_s: sub,
            slowest_subscriber_msgs_per_s: sub / 2.0,
            latency_ns: Latency {
                p50,
                p99: 2 * p50,
                p999: 3 * p50,
                max: 4 * p50,
            },
        }
    }

    fn result(row: FanoutRow, rounds: Vec<FanoutRound>) -> FanoutResult {
        FanoutResult {
            row: row.name().to_owned(),
            subscribers: 8,
            size: 64,
            subscriber_msgs_per_s: Rates::of(rounds.iter().map(|r| r.median_subscriber_msgs_per_s)),
            slowest_subscriber_msgs_per_s: Rates::of(
                rounds.iter().map(|r| r.slowest_subscriber_msgs_per_s),
            ),
            msgs_per_cpu_s: Rates::of(rounds.iter().map(|r| r.msgs_per_cpu_s)),
            latency_ns: rounds[0].latency_ns,
            rounds,
        }
    }

    fn fanout() -> Fanout {
        Fanout {
            counts: vec![8],
            sizes: vec![64],
            count: Some(1000),
            duration_s: 1.0,
            ring_size: 1 << 20,
            iceoryx2: Some("0.10.0".to_owned()),
            skipped: vec![FanoutSkip {
                row: "shmlink-topic-spin".to_owned(),
                subscribers: 8,
                why: "no CPU each".to_owned(),
            }],
            results: vec![
                result(
                    FanoutRow::Topic,
                    vec![round(4e6, 1e6, 1000), round(6e6, 2e6, 2000)],
                ),
                result(
                    FanoutRow::Channels,
                    vec![round(1e6, 5e5, 3000), round(1e6, 5e5, 3000)],
                ),
                result(
                    FanoutRow::Iceoryx2,
                    vec![round(2e6, 4e5, 4000), round(2e6, 4e5, 8000)],
                ),
            ],
        }
    }

    #[test]
    fn ratios_are_taken_round_by_round_and_latency_is_lower_over_lower() {
        let ratios = fanout_ratios(&fanout());
        assert_eq!(ratios.len(), 2);
        let cpu = &ratios[0];
        assert!(cpu
            .what
            .contains("msg per publisher CPU-s, 8 subscribers, 64 B"));
        // Rounds: 4 and 6 over 1; best over best 6.
        assert_eq!((cpu.best, cpu.median), (Some(6.0), Some(5.0)));
        let lat = &ratios[1];
        assert!(lat
            .what
            .starts_with("shmlink-topic / iceoryx2, p50 latency"));
        // Rounds: 1000 / 4000 and 2000 / 8000; lowest over lowest 1000 / 4000.
        assert_eq!((lat.best, lat.median), (Some(0.25), Some(0.25)));
    }

    #[test]
    fn the_table_shows_every_row_its_description_the_skips_and_the_headline() {
        let f = fanout();
        let run: Run = serde_json::from_str(
            r#"{"command": "ipc-parent fanout 8", "commit": "unknown", "date": "2025-01-02T03:04:05Z",
                "profile": "release",
                "machine": {"cpu": "Test CPU", "cores": 2, "physical_cores": 2, "kernel": "Linux",
                            "online": "0-1", "topology": []},
                "pinning": {"pinned": false, "parent": [0, 1], "children": [0, 1]},
                "load_average": 0.1, "load": 0, "rounds": 2, "warmup_s": 0.25}"#,
        )
        .expect("a run");
        let text = tables(&f, &run);
        for needle in [
            "- shmlink-channels: N shmlink Channels",
            "- iceoryx2 version: 0.10.0",
            "- shmlink-topic-spin skipped with 8 subscribers: no CPU each",
            "sharing this machine's 2 CPUs (not pinned)",
            "one topic moves 5.00x at 64 B the messages per second of publisher CPU",
            "the topic's median one-way latency is 0.25x at 64 B iceoryx2's",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from\n{text}");
        }
        // The topic's row: 2000 messages, sub msg/s median 1.5 M, best 2 M, slowest 750 k.
        let line = text
            .lines()
            .find(|l| l.contains("shmlink-topic "))
            .expect("topic line");
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(
            cells[4..8],
            ["2,000", "1,500,000", "2,000,000", "750,000"],
            "{line}"
        );
    }
}
