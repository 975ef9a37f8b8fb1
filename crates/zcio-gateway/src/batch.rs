//! Batched datagram I/O for the fast gateway: `recvmmsg(2)` into a
//! page-aligned arena of 64 KiB slots, and `sendmmsg(2)` straight from the
//! same slots, with runs of equal-size datagrams sent as one UDP GSO unit
//! (`UDP_SEGMENT` control message, Linux ≥ 4.18); a lone datagram goes
//! out with `send(2)`.
//!
//! rustix has no `recvmmsg` and no typed control messages for
//! `SO_RXQ_OVFL`/`UDP_SEGMENT`, so the calls go through `libc`; every
//! pointer handed to the kernel points into memory this struct owns
//! (heap allocations that do not move when the struct does).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::{null_mut, NonNull};

use zcio::Errno;

/// Bytes per arena slot: any UDP payload fits (65507 over IPv4, 65527
/// over IPv6 without jumbograms).
pub(crate) const SLOT: usize = 1 << 16;
/// Most segments in one GSO unit (the kernel's `UDP_MAX_SEGMENTS` is 64
/// on older kernels, 128 on newer ones).
pub(crate) const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes in one GSO unit (the IP length field bounds the
/// whole super-datagram; kept below 65507 for both families).
pub(crate) const GSO_MAX_BYTES: usize = 65000;

/// `SO_RXQ_OVFL` (asm-generic and x86/arm/riscv/powerpc/mips: 40; sparc:
/// 0x24); the `libc` crate does not export it for glibc targets.
#[cfg(not(target_arch = "sparc64"))]
pub(crate) const SO_RXQ_OVFL: libc::c_int = 40;
#[cfg(target_arch = "sparc64")]
pub(crate) const SO_RXQ_OVFL: libc::c_int = 0x24;
/// `UDP_SEGMENT` (include/uapi/linux/udp.h).
pub(crate) const UDP_SEGMENT: libc::c_int = 103;

/// A control-message buffer, aligned for `cmsghdr`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(crate) struct Ctrl(pub(crate) [u8; 64]);

// SAFETY: CMSG_SPACE is pure arithmetic on its argument.
const GSO_CMSG_SPACE: usize = unsafe { libc::CMSG_SPACE(2) } as usize;
// SAFETY: CMSG_LEN is pure arithmetic on its argument.
const GSO_CMSG_LEN: usize = unsafe { libc::CMSG_LEN(2) } as usize;
const _: () = assert!(GSO_CMSG_SPACE <= 64);

/// Set `SO_RXQ_OVFL` on `fd`: every received datagram then carries the
/// socket's cumulative count of datagrams the kernel dropped.
pub(crate) fn enable_rxq_ovfl(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let one: libc::c_int = 1;
    // SAFETY: `fd` is a live descriptor; the option value is a c_int that
    // lives across the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_RXQ_OVFL,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw_os_error(last_errno()))
    }
}

/// Probe UDP GSO: kernels without it refuse the `UDP_SEGMENT` option with
/// `ENOPROTOOPT`. Setting it to 0 leaves the socket unchanged.
pub(crate) fn probe_gso(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let zero: libc::c_int = 0;
    // SAFETY: as in `enable_rxq_ovfl`.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            (&raw const zero).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw_os_error(last_errno()))
    }
}

/// `SO_MEMINFO` (Linux ≥ 4.7) and the index of the drop counter in the
/// array it returns (`SK_MEMINFO_DROPS`, include/uapi/linux/sock_diag.h).
const SO_MEMINFO: libc::c_int = 55;
const SK_MEMINFO_DROPS: usize = 8;

/// The socket's cumulative drop count now (the counter `SO_RXQ_OVFL`
/// reports), without waiting for a datagram to carry it; `None` if the
/// kernel cannot tell.
pub(crate) fn socket_drops(fd: BorrowedFd<'_>) -> Option<u32> {
    let mut v = [0u32; 16];
    let mut len = size_of_val(&v) as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes across the call; the kernel
    // writes at most `len` and updates it.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr().cast(),
            &raw mut len,
        )
    };
    (r == 0 && len as usize >= (SK_MEMINFO_DROPS + 1) * 4).then(|| v[SK_MEMINFO_DROPS])
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The cumulative kernel drop count in a received message's control data,
/// if the kernel attached one.
///
/// # Safety
///
/// `hdr` must describe a control buffer (`msg_control`, `msg_controllen`)
/// that the kernel filled in by a successful receive call.
pub(crate) unsafe fn rxq_ovfl(hdr: &libc::msghdr) -> Option<u32> {
    let mut found = None;
    // SAFETY: the caller guarantees the control buffer was filled by the
    // kernel; CMSG_FIRSTHDR/NXTHDR stay within msg_controllen.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(hdr) };
    while !c.is_null() {
        // SAFETY: `c` is non-null and points at a complete cmsghdr inside
        // the buffer (CMSG_FIRSTHDR/NXTHDR check the header fits).
        let h = unsafe { c.read_unaligned() };
        if h.cmsg_level == libc::SOL_SOCKET
            && h.cmsg_type == SO_RXQ_OVFL
            // SAFETY: pure arithmetic.
            && h.cmsg_len as usize >= unsafe { libc::CMSG_LEN(4) } as usize
        {
            // SAFETY: cmsg_len says 4 data bytes follow the header.
            found = Some(unsafe { libc::CMSG_DATA(c).cast::<u32>().read_unaligned() });
        }
        // SAFETY: `c` came from CMSG_FIRSTHDR/NXTHDR of this header.
        c = unsafe { libc::CMSG_NXTHDR(hdr, c) };
    }
    found
}

/// One `recvmsg` into `buf` (plain mode): the datagram's length, the
/// cumulative kernel drop count if attached, and whether it was cut short.
pub(crate) fn recv_one(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    ctrl: &mut Ctrl,
) -> Result<(usize, Option<u32>, bool), Errno> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &raw mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = ctrl.0.as_mut_ptr().cast();
    hdr.msg_controllen = size_of::<Ctrl>() as _;
    // SAFETY: the header's iovec points at `buf` (its length given) and its
    // control pointer at `ctrl`, both borrowed mutably across the call.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &raw mut hdr, 0) };
    if r < 0 {
        return Err(Errno::from_raw_os_error(last_errno()));
    }
    // SAFETY: the kernel filled the control buffer in the call above.
    let drops = unsafe { rxq_ovfl(&hdr) };
    Ok((
        (r as usize).min(buf.len()),
        drops,
        hdr.msg_flags & libc::MSG_TRUNC != 0,
    ))
}

/// A page-aligned, private, anonymous mapping (pages appear on first use).
struct Arena {
    ptr: NonNull<u8>,
    len: usize,
}

impl Arena {
    fn new(len: usize) -> Result<Self, Errno> {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // aliases nothing.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }?;
        Ok(Self {
            ptr: NonNull::new(p.cast()).ok_or(Errno::NOMEM)?,
            len,
        })
    }

    fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!((i + 1) * SLOT <= self.len);
        // SAFETY: `i < len / SLOT` (the callers index slots below the
        // batch size the arena was made for), so the offset is in bounds.
        unsafe { self.ptr.as_ptr().add(i * SLOT) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and no
        // pointer into it outlives the arena (only the owning `Batch`'s
        // headers hold such pointers).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One group of datagrams sent by one `mmsghdr`.
#[derive(Debug, Clone, Copy)]
struct Unit {
    /// First datagram (slot index).
    start: usize,
    /// Datagrams in the unit.
    count: usize,
    /// Bytes of the unit.
    bytes: usize,
    /// Segment size when the unit is a GSO super-datagram.
    gso: Option<u16>,
}

/// What a send of one batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendOutcome {
    /// Datagrams accepted by the kernel.
    pub sent: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Datagrams dropped: the sink would block, or refused them.
    pub dropped: u64,
    /// Send calls that failed with an error other than would-block.
    pub errors: u64,
    /// The last such error.
    pub last_error: Option<Errno>,
    /// System calls made.
    pub syscalls: u64,
    /// GSO units sent (each carried more than one datagram).
    pub gso_units: u64,
    /// A GSO unit was refused: GSO is now limited or off (see `Batch::gso_limit`).
    pub gso_refused: Option<Errno>,
}

/// What a receive did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvOutcome {
    /// Datagrams received (slots `0..n`).
    pub n: usize,
    /// The newest cumulative kernel drop count seen in the batch.
    pub kernel_drops: Option<u32>,
    /// Datagrams cut short (larger than a slot; cannot happen for UDP).
    pub truncated: u64,
}

/// The arena and the message headers for one batch size.
pub(crate) struct Batch {
    arena: Arena,
    cap: usize,
    lens: Vec<usize>,
    rhdrs: Vec<libc::mmsghdr>,
    riov: Vec<libc::iovec>,
    rctrl: Vec<Ctrl>,
    shdrs: Vec<libc::mmsghdr>,
    siov: Vec<libc::iovec>,
    sctrl: Vec<Ctrl>,
    units: Vec<Unit>,
    /// GSO is used for segment sizes below this (0: not at all).
    gso_limit: usize,
}

// SAFETY: the raw pointers inside the headers point only into the arena
// and the vectors owned by this same struct (heap memory that does not
// move with it); nothing else holds them, so moving the whole to another
// thread moves every user of those pointers with it.
unsafe impl Send for Batch {}

fn zeroed_mmsghdr() -> libc::mmsghdr {
    // SAFETY: mmsghdr is a plain C struct of integers and raw pointers, for
    // which all-zero bytes (null pointers, zero lengths) are valid.
    unsafe { std::mem::zeroed() }
}

impl Batch {
    /// Room for `cap` datagrams (1..=1024); `gso` allows GSO units.
    pub(crate) fn new(cap: usize, gso: bool) -> Result<Self, Errno> {
        let arena = Arena::new(cap * SLOT)?;
        let mut b = Self {
            cap,
            lens: vec![0; cap],
            rhdrs: vec![zeroed_mmsghdr(); cap],
            riov: Vec::with_capacity(cap),
            rctrl: vec![Ctrl([0; 64]); cap],
            shdrs: vec![zeroed_mmsghdr(); cap],
            siov: Vec::with_capacity(cap),
            sctrl: vec![Ctrl([0; 64]); cap],
            units: Vec::with_capacity(cap),
            gso_limit: if gso { usize::MAX } else { 0 },
            arena,
        };
        for i in 0..cap {
            b.riov.push(libc::iovec {
                iov_base: b.arena.slot(i).cast(),
                iov_len: SLOT,
            });
            b.siov.push(libc::iovec {
                iov_base: b.arena.slot(i).cast(),
                iov_len: 0,
            });
        }
        for i in 0..cap {
            let h = &mut b.rhdrs[i].msg_hdr;
            h.msg_iov = &raw mut b.riov[i];
            h.msg_iovlen = 1;
            h.msg_control = b.rctrl[i].0.as_mut_ptr().cast();
        }
        Ok(b)
    }

    /// Segment sizes below this go out as GSO units (0: none).
    pub(crate) fn gso_limit(&self) -> usize {
        self.gso_limit
    }

    /// The bytes of received datagram `i` (after `recv`).
    #[cfg(test)]
    pub(crate) fn datagram(&self, i: usize) -> &[u8] {
        assert!(i < self.cap);
        // SAFETY: slot `i` is in the arena, `lens[i] <= SLOT`, and the
        // arena is an anonymous private mapping (`mmap_anonymous` in this
        // file): no other process can write it, and in this process only
        // our own receive calls do (they need `&mut self`).
        unsafe { std::slice::from_raw_parts(self.arena.slot(i), self.lens[i]) }
    }

    /// `recvmmsg` up to `max` datagrams: blocks (up to the socket's
    /// `SO_RCVTIMEO`) for the first, then takes what is queued
    /// (`MSG_WAITFORONE`).
    pub(crate) fn recv(&mut self, fd: BorrowedFd<'_>, max: usize) -> Result<RecvOutcome, Errno> {
        let max = max.clamp(1, self.cap);
        for h in &mut self.rhdrs[..max] {
            h.msg_len = 0;
            h.msg_hdr.msg_controllen = size_of::<Ctrl>() as _;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: `rhdrs[..max]` are initialised headers whose iovecs point
        // at arena slots of SLOT bytes and whose control pointers at
        // 64-byte buffers, all owned by `self` and alive across the call;
        // no timeout pointer.
        let r = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.rhdrs.as_mut_ptr(),
                max as libc::c_uint,
                libc::MSG_WAITFORONE,
                null_mut(),
            )
        };
        if r < 0 {
            return Err(Errno::from_raw_os_error(last_errno()));
        }
        let n = r as usize;
        let mut out = RecvOutcome {
            n,
            kernel_drops: None,
            truncated: 0,
        };
        for i in 0..n {
            let h = &self.rhdrs[i];
            self.lens[i] = (h.msg_len as usize).min(SLOT);
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                out.truncated += 1;
            }
            // SAFETY: the kernel filled this header's control buffer in the
            // successful call above.
            if let Some(d) = unsafe { rxq_ovfl(&h.msg_hdr) } {
                out.kernel_drops = Some(d);
            }
        }
        Ok(out)
    }

    /// Group datagrams `from..n` into send units (GSO runs where allowed)
    /// and build their headers from unit index `self.units.len()` on.
    fn plan(&mut self, from: usize, n: usize) {
        let mut i = from;
        while i < n {
            let seg = self.lens[i];
            let mut count = 1;
            let mut bytes = seg;
            if seg > 0 && seg < self.gso_limit && seg <= usize::from(u16::MAX) {
                while i + count < n
                    && count < GSO_MAX_SEGMENTS
                    && bytes + self.lens[i + count] <= GSO_MAX_BYTES
                {
                    let l = self.lens[i + count];
                    if l == seg {
                        count += 1;
                        bytes += l;
                    } else {
                        // A shorter (non-empty) last segment may end the unit.
                        if l > 0 && l < seg {
                            count += 1;
                            bytes += l;
                        }
                        break;
                    }
                }
            }
            let u = self.units.len();
            let gso = (count > 1).then_some(seg as u16);
            self.units.push(Unit {
                start: i,
                count,
                bytes,
                gso,
            });
            let h = &mut self.shdrs[u];
            h.msg_len = 0;
            let m = &mut h.msg_hdr;
            m.msg_name = null_mut();
            m.msg_namelen = 0;
            m.msg_iov = &raw mut self.siov[i];
            m.msg_iovlen = count as _;
            m.msg_flags = 0;
            match gso {
                Some(seg) => {
                    let c = &mut self.sctrl[u];
                    c.0 = [0; 64];
                    let hdr = libc::cmsghdr {
                        cmsg_len: GSO_CMSG_LEN as _,
                        cmsg_level: libc::SOL_UDP,
                        cmsg_type: UDP_SEGMENT,
                    };
                    let p = c.0.as_mut_ptr();
                    // SAFETY: the buffer is 64 bytes, 8-aligned; the header
                    // and the 2 data bytes after it (GSO_CMSG_LEN ≤ 64) fit.
                    unsafe {
                        p.cast::<libc::cmsghdr>().write(hdr);
                        libc::CMSG_DATA(p.cast::<libc::cmsghdr>())
                            .cast::<u16>()
                            .write_unaligned(seg);
                    }
                    m.msg_control = p.cast();
                    m.msg_controllen = GSO_CMSG_SPACE as _;
                }
                None => {
                    m.msg_control = null_mut();
                    m.msg_controllen = 0;
                }
            }
            i += count;
        }
    }

    /// Forward received datagrams `0..n` on the connected socket `fd`
    /// without waiting: what the kernel will not take now is dropped and
    /// counted, never retried (the source is active: waiting would only
    /// overflow the receive queue instead).
    pub(crate) fn send(&mut self, fd: BorrowedFd<'_>, n: usize) -> SendOutcome {
        let n = n.min(self.cap);
        for i in 0..n {
            self.siov[i].iov_len = self.lens[i];
        }
        let mut out = SendOutcome::default();
        if n == 1 {
            // One datagram (a low rate): `send(2)` is a shorter path
            // through the kernel than a one-message `sendmmsg`.
            // SAFETY: slot 0 is in the arena and `lens[0] <= SLOT`; the
            // arena is an anonymous private mapping no other process can
            // write, only written by our own receive calls (`&mut self`).
            let d = unsafe { std::slice::from_raw_parts(self.arena.slot(0), self.lens[0]) };
            out.syscalls = 1;
            loop {
                match rustix::net::send(fd, d, rustix::net::SendFlags::DONTWAIT) {
                    Ok(_) => {
                        out.sent = 1;
                        out.bytes = d.len() as u64;
                    }
                    Err(Errno::INTR) => {
                        out.syscalls += 1;
                        continue;
                    }
                    Err(Errno::AGAIN | Errno::NOBUFS) => out.dropped = 1,
                    Err(e) => {
                        out.dropped = 1;
                        out.errors = 1;
                        out.last_error = Some(e);
                    }
                }
                return out;
            }
        }
        self.units.clear();
        self.plan(0, n);
        let mut u = 0;
        while u < self.units.len() {
            let left = self.units.len() - u;
            // SAFETY: `shdrs[u..]` were built by `plan` for the units
            // `u..`: their iovecs point at arena slots with the received
            // lengths, their control pointers at GSO buffers in `sctrl`,
            // all owned by `self` and alive across the call.
            let r = unsafe {
                libc::sendmmsg(
                    fd.as_raw_fd(),
                    self.shdrs[u..].as_mut_ptr(),
                    left as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            out.syscalls += 1;
            if r > 0 {
                for unit in &self.units[u..u + r as usize] {
                    out.sent += unit.count as u64;
                    out.bytes += unit.bytes as u64;
                    out.gso_units += u64::from(unit.gso.is_some());
                }
                u += r as usize;
                continue;
            }
            let e = if r == 0 {
                Errno::AGAIN
            } else {
                Errno::from_raw_os_error(last_errno())
            };
            let unit = self.units[u];
            match e {
                Errno::INTR => {}
                Errno::AGAIN | Errno::NOBUFS => {
                    out.dropped += self.units[u..].iter().map(|x| x.count as u64).sum::<u64>();
                    break;
                }
                Errno::INVAL
                | Errno::IO
                | Errno::NOPROTOOPT
                | Errno::OPNOTSUPP
                | Errno::MSGSIZE
                    if unit.gso.is_some() =>
                {
                    // The path refused this GSO unit (segment above the
                    // MTU, no checksum offload, no UDP_SEGMENT): send it
                    // and everything after it without GSO for this and
                    // larger segment sizes (everything, if the kernel
                    // lacks the option or the device checksumming).
                    self.gso_limit = match e {
                        Errno::INVAL | Errno::MSGSIZE => usize::from(unit.gso.unwrap_or(0)),
                        _ => 0,
                    };
                    out.gso_refused = Some(e);
                    self.units.truncate(u);
                    self.plan(unit.start, n);
                }
                _ => {
                    // A refusal of this datagram (ECONNREFUSED from an
                    // earlier ICMP port unreachable, EMSGSIZE, …): drop it,
                    // go on with the rest.
                    out.errors += 1;
                    out.last_error = Some(e);
                    out.dropped += unit.count as u64;
                    u += 1;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;
    use std::time::Duration;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        (a, b)
    }

    #[test]
    fn receives_a_batch_and_forwards_it_with_boundaries() {
        let (tx, gw_in) = pair();
        let (gw_out, sink) = pair();
        let sizes = [1usize, 64, 64, 64, 63, 0, 1024, 1024, 8192, 60000];
        for (k, &s) in sizes.iter().enumerate() {
            tx.send(&vec![k as u8; s]).unwrap();
        }
        for gso in [true, false] {
            let mut b = Batch::new(16, gso).unwrap();
            let mut got = 0;
            let mut units = 0;
            while got < sizes.len() {
                let r = b.recv(gw_in.as_fd(), 16).unwrap();
                for i in 0..r.n {
                    assert_eq!(b.datagram(i), &vec![got as u8; sizes[got]][..]);
                    got += 1;
                }
                let s = b.send(gw_out.as_fd(), r.n);
                assert_eq!((s.sent, s.dropped), (r.n as u64, 0), "{s:?}");
                units += s.gso_units;
            }
            if !gso {
                assert_eq!(units, 0);
            } else if probe_gso(gw_out.as_fd()).is_err() {
                println!("skipped: GSO check (the kernel has no UDP_SEGMENT)");
            } else {
                assert!(units > 0, "runs of equal sizes went out without GSO");
            }
            let mut buf = vec![0u8; SLOT];
            for (k, &s) in sizes.iter().enumerate() {
                let n = sink.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], &vec![k as u8; s][..], "datagram {k} (gso {gso})");
            }
            if gso {
                // Resend the same for the plain run.
                for (k, &s) in sizes.iter().enumerate() {
                    tx.send(&vec![k as u8; s]).unwrap();
                }
            }
        }
    }

    #[test]
    fn a_sink_that_would_block_drops_the_rest_and_counts_it() {
        // A Unix datagram pair whose reader never reads: the writer gets
        // EAGAIN once the reader's queue is full (over loopback UDP the
        // kernel never pushes back; the receiver drops instead). Unix
        // sockets ignore a UDP_SEGMENT message, so no GSO here.
        let (w, _r) = UnixDatagram::pair().unwrap();
        let (tx, gw_in) = pair();
        let mut b = Batch::new(64, false).unwrap();
        let mut dropped = 0;
        let mut sent = 0;
        for _round in 0..200 {
            for _ in 0..64 {
                tx.send(&[7u8; 512]).unwrap();
            }
            let mut left = 64;
            while left > 0 {
                let r = b.recv(gw_in.as_fd(), left).unwrap();
                left -= r.n;
                let s = b.send(w.as_fd(), r.n);
                assert_eq!(s.sent + s.dropped, r.n as u64, "{s:?}");
                dropped += s.dropped;
                sent += s.sent;
            }
            if dropped > 0 {
                break;
            }
        }
        assert!(sent > 0 && dropped > 0, "sent {sent} dropped {dropped}");
    }

    #[test]
    fn kernel_drops_are_reported_with_the_next_datagram() {
        let (tx, gw_in) = pair();
        gw_in
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        enable_rxq_ovfl(gw_in.as_fd()).unwrap();
        rustix::net::sockopt::set_socket_recv_buffer_size(&gw_in, 4096).unwrap();
        for _ in 0..200 {
            tx.send(&[1u8; 8000]).unwrap();
        }
        // The count rides on datagrams queued after the drops: drain what
        // was queued before, then one more arrives with it.
        let mut b = Batch::new(8, true).unwrap();
        let mut drops = None;
        while let Ok(r) = b.recv(gw_in.as_fd(), 8) {
            drops = r.kernel_drops.or(drops);
        }
        tx.send(&[2u8; 10]).unwrap();
        let r = b.recv(gw_in.as_fd(), 8).unwrap();
        assert_eq!(r.n, 1);
        drops = r.kernel_drops.or(drops);
        assert!(drops.unwrap_or(0) > 0, "{r:?}");
        // SO_MEMINFO reads the same counter without a datagram.
        assert_eq!(socket_drops(gw_in.as_fd()), drops);
    }
}
