//! One-way latency from ping-pong round trips: half a round trip.

/// The `p` quantile (0 < p ≤ 1) of `sorted` round-trip times in ns, halved
/// (0 for no samples).
pub fn quantile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 2.0
}

/// The mean of `rt` (round-trip times in ns), halved.
pub fn mean(rt: &[u64]) -> f64 {
    if rt.is_empty() {
        return 0.0;
    }
    rt.iter().sum::<u64>() as f64 / rt.len() as f64 / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_the_nearest_rank() {
        let rt: Vec<u64> = (1..=100).map(|i| i * 10).collect();
        assert_eq!(quantile(&rt, 0.5), 250.0);
        assert_eq!(quantile(&rt, 0.99), 495.0);
        assert_eq!(quantile(&rt, 1.0), 500.0);
        assert_eq!(mean(&rt), 252.5);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
