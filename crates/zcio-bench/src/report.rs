//! Shared pieces of benchmark output: the machine description and number
//! formatting (the plots are drawn by [`crate::plot`]).

/// A one-line description of this machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let cpus = crate::affinity::allowed_cpus();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    format!(
        "{cpu}, {} CPUs, {:.0} GiB RAM, Linux {kernel}",
        cpus.len(),
        mem as f64 / (1024.0 * 1024.0)
    )
}

/// Three significant digits: `31.6`, `0.123`, `1234`.
pub fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}
