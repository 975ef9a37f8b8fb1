//! Pure helpers of `zcio-bench proxy`: mean and standard deviation. (The
//! clocks are `crate::clock`'s, the checksums `crate::checksum`'s.)

/// Running mean and variance (Welford): no sample vector, no loss of
/// precision with many samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Welford {
    /// Add one sample.
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Their mean (0 without samples).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Their sample standard deviation (0 with fewer than two).
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welford_mean_and_stddev() {
        let mut w = Welford::default();
        assert_eq!((w.mean(), w.stddev()), (0.0, 0.0));
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            w.add(x);
        }
        assert_eq!(w.count(), 8);
        assert!((w.mean() - 5.0).abs() < 1e-12);
        // Sample standard deviation: sqrt(32 / 7).
        assert!((w.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }
}
