//! I/O objects named by strings, "specs" (`zcio cp SRC DST`, the C and Python
//! frontends), and [`cp`]: open both, stack modules, move everything.
//!
//! | spec | as a source | as a sink |
//! |---|---|---|
//! | `PATH` | the file, read from its start | the file, created or truncated (once the association has checked it is not the source); an existing directory: the source file's name in it |
//! | `-` | standard input | standard output |
//! | `fd:N` | a duplicate of inherited descriptor N | same |
//! | `tcp:HOST:PORT` | connect, read until the peer closes | connect, write |
//! | `tcp-listen:HOST:PORT` | accept one connection, read it | accept one, write |
//! | `udp:HOST:PORT` | bind there, take datagrams | send datagrams there |
//! | `unix:PATH` | connect to a stream socket | same |
//! | `ring:NAME` | join ring NAME as a consumer (it must exist) | produce into ring NAME (created with default options if missing) |

use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};

use super::association::{Association, Increment, Status};
use super::error::SpliceError;
use super::io_object::IoObject;
use super::module::Registry;
use super::mover::module_error;
use crate::ring::{self, Consumer, Producer};

/// Which end a spec names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Data flows from it.
    Source,
    /// Data flows into it.
    Sink,
}

fn bad(spec: &str, reason: impl Into<String>) -> SpliceError {
    SpliceError::Spec {
        spec: spec.to_owned(),
        reason: reason.into(),
        errno: None,
    }
}

fn os(spec: &str, what: &str, e: std::io::Error) -> SpliceError {
    SpliceError::Spec {
        spec: spec.to_owned(),
        reason: format!("{what}: {e}"),
        errno: crate::Errno::from_io_error(&e),
    }
}

/// An I/O object named by a string (a spec), parsed:
/// nothing is opened, connected or resolved yet ([`Spec::open`] does).
/// Its `Display` is the spec again (`fd:N` with N in decimal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `-`: standard input as a source, standard output as a sink.
    Std,
    /// `fd:N`: a duplicate of inherited descriptor N (not negative).
    Fd(i32),
    /// `tcp:HOST:PORT`: connect.
    Tcp(String),
    /// `tcp-listen:HOST:PORT`: accept one connection.
    TcpListen(String),
    /// `udp:HOST:PORT`: bind there (source) or send there (sink).
    Udp(String),
    /// `unix:PATH`: connect to a stream socket.
    Unix(String),
    /// `ring:NAME`: a named ring.
    Ring(String),
    /// Anything else (not empty): a file.
    Path(String),
}

impl Spec {
    /// Whether `spec` names a file system path (no `-`, `fd:`, `tcp:`, … prefix).
    pub fn is_path(spec: &str) -> bool {
        is_path(spec)
    }

    /// The sink spec `cp` uses for `dst`: when `dst` is an existing directory
    /// and `src` a path, the source's file name inside it (as `cp FILE DIR`
    /// does); otherwise `dst` unchanged.
    pub fn sink_for(src: &str, dst: &str) -> std::borrow::Cow<'static, str> {
        sink_for(src, dst)
    }

    /// Parse `spec`; the one parser of specs ([`IoObject::open`]
    /// opens what it returns).
    pub fn parse(spec: &str) -> Result<Self, SpliceError> {
        Ok(if spec == "-" {
            Self::Std
        } else if let Some(n) = spec.strip_prefix("fd:") {
            let n: i32 = n
                .parse()
                .map_err(|_| bad(spec, "expected fd:N with N a descriptor number"))?;
            if n < 0 {
                return Err(bad(spec, "a descriptor number is not negative"));
            }
            Self::Fd(n)
        } else if let Some(addr) = spec.strip_prefix("tcp:") {
            Self::Tcp(addr.to_owned())
        } else if let Some(addr) = spec.strip_prefix("tcp-listen:") {
            Self::TcpListen(addr.to_owned())
        } else if let Some(addr) = spec.strip_prefix("udp:") {
            Self::Udp(addr.to_owned())
        } else if let Some(path) = spec.strip_prefix("unix:") {
            Self::Unix(path.to_owned())
        } else if let Some(name) = spec.strip_prefix("ring:") {
            Self::Ring(name.to_owned())
        } else if spec.is_empty() {
            return Err(bad(
                spec,
                "empty: name a file, -, or a tcp:, udp: or ring: spec",
            ));
        } else {
            Self::Path(spec.to_owned())
        })
    }

    /// Open it as `role` (errors name the spec as its `Display`
    /// writes it).
    pub fn open(&self, role: Role) -> Result<IoObject, SpliceError> {
        self.open_as(&self.to_string(), role)
    }

    /// Open it as `role`; `spec` names it in errors and in the object.
    fn open_as(&self, spec: &str, role: Role) -> Result<IoObject, SpliceError> {
        let fd: OwnedFd = match self {
            Self::Std => {
                let std = match role {
                    Role::Source => std::io::stdin().as_fd().try_clone_to_owned(),
                    Role::Sink => std::io::stdout().as_fd().try_clone_to_owned(),
                };
                std.map_err(|e| os(spec, "duplicate the standard stream", e))?
            }
            Self::Fd(n) => {
                // SAFETY: borrowed only for the duration of the duplication;
                // an fd that is not open makes the fcntl fail with EBADF,
                // reported. `parse` checked it is not negative.
                let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(*n) };
                b.try_clone_to_owned()
                    .map_err(|e| os(spec, "duplicate the descriptor", e))?
            }
            Self::Tcp(addr) => TcpStream::connect(addr)
                .map_err(|e| os(spec, "connect", e))?
                .into(),
            Self::TcpListen(addr) => {
                let l = TcpListener::bind(addr).map_err(|e| os(spec, "listen", e))?;
                l.accept().map_err(|e| os(spec, "accept", e))?.0.into()
            }
            Self::Udp(addr) => match role {
                Role::Source => UdpSocket::bind(addr).map_err(|e| os(spec, "bind", e))?,
                Role::Sink => {
                    let to = addr
                        .to_socket_addrs()
                        .map_err(|e| os(spec, "resolve", e))?
                        .next()
                        .ok_or_else(|| bad(spec, "the name resolves to no address"))?;
                    let any = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
                    let s = UdpSocket::bind(any).map_err(|e| os(spec, "bind", e))?;
                    s.connect(to).map_err(|e| os(spec, "connect", e))?;
                    s
                }
            }
            .into(),
            Self::Unix(path) => std::os::unix::net::UnixStream::connect(path)
                .map_err(|e| os(spec, "connect", e))?
                .into(),
            Self::Ring(name) => return open_ring(spec, name, role),
            Self::Path(path) => {
                let f = match role {
                    Role::Source => std::fs::File::open(path),
                    // Not truncated here: the association truncates it once
                    // it knows the destination is not the source.
                    Role::Sink => std::fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(path),
                };
                let ep = IoObject::new(f.map_err(|e| os(spec, "open", e))?.into(), spec)?;
                return Ok(match role {
                    Role::Source => ep,
                    Role::Sink => ep.truncate_on_start(),
                });
            }
        };
        IoObject::new(fd, spec)
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Std => f.write_str("-"),
            Self::Fd(n) => write!(f, "fd:{n}"),
            Self::Tcp(a) => write!(f, "tcp:{a}"),
            Self::TcpListen(a) => write!(f, "tcp-listen:{a}"),
            Self::Udp(a) => write!(f, "udp:{a}"),
            Self::Unix(p) => write!(f, "unix:{p}"),
            Self::Ring(n) => write!(f, "ring:{n}"),
            Self::Path(p) => f.write_str(p),
        }
    }
}

/// Open the I/O object `spec` names (see the [module docs](self)):
/// [`Spec::parse`], then open it.
pub(crate) fn open_spec(spec: &str, role: Role) -> Result<IoObject, SpliceError> {
    Spec::parse(spec)?.open_as(spec, role)
}

/// Whether `spec` names a file system path (no `-`, `fd:`, `tcp:`, … prefix).
pub(crate) fn is_path(spec: &str) -> bool {
    const PREFIXES: [&str; 6] = ["fd:", "tcp:", "tcp-listen:", "udp:", "unix:", "ring:"];
    !spec.is_empty() && spec != "-" && !PREFIXES.iter().any(|p| spec.starts_with(p))
}

/// The sink spec `cp` uses for `dst`: when `dst` is an existing directory
/// and `src` a path, the source's file name inside it (as `cp FILE DIR`
/// does); otherwise `dst` unchanged.
pub(crate) fn sink_for(src: &str, dst: &str) -> std::borrow::Cow<'static, str> {
    let into_dir = is_path(src) && is_path(dst) && std::path::Path::new(dst).is_dir();
    match std::path::Path::new(src).file_name() {
        Some(name) if into_dir => std::path::Path::new(dst)
            .join(name)
            .to_string_lossy()
            .into_owned()
            .into(),
        _ => dst.to_owned().into(),
    }
}

/// Open the source `src`, then the sink for it (see [`sink_for`]): the
/// pair `cp` and the frontends associate.
pub(crate) fn open_pair(src: &str, dst: &str) -> Result<(IoObject, IoObject), SpliceError> {
    let source = open_spec(src, Role::Source)?;
    let sink = open_spec(&sink_for(src, dst), Role::Sink)?;
    Ok((source, sink))
}

fn open_ring(spec: &str, name: &str, role: Role) -> Result<IoObject, SpliceError> {
    let err = |e: ring::OpenError| bad(spec, e.to_string());
    Ok(match role {
        Role::Source => IoObject::ring_reader(Consumer::open(name).map_err(err)?, spec),
        Role::Sink => {
            let map = ring::Options::new().create_or_open(name).map_err(err)?;
            IoObject::ring_writer(Producer::attach(map).map_err(err)?, spec)
        }
    })
}

/// Copy `src` to `dst` (specs as [`Spec`] parses them) through the
/// built-in modules `modules` (`"zstd:level=3"`, …), until the source
/// ends; the final status (bytes, mover). The CLI's `zcio cp` adds a
/// progress bar on top of the same steps.
///
/// Refuses a destination that is the source by any path
/// ([`SpliceError::SameFile`], the file untouched); copies into a
/// destination directory under the source's name; fails with
/// [`SpliceError::Short`] if a file source ends before all its bytes moved.
pub fn cp(src: &str, dst: &str, modules: &[&str]) -> Result<Status, SpliceError> {
    // Modules first: a bad name fails before any I/O object is opened.
    let reg = Registry::builtin();
    let stack = modules
        .iter()
        .map(|m| reg.open(m).map_err(module_error))
        .collect::<Result<Vec<_>, _>>()?;
    let (source, sink) = open_pair(src, dst)?;
    let mut a = Association::new(source, sink)?;
    for m in stack {
        a.push(m)?;
    }
    let c = a.run(Increment::Infinite)?;
    if let Some(e) = c.error {
        return Err(e);
    }
    Ok(a.close())
}

impl IoObject {
    /// Open the I/O object `spec` names (a path, `-`, `fd:N`, `tcp:`,
    /// `tcp-listen:`, `udp:`, `unix:`, `ring:`; see [`Spec`]) as `role`:
    /// [`Spec::parse`], then open it.
    pub fn open(spec: &str, role: Role) -> Result<IoObject, SpliceError> {
        open_spec(spec, role)
    }

    /// Open the source `src`, then the sink for it ([`Spec::sink_for`]): the
    /// pair `cp` and the frontends associate.
    pub fn open_pair(src: &str, dst: &str) -> Result<(IoObject, IoObject), SpliceError> {
        open_pair(src, dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for (text, spec) in [
            ("-", Spec::Std),
            ("fd:3", Spec::Fd(3)),
            ("tcp:127.0.0.1:9", Spec::Tcp("127.0.0.1:9".into())),
            ("tcp-listen:[::1]:0", Spec::TcpListen("[::1]:0".into())),
            ("udp:localhost:53", Spec::Udp("localhost:53".into())),
            ("unix:/run/x.sock", Spec::Unix("/run/x.sock".into())),
            ("ring:frames", Spec::Ring("frames".into())),
            ("dir/file.bin", Spec::Path("dir/file.bin".into())),
        ] {
            assert_eq!(Spec::parse(text).unwrap(), spec, "{text}");
            assert_eq!(spec.to_string(), text);
            assert_eq!(is_path(text), matches!(spec, Spec::Path(_)));
        }
        assert_eq!(Spec::parse("fd:+7").unwrap().to_string(), "fd:7");
        for bad in ["", "fd:", "fd:x", "fd:-1", "fd:99999999999"] {
            assert!(Spec::parse(bad).is_err(), "{bad:?}");
        }
    }
}
