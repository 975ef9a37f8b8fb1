//! Application data units over a `Msg`: fixed-size records and
//! delimiter-terminated lines, read in place and copied only when a unit
//! straddles two slices.

use crate::msg::Msg;
use crate::view::View;

/// One application data unit: in place when it lies inside one slice, a
/// private copy when it straddles slices.
#[derive(Debug, Clone)]
pub enum Unit<'a> {
    /// The bytes where they are (see [`View`]).
    InPlace(View<'a>),
    /// A copy (the unit straddled slices).
    Copied(Vec<u8>),
}

impl Unit<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Unit::InPlace(v) => v.len(),
            Unit::Copied(v) => v.len(),
        }
    }

    /// Whether the unit is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the unit had to be copied.
    pub fn is_copied(&self) -> bool {
        matches!(self, Unit::Copied(_))
    }

    /// The bytes, read in place.
    pub fn view(&self) -> View<'_> {
        match self {
            Unit::InPlace(v) => *v,
            Unit::Copied(v) => View::from_slice(v),
        }
    }

    /// The bytes as a plain slice when nobody can change them (a copy, or
    /// an [immutable](View::is_immutable) view).
    pub fn as_slice(&self) -> Option<&[u8]> {
        match self {
            Unit::InPlace(v) => v.as_slice(),
            Unit::Copied(v) => Some(v),
        }
    }

    /// A private copy of the bytes.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Unit::InPlace(v) => v.to_vec(),
            Unit::Copied(v) => v,
        }
    }
}

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

    /// The unread rest of the current slice.
    fn current(&self) -> Option<View<'a>> {
        let s = self.msg.slices().get(self.slice)?;
        s.view().slice(self.offset, s.len() - self.offset)
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

    /// Copy the next `n` bytes (known to remain) out, advancing.
    fn copy_out(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        let mut done = 0;
        while done < n {
            let Some(cur) = self.current() else { break };
            let k = cur.read_at(0, &mut v[done..]);
            done += k;
            self.advance(k);
        }
        v.truncate(done);
        self.copies += 1;
        v
    }

    /// The next `size`-byte record; `None` when fewer than `size` bytes
    /// remain (the partial tail stays available to `rest`).
    pub fn next_record(&mut self, size: usize) -> Option<Unit<'a>> {
        if size == 0 || self.remaining() < size {
            return None;
        }
        let cur = self.current()?;
        if cur.len() >= size {
            let out = cur.slice(0, size)?;
            self.advance(size);
            return Some(Unit::InPlace(out));
        }
        Some(Unit::Copied(self.copy_out(size)))
    }

    /// The next unit ending in `delim` (delimiter included). At the end of
    /// the message, an unterminated tail is *not* returned (see `rest`).
    pub fn next_line(&mut self, delim: u8) -> Option<Unit<'a>> {
        let cur = self.current()?;
        if let Some(i) = cur.position(delim) {
            let out = cur.slice(0, i + 1)?;
            self.advance(i + 1);
            return Some(Unit::InPlace(out));
        }
        // Find the delimiter in a later slice before copying anything.
        let slices = self.msg.slices();
        let mut total = cur.len();
        let mut found = None;
        for s in &slices[self.slice + 1..] {
            if let Some(i) = s.view().position(delim) {
                found = Some(total + i + 1);
                break;
            }
            total += s.len();
        }
        let n = found?;
        Some(Unit::Copied(self.copy_out(n)))
    }

    /// Everything not yet consumed, as one unit.
    pub fn rest(&mut self) -> Unit<'a> {
        let n = self.remaining();
        match self.current() {
            None => Unit::Copied(Vec::new()),
            Some(cur) if cur.len() == n => {
                self.advance(n);
                Unit::InPlace(cur)
            }
            Some(_) => Unit::Copied(self.copy_out(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::buf::{Pool, PoolConfig};
    use crate::msg::{Msg, Unit};

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
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn records_copy_only_straddlers() {
        let m = msg(&[b"aaaabb", b"bbcccc", b"dd"]);
        let mut c = m.units();
        let a = c.next_record(4).unwrap();
        assert!(matches!(a, Unit::InPlace(_)));
        assert_eq!(
            a.as_slice(),
            Some(&b"aaaa"[..]),
            "our buffers are immutable"
        );
        let b = c.next_record(4).unwrap();
        assert!(b.is_copied());
        assert_eq!(b.into_vec(), b"bbbb");
        assert_eq!(c.next_record(4).unwrap().view().to_vec(), b"cccc");
        assert!(c.next_record(4).is_none());
        assert_eq!(c.copies(), 1);
        assert_eq!(c.rest().into_vec(), b"dd");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn lines_across_slices() {
        let m = msg(&[b"one\ntw", b"o", b"\nthree\nfour"]);
        let mut c = m.units();
        let lines: Vec<Vec<u8>> =
            std::iter::from_fn(|| c.next_line(b'\n').map(Unit::into_vec)).collect();
        assert_eq!(
            lines,
            vec![b"one\n".to_vec(), b"two\n".to_vec(), b"three\n".to_vec()]
        );
        assert_eq!(c.copies(), 1);
        assert_eq!(c.rest().into_vec(), b"four");
        assert_eq!(c.remaining(), 0);
    }
}
