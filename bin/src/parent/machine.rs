//! The machine as the OS reports it (CPU model, online CPUs and their topology, kernel, load),
//! and `--pin`: which CPUs the parent and its children run on.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

const CPU_DIR: &str = "/sys/devices/system/cpu";

/// The machine a run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Online logical CPUs.
    pub cores: usize,
    /// Physical cores among them (distinct package and core ids; 0 when the OS does not say).
    pub physical_cores: usize,
    /// `uname`: system and release.
    pub kernel: String,
    /// The online CPUs as the OS lists them (`/sys/devices/system/cpu/online`, e.g. `0-1`).
    pub online: String,
    /// Each online CPU's place (`/sys/devices/system/cpu/cpuN/topology`).
    pub topology: Vec<CpuTopology>,
}

/// Where one logical CPU sits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuTopology {
    pub cpu: usize,
    /// `physical_package_id`.
    pub package: Option<u32>,
    /// `core_id`.
    pub core: Option<u32>,
    /// `thread_siblings_list`: the logical CPUs of the same core.
    pub siblings: Option<String>,
}

impl Machine {
    /// Reads the machine's description.
    pub fn read() -> Machine {
        let online = read_trimmed(&format!("{CPU_DIR}/online"));
        let cpus = online
            .as_deref()
            .and_then(|list| parse_cpu_list(list).ok())
            .unwrap_or_default();
        let topology: Vec<CpuTopology> = cpus
            .iter()
            .map(|&cpu| {
                let field =
                    |name: &str| read_trimmed(&format!("{CPU_DIR}/cpu{cpu}/topology/{name}"));
                CpuTopology {
                    cpu,
                    package: field("physical_package_id").and_then(|s| s.parse().ok()),
                    core: field("core_id").and_then(|s| s.parse().ok()),
                    siblings: field("thread_siblings_list"),
                }
            })
            .collect();
        let physical: BTreeSet<(u32, u32)> = topology
            .iter()
            .filter_map(|t| Some((t.package.unwrap_or(0), t.core?)))
            .collect();
        Machine {
            cpu: cpu_model(),
            cores: if cpus.is_empty() {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            } else {
                cpus.len()
            },
            physical_cores: physical.len(),
            kernel: kernel(),
            online: online.unwrap_or_default(),
            topology,
        }
    }

    /// The logical CPUs that share a core with `cpu` (itself included), as the OS lists them.
    fn siblings(&self, cpu: usize) -> BTreeSet<usize> {
        self.topology
            .iter()
            .find(|t| t.cpu == cpu)
            .and_then(|t| t.siblings.as_deref())
            .and_then(|s| parse_cpu_list(s).ok())
            .map_or_else(|| BTreeSet::from([cpu]), |v| v.into_iter().collect())
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| {
                    l.starts_with("model name")
                        || l.starts_with("Model")
                        || l.starts_with("Hardware")
                })
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

fn kernel() -> String {
    // SAFETY: an all-zero utsname is valid; uname fills it with NUL-terminated strings.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return std::env::consts::OS.to_owned();
    }
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {}", field(&uts.sysname), field(&uts.release))
}

/// The 1-minute load average (`/proc/loadavg`; 0 when unreadable).
pub fn load_average() -> f64 {
    read_trimmed("/proc/loadavg")
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The CPU time of the whole machine so far, from the first line of `/proc/stat`, in clock
/// ticks: all of it, and the part the hypervisor gave to other guests (steal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    pub total: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Reads `/proc/stat` (none when unreadable).
    pub fn read() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses the `cpu` line of `/proc/stat`: user nice system idle iowait irq softirq steal
    /// guest guest_nice. Guest time is already counted in user and nice, so the total leaves it
    /// out; a kernel that lists no steal column has none.
    pub fn parse(text: &str) -> Option<CpuTimes> {
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        if fields.len() < 4 {
            return None;
        }
        let counted = &fields[..fields.len().min(8)];
        Some(CpuTimes {
            total: counted.iter().sum(),
            steal: fields.get(7).copied().unwrap_or(0),
        })
    }

    /// The share of the CPU time from `self` to `later` that was stolen, in percent (none when
    /// no time passed).
    pub fn steal_pct(self, later: CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| steal as f64 * 100.0 / total as f64)
    }
}

/// Whether a machine with this 1-minute load average and this many online CPUs is too busy
/// for spinning rows and the floor to mean much: a load of half the CPUs or more.
pub fn busy(load_average: f64, cores: usize) -> bool {
    load_average >= cores as f64 / 2.0
}

/// The line that says so.
pub fn busy_warning(load_average: f64, cores: usize) -> Option<String> {
    busy(load_average, cores).then(|| {
        format!(
            "warning: this machine is busy (1-minute load average {load_average:.2} on {cores} \
             CPUs): spinning rows and the floor mean little now"
        )
    })
}

/// Parses a CPU list as the OS and `--pin` write it: `0,1`, `0-3`, `0-1,4`. Keeps the order
/// given, without repeats.
pub fn parse_cpu_list(list: &str) -> anyhow::Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (item, item),
        };
        let first: usize = first.parse().with_context(|| format!("bad CPU {item:?}"))?;
        let last: usize = last.parse().with_context(|| format!("bad CPU {item:?}"))?;
        if last < first || last >= libc::CPU_SETSIZE as usize {
            bail!("bad CPU range {item:?}");
        }
        for cpu in first..=last {
            if !cpus.contains(&cpu) {
                cpus.push(cpu);
            }
        }
    }
    if cpus.is_empty() {
        bail!("no CPU given");
    }
    Ok(cpus)
}

/// `--pin`: the CPUs chosen by the harness, or these (the parent's first, the children's
/// after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinRequest {
    /// `--pin` alone: the parent on the first CPU it may use, a child on the first one of
    /// another core (another CPU of the same core, or the same CPU, when there is none).
    Auto,
    /// `--pin 0,1`: the parent on the first, the children on the others in turn (all on the
    /// first when only one is given).
    Cpus(Vec<usize>),
}

impl std::str::FromStr for PinRequest {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<PinRequest> {
        match s.trim() {
            "" | "auto" => Ok(PinRequest::Auto),
            list => Ok(PinRequest::Cpus(parse_cpu_list(list)?)),
        }
    }
}

/// Where the processes of a run ran, as recorded in its document.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Pinning {
    /// Whether `--pin` placed the processes (otherwise the scheduler did, on `parent`).
    pub pinned: bool,
    /// The CPUs the parent (the server of a clients run) may run on.
    pub parent: Vec<usize>,
    /// The CPUs the children (the clients) ran on: each pinned child on one of them in turn.
    pub children: Vec<usize>,
}

/// The placement of a run's processes: applied to this process by [`Placement::apply`], to
/// each child by [`Placement::pin_child`].
#[derive(Debug, Clone)]
pub struct Placement {
    /// The children's CPUs in turn (empty: not pinned).
    children: Vec<usize>,
    record: Pinning,
}

impl Placement {
    /// Pins this process (and so every thread it starts from now on) as `request` says, or
    /// leaves it where it is.
    pub fn apply(request: Option<&PinRequest>, machine: &Machine) -> anyhow::Result<Placement> {
        let allowed = affinity(0).context("reading this process's CPU affinity")?;
        let Some(request) = request else {
            return Ok(Placement {
                children: Vec::new(),
                record: Pinning {
                    pinned: false,
                    parent: allowed.clone(),
                    children: allowed,
                },
            });
        };
        let (parent, children) = match request {
            PinRequest::Auto => {
                let Some(&parent) = allowed.first() else {
                    bail!("--pin: this process may run on no CPU");
                };
                let siblings = machine.siblings(parent);
                let child = allowed
                    .iter()
                    .copied()
                    .find(|c| !siblings.contains(c))
                    .or_else(|| allowed.iter().copied().find(|&c| c != parent))
                    .unwrap_or(parent);
                (parent, vec![child])
            }
            PinRequest::Cpus(cpus) => {
                if let Some(cpu) = cpus.iter().find(|c| !allowed.contains(c)) {
                    bail!("--pin: CPU {cpu} is not one this process may run on ({allowed:?})");
                }
                let children = if cpus.len() > 1 {
                    cpus[1..].to_vec()
                } else {
                    cpus.clone()
                };
                (cpus[0], children)
            }
        };
        set_affinity(0, &[parent]).context("--pin: pinning this process")?;
        let got = affinity(0).context("reading this process's CPU affinity")?;
        let mut children_sorted = children.clone();
        children_sorted.sort_unstable();
        children_sorted.dedup();
        Ok(Placement {
            children,
            record: Pinning {
                pinned: true,
                parent: got,
                children: children_sorted,
            },
        })
    }

    /// What the document records.
    pub fn record(&self) -> Pinning {
        self.record.clone()
    }

    /// The CPU child number `i` of a round runs on (none when not pinned).
    pub fn child_cpu(&self, i: usize) -> Option<usize> {
        (!self.children.is_empty()).then(|| self.children[i % self.children.len()])
    }

    /// Makes `command` start pinned to child number `i`'s CPU (when pinned): the child sets
    /// its own affinity between fork and exec, so every thread it ever has runs there.
    pub fn pin_child(&self, command: &mut Command, i: usize) {
        let Some(cpu) = self.child_cpu(i) else { return };
        let set = cpu_set(&[cpu]);
        // SAFETY: the closure runs in the forked child before exec and only calls
        // sched_setaffinity, a plain system call (async-signal-safe), on a set built before the
        // fork.
        unsafe {
            command.pre_exec(move || {
                if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Checks that child number `i`, spawned with [`pin_child`](Placement::pin_child) as
    /// `pid`, got its CPU (a child that has already exited is not judged).
    pub fn check_child(&self, pid: u32, i: usize) -> anyhow::Result<()> {
        let Some(cpu) = self.child_cpu(i) else {
            return Ok(());
        };
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return Ok(());
        };
        match affinity(pid) {
            Ok(got) if got != [cpu] => bail!("child {pid} runs on CPUs {got:?}, not on {cpu}"),
            _ => Ok(()),
        }
    }

    /// Pins the calling thread to the children's first CPU, for a limit row that stands for a
    /// second process with a thread of this one (when pinned).
    pub fn pin_thread_as_child(&self) -> std::io::Result<()> {
        match self.child_cpu(0) {
            Some(cpu) => set_affinity(0, &[cpu]),
            None => Ok(()),
        }
    }
}

fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `set` is a valid cpu_set_t; CPU_SET ignores CPUs past CPU_SETSIZE (and
        // `parse_cpu_list` refuses them).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    set
}

/// Pins the thread `tid` (0: the calling one) to `cpus`.
fn set_affinity(tid: libc::pid_t, cpus: &[usize]) -> std::io::Result<()> {
    let set = cpu_set(cpus);
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    if unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the thread `tid` (0: the calling one) may run on, in order.
fn affinity(tid: libc::pid_t) -> std::io::Result<Vec<usize>> {
    let mut set = cpu_set(&[]);
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    if unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `set` is a valid cpu_set_t and `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_is_busy_from_half_its_cpus_on() {
        assert!(!busy(0.0, 2));
        assert!(!busy(0.99, 2));
        assert!(busy(1.0, 2));
        assert!(busy(3.5, 2));
        assert!(!busy(3.9, 8));
        assert!(busy(4.0, 8));
        // One CPU: half a process waiting is already busy.
        assert!(busy(0.5, 1));
        assert!(busy_warning(0.2, 2).is_none());
        let line = busy_warning(1.25, 2).unwrap_or_default();
        assert!(line.contains("1.25") && line.contains("2 CPUs"), "{line}");
    }

    #[test]
    fn steal_is_the_stolen_share_of_the_ticks_between_two_readings() {
        let before = CpuTimes::parse(
            "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 17 0 0\nintr 1\n",
        );
        assert_eq!(
            before,
            Some(CpuTimes {
                total: 1000,
                steal: 35
            })
        );
        let after = CpuTimes::parse("cpu  150 0 70 900 10 0 5 65 40 0\n");
        // 200 ticks passed, 30 of them stolen; guest time is inside user and not counted twice.
        let pct = before.zip(after).and_then(|(b, a)| b.steal_pct(a));
        assert_eq!(pct, Some(15.0));
        // A kernel without the steal column, no time passed, or a line that is not numbers.
        let old = CpuTimes::parse("cpu  1 2 3 4\n");
        assert_eq!(old.map(|t| (t.total, t.steal)), Some((10, 0)));
        assert_eq!(old.and_then(|t| t.steal_pct(t)), None);
        assert_eq!(CpuTimes::parse("cpu  1 x 3 4\n"), None);
        assert_eq!(CpuTimes::parse("intr 1\n"), None);
        assert!(CpuTimes::read().is_some(), "/proc/stat");
    }

    #[test]
    fn cpu_lists_parse_as_the_os_writes_them() {
        assert_eq!(parse_cpu_list("0-1").ok(), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("1,0").ok(), Some(vec![1, 0]));
        assert_eq!(parse_cpu_list("0-2,5, 1").ok(), Some(vec![0, 1, 2, 5]));
        for bad in ["", "x", "2-1", "0-99999", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert_eq!("".parse::<PinRequest>().ok(), Some(PinRequest::Auto));
        assert_eq!(
            "0,1".parse::<PinRequest>().ok(),
            Some(PinRequest::Cpus(vec![0, 1]))
        );
    }

    #[test]
    fn the_machine_lists_its_online_cpus() {
        let m = Machine::read();
        assert!(m.cores >= 1);
        assert_eq!(m.topology.len(), m.cores, "{m:?}");
        assert!(!m.kernel.is_empty() && !m.cpu.is_empty());
    }
}
