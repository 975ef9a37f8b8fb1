//! Helpers for the cross-process tests of named rings (`ring_death.rs`,
//! `ring_access.rs`, `ring_hostile.rs`):
//!
//! * [`RingDir`]: a private ring directory per test (`ZCIO_RING_DIR` points
//!   to it while the test runs, and every child gets it too), removed at the
//!   end;
//! * self-checking blocks ([`block`], [`check_block`]);
//! * [`RawRing`]: the ring file opened as a plain file, for hostile peers;
//! * the reader and writer child roles shared by the test files
//!   ([`run_reader`], [`run_writer`]) and their command plumbing.

use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use zcio::internals::ring_layout::{
    CONTROL_OFF, DESC_OFF, MAX_CONSUMERS, PRODUCER_OFF, SLOTS_OFF, SOURCES_OFF,
};
use zcio::ring::{Consumer, Producer, ReadError, RingMap, Start};

use super::{arg, command, report, Kid, STEP};

/// The variable naming the ring directory.
pub const DIR_ENV: &str = "ZCIO_RING_DIR";

/// Serialises the tests of one binary that use a [`RingDir`]: the variable
/// is process-wide, so two tests cannot each have their own at once.
static ENV_LOCK: Mutex<()> = Mutex::new(());

/// A private ring directory for one test. While it lives, `ZCIO_RING_DIR`
/// names it in this process (tests holding one run one at a time) and in
/// every child spawned through it; dropping it removes the directory and
/// everything in it.
pub struct RingDir {
    path: PathBuf,
    tag: String,
    _lock: MutexGuard<'static, ()>,
}

impl RingDir {
    /// Create the directory for test `tag` and point `ZCIO_RING_DIR` at it.
    pub fn new(tag: &str) -> Self {
        // A test that failed while holding the lock poisons it; the next one
        // still gets a fresh directory, so the poison does not matter.
        let lock = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let path = std::env::temp_dir().join(format!("zcio-rings-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).expect("create the ring directory");
        // Searchable by other uids (the access test runs a child as nobody).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the ring directory");
        std::env::set_var(DIR_ENV, &path);
        assert_eq!(zcio::internals::sys::shm::ring_dir(), path);
        RingDir {
            path,
            tag: tag.to_string(),
            _lock: lock,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A ring name unique to this test and process.
    pub fn name(&self, what: &str) -> String {
        format!("{}-{}-{what}", self.tag, std::process::id())
    }

    /// Names of the files in the directory (sorted).
    pub fn entries(&self) -> Vec<String> {
        use std::os::unix::fs::MetadataExt;
        // The registry of live objects sits next to the rings by design
        // (`zcio-<uid>`, a directory); it is not a ring directory entry.
        let me = std::fs::metadata(&self.path)
            .expect("stat the ring directory")
            .uid();
        let run_dir = format!("zcio-{me}");
        let mut v: Vec<String> = std::fs::read_dir(&self.path)
            .expect("read the ring directory")
            .map(|e| e.expect("dir entry"))
            .filter(|e| !(e.file_name() == run_dir.as_str() && e.path().is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// [`Kid::spawn`] with `ZCIO_RING_DIR` set to this directory.
    pub fn spawn(&self, entry: &str, role: &str, args: &[(&str, String)]) -> Kid {
        Kid::spawn_with(entry, role, args, |c| {
            c.env(DIR_ENV, &self.path);
        })
    }

    /// [`Kid::try_spawn_with`] with `ZCIO_RING_DIR` set to this directory.
    pub fn try_spawn_with(
        &self,
        entry: &str,
        role: &str,
        args: &[(&str, String)],
        adjust: impl FnOnce(&mut Command),
    ) -> std::io::Result<Kid> {
        Kid::try_spawn_with(entry, role, args, |c| {
            c.env(DIR_ENV, &self.path);
            adjust(c);
        })
    }
}

impl Drop for RingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        std::env::remove_var(DIR_ENV);
    }
}

/// In a child: the ring directory must have been handed down (a child must
/// never fall back to `/dev/shm`).
pub fn child_ring_dir() -> PathBuf {
    let d = std::env::var_os(DIR_ENV).expect("ZCIO_RING_DIR set for ring children");
    PathBuf::from(d)
}

// ------------------------------------------------------------------ blocks

/// Marker in bytes 12..16 of every test block.
const BLOCK_MAGIC: u32 = 0x5EB1_0C4B;

/// The length of block `seq` when blocks are at most `max` bytes (≥ 16).
pub fn block_len(seq: u64, max: usize) -> usize {
    let h = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    16 + (h % (max as u64 - 15)) as usize
}

/// Block `seq` of a test stream, `len` bytes (≥ 16): the sequence number,
/// the length, a marker, then bytes derived from the sequence number. A
/// reader can check any block on its own ([`check_block`]).
pub fn block_of(seq: u64, len: usize) -> Vec<u8> {
    assert!(len >= 16);
    let mut v = vec![0u8; len];
    v[..8].copy_from_slice(&seq.to_le_bytes());
    v[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    v[12..16].copy_from_slice(&BLOCK_MAGIC.to_le_bytes());
    super::fill(&mut v[16..], seq, 0);
    v
}

/// Block `seq` of a stream of blocks of at most `max` bytes.
pub fn block(seq: u64, max: usize) -> Vec<u8> {
    block_of(seq, block_len(seq, max))
}

/// The sequence number of `b` if it is exactly one of the blocks
/// [`block_of`] makes, else what is wrong with it.
pub fn check_block(b: &[u8]) -> Result<u64, String> {
    if b.len() < 16 {
        return Err(format!("short block of {} bytes", b.len()));
    }
    let seq = u64::from_le_bytes(b[..8].try_into().unwrap());
    let len = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
    let magic = u32::from_le_bytes(b[12..16].try_into().unwrap());
    if magic != BLOCK_MAGIC || len != b.len() {
        return Err(format!(
            "bad block header (seq {seq:#x}, len {len} of {}, magic {magic:#x})",
            b.len()
        ));
    }
    match super::first_mismatch(&b[16..], seq, 0) {
        None => Ok(seq),
        Some(k) => Err(format!("block {seq}: byte {} differs", 16 + k)),
    }
}

/// A small deterministic generator (xorshift64*), seeded per test so a
/// failing run can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
}

// ---------------------------------------------------------- raw ring file

/// A ring file opened as a plain read-write file, the way a hostile peer
/// with write permission can: no validation, no mapping.
pub struct RawRing {
    pub file: std::fs::File,
    pub head_len: u64,
    pub data_len: u64,
    pub desc_len: u64,
    pub ring_id: u64,
}

/// Offset of the producer's head word.
pub const HEAD_WORD: u64 = PRODUCER_OFF as u64;
/// Offset of `write_end`.
pub const WRITE_END: u64 = PRODUCER_OFF as u64 + 8;
/// The control line and its fields.
pub const CONTROL: u64 = CONTROL_OFF as u64;
pub const CONTROL_OWNER: u64 = CONTROL;
pub const CONTROL_CONSUMERS: u64 = CONTROL + 32;
/// Consumer slots.
pub const SLOTS: u64 = SLOTS_OFF as u64;
pub const SLOT_SIZE: u64 = 128;
pub const SLOTS_LEN: u64 = SLOT_SIZE * MAX_CONSUMERS as u64;
/// Source table of index rings.
pub const SOURCES: u64 = SOURCES_OFF as u64;
/// Descriptor ring.
pub const DESC: u64 = DESC_OFF;

impl RawRing {
    /// Open ring `name`'s file (no symlink check: a test helper).
    pub fn open(name: &str) -> Self {
        let path = zcio::internals::sys::shm::path_of(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let mut r = RawRing {
            file,
            head_len: 0,
            data_len: 0,
            desc_len: 0,
            ring_id: 0,
        };
        r.head_len = r.read_u64(24);
        r.data_len = r.read_u64(32);
        r.desc_len = r.read_u64(40);
        r.ring_id = r.read_u64(48);
        r
    }

    pub fn read_u64(&self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, off).expect("pread");
        u64::from_le_bytes(b)
    }

    pub fn write_u64(&self, off: u64, v: u64) {
        self.write_at(off, &v.to_le_bytes());
    }

    pub fn write_at(&self, off: u64, bytes: &[u8]) {
        self.file.write_all_at(bytes, off).expect("pwrite");
    }

    /// Offset of consumer slot `i`.
    pub fn slot(i: usize) -> u64 {
        SLOTS + i as u64 * SLOT_SIZE
    }

    /// Write descriptor entry `pos` (a `RichPtr`).
    pub fn write_desc(&self, pos: u64, p: &zcio::ring::RichPtr) {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&p.ring_id.to_le_bytes());
        b[8..16].copy_from_slice(&p.pos.to_le_bytes());
        b[16..20].copy_from_slice(&p.offset.to_le_bytes());
        b[20..24].copy_from_slice(&p.len.to_le_bytes());
        b[24..28].copy_from_slice(&p.tag.to_le_bytes());
        self.write_at(DESC + (pos & (self.desc_len - 1)) * 32, &b);
    }

    /// Write source-table entry `i` of an index ring: `id`, the claimed
    /// name length and the name bytes (at most 240).
    pub fn write_source(&self, i: usize, id: u64, name_len: u32, name: &[u8]) {
        let off = SOURCES + i as u64 * 256;
        let mut b = [0u8; 256];
        b[8..12].copy_from_slice(&name_len.to_le_bytes());
        b[16..16 + name.len()].copy_from_slice(name);
        // The id last: readers ignore an entry while its id is 0.
        self.write_at(off + 8, &b[8..]);
        self.write_u64(off, id);
    }
}

/// Whether the producer is sleeping on consumer `slot` right now (it sets
/// bit 0 of that consumer's cursor word while it waits for room).
pub fn producer_sleeps_on(map: &RingMap, slot: usize) -> bool {
    map.slot(slot)
        .cursor
        .load(zcio::internals::sync::Ordering::SeqCst)
        & 1
        != 0
}

// ------------------------------------------------------- child plumbing

/// Forward the parent's command lines to the returned receiver, except
/// those `immediate` handles itself (it returns `true` for them); the
/// receiver ends when the parent closes our stdin.
pub fn pump(immediate: impl Fn(&str) -> bool + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        while let Some(line) = command() {
            if !immediate(&line) && tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Once asked to stop, the main loop of a child must notice within
/// `grace`: a call that ignores its timeout would otherwise hang the child
/// silently until the watchdog. Reports `hung <what>` and exits with code 3.
pub fn hang_guard(done: Arc<AtomicBool>, grace: Duration, what: &'static str) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + grace;
        while !done.load(Ordering::SeqCst) {
            if Instant::now() >= deadline {
                report(format_args!("hung {what}"));
                std::process::exit(3);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

/// An optional child argument.
pub fn opt_arg(name: &str) -> Option<String> {
    std::env::var(format!("ZCIO_ARG_{name}")).ok()
}

/// `end <outcome> count=<n>` as reported by [`run_reader`].
pub fn parse_end(r: &str) -> (String, u64) {
    let r = r
        .strip_prefix("end ")
        .unwrap_or_else(|| panic!("not an end report: {r:?}"));
    let (outcome, n) = r
        .rsplit_once(" count=")
        .unwrap_or_else(|| panic!("no count in {r:?}"));
    (outcome.to_string(), n.parse().expect("count"))
}

/// The number after `prefix` in a report such as `count 12`.
pub fn num_after(r: &str, prefix: &str) -> u64 {
    r.strip_prefix(prefix)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("expected {prefix:?}<number> in {r:?}"))
}

// ------------------------------------------- reader and writer children

/// Spawn this test binary's `child_reader` ([`run_reader`]) on ring `name`
/// with the `extra` arguments; returns it once attached, with its slot.
pub fn reader(dir: &RingDir, name: &str, extra: &[(&str, &str)]) -> (Kid, usize) {
    let mut k = dir.spawn("child_reader", "ring-reader", &ring_args(name, extra));
    let slot = k.expect("attached slot=").parse().expect("slot number");
    (k, slot)
}

/// Spawn this test binary's `child_writer` ([`run_writer`]) on ring `name`,
/// writing blocks of at most `max` bytes, with the `extra` arguments;
/// returns it once it reported `readers` consumers attached.
pub fn writer(
    dir: &RingDir,
    name: &str,
    max: usize,
    readers: usize,
    extra: &[(&str, &str)],
) -> Kid {
    let (max_arg, readers_arg) = (max.to_string(), readers.to_string());
    let mut args = vec![("MAX", max_arg.as_str()), ("READERS", readers_arg.as_str())];
    args.extend_from_slice(extra);
    let mut w = dir.spawn("child_writer", "ring-writer", &ring_args(name, &args));
    assert_eq!(w.expect("ready consumers="), readers_arg);
    w
}

fn ring_args<'a>(name: &str, extra: &[(&'a str, &str)]) -> Vec<(&'a str, String)> {
    let mut args = vec![("RING", name.to_string())];
    args.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    args
}

/// Ask a reader or writer child for its block count (`count` or `until N`).
pub fn count(k: &mut Kid, cmd: &str) -> u64 {
    num_after(&k.ask(cmd), "count ")
}

/// Close a writer child (or any child that answers `close` with `closed`)
/// and require a clean exit.
pub fn close(mut k: Kid) {
    k.send("close");
    assert_eq!(k.next_report(), "closed", "child {} on close", k.name);
    k.finish();
}

/// The `child_reader` and `child_writer` entry points that [`reader`] and
/// [`writer`] spawn; a test file using them invokes this once, at its root.
#[macro_export]
macro_rules! ring_child_entry_points {
    () => {
        #[test]
        #[ignore = "child process entry point"]
        fn child_reader() {
            if $crate::common::child_role("ring-reader").is_none() {
                return;
            }
            $crate::common::ring::run_reader();
        }

        #[test]
        #[ignore = "child process entry point"]
        fn child_writer() {
            if $crate::common::child_role("ring-writer").is_none() {
                return;
            }
            $crate::common::ring::run_writer();
        }
    };
}

/// Child role: an honest consumer of ring `RING`.
///
/// Arguments: `RING`; `FIRST` (the sequence number it must see first; the
/// following blocks must be consecutive; `any`: blocks may be missing but
/// must come in increasing order); `START` (`newest`/`oldest`); `WAIT`
/// (`forever`: blocking `read`, bounded by the consumer's one-hour
/// `wait_bound`, the default; `poll`: `read_timeout` so
/// `stop` works); `PAUSED` (`1`: read nothing before the `go` command);
/// `KEEP` (`1`: errors and end-of-stream are counted and reading goes on
/// until `stop`; implies `poll`).
///
/// Every block returned must be intact ([`check_block`]). Reports
/// `attached slot=S`, then on `count`/`until N` its block count, with
/// `KEEP` an `errors {..}` summary, and finally
/// `end <eof|stopped|err E|bad WHAT> count=N`.
pub fn run_reader() {
    child_ring_dir();
    let name = arg("RING");
    let first = opt_arg("FIRST").unwrap_or_else(|| "0".into());
    let first: Option<u64> = (first != "any").then(|| first.parse().expect("FIRST"));
    let start = match opt_arg("START").as_deref() {
        Some("oldest") => Start::Oldest,
        _ => Start::Newest,
    };
    let keep = opt_arg("KEEP").as_deref() == Some("1");
    let poll = keep || opt_arg("WAIT").as_deref() == Some("poll");
    let paused = opt_arg("PAUSED").as_deref() == Some("1");
    let map = match RingMap::open(&name, true) {
        Ok(m) => m,
        Err(e) => return report(format_args!("attach-error {e:?}")),
    };
    let mut c = match Consumer::attach(map, start) {
        Ok(c) => c,
        Err(e) => return report(format_args!("attach-error {e:?}")),
    };
    report(format_args!("attached slot={}", c.slot()));
    let count = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(!paused));
    let (cn, fin, st, g) = (count.clone(), finished.clone(), stop.clone(), go.clone());
    let rx = pump(move |cmd| {
        if cmd == "count" {
            report(format_args!("count {}", cn.load(Ordering::SeqCst)));
        } else if let Some(n) = cmd.strip_prefix("until ") {
            let n: u64 = n.parse().expect("until N");
            let deadline = Instant::now() + STEP;
            while cn.load(Ordering::SeqCst) < n
                && !fin.load(Ordering::SeqCst)
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            report(format_args!("count {}", cn.load(Ordering::SeqCst)));
        } else if cmd == "go" {
            g.store(true, Ordering::SeqCst);
        } else if cmd == "stop" {
            st.store(true, Ordering::SeqCst);
            hang_guard(fin.clone(), Duration::from_secs(10), "in read after stop");
        } else {
            return false;
        }
        true
    });
    while !go.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut expect = first;
    let mut last: Option<u64> = None;
    let mut errors = std::collections::BTreeMap::<String, u64>::new();
    let outcome = loop {
        if stop.load(Ordering::SeqCst) {
            break "stopped".to_string();
        }
        let r = if poll {
            c.read_timeout(&mut buf, Duration::from_millis(100))
        } else {
            c.read(&mut buf)
        };
        match r {
            Ok(0) if keep => {
                *errors.entry("eof".into()).or_default() += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(0) => break "eof".to_string(),
            Ok(n) => match check_block(&buf[..n]) {
                Ok(seq) => {
                    if let Some(e) = expect {
                        if seq != e {
                            break format!("bad order: got block {seq}, expected {e}");
                        }
                        expect = Some(e + 1);
                    } else if last.is_some_and(|l| seq <= l) {
                        break format!("bad order: got block {seq} after {last:?}");
                    }
                    last = Some(seq);
                    count.fetch_add(1, Ordering::SeqCst);
                }
                Err(what) => break format!("bad {what}"),
            },
            Err(ReadError::TimedOut) if poll => {}
            Err(e) if keep => {
                *errors.entry(format!("{e:?}")).or_default() += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => break format!("err {e:?}"),
        }
    };
    finished.store(true, Ordering::SeqCst);
    if keep {
        report(format_args!("errors {errors:?}"));
    }
    report(format_args!(
        "end {outcome} count={}",
        count.load(Ordering::SeqCst)
    ));
    drop(c);
    // Stay until the parent closes our stdin, so it may still send
    // commands (`stop`, `count`) without racing our exit.
    if let Ok(cmd) = rx.recv() {
        panic!("reader: unknown command {cmd:?}");
    }
}

/// Child role: the producer of ring `RING`, driven by commands.
///
/// Arguments: `RING`; `MAX` (largest block, default 1000); `SEQ0` (first
/// sequence number, default 0); `READERS` (consumers to wait for before
/// reporting `ready`, default 0).
///
/// Commands: `write N` (blocking writes), `try N` (N blocking writes, every
/// result reported), `fill` (`try_write` until full), `write_timeout S`,
/// `stream [MS]` (write until `stop`; with MS, `write_timeout(MS)` and
/// time-outs are counted), `close`, `fail CODE` (`close_with_error`, also
/// answered `closed`); `count` and `stop` are answered at once.
pub fn run_writer() {
    child_ring_dir();
    let name = arg("RING");
    let max: usize = opt_arg("MAX").map_or(1000, |m| m.parse().expect("MAX"));
    let seq0: u64 = opt_arg("SEQ0").map_or(0, |s| s.parse().expect("SEQ0"));
    let readers: usize = opt_arg("READERS").map_or(0, |s| s.parse().expect("READERS"));
    let mut p = match Producer::open(&name) {
        Ok(p) => p,
        Err(e) => return report(format_args!("attach-error {e:?}")),
    };
    let c = p.wait_for_consumers(readers, STEP);
    report(format_args!("ready consumers={c}"));
    let total = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let (t, s, d) = (total.clone(), stop.clone(), done.clone());
    let rx = pump(move |cmd| {
        match cmd {
            "count" => report(format_args!("count {}", t.load(Ordering::SeqCst))),
            "stop" => {
                s.store(true, Ordering::SeqCst);
                hang_guard(d.clone(), Duration::from_secs(10), "in write after stop");
            }
            _ => return false,
        }
        true
    });
    let next = |total: &AtomicU64| {
        let seq = seq0 + total.load(Ordering::SeqCst);
        block(seq, max)
    };
    let mut failed: Option<u32> = None;
    for cmd in rx {
        let (verb, rest) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
        match verb {
            "write" => {
                let n: u64 = rest.parse().expect("write N");
                let mut err = None;
                for _ in 0..n {
                    match p.write(&next(&total)) {
                        Ok(_) => {
                            total.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                match err {
                    None => report(format_args!("wrote total={}", total.load(Ordering::SeqCst))),
                    Some(e) => report(format_args!(
                        "write-error {e:?} total={}",
                        total.load(Ordering::SeqCst)
                    )),
                }
            }
            "try" => {
                let n: u64 = rest.parse().expect("try N");
                let mut res = Vec::new();
                for _ in 0..n {
                    match p.write(&next(&total)) {
                        Ok(_) => {
                            total.fetch_add(1, Ordering::SeqCst);
                            res.push("Ok".to_string());
                        }
                        Err(e) => res.push(format!("Err({e:?})")),
                    }
                }
                report(format_args!("tried {}", res.join(";")));
            }
            "fill" => {
                let mut n = 0;
                let e = loop {
                    match p.try_write(&next(&total)) {
                        Ok(_) => {
                            total.fetch_add(1, Ordering::SeqCst);
                            n += 1;
                        }
                        Err(e) => break e,
                    }
                };
                report(format_args!("full n={n} stopped-by={e:?}"));
            }
            "write_timeout" => {
                let secs: u64 = rest.parse().expect("write_timeout S");
                let r = p.write_timeout(&next(&total), Duration::from_secs(secs));
                if r.is_ok() {
                    total.fetch_add(1, Ordering::SeqCst);
                }
                report(format_args!("write {r:?}"));
            }
            "stream" => {
                let tmo: Option<u64> = (!rest.is_empty()).then(|| rest.parse().expect("stream MS"));
                let (mut timedout, mut errors, mut first_error) = (0u64, 0u64, None);
                while !stop.load(Ordering::SeqCst) {
                    let b = next(&total);
                    let r = match tmo {
                        Some(ms) => p.write_timeout(&b, Duration::from_millis(ms)),
                        None => p.write(&b),
                    };
                    match r {
                        Ok(_) => {
                            total.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(zcio::ring::WriteError::TimedOut) if tmo.is_some() => timedout += 1,
                        Err(e) if tmo.is_some() => {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                        Err(e) => {
                            first_error = Some(e);
                            break;
                        }
                    }
                }
                stop.store(false, Ordering::SeqCst);
                done.store(true, Ordering::SeqCst);
                report(format_args!(
                    "stopped total={} timedout={timedout} errors={errors} first_error={first_error:?}",
                    total.load(Ordering::SeqCst)
                ));
            }
            "close" => break,
            "fail" => {
                failed = Some(rest.parse().expect("fail CODE"));
                break;
            }
            other => panic!("writer: unknown command {other:?}"),
        }
    }
    done.store(true, Ordering::SeqCst);
    match failed {
        Some(code) => p.close_with_error(code),
        None => drop(p),
    }
    report("closed");
}
