//! `crc32c`: the running CRC-32C (Castagnoli) of the stream, computed in
//! place with the `crc32c` crate (SSE 4.2 / ARMv8 CRC instructions when
//! present); passes every block on unchanged.
//!
//! Control: `value` (read: `0x%08x` of the CRC so far), `reset` (write).

use super::{Args, Context, Flow, Module, ModuleError};
use crate::msg::Msg;

/// The `crc32c` module.
#[derive(Debug, Default)]
pub struct Crc32c {
    crc: u32,
    flow: Flow,
}

impl Crc32c {
    /// Open (no arguments).
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        args.finish(&[])?;
        Ok(Self::default())
    }

    /// The CRC-32C of everything seen so far.
    pub fn value(&self) -> u32 {
        self.crc
    }
}

impl Module for Crc32c {
    fn name(&self) -> &str {
        "crc32c"
    }

    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        let mut crc = self.crc;
        cx.for_each_slice(&block, |s| {
            crc = ::crc32c::crc32c_append(crc, s);
            Ok::<(), ModuleError>(())
        })?;
        self.crc = crc;
        self.flow.bytes_out += block.len() as u64;
        self.flow.blocks_out += 1;
        out.push(block);
        Ok(())
    }

    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        match (key, value) {
            ("value", None) => Ok(format!("{:#010x}", self.crc)),
            ("reset", Some(_)) => {
                self.crc = 0;
                Ok("ok".into())
            }
            ("stats", None) => Ok(super::format_stats(&self.stats())),
            _ => Err(ModuleError::control(
                "crc32c",
                key,
                "expected value, stats (read) or reset (write)",
            )),
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bytes", self.flow.bytes_in),
            ("blocks", self.flow.blocks_in),
            ("crc", u64::from(self.crc)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool};
    use super::*;
    use proptest::prelude::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn known_value() {
        // The CRC-32C check value (RFC 3720 / the Castagnoli catalogue).
        let pool = pool();
        let mut m = Crc32c::open(Args::default()).unwrap();
        let mut cx = Context::new(&pool);
        let mut out = Vec::new();
        m.put(block(&pool, b"12345", 2), &mut cx, &mut out).unwrap();
        m.put(block(&pool, b"6789", 3), &mut cx, &mut out).unwrap();
        assert_eq!(m.control("value", None).unwrap(), "0xe3069283");
        assert_eq!(cx.copied(), 0);
        m.control("reset", Some("1")).unwrap();
        assert_eq!(m.value(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        #[cfg_attr(miri, ignore = "pool: its buffers are memfd regions, not modelled by Miri")]
        fn any_split_gives_the_whole_crc(data in proptest::collection::vec(any::<u8>(), 0..3000),
                                         cuts in proptest::collection::vec(0usize..3000, 0..5),
                                         pieces in 1usize..4) {
            let pool = pool();
            let mut m = Crc32c::open(Args::default()).unwrap();
            let mut cx = Context::new(&pool);
            let mut out = Vec::new();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (data.len() + 1)).collect();
            cuts.push(0);
            cuts.push(data.len());
            cuts.sort_unstable();
            for w in cuts.windows(2) {
                m.put(block(&pool, &data[w[0]..w[1]], pieces), &mut cx, &mut out).unwrap();
            }
            prop_assert_eq!(m.value(), ::crc32c::crc32c(&data));
        }
    }
}
