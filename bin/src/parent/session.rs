//! What every measuring mode does around its rows: the checks of the shared options, Ctrl-C,
//! the `--load` processes, `--pin`, the description of the run for its document, the progress
//! lines, the interleaved rounds, and the document saved and printed at the end.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::cli::Common;
use super::document::{Document, Results, RoundConditions, Run};
use super::machine::{busy_warning, load_average, CpuTimes, Machine, Placement};
use super::spawn::{install_signal_handlers, interrupted, Load};
use super::tables;

/// The commit this binary was built from (see `build.rs`).
pub(crate) const COMMIT: &str = env!("HARNESS_COMMIT");

/// A measuring run in progress.
pub(crate) struct Session {
    pub(crate) common: Common,
    /// The base of the run's names: `--name`, or `h<pid>`.
    pub(crate) base: String,
    /// The child binary: `ipc-child`, or this executable (empty when no row needs one).
    pub(crate) child_path: PathBuf,
    /// Where the processes run.
    pub(crate) placement: Placement,
    run: Run,
    /// The machine during each round so far.
    conditions: RefCell<Vec<RoundConditions>>,
    /// What the run has announced it will take, and how far it has come.
    progress: RefCell<Progress>,
    /// Stopped (on drop) when the run ends, however it ends.
    _load: Load,
}

/// Runs whose estimate is at least this long print a progress line per measured piece.
pub(crate) const PROGRESS_FROM: Duration = Duration::from_secs(3);

/// The estimate of a run and how much of it is done.
#[derive(Debug)]
struct Progress {
    started: Instant,
    /// The whole run, as estimated before it started.
    planned: Duration,
    /// The estimated time of the pieces done so far.
    done: Duration,
}

/// How [`Session::rounds`] goes through the cells of one round.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    /// Pieces per cell and round: 1, or `--paired`'s slices (cell after cell, slice by
    /// slice: A B C A B C ...).
    pub(crate) slices: u32,
    /// What one piece of one cell is expected to take (warmup, measurement, a child's start).
    pub(crate) per_piece: Duration,
    /// The part of the run these rounds belong to, when it has several (`4 clients`).
    pub(crate) part: Option<String>,
}

impl Schedule {
    /// The time `cells` cells take over `rounds` rounds.
    pub(crate) fn estimate(&self, cells: usize, rounds: u32) -> Duration {
        self.per_piece * (self.slices.max(1) * rounds) * u32::try_from(cells).unwrap_or(u32::MAX)
    }
}

/// `1 min 05 s`, `12 s`, `0.4 s`.
pub(crate) fn span(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 60.0 {
        format!("{s:.0} s")
    } else {
        let whole = s.round() as u64;
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}
impl Session {
    /// A command that starts a child process: the child binary, told to run as the child
    /// (which `ipc-parent` needs when it is its own child; `ipc-child` ignores it).
    pub(crate) fn child_command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.child_path);
        command.env(crate::ipc_child::AS_CHILD_ENV, "1");
        command
    }

    /// Checks the shared options, notes the machine and its load, starts the `--load`
    /// processes, then pins this process (the load is not pinned), and prints the run's
    /// header line (on standard error with `--json`) and, on a busy machine, a warning.
    pub(crate) fn start(common: Common, needs_child: bool) -> anyhow::Result<Session> {
        install_signal_handlers()?;
        if common.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        let base = common
            .name
            .clone()
            .unwrap_or_else(|| format!("h{}", std::process::id()));
        shmlink::testing::validate_fallback_name(&base).map_err(|e| anyhow!("--name: {e}"))?;
        let child_path = if needs_child {
            child_path(common.child.as_deref())?
        } else {
            PathBuf::new()
        };
        let machine = Machine::read();
        let load_average = load_average();
        let load = Load::start(common.load)?;
        let placement = Placement::apply(common.pin.as_ref(), &machine)?;
        let run = Run {
            command: command_line(std::env::args()),
            commit: COMMIT.to_owned(),
            date: utc_now(),
            profile: profile().to_owned(),
            pinning: placement.record(),
            load_average,
            load: common.load,
            rounds: common.rounds,
            warmup_s: common.warmup.as_secs_f64(),
            machine,
            round_conditions: Vec::new(),
        };
        let session = Session {
            common,
            base,
            child_path,
            placement,
            run,
            conditions: RefCell::new(Vec::new()),
            progress: RefCell::new(Progress {
                started: Instant::now(),
                planned: Duration::ZERO,
                done: Duration::ZERO,
            }),
            _load: load,
        };
        session.say(&tables::run_line(&session.run));
        if let Some(warning) = busy_warning(load_average, session.run.machine.cores) {
            eprintln!("{warning}");
        }
        Ok(session)
    }

    /// Prints a progress line: on standard output, or on standard error with `--json`
    /// (standard output is the document's).
    pub(crate) fn say(&self, line: &str) {
        if self.common.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    /// Says on standard error how long the whole run will take (`planned`), before it starts;
    /// the progress lines count down from it. `open`: the run's pieces are counts of messages
    /// whose time is not known before they run, and `planned` holds only the rest.
    pub(crate) fn announce(&self, planned: Duration, what: &str, open: bool) {
        let mut p = self.progress.borrow_mut();
        p.planned = planned;
        p.started = Instant::now();
        if open {
            eprintln!(
                "[info] {what}: at least {} (warmups and children's starts), plus the time of \
                 the messages",
                span(planned)
            );
        } else {
            eprintln!("[info] {what}: about {} in all", span(planned));
        }
    }

    /// Runs `each(cell, round, slice)` for every round and, within a round, for every slice
    /// (one unless `--paired`) every cell in turn (the cells interleaved round by round, and
    /// slice by slice); stops with "interrupted" after Ctrl-C. Records the load at the start
    /// of each round and the CPU time stolen during it, and on a run announced as at least
    /// [`PROGRESS_FROM`] long prints a progress line on standard error after each piece.
    pub(crate) fn rounds<C>(
        &self,
        cells: &mut [C],
        schedule: &Schedule,
        label: impl Fn(&C) -> String,
        mut each: impl FnMut(&mut C, u32, u32) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let rounds = self.common.rounds;
        let slices = schedule.slices.max(1);
        for round in 1..=rounds {
            let load_average = load_average();
            let before = CpuTimes::read();
            let started = Instant::now();
            for slice in 0..slices {
                for cell in cells.iter_mut() {
                    if interrupted() {
                        bail!("interrupted");
                    }
                    match each(cell, round, slice) {
                        Err(_) if interrupted() => bail!("interrupted"),
                        other => other?,
                    }
                    self.progress_line(schedule, &label(cell), round, slice);
                }
            }
            let steal_pct = before
                .zip(CpuTimes::read())
                .and_then(|(b, a)| b.steal_pct(a));
            self.conditions.borrow_mut().push(RoundConditions {
                round,
                part: schedule.part.clone(),
                load_average,
                steal_pct,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        Ok(())
    }

    /// After a piece of `schedule`: the row just measured, where the run is, the time left.
    fn progress_line(&self, schedule: &Schedule, row: &str, round: u32, slice: u32) {
        let mut p = self.progress.borrow_mut();
        p.done += schedule.per_piece;
        if p.planned < PROGRESS_FROM {
            return;
        }
        let elapsed = p.started.elapsed();
        // The estimate scaled by how fast the run has gone so far.
        let pace = elapsed.as_secs_f64() / p.done.as_secs_f64().max(1e-9);
        let left = p
            .planned
            .saturating_sub(p.done)
            .mul_f64(pace.clamp(0.0, 1e6));
        let slices = schedule.slices.max(1);
        let piece = if slices > 1 {
            format!(", slice {}/{slices}", slice + 1)
        } else {
            String::new()
        };
        let part = schedule
            .part
            .as_deref()
            .map_or(String::new(), |p| format!("{p}, "));
        eprintln!(
            "[progress] {row}: {part}round {round}/{}{piece}; {} elapsed, about {} left",
            self.common.rounds,
            span(elapsed),
            span(left)
        );
    }

    /// Writes the document to `--save` if given, then prints it: as JSON with `--json`, else
    /// as the mode's tables.
    pub(crate) fn finish(self, results: Results) -> anyhow::Result<()> {
        let mut run = self.run;
        run.round_conditions = self.conditions.into_inner();
        let doc = Document { run, results };
        if let Some(path) = &self.common.save {
            std::fs::write(path, doc.to_text()?).with_context(|| format!("writing {path:?}"))?;
            eprintln!("[info] wrote {path:?}");
        }
        let mut out = std::io::stdout().lock();
        if self.common.json {
            out.write_all(doc.to_text()?.as_bytes())?;
        } else {
            out.write_all(tables::terminal(&doc).as_bytes())?;
        }
        Ok(())
    }
}

/// `explicit`, or `ipc-child` next to this executable, or else this executable itself (which
/// runs as the child when spawned with `ipc_child::AS_CHILD_ENV`): a plain `cargo run --release`
/// builds `ipc-parent` alone.
fn child_path(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_owned());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("executable {exe:?} has no directory"))?;
    let path = dir.join(format!("ipc-child{}", std::env::consts::EXE_SUFFIX));
    Ok(if path.exists() { path } else { exe })
}

pub(crate) fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// The command line as a shell would take it back: `ipc-parent` and the arguments, each quoted
/// where it needs to be.
fn command_line(args: impl Iterator<Item = String>) -> String {
    let quote = |arg: &str| {
        let plain = !arg.is_empty()
            && arg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ",._-/:=+@%".contains(c));
        if plain {
            arg.to_owned()
        } else {
            format!("'{}'", arg.replace('\'', r"'\''"))
        }
    };
    std::iter::once("ipc-parent".to_owned())
        .chain(args.skip(1).map(|a| quote(&a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Now, UTC, as `2025-01-31T23:59:59Z`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t = libc::time_t::try_from(secs).unwrap_or(0);
    // SAFETY: an all-zero tm is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; gmtime_r is the thread-safe variant.
    if unsafe { libc::gmtime_r(&t, &mut tm) }.is_null() {
        return "unknown".to_owned();
    }
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_quoted_for_a_shell() {
        let args = [
            "/x/target/release/ipc-parent",
            "stream",
            "--sizes",
            "8,1KiB",
            "--name",
            "a b",
            "it's",
        ];
        assert_eq!(
            command_line(args.iter().map(|s| s.to_string())),
            r"ipc-parent stream --sizes 8,1KiB --name 'a b' 'it'\''s'"
        );
    }

    #[test]
    fn dates_are_utc_seconds() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.ends_with('Z') && d.as_bytes()[10] == b'T', "{d}");
    }
}
