//! Processes of one measurement: spawn, wait with a bound, and read the
//! CPU time of a child and of everything it waited for (`wait4`).

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::task::Spec;

/// What a reaped child used.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// User CPU seconds (the child and the children it waited for).
    pub user_s: f64,
    /// System CPU seconds (the same).
    pub sys_s: f64,
}

impl Usage {
    /// User + system seconds.
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

/// A running child that is killed and reaped if dropped before
/// [`Proc::wait`] reaped it.
pub struct Proc {
    child: Child,
    what: String,
    started: Instant,
    reaped: bool,
    /// Where its stderr goes (shown in failures), if captured.
    errlog: Option<std::path::PathBuf>,
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

impl Proc {
    /// Spawn `cmd` (stdin null; stdout piped; stderr to `errlog` if given,
    /// else inherited), named `what` in messages.
    pub fn spawn(
        cmd: &mut Command,
        what: impl Into<String>,
        errlog: Option<&Path>,
    ) -> Result<Self, String> {
        let what = what.into();
        cmd.stdin(Stdio::null()).stdout(Stdio::piped());
        match errlog {
            Some(p) => {
                let f = File::create(p).map_err(|e| format!("create {}: {e}", p.display()))?;
                cmd.stderr(f);
            }
            None => {
                cmd.stderr(Stdio::inherit());
            }
        }
        let started = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("{what}: cannot start {:?}: {e}", cmd.get_program()))?;
        Ok(Self {
            child,
            what,
            started,
            reaped: false,
            errlog: errlog.map(Path::to_path_buf),
        })
    }

    /// Spawn this binary as a child of the splice bench running `spec`
    /// (`prefix`: a command that runs it, e.g. `ip netns exec NS`).
    pub fn spawn_task(spec: &Spec, prefix: &[String], what: &str) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let json = crate::child::json(spec)?;
        let mut cmd = match prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.arg(super::CHILD_ARG).arg(json);
        Self::spawn(&mut cmd, what, None)
    }

    /// Its process id (valid until it is reaped by [`Proc::wait`]; an
    /// exited child stays a zombie until then, its `/proc` entry readable).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Send SIGTERM (no effect once it exited).
    pub fn terminate(&self) {
        if self.reaped {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }

    /// `wait4(pid, options)`: `Some((status, usage))` once reaped.
    fn wait4(&mut self, options: i32) -> Result<Option<(i32, libc::rusage)>, String> {
        let mut status = 0i32;
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        loop {
            // `status` and `ru` are valid, writable objects of the types
            // wait4 fills; the pid is our own unreaped child (`reaped` is
            // false, and only this function reaps it).
            // SAFETY: as argued just above.
            let r = unsafe {
                libc::wait4(
                    self.child.id() as libc::pid_t,
                    &mut status,
                    options,
                    ru.as_mut_ptr(),
                )
            };
            if r == 0 {
                return Ok(None);
            }
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("{}: wait4: {e}", self.what));
            }
            self.reaped = true;
            // Zero-initialised above and filled by the kernel on success;
            // a rusage is plain integers, valid for any bits.
            // SAFETY: as argued just above.
            return Ok(Some((status, unsafe { ru.assume_init() })));
        }
    }

    fn errtail(&self) -> String {
        let Some(p) = &self.errlog else {
            return " (its error is printed above)".into();
        };
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            let tail: String = text
                .chars()
                .rev()
                .take(600)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!(": {tail}")
        }
    }

    /// Wait (at most `timeout`) for it to exit; kill it when the bound
    /// passes. Fails unless it exited with status 0. Returns its usage and
    /// what it printed on stdout.
    pub fn wait(mut self, timeout: Duration) -> Result<(Usage, String), String> {
        let deadline = Instant::now() + timeout;
        let pidfd = rustix::process::Pid::from_raw(self.child.id() as i32).and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
        });
        let (status, ru) = loop {
            if let Some(r) = self.wait4(libc::WNOHANG)? {
                break r;
            }
            let now = Instant::now();
            if now >= deadline {
                let _ = self.child.kill();
                let _ = self.wait4(0);
                return Err(format!(
                    "{} did not finish within {timeout:?}; killed",
                    self.what
                ));
            }
            let left = (deadline - now).min(Duration::from_millis(100));
            match &pidfd {
                // Readable when the process exits: no polling delay.
                Some(fd) => {
                    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                    let ts = rustix::time::Timespec {
                        tv_sec: left.as_secs() as i64,
                        tv_nsec: i64::from(left.subsec_nanos()),
                    };
                    let _ = rustix::event::poll(&mut fds, Some(&ts));
                }
                None => std::thread::sleep(left.min(Duration::from_millis(1))),
            }
        };
        let usage = Usage {
            wall: self.started.elapsed(),
            user_s: tv(ru.ru_utime),
            sys_s: tv(ru.ru_stime),
        };
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok((usage, out))
        } else if libc::WIFEXITED(status) {
            Err(format!(
                "{} exited with status {}{}",
                self.what,
                libc::WEXITSTATUS(status),
                self.errtail()
            ))
        } else {
            Err(format!(
                "{} was killed by signal {}{}",
                self.what,
                libc::WTERMSIG(status),
                self.errtail()
            ))
        }
    }

    /// Read one line from its stdout within `timeout` (e.g. `listening on
    /// ADDR`), without the newline.
    pub fn read_line(&mut self, timeout: Duration) -> Result<String, String> {
        let what = self.what.clone();
        let Some(out) = self.child.stdout.as_mut() else {
            return Err(format!("{what}: stdout not piped"));
        };
        read_line_bounded(out, timeout).map_err(|e| format!("{what}: {e}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.wait4(0);
        }
    }
}

/// Read bytes up to a newline from `r` within `timeout` (a line a child
/// prints once, so reading byte by byte is fine).
pub fn read_line_bounded(r: &mut ChildStdout, timeout: Duration) -> Result<String, String> {
    let deadline = Instant::now() + timeout;
    let mut line = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "printed no line within {timeout:?} (got {:?})",
                String::from_utf8_lossy(&line)
            ));
        }
        let fd = r.as_fd();
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let ts = rustix::time::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        let mut b = [0u8; 1];
        match r.read(&mut b) {
            Ok(0) => {
                return Err(format!(
                    "exited before printing a line (got {:?})",
                    String::from_utf8_lossy(&line)
                ))
            }
            Ok(_) if b[0] == b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
            Ok(_) => line.push(b[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
        if line.len() > 4096 {
            return Err("line longer than 4 KiB".into());
        }
    }
}
