//! Application data units over a `Msg`: fixed-size records and
//! delimiter-terminated lines, borrowed in place and copied only when a unit
//! straddles two slices.

use std::borrow::Cow;

use crate::msg::Msg;

/// Walks a message yielding units; see [`Msg::units`].
#[derive(Debug, Clone)]
pub struct UnitCursor<'a> {
    msg: &'a Msg,
    slice: usize,
    offset: usize,
    copies: usize,
}

impl<'a> UnitCursor<'a> {
    pub(crate) fn new(msg: &'a Msg) -> Self {
        Self {
            msg,
            slice: 0,
            offset: 0,
            copies: 0,
        }
    }

    /// Units that had to be copied because they straddled slices.
    pub fn copies(&self) -> usize {
        self.copies
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        let s = self.msg.slices();
        if self.slice >= s.len() {
            return 0;
        }
        s[self.slice].len() - self.offset
            + s[self.slice + 1..].iter().map(|x| x.len()).sum::<usize>()
    }

    fn current(&self) -> Option<&'a [u8]> {
        self.msg
            .slices()
            .get(self.slice)
            .map(|s| &s.as_slice()[self.offset..])
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(cur) = self.current() else { return };
            if n < cur.len() {
                self.offset += n;
                return;
            }
            n -= cur.len();
            self.slice += 1;
            self.offset = 0;
        }
        if self.current().is_some_and(|c| c.is_empty()) {
            self.slice += 1;
            self.offset = 0;
        }
    }

    /// The next `size`-byte record; `None` when fewer than `size` bytes
    /// remain (the partial tail stays available to `rest`).
    pub fn next_record(&mut self, size: usize) -> Option<Cow<'a, [u8]>> {
        if size == 0 || self.remaining() < size {
            return None;
        }
        let cur = self.current()?;
        if cur.len() >= size {
            let out = &cur[..size];
            self.advance(size);
            return Some(Cow::Borrowed(out));
        }
        let mut v = Vec::with_capacity(size);
        while v.len() < size {
            let cur = self.current()?;
            let take = (size - v.len()).min(cur.len());
            v.extend_from_slice(&cur[..take]);
            self.advance(take);
        }
        self.copies += 1;
        Some(Cow::Owned(v))
    }

    /// The next unit ending in `delim` (delimiter included). At the end of
    /// the message, an unterminated tail is *not* returned (see `rest`).
    pub fn next_line(&mut self, delim: u8) -> Option<Cow<'a, [u8]>> {
        let cur = self.current()?;
        if let Some(i) = cur.iter().position(|&b| b == delim) {
            let out = &cur[..=i];
            self.advance(i + 1);
            return Some(Cow::Borrowed(out));
        }
        // Find the delimiter in a later slice before copying anything.
        let slices = self.msg.slices();
        let mut total = cur.len();
        let mut found = None;
        for s in &slices[self.slice + 1..] {
            if let Some(i) = s.as_slice().iter().position(|&b| b == delim) {
                found = Some(total + i + 1);
                break;
            }
            total += s.len();
        }
        let n = found?;
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            let cur = self.current()?;
            let take = (n - v.len()).min(cur.len());
            v.extend_from_slice(&cur[..take]);
            self.advance(take);
        }
        self.copies += 1;
        Some(Cow::Owned(v))
    }

    /// Everything not yet consumed, as one unit.
    pub fn rest(&mut self) -> Cow<'a, [u8]> {
        let n = self.remaining();
        match self.current() {
            None => Cow::Borrowed(&[]),
            Some(cur) if cur.len() == n => {
                self.advance(n);
                Cow::Borrowed(cur)
            }
            Some(_) => {
                let mut v = Vec::with_capacity(n);
                while let Some(cur) = self.current() {
                    v.extend_from_slice(cur);
                    let l = cur.len();
                    self.advance(l);
                }
                self.copies += 1;
                Cow::Owned(v)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::buf::{Pool, PoolConfig};
    use crate::msg::Msg;
    use std::borrow::Cow;

    fn msg(parts: &[&[u8]]) -> Msg {
        let p = Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            populate: false,
            ..PoolConfig::named("cur")
        });
        let mut m = Msg::new();
        for part in parts {
            let mut b = p.try_alloc(part.len()).unwrap();
            b.as_mut_slice().copy_from_slice(part);
            m.join(Msg::from(b.freeze().unwrap())).unwrap();
        }
        m
    }

    #[test]
    fn records_copy_only_straddlers() {
        let m = msg(&[b"aaaabb", b"bbcccc", b"dd"]);
        let mut c = m.units();
        assert!(matches!(c.next_record(4), Some(Cow::Borrowed(b"aaaa"))));
        assert_eq!(c.next_record(4).unwrap().as_ref(), b"bbbb");
        assert!(matches!(c.next_record(4), Some(Cow::Borrowed(b"cccc"))));
        assert_eq!(c.next_record(4), None);
        assert_eq!(c.copies(), 1);
        assert_eq!(c.rest().as_ref(), b"dd");
    }

    #[test]
    fn lines_across_slices() {
        let m = msg(&[b"one\ntw", b"o", b"\nthree\nfour"]);
        let mut c = m.units();
        let lines: Vec<Vec<u8>> =
            std::iter::from_fn(|| c.next_line(b'\n').map(|l| l.into_owned())).collect();
        assert_eq!(
            lines,
            vec![b"one\n".to_vec(), b"two\n".to_vec(), b"three\n".to_vec()]
        );
        assert_eq!(c.copies(), 1);
        assert_eq!(c.rest().as_ref(), b"four");
        assert_eq!(c.remaining(), 0);
    }
}
