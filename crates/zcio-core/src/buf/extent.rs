//! Page-granular best-fit extent allocator with coalescing, one per chunk.
//!
//! Allocation is exact to the page: a 5-page buffer takes 5 pages, so
//! variable message sizes never waste a worst-case slot. The pool puts a
//! LIFO quick list per page count in front of this for the hot path.

use std::collections::{BTreeMap, BTreeSet};

/// Free extents of one chunk, in pages.
#[derive(Debug, Clone)]
pub struct Extents {
    pages: u32,
    by_start: BTreeMap<u32, u32>,
    by_size: BTreeSet<(u32, u32)>,
    free_pages: u32,
}

impl Extents {
    /// A chunk of `pages` pages, all free.
    pub fn new(pages: u32) -> Self {
        let mut e = Self {
            pages,
            by_start: BTreeMap::new(),
            by_size: BTreeSet::new(),
            free_pages: 0,
        };
        if pages > 0 {
            e.insert(0, pages);
        }
        e
    }

    fn insert(&mut self, start: u32, len: u32) {
        self.by_start.insert(start, len);
        self.by_size.insert((len, start));
        self.free_pages += len;
    }

    fn remove(&mut self, start: u32, len: u32) {
        self.by_start.remove(&start);
        self.by_size.remove(&(len, start));
        self.free_pages -= len;
    }

    /// Best-fit allocation of `n` pages; returns the first page.
    pub fn alloc(&mut self, n: u32) -> Option<u32> {
        if n == 0 {
            return None;
        }
        let &(len, start) = self.by_size.range((n, 0)..).next()?;
        self.remove(start, len);
        if len > n {
            self.insert(start + n, len - n);
        }
        Some(start)
    }

    /// Return `n` pages at `start`, merging with free neighbours. Returns
    /// `false` (and changes nothing) if the range is out of bounds or
    /// overlaps free space — a double free.
    pub fn free(&mut self, start: u32, n: u32) -> bool {
        let Some(end) = start.checked_add(n) else {
            return false;
        };
        if n == 0 || end > self.pages {
            return false;
        }
        let prev = self
            .by_start
            .range(..=start)
            .next_back()
            .map(|(&s, &l)| (s, l));
        if let Some((ps, pl)) = prev {
            if ps + pl > start {
                return false;
            }
        }
        let next = self.by_start.range(start..).next().map(|(&s, &l)| (s, l));
        if let Some((ns, _)) = next {
            if ns < end {
                return false;
            }
        }
        let (mut s, mut l) = (start, n);
        if let Some((ps, pl)) = prev {
            if ps + pl == start {
                self.remove(ps, pl);
                s = ps;
                l += pl;
            }
        }
        if let Some((ns, nl)) = next {
            if ns == end {
                self.remove(ns, nl);
                l += nl;
            }
        }
        self.insert(s, l);
        true
    }

    /// Free pages.
    #[cfg(test)]
    pub fn free_pages(&self) -> u32 {
        self.free_pages
    }

    /// Total pages.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Largest free extent.
    #[cfg(test)]
    pub fn largest(&self) -> u32 {
        self.by_size.iter().next_back().map_or(0, |&(l, _)| l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_fit_and_coalesce() {
        let mut e = Extents::new(10);
        let a = e.alloc(3).unwrap();
        let b = e.alloc(5).unwrap();
        let c = e.alloc(2).unwrap();
        assert_eq!(e.alloc(1), None);
        assert!(e.free(b, 5));
        assert!(!e.free(b, 5), "double free refused");
        assert!(e.free(a, 3));
        assert!(e.free(c, 2));
        assert_eq!(e.largest(), 10);
        assert_eq!(e.free_pages(), 10);
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn never_overlaps(ops in proptest::collection::vec((1u32..8, any::<bool>()), 1..crate::testing::scaled(200, 24))) {
            let mut e = Extents::new(64);
            let mut live: Vec<(u32, u32)> = Vec::new();
            for (n, free) in ops {
                if free && !live.is_empty() {
                    let (s, l) = live.swap_remove(n as usize % live.len());
                    prop_assert!(e.free(s, l));
                } else if let Some(s) = e.alloc(n) {
                    for &(ls, ll) in &live {
                        prop_assert!(s + n <= ls || ls + ll <= s, "overlap");
                    }
                    live.push((s, n));
                }
                let used: u32 = live.iter().map(|x| x.1).sum();
                prop_assert_eq!(e.free_pages() + used, 64);
            }
            for (s, l) in live { prop_assert!(e.free(s, l)); }
            prop_assert_eq!(e.largest(), 64);
        }
    }
}
