//! `ratelimit:rate=BYTES_PER_S[,burst=SIZE]`: a token bucket that delays
//! (sleeps in `put`) so the stream's long-run rate stays at `rate`;
//! passes every block on unchanged.
//!
//! The bucket holds up to `burst` bytes (default: a tenth of a second at
//! `rate`, at least 64 KiB) and fills at `rate`. A block takes its length
//! in tokens; when there are not enough, `put` sleeps until the debt is
//! paid (a block larger than `burst` simply waits longer). Because the
//! sleep is in `put`, the association's mover is slowed down, which paces
//! a passive source through flow control.
//!
//! Control: `rate` / `burst` (read or write a size), `stats`.

use std::time::{Duration, Instant};

use super::{parse_size, Args, Context, Flow, Module, ModuleError};
use crate::msg::Msg;

/// Time source and sleeper (a fake one in tests, so nothing depends on
/// real timing).
pub(crate) trait Clock: Send {
    /// Now.
    fn now(&mut self) -> Instant;
    /// Sleep for `d`.
    fn sleep(&mut self, d: Duration);
}

/// The real clock.
#[derive(Debug, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&mut self) -> Instant {
        Instant::now()
    }
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// The `ratelimit` module.
pub struct RateLimit {
    rate: u64,
    burst: u64,
    /// Tokens (bytes) available; negative is a debt.
    tokens: f64,
    last: Instant,
    clock: Box<dyn Clock>,
    flow: Flow,
    slept: Duration,
    delayed: u64,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("rate", &self.rate)
            .field("burst", &self.burst)
            .finish()
    }
}

fn default_burst(rate: u64) -> u64 {
    (rate / 10).max(64 << 10)
}

impl RateLimit {
    /// Open: `rate=SIZE` (bytes per second, required), `burst=SIZE`.
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        Self::with_clock(args, Box::new(SystemClock))
    }

    /// Open with a given clock.
    pub(crate) fn with_clock(
        mut args: Args,
        mut clock: Box<dyn Clock>,
    ) -> Result<Self, ModuleError> {
        let rate = args.take_size("rate")?.ok_or_else(|| {
            ModuleError::bad_args("ratelimit", "needs rate=BYTES_PER_SECOND (e.g. rate=100M)")
        })?;
        let burst = args.take_size("burst")?;
        args.finish(&["rate", "burst"])?;
        if rate == 0 {
            return Err(ModuleError::bad_args("ratelimit", "rate must be > 0"));
        }
        let burst = burst.unwrap_or_else(|| default_burst(rate)).max(1);
        let last = clock.now();
        Ok(Self {
            rate,
            burst,
            tokens: burst as f64,
            last,
            clock,
            flow: Flow::default(),
            slept: Duration::ZERO,
            delayed: 0,
        })
    }

    /// Total time slept so far.
    pub fn slept(&self) -> Duration {
        self.slept
    }

    fn refill(&mut self) {
        let now = self.clock.now();
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate as f64).min(self.burst as f64);
    }

    /// Take `n` tokens, sleeping off any debt.
    fn take(&mut self, n: u64) {
        self.refill();
        self.tokens -= n as f64;
        if self.tokens < 0.0 {
            let wait = Duration::from_secs_f64(-self.tokens / self.rate as f64);
            self.clock.sleep(wait);
            self.slept += wait;
            self.delayed += 1;
            self.refill();
        }
    }
}

impl Module for RateLimit {
    fn name(&self) -> &str {
        "ratelimit"
    }

    fn put(
        &mut self,
        block: Msg,
        _cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        self.take(block.len() as u64);
        self.flow.bytes_out += block.len() as u64;
        self.flow.blocks_out += 1;
        out.push(block);
        Ok(())
    }

    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        let parse = |v: &str| {
            parse_size(v)
                .filter(|&n| n > 0)
                .ok_or_else(|| ModuleError::control("ratelimit", key, "expected a size > 0"))
        };
        match (key, value) {
            ("rate", None) => Ok(self.rate.to_string()),
            ("burst", None) => Ok(self.burst.to_string()),
            ("rate", Some(v)) => {
                self.refill();
                self.rate = parse(v)?;
                Ok("ok".into())
            }
            ("burst", Some(v)) => {
                self.burst = parse(v)?;
                self.tokens = self.tokens.min(self.burst as f64);
                Ok("ok".into())
            }
            ("stats", None) => Ok(super::format_stats(&self.stats())),
            _ => Err(ModuleError::control(
                "ratelimit",
                key,
                "expected rate, burst (read/write) or stats",
            )),
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bytes", self.flow.bytes_in),
            ("blocks", self.flow.blocks_in),
            ("rate", self.rate),
            ("burst", self.burst),
            ("delayed", self.delayed),
            ("slept_us", self.slept.as_micros() as u64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool};
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Time advances only by sleeping (and by `tick`).
    #[derive(Clone)]
    struct Fake(Arc<Mutex<(Instant, Duration)>>);

    impl Clock for Fake {
        fn now(&mut self) -> Instant {
            let g = self.0.lock().unwrap();
            g.0 + g.1
        }
        fn sleep(&mut self, d: Duration) {
            self.0.lock().unwrap().1 += d;
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn long_run_rate_is_the_limit() {
        let pool = pool();
        let fake = Fake(Arc::new(Mutex::new((Instant::now(), Duration::ZERO))));
        let args = Args::parse("ratelimit", "rate=1M,burst=64K").unwrap();
        let mut m = RateLimit::with_clock(args, Box::new(fake.clone())).unwrap();
        let mut cx = Context::new(&pool);
        let mut out = Vec::new();
        let b = block(&pool, &[1u8; 16 << 10], 1);
        for _ in 0..256 {
            m.put(b.clone(), &mut cx, &mut out).unwrap(); // 4 MiB in all
        }
        // 4 MiB at 1 MiB/s, less the initial 64 KiB burst.
        let want = (4.0 * 1024.0 - 64.0) / 1024.0;
        let got = m.slept().as_secs_f64();
        assert!((got - want).abs() < 1e-6, "slept {got}, want {want}");
        assert_eq!(out.len(), 256);
        assert!(out[0].slices()[0].fbuf().ptr_eq(b.slices()[0].fbuf()));
        assert_eq!(m.control("rate", None).unwrap(), (1u64 << 20).to_string());
        m.control("rate", Some("2M")).unwrap();
        assert!(m.control("rate", Some("0")).is_err());
    }

    #[test]
    fn arguments() {
        let e = RateLimit::open(Args::parse("ratelimit", "").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("rate="), "{e}");
        assert!(RateLimit::open(Args::parse("ratelimit", "rate=0").unwrap()).is_err());
        assert!(RateLimit::open(Args::parse("ratelimit", "rate=fast").unwrap()).is_err());
        let m = RateLimit::open(Args::parse("ratelimit", "rate=100M").unwrap()).unwrap();
        assert_eq!(m.burst, 10 << 20);
    }
}
