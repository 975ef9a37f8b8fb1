//! "Host A" and "host B": two network namespaces joined by a veth pair
//! (the splice bench's [`Veth`], generalised to two namespaces), or
//! loopback where the bench cannot create them. Each host's processes are
//! pinned to a CPU of their own (A: `cpu_for(0)`, B: `cpu_for(1)`); this
//! module starts them there, reads their CPU time (`/proc/PID/stat`) and
//! the bytes that crossed into B.

use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::affinity::cpu_for;
use crate::splice::netns::{self, Veth};
use crate::splice::proc::Proc;

/// One of the two hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// The sending side.
    A,
    /// The receiving side.
    B,
}

impl Host {
    /// "A" or "B".
    pub fn name(self) -> &'static str {
        match self {
            Host::A => "A",
            Host::B => "B",
        }
    }

    /// The CPU its processes are pinned to.
    pub fn cpu(self) -> usize {
        match self {
            Host::A => cpu_for(0),
            Host::B => cpu_for(1),
        }
    }
}

/// The two hosts of a run.
#[derive(Debug)]
pub struct Hosts {
    veth: Option<Veth>,
    /// Why the run uses loopback (`None` with the veth pair).
    pub loopback_why: Option<String>,
}

impl Hosts {
    /// Two namespaces and a veth pair if `veth` and permitted, else
    /// loopback (the reason kept for the notes).
    pub fn setup(veth: bool) -> Self {
        let why = if veth {
            match netns::unavailable() {
                Some(why) => why,
                None => {
                    let stale = netns::remove_stale();
                    if stale > 0 {
                        eprintln!("removed {stale} network namespaces left by killed runs");
                    }
                    match Veth::create_pair() {
                        Ok(v) => {
                            return Self {
                                veth: Some(v),
                                loopback_why: None,
                            }
                        }
                        Err(e) => format!("could not set up the namespaces: {e}"),
                    }
                }
            }
        } else {
            "--no-veth".into()
        };
        eprintln!("host A and host B on loopback: {why}");
        Self {
            veth: None,
            loopback_why: Some(why),
        }
    }

    /// `veth` or `loopback` (tables and JSON).
    pub fn link(&self) -> &'static str {
        if self.veth.is_some() {
            "veth"
        } else {
            "loopback"
        }
    }

    /// One line on what the hosts are.
    pub fn describe(&self) -> String {
        match (&self.veth, &self.loopback_why) {
            (Some(v), _) => format!(
                "host A = network namespace {} ({} on {}), host B = network namespace {} ({} on \
                 {}), joined by a veth pair (MTU 1500); A's processes pinned to CPU {}, B's to \
                 CPU {}",
                v.a.ns.as_deref().unwrap_or("root"),
                v.a.ip,
                v.a.ifname,
                v.b.ns.as_deref().unwrap_or("root"),
                v.b.ip,
                v.b.ifname,
                Host::A.cpu(),
                Host::B.cpu()
            ),
            (None, why) => format!(
                "host A and host B share loopback (127.0.0.1) in the root namespace ({}); A's \
                 processes pinned to CPU {}, B's to CPU {}",
                why.as_deref().unwrap_or("?"),
                Host::A.cpu(),
                Host::B.cpu()
            ),
        }
    }

    /// The address of `host`.
    pub fn ip(&self, host: Host) -> String {
        match (&self.veth, host) {
            (Some(v), Host::A) => v.a.ip.clone(),
            (Some(v), Host::B) => v.b.ip.clone(),
            (None, _) => "127.0.0.1".into(),
        }
    }

    /// `program args…` as a command that runs on `host`: in its namespace
    /// (`ip netns exec`, which executes the program in the same process)
    /// and pinned to its CPU.
    pub fn command(&self, host: Host, program: &std::ffi::OsStr) -> Command {
        let prefix = match (&self.veth, host) {
            (Some(v), Host::A) => v.a.exec_prefix(),
            (Some(v), Host::B) => v.b.exec_prefix(),
            (None, _) => Vec::new(),
        };
        let mut cmd = match prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        };
        let mut set = rustix::thread::CpuSet::new();
        set.set(host.cpu());
        // The closure runs in the forked child before exec: it only makes
        // the sched_setaffinity system call on a set built beforehand (no
        // allocation, no lock), which is async-signal-safe; the affinity
        // is inherited by what the child executes.
        // SAFETY: as argued just above.
        unsafe {
            cmd.pre_exec(move || {
                rustix::thread::sched_setaffinity(None, &set).map_err(std::io::Error::from)
            });
        }
        cmd
    }

    /// Start this binary as a bridge-bench child on `host`, running `spec`.
    pub fn spawn_child(&self, host: Host, spec: &super::Spec, what: &str) -> Result<Proc, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = self.command(host, exe.as_os_str());
        cmd.arg(super::CHILD_ARG).arg(crate::child::json(spec)?);
        Proc::spawn(&mut cmd, what, None)
    }

    /// Bytes received by B from the link so far: B's veth end's
    /// `rx_bytes`; on loopback, `lo`'s `rx_bytes` (every loopback packet of
    /// the machine, counted once).
    pub fn rx_bytes_b(&self) -> Result<u64, String> {
        match &self.veth {
            Some(v) => v.b.byte_counters().map(|(rx, _)| rx),
            None => {
                let p = "/sys/class/net/lo/statistics/rx_bytes";
                std::fs::read_to_string(p)
                    .map_err(|e| format!("read {p}: {e}"))?
                    .trim()
                    .parse()
                    .map_err(|e| format!("{p}: {e}"))
            }
        }
    }
}

/// User + system CPU seconds of process `pid` so far, all its threads
/// (live and exited) included, from `/proc/PID/stat` (clock ticks). An
/// exited child that was not reaped yet still has its entry.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / ticks_per_second())
}

/// `sysconf(_SC_CLK_TCK)`: the unit of `/proc/PID/stat`'s CPU times.
pub fn ticks_per_second() -> f64 {
    // sysconf reads a constant of the C library; no pointers involved.
    // SAFETY: as argued just above.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_cpu_time_is_readable() {
        let t0 = cpu_seconds(std::process::id()).expect("our /proc entry");
        let mut x = 0u64;
        let start = std::time::Instant::now();
        let mut t1 = t0;
        // Spin until the clock-tick counters move (bounded: a loaded
        // machine may give us little CPU).
        while t1 - t0 < 0.02 && start.elapsed() < std::time::Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            t1 = cpu_seconds(std::process::id()).unwrap();
        }
        assert!(t1 - t0 >= 0.02, "{t0} → {t1}");
        assert!(cpu_seconds(u32::MAX).is_none());
    }
}
