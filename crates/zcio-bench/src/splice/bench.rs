//! The splice benchmark under the driver: prepares the files and the veth
//! link once, then measures job by job.

use std::path::{Path, PathBuf};

use super::files::{self, Place, WorkDir};
use super::netns::{self, Veth};
use super::{chain, copy, plan, plot, table, udp, Job, Options, Part, Row};
use crate::driver::{Bench, Target};

/// `zcio-bench splice` with its options and what it prepared.
pub struct SpliceBench {
    opts: Options,
    work: WorkDir,
    /// (a) the tmpfs directory, when the work dir's fs may share extents.
    tmpfs: Option<WorkDir>,
    copy_src: Option<PathBuf>,
    copy_src_tmpfs: Option<PathBuf>,
    stream_src: Option<PathBuf>,
    fs: String,
    veth: Option<Veth>,
    veth_note: Option<String>,
    tools: Vec<String>,
    load_at_start: String,
    /// How cp and zcio cp copy here (probed on a small file).
    movers: Vec<String>,
}

/// A sysctl's value (`?` if unreadable).
fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{name}"))
        .map_or_else(|_| "?".into(), |s| s.trim().to_owned())
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

impl SpliceBench {
    /// Check room, create and cache the files, set up the veth link.
    pub fn prepare(opts: Options) -> Result<Self, String> {
        let work = WorkDir::create(opts.dir.as_deref(), "work")?;
        let (fs, may_share) = files::fs_kind(&work.path);
        let mut need = 0;
        if opts.has(Part::Copy) || opts.has(Part::Avail) {
            need += 2 * opts.copy_size;
        }
        if opts.has(Part::Modules) {
            need += opts.stream_size + opts.stream_size / 2;
        }
        files::check_room(&work.path, need, "the splice benchmark's files")?;
        let mut b = SpliceBench {
            work,
            tmpfs: None,
            copy_src: None,
            copy_src_tmpfs: None,
            stream_src: None,
            fs,
            veth: None,
            veth_note: None,
            tools: Vec::new(),
            load_at_start: loadavg(),
            movers: Vec::new(),
            opts,
        };
        let o = &b.opts;
        if o.has(Part::Copy) || o.has(Part::Avail) {
            eprintln!(
                "preparing a page-cached {} file in {} ({}) …",
                crate::fmt::bytes_u64(o.copy_size),
                b.work.path.display(),
                b.fs
            );
            let p = b.work.join("copy-src.bin");
            files::create_cached(&p, o.copy_size, files::random_fill(0x5EED))?;
            b.copy_src = Some(p);
            b.tools.push(chain::version("cp"));
            if super::zcio_has(&o.zcio, "cp") {
                b.movers
                    .extend(copy::probe_movers(&b.work.path, &o.zcio, &[]));
            }
            if may_share {
                let shm = Path::new("/dev/shm");
                if files::fs_kind(shm).0.starts_with("tmpfs")
                    && files::free_bytes(shm).is_some_and(|f| f > 2 * o.copy_size + (1 << 30))
                {
                    let t = WorkDir::create(Some(shm), "tmpfs")?;
                    let p = t.join("copy-src.bin");
                    files::create_cached(&p, o.copy_size, files::random_fill(0x5EED))?;
                    b.copy_src_tmpfs = Some(p);
                    b.tmpfs = Some(t);
                }
            }
        }
        if o.has(Part::Modules) {
            eprintln!(
                "preparing a {} compressible stream …",
                crate::fmt::bytes_u64(o.stream_size)
            );
            let p = b.work.join("stream-src.log");
            files::create_cached(&p, o.stream_size, chain::text_fill(0xC0FFEE))?;
            b.stream_src = Some(p);
            b.tools.push(chain::version("zstd"));
            b.tools.push(chain::version("cksum"));
            if super::zcio_has(&o.zcio, "cp") {
                let m = copy::probe_movers(&b.work.path, &o.zcio, &["crc32c", "zstd:level=1"]);
                b.movers
                    .extend(m.into_iter().filter(|n| n.starts_with("zcio")));
            }
        }
        if o.has(Part::Udp) && o.veth {
            match netns::unavailable() {
                Some(why) => b.veth_note = Some(format!("skipped: veth link: {why}")),
                None => {
                    let stale = netns::remove_stale();
                    if stale > 0 {
                        eprintln!("removed {stale} network namespaces left by killed runs");
                    }
                    match Veth::create() {
                        Ok(v) => b.veth = Some(v),
                        Err(e) => {
                            b.veth_note = Some(format!("skipped: veth link: could not set up: {e}"))
                        }
                    }
                }
            }
            if let Some(n) = &b.veth_note {
                eprintln!("{n}");
            }
        }
        Ok(b)
    }

    fn src(&self, place: Place) -> Result<&Path, String> {
        match place {
            Place::Work => self.copy_src.as_deref(),
            Place::Tmpfs => self.copy_src_tmpfs.as_deref(),
        }
        .ok_or_else(|| "source file not prepared".into())
    }

    fn dir(&self, place: Place) -> &Path {
        match (place, &self.tmpfs) {
            (Place::Tmpfs, Some(t)) => &t.path,
            _ => &self.work.path,
        }
    }

    /// How the numbers were taken.
    fn notes_list(&self) -> Vec<String> {
        let o = &self.opts;
        let mut n = vec![format!(
            "every side is a separate process; CPU time is wait4's user + system time of the \
             measured process and the children it waited for; zcio binary: {}; load average \
             (1/5/15 min) at the start {}, now {}",
            o.zcio.display(),
            self.load_at_start,
            loadavg()
        )];
        if o.has(Part::Copy) || o.has(Part::Avail) {
            n.push(format!(
                "(a) {} of incompressible data, fsynced and read once before (page-cached, \
                 never dropped); work dir {} on {}{}; the destination is removed after each \
                 copy and checked first (size + 16 spread blocks); throughput = bytes ÷ the \
                 copier's wall time from spawn to exit; rw loop: read/write with a {} buffer; \
                 {} (GNU cp ≥ 9 copies with copy_file_range, reflink=auto)",
                crate::fmt::bytes_u64(o.copy_size),
                self.work.path.display(),
                self.fs,
                if self.tmpfs.is_some() {
                    "; this fs may share extents (reflink), so the copy is also measured on \
                     tmpfs (/dev/shm), where it cannot, and (b) and the targets use tmpfs"
                } else {
                    " (no reflink: copy_file_range copies the data in the kernel)"
                },
                crate::fmt::size(copy::RW_BUF),
                self.tools.first().map_or("cp", String::as_str),
            ));
        }
        if !self.movers.is_empty() {
            n.push(format!("movers: {}", self.movers.join("; ")));
        }
        if o.has(Part::Avail) {
            n.push(format!(
                "(b) neighbour: an integer loop counting iterations for {:.1} s, pinned to CPU \
                 {}; each copier is run again and again by a repeater pinned to the same CPU \
                 (starting 150 ms before the neighbour, stopping after it); copier GB/s = whole \
                 copies ÷ the repeater's time; `→link`: the copier sends the file over loopback \
                 TCP (rw loop: read/write 64 KiB; zcio cp: sendfile) to a sink on CPU {} that \
                 takes {:.1} GB/s (a token bucket, like a 10 GbE link), so the copier waits for \
                 the link as Fall's copies waited for their devices; copier CPU s is the \
                 repeater's and its copiers'",
                o.avail_time.as_secs_f64(),
                crate::affinity::cpu_for(0),
                crate::affinity::cpu_for(1),
                super::copy::LINK_RATE as f64 / 1e9
            ));
        }
        if o.has(Part::Modules) {
            n.push(format!(
                "(c) {} of generated web-server log lines; zcio: `zcio cp SRC DST --module \
                 crc32c --module zstd:level={lvl}`; user loop: read {} → crc32c crate → zstd \
                 crate streaming encoder level {lvl} → write; shell pipeline: `tee FIFO < SRC | \
                 zstd -1 -q -c > DST` with `cksum < FIFO` (CRC-32/POSIX: coreutils cksum has \
                 no CRC32C) under one sh; every output is decompressed and compared with the \
                 input; tools: {}",
                crate::fmt::bytes_u64(o.stream_size),
                crate::fmt::size(chain::BLOCK),
                self.tools[self.tools.len().saturating_sub(2)..].join("; "),
                lvl = chain::LEVEL,
            ));
        }
        if o.has(Part::Udp) {
            n.push(format!(
                "(d) generator (sendmmsg, paced batches), forwarder (`zcio gateway --plain` or \
                 `zcio gateway`) and sink (recvmmsg), three unpinned processes on {} CPUs; \
                 latency: {} pkt/s for {:.1} s, one packet per send, stamps from \
                 CLOCK_MONOTONIC; rate: doubling from {} pkt/s then bisection to 10%, at most \
                 {} trials of {:.2} s, loss-free = the sink got every packet (each trial's \
                 loss is in the JSON); a rate marked ≥ is a lower bound (no trial lost \
                 packets: the generator's limit, the highest rate or the trial bound ended \
                 the search; `generator_limited` in the JSON says which); CPU/pkt = the \
                 forwarder's CPU (its --stats-json) ÷ packets forwarded; both forwarders \
                 receive with {} (net.core.rmem_default {} B, rmem_max {} B), the generator \
                 sends with 4 MiB and the sink receives with 32 MiB (SO_*BUFFORCE as root); \
                 `direct` (loopback only) sends straight to the sink: the harness's own \
                 latency and the generator's ceiling",
                crate::affinity::allowed_cpus().len(),
                o.latency_rate,
                o.latency_time.as_secs_f64(),
                o.start_rate,
                o.max_trials,
                o.trial_time.as_secs_f64(),
                if o.gateway_rcvbuf > 0 {
                    format!("--rcvbuf {}", o.gateway_rcvbuf)
                } else {
                    "their default receive buffer".into()
                },
                sysctl("net/core/rmem_default"),
                sysctl("net/core/rmem_max"),
            ));
            match (&self.veth, &self.veth_note) {
                (Some(v), _) => n.push(format!(
                    "(d) veth: generator and sink in network namespace {} ({}), gateway in the \
                     root namespace ({}): generator → veth → gateway → veth → sink",
                    v.name(),
                    v.b.ip,
                    v.a.ip
                )),
                (None, Some(why)) => n.push(format!("(d) {why}")),
                (None, None) => {}
            }
        }
        n
    }
}

impl Bench for SpliceBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "splice"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        self.notes_list().swap_remove(0)
    }

    fn groups(&self) -> Vec<Vec<Job>> {
        plan(&self.opts, self.tmpfs.is_some(), self.veth.is_some())
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        job.label()
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        let o = &self.opts;
        let dir = &self.work.path;
        let row = match job {
            Job::Copy(c, place) => {
                copy::measure_copy(*c, *place, self.src(*place)?, self.dir(*place), o)
            }
            Job::Avail(c) => {
                // Where a copy cannot be an extent share (see `prepare`).
                let place = if self.tmpfs.is_some() {
                    Place::Tmpfs
                } else {
                    Place::Work
                };
                copy::measure_avail(*c, self.src(place)?, self.dir(place), o)
            }
            Job::AvailLink(c) => {
                let place = if self.tmpfs.is_some() {
                    Place::Tmpfs
                } else {
                    Place::Work
                };
                copy::measure_avail_link(*c, self.src(place)?, self.dir(place), o)
            }
            Job::Modules(v) => {
                let src = self.stream_src.as_deref().ok_or("stream not prepared")?;
                chain::measure(*v, src, dir, o)
            }
            Job::Latency(f, l, s) => udp::measure_latency(*f, *l, *s, o, self.veth.as_ref(), dir),
            Job::Rate(f, l, s) => udp::measure_rate(*f, *l, *s, o, self.veth.as_ref(), dir),
        }?;
        Ok(vec![row])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        Row::same_point(a, b)
    }

    fn rank(row: &Row) -> f64 {
        row.rank()
    }

    fn derive(&self, rows: &mut [Row]) {
        table::derive(rows);
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        table::targets(rows)
    }

    fn notes(&self) -> Vec<String> {
        self.notes_list()
    }

    fn tables(&self, rows: &[Row]) -> String {
        table::text(rows)
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        plot::svg(rows, path)
    }
}
