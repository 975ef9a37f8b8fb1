//! The MCAP file `zcio record` writes (the `mcap` crate's writer).
//!
//! The file is written under a temporary name in the output's directory
//! (`.NAME.zcio-record.PID`) and renamed to its name only once the summary
//! and footer are written: an existing file is never truncated, and a
//! recording that failed leaves nothing behind. Without `--force` the
//! rename refuses to replace a file that appeared meanwhile
//! (`RENAME_NOREPLACE`).
//!
//! Layout: chunked (message indexes and a chunk index, so viewers such as
//! Foxglove seek without reading the whole file), uncompressed by default.
//! Chunks are written straight to the file (the writer seeks back to fill
//! in each chunk's header): memory holds one chunk's message index and the
//! summary, never the messages. A message's bytes go from the caller's
//! slice into the file (`write(2)` for blocks larger than the 64 KiB file
//! buffer), with the chunk's CRC computed on the way.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use mcap::records::MessageHeader;
use mcap::{Compression, WriteOptions, Writer};

/// The MCAP profile field: no well-known profile fits raw zcio blocks.
const PROFILE: &str = "";

/// Message encoding of every channel: the bytes as they travelled.
pub const MESSAGE_ENCODING: &str = "application/octet-stream";

/// Schema encoding of typed messages: the schema's data is the message's
/// 128-byte zcio type tag (`docs/typed-messages.md`), its name the type's.
pub const TAG_SCHEMA_ENCODING: &str = "zcio-typetag";

/// Length of a zcio type tag.
pub const TAG_LEN: usize = zcio::typed::Tag::LEN;

/// One MCAP channel: its id and next sequence number.
struct Chan {
    id: u16,
    seq: u32,
}

/// What identifies an MCAP channel: the topic (the source spec, or a
/// Zenoh sample's key), the type tag of its messages (none for untyped
/// ones) and their ring block tag (0 but for samples of a Zenoh key whose
/// exporter read tagged ring blocks).
pub type ChannelKey = (String, Option<[u8; TAG_LEN]>, u32);

/// An MCAP file being written.
pub struct McapOut {
    writer: Option<Writer<BufWriter<File>>>,
    tmp: PathBuf,
    dest: PathBuf,
    force: bool,
    channels: HashMap<ChannelKey, Chan>,
    /// Messages written.
    pub messages: u64,
    /// Payload bytes written.
    pub bytes: u64,
}

/// `--compression`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompressionArg {
    /// No compression (the default: the fastest, and what a tmpfs wants).
    None,
    /// Zstandard chunks.
    Zstd,
    /// LZ4 chunks.
    Lz4,
}

impl McapOut {
    /// Check that `dest` may be written (its directory exists; it does not
    /// exist unless `force`), before any source is opened.
    pub fn check_dest(dest: &Path, force: bool) -> Result<()> {
        let dir = parent(dest);
        if !dir.is_dir() {
            return Err(crate::usage(format!(
                "cannot write {}: directory {} does not exist",
                dest.display(),
                dir.display()
            )));
        }
        if dest.is_dir() {
            return Err(crate::usage(format!(
                "{} is a directory: give a file name with -o",
                dest.display()
            )));
        }
        if !force && dest.symlink_metadata().is_ok() {
            return Err(crate::usage(format!(
                "{} exists: choose another name with -o, or add --force to replace it",
                dest.display()
            )));
        }
        Ok(())
    }

    /// Start writing `dest` (under a temporary name until [`finish`](Self::finish)).
    pub fn create(
        dest: &Path,
        force: bool,
        compression: CompressionArg,
        chunk_size: u64,
    ) -> Result<Self> {
        Self::check_dest(dest, force)?;
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out.mcap".into());
        let tmp = parent(dest).join(format!(".{name}.zcio-record.{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        let compression = match compression {
            CompressionArg::None => None,
            CompressionArg::Zstd => Some(Compression::Zstd),
            CompressionArg::Lz4 => Some(Compression::Lz4),
        };
        let opts = WriteOptions::new()
            .profile(PROFILE)
            .library(format!("zcio record {}", env!("CARGO_PKG_VERSION")))
            .compression(compression)
            .chunk_size(Some(chunk_size))
            .use_chunks(true);
        let mut out = Self {
            writer: None,
            tmp,
            dest: dest.to_owned(),
            force,
            channels: HashMap::new(),
            messages: 0,
            bytes: 0,
        };
        let w = opts
            .create(BufWriter::with_capacity(64 << 10, file))
            .with_context(|| format!("cannot write {}", out.tmp.display()))?;
        out.writer = Some(w);
        Ok(out)
    }

    fn writer(&mut self) -> Result<&mut Writer<BufWriter<File>>> {
        match self.writer.as_mut() {
            Some(w) => Ok(w),
            None => bail!("the recording was already finished"),
        }
    }

    /// The MCAP channel for `key`, added (with its schema and `metadata`)
    /// on first use.
    pub fn channel(&mut self, key: &ChannelKey, metadata: &BTreeMap<String, String>) -> Result<()> {
        if self.channels.contains_key(key) {
            return Ok(());
        }
        let (topic, tag, _) = key;
        let w = self.writer()?;
        let schema = match tag {
            Some(t) => w.add_schema(&tag_name(t), TAG_SCHEMA_ENCODING, t)?,
            None => 0,
        };
        let id = w.add_channel(schema, topic, MESSAGE_ENCODING, metadata)?;
        self.channels.insert(key.clone(), Chan { id, seq: 0 });
        Ok(())
    }

    /// Write one message of channel `key` (added before with
    /// [`channel`](Self::channel)), received at `log_time` and published at
    /// `publish_time` (ns since the Unix epoch, CLOCK_REALTIME).
    pub fn write_at(
        &mut self,
        key: &ChannelKey,
        log_time: u64,
        publish_time: u64,
        data: &[u8],
    ) -> Result<()> {
        let Some(ch) = self.channels.get_mut(key) else {
            bail!("internal error: channel {:?} was not added", key.0);
        };
        let header = MessageHeader {
            channel_id: ch.id,
            sequence: ch.seq,
            log_time,
            publish_time,
        };
        ch.seq = ch.seq.wrapping_add(1);
        let tmp = self.tmp.display().to_string();
        self.writer()?
            .write_to_known_channel(&header, data)
            .with_context(|| format!("cannot write {tmp}"))?;
        self.messages += 1;
        self.bytes += data.len() as u64;
        Ok(())
    }

    /// Write the summary and footer, sync, and rename the file to its
    /// name.
    pub fn finish(mut self) -> Result<PathBuf> {
        let tmp = self.tmp.clone();
        let mut w = match self.writer.take() {
            Some(w) => w,
            None => bail!("the recording was already finished"),
        };
        w.finish()
            .with_context(|| format!("cannot finish {}", tmp.display()))?;
        let file = w
            .into_inner()
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        file.sync_all()
            .with_context(|| format!("cannot sync {}", tmp.display()))?;
        drop(file);
        let flags = if self.force {
            rustix::fs::RenameFlags::empty()
        } else {
            rustix::fs::RenameFlags::NOREPLACE
        };
        match rustix::fs::renameat_with(rustix::fs::CWD, &tmp, rustix::fs::CWD, &self.dest, flags)
        {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => bail!(
                "{} appeared while recording: not replaced (the recording is lost; use --force to replace)",
                self.dest.display()
            ),
            // Filesystems without RENAME_NOREPLACE: check, then rename.
            Err(rustix::io::Errno::INVAL) if !self.force && self.dest.symlink_metadata().is_err() => {
                std::fs::rename(&tmp, &self.dest)
                    .with_context(|| format!("cannot rename {} to {}", tmp.display(), self.dest.display()))?
            }
            Err(e) => {
                return Err(std::io::Error::from(e)).with_context(|| {
                    format!("cannot rename {} to {}", tmp.display(), self.dest.display())
                })
            }
        }
        Ok(self.dest.clone())
    }
}

impl Drop for McapOut {
    /// A recording not finished leaves nothing behind.
    fn drop(&mut self) {
        if let Some(w) = self.writer.take() {
            // Dropping the writer would write a summary: skip that work.
            drop(w.into_inner());
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn parent(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// The type tag at the start of a message, if it has one: a message of at
/// least 128 bytes starting with `ZCIOTYPE`.
pub fn tag_of(head: &[u8]) -> Option<[u8; TAG_LEN]> {
    let t: [u8; TAG_LEN] = head.get(..TAG_LEN)?.try_into().ok()?;
    (t[..8] == zcio::typed::Tag::MAGIC).then_some(t)
}

/// The type name a tag carries (its first 72 bytes for longer names),
/// with its schema version when not 0: `video.Frame` or `video.Frame@2`.
pub fn tag_name(t: &[u8; TAG_LEN]) -> String {
    let le32 = |o: usize| u32::from_le_bytes([t[o], t[o + 1], t[o + 2], t[o + 3]]);
    let len = (le32(48) as usize).min(72);
    let name = String::from_utf8_lossy(&t[56..56 + len]).into_owned();
    match le32(36) {
        0 => name,
        v => format!("{name}@{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_name_reads_the_name_and_schema() {
        let shape = zcio::typed::RuntimeShape {
            size: 8,
            align: 8,
            elem_size: None,
        };
        let t = zcio::typed::Tag::new("video.Frame", 2)
            .encode(shape)
            .unwrap();
        let tag = tag_of(&t).unwrap();
        assert_eq!(tag_name(&tag), "video.Frame@2");
        let t = zcio::typed::Tag::new("u64", 0).encode(shape).unwrap();
        assert_eq!(tag_name(&tag_of(&t).unwrap()), "u64");
        assert!(tag_of(&[0u8; 200]).is_none());
        assert!(tag_of(b"ZCIOTYPE").is_none());
    }
}
