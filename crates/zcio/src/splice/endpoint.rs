//! Endpoints of an association: what a descriptor is, and the attributes
//! that decide how data may flow from or to it (Fall, ch. 4: active
//! output, quenchable, synchronous read/write).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{fstat, FileType};
use rustix::net::{sockopt, SocketType};

use super::error::SpliceError;

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
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::File => "file",
            Self::Pipe => "pipe",
            Self::Stream => "stream socket",
            Self::Datagram => "datagram socket",
            Self::CharDevice => "character device",
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

/// One end of an association: an owned descriptor and what it is.
#[derive(Debug)]
pub struct Endpoint {
    fd: OwnedFd,
    kind: Kind,
    label: String,
    /// Bytes left in the file from the current offset (files only).
    file_len: Option<u64>,
}

impl Endpoint {
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
                        role: "endpoint",
                        what: label,
                        why: "a socket of a type zcio cannot move data through",
                    })
                }
            },
            FileType::Directory => {
                return Err(SpliceError::Unsuitable {
                    role: "endpoint",
                    what: label,
                    why: "a directory",
                })
            }
            _ => {
                return Err(SpliceError::Unsuitable {
                    role: "endpoint",
                    what: label,
                    why: "not a file, pipe, socket or character device",
                })
            }
        };
        let file_len = (kind == Kind::File).then_some(st.st_size.max(0) as u64);
        Ok(Self {
            fd,
            kind,
            label,
            file_len,
        })
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
            Kind::Datagram => Attrs {
                active: true,
                quenchable: false,
                synchronous: false,
            },
        }
    }

    /// Whether reading or writing may have to wait for a peer (so the
    /// mover polls it together with the stop signal first).
    pub(crate) fn may_block(&self) -> bool {
        self.kind != Kind::File
    }

    /// Give the descriptor back.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for Endpoint {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    #[test]
    fn classifies_files_pipes_sockets_and_refuses_directories() {
        let f: OwnedFd = tempfile_fd();
        assert_eq!(Endpoint::new(f, "f").unwrap().kind(), Kind::File);
        let (r, _w) = rustix::pipe::pipe().unwrap();
        assert_eq!(Endpoint::new(r, "p").unwrap().kind(), Kind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = Endpoint::new(OwnedFd::from(a), "s").unwrap();
        assert_eq!(e.kind(), Kind::Stream);
        assert!(!e.attrs().active);
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = Endpoint::new(OwnedFd::from(u), "u").unwrap();
        assert_eq!(e.kind(), Kind::Datagram);
        assert!(e.attrs().active && !e.attrs().quenchable);
        let d = std::fs::File::open(std::env::temp_dir()).unwrap();
        let err = Endpoint::new(OwnedFd::from(d), "tmp").unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
    }

    fn tempfile_fd() -> OwnedFd {
        let path = std::env::temp_dir().join(format!("zcio-ep-{}", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        OwnedFd::from(f)
    }
}
