//! The rig the ring targets share (`ring_attach`, `ring_read`): a private
//! ring directory, rings made by the production code (`RingMap::create`)
//! and reused across executions, and a script of operations — producer
//! writes, consumer reads, and scribbles over the words and headers a
//! hostile producer (or consumer) owns — run against them with every
//! result checked.
//!
//! Speed and determinism: each thread keeps one small ring per (layout,
//! policy) it has used, mapped once; an execution starts by rewriting
//! everything after the ring's `Meta` with zeros (a fresh ring, as
//! `RingMap::create` leaves it) and ends by dropping every producer and
//! consumer it attached, so the outcome depends on the input only. Nothing
//! waits: writes and reads are the non-blocking forms (one timed read of
//! 1 ms per execution at most reaches the liveness checks).
//!
//! Files: `/dev/shm/zcio-fuzz-rings.<pid>/` (set as `ZCIO_RING_DIR`); a
//! thread's rings are removed when it exits, and directories of processes
//! that died (a crash, a killed fuzzer) are removed by the next process
//! that starts the rig.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use zcio::internals::ring_layout::{
    owner_word, BLOCK_HDR, CONTROL_OFF, DESC_OFF, OWNER_ACTIVE, OWNER_CLOSED, OWNER_FAILED,
    PRODUCER_OFF, SHARED_OFF, SLOTS_OFF, SLOT_ACTIVE, SLOT_EVICTING, SLOT_JOINING, SOURCES_OFF,
};
use zcio::ring::{
    Consumer, Geometry, Layout, OpenError, Overflow, Peek, Producer, ReadError, RingMap, SeekTo,
    Start, Wait, WriteError,
};

// ---------------------------------------------------------------------
// The directory and the reused rings.

/// The private ring directory of this process.
pub fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let parent = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        sweep(&parent);
        let d = parent.join(format!("zcio-fuzz-rings.{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create the fuzz ring directory");
        d
    })
}

/// Remove the ring directories of processes that no longer run.
fn sweep(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("zcio-fuzz-rings."))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Point `ZCIO_RING_DIR` at [`dir`] (again, if something changed it).
pub fn enter() {
    let d = dir();
    if std::env::var_os("ZCIO_RING_DIR").as_deref() != Some(d.as_os_str()) {
        std::env::set_var("ZCIO_RING_DIR", d);
    }
}

/// A ring file of this rig: its mapping (made by the production code) and
/// a descriptor of its own, through which scribbles and checks read and
/// write the file as another process would.
pub struct Ring {
    /// The ring's name.
    pub name: String,
    /// The production mapping.
    pub map: Arc<RingMap>,
    /// Its validated geometry.
    pub geo: Geometry,
    file: File,
    path: PathBuf,
    /// Whether the file is removed when this value goes.
    owned: bool,
}

impl Ring {
    /// A ring made by `RingMap::create` with a fixed identity.
    fn create(name: &str, layout: Layout, overflow: Overflow) -> Ring {
        enter();
        let id = 0x7a63_696f_0000_0000 | (layout as u64) << 8 | overflow as u64;
        let g = geometry(layout, overflow, id);
        let path = zcio::ring::ring_path(name).expect("valid name");
        let _ = std::fs::remove_file(&path);
        let map = RingMap::create(name, &g, 0o600).expect("create a fuzz ring");
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open the ring file");
        Ring {
            name: name.to_owned(),
            map,
            geo: g,
            file,
            path,
            owned: true,
        }
    }

    /// A ring opened by the caller (`ring_attach`), with `file` its file.
    pub fn opened(name: &str, map: Arc<RingMap>, file: File) -> Ring {
        Ring {
            name: name.to_owned(),
            geo: *map.geometry(),
            path: zcio::ring::ring_path(name).expect("valid name"),
            map,
            file,
            owned: false,
        }
    }

    /// The file's length as created.
    pub fn file_len(&self) -> u64 {
        self.geo.file_len()
    }

    /// The file as `RingMap::create` left it: its `Meta` (which a scribble
    /// may have hit), zeros after it, its length.
    fn reset(&self) {
        static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
        let meta = self.geo.to_meta();
        let mut m = [0u8; 128];
        m[..8].copy_from_slice(&meta.magic);
        for (at, v) in [
            (8, meta.version),
            (12, meta.layout),
            (16, meta.overflow),
            (20, meta.slot_size),
            (56, meta.max_consumers),
        ] {
            m[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        for (at, v) in [
            (24, meta.head_len),
            (32, meta.data_len),
            (40, meta.desc_len),
            (48, meta.ring_id),
        ] {
            m[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        self.put(0, &m);
        let _ = self.file.set_len(self.file_len());
        let mut off = 128u64;
        while off < self.file_len() {
            let n = (self.file_len() - off).min(ZEROS.len() as u64);
            self.put(off, &ZEROS[..n as usize]);
            off += n;
        }
    }

    /// Write `bytes` at file offset `off` (as another process would).
    pub fn put(&self, off: u64, bytes: &[u8]) {
        let _ = self.file.write_all_at(bytes, off);
    }

    /// Read `N` bytes at file offset `off` (zeros past the end).
    pub fn get<const N: usize>(&self, off: u64) -> [u8; N] {
        let mut b = [0u8; N];
        let _ = self.file.read_exact_at(&mut b, off);
        b
    }

    fn word(&self, off: u64) -> u64 {
        u64::from_le_bytes(self.get(off))
    }

    /// The published head (cursor units), as a reader sees it.
    fn head(&self) -> u64 {
        self.map
            .producer()
            .head
            .load(std::sync::atomic::Ordering::Acquire)
            >> 1
    }

    fn truncate(&self, len: u64) {
        let _ = self.file.set_len(len);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The geometry of the rig's ring of `layout`: small, so that a few writes
/// wrap it and lap its readers.
fn geometry(layout: Layout, overflow: Overflow, id: u64) -> Geometry {
    let ps = zcio::internals::sys::page_size() as u64;
    Geometry::new(layout, overflow, ps, 256, 16, id).expect("valid rig geometry")
}

/// The rings of one thread.
struct Rigs {
    tag: String,
    rings: HashMap<(u32, u32), Rc<Ring>>,
    /// Other ring files of this thread (`scratch`).
    files: Vec<PathBuf>,
}

impl Drop for Rigs {
    fn drop(&mut self) {
        self.rings.clear();
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        // The directory stays (empty) until the process ends: removing it
        // when it looks empty races with another thread that is about to
        // create a file there (the replay tests run on several threads).
        // The next process that starts the rig removes it (see `dir`).
    }
}

thread_local! {
    static RIGS: RefCell<Option<Rigs>> = const { RefCell::new(None) };
}

/// This thread's prefix for ring names (fixed width: names differ between
/// threads only in digits, never in length).
pub fn thread_tag() -> String {
    RIGS.with(|r| rigs(&mut r.borrow_mut()).tag.clone())
}

fn rigs(r: &mut Option<Rigs>) -> &mut Rigs {
    r.get_or_insert_with(|| {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        Rigs {
            tag: format!("t{:04}", NEXT.fetch_add(1, Ordering::Relaxed) % 10_000),
            rings: HashMap::new(),
            files: Vec::new(),
        }
    })
}

/// The name of this thread's ring file `what` (made by the caller,
/// removed with the thread's rings).
pub fn scratch(what: &str) -> String {
    enter();
    RIGS.with(|r| {
        let mut r = r.borrow_mut();
        let rigs = rigs(&mut r);
        let name = format!("{}-{what}", rigs.tag);
        let path = zcio::ring::ring_path(&name).expect("valid name");
        if !rigs.files.contains(&path) {
            rigs.files.push(path);
        }
        name
    })
}

/// This thread's ring of `layout` and `overflow`, reset to a fresh ring.
pub fn ring(layout: Layout, overflow: Overflow) -> Rc<Ring> {
    enter();
    RIGS.with(|r| {
        let mut r = r.borrow_mut();
        let rigs = rigs(&mut r);
        let key = (layout as u32, overflow as u32);
        let name = ring_name(&rigs.tag, layout, overflow);
        let ring = rigs
            .rings
            .entry(key)
            .or_insert_with(|| Rc::new(Ring::create(&name, layout, overflow)))
            .clone();
        ring.reset();
        ring
    })
}

fn ring_name(tag: &str, layout: Layout, overflow: Overflow) -> String {
    format!("{tag}-{}-{}", layout.name(), overflow.name())
}

/// Forget a ring whose mapping a truncation spoiled (the next use makes a
/// new one).
fn discard_if_truncated(ring: &Ring) {
    if !ring.map.truncated() || !ring.owned {
        return;
    }
    RIGS.with(|r| {
        if let Some(rigs) = r.borrow_mut().as_mut() {
            rigs.rings.retain(|_, v| v.name != ring.name);
        }
    });
}

/// Layouts and policies by number (inputs pick them with a byte).
pub const LAYOUTS: [Layout; 5] = [
    Layout::Continuous,
    Layout::Slotted,
    Layout::Variable,
    Layout::Descriptors,
    Layout::Index,
];
/// See [`LAYOUTS`].
pub const POLICIES: [Overflow; 4] = [Overflow::Block, Overflow::Srp, Overflow::Frp, Overflow::Mrp];

// ---------------------------------------------------------------------
// The script.

/// Reads a script: every read succeeds (zeros past the end).
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, r)) => {
                self.rest = r;
                b
            }
            None => 0,
        }
    }

    /// The next `N` bytes.
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        for x in &mut b {
            *x = self.u8();
        }
        b
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
}

/// One step of a session. The encoding ([`Op::encode`]) is what
/// [`Session::step`] decodes: a kind byte, then fixed fields.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Write a block of `len` bytes (`how`: write_tagged, try_write,
    /// reserve+put+commit, reserve dropped uncommitted, write_gather, a
    /// write that waits 1 ms for room (once per execution)). In
    /// an index session: write it to the source ring, peek it there and
    /// splice it into the index ring.
    Write { len: u16, tag: u8, how: u8 },
    /// Index sessions: write to the source ring without splicing.
    SourceWrite { len: u16 },
    /// Consumer `c` reads (`how`: try_read, try_peek+release, peek held
    /// across `size >> 12` writes, peek_detached+resume, a 1 ms timed
    /// read, peek+truncate, peek dropped, a stale resume) with a buffer or
    /// limit of `size` bytes.
    Read { c: u8, how: u8, size: u16 },
    /// Write `value` over a word of the file (`target` 1: the source ring).
    Scribble {
        target: u8,
        region: u8,
        index: u16,
        field: u8,
        value: Value,
    },
    /// Attach a consumer (`oldest`: at the oldest data).
    Attach { oldest: bool },
    /// Drop consumer `c`.
    Detach { c: u8 },
    /// Consumer `c` seeks (`kind`: newest, oldest, forward, backward).
    Seek { c: u8, kind: u8, n: u16 },
    /// Close the producer (`error` odd: with error `code`).
    Close { error: u8, code: u8 },
    /// Attach the producer (a second one while one is attached).
    ProducerAttach,
    /// `zcio ring stat` of the ring.
    Stat,
    /// The producer counts (and evicts) live consumers.
    Live,
    /// Truncate the ring file to `pages` pages.
    Truncate { pages: u16 },
}

/// A scribbled value: `sel` below 0x80 picks an interesting value (+
/// `delta` when `sel` is odd), otherwise `raw`.
#[derive(Clone, Copy, Debug)]
pub struct Value {
    /// Selector.
    pub sel: u8,
    /// The raw value (or the index and delta of an interesting one).
    pub raw: u64,
}

impl Value {
    /// Interesting value number `i`.
    pub fn pick(i: u8) -> Self {
        Value {
            sel: 0,
            raw: u64::from(i),
        }
    }

    /// Interesting value number `i`, plus `d`.
    pub fn near(i: u8, d: i8) -> Self {
        Value {
            sel: 1,
            raw: u64::from(i) | (d as u8 as u64) << 32,
        }
    }

    /// Exactly `v`.
    pub fn raw(v: u64) -> Self {
        Value { sel: 0x80, raw: v }
    }
}

/// Number of operation kinds.
const KINDS: u8 = 12;

impl Op {
    fn decode(r: &mut Reader<'_>) -> Op {
        match r.u8() % KINDS {
            0 => Op::Write {
                len: r.u16(),
                tag: r.u8(),
                how: r.u8(),
            },
            1 => Op::SourceWrite { len: r.u16() },
            2 => Op::Read {
                c: r.u8(),
                how: r.u8(),
                size: r.u16(),
            },
            3 => Op::Scribble {
                target: r.u8(),
                region: r.u8(),
                index: r.u16(),
                field: r.u8(),
                value: Value {
                    sel: r.u8(),
                    raw: r.u64(),
                },
            },
            4 => Op::Attach {
                oldest: r.u8() & 1 == 1,
            },
            5 => Op::Detach { c: r.u8() },
            6 => Op::Seek {
                c: r.u8(),
                kind: r.u8(),
                n: r.u16(),
            },
            7 => Op::Close {
                error: r.u8(),
                code: r.u8(),
            },
            8 => Op::ProducerAttach,
            9 => Op::Stat,
            10 => Op::Live,
            _ => Op::Truncate { pages: r.u16() },
        }
    }

    /// The bytes [`Session::step`] decodes as this operation.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Op::Write { len, tag, how } => {
                out.push(0);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&[tag, how]);
            }
            Op::SourceWrite { len } => {
                out.push(1);
                out.extend_from_slice(&len.to_le_bytes());
            }
            Op::Read { c, how, size } => {
                out.extend_from_slice(&[2, c, how]);
                out.extend_from_slice(&size.to_le_bytes());
            }
            Op::Scribble {
                target,
                region,
                index,
                field,
                value,
            } => {
                out.extend_from_slice(&[3, target, region]);
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(&[field, value.sel]);
                out.extend_from_slice(&value.raw.to_le_bytes());
            }
            Op::Attach { oldest } => out.extend_from_slice(&[4, u8::from(oldest)]),
            Op::Detach { c } => out.extend_from_slice(&[5, c]),
            Op::Seek { c, kind, n } => {
                out.extend_from_slice(&[6, c, kind]);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Op::Close { error, code } => out.extend_from_slice(&[7, error, code]),
            Op::ProducerAttach => out.push(8),
            Op::Stat => out.push(9),
            Op::Live => out.push(10),
            Op::Truncate { pages } => {
                out.push(11);
                out.extend_from_slice(&pages.to_le_bytes());
            }
        }
    }
}

/// Encode a whole script.
pub fn encode(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        op.encode(&mut out);
    }
    out
}

/// Most operations one execution runs.
pub const MAX_OPS: usize = 160;
/// Most consumers attached at once.
const MAX_CONSUMERS: usize = 4;
/// Timed reads per execution.
/// (Longer than a reader spins before it sleeps, so that it sleeps and
/// then asks whether the producer is alive.)
const TIMED_READS: u32 = 1;
/// See [`TIMED_READS`].
const TIMED_READ: Duration = Duration::from_millis(1);
/// Writes per execution that wait for room (they sleep on the slowest
/// reader's cursor word, then ask whether it lives and evict it if not).
const TIMED_WRITES: u32 = 1;
/// See [`TIMED_WRITES`].
const TIMED_WRITE: Duration = Duration::from_millis(1);

// ---------------------------------------------------------------------
// The model: what the producer wrote where (while nothing was scribbled).

#[derive(Default)]
struct Model {
    /// Continuous rings: the stream from position 0.
    stream: Vec<u8>,
    /// Block rings: position -> (bytes, tag), `None` when a splice pointed
    /// at bytes already gone.
    blocks: HashMap<u64, Option<(Vec<u8>, u32)>>,
    /// The source ring of an index session, likewise.
    src_blocks: HashMap<u64, (Vec<u8>, u32)>,
    src_stream: Vec<u8>,
}

/// The writing side of a session and the model it keeps.
struct Writer {
    prod: Option<Producer>,
    src_prod: Option<Producer>,
    src_cons: Option<Consumer>,
    model: Model,
    /// Nothing has written the files but the production code.
    clean: bool,
    /// The main ring's file was truncated: what the mapping shows past
    /// its end (the rest of its last page) is not what `pread` reads.
    cut: bool,
    seq: u32,
    timed_writes: u32,
}

/// The rings of a session.
struct Env {
    main: Rc<Ring>,
    src: Option<Rc<Ring>>,
    /// No reader can lose a block (the ring does not overwrite, and it
    /// is not an index ring).
    lossless: bool,
}

/// One execution: rings, producer, consumers, model.
pub struct Session {
    cons: Vec<Consumer>,
    /// Per consumer: it started at the oldest data or sought back, so it
    /// may meet blocks whose bytes are gone even in a ring that never
    /// overwrites: the producer waits for the slowest position it has
    /// seen (it does not look again while that says there is room), and a
    /// descriptors ring reuses its data area as soon as every reader
    /// released it, whatever the entries say.
    rewound: Vec<bool>,
    w: Writer,
    env: Env,
    timed: u32,
}

/// Whether to print each operation (`ZCIO_FUZZ_TRACE` set), for reading
/// what a finding does.
fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("ZCIO_FUZZ_TRACE").is_some())
}

/// The bytes of the `seq`-th write: its number, then a pattern that
/// depends on it (a slice of one made once: byte loops cost much under the
/// fuzzer's instrumentation).
fn payload(seq: u32, len: usize) -> Vec<u8> {
    const SHIFTS: usize = 251;
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    let p = PATTERN.get_or_init(|| {
        (0..(1usize << 16) + SHIFTS)
            .map(|i| (i.wrapping_mul(31) ^ (i >> 8)) as u8)
            .collect()
    });
    let at = seq as usize % SHIFTS;
    let mut v = p[at..at + len.min(1 << 16)].to_vec();
    v.resize(len, 0x5a);
    for (d, s) in v.iter_mut().zip(seq.to_le_bytes()) {
        *d = s;
    }
    v
}

/// Cursor units a block of `len` bytes takes in a ring of `g`.
fn units(g: &Geometry, len: u64) -> u64 {
    match g.layout {
        Layout::Continuous => len,
        Layout::Slotted => g.slot_size,
        Layout::Variable => BLOCK_HDR + len.next_multiple_of(BLOCK_HDR),
        Layout::Descriptors | Layout::Index => 1,
    }
}

/// A rich pointer as it lies in a descriptor ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    ring_id: u64,
    pos: u64,
    offset: u32,
    len: u32,
    tag: u32,
}

impl Entry {
    fn parse(b: [u8; 32]) -> Entry {
        let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Entry {
            ring_id: w(0),
            pos: w(8),
            offset: w(16) as u32,
            len: (w(16) >> 32) as u32,
            tag: w(24) as u32,
        }
    }
}

/// What a block handed out by a consumer looked like.
struct Out {
    /// Address and length of its bytes.
    addr: usize,
    len: usize,
    tag: u32,
    /// The data area that holds them: base address and length.
    area: (usize, u64),
    /// The rich pointer the consumer reports for it.
    origin: zcio::ring::RichPtr,
    /// The identity of the ring holding the bytes.
    holder_id: u64,
}

impl Out {
    fn of(p: &Peek<'_>) -> Out {
        let v = p.view();
        let (origin, m) = p.origin();
        Out {
            addr: v.as_ptr() as usize,
            len: v.len(),
            tag: p.tag(),
            area: area(m),
            origin,
            holder_id: m.geometry().ring_id,
        }
    }
}

fn area(m: &RingMap) -> (usize, u64) {
    let dl = m.geometry().data_len;
    assert!(dl > 0, "bytes handed out from a ring without a data area");
    (m.data(0) as usize, dl)
}

impl Session {
    /// A session on the rig's ring of `layout`/`overflow` (an index ring
    /// gets a source ring of `src_layout`/`src_overflow`, with its producer
    /// and the consumer that splices attached).
    pub fn new(layout: Layout, overflow: Overflow, src: (Layout, Overflow)) -> Session {
        let main = ring(layout, overflow);
        let src = (layout == Layout::Index).then(|| ring(src.0, src.1));
        let (src_prod, src_cons) = match &src {
            Some(s) => (
                Some(Producer::attach(s.map.clone()).expect("source producer")),
                Some(Consumer::attach(s.map.clone(), Start::Newest).expect("splicer")),
            ),
            None => (None, None),
        };
        // An index ring's readers may always find a block's bytes gone:
        // the source recycles what its own consumers released.
        let lossless = !overflow.overwrites() && src.is_none();
        Session {
            cons: Vec::new(),
            rewound: Vec::new(),
            w: Writer {
                prod: None,
                src_prod,
                src_cons,
                model: Model::default(),
                clean: true,
                cut: false,
                seq: 0,
                timed_writes: TIMED_WRITES,
            },
            env: Env {
                main,
                src,
                lossless,
            },
            timed: TIMED_READS,
        }
    }

    /// A session on a ring the caller opened (whatever its file says: no
    /// model, only the invariants that hold for any file).
    pub fn on(ring: Ring) -> Session {
        Session {
            cons: Vec::new(),
            rewound: Vec::new(),
            w: Writer {
                prod: None,
                src_prod: None,
                src_cons: None,
                model: Model::default(),
                clean: false,
                cut: false,
                seq: 0,
                timed_writes: TIMED_WRITES,
            },
            env: Env {
                main: Rc::new(ring),
                src: None,
                lossless: false,
            },
            timed: TIMED_READS,
        }
    }

    /// Run the script in `r` (at most [`MAX_OPS`] operations).
    pub fn run(mut self, r: &mut Reader<'_>) {
        if trace() {
            let g = &self.env.main.geo;
            let src = self
                .env
                .src
                .as_ref()
                .map(|s| (s.geo.layout, s.geo.overflow));
            eprintln!("session: {:?} {:?}, source {src:?}", g.layout, g.overflow);
        }
        for _ in 0..MAX_OPS {
            if r.is_empty() {
                break;
            }
            let op = Op::decode(r);
            self.step(op);
        }
        self.finish();
    }

    fn finish(self) {
        let Session { cons, w, env, .. } = self;
        drop(cons);
        drop(w);
        discard_if_truncated(&env.main);
        if let Some(s) = &env.src {
            discard_if_truncated(s);
        }
    }

    /// Run one operation and check what it returned.
    pub fn step(&mut self, op: Op) {
        if trace() {
            let heads = (
                self.env.main.head(),
                self.env.src.as_ref().map(|s| s.head()),
            );
            let at: Vec<u64> = self.cons.iter().map(Consumer::position).collect();
            eprintln!("{op:?}  (heads {heads:?}, readers at {at:?})");
        }
        match op {
            Op::Write { len, tag, how } => self.w.write(&self.env, len, tag, how),
            Op::SourceWrite { len } => {
                self.w.source_write(&self.env, len, u32::MAX);
            }
            Op::Read { c, how, size } => self.read(c, how, size),
            Op::Scribble {
                target,
                region,
                index,
                field,
                value,
            } => self.scribble(target, region, index, field, value),
            Op::Attach { oldest } => self.attach(oldest),
            Op::Detach { c } => {
                if !self.cons.is_empty() {
                    let i = usize::from(c) % self.cons.len();
                    self.cons.remove(i);
                    self.rewound.remove(i);
                }
            }
            Op::Seek { c, kind, n } => self.seek(c, kind, n),
            Op::Close { error, code } => {
                if let Some(p) = self.w.prod.take() {
                    if error & 1 == 1 {
                        p.close_with_error(u32::from(code));
                    } else {
                        p.close();
                    }
                }
            }
            Op::ProducerAttach => self.producer_attach(),
            Op::Stat => self.stat(),
            Op::Live => {
                let n = self.cons.len();
                let clean = self.w.clean;
                if let Some(p) = self.w.prod.as_mut() {
                    let live = p.live_consumers();
                    if trace() {
                        eprintln!("  -> {live} live");
                    }
                    if clean {
                        assert_eq!(live, n, "live consumers");
                    }
                }
            }
            Op::Truncate { pages } => {
                self.w.clean = false;
                self.w.cut = true;
                let ps = zcio::internals::sys::page_size() as u64;
                let len = (u64::from(pages) * ps) % self.env.main.file_len();
                self.env.main.truncate(len);
            }
        }
    }

    fn attach(&mut self, oldest: bool) {
        if self.cons.len() >= MAX_CONSUMERS {
            return;
        }
        let start = if oldest { Start::Oldest } else { Start::Newest };
        match Consumer::attach(self.env.main.map.clone(), start) {
            Ok(c) => {
                self.cons.push(c);
                self.rewound.push(oldest);
            }
            Err(e) => assert!(!self.w.clean, "attach to a clean ring failed: {e}"),
        }
    }

    fn producer_attach(&mut self) {
        let r = Producer::attach(self.env.main.map.clone());
        if self.w.prod.is_some() {
            assert!(r.is_err(), "a second producer attached");
            assert!(
                !self.w.clean || matches!(r, Err(OpenError::ProducerBusy(_))),
                "a second producer: {r:?}"
            );
            return;
        }
        match r {
            Ok(p) => self.w.prod = Some(p),
            Err(e) => {
                assert!(!self.w.clean, "producer attach to a clean ring: {e}");
            }
        }
    }

    fn stat(&mut self) {
        let st = zcio::ring::stat(&self.env.main.name);
        let Ok(st) = st else {
            assert!(!self.w.clean, "stat of a clean ring: {st:?}");
            return;
        };
        for c in &st.consumers {
            assert!(c.slot < 64);
        }
        if self.w.clean {
            assert_eq!(st.geometry, self.env.main.geo);
            assert_eq!(st.consumers.len(), self.cons.len(), "stat: consumers");
            assert_eq!(st.head, self.env.main.head(), "stat: head");
            if self.w.prod.is_some() {
                assert_eq!(st.producer.state, "active");
            }
            for c in &st.consumers {
                assert!(c.alive, "stat: a live consumer reported dead");
            }
        }
    }

    fn seek(&mut self, c: u8, kind: u8, n: u16) {
        if self.cons.is_empty() {
            return;
        }
        let i = usize::from(c) % self.cons.len();
        let to = match kind % 4 {
            0 => SeekTo::Newest,
            1 => SeekTo::Oldest,
            2 => SeekTo::Forward(u64::from(n)),
            _ => SeekTo::Backward(u64::from(n)),
        };
        let g = self.env.main.geo;
        if matches!(to, SeekTo::Oldest | SeekTo::Backward(_)) {
            self.rewound[i] = true;
        }
        let c = &mut self.cons[i];
        let before = c.position();
        match c.seek(to) {
            Ok(t) => {
                assert_eq!(c.position(), t);
                if self.w.clean {
                    let head = self.env.main.head();
                    let floor = head.saturating_sub(g.cap());
                    let ok = match to {
                        SeekTo::Newest => t == head,
                        SeekTo::Oldest => t == floor,
                        // (From a lapped position it may stay lapped.)
                        SeekTo::Forward(_) => before <= t && t <= head,
                        SeekTo::Backward(_) => floor <= t && (t <= before || t == floor),
                    };
                    assert!(ok, "{to:?} from {before} to {t} (head {head})");
                }
            }
            Err(e) => assert!(
                matches!(e, ReadError::Unsupported(_)) && g.layout == Layout::Variable,
                "seek: {e:?}"
            ),
        }
    }

    fn read(&mut self, c: u8, how: u8, size: u16) {
        if self.cons.is_empty() {
            return;
        }
        let i = usize::from(c) % self.cons.len();
        let max = self.max_len();
        let holds = usize::from(size >> 12);
        let size = usize::from(size & 0x0fff) % (max + 64);
        let how = how % 8;
        let timed = how == 4 && self.timed > 0;
        if how == 4 {
            if !timed {
                return;
            }
            self.timed -= 1;
        }
        let env = &self.env;
        let lossless = env.lossless && !self.rewound[i];
        let w = &mut self.w;
        let c = &mut self.cons[i];
        match how {
            0 | 4 => {
                let mut buf = vec![0u8; size];
                let r = if timed {
                    c.read_timeout(&mut buf, TIMED_READ)
                } else {
                    c.try_read(&mut buf)
                };
                if trace() {
                    eprintln!("  -> {r:?}");
                }
                match r {
                    Ok(n) => {
                        assert!(n <= size, "read {n} bytes into {size}");
                        // (0: an empty block or the end of the stream.)
                        if n > 0 {
                            let g = &env.main.geo;
                            let pos = c.position() - units(g, n as u64);
                            w.check_copy(env, pos, &buf[..n]);
                        }
                    }
                    Err(e) => w.check_err(env, &e, size, lossless),
                }
            }
            1 | 2 | 5 | 6 => {
                let got = match c.try_peek(size) {
                    Ok(Some(mut p)) => {
                        let out = Out::of(&p);
                        w.check_out(env, &out, size, None);
                        if how == 2 {
                            // The producer goes on while the block is
                            // borrowed.
                            for k in 0..holds.max(1) {
                                let len = (out.len + 16 * k) as u16;
                                w.write(env, len, k as u8, 0);
                            }
                        }
                        let copy = p.to_vec();
                        if how == 5 {
                            p.truncate(size / 2);
                        }
                        if how == 6 {
                            drop(p);
                            None
                        } else {
                            Some((out, copy, p.release()))
                        }
                    }
                    Ok(None) => {
                        w.check_eof();
                        None
                    }
                    Err(e) => {
                        w.check_err(env, &e, size, lossless);
                        None
                    }
                };
                match got {
                    Some((out, copy, Ok(()))) => w.check_released(env, c, &out, &copy, how == 5),
                    Some((_, _, Err(e))) => w.check_err(env, &e, size, lossless),
                    None => {}
                }
            }
            _ => match c.peek_detached(size, Wait::No) {
                Ok(Some(d)) => {
                    let pos = c.position();
                    if how == 7 {
                        // Stale once the consumer reads again.
                        let mut buf = vec![0u8; max];
                        let _ = c.try_read(&mut buf);
                        let d = c.resume(d).err().map(|d| d.len());
                        assert!(d.is_some(), "a stale detached peek resumed");
                        return;
                    }
                    let (addr, len, tag, u) = (d.addr() as usize, d.len(), d.tag(), d.units());
                    let p = match c.resume(d) {
                        Ok(p) => p,
                        Err(_) => panic!("a current detached peek was refused"),
                    };
                    let out = Out::of(&p);
                    assert_eq!((out.addr, out.len, out.tag), (addr, len, tag));
                    let g = &env.main.geo;
                    if !g.layout.counts_entries() && g.layout != Layout::Continuous {
                        assert_eq!(u, units(g, len as u64), "units of a block");
                    }
                    w.check_out(env, &out, size, Some(pos));
                    let copy = p.to_vec();
                    match p.release() {
                        Ok(()) => {
                            assert_eq!(c.position(), pos + u, "release moves by the units");
                            w.check_content(env, pos, &copy, Some(tag));
                        }
                        Err(e) => w.check_err(env, &e, size, lossless),
                    }
                }
                Ok(None) => w.check_eof(),
                Err(e) => w.check_err(env, &e, size, lossless),
            },
        }
        if w.clean && lossless {
            let st = c.stats();
            assert_eq!(st.skipped_blocks, 0, "a lossless reader skipped");
        }
    }

    /// The largest block a reader of the main ring can meet.
    fn max_len(&self) -> usize {
        let g = match &self.env.src {
            Some(s) => &s.geo,
            None => &self.env.main.geo,
        };
        g.data_len as usize
    }

    fn scribble(&mut self, target: u8, region: u8, index: u16, field: u8, value: Value) {
        let ring = match (&self.env.src, target & 1) {
            (Some(s), 1) => s.clone(),
            _ => self.env.main.clone(),
        };
        self.w.clean = false;
        let g = ring.geo;
        let head = ring.head();
        // Positions near which headers and entries are worth hitting.
        let anchors: Vec<u64> = [head, head.wrapping_sub(1), 0]
            .into_iter()
            .chain(self.cons.iter().map(Consumer::position))
            .collect();
        let anchor = anchors[usize::from(index & 7) % anchors.len()];
        let delta = i64::from((index >> 8) as i8);
        let names = self.names();
        let v = self.value(&ring, value, anchor);
        let wide = |off: u64| (off, v.to_le_bytes().to_vec());
        let (off, bytes) = match region % 8 {
            0 => wide(PRODUCER_OFF as u64 + u64::from(field % 6) * 8),
            1 => wide(CONTROL_OFF as u64 + u64::from(field % 8) * 8),
            2 => wide(SHARED_OFF as u64),
            3 => {
                let slot = if index & 0x80 != 0 {
                    index % 64
                } else {
                    index % 4
                };
                wide(SLOTS_OFF as u64 + u64::from(slot) * 128 + u64::from(field % 10) * 8)
            }
            4 => {
                let at = SOURCES_OFF as u64 + u64::from(index % 8) * 256;
                match field % 4 {
                    0 => wide(at),
                    1 => (at + 8, (v as u32).to_le_bytes().to_vec()),
                    2 => {
                        let name = &names[usize::from(field >> 2) % names.len()];
                        let mut b = (name.len() as u32).to_le_bytes().to_vec();
                        b.extend_from_slice(&[0; 4]);
                        b.extend_from_slice(name);
                        (at + 8, b)
                    }
                    _ => wide(at + 16 + (v >> 56) % 232),
                }
            }
            5 if g.desc_len > 0 => {
                let pos = anchor.wrapping_add_signed(delta);
                let e = (pos & (g.desc_len - 1)) * 32;
                wide(DESC_OFF + e + u64::from(field % 4) * 8)
            }
            6 if g.data_len > 0 => {
                let unit = match g.layout {
                    Layout::Slotted => g.slot_size,
                    Layout::Variable => BLOCK_HDR,
                    _ => 8,
                };
                let pos = anchor.wrapping_add_signed(delta.wrapping_mul(unit as i64));
                let word = pos.wrapping_add(u64::from(field % 2) * 8);
                wide(g.head_len + (word & (g.data_len - 1) & !7))
            }
            _ => wide((u64::from(index) * 8) % (ring.file_len().max(8) - 7)),
        };
        ring.put(off, &bytes);
    }

    /// Names a hostile source table may hold.
    fn names(&self) -> Vec<Vec<u8>> {
        let tag = thread_tag();
        let mut v: Vec<Vec<u8>> = vec![self.env.main.name.clone().into_bytes()];
        if let Some(s) = &self.env.src {
            v.push(s.name.clone().into_bytes());
        }
        for l in [Layout::Variable, Layout::Continuous, Layout::Index] {
            v.push(ring_name(&tag, l, Overflow::Frp).into_bytes());
        }
        v.push(b"no-such-ring".to_vec());
        v.push(b"../escape".to_vec());
        v.push(vec![0xff; 8]);
        v.push(vec![b'x'; 240]);
        v
    }

    /// The value a scribble writes.
    fn value(&self, ring: &Ring, v: Value, anchor: u64) -> u64 {
        if v.sel >= 0x80 {
            return v.raw;
        }
        let g = ring.geo;
        let pid = std::process::id();
        let head = ring.head();
        let we = ring.word(PRODUCER_OFF as u64 + 8);
        let ids = [
            self.env.main.geo.ring_id,
            self.env.src.as_ref().map_or(0, |s| s.geo.ring_id),
        ];
        let interesting = [
            0,
            1,
            anchor,
            anchor << 1,
            anchor << 1 | 1,
            head,
            head << 1,
            head + g.cap(),
            we,
            we.wrapping_add(g.cap()),
            g.cap(),
            g.data_len,
            g.data_len.saturating_sub(1),
            g.data_len.saturating_sub(BLOCK_HDR),
            g.slot_size,
            u64::MAX,
            1 << 63,
            (1 << 63) - 1,
            u64::from(u32::MAX),
            owner_word(1, OWNER_ACTIVE, pid),
            owner_word(1, OWNER_ACTIVE, 1),
            owner_word(7, OWNER_CLOSED, pid),
            owner_word(2, OWNER_FAILED, pid),
            owner_word(0xff_ffff, 3, pid),
            SLOT_ACTIVE << 32 | u64::from(pid),
            SLOT_ACTIVE << 32 | 1,
            SLOT_JOINING << 32 | u64::from(pid),
            SLOT_EVICTING << 32 | 1,
            ids[0],
            ids[1],
            // A block header's second word: length, tag.
            (g.data_len + 1) | 7 << 32,
            (g.data_len.saturating_sub(BLOCK_HDR)) | 1 << 32,
            u64::from(u32::MAX) | 1 << 32,
            // A rich pointer's third word: offset, length.
            (g.data_len / 2) << 32,
            (g.data_len / 2) << 32 | (g.data_len / 2 + 1),
            0xf,
        ];
        let i = (v.raw & 0xffff_ffff) as usize % interesting.len();
        let base = interesting[i];
        if v.sel & 1 == 1 {
            base.wrapping_add_signed(i64::from((v.raw >> 32) as u8 as i8))
        } else {
            base
        }
    }
}

impl Writer {
    /// A write by the producer (or, in an index session, a splice).
    fn write(&mut self, env: &Env, len: u16, tag: u8, how: u8) {
        if env.src.is_some() {
            if how % 6 == 1 {
                // Bytes: an index ring takes only splices of peeks.
                if let Some(p) = self.prod.as_mut() {
                    let r = p.try_write(&payload(self.seq, usize::from(len) % 256));
                    assert_eq!(r, Err(WriteError::NotIndexable));
                }
                return;
            }
            return self.splice(env, len, tag);
        }
        let g = env.main.geo;
        let len = usize::from(len) % (g.max_block() as usize + 64);
        let Some(p) = self.prod.as_mut() else {
            return;
        };
        let data = payload(self.seq, len);
        self.seq = self.seq.wrapping_add(1);
        let tag = u32::from(tag);
        let before = env.main.head();
        if how % 6 == 3 {
            // Reserved, then dropped: nothing is published.
            let r = p.reserve(len, Wait::No).map(drop);
            if self.clean {
                assert_eq!(
                    env.main.head(),
                    before,
                    "an uncommitted reservation published"
                );
            }
            if let Err(e) = r {
                self.check_write_err(&g, &e, len as u64, false);
            }
            return;
        }
        let wait = if how % 6 == 5 && self.timed_writes > 0 {
            self.timed_writes -= 1;
            Wait::Until(std::time::Instant::now() + TIMED_WRITE)
        } else {
            Wait::No
        };
        let (r, tag) = match how % 6 {
            0 | 5 => (p.write_tagged(&data, tag, wait).map(|()| len), tag),
            1 => (p.try_write(&data), 0),
            2 => (
                match p.reserve(len, Wait::No) {
                    Ok(mut res) => {
                        assert_eq!(res.capacity(), len);
                        assert_eq!(res.put(&data), len);
                        res.commit(tag).map(|()| len)
                    }
                    Err(e) => Err(e),
                },
                tag,
            ),
            _ => {
                let (a, b) = data.split_at(len / 2);
                (
                    p.write_gather(
                        &[zcio::View::from_slice(a), zcio::View::from_slice(b)],
                        tag,
                        Wait::No,
                    )
                    .map(|()| len),
                    tag,
                )
            }
        };
        if trace() {
            eprintln!("  -> {r:?}");
        }
        let continuous_split = how % 6 == 1 && g.layout == Layout::Continuous;
        match r {
            Ok(n) => {
                assert!(n <= len);
                assert!(len as u64 <= g.max_block() || continuous_split);
                if self.clean {
                    let after = env.main.head();
                    let want = if g.layout == Layout::Continuous {
                        n as u64
                    } else {
                        units(&g, n as u64)
                    };
                    assert_eq!(after, before + want, "head after a write of {n}");
                    if g.layout == Layout::Continuous {
                        assert_eq!(before, self.model.stream.len() as u64);
                        self.model.stream.extend_from_slice(&data[..n]);
                    } else {
                        self.model
                            .blocks
                            .insert(before, Some((data[..n].to_vec(), tag)));
                    }
                }
            }
            Err(e) => {
                self.check_write_err(&g, &e, len as u64, continuous_split);
                // A continuous write split in pieces may have stored some
                // before a piece failed.
                let after = env.main.head();
                if self.clean && after != before {
                    assert!(continuous_split, "a failed write moved the head");
                    let n = (after - before) as usize;
                    assert!(n < len);
                    self.model.stream.extend_from_slice(&data[..n]);
                }
            }
        }
    }

    fn check_write_err(&self, g: &Geometry, e: &WriteError, len: u64, split: bool) {
        match e {
            WriteError::TooLarge { len: l, max } => {
                assert!(!split && *l == len && *max == g.max_block() && len > *max);
            }
            WriteError::WouldBlock | WriteError::TimedOut => {
                assert!(!self.clean || g.overflow == Overflow::Block, "{e}");
            }
            WriteError::Dropped => assert!(matches!(g.overflow, Overflow::Srp | Overflow::Mrp)),
            WriteError::Corrupt(_) => assert!(!self.clean, "write to a clean ring: {e}"),
            _ => assert!(!self.clean, "write: {e:?}"),
        }
        if len > g.max_block() && !split {
            assert!(matches!(e, WriteError::TooLarge { .. }), "{len}: {e:?}");
        }
    }

    /// Index sessions: write to the source ring only.
    fn source_write(&mut self, env: &Env, len: u16, tag: u32) -> Option<()> {
        let s = env.src.as_ref()?;
        let g = s.geo;
        let len = usize::from(len) % (g.max_block() as usize + 1);
        let p = self.src_prod.as_mut()?;
        let data = payload(self.seq, len);
        self.seq = self.seq.wrapping_add(1);
        let before = s.head();
        match p.write_tagged(&data, tag, Wait::No) {
            Ok(()) if self.clean => {
                if g.layout == Layout::Continuous {
                    assert_eq!(before, self.model.src_stream.len() as u64);
                    self.model.src_stream.extend_from_slice(&data);
                } else {
                    self.model.src_blocks.insert(before, (data, tag));
                }
            }
            Ok(()) => {}
            Err(e) => self.check_write_err(&g, &e, len as u64, false),
        }
        Some(())
    }

    /// Index sessions: write a block to the source, then peek the next
    /// block there and splice it into the index ring.
    fn splice(&mut self, env: &Env, len: u16, tag: u8) {
        if self.source_write(env, len, u32::from(tag)).is_none() {
            return;
        }
        let (Some(s), Some(ip), Some(sc)) = (&env.src, self.prod.as_mut(), self.src_cons.as_mut())
        else {
            return;
        };
        let before = env.main.head();
        let p = match sc.try_peek(s.geo.data_len as usize) {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                assert!(
                    !self.clean || matches!(e, ReadError::WouldBlock | ReadError::Lapped),
                    "splicer: {e:?}"
                );
                return;
            }
        };
        let out = Out::of(&p);
        check_bounds(&out);
        let bytes = p.to_vec();
        let r = ip.splice(&p, Wait::No);
        let intact = p.release().is_ok();
        match r {
            Ok(()) => {
                if !self.clean {
                    return;
                }
                let b = intact.then(|| (bytes.clone(), out.tag));
                self.model.blocks.insert(before, b);
                // What the splicer peeked is what the source was given.
                let m = &self.model;
                match s.geo.layout {
                    _ if !intact => {}
                    Layout::Continuous => {
                        let at = out.origin.pos as usize;
                        assert_eq!(&m.src_stream[at..at + bytes.len()], &bytes[..]);
                    }
                    l => {
                        let at = if l == Layout::Descriptors {
                            sc.position() - 1
                        } else {
                            out.origin.pos
                        };
                        let (w, t) = m.src_blocks.get(&at).expect("a written source block");
                        assert_eq!((&bytes, out.tag), (w, *t), "the spliced block");
                    }
                }
            }
            Err(e) => assert!(
                matches!(e, WriteError::WouldBlock | WriteError::Dropped) || !self.clean,
                "splice: {e:?}"
            ),
        }
    }

    /// Where the block lies and what its header says.
    fn check_out(&self, env: &Env, out: &Out, max: usize, pos: Option<u64>) {
        check_bounds(out);
        let m = &env.main;
        let g = &m.geo;
        let (base, dl) = out.area;
        let mask = dl - 1;
        match g.layout {
            Layout::Continuous => {
                let p = out.origin.pos;
                assert!(out.len <= max, "continuous block of {} > {max}", out.len);
                assert_eq!(out.addr, base + (p & mask) as usize);
                assert!(p + out.len as u64 <= m.head() || !self.clean);
                if let Some(pos) = pos {
                    assert_eq!(p, pos);
                }
            }
            Layout::Slotted | Layout::Variable => {
                let p = out.origin.pos;
                if let Some(pos) = pos {
                    assert_eq!(p, pos);
                }
                assert!(out.len as u64 <= g.max_block());
                assert_eq!(out.addr, base + ((p + BLOCK_HDR) & mask) as usize);
                if self.cut {
                    return;
                }
                let h: [u8; 16] = m.get(g.head_len + (p & mask));
                let hpos = u64::from_le_bytes(h[..8].try_into().expect("8"));
                let hlen = u32::from_le_bytes(h[8..12].try_into().expect("4"));
                let htag = u32::from_le_bytes(h[12..].try_into().expect("4"));
                assert_eq!(hpos, p, "header position");
                assert_eq!(hlen as usize, out.len, "the length the header claims");
                assert_eq!(htag, out.tag);
            }
            Layout::Descriptors | Layout::Index => {
                let e = out.origin;
                assert_eq!(e.len as usize, out.len, "the length the entry claims");
                assert_eq!(e.tag, out.tag);
                assert_eq!(e.ring_id, out.holder_id);
                assert_eq!(
                    out.addr,
                    base + (e.pos.wrapping_add(u64::from(e.offset)) & mask) as usize
                );
                if g.layout == Layout::Descriptors {
                    assert_eq!((e.ring_id, e.offset), (g.ring_id, 0));
                } else {
                    assert!(u64::from(e.offset) + u64::from(e.len) <= dl);
                }
                if let Some(pos) = pos.filter(|_| !self.cut) {
                    let raw = Entry::parse(m.get(DESC_OFF + (pos & (g.desc_len - 1)) * 32));
                    let got = Entry {
                        ring_id: e.ring_id,
                        pos: e.pos,
                        offset: e.offset,
                        len: e.len,
                        tag: e.tag,
                    };
                    assert_eq!(raw, got, "the entry the block came from");
                }
            }
        }
    }

    /// A peeked block was released intact: its copy is what was written.
    fn check_released(&self, env: &Env, c: &Consumer, out: &Out, copy: &[u8], cut: bool) {
        let g = &env.main.geo;
        let pos = match g.layout {
            Layout::Descriptors | Layout::Index => c.position() - 1,
            _ => out.origin.pos,
        };
        let copy = if cut && g.layout == Layout::Continuous {
            &copy[..(c.position() - pos) as usize]
        } else {
            copy
        };
        self.check_content(env, pos, copy, Some(out.tag));
    }

    /// A copied block: where the consumer says it was.
    fn check_copy(&self, env: &Env, pos: u64, bytes: &[u8]) {
        self.check_content(env, pos, bytes, None);
    }

    /// Bytes a reader accepted at `pos` are the bytes written there.
    fn check_content(&self, env: &Env, pos: u64, bytes: &[u8], tag: Option<u32>) {
        if !self.clean {
            return;
        }
        if env.main.geo.layout == Layout::Continuous {
            let s = &self.model.stream;
            let end = pos as usize + bytes.len();
            assert!(end <= s.len(), "read past what was written");
            assert_eq!(&s[pos as usize..end], bytes, "stream bytes at {pos}");
            return;
        }
        match self.model.blocks.get(&pos) {
            Some(Some((b, t))) => {
                assert_eq!(b.as_slice(), bytes, "block at {pos}");
                if let Some(tag) = tag {
                    assert_eq!(*t, tag, "tag of the block at {pos}");
                }
            }
            Some(None) => {}
            None => panic!("a block at {pos} that was never written"),
        }
    }

    fn check_eof(&self) {
        assert!(
            !self.clean || self.prod.is_none(),
            "end of stream while the producer is attached"
        );
    }

    fn check_err(&self, env: &Env, e: &ReadError, size: usize, lossless: bool) {
        match e {
            ReadError::BufferTooSmall { need, have } => {
                assert!(*have == size && need > have);
                assert!(*need as u64 <= zcio::ring::Geometry::MAX_DATA_LEN);
                let _ = env;
            }
            ReadError::WouldBlock | ReadError::TimedOut => {}
            ReadError::ProducerFailed { .. } => {}
            ReadError::Lapped => assert!(!self.clean || !lossless, "lapped: {e}"),
            _ => assert!(!self.clean, "read from a clean ring: {e:?}"),
        }
    }
}

/// The bytes of a handed-out block lie in the data area of the ring that
/// holds them (mapped twice back to back).
fn check_bounds(out: &Out) {
    let (base, dl) = out.area;
    assert!(out.len as u64 <= dl, "a block longer than the data area");
    assert!(
        out.addr >= base && out.addr + out.len <= base + 2 * dl as usize,
        "a block outside the data area: {:#x}+{} not in {base:#x}+2*{dl}",
        out.addr,
        out.len
    );
}
