//! Helpers for zcio's own unit tests.
//!
//! Under Miri (`scripts/miri`) every test runs about a hundred times
//! slower and without access to the file system, so property tests run a
//! few cases and keep no failure-persistence file (proptest's default one
//! calls `getcwd`, which Miri's isolation refuses).

/// A proptest configuration of `cases` cases, or a handful under Miri.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    if cfg!(miri) {
        proptest::test_runner::Config {
            cases: cases.min(MIRI_CASES),
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        }
    } else {
        proptest::test_runner::Config::with_cases(cases)
    }
}

/// Cases of each property test under Miri.
const MIRI_CASES: u32 = 4;

/// `n`, or `miri` under Miri: the size of a test's workload (iterations,
/// lengths) where the full size would take minutes to interpret.
pub const fn scaled(n: usize, miri: usize) -> usize {
    if cfg!(miri) {
        miri
    } else {
        n
    }
}
