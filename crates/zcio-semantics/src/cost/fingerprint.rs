//! What identifies the machine a cost model (and a calibration file)
//! describes.

use std::sync::OnceLock;

/// What identifies the machine a calibration is valid for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct Fingerprint {
    /// Page size in bytes.
    pub page_size: u64,
    /// `model name` from `/proc/cpuinfo` (empty if absent).
    pub cpu_model: String,
    /// Online logical CPUs.
    pub logical_cpus: u64,
    /// `uname -r`.
    pub kernel_release: String,
}

impl Fingerprint {
    /// This machine's fingerprint, read afresh (`/proc/cpuinfo`, the
    /// kernel release, the online CPUs).
    pub fn current() -> Fingerprint {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_default();
        let kernel_release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        // SAFETY: sysconf only reads a configuration value.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        Fingerprint {
            page_size: crate::sys::page_size() as u64,
            cpu_model,
            logical_cpus: u64::try_from(cpus).unwrap_or(0),
            kernel_release,
        }
    }

    /// This machine's fingerprint, read once per process on first use
    /// (what every [`super::CostModel`] describes and what a calibration
    /// file is checked against).
    pub(super) fn here() -> &'static Fingerprint {
        static HERE: OnceLock<Fingerprint> = OnceLock::new();
        HERE.get_or_init(Fingerprint::current)
    }

    /// The first field that differs from `other`, described.
    pub fn mismatch(&self, other: &Fingerprint) -> Option<String> {
        if self.page_size != other.page_size {
            return Some(format!(
                "page size {} here, {} in the file",
                other.page_size, self.page_size
            ));
        }
        if self.cpu_model != other.cpu_model {
            return Some(format!(
                "CPU '{}' here, '{}' in the file",
                other.cpu_model, self.cpu_model
            ));
        }
        if self.logical_cpus != other.logical_cpus {
            return Some(format!(
                "{} CPUs here, {} in the file",
                other.logical_cpus, self.logical_cpus
            ));
        }
        if self.kernel_release != other.kernel_release {
            return Some(format!(
                "kernel {} here, {} in the file",
                other.kernel_release, self.kernel_release
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc/cpuinfo: refused by Miri's isolation")]
    fn here_is_this_machine_and_mismatches_are_named() {
        let here = Fingerprint::here();
        assert_eq!(here.mismatch(&Fingerprint::current()), None);
        assert_eq!(here.page_size, crate::sys::page_size() as u64);
        let other = Fingerprint {
            logical_cpus: here.logical_cpus + 1,
            ..here.clone()
        };
        let why = other.mismatch(here).unwrap();
        assert!(why.contains("CPUs"), "{why}");
    }
}
