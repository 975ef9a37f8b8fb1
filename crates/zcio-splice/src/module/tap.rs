//! `tap:ring=NAME[,policy=srp|frp|mrp|block][,size=SIZE][,layout=variable|continuous]`:
//! copies the stream into a zcio [ring](crate::ring) for any number of
//! observers, and passes every block on unchanged.
//!
//! The ring is opened, or created with the given policy, size (default 4M)
//! and layout (default `variable`: one ring block per stream block, so
//! block boundaries survive; `continuous` makes it a byte stream). The tap
//! is the ring's producer. It never waits for room: a block that does not
//! fit (`WouldBlock` under `block`, a tail drop under `srp`/`mrp`) is
//! dropped from the *tap* only and counted; under `frp` old data is
//! overwritten and slow readers skip. The stream itself is never held up.
//!
//! The copy into the ring is the tap's purpose and is counted in its own
//! stats (`bytes_tapped`), not in [`Context::copied`], which counts copies
//! on the data path (there are none: the block goes on by reference).
//!
//! Control: `stats`, `error` (the last ring error, if any).

use crate::msg::Msg;
use crate::ring::{Layout, Options, Overflow, Producer, Wait, WriteError};

use super::{Args, Context, Flow, Module, ModuleError};

/// The `tap` module.
pub struct Tap {
    ring: String,
    prod: Producer,
    /// Largest piece written as one ring block.
    piece: usize,
    flow: Flow,
    tapped_bytes: u64,
    tapped_blocks: u64,
    dropped_bytes: u64,
    dropped_blocks: u64,
    errors: u64,
    last_error: Option<WriteError>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap").field("ring", &self.ring).finish()
    }
}

/// `tap`'s arguments, parsed: nothing is opened or created yet
/// ([`Tap::open`] does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapArgs {
    /// The ring to copy the stream into (not empty).
    pub ring: String,
    /// Its overflow policy if it is created (default `srp`).
    pub policy: Overflow,
    /// Its layout if it is created (`variable`, the default, or
    /// `continuous`).
    pub layout: Layout,
    /// Its data size if it is created (default 4 MiB; checked when it is).
    pub size: u64,
}

impl TapArgs {
    /// Parse `ring=NAME` (required), `policy=`, `size=`, `layout=`.
    pub fn parse(mut args: Args) -> Result<Self, ModuleError> {
        let ring = args.take("ring").filter(|r| !r.is_empty()).ok_or_else(|| {
            ModuleError::bad_args("tap", "needs ring=NAME (the ring to copy the stream into)")
        })?;
        let policy = args.take_with("policy", "srp, frp, mrp or block", |p| {
            Some(match p {
                "srp" => Overflow::Srp,
                "frp" => Overflow::Frp,
                "mrp" => Overflow::Mrp,
                "block" => Overflow::Block,
                _ => return None,
            })
        })?;
        let layout = args.take_with("layout", "variable or continuous", |l| {
            Some(match l {
                "variable" => Layout::Variable,
                "continuous" => Layout::Continuous,
                _ => return None,
            })
        })?;
        let size = args.take_size("size")?;
        args.finish(&["ring", "policy", "size", "layout"])?;
        Ok(Self {
            ring,
            policy: policy.unwrap_or(Overflow::Srp),
            layout: layout.unwrap_or(Layout::Variable),
            size: size.unwrap_or(4 << 20),
        })
    }
}

impl Tap {
    /// Open: `ring=NAME` (required), `policy=`, `size=`, `layout=`
    /// ([`TapArgs::parse`]); opens the ring, or creates it.
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        let TapArgs {
            ring,
            policy,
            layout,
            size,
        } = TapArgs::parse(args)?;
        let opts = Options::new().layout(layout).overflow(policy).size(size);
        let map = opts
            .create_or_open(&ring)
            .map_err(|e| ModuleError::bad_args("tap", format!("ring {ring:?}: {e}")))?;
        let prod = Producer::attach(map)
            .map_err(|e| ModuleError::bad_args("tap", format!("ring {ring:?}: {e}")))?;
        let geo = prod.geometry();
        let piece = match geo.layout {
            Layout::Continuous => (geo.cap() / 2).max(1),
            _ => geo.max_block(),
        };
        let piece = usize::try_from(piece).unwrap_or(usize::MAX).max(1);
        Ok(Self {
            ring,
            prod,
            piece,
            flow: Flow::default(),
            tapped_bytes: 0,
            tapped_blocks: 0,
            dropped_bytes: 0,
            dropped_blocks: 0,
            errors: 0,
            last_error: None,
        })
    }

    /// The ring's name.
    pub fn ring(&self) -> &str {
        &self.ring
    }

    fn record(&mut self, r: Result<(), WriteError>, n: usize) {
        match r {
            Ok(()) => {
                self.tapped_bytes += n as u64;
                self.tapped_blocks += 1;
            }
            Err(WriteError::WouldBlock | WriteError::Dropped | WriteError::TimedOut) => {
                self.dropped_bytes += n as u64;
                self.dropped_blocks += 1;
            }
            Err(e) => {
                self.dropped_bytes += n as u64;
                self.dropped_blocks += 1;
                self.errors += 1;
                self.last_error = Some(e);
            }
        }
    }
}

impl Module for Tap {
    fn name(&self) -> &str {
        "tap"
    }

    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        if block.is_empty() {
            out.push(block);
            return Ok(());
        }
        if block.len() <= self.piece {
            // The usual case: one ring block gathered from the message's
            // slices, read once each (a peer's volatile bytes included).
            let views: smallvec::SmallVec<[crate::View<'_>; 4]> = block.chunks().collect();
            let r = self.prod.write_gather(&views, 0, Wait::No);
            self.record(r, block.len());
        } else {
            // Larger than a ring block: pieces, read once through a
            // private copy.
            let piece = self.piece;
            let mut pieces: Vec<Vec<u8>> = Vec::new();
            cx.for_each_slice(&block, |s| {
                pieces.extend(s.chunks(piece).map(<[u8]>::to_vec));
                Ok::<(), ModuleError>(())
            })?;
            for p in pieces {
                let r = self.prod.write_tagged(&p, 0, Wait::No);
                self.record(r, p.len());
            }
        }
        self.flow.bytes_out += block.len() as u64;
        self.flow.blocks_out += 1;
        out.push(block);
        Ok(())
    }

    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        match (key, value) {
            ("stats", None) => Ok(super::format_stats(&self.stats())),
            ("error", None) => Ok(self
                .last_error
                .as_ref()
                .map_or_else(|| "none".to_owned(), ToString::to_string)),
            ("ring", None) => Ok(self.ring.clone()),
            _ => Err(ModuleError::control(
                "tap",
                key,
                "expected stats, error or ring (read)",
            )),
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bytes", self.flow.bytes_in),
            ("blocks", self.flow.blocks_in),
            ("bytes_tapped", self.tapped_bytes),
            ("blocks_tapped", self.tapped_blocks),
            ("bytes_dropped", self.dropped_bytes),
            ("blocks_dropped", self.dropped_blocks),
            ("errors", self.errors),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool};
    use super::*;
    use crate::ring::{Consumer, Start};
    use std::time::Duration;

    #[test]
    fn arguments_parse_without_opening_the_ring() {
        let a = TapArgs::parse(Args::parse("tap", "ring=t,policy=frp,layout=continuous").unwrap());
        assert_eq!(
            a.unwrap(),
            TapArgs {
                ring: "t".into(),
                policy: Overflow::Frp,
                layout: Layout::Continuous,
                size: 4 << 20
            }
        );
        for bad in [
            "",
            "ring=",
            "ring=t,policy=x",
            "ring=t,size=1Q",
            "ring=t,extra=1",
        ] {
            assert!(
                TapArgs::parse(Args::parse("tap", bad).unwrap()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
    )]
    fn copies_into_the_ring_and_drops_when_full() {
        // Rings live in /dev/shm (or $ZCIO_RING_DIR), like the ring unit tests.
        let name = format!("unit-tap-{}", std::process::id());
        let pool = pool();
        let mut t =
            Tap::open(Args::parse("tap", &format!("ring={name},size=64K,policy=srp")).unwrap())
                .unwrap();
        let map = crate::ring::RingMap::open(&name, true).unwrap();
        let mut c = Consumer::attach(map, Start::Newest).unwrap();
        let mut cx = Context::new(&pool);
        let mut out = Vec::new();
        let b = block(&pool, b"hello tap", 2);
        t.put(b.clone(), &mut cx, &mut out).unwrap();
        assert!(out[0].slices()[0].fbuf().ptr_eq(b.slices()[0].fbuf()));
        assert_eq!(cx.copied(), 0);
        let got = c
            .peek_timeout(1 << 16, Duration::from_secs(5))
            .unwrap()
            .expect("a block");
        assert_eq!(got.view().to_vec(), b"hello tap");
        got.release().unwrap();

        // Nobody reads: the 64 KiB ring fills and the tap drops, the
        // stream goes on.
        let big = block(&pool, &[9u8; 8 << 10], 1);
        for _ in 0..32 {
            t.put(big.clone(), &mut cx, &mut out).unwrap();
        }
        assert_eq!(out.len(), 33);
        let st = t.stats();
        let get = |k| st.iter().find(|(n, _)| *n == k).unwrap().1;
        assert!(get("blocks_dropped") > 0, "{st:?}");
        assert_eq!(get("blocks_tapped") + get("blocks_dropped"), 33);
        assert_eq!(get("errors"), 0);
        drop(t);
        crate::ring::unlink(&name).unwrap();
    }

    #[test]
    fn arguments() {
        let e = Tap::open(Args::parse("tap", "").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("ring=NAME"), "{e}");
        assert!(Tap::open(Args::parse("tap", "ring=x,policy=lossy").unwrap()).is_err());
        let e = Tap::open(Args::parse("tap", "ring=../etc").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid ring name"), "{e}");
    }
}
