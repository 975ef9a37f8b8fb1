//! Network namespaces joined by a veth pair, for the benchmarks that cross
//! a (virtual) link: part (d) of the splice bench ([`Veth::create`]: one
//! end in the root namespace, the other in namespace `zcio-bench-PID`) and
//! `zcio-bench bridge` ([`Veth::create_pair`]: two namespaces,
//! `zcio-bench-PID-a` and `zcio-bench-PID-b`, "host A" and "host B").
//! Addresses are in 10.250.X.0/30. Created only as root with `ip(8)`
//! present; deleted (with the pair) when dropped, also when a panic
//! unwinds; namespaces left by runs that were killed are removed at the
//! next start.

use std::process::{Command, Stdio};

/// Prefix of the namespaces this bench creates.
const PREFIX: &str = "zcio-bench-";

/// One end of a veth pair.
#[derive(Debug, Clone)]
pub struct End {
    /// The namespace it is in (`None`: the root namespace).
    pub ns: Option<String>,
    /// Its interface.
    pub ifname: String,
    /// Its address.
    pub ip: String,
}

impl End {
    /// The command prefix that runs a program beside this end (`ip netns
    /// exec NS`; empty in the root namespace).
    pub fn exec_prefix(&self) -> Vec<String> {
        match &self.ns {
            Some(ns) => vec!["ip".into(), "netns".into(), "exec".into(), ns.clone()],
            None => Vec::new(),
        }
    }

    /// The interface's byte counters `(rx_bytes, tx_bytes)`, read in its
    /// namespace (`ip -n NS -s -j link show dev IF`).
    pub fn byte_counters(&self) -> Result<(u64, u64), String> {
        let mut args: Vec<&str> = Vec::new();
        if let Some(ns) = &self.ns {
            args.extend(["-n", ns.as_str()]);
        }
        args.extend(["-s", "-j", "link", "show", "dev", self.ifname.as_str()]);
        let out = ip_output(&args)?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
        let stats = &v[0]["stats64"];
        let get = |dir: &str| {
            stats[dir]["bytes"]
                .as_u64()
                .ok_or_else(|| format!("ip {}: no stats64.{dir}.bytes", args.join(" ")))
        };
        Ok((get("rx")?, get("tx")?))
    }
}

fn ip_output(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    ip_output(args).map(drop)
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

/// The pid in a namespace name `zcio-bench-PID` or `zcio-bench-PID-TAG`.
fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let pid = rest.split_once('-').map_or(rest, |(p, _)| p);
    pid.parse().ok()
}

/// Delete namespaces `zcio-bench-PID[-TAG]` whose process is gone.
pub fn remove_stale() -> usize {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return 0;
    };
    let mut n = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = owner(name) else {
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

/// A veth pair between two namespaces (one of them may be the root
/// namespace), addresses on both ends, everything up.
#[derive(Debug)]
pub struct Veth {
    /// The first end (the root namespace's for [`Veth::create`]).
    pub a: End,
    /// The second end (always in a namespace this bench created).
    pub b: End,
    /// The namespaces created (deleted when dropped).
    created: Vec<String>,
}

impl Veth {
    /// A namespace `zcio-bench-PID` with one end of the pair (`b`), the
    /// other end (`a`) in the root namespace (splice part (d)).
    pub fn create() -> Result<Self, String> {
        Self::build(false)
    }

    /// Two namespaces, `zcio-bench-PID-a` and `zcio-bench-PID-b`, one end
    /// of the pair in each: two hosts on one link (the bridge bench).
    pub fn create_pair() -> Result<Self, String> {
        Self::build(true)
    }

    fn build(both: bool) -> Result<Self, String> {
        let pid = std::process::id();
        let x = pid % 64 * 4;
        let y = (pid / 64) % 250;
        let ns_b = if both {
            format!("{PREFIX}{pid}-b")
        } else {
            format!("{PREFIX}{pid}")
        };
        let ns_a = both.then(|| format!("{PREFIX}{pid}-a"));
        let mut v = Veth {
            a: End {
                ns: ns_a.clone(),
                ifname: format!("zb{pid}a"),
                ip: format!("10.250.{y}.{}", x + 1),
            },
            b: End {
                ns: Some(ns_b.clone()),
                ifname: format!("zb{pid}b"),
                ip: format!("10.250.{y}.{}", x + 2),
            },
            created: Vec::new(),
        };
        // From each `netns add` on, dropping `v` deletes what exists.
        for ns in ns_a.iter().chain([&ns_b]) {
            ip(&["netns", "add", ns])?;
            v.created.push(ns.clone());
        }
        // `ip link add IF [netns A] type veth peer name IF-B netns B`.
        let mut add = vec!["link", "add", v.a.ifname.as_str()];
        if let Some(a) = &ns_a {
            add.extend(["netns", a.as_str()]);
        }
        add.extend([
            "type",
            "veth",
            "peer",
            "name",
            v.b.ifname.as_str(),
            "netns",
            ns_b.as_str(),
        ]);
        ip(&add)?;
        for end in [&v.a, &v.b] {
            let nsx = |args: &[&str]| {
                let mut a: Vec<&str> = Vec::new();
                if let Some(ns) = &end.ns {
                    a.extend(["-n", ns.as_str()]);
                }
                a.extend_from_slice(args);
                ip(&a)
            };
            nsx(&["addr", "add", &format!("{}/30", end.ip), "dev", &end.ifname])?;
            nsx(&["link", "set", &end.ifname, "up"])?;
            if end.ns.is_some() {
                nsx(&["link", "set", "lo", "up"])?;
            }
        }
        Ok(v)
    }

    /// The namespace of the `b` end (splice: where generator and sink run).
    pub fn name(&self) -> &str {
        self.b.ns.as_deref().unwrap_or("")
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        // Deleting a namespace destroys its veth end, and with it the pair.
        for ns in &self.created {
            let _ = ip(&["netns", "del", ns]);
        }
        if self.a.ns.is_none() {
            let _ = ip(&["link", "del", &self.a.ifname]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_names_give_their_owner() {
        assert_eq!(owner("zcio-bench-1234"), Some(1234));
        assert_eq!(owner("zcio-bench-1234-a"), Some(1234));
        assert_eq!(owner("zcio-bench-x"), None);
        assert_eq!(owner("other-1234"), None);
    }
}
