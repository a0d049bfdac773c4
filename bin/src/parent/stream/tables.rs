//! The tables and ratios of a stream document.

use crate::parent::document::*;
use crate::parent::tables::*;
use crate::workload::size_label;

pub(crate) fn tables(s: &Stream) -> String {
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
