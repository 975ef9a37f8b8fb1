//! The importer's decision for each sample it receives, apart from Zenoh
//! and from the sink: given what a sample is (a put or a delete), its
//! attachment and its payload's length, [`Tracker::step`] says what to do
//! with it — deliver it (after reporting a gap), drop it as a duplicate,
//! finish the import, or count it as ignored or malformed — and moves the
//! followed stream's position on.
//!
//! This is the one decoder of what a remote exporter (or anyone on the
//! network) sends an importer: the bridge's `Follower` calls it for every
//! sample and only carries out its answer, and the fuzz target
//! `bridge_samples` drives it with arbitrary sequences of samples.
//!
//! The rules:
//! - a sample without zcio's attachment (a plain Zenoh publisher's, or
//!   another application's attachment) is delivered as it is if it is a
//!   put, and ignored if it is a delete;
//! - a zcio attachment that does not decode ([`Meta::decode`]), a data
//!   record on a delete or a control record on a put, and a cache-range
//!   record (only ever the last reply to a cache query, never a live
//!   sample) are malformed: counted, no other effect;
//! - the first zcio stream seen is followed to its end; samples of any
//!   other stream are ignored;
//! - a sample before the position expected next was delivered before (a
//!   duplicate); one after it reports the positions in between lost (a
//!   gap), then is delivered, or ends the stream;
//! - after the end (clean, error close, producer died), everything is
//!   ignored.

use zcio::array::ArrayHeader;

use crate::wire::{BadMeta, Kind, Meta};

/// How the followed stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// End of stream: the producer closed.
    Clean,
    /// The producer closed with this error code.
    Failed(u32),
    /// The producer (this pid) died without closing.
    Died(u32),
}

/// Positions of the followed stream that never arrived, reported before
/// the sample that skipped them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Positions skipped (blocks, or bytes for byte-counted rings).
    pub positions: u64,
    /// Blocks a local ring reports lost (the positions, or 1 for a run of
    /// bytes).
    pub blocks: u64,
    /// Bytes a local ring reports lost (0 when positions count blocks).
    pub bytes: u64,
}

/// Why a sample is not delivered and not malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// A delete without zcio's attachment (a plain publisher's).
    PlainDelete,
    /// A sample of a zcio stream other than the followed one.
    OtherStream,
    /// The followed stream has ended.
    Finished,
}

/// Why a sample with zcio's attachment is dropped as malformed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The attachment does not decode.
    Meta(BadMeta),
    /// A data record on a delete, or a control record on a put.
    Kind,
    /// A cache-range record outside a cache query's answer.
    CacheRange,
}

/// What to do with one sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Deliver the payload as it is: no zcio attachment (no positions, no
    /// array header, tag 0).
    Plain,
    /// Report `gap` lost (if any), then deliver the payload of positions
    /// `pos..next` of `stream`, with `array` in front of it and `tag`.
    Deliver {
        /// The followed stream.
        stream: u64,
        /// The sample's position.
        pos: u64,
        /// The position after it (expected next).
        next: u64,
        /// Positions lost just before it.
        gap: Option<Gap>,
        /// The `send_array` header to put in front of the payload (its
        /// payload offset its own length, its payload length the sample's).
        array: Option<ArrayHeader>,
        /// The ring block tag.
        tag: u32,
    },
    /// A sample of the followed stream delivered before: dropped.
    Duplicate {
        /// The followed stream.
        stream: u64,
    },
    /// Report `gap` lost (if any), then end the import.
    Finish {
        /// The followed stream.
        stream: u64,
        /// Positions lost just before the end.
        gap: Option<Gap>,
        /// How it ended.
        end: End,
    },
    /// Not delivered (counted as ignored).
    Ignored(Ignored),
    /// Dropped (counted as malformed).
    Malformed(Malformed),
}

impl Step {
    /// The followed stream, if this sample is a sign of its life (it
    /// re-arms the importer's loss timer): a delivery, a duplicate or the
    /// end.
    pub fn activity(&self) -> Option<u64> {
        match self {
            Self::Deliver { stream, .. }
            | Self::Duplicate { stream }
            | Self::Finish { stream, .. } => Some(*stream),
            _ => None,
        }
    }

    /// The gap to report before carrying this step out.
    pub fn gap(&self) -> Option<Gap> {
        match self {
            Self::Deliver { gap, .. } | Self::Finish { gap, .. } => *gap,
            _ => None,
        }
    }
}

/// The followed stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stream {
    id: u64,
    /// Position expected next (`None` until the first data sample).
    next: Option<u64>,
}

/// One importer's view of the stream it follows (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    current: Option<Stream>,
    ended: bool,
}

impl Tracker {
    /// Before the first sample.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream followed, once a zcio sample has chosen it.
    pub fn stream(&self) -> Option<u64> {
        self.current.map(|s| s.id)
    }

    /// The position expected next, once a data sample has arrived.
    pub fn expected(&self) -> Option<u64> {
        self.current.and_then(|s| s.next)
    }

    /// Whether the stream has ended (every later sample is ignored).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Decide about one sample: a put (`is_put`) or a delete, with a
    /// private copy of its attachment (if any) and its payload's length.
    pub fn step(&mut self, is_put: bool, attachment: Option<&[u8]>, payload_len: usize) -> Step {
        if self.ended {
            return Step::Ignored(Ignored::Finished);
        }
        let meta = match attachment {
            Some(a) if Meta::is_ours(a) => match Meta::decode(a, payload_len) {
                Ok(m) => m,
                Err(e) => return Step::Malformed(Malformed::Meta(e)),
            },
            // A plain Zenoh publisher (or another application's
            // attachment): the payload is the message.
            _ if is_put => return Step::Plain,
            _ => return Step::Ignored(Ignored::PlainDelete),
        };
        if meta.kind == Kind::CacheRange {
            // Only ever the last reply to a cache query (`cache::fetch`
            // takes it out of the answer).
            return Step::Malformed(Malformed::CacheRange);
        }
        if is_put != (meta.kind == Kind::Data) {
            return Step::Malformed(Malformed::Kind);
        }
        let stream = match &mut self.current {
            Some(s) if s.id != meta.stream => return Step::Ignored(Ignored::OtherStream),
            Some(s) => s,
            None => self.current.insert(Stream {
                id: meta.stream,
                next: None,
            }),
        };
        let expected = stream.next.unwrap_or(meta.pos);
        if meta.pos < expected {
            // Delivered before (history, a restarted exporter).
            return Step::Duplicate { stream: stream.id };
        }
        let gap = (meta.pos > expected).then(|| {
            let positions = meta.pos - expected;
            Gap {
                positions,
                blocks: if meta.byte_positions { 1 } else { positions },
                bytes: if meta.byte_positions { positions } else { 0 },
            }
        });
        let end = match meta.kind {
            Kind::Data => {
                stream.next = Some(meta.next);
                return Step::Deliver {
                    stream: stream.id,
                    pos: meta.pos,
                    next: meta.next,
                    gap,
                    array: meta.array,
                    tag: meta.tag,
                };
            }
            Kind::End => End::Clean,
            Kind::Failed { code } => End::Failed(code),
            Kind::Died { pid } => End::Died(pid),
            Kind::CacheRange => unreachable!("rejected above"),
        };
        self.ended = true;
        Step::Finish {
            stream: stream.id,
            gap,
            end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(stream: u64, pos: u64, next: u64) -> Vec<u8> {
        Meta::data(stream, pos, next, false).encode()
    }

    fn control(kind: Kind, stream: u64, pos: u64) -> Vec<u8> {
        Meta {
            kind,
            ..Meta::data(stream, pos, pos, false)
        }
        .encode()
    }

    #[test]
    fn follows_one_stream_with_gaps_and_duplicates() {
        let mut t = Tracker::new();
        assert_eq!(t.step(true, None, 3), Step::Plain);
        assert_eq!(
            t.step(false, Some(&b"other"[..]), 0),
            Step::Ignored(Ignored::PlainDelete)
        );
        let s = t.step(true, Some(&data(7, 10, 11)), 1);
        assert!(
            matches!(
                s,
                Step::Deliver {
                    pos: 10,
                    gap: None,
                    ..
                }
            ),
            "{s:?}"
        );
        assert_eq!(t.stream(), Some(7));
        assert_eq!(
            t.step(true, Some(&data(8, 11, 12)), 1),
            Step::Ignored(Ignored::OtherStream)
        );
        assert_eq!(
            t.step(true, Some(&data(7, 10, 11)), 1),
            Step::Duplicate { stream: 7 }
        );
        let s = t.step(true, Some(&data(7, 14, 15)), 1);
        let gap = Gap {
            positions: 3,
            blocks: 3,
            bytes: 0,
        };
        assert_eq!(s.gap(), Some(gap), "{s:?}");
        assert_eq!(t.expected(), Some(15));
        let s = t.step(false, Some(&control(Kind::Failed { code: 5 }, 7, 15)), 0);
        assert_eq!(
            s,
            Step::Finish {
                stream: 7,
                gap: None,
                end: End::Failed(5)
            }
        );
        assert!(t.ended());
        assert_eq!(
            t.step(true, Some(&data(7, 15, 16)), 1),
            Step::Ignored(Ignored::Finished)
        );
    }

    #[test]
    fn byte_positions_lose_one_block_of_bytes() {
        let mut t = Tracker::new();
        let m = |pos, next| Meta::data(1, pos, next, true).encode();
        assert!(matches!(
            t.step(true, Some(&m(0, 100)), 80),
            Step::Deliver { .. }
        ));
        let s = t.step(true, Some(&m(300, 400)), 80);
        let gap = Gap {
            positions: 200,
            blocks: 1,
            bytes: 200,
        };
        assert_eq!(s.gap(), Some(gap));
    }

    #[test]
    fn wrong_kinds_and_cache_ranges_are_malformed_without_effect() {
        let mut t = Tracker::new();
        assert!(matches!(
            t.step(true, Some(&data(1, 0, 1)), 1),
            Step::Deliver { .. }
        ));
        // A data record on a delete, an end on a put.
        assert_eq!(
            t.step(false, Some(&data(1, 1, 2)), 0),
            Step::Malformed(Malformed::Kind)
        );
        assert_eq!(
            t.step(true, Some(&control(Kind::End, 1, 1)), 0),
            Step::Malformed(Malformed::Kind)
        );
        // A cache range on the live path, on a put or a delete: no gap
        // reported, the position unchanged.
        for put in [true, false] {
            let s = t.step(put, Some(&control(Kind::CacheRange, 1, 9)), 0);
            assert_eq!(s, Step::Malformed(Malformed::CacheRange));
        }
        assert_eq!(t.expected(), Some(1));
        assert!(matches!(
            t.step(true, Some(&b"zcio-short"[..]), 0),
            Step::Malformed(Malformed::Meta(_))
        ));
        let s = t.step(false, Some(&control(Kind::End, 1, 1)), 0);
        assert!(matches!(
            s,
            Step::Finish {
                end: End::Clean,
                gap: None,
                ..
            }
        ));
    }
}
