//! The search for the highest loss-free rate: double from a start rate
//! until a trial loses packets (or the highest rate passes), then bisect
//! (geometrically) between the best loss-free rate and the lowest lossy one
//! until they are within [`Search::precision`] of each other — all within a
//! bounded number of trials. Pure logic, driven by the caller's trials.

/// The state of one search.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The highest rate that was loss-free.
    good: Option<f64>,
    /// The lowest rate that lost packets.
    bad: Option<f64>,
    start: f64,
    min: f64,
    max: f64,
    trials: usize,
    max_trials: usize,
    /// Stop when `bad / good` is at most this.
    pub precision: f64,
}

impl Search {
    /// A search starting at `start`, within `min..=max`, at most
    /// `max_trials` trials.
    pub fn new(start: f64, min: f64, max: f64, max_trials: usize) -> Self {
        Self {
            good: None,
            bad: None,
            start: start.clamp(min, max),
            min,
            max,
            trials: 0,
            max_trials,
            precision: 1.1,
        }
    }

    /// The next rate to try, or `None` when the search is done.
    pub fn next(&self) -> Option<f64> {
        if self.trials >= self.max_trials {
            return None;
        }
        match (self.good, self.bad) {
            (None, None) => Some(self.start),
            (Some(g), None) => (g < self.max * 0.99).then(|| (2.0 * g).min(self.max)),
            (None, Some(b)) => (b / 2.0 >= self.min).then_some(b / 2.0),
            (Some(g), Some(b)) => (b > g * self.precision).then(|| (g * b).sqrt()),
        }
    }

    /// Record a trial at `rate`: loss-free or not.
    pub fn record(&mut self, rate: f64, loss_free: bool) {
        self.trials += 1;
        if loss_free {
            self.good = Some(self.good.map_or(rate, |g| g.max(rate)));
        } else {
            self.bad = Some(self.bad.map_or(rate, |b| b.min(rate)));
        }
    }

    /// No rate above `rate` can be offered (the generator's limit): the
    /// search stays at or below it.
    pub fn cap(&mut self, rate: f64) {
        self.max = self.max.min(rate.max(self.min));
    }

    /// The highest loss-free rate seen (`None`: every trial lost packets).
    pub fn result(&self) -> Option<f64> {
        self.good
    }

    /// Trials so far.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Whether the result is bounded only by the highest rate tried (or
    /// the generator), not by a lossy trial.
    pub fn at_ceiling(&self) -> bool {
        self.bad.is_none() && self.good.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run a search against a forwarder that loses packets above `limit`.
    fn run(mut s: Search, limit: f64) -> (Search, Vec<f64>) {
        let mut tried = Vec::new();
        while let Some(r) = s.next() {
            tried.push(r);
            s.record(r, r <= limit);
        }
        (s, tried)
    }

    #[test]
    fn doubles_then_bisects_to_the_precision() {
        let (s, tried) = run(Search::new(10_000.0, 1000.0, 10e6, 30), 123_456.0);
        assert_eq!(
            &tried[..5],
            &[10_000.0, 20_000.0, 40_000.0, 80_000.0, 160_000.0]
        );
        let r = s.result().unwrap();
        assert!(r <= 123_456.0 && r * 1.1 >= 123_456.0, "{r}");
        assert!(!s.at_ceiling());
    }

    #[test]
    fn is_bounded_in_trials() {
        let (s, tried) = run(Search::new(10_000.0, 1000.0, 10e6, 6), 1e9);
        assert_eq!(tried.len(), 6);
        assert_eq!(s.trials(), 6);
        assert_eq!(s.result(), Some(320_000.0));
    }

    #[test]
    fn stops_at_the_highest_rate() {
        let (s, tried) = run(Search::new(1e6, 1000.0, 3e6, 20), 1e9);
        assert_eq!(tried, vec![1e6, 2e6, 3e6]);
        assert!(s.at_ceiling());
    }

    #[test]
    fn halves_down_when_the_start_loses() {
        let (s, tried) = run(Search::new(100_000.0, 1000.0, 1e7, 20), 30_000.0);
        assert_eq!(&tried[..3], &[100_000.0, 50_000.0, 25_000.0]);
        assert!(s.result().unwrap() >= 30_000.0 / 1.1);
        // Nothing is loss-free: the search ends at the lowest rate.
        let (s, tried) = run(Search::new(8000.0, 1000.0, 1e7, 20), 10.0);
        assert_eq!(tried, vec![8000.0, 4000.0, 2000.0, 1000.0]);
        assert_eq!(s.result(), None);
    }

    #[test]
    fn a_cap_stops_the_doubling() {
        let mut s = Search::new(100_000.0, 1000.0, 1e7, 20);
        s.record(100_000.0, true);
        s.cap(150_000.0);
        assert_eq!(s.next(), Some(150_000.0));
        s.record(150_000.0, true);
        assert_eq!(s.next(), None);
    }

    #[test]
    fn noise_does_not_loop() {
        // Lossy at a low rate after a good high one: the search ends.
        let mut s = Search::new(100_000.0, 1000.0, 1e7, 20);
        s.record(100_000.0, true);
        s.record(50_000.0, false);
        assert_eq!(s.next(), None);
        assert_eq!(s.result(), Some(100_000.0));
    }
}
