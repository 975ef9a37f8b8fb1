//! A lane the peer offered: its control segment and slots, validated and
//! mapped when the offer arrives, kept by the channel end until the lane
//! is accepted.

use std::os::fd::OwnedFd;

use rustix::fs::SealFlags;

use crate::channel::lane::wire::{LaneHeader, LaneLayout, MAX_SEGMENT_LEN};
use crate::region::Region;
use crate::sys::memfd;
use crate::sys::mmap::{Access, Mapping};

/// A lane the peer offered, validated and mapped, not yet accepted.
pub(crate) struct Offered {
    pub(crate) seg: Mapping,
    pub(crate) data: Region,
    pub(crate) layout: LaneLayout,
    /// The segment memfd's inode: the lane's id, alike at both ends.
    pub(crate) ino: u64,
}

impl Offered {
    /// Validate and map a lane the peer passed: `seg_fd` its control
    /// segment (read-write), `data_fd` its slots (read-only). `None` for
    /// anything that does not check out (the fds are closed).
    pub(crate) fn attach(
        slots: u32,
        slot_size: u64,
        seg_len: u64,
        seg_fd: OwnedFd,
        data_fd: OwnedFd,
        max_region_len: u64,
    ) -> Option<Self> {
        let want = LaneLayout::new(slots, slot_size)?;
        if want.total_len as u64 != seg_len
            || seg_len > MAX_SEGMENT_LEN
            || want.data_len as u64 > max_region_len
        {
            return None;
        }
        // Sealed against resizing: no holder of any fd can truncate the
        // segment under our mapping.
        let seals = memfd::seals(&seg_fd).ok()?;
        if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
            return None;
        }
        let actual = memfd::size(&seg_fd).ok()?;
        if actual < seg_len {
            return None;
        }
        let seg = Mapping::map(&seg_fd, seg_len as usize, Access::ReadWrite, true).ok()?;
        let ino = crate::segment::inode(&seg_fd);
        // The mapping is page-aligned and at least one page; `LaneHeader`
        // is Pod, so any bytes are a valid value. Copied out once, the copy
        // is validated.
        // SAFETY: as argued just above.
        let header = unsafe { seg.as_ptr().cast::<LaneHeader>().read_volatile() };
        let layout = LaneLayout::from_header(&header, actual).filter(|l| *l == want)?;
        // Region::attach checks the real size against the claim and maps
        // the slots read-only (a foreign region); a region that can shrink
        // is refused there too.
        let data = Region::attach(data_fd, layout.data_len as u64, true).ok()?;
        (data.len() >= layout.data_len).then_some(Self {
            seg,
            data,
            layout,
            ino,
        })
    }
}
