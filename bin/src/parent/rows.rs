//! The rows of a table: transports between two processes and the limits measured in one.

use anyhow::bail;

use shmlink::WaitStrategy;

use crate::transport::{Kind, Mode};
use crate::workload::MessageKind;

/// One row of the table: a transport between two processes, or a limit measured in this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Row {
    /// Ping-pong with a child over a transport (`floor` included); in a stream, framed messages.
    Ipc(Kind),
    /// A stream of bare messages over a kernel transport: fixed-size, unframed, one system call
    /// per message on each side, as a minimal C program does. Named `<transport>-bare`.
    Bare(Kind),
    /// A stream in batches: many fixed-size messages per call, over shared memory
    /// (`send_batch` / `recv_batch`) or a kernel byte stream (one `write` of many unframed
    /// messages, `read`s of all the room there is). Named `<transport>-batch`.
    Batch(Kind),
    /// Ping-pong with a child over shared memory, waiting this way (`--wait` with several
    /// strategies: one row each).
    Shm(WaitStrategy),
    /// The JSON work of one round trip, in this process, no IPC.
    Serde,
    /// Two copies of the message per round trip, in this process: the sweep's limit (in a
    /// stream, one copy per message).
    Memcpy,
    /// The same shmlink ring between two threads of this process: the stream's limit.
    Ring,
}

impl Row {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Row::Ipc(kind) => kind.as_str(),
            Row::Bare(kind) => kind.spec().bare,
            Row::Batch(kind) => kind.spec().batch,
            Row::Shm(_) => Kind::Shm.as_str(),
            Row::Serde => "serde",
            Row::Memcpy => "memcpy",
            Row::Ring => "ring",
        }
    }

    /// A limit the transports are measured against, not a transport.
    pub(crate) fn is_limit(self) -> bool {
        match self {
            Row::Ipc(kind) => kind.is_limit(),
            Row::Serde | Row::Memcpy | Row::Ring => true,
            Row::Bare(_) | Row::Batch(_) | Row::Shm(_) => false,
        }
    }

    /// A transport row that does not serve `mode`.
    fn outside(self, mode: Mode) -> bool {
        matches!(self, Row::Ipc(kind) if !kind.serves(mode))
    }
}

/// The transport of a `<transport>-<row>` name (`row`: `bare` or `batch`); `None` when `item`
/// names no such row. `mode` is the form of the stream that row measures.
fn parse_suffixed(item: &str, row: &str, mode: Mode) -> anyhow::Result<Option<Kind>> {
    let Some(transport) = item.strip_suffix(row).and_then(|t| t.strip_suffix('-')) else {
        return Ok(None);
    };
    let kind: Kind = transport.parse()?;
    if !kind.serves(mode) {
        bail!(
            "{item}: only {} have a {row} row",
            Kind::names(|k| k.serves(mode))
        );
    }
    Ok(Some(kind))
}

/// The transport of a `<transport>-batch` name; `None` when `item` names no batch row.
fn parse_batch(item: &str) -> anyhow::Result<Option<Kind>> {
    parse_suffixed(item, "batch", Mode::Batch)
}

/// The kernel transport of a `<transport>-bare` name; `None` when `item` names no bare row.
fn parse_bare(item: &str) -> anyhow::Result<Option<Kind>> {
    parse_suffixed(item, "bare", Mode::Bare)
}

/// Why a bare or batch row is refused outside a stream.
fn bare_outside_stream(item: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{item}: bare and batch rows (fixed-size messages, one system call per message or many \
         messages per call) belong to the one-way stream (ipc-parent stream); ping-pong and \
         sweep messages are framed"
    )
}

/// The rows `--transport` names, in its order (`all`: every transport, then the limits); the
/// shm row once per wait strategy.
pub(crate) fn parse_rows(
    list: &str,
    sweep: bool,
    message: MessageKind,
    waits: &[WaitStrategy],
) -> anyhow::Result<Vec<Row>> {
    let rows = parse_transports(list, sweep, message)?;
    Ok(rows
        .into_iter()
        .flat_map(|row| match row {
            Row::Ipc(Kind::Shm) => waits.iter().map(|&w| Row::Shm(w)).collect(),
            other => vec![other],
        })
        .collect())
}

fn parse_transports(list: &str, sweep: bool, message: MessageKind) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    if list.trim() == "all" {
        rows.extend(Kind::ALL.iter().map(|&k| Row::Ipc(k)));
        if sweep {
            rows.retain(|&r| !r.outside(Mode::Sweep));
        } else if message == MessageKind::Json {
            rows.push(Row::Serde);
        }
    } else {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let row = match item {
                "serde" => Row::Serde,
                "memcpy" => Row::Memcpy,
                "ring" => Row::Ring,
                other if other.ends_with("-bare") || other.ends_with("-batch") => {
                    return Err(bare_outside_stream(other))
                }
                other => Row::Ipc(other.parse()?),
            };
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
    }
    if rows.contains(&Row::Ring) {
        bail!("the ring row belongs to the stream (ipc-parent stream)");
    }
    if sweep {
        if let Some(row) = rows
            .iter()
            .find(|r| r.outside(Mode::Sweep) || **r == Row::Serde)
        {
            bail!(
                "{} is a limit of the ping-pong run; the sweep's limit is the memcpy row, which \
                 it always measures",
                row.name()
            );
        }
        rows.retain(|&r| r != Row::Memcpy);
        rows.push(Row::Memcpy);
    } else {
        if rows.contains(&Row::Memcpy) {
            bail!("the memcpy row belongs to the sweep and the stream");
        }
        if message == MessageKind::Raw && rows.contains(&Row::Serde) {
            bail!("the serde row measures the JSON workload; drop it or --message raw");
        }
    }
    if rows.is_empty() {
        bail!("no transport given");
    }
    Ok(rows)
}

/// The rows of a streaming run: the transports `--transport` names (`all`: every one that
/// serves the stream, each kernel transport followed by its bare row, and each transport with a batch form
/// by its batch row), then the limit rows ring and memcpy, always measured.
pub(crate) fn parse_stream_rows(list: &str) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    if list.trim() == "all" {
        for &kind in Kind::ALL.iter().filter(|&&k| k.serves(Mode::Stream)) {
            rows.push(Row::Ipc(kind));
            if kind.has_bare() {
                rows.push(Row::Bare(kind));
            }
            if kind.has_batch() {
                rows.push(Row::Batch(kind));
            }
        }
    } else {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let row = match item {
                "ring" | "memcpy" => continue,
                "serde" => bail!(
                    "{item} is a limit of the ping-pong run; a stream's limits are the ring and \
                     memcpy rows, which it always measures"
                ),
                other => match (parse_bare(other)?, parse_batch(other)?) {
                    (Some(kind), _) => Row::Bare(kind),
                    (_, Some(kind)) => Row::Batch(kind),
                    _ => Row::Ipc(other.parse()?),
                },
            };
            if row.outside(Mode::Stream) {
                bail!(
                    "{item} is a limit of the ping-pong run; a stream's limits are the ring and \
                     memcpy rows, which it always measures"
                );
            }
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
    }
    rows.push(Row::Ring);
    rows.push(Row::Memcpy);
    Ok(rows)
}
