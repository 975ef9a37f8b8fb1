//! Waiting: how every transport waits for its peer, in one place.
//!
//! A waiter (a receiver with nothing to read, a sender with no room, an
//! allocator with no free buffer) goes through three stages:
//!
//! 1. **Spin** for a short, *adaptive* budget ([`SpinBudget`], made from
//!    the process's one [`SpinPolicy`]): a few
//!    microseconds of `spin_loop`, then one `sched_yield` per step
//!    ([`spin_pause`]). On two CPUs shared by three or more processes, the
//!    peer we wait for may be runnable on *our* core; yielding lets it run
//!    instead of burning our time slice, so spinning never starves a peer
//!    that shares the CPU.
//! 2. The budget **gives up quickly when spinning does not pay**: it halves
//!    after every wait that ended asleep anyway and doubles (up to its
//!    maximum) after one that spinning served. A waiter whose peer is slow
//!    or descheduled soon sleeps at once; one whose peer answers within
//!    microseconds keeps avoiding the system calls. On the VMs we measured,
//!    waking a halted vCPU costs tens to hundreds of microseconds, so the
//!    maximum ([`SpinPolicy::max`], 500 µs by default) is hundreds of
//!    microseconds, not milliseconds; a wait inside an async runtime spins
//!    at most [`SpinPolicy::task_max`] (50 µs), since it holds the
//!    runtime's thread meanwhile.
//! 3. **Sleep** on a futex with the *flag in the word* handshake: the
//!    sleeper sets a "sleeping" bit with a read-modify-write on the very
//!    word the other side changes when it publishes, re-checks, and
//!    `FUTEX_WAIT`s expecting exactly the value it saw; a publisher wakes
//!    only when it finds the bit set. Each transport keeps that bit in its
//!    own word layout (`channel::spsc`, `ring::protocol`,
//!    `rendezvous::slot`) but uses the futex calls of [`crate::sync`].
//!
//! Every sleep is bounded by [`LIVENESS`]: after each slice the waiter
//! checks that its peer still lives (socket hang-up, pidfd, owner word), so
//! a dead or silent peer is reported, never waited on forever.
//!
//! **One mechanism.** What a waiter needs of the end it waits on is one
//! trait, [`Readiness`]: the look (is it ready), the preparation (set the
//! sleep flag, look again), one sleep slice (futex, or the doorbell of an
//! end in bell mode), the liveness check, and for event loops the doorbell
//! itself (its descriptor, taking the rings, whether the peer is gone). The
//! stages above are one function, [`wait_ready`], generic over it (static
//! dispatch: a blocking wait makes a small borrowed view of what it waits
//! for, no allocation); its spin stage alone is [`spin_until`], which a
//! task in an event loop runs before it arms its doorbell, and
//! `zcio::tokio`'s doorbell takes the same trait. Each protocol keeps its
//! own word layout and implements the trait over it; the waiter's knobs
//! (its longest slice, how its spin yields) are the trait's too.

use std::time::{Duration, Instant};

/// The longest single sleep of any waiter before it checks its peer's
/// liveness (and its own deadline) again. One constant for every transport.
pub const LIVENESS: Duration = Duration::from_millis(50);

/// How long zcio's waiters spin before they sleep: the one spin setting of
/// the process, read by every transport (ring ends, rendezvous sides,
/// `proxy` waits, tokio futures, and the defaults of
/// `ChannelPolicy::spin` and `PoolConfig::spin`, which override it per
/// channel or pool).
///
/// Each waiter turns it into its own adaptive [`SpinBudget`]: the budget
/// starts at the maximum, halves after every wait that had to sleep anyway
/// and doubles back (up to the maximum) after one that spinning served, so
/// a waiter whose peer is slow or shares its CPU soon sleeps at once.
///
/// ```
/// use std::time::Duration;
/// use zcio::SpinPolicy;
///
/// // Spin less everywhere (waiters made from now on), e.g. on a busy host.
/// SpinPolicy { max: Duration::from_micros(100), ..SpinPolicy::DEFAULT }.set();
/// assert_eq!(SpinPolicy::current().max, Duration::from_micros(100));
/// # SpinPolicy::DEFAULT.set();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinPolicy {
    /// Most a blocking wait spins (pure spinning for a few microseconds,
    /// then yielding the CPU at each step) before it sleeps; zero sleeps at
    /// once. Default 500 µs: on the VMs we measured, waking a halted vCPU
    /// costs tens to hundreds of µs, and a shorter window let both sides of
    /// a ping-pong fall into sleeping every time.
    pub max: Duration,
    /// Most a wait inside an async runtime (a tokio future) spins before it
    /// returns to the event loop, capped by `max`: a spinning poll holds
    /// the runtime's thread. Default 50 µs (within tokio's advice of
    /// 10–100 µs between yields; measured on a 2-vCPU VM, a 20 µs cap let a
    /// ping-pong flip between ~1 µs and ~22 µs one-way, 40 µs and more kept
    /// it fast).
    pub task_max: Duration,
}

/// The process-wide [`SpinPolicy`], in nanoseconds. std atomics, as the
/// id generators (see `crate::sync`): a setting, it orders no other memory.
static SPIN_MAX_NS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(SpinPolicy::DEFAULT.max.as_nanos() as u64);
static SPIN_TASK_MAX_NS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(SpinPolicy::DEFAULT.task_max.as_nanos() as u64);

impl SpinPolicy {
    /// The default: `max` 500 µs, `task_max` 50 µs.
    pub const DEFAULT: Self = Self {
        max: Duration::from_micros(500),
        task_max: Duration::from_micros(50),
    };

    /// The process-wide policy ([`SpinPolicy::DEFAULT`] until
    /// [`SpinPolicy::set`]).
    pub fn current() -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        // SYNC: Relaxed, no partner: a setting read when a waiter is made;
        // it orders no other memory.
        let (max, task) = (SPIN_MAX_NS.load(Relaxed), SPIN_TASK_MAX_NS.load(Relaxed));
        Self {
            max: Duration::from_nanos(max),
            task_max: Duration::from_nanos(task),
        }
    }

    /// Make this the process-wide policy. Waiters made from now on use it
    /// (ring ends at attach, rendezvous endpoints at connect or accept,
    /// channel and pool configs made by `Default` afterwards, every async
    /// wait); existing ones keep their budgets.
    pub fn set(self) {
        use std::sync::atomic::Ordering::Relaxed;
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // SYNC: Relaxed, no partner (see `current`).
        SPIN_MAX_NS.store(ns(self.max), Relaxed);
        SPIN_TASK_MAX_NS.store(ns(self.task_max), Relaxed);
    }

    /// A fresh adaptive budget for a blocking waiter (starts at `max`).
    pub fn budget(&self) -> SpinBudget {
        SpinBudget::new(self.max)
    }

    /// A fresh adaptive budget for a wait inside an async runtime: at most
    /// `task_max`, `max` and `cap` (the end's own spin setting, e.g. a
    /// channel's `ChannelPolicy::spin`; `Duration::MAX` for none).
    pub fn task_budget(&self, cap: Duration) -> SpinBudget {
        SpinBudget::new(self.task_max.min(self.max).min(cap))
    }
}

impl Default for SpinPolicy {
    /// [`SpinPolicy::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One step of a bounded busy-wait (`spins` counts the steps so far): a
/// few microseconds of pure spinning, then a `sched_yield` per step, so a
/// peer sharing this core (more processes than cores, as in a three-domain
/// path on two cores) runs instead of waiting behind the spinner.
pub fn spin_pause(spins: u32) {
    if spins > 256 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// An adaptive spin budget: how long a waiter should spin before sleeping.
///
/// Spinning pays only when the awaited event usually comes within the
/// spin; when the waiter keeps ending up asleep anyway (the peer is slower,
/// or there are more runnable processes than cores), spinning just takes
/// CPU from the peer. So the budget doubles after a wait that ended while
/// spinning and halves after one that had to sleep, between 0 and `max`.
#[derive(Debug, Clone, Copy)]
pub struct SpinBudget {
    cur: Duration,
    max: Duration,
}

impl SpinBudget {
    /// Start at `max`.
    pub fn new(max: Duration) -> Self {
        Self { cur: max, max }
    }

    /// The current budget.
    pub fn get(&self) -> Duration {
        self.cur
    }

    /// The maximum it adapts up to.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// A bounded wait with this budget, ending at `timeout` from now. A
    /// budget whose maximum is zero never spins: its first step sleeps (a
    /// budget that only *halved* to zero still polls briefly, so that it
    /// can learn again that spinning pays).
    pub fn backoff(&self, timeout: Duration) -> Backoff {
        let mut b = Backoff::new(self.cur, timeout);
        b.never_spin = self.max.is_zero();
        b
    }

    /// [`SpinBudget::backoff`] with a deadline (`None`: never).
    pub fn backoff_until(&self, deadline: Option<Instant>) -> Backoff {
        let mut b = Backoff::until(self.cur, deadline);
        b.never_spin = self.max.is_zero();
        b
    }

    /// [`SpinBudget::backoff`], yielding the CPU on every poll when
    /// `peer_on_this_cpu` (the awaited peer last ran on this CPU: it cannot
    /// make progress while we spin). Sleeping at once instead was measured
    /// worse: the peer then pays a futex wake, and a context switch, per
    /// message; yielding lets it run a batch while we are off the CPU.
    pub fn backoff_for(&self, timeout: Duration, peer_on_this_cpu: bool) -> Backoff {
        self.backoff_for_until(Instant::now().checked_add(timeout), peer_on_this_cpu)
    }

    /// [`SpinBudget::backoff_for`] with a deadline (`None`: never).
    pub fn backoff_for_until(&self, deadline: Option<Instant>, peer_on_this_cpu: bool) -> Backoff {
        if !peer_on_this_cpu || self.max.is_zero() {
            return self.backoff_until(deadline);
        }
        // At least a few yields, even when the budget halved to nothing:
        // sleeping at once is what a peer on this CPU must not be made to
        // pay for (and the budget could never learn to grow back).
        Backoff::yielding_until(self.cur.max(SHARED_CPU_YIELDS), deadline)
    }

    /// Record how the last wait ended.
    pub fn record(&mut self, slept: bool) {
        self.cur = if slept {
            let half = self.cur / 2;
            if half < Duration::from_micros(1) {
                Duration::ZERO
            } else {
                half
            }
        } else {
            (self.cur * 2 + Duration::from_micros(2)).min(self.max)
        };
    }
}

/// The least time a waiter whose peer shares its CPU yields before it
/// sleeps (see [`SpinBudget::backoff_for`]).
const SHARED_CPU_YIELDS: Duration = Duration::from_micros(50);

/// What a bounded wait should do next (see [`Backoff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Check the condition again now.
    Retry,
    /// Spinning is over: sleep, at most `remaining`.
    Sleep {
        /// When this step was taken.
        now: Instant,
        /// Time left until the deadline (`Duration::MAX` without one).
        remaining: Duration,
    },
    /// The deadline has passed.
    TimedOut,
}

/// A bounded wait in three phases: pure spinning, spinning with
/// `sched_yield` (until `spin` has passed), then sleeping in slices until the
/// deadline. Reads the clock only every 64 steps.
#[derive(Debug)]
pub struct Backoff {
    /// When the backoff was made (its one clock reading before the steps).
    start: Instant,
    /// Whether a step has said `Sleep` (the wait did not end while
    /// spinning; feed it to [`SpinBudget::record`]).
    slept: bool,
    spins: u32,
    spin_until: Instant,
    /// `None`: no deadline (the waiter still checks its peer every slice).
    deadline: Option<Instant>,
    /// Yield the CPU on every retry (for checks that are themselves costly).
    eager_yield: bool,
    /// Sleep at the first step (see [`SpinBudget::backoff`]).
    never_spin: bool,
}

impl Backoff {
    /// Spin for `spin`, give up after `timeout` (both from now; a timeout
    /// too long to represent, `Duration::MAX` say, is no deadline).
    pub fn new(spin: Duration, timeout: Duration) -> Self {
        Self::until(spin, Instant::now().checked_add(timeout))
    }

    /// Spin for `spin` (from now), give up at `deadline` (`None`: never).
    pub fn until(spin: Duration, deadline: Option<Instant>) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            slept: false,
            spins: 0,
            spin_until: now.checked_add(spin).unwrap_or(now),
            deadline,
            eager_yield: false,
            never_spin: false,
        }
    }

    /// Like `new`, but every retry yields the CPU: for waits whose check is
    /// itself expensive (a pool scanning its channels for notices), where a
    /// peer that shares our core must run for the condition to change.
    pub fn yielding(spin: Duration, timeout: Duration) -> Self {
        Self {
            eager_yield: true,
            ..Self::new(spin, timeout)
        }
    }

    /// [`Backoff::yielding`] with a deadline (`None`: never).
    pub fn yielding_until(spin: Duration, deadline: Option<Instant>) -> Self {
        Self {
            eager_yield: true,
            ..Self::until(spin, deadline)
        }
    }

    /// Time left at `now` (`Duration::MAX` without a deadline), or `None`
    /// once the deadline has passed.
    fn left(&self, now: Instant) -> Option<Duration> {
        match self.deadline {
            None => Some(Duration::MAX),
            Some(d) if now >= d => None,
            Some(d) => Some(d - now),
        }
    }

    /// Call after each failed check of the awaited condition.
    pub fn step(&mut self) -> Step {
        self.spins = self.spins.wrapping_add(1);
        if self.eager_yield {
            let now = Instant::now();
            let Some(remaining) = self.left(now) else {
                return Step::TimedOut;
            };
            if now < self.spin_until {
                std::thread::yield_now();
                return Step::Retry;
            }
            self.slept = true;
            return Step::Sleep { now, remaining };
        }
        if !self.spins.is_multiple_of(64) && !self.never_spin {
            std::hint::spin_loop();
            return Step::Retry;
        }
        let now = Instant::now();
        let Some(remaining) = self.left(now) else {
            return Step::TimedOut;
        };
        if now < self.spin_until {
            spin_pause(self.spins);
            return Step::Retry;
        }
        self.slept = true;
        Step::Sleep { now, remaining }
    }

    /// Whether this wait had to sleep (the spin did not pay).
    pub fn slept(&self) -> bool {
        self.slept
    }
}

/// One end's readiness, as every waiter of it sees it: the one abstraction
/// blocking calls ([`wait_ready`]) and event loops (`zcio::tokio`, Python's
/// asyncio, a C epoll loop) are built on.
///
/// A blocking waiter checks ([`Readiness::is_ready`]), spins on that check
/// for its adaptive budget, then *prepares to sleep*
/// ([`Readiness::prepare_sleep`]: sets its sleep flag with a
/// read-modify-write on the word the other side changes, and re-checks),
/// sleeps one slice ([`Readiness::sleep`]: a futex wait expecting the value
/// the preparation saw, or a poll of the doorbell for an end in bell mode)
/// and checks its peer ([`Readiness::alive`]) after each slice. An event
/// loop registers the end's doorbell ([`Readiness::bell_fd`]), takes the
/// rings off it when the loop says it is readable
/// ([`Readiness::take_rings`]) and stops trusting a bell that hung up while
/// the peer lives ([`Readiness::peer_gone`]).
///
/// The blocking half takes `&mut self`: a blocking wait owns its waiter (a
/// small borrowed view of one direction of an end, made per wait, no
/// allocation). The event-loop half takes `&self`, as the end is shared by
/// the tasks that wait on it; an end that has no doorbell keeps the
/// defaults. Callers are generic over it (static dispatch).
pub trait Readiness {
    /// Whether the awaited condition holds now (a cheap look: no flag set).
    fn is_ready(&mut self) -> bool;

    /// Set the sleep flag and look again: `None` when the condition holds
    /// now (do not sleep), else the value to sleep expecting (the futex
    /// word's low half as the flag's read-modify-write returned it; any
    /// value for a doorbell sleep).
    fn prepare_sleep(&mut self) -> Option<u32>;

    /// Sleep at most `slice` (never longer than [`Readiness::max_slice`]) after a
    /// [`Readiness::prepare_sleep`] that returned `armed`: until the other
    /// side changes the word (or rings the bell), or the slice passes.
    fn sleep(&mut self, armed: u32, slice: Duration);

    /// Whether the peer still lives, asked before each sleep slice (socket
    /// hang-up, pidfd, owner word). The default: a peer that cannot die.
    fn alive(&mut self) -> bool {
        true
    }

    /// The longest sleep slice (the default [`LIVENESS`]; a channel end
    /// uses its configured liveness interval).
    fn max_slice(&self) -> Duration {
        LIVENESS
    }

    /// Whether the awaited peer last ran on this CPU: then the spin yields
    /// the CPU at every step ([`SpinBudget::backoff_for`]). Default `false`.
    fn peer_on_this_cpu(&self) -> bool {
        false
    }

    /// Whether the look itself is costly (a scan, a pass over several
    /// channels): then every spin step yields the CPU, for the whole
    /// budget ([`Backoff::yielding`]). Default `false`.
    fn costly_look(&self) -> bool {
        false
    }

    /// The doorbell an event loop registers for this end (`None`: it has
    /// none, or not yet).
    fn bell_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Drain the doorbell after the event loop said it is readable
    /// (`hung_up`: it also reported a hang-up; then check the peer).
    /// Returns the rings taken (0 after a hang-up or a spurious readiness).
    fn take_rings(&self, hung_up: bool) -> usize {
        let _ = hung_up;
        0
    }

    /// Whether the peer is known to be gone (a doorbell that hung up is
    /// then no reason to distrust it). The default: not known (the waiter's
    /// liveness look finds out).
    fn peer_gone(&self) -> bool {
        false
    }
}

/// One sleep slice on a doorbell (an end in bell mode, whose peer rings
/// instead of waking a futex): until it is readable or hangs up, or
/// `slice` passes. The caller takes the rings off it afterwards.
pub fn sleep_on_bell(bell: std::os::fd::BorrowedFd<'_>, slice: Duration) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(&bell, PollFlags::IN)];
    let ts = Timespec::try_from(slice.min(LIVENESS)).unwrap_or(Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    });
    // An error (EINTR) ends the slice early: the caller looks again.
    let _ = poll(&mut fds, Some(&ts));
}

/// The spin of [`wait_ready`] alone, for a waiter that sleeps elsewhere
/// (a task in an event loop, which arms its doorbell next): look; then,
/// while the look fails, spin for `budget` (not past `deadline`), every
/// step yielding when the look is `costly` (else when the peer is
/// `peer_here`, on this CPU; see [`SpinBudget::backoff_for`]). Returns
/// whether the look succeeded. The budget learns how it ended: a success
/// as a wait that spinning served, running out as one that had to sleep —
/// unless the deadline cut the spin short, which says nothing about
/// whether spinning pays.
pub fn spin_until(
    mut look: impl FnMut() -> bool,
    budget: &mut SpinBudget,
    deadline: Option<Instant>,
    costly: bool,
    peer_here: bool,
) -> bool {
    // The first look reads no clock: a condition that holds already (the
    // partner of a ping-pong waiting on the other side) costs the look.
    if look() {
        budget.record(false);
        return true;
    }
    let mut backoff = if costly {
        Backoff::yielding_until(budget.get(), deadline)
    } else {
        budget.backoff_for_until(deadline, peer_here)
    };
    // The backoff's one clock reading serves for this check too.
    let cut_short = deadline.is_some_and(|d| {
        d.checked_duration_since(backoff.start)
            .is_none_or(|left| left < budget.get())
    });
    let mut done = false;
    while !done {
        if backoff.step() != Step::Retry {
            break;
        }
        done = look();
    }
    if !cut_short {
        budget.record(!done);
    }
    done
}

/// How a [`wait_ready`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The condition holds.
    Ready,
    /// The deadline passed first.
    TimedOut,
    /// The peer is gone ([`Readiness::alive`] said so).
    Gone,
}

/// The one bounded wait every blocking waiter goes through: look; spin on
/// the look for the adaptive `budget` (not past `deadline`); then prepare
/// to sleep, check the peer and the deadline, and sleep in slices of at
/// most [`Readiness::max_slice`] ([`LIVENESS`] unless the end configures
/// its own), until the condition holds, the peer is gone or the
/// deadline passes (`None`: never). The budget learns how the wait ended
/// (unless the deadline cut the spin short: that says nothing about
/// whether spinning pays).
///
/// A condition that holds at the first look costs one call of
/// [`Readiness::is_ready`] (and counts as a wait that spinning served);
/// the preparation comes before the peer and the
/// deadline are checked, so a waiter that gives up has flagged itself once
/// (as every transport's protocol expects of a sleeper).
pub fn wait_ready<R: Readiness>(
    r: &mut R,
    budget: &mut SpinBudget,
    deadline: Option<Instant>,
) -> Waited {
    let (costly, peer_here) = (r.costly_look(), r.peer_on_this_cpu());
    let max_slice = r.max_slice();
    if spin_until(|| r.is_ready(), budget, deadline, costly, peer_here) {
        return Waited::Ready;
    }
    loop {
        let Some(armed) = r.prepare_sleep() else {
            return Waited::Ready;
        };
        if !r.alive() {
            return Waited::Gone;
        }
        let slice = match deadline {
            None => max_slice,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(max_slice),
                _ => return Waited::TimedOut,
            },
        };
        r.sleep(armed, slice);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_policy_gives_every_budget() {
        // (The process-wide setting is left alone: tests share the process.
        // Its doctest sets it.)
        let p = SpinPolicy::DEFAULT;
        assert_eq!(SpinPolicy::default(), p);
        assert_eq!(p.budget().get(), p.max);
        assert_eq!(p.budget().max(), p.max);
        // A task spins at most task_max, max and its end's own setting.
        assert_eq!(p.task_budget(Duration::MAX).max(), p.task_max);
        let tiny = Duration::from_micros(3);
        assert_eq!(p.task_budget(tiny).max(), tiny);
        let low = SpinPolicy {
            max: Duration::from_micros(10),
            ..p
        };
        assert_eq!(low.task_budget(Duration::MAX).max(), low.max);
        let never = SpinPolicy {
            max: Duration::ZERO,
            ..p
        };
        let mut b = never.budget().backoff_until(None);
        assert!(
            matches!(b.step(), Step::Sleep { .. }),
            "max 0 sleeps at once"
        );
    }

    #[test]
    fn a_budget_of_zero_never_spins_one_that_halved_to_zero_still_polls() {
        let never = SpinBudget::new(Duration::ZERO);
        let mut b = never.backoff(Duration::from_secs(1));
        assert!(matches!(b.step(), Step::Sleep { .. }), "first step sleeps");
        assert!(b.slept());
        let mut learned = SpinBudget::new(Duration::from_micros(500));
        for _ in 0..20 {
            learned.record(true);
        }
        assert_eq!(learned.get(), Duration::ZERO);
        let mut b = learned.backoff(Duration::from_secs(1));
        assert_eq!(b.step(), Step::Retry, "polls before its first clock read");
        learned.record(false);
        assert!(
            learned.get() > Duration::ZERO,
            "spinning paid: it grows back"
        );
    }

    /// A word another thread sets to 2 (the flag is bit 0).
    struct Word<'a>(&'a crate::sync::AtomicU64, bool);

    impl Readiness for Word<'_> {
        fn is_ready(&mut self) -> bool {
            self.0.load(crate::sync::Ordering::Acquire) >= 2
        }
        fn prepare_sleep(&mut self) -> Option<u32> {
            let v = self.0.fetch_or(1, crate::sync::Ordering::AcqRel);
            (v < 2).then_some((v | 1) as u32)
        }
        fn sleep(&mut self, armed: u32, slice: Duration) {
            assert!(slice <= LIVENESS);
            crate::sync::futex_wait(self.0, armed, slice);
        }
        fn alive(&mut self) -> bool {
            self.1
        }
    }

    #[test]
    fn the_one_wait_ends_ready_timed_out_or_gone() {
        let w = std::sync::Arc::new(crate::sync::AtomicU64::new(0));
        let mut budget = SpinBudget::new(Duration::from_micros(20));
        let soon = || Some(Instant::now() + Duration::from_millis(20));
        assert_eq!(
            wait_ready(&mut Word(&w, true), &mut budget, soon()),
            Waited::TimedOut
        );
        assert_eq!(budget.get(), Duration::from_micros(10), "slept: halved");
        assert_eq!(w.load(crate::sync::Ordering::Relaxed), 1, "flagged once");
        assert_eq!(
            wait_ready(&mut Word(&w, false), &mut budget, None),
            Waited::Gone
        );
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            w2.store(2, crate::sync::Ordering::Release);
            crate::sync::futex_wake(&w2);
        });
        assert_eq!(
            wait_ready(
                &mut Word(&w, true),
                &mut SpinBudget::new(Duration::ZERO),
                None
            ),
            Waited::Ready
        );
        t.join().unwrap();
        assert_eq!(
            wait_ready(&mut Word(&w, true), &mut budget, Some(Instant::now())),
            Waited::Ready,
            "ready at the first look, even past the deadline"
        );
    }
}
