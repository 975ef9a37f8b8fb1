//! The I/O objects of an association: what a descriptor (or zcio object) is,
//! and the attributes that decide how data may flow from or to it (Fall,
//! ch. 4: active output, quenchable, synchronous read/write).
//!
//! Besides descriptors, an I/O object may be a zcio ring (a file can feed a
//! ring's readers: the association reads straight into the ring's
//! reserved room) or a zcio channel (a socket can feed a channel whose
//! receiver gets zcio buffers: blocks go by reference).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{fstat, FileType};
use rustix::net::{sockopt, SocketType};

use super::error::SpliceError;
use crate::channel::Channel;
use crate::ring::{Consumer, Producer};

/// What kind of object a descriptor refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file: positioned, always ready, its size known.
    File,
    /// A pipe or FIFO.
    Pipe,
    /// A connected stream socket (TCP, Unix stream or seqpacket).
    Stream,
    /// A datagram socket (UDP, Unix datagram): boundaries are kept.
    Datagram,
    /// A character device (a terminal, `/dev/null`, …).
    CharDevice,
    /// A zcio ring: as a sink the association is its producer, as a
    /// source one of its consumers.
    Ring,
    /// A zcio channel: blocks are sent or received by reference.
    Channel,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::File => "file",
            Self::Pipe => "pipe",
            Self::Stream => "stream socket",
            Self::Datagram => "datagram socket",
            Self::CharDevice => "character device",
            Self::Ring => "zcio ring",
            Self::Channel => "zcio channel",
        })
    }
}

/// How an object behaves as a source (Fall's object attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    /// Produces data on its own schedule (a network peer, a ring): when
    /// the sink falls behind, data is dropped by policy (and counted)
    /// rather than held back. Passive sources (files) are read on demand,
    /// paced by the sink.
    pub active: bool,
    /// Can be told to slow down: not reading a TCP socket closes its
    /// window, a full pipe blocks its writer.
    pub quenchable: bool,
    /// Reads and writes complete synchronously (regular files).
    pub synchronous: bool,
}

/// What an I/O object holds.
#[derive(Debug)]
pub(crate) enum Object {
    /// A descriptor (files, pipes, sockets, devices).
    Fd(OwnedFd),
    /// The producer of a ring (sink).
    RingWriter(Box<Producer>),
    /// A consumer of a ring (source).
    RingReader(Box<Consumer>),
    /// One end of a channel (source or sink).
    Channel(Box<Channel>),
}

/// One end of an association: an owned descriptor or zcio object, and
/// what it is.
#[derive(Debug)]
pub struct IoObject {
    pub(crate) obj: Object,
    kind: Kind,
    label: String,
    /// Bytes left in the file from the current offset (files only).
    file_len: Option<u64>,
    /// The file's identity (device, inode), files only: an association
    /// refuses a source and sink that are the same file.
    file_id: Option<(u64, u64)>,
    /// A sink opened by path: truncated only once the association has
    /// checked it is not the source ([`IoObject::truncate_on_start`]).
    truncate: bool,
}

impl IoObject {
    /// Classify `fd` (taken over; closed when the association is). `label`
    /// names it in errors and status (a path, `tcp:host:port`, `-`).
    pub fn new(fd: OwnedFd, label: impl Into<String>) -> Result<Self, SpliceError> {
        let label = label.into();
        let st = fstat(&fd).map_err(|errno| SpliceError::Setup { op: "fstat", errno })?;
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Fifo => Kind::Pipe,
            FileType::CharacterDevice => Kind::CharDevice,
            FileType::Socket => match sockopt::socket_type(&fd) {
                Ok(SocketType::STREAM) | Ok(SocketType::SEQPACKET) => Kind::Stream,
                Ok(SocketType::DGRAM) => Kind::Datagram,
                _ => {
                    return Err(SpliceError::Unsuitable {
                        role: "source or sink",
                        what: label,
                        why: "a socket of a type zcio cannot move data through",
                    })
                }
            },
            FileType::Directory => {
                return Err(SpliceError::Unsuitable {
                    role: "source or sink",
                    what: label,
                    why: "a directory: name a file (a destination directory works with a source file, which is copied into it under its own name)",
                })
            }
            _ => {
                return Err(SpliceError::Unsuitable {
                    role: "source or sink",
                    what: label,
                    why: "not a file, pipe, socket or character device",
                })
            }
        };
        let (file_len, file_id) = if kind == Kind::File {
            // What is left from the descriptor's offset (an inherited
            // descriptor may have been read from already).
            let at = rustix::fs::seek(&fd, rustix::fs::SeekFrom::Current(0)).unwrap_or(0);
            let size = st.st_size.max(0) as u64;
            (
                Some(size.saturating_sub(at)),
                Some((st.st_dev as u64, st.st_ino as u64)),
            )
        } else {
            (None, None)
        };
        Ok(Self {
            obj: Object::Fd(fd),
            kind,
            label,
            file_len,
            file_id,
            truncate: false,
        })
    }

    /// A ring as a sink: the association writes blocks into it (as its
    /// producer); each block read from the source becomes one ring block.
    pub fn ring_writer(p: Producer, label: impl Into<String>) -> Self {
        Self::zcio(Object::RingWriter(Box::new(p)), Kind::Ring, label)
    }

    /// A ring as a source: the association reads it as one of its
    /// consumers until the producer closes it.
    pub fn ring_reader(c: Consumer, label: impl Into<String>) -> Self {
        Self::zcio(Object::RingReader(Box::new(c)), Kind::Ring, label)
    }

    /// A channel end, as a source (its messages are written to the sink)
    /// or a sink (each block is sent as one message of the association's
    /// pool buffers, by reference).
    pub fn channel(ch: Channel, label: impl Into<String>) -> Self {
        Self::zcio(Object::Channel(Box::new(ch)), Kind::Channel, label)
    }

    fn zcio(obj: Object, kind: Kind, label: impl Into<String>) -> Self {
        Self {
            obj,
            kind,
            label: label.into(),
            file_len: None,
            file_id: None,
            truncate: false,
        }
    }

    /// As a sink, truncate the file to zero length when an association is
    /// made with it, after the association has checked that the source is
    /// not the same file (how `zcio cp` opens a destination path: nothing
    /// is destroyed before the checks). Files only; a no-op otherwise.
    pub fn truncate_on_start(mut self) -> Self {
        self.truncate = self.kind == Kind::File;
        self
    }

    /// The file's identity, (device, inode), for files.
    pub fn file_id(&self) -> Option<(u64, u64)> {
        self.file_id
    }

    /// Truncate a sink made with [`IoObject::truncate_on_start`] (once).
    pub(crate) fn apply_truncate(&mut self) -> Result<(), SpliceError> {
        if !std::mem::take(&mut self.truncate) {
            return Ok(());
        }
        if let Object::Fd(fd) = &self.obj {
            rustix::fs::ftruncate(fd, 0).map_err(|errno| SpliceError::Setup {
                op: "truncate the destination",
                errno,
            })?;
        }
        Ok(())
    }

    /// The descriptor, for descriptor I/O objects.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.obj {
            Object::Fd(fd) => Some(fd.as_fd()),
            _ => None,
        }
    }

    /// What the descriptor is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The file's size when it was classified (files only): for progress.
    pub fn size(&self) -> Option<u64> {
        self.file_len
    }

    /// The label given at creation.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The object's attributes as a source.
    pub fn attrs(&self) -> Attrs {
        match self.kind {
            Kind::File => Attrs {
                active: false,
                quenchable: true,
                synchronous: true,
            },
            Kind::Pipe | Kind::Stream | Kind::CharDevice => Attrs {
                active: false,
                quenchable: true,
                synchronous: false,
            },
            // A ring's producer never waits for its readers.
            Kind::Datagram | Kind::Ring => Attrs {
                active: true,
                quenchable: false,
                synchronous: false,
            },
            // A channel's sender waits while the receiver is behind.
            Kind::Channel => Attrs {
                active: false,
                quenchable: true,
                synchronous: false,
            },
        }
    }

    /// The descriptor to poll (with the stop signal) before reading, for
    /// descriptors that may have to wait for a peer. zcio sources wait
    /// with a bounded timeout of their own instead.
    pub(crate) fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.obj {
            Object::Fd(fd) if self.kind != Kind::File => Some(fd.as_fd()),
            _ => None,
        }
    }

    /// Give the descriptor back (`None` for a zcio I/O object, which is
    /// closed).
    pub fn into_fd(self) -> Option<OwnedFd> {
        match self.obj {
            Object::Fd(fd) => Some(fd),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    #[test]
    #[cfg_attr(miri, ignore = "files, pipes, sockets: not modelled by Miri")]
    fn classifies_files_pipes_sockets_and_refuses_directories() {
        let f: OwnedFd = tempfile_fd();
        assert_eq!(IoObject::new(f, "f").unwrap().kind(), Kind::File);
        let (r, _w) = rustix::pipe::pipe().unwrap();
        assert_eq!(IoObject::new(r, "p").unwrap().kind(), Kind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = IoObject::new(OwnedFd::from(a), "s").unwrap();
        assert_eq!(e.kind(), Kind::Stream);
        assert!(!e.attrs().active);
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = IoObject::new(OwnedFd::from(u), "u").unwrap();
        assert_eq!(e.kind(), Kind::Datagram);
        assert!(e.attrs().active && !e.attrs().quenchable);
        let d = std::fs::File::open(std::env::temp_dir()).unwrap();
        let err = IoObject::new(OwnedFd::from(d), "tmp").unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
    }

    fn tempfile_fd() -> OwnedFd {
        let path = std::env::temp_dir().join(format!("zcio-ep-{}", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        OwnedFd::from(f)
    }
}
