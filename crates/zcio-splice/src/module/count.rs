//! `count`: counts bytes and blocks; passes every block on unchanged.
//!
//! Control: `bytes`, `blocks` (read), `reset` (write any value).

use super::{Args, Context, Flow, Module, ModuleError};
use crate::msg::Msg;

/// The `count` module.
#[derive(Debug, Default)]
pub struct Count {
    flow: Flow,
}

impl Count {
    /// Open (no arguments).
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        args.finish(&[])?;
        Ok(Self::default())
    }

    /// Bytes seen.
    pub fn bytes(&self) -> u64 {
        self.flow.bytes_in
    }

    /// Blocks seen.
    pub fn blocks(&self) -> u64 {
        self.flow.blocks_in
    }
}

impl Module for Count {
    fn name(&self) -> &str {
        "count"
    }

    fn put(
        &mut self,
        block: Msg,
        _cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        self.flow.bytes_out += block.len() as u64;
        self.flow.blocks_out += 1;
        out.push(block);
        Ok(())
    }

    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        match (key, value) {
            ("bytes", None) => Ok(self.bytes().to_string()),
            ("blocks", None) => Ok(self.blocks().to_string()),
            ("reset", Some(_)) => {
                self.flow = Flow::default();
                Ok("ok".into())
            }
            ("stats", None) => Ok(super::format_stats(&self.stats())),
            _ => Err(ModuleError::control(
                "count",
                key,
                "expected bytes, blocks, stats (read) or reset (write)",
            )),
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bytes", self.flow.bytes_in),
            ("blocks", self.flow.blocks_in),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool};
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn counts_and_forwards_the_same_buffers() {
        let pool = pool();
        let mut m = Count::open(Args::default()).unwrap();
        let mut cx = Context::new(&pool);
        let mut out = Vec::new();
        let b = block(&pool, &[7u8; 1000], 3);
        m.put(b.clone(), &mut cx, &mut out).unwrap();
        m.put(Msg::new(), &mut cx, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        for (a, c) in out[0].slices().iter().zip(b.slices()) {
            assert!(a.fbuf().ptr_eq(c.fbuf()));
        }
        assert_eq!(m.control("bytes", None).unwrap(), "1000");
        assert_eq!(m.control("blocks", None).unwrap(), "2");
        m.control("reset", Some("")).unwrap();
        assert_eq!(m.bytes(), 0);
        assert!(m.control("bytes", Some("1")).is_err());
        assert_eq!(cx.copied(), 0);
    }
}
