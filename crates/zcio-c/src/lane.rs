//! Lanes: a channel's fast path for small messages (`zcio_lane_open` /
//! `zcio_lane_accept`), one loan or one received message at a time per
//! handle.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::time::Duration;

use zcio::{LaneConfig, LaneError, LaneMsg, LaneReceiver, LaneSender, LaneStats, Loan};

use crate::abi::put;
use crate::chan::zcio_channel;
use crate::error::{einval, fail, fail_msg, guard};
use crate::Timeout;

/// The sending end of a lane (opaque). One thread at a time: a lane's
/// ends are single-owner; use one lane per sending thread.
pub struct zcio_lane_sender {
    /// The slot lent by `zcio_lane_loan`, if any; it borrows `*tx` and is
    /// dropped before it (see `Drop`).
    loan: Option<Loan<'static>>,
    /// Owned (`Box::into_raw`); freed in `Drop` after `loan`.
    tx: NonNull<LaneSender>,
    slot_size: usize,
    /// The default wait: the channel's send bound.
    bound: Duration,
}

/// The receiving end of a lane (opaque). One thread at a time.
pub struct zcio_lane_receiver {
    /// The message `zcio_lane_recv` returned last, until released; it
    /// borrows `*rx` and is dropped before it.
    msg: Option<LaneMsg<'static>>,
    /// Owned (`Box::into_raw`); freed in `Drop` after `msg`.
    rx: NonNull<LaneReceiver>,
    /// The default wait: the channel's receive bound.
    bound: Duration,
}

// SAFETY: each handle owns its end (and the loan or message borrowing it)
// outright; the ends are `Send`, and a C caller moving a handle to another
// thread moves all of it.
unsafe impl Send for zcio_lane_sender {}
// SAFETY: as above.
unsafe impl Send for zcio_lane_receiver {}

impl Drop for zcio_lane_sender {
    fn drop(&mut self) {
        // The loan borrows the sender: it goes first.
        self.loan = None;
        // SAFETY: `tx` came from `Box::into_raw` and nothing borrows it now.
        drop(unsafe { Box::from_raw(self.tx.as_ptr()) });
    }
}

impl Drop for zcio_lane_receiver {
    fn drop(&mut self) {
        self.msg = None;
        // SAFETY: `rx` came from `Box::into_raw` and nothing borrows it now.
        drop(unsafe { Box::from_raw(self.rx.as_ptr()) });
    }
}

/// Counters of a lane end (`zcio_lane_sender_get_stats`,
/// `zcio_lane_receiver_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_lane_stats {
    /// Messages sent (sender) or received (receiver).
    pub messages: u64,
    /// Notices taken in (sender) or published (receiver).
    pub notices: u64,
    /// Sender: notices naming a slot that was not in flight (ignored).
    pub bad_notices: u64,
    /// Receiver: messages naming a slot or length out of bounds (dropped).
    pub malformed: u64,
    /// Receiver: notices dropped because the sender's notice ring was full.
    pub notices_dropped: u64,
    /// Sender: slots the receiver holds now.
    pub in_flight: u32,
    /// The peer's pid as this process sees it (0: not visible from here).
    pub peer_pid: u32,
    /// Payload bytes sent (sender) or received (receiver).
    pub bytes: u64,
    /// Loans, sends or receives refused at once (no slot, no room,
    /// nothing there).
    pub would_block: u64,
    /// Loans or receives that timed out.
    pub timed_out: u64,
    /// Loans, sends or receives that found the lane ended.
    pub disconnected: u64,
    /// Times this end slept.
    pub sleeps: u64,
    /// Wakes this end issued.
    pub wakes: u64,
    /// An id both ends of the lane report alike.
    pub connection: u64,
}

impl From<LaneStats> for zcio_lane_stats {
    fn from(s: LaneStats) -> Self {
        Self {
            messages: s.messages,
            notices: s.notices,
            bad_notices: s.bad_notices,
            malformed: s.malformed,
            notices_dropped: s.notices_dropped,
            in_flight: s.in_flight,
            peer_pid: s.peer_pid,
            bytes: s.bytes,
            would_block: s.would_block,
            timed_out: s.timed_out,
            disconnected: s.disconnected,
            sleeps: s.sleeps,
            wakes: s.wakes,
            connection: s.connection,
        }
    }
}

/// The wait `ms` asks for, `bound` being the default.
fn timeout(ms: c_int, bound: Duration) -> Duration {
    Timeout::from_ms(ms).or(bound)
}

/// Open a lane to the peer of `ch`: `slots` slots (1..=65536) of
/// `slot_size` bytes (1 B..=1 GiB) in memory only this process can write,
/// for small messages at the latency of a few cache-line transfers. The
/// peer takes it with `zcio_lane_accept`. Stores the handle in `*out`
/// (free it with `zcio_lane_sender_free`, before closing `ch`). Returns 0,
/// `-EINVAL` (bad sizes), `-EPIPE` (the channel is closed or the peer is
/// gone), or a negative errno.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_open(
    ch: *mut zcio_channel,
    slots: u32,
    slot_size: usize,
    out: *mut *mut zcio_lane_sender,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(ch) = (unsafe { ch.as_ref() }) else {
            return einval("zcio_lane_open: channel is NULL");
        };
        if out.is_null() {
            return einval("zcio_lane_open: out is NULL");
        }
        match ch.ch.open_lane(&LaneConfig { slots, slot_size }) {
            Ok(tx) => {
                let h = zcio_lane_sender {
                    loan: None,
                    bound: ch.ch.config().send_timeout,
                    slot_size: tx.slot_size(),
                    tx: NonNull::from(Box::leak(Box::new(tx))),
                };
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(h))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Take the next lane the peer of `ch` opened, waiting at most
/// `timeout_ms` (< 0: the channel's receive bound, `recv_timeout_ms`; 0:
/// `-EAGAIN` unless one was offered; `ZCIO_TIMEOUT_INFINITE`: as long as
/// it takes). Stores the handle in `*out` (free it with
/// `zcio_lane_receiver_free`, before closing `ch`). Returns 0, `-EAGAIN`,
/// `-ETIMEDOUT`, `-EPIPE`, or a negative errno.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_accept(
    ch: *mut zcio_channel,
    timeout_ms: c_int,
    out: *mut *mut zcio_lane_receiver,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(ch) = (unsafe { ch.as_ref() }) else {
            return einval("zcio_lane_accept: channel is NULL");
        };
        if out.is_null() {
            return einval("zcio_lane_accept: out is NULL");
        }
        let bound = ch.ch.config().recv_timeout;
        match ch.ch.accept_lane_timeout(timeout(timeout_ms, bound)) {
            Ok(rx) => {
                let h = zcio_lane_receiver {
                    msg: None,
                    bound,
                    rx: NonNull::from(Box::leak(Box::new(rx))),
                };
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(h))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Bytes a slot of the lane holds: the longest message (0 for NULL).
///
/// # Safety
/// `tx` is NULL or a live lane sender.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_slot_size(tx: *const zcio_lane_sender) -> usize {
    // SAFETY: the caller's contract.
    guard(|| unsafe { tx.as_ref() }.map_or(0, |h| h.slot_size))
}

/// Lend a free slot to fill, waiting at most `timeout_ms` (< 0: the
/// channel's send bound, `send_timeout_ms`, 10 s unless set; 0: `-EAGAIN`
/// if every slot is lent or in flight; `ZCIO_TIMEOUT_INFINITE`: as long as
/// it takes) for the receiver to give one back. Stores its address in `*data` and its size in `*capacity`
/// (NULL: not wanted); the bytes hold what the slot carried last. Send it
/// with `zcio_lane_send` or give it back with `zcio_lane_cancel`; one loan
/// at a time (`-EBUSY` while one is out). Returns 0, `-EAGAIN`,
/// `-ETIMEDOUT`, `-EPIPE` (the lane or its channel ended),
/// `-ZCIO_ECORRUPT` (the receiver broke the lane).
///
/// # Safety
/// `tx` is NULL or a live lane sender; `data` is NULL or valid for writing
/// a pointer; `capacity` is NULL or valid for writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_loan(
    tx: *mut zcio_lane_sender,
    timeout_ms: c_int,
    data: *mut *mut c_void,
    capacity: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { tx.as_mut() }) else {
            return einval("zcio_lane_loan: lane is NULL");
        };
        if data.is_null() {
            return einval("zcio_lane_loan: data is NULL");
        }
        if h.loan.is_some() {
            return fail_msg(
                libc::EBUSY,
                "zcio_lane_loan: a loan is already out: send or cancel it first",
            );
        }
        let t = timeout(timeout_ms, h.bound);
        // SAFETY: `h.tx` is live until `h` is dropped, which drops the
        // loan first; no other reference to the sender exists while the
        // loan does (every call that would make one checks `h.loan`).
        let sender: &'static mut LaneSender = unsafe { &mut *h.tx.as_ptr() };
        match sender.loan_timeout(t) {
            Ok(mut loan) => {
                let p = loan.as_mut_slice().as_mut_ptr();
                // SAFETY: non-NULL and writable (contract); `capacity` may
                // be NULL.
                unsafe {
                    data.write(p.cast());
                    if let Some(c) = capacity.as_mut() {
                        *c = loan.capacity();
                    }
                }
                h.loan = Some(loan);
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Send the first `len` bytes of the slot lent by `zcio_lane_loan`; the
/// slot (and its address) is the receiver's until it releases the
/// message. Returns 0, `-EINVAL` (no loan out), `-EMSGSIZE` (`len` larger
/// than the slot: the loan stays out), `-EPIPE` (the lane or its channel
/// ended; the slot is given back).
///
/// # Safety
/// `tx` is NULL or a live lane sender.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_send(tx: *mut zcio_lane_sender, len: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { tx.as_mut() }) else {
            return einval("zcio_lane_send: lane is NULL");
        };
        let Some(loan) = h.loan.take() else {
            return einval("zcio_lane_send: no loan is out (call zcio_lane_loan first)");
        };
        match loan.send(len) {
            Ok(()) => 0,
            Err(e) => {
                let (err, loan) = e.into_parts();
                if matches!(err, LaneError::TooLarge { .. }) {
                    h.loan = Some(loan);
                }
                fail(err)
            }
        }
    })
}

/// Give the slot lent by `zcio_lane_loan` back unsent. Returns 0 or
/// `-EINVAL` (no loan out).
///
/// # Safety
/// `tx` is NULL or a live lane sender.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_cancel(tx: *mut zcio_lane_sender) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { tx.as_mut() }) else {
            return einval("zcio_lane_cancel: lane is NULL");
        };
        match h.loan.take() {
            Some(_) => 0,
            None => einval("zcio_lane_cancel: no loan is out"),
        }
    })
}

/// Copy `len` bytes from `data` into a slot and send it (a loan, a copy and
/// a send; waits as `zcio_lane_loan` does). Returns 0 or an error of those
/// calls; `-EBUSY` while a loan is out.
///
/// # Safety
/// `tx` is NULL or a live lane sender; `data` is valid for reading `len`
/// bytes (it may be NULL when `len` is 0).
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_send_bytes(
    tx: *mut zcio_lane_sender,
    data: *const c_void,
    len: usize,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { tx.as_mut() }) else {
            return einval("zcio_lane_send_bytes: lane is NULL");
        };
        if data.is_null() && len > 0 {
            return einval("zcio_lane_send_bytes: data is NULL");
        }
        if h.loan.is_some() {
            return fail_msg(libc::EBUSY, "zcio_lane_send_bytes: a loan is out");
        }
        if len > h.slot_size {
            return fail(LaneError::TooLarge {
                len,
                max: h.slot_size,
            });
        }
        let t = timeout(timeout_ms, h.bound);
        // SAFETY: no loan is out, so nothing else borrows the sender.
        let sender = unsafe { &mut *h.tx.as_ptr() };
        let mut loan = match sender.loan_timeout(t) {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        if len > 0 {
            // `data` may point into memory a peer can write (a received
            // message's bytes): read through a View (each byte once, never
            // as a `&[u8]`).
            // SAFETY: `data` is readable for `len` bytes for this call
            // (contract).
            let src = unsafe { zcio::View::from_raw(data.cast::<u8>(), len) };
            // `len <= slot_size`, the slot's length.
            src.copy_to_slice(&mut loan.as_mut_slice()[..len]);
        }
        match loan.send(len) {
            Ok(()) => 0,
            Err(e) => fail(*e.error()),
        }
    })
}

/// Counters of the sending end.
///
/// # Safety
/// `tx` is NULL or a live lane sender; `out` is NULL or valid for writing `size`
/// bytes (the header's `zcio_lane_sender_get_stats(…, out)` passes `sizeof *(out)`).
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_sender_get_stats_sized(
    tx: *const zcio_lane_sender,
    out: *mut zcio_lane_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { tx.as_ref() }) else {
            return einval("zcio_lane_sender_get_stats: tx is NULL");
        };
        let s = match &h.loan {
            Some(l) => l.lane().stats(),
            // SAFETY: no loan is out, so nothing borrows the sender
            // mutably.
            None => unsafe { h.tx.as_ref() }.stats(),
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_lane_sender_get_stats", &s.into(), out, size) }
    })
}

/// Close the sending end (the receiver sees the end once it has read what
/// was sent) and free the handle; a loan still out is given back. NULL is
/// ignored.
///
/// # Safety
/// `tx` is NULL or a live lane sender, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_sender_free(tx: *mut zcio_lane_sender) {
    guard(|| {
        if !tx.is_null() {
            // SAFETY: made by `Box::into_raw` in `zcio_lane_open`; the
            // caller gives it up.
            drop(unsafe { Box::from_raw(tx) });
        }
    })
}

/// Receive the next message, waiting at most `timeout_ms` (< 0: the
/// channel's receive bound, `recv_timeout_ms`; 0: `-EAGAIN` if none is
/// there; `ZCIO_TIMEOUT_INFINITE`: as long as it takes). The message
/// received before is released first. Stores the address of its bytes in
/// `*data` and its length in `*len`; they stay valid until the next
/// `zcio_lane_recv`, `zcio_lane_release` or `zcio_lane_receiver_free`.
/// The sender keeps its writable mapping of those bytes: copy out what
/// you validate. Returns 0, `-EAGAIN`, `-ETIMEDOUT`, `-EPIPE` (the sender
/// ended and nothing is left), `-EBADMSG` (the sender named a slot or
/// length out of bounds: dropped, the lane stays usable),
/// `-ZCIO_ECORRUPT`.
///
/// # Safety
/// `rx` is NULL or a live lane receiver; `data` is NULL or valid for
/// writing a pointer; `len` is NULL or valid for writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_recv(
    rx: *mut zcio_lane_receiver,
    timeout_ms: c_int,
    data: *mut *const c_void,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { rx.as_mut() }) else {
            return einval("zcio_lane_recv: lane is NULL");
        };
        if data.is_null() || len.is_null() {
            return einval("zcio_lane_recv: data or len is NULL");
        }
        h.msg = None;
        let t = timeout(timeout_ms, h.bound);
        // SAFETY: the previous message is gone, so nothing borrows the
        // receiver; the new one is dropped before it (`Drop`).
        let receiver: &'static mut LaneReceiver = unsafe { &mut *h.rx.as_ptr() };
        match receiver.recv_timeout(t) {
            Ok(m) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe {
                    data.write(m.view().as_ptr().cast());
                    len.write(m.len());
                }
                h.msg = Some(m);
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Release the message `zcio_lane_recv` returned (its slot goes back to
/// the sender). Returns 0 or `-EINVAL` (none held).
///
/// # Safety
/// `rx` is NULL or a live lane receiver.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_release(rx: *mut zcio_lane_receiver) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { rx.as_mut() }) else {
            return einval("zcio_lane_release: lane is NULL");
        };
        match h.msg.take() {
            Some(_) => 0,
            None => einval("zcio_lane_release: no message is held"),
        }
    })
}

/// Counters of the receiving end.
///
/// # Safety
/// `rx` is NULL or a live lane receiver; `out` is NULL or valid for
/// writing `size` bytes (the header's `zcio_lane_receiver_get_stats(…, out)` passes
/// `sizeof *(out)`).
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_receiver_get_stats_sized(
    rx: *const zcio_lane_receiver,
    out: *mut zcio_lane_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { rx.as_ref() }) else {
            return einval("zcio_lane_receiver_get_stats: rx is NULL");
        };
        let s = match &h.msg {
            Some(m) => m.lane().stats(),
            // SAFETY: no message is held, so nothing borrows the receiver
            // mutably.
            None => unsafe { h.rx.as_ref() }.stats(),
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_lane_receiver_get_stats", &s.into(), out, size) }
    })
}

/// Close the receiving end and free the handle (a held message is
/// released). NULL is ignored.
///
/// # Safety
/// `rx` is NULL or a live lane receiver, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_lane_receiver_free(rx: *mut zcio_lane_receiver) {
    guard(|| {
        if !rx.is_null() {
            // SAFETY: made by `Box::into_raw` in `zcio_lane_accept`; the
            // caller gives it up.
            drop(unsafe { Box::from_raw(rx) });
        }
    })
}
