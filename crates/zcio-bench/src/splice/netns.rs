//! The network namespace of part (d)'s veth link: `zcio-bench-PID` with
//! one end of a veth pair (`ns_ip`), the other end in the root namespace
//! (`root_ip`), addresses in 10.250.X.0/30. Created only as root with
//! `ip(8)` present; deleted (with the pair) when dropped, also when a panic
//! unwinds; namespaces left by runs that were killed are removed at the
//! next start.

use std::process::{Command, Stdio};

/// Prefix of the namespaces this bench creates.
const PREFIX: &str = "zcio-bench-";

/// A namespace with a veth pair to the root namespace.
#[derive(Debug)]
pub struct Veth {
    /// The namespace's name.
    pub name: String,
    /// The root-namespace end's address (the relay binds it).
    pub root_ip: String,
    /// The namespace end's address (generator and sink bind it).
    pub ns_ip: String,
    root_if: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why the veth link cannot be set up here (`None`: it can be tried).
pub fn unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not running as root (needed to create a network namespace)".into());
    }
    match Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        _ => Some("ip(8) not found (iproute2)".into()),
    }
}

/// Delete namespaces `zcio-bench-PID` whose process is gone.
pub fn remove_stale() -> usize {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return 0;
    };
    let mut n = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists()
            && ip(&["netns", "del", name]).is_ok()
        {
            n += 1;
        }
    }
    n
}

impl Veth {
    /// Create the namespace and the pair, bring them up.
    pub fn create() -> Result<Self, String> {
        let pid = std::process::id();
        let name = format!("{PREFIX}{pid}");
        let x = pid % 64 * 4;
        let y = (pid / 64) % 250;
        let v = Veth {
            name: name.clone(),
            root_ip: format!("10.250.{y}.{}", x + 1),
            ns_ip: format!("10.250.{y}.{}", x + 2),
            root_if: format!("zb{pid}a"),
        };
        let ns_if = format!("zb{pid}b");
        ip(&["netns", "add", &name])?;
        // From here on, dropping `v` deletes the namespace.
        ip(&[
            "link", "add", &v.root_if, "type", "veth", "peer", "name", &ns_if, "netns", &name,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/30", v.root_ip),
            "dev",
            &v.root_if,
        ])?;
        ip(&["link", "set", &v.root_if, "up"])?;
        let nsx = |args: &[&str]| {
            let mut a = vec!["netns", "exec", &name, "ip"];
            a.extend_from_slice(args);
            ip(&a)
        };
        nsx(&["addr", "add", &format!("{}/30", v.ns_ip), "dev", &ns_if])?;
        nsx(&["link", "set", &ns_if, "up"])?;
        nsx(&["link", "set", "lo", "up"])?;
        Ok(v)
    }

    /// The command prefix that runs a program inside the namespace.
    pub fn exec_prefix(&self) -> Vec<String> {
        vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.name.clone(),
        ]
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        // Deleting the namespace destroys its veth end, and with it the pair.
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.root_if]);
    }
}
