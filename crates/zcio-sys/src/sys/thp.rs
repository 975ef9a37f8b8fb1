//! Transparent huge pages for shared memory: whether the kernel offers
//! them (`/sys/kernel/mm/transparent_hugepage/shmem_enabled`) and how much
//! of a mapping it really maps with them (`/proc/self/smaps`).
//!
//! A memfd is shared memory (shmem): its pages are huge only if the
//! system's `shmem_enabled` says `always`, `within_size`, `force`, or
//! `advise` and the mapping asked (`MADV_HUGEPAGE`); and a huge page is
//! mapped as one only at a 2 MiB-aligned address. zcio aligns and advises
//! every mapping of at least 2 MiB and otherwise falls back, silently, to
//! normal pages. Whether it worked is reported, not assumed.

use std::sync::OnceLock;

/// The PMD (huge page) size on x86-64 and most 64-bit Linux targets.
pub const HUGE: usize = 2 << 20;

/// What the kernel offers shared memory (`shmem_enabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmemHuge {
    /// `never` or `deny`, or the file is missing: normal pages only.
    Never,
    /// `advise`: huge pages for mappings that ask (`MADV_HUGEPAGE`).
    Advise,
    /// `always`, `within_size` or `force`: huge pages where they fit.
    Always,
}

impl ShmemHuge {
    /// Parse the file's text: the bracketed word is the one in effect.
    pub fn parse(text: &str) -> ShmemHuge {
        let chosen = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')));
        match chosen {
            Some("advise") => ShmemHuge::Advise,
            Some("always" | "within_size" | "force") => ShmemHuge::Always,
            _ => ShmemHuge::Never,
        }
    }

    /// Whether a mapping that aligns and advises can get huge pages.
    pub fn offered(self) -> bool {
        self != ShmemHuge::Never
    }

    /// The setting's name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            ShmemHuge::Never => "never",
            ShmemHuge::Advise => "advise",
            ShmemHuge::Always => "always",
        }
    }
}

/// The system's setting, read once per process.
pub fn shmem_huge() -> ShmemHuge {
    static MODE: OnceLock<ShmemHuge> = OnceLock::new();
    *MODE.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
            .map_or(ShmemHuge::Never, |t| ShmemHuge::parse(&t))
    })
}

/// Bytes of the mapping that starts at `addr` that the kernel maps with
/// huge pages now (`ShmemPmdMapped` + `FilePmdMapped` of its `smaps`
/// entry), or `None` if the entry is not found.
pub fn pmd_mapped_bytes(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    pmd_mapped_in(&smaps, addr)
}

fn pmd_mapped_in(smaps: &str, addr: usize) -> Option<u64> {
    let mut lines = smaps.lines();
    // Find the entry whose range starts at `addr`.
    lines.by_ref().find(|l| {
        l.split_once('-')
            .and_then(|(start, _)| usize::from_str_radix(start, 16).ok())
            == Some(addr)
    })?;
    let mut kib = 0;
    for l in lines {
        let Some((key, rest)) = l.split_once(':') else {
            break;
        };
        // The next entry's header ("start-end perms ...") has no ':'
        // before the range ends; field lines are "Key:   N kB".
        if key.contains(' ') || key.contains('-') {
            break;
        }
        if key == "ShmemPmdMapped" || key == "FilePmdMapped" {
            kib += rest
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap_or(0);
        }
        if key == "VmFlags" {
            break;
        }
    }
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bracketed_word_is_the_setting() {
        assert_eq!(
            ShmemHuge::parse("always within_size advise [never] deny force\n"),
            ShmemHuge::Never
        );
        assert_eq!(
            ShmemHuge::parse("always within_size [advise] never deny force"),
            ShmemHuge::Advise
        );
        assert_eq!(ShmemHuge::parse("[within_size] never"), ShmemHuge::Always);
        assert_eq!(ShmemHuge::parse(""), ShmemHuge::Never);
        assert!(!ShmemHuge::Never.offered() && ShmemHuge::Advise.offered());
    }

    #[test]
    fn smaps_entries_are_read_for_the_right_mapping_only() {
        let smaps = "\
7f0000000000-7f0000400000 rw-s 00000000 00:01 5 /memfd:zcio (deleted)
Size:               4096 kB
ShmemPmdMapped:     2048 kB
FilePmdMapped:         0 kB
VmFlags: rd wr sh mr mw me ms hg
7f0000400000-7f0000800000 rw-s 00000000 00:01 6 /memfd:zcio (deleted)
Size:               4096 kB
ShmemPmdMapped:     4096 kB
VmFlags: rd wr sh
";
        assert_eq!(pmd_mapped_in(smaps, 0x7f00_0000_0000), Some(2048 * 1024));
        assert_eq!(pmd_mapped_in(smaps, 0x7f00_0040_0000), Some(4096 * 1024));
        assert_eq!(pmd_mapped_in(smaps, 0x1000), None);
    }
}
