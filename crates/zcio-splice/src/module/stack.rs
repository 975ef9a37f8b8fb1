//! A per-association stack of modules (Streams' `I_PUSH` / `I_POP`).

use std::sync::Arc;

use super::{Context, Module, ModuleError};
use crate::buf::Pool;
use crate::msg::Msg;

/// Which module of a stack: by position (0 = first to see the data) or
/// by name (the first module of that name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackIndex<'a> {
    /// Position from the source side.
    At(usize),
    /// The first module with this name.
    Named(&'a str),
}

impl From<usize> for StackIndex<'_> {
    fn from(i: usize) -> Self {
        Self::At(i)
    }
}

impl<'a> From<&'a str> for StackIndex<'a> {
    fn from(s: &'a str) -> Self {
        // "2" names a position, anything else a module.
        match s.parse() {
            Ok(i) => Self::At(i),
            Err(_) => Self::Named(s),
        }
    }
}

// A stack moves with its association (e.g. to a mover thread).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Stack>();
};

struct Slot {
    name: Arc<str>,
    module: Box<dyn Module>,
}

/// The modules of one association, in data order: a block put into the
/// stack passes module 0 first, and what each module emits goes into the
/// next. Pushing adds at the sink end (last to see the data), popping
/// removes from there (LIFO, as Streams). Blocks travel between modules as
/// `Msg`s — slices of pool buffers — so nothing is copied between them.
pub struct Stack {
    pool: Pool,
    slots: Vec<Slot>,
    copied: u64,
    allocated: u64,
    /// Reused per-stage vectors (no allocation per block once warm).
    spare: Vec<Vec<Msg>>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("modules", &self.names())
            .field("copied", &self.copied)
            .finish()
    }
}

impl Stack {
    /// An empty stack whose modules take output buffers from `pool`.
    pub fn new(pool: Pool) -> Self {
        Self {
            pool,
            slots: Vec::new(),
            copied: 0,
            allocated: 0,
            spare: Vec::new(),
        }
    }

    /// The pool output buffers come from.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Add `m` at the sink end.
    pub fn push(&mut self, m: Box<dyn Module>) {
        let name: Arc<str> = Arc::from(m.name());
        self.slots.push(Slot { name, module: m });
    }

    /// Remove the module at the sink end (the last pushed). Closing it is
    /// dropping it; call [`Stack::finish`] first if its buffered output
    /// matters.
    pub fn pop(&mut self) -> Option<Box<dyn Module>> {
        self.slots.pop().map(|s| s.module)
    }

    /// Flush the module at the sink end (its [`Module::finish`]) and remove
    /// it: the module and what it emitted at its end (which goes straight
    /// to the sink, no module follows it). `None` when the stack is empty.
    /// On error the module stays on the stack.
    #[allow(clippy::type_complexity)]
    pub fn pop_finished(&mut self) -> Result<Option<(Box<dyn Module>, Vec<Msg>)>, ModuleError> {
        let Some(slot) = self.slots.last_mut() else {
            return Ok(None);
        };
        let mut cx = Context::new(&self.pool);
        cx.enter(&slot.name);
        let mut emitted = Vec::new();
        let r = slot.module.finish(&mut cx, &mut emitted);
        self.copied += cx.copied();
        self.allocated += cx.allocated();
        r?;
        Ok(self.slots.pop().map(|s| (s.module, emitted)))
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no modules (the association may use a kernel
    /// fast path).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The modules' names in data order.
    pub fn names(&self) -> Vec<&str> {
        self.slots.iter().map(|s| &*s.name).collect()
    }

    /// Bytes copied by the modules' helpers since the stack was made (0
    /// for a stack of pass-through modules).
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// Bytes of output buffers the modules allocated.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Run one block through every module in order; the blocks the last
    /// module emitted. With no modules, the block itself.
    pub fn put(&mut self, block: Msg) -> Result<Vec<Msg>, ModuleError> {
        let mut cur = vec![block];
        self.run_from(0, &mut cur)?;
        Ok(cur)
    }

    /// End of stream: each module's `finish`, in order; what module `i`
    /// emits at the end still passes modules `i + 1 ..`. Returns the last
    /// blocks.
    pub fn finish(&mut self) -> Result<Vec<Msg>, ModuleError> {
        let mut all = Vec::new();
        for i in 0..self.slots.len() {
            let mut emitted = Vec::new();
            {
                let mut cx = Context::new(&self.pool);
                let slot = &mut self.slots[i];
                cx.enter(&slot.name);
                let r = slot.module.finish(&mut cx, &mut emitted);
                self.copied += cx.copied();
                self.allocated += cx.allocated();
                r?;
            }
            self.run_from(i + 1, &mut emitted)?;
            all.extend(emitted);
        }
        Ok(all)
    }

    /// Pass `blocks` through modules `from..`, replacing them with the
    /// output.
    fn run_from(&mut self, from: usize, blocks: &mut Vec<Msg>) -> Result<(), ModuleError> {
        let Self {
            pool,
            slots,
            copied,
            allocated,
            spare,
        } = self;
        let mut cx = Context::new(pool);
        let mut result = Ok(());
        for slot in slots.iter_mut().skip(from) {
            if blocks.is_empty() {
                break;
            }
            cx.enter(&slot.name);
            let mut next = spare.pop().unwrap_or_default();
            for b in blocks.drain(..) {
                if let Err(e) = slot.module.put(b, &mut cx, &mut next) {
                    result = Err(e);
                    break;
                }
            }
            let done = std::mem::replace(blocks, next);
            spare.push(done);
            if result.is_err() {
                break;
            }
        }
        *copied += cx.copied();
        *allocated += cx.allocated();
        if result.is_err() {
            blocks.clear();
        }
        result
    }

    fn find(&self, which: StackIndex<'_>) -> Result<usize, ModuleError> {
        match which {
            StackIndex::At(i) if i < self.slots.len() => Ok(i),
            StackIndex::At(i) => Err(ModuleError::NotInStack(format!(
                "at position {i} (the stack has {})",
                self.slots.len()
            ))),
            StackIndex::Named(n) => {
                self.slots
                    .iter()
                    .position(|s| &*s.name == n)
                    .ok_or_else(|| {
                        ModuleError::NotInStack(format!(
                            "named '{n}' (the stack has: {})",
                            self.names().join(", ")
                        ))
                    })
            }
        }
    }

    /// Control read/write of one module (see [`Module::control`]).
    pub fn control<'a>(
        &mut self,
        which: impl Into<StackIndex<'a>>,
        key: &str,
        value: Option<&str>,
    ) -> Result<String, ModuleError> {
        let i = self.find(which.into())?;
        self.slots[i].module.control(key, value)
    }

    /// Every module's counters, in data order: (name, counters).
    pub fn stats(&self) -> Vec<(String, Vec<(&'static str, u64)>)> {
        self.slots
            .iter()
            .map(|s| (s.name.to_string(), s.module.stats()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool};
    use super::super::Flow;
    use super::*;

    /// Splits every block in two and tags finish with one byte.
    struct Halve {
        name: &'static str,
        flow: Flow,
        end: u8,
    }

    impl Module for Halve {
        fn name(&self) -> &str {
            self.name
        }
        fn put(
            &mut self,
            mut block: Msg,
            _cx: &mut Context<'_>,
            out: &mut Vec<Msg>,
        ) -> Result<(), ModuleError> {
            self.flow.input(&block);
            let from = out.len();
            let tail = block
                .split_off(block.len() / 2)
                .map_err(|e| ModuleError::msg(self.name, e))?;
            for m in [block, tail] {
                if !m.is_empty() {
                    out.push(m);
                }
            }
            self.flow.output(out, from);
            Ok(())
        }
        fn finish(&mut self, cx: &mut Context<'_>, out: &mut Vec<Msg>) -> Result<(), ModuleError> {
            out.push(cx.block_from(&[self.end])?);
            Ok(())
        }
        fn stats(&self) -> Vec<(&'static str, u64)> {
            self.flow.stats().to_vec()
        }
    }

    fn halve(name: &'static str, end: u8) -> Box<dyn Module> {
        Box::new(Halve {
            name,
            flow: Flow::default(),
            end,
        })
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn order_push_pop_finish() {
        let pool = pool();
        let mut s = Stack::new(pool.clone());
        assert!(s.is_empty());
        let b = block(&pool, b"abcdefgh", 1);
        let out = s.put(b.clone()).unwrap();
        assert_eq!(out.len(), 1, "empty stack passes the block");
        assert!(out[0].slices()[0].fbuf().ptr_eq(b.slices()[0].fbuf()));

        s.push(halve("a", b'A'));
        s.push(halve("b", b'B'));
        assert_eq!(s.names(), ["a", "b"]);
        let out = s.put(b).unwrap();
        assert_eq!(out.len(), 4);
        let lens: Vec<usize> = out.iter().map(Msg::len).collect();
        assert_eq!(lens, [2, 2, 2, 2]);
        assert_eq!(s.copied(), 0);

        // a's end byte goes through b (split: 1 byte stays whole), then b's.
        let end: Vec<u8> = s.finish().unwrap().iter().flat_map(Msg::to_vec).collect();
        assert_eq!(end, b"AB");
        assert_eq!(s.copied(), 2, "block_from copies are counted");

        let st = s.stats();
        assert_eq!(st[1].0, "b");
        assert!(st[1].1.contains(&("blocks_in", 3)));
        assert_eq!(
            s.control("a", "stats", None).unwrap(),
            "bytes_in=8 blocks_in=1 bytes_out=8 blocks_out=2"
        );
        assert_eq!(
            s.control(1, "stats", None).unwrap(),
            s.control("1", "stats", None).unwrap()
        );
        let e = s.control("zz", "stats", None).unwrap_err().to_string();
        assert!(e.contains("'zz'") && e.contains("a, b"), "{e}");
        assert!(s.control(7, "stats", None).is_err());
        assert!(s.control("a", "nope", None).is_err());

        assert_eq!(s.pop().unwrap().name(), "b");
        assert_eq!(s.len(), 1);
    }
}
