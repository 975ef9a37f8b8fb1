//! Endpoints named by strings (`zcio cp SRC DST`, the C and Python
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

/// Open the endpoint `spec` names (see the [module docs](self)).
pub fn open_spec(spec: &str, role: Role) -> Result<IoObject, SpliceError> {
    let fd: OwnedFd = if spec == "-" {
        let std = match role {
            Role::Source => std::io::stdin().as_fd().try_clone_to_owned(),
            Role::Sink => std::io::stdout().as_fd().try_clone_to_owned(),
        };
        std.map_err(|e| os(spec, "duplicate the standard stream", e))?
    } else if let Some(n) = spec.strip_prefix("fd:") {
        let n: i32 = n
            .parse()
            .map_err(|_| bad(spec, "expected fd:N with N a descriptor number"))?;
        if n < 0 {
            return Err(bad(spec, "a descriptor number is not negative"));
        }
        // SAFETY: borrowed only for the duration of the duplication; an fd
        // that is not open makes the fcntl fail with EBADF, reported.
        let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
        b.try_clone_to_owned()
            .map_err(|e| os(spec, "duplicate the descriptor", e))?
    } else if let Some(addr) = spec.strip_prefix("tcp:") {
        TcpStream::connect(addr)
            .map_err(|e| os(spec, "connect", e))?
            .into()
    } else if let Some(addr) = spec.strip_prefix("tcp-listen:") {
        let l = TcpListener::bind(addr).map_err(|e| os(spec, "listen", e))?;
        l.accept().map_err(|e| os(spec, "accept", e))?.0.into()
    } else if let Some(addr) = spec.strip_prefix("udp:") {
        match role {
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
        .into()
    } else if let Some(path) = spec.strip_prefix("unix:") {
        std::os::unix::net::UnixStream::connect(path)
            .map_err(|e| os(spec, "connect", e))?
            .into()
    } else if let Some(name) = spec.strip_prefix("ring:") {
        return open_ring(spec, name, role);
    } else {
        if spec.is_empty() {
            return Err(bad(
                spec,
                "empty: name a file, -, or a tcp:/udp:/ring: endpoint",
            ));
        }
        let f = match role {
            Role::Source => std::fs::File::open(spec),
            // Not truncated here: the association truncates it once it
            // knows the destination is not the source.
            Role::Sink => std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(spec),
        };
        let ep = IoObject::new(f.map_err(|e| os(spec, "open", e))?.into(), spec)?;
        return Ok(match role {
            Role::Source => ep,
            Role::Sink => ep.truncate_on_start(),
        });
    };
    IoObject::new(fd, spec)
}

/// Whether `spec` names a file system path (no `-`, `fd:`, `tcp:`, … prefix).
pub fn is_path(spec: &str) -> bool {
    const PREFIXES: [&str; 6] = ["fd:", "tcp:", "tcp-listen:", "udp:", "unix:", "ring:"];
    !spec.is_empty() && spec != "-" && !PREFIXES.iter().any(|p| spec.starts_with(p))
}

/// The sink spec `cp` uses for `dst`: when `dst` is an existing directory
/// and `src` a path, the source's file name inside it (as `cp FILE DIR`
/// does); otherwise `dst` unchanged.
pub fn sink_for(src: &str, dst: &str) -> std::borrow::Cow<'static, str> {
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
pub fn open_pair(src: &str, dst: &str) -> Result<(IoObject, IoObject), SpliceError> {
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

/// Copy `src` to `dst` (specs as in the [module docs](self)) through the
/// built-in modules `modules` (`"zstd:level=3"`, …), until the source
/// ends; the final status (bytes, mover). The CLI's `zcio cp` adds a
/// progress bar on top of the same steps.
///
/// Refuses a destination that is the source by any path
/// ([`SpliceError::SameFile`], the file untouched); copies into a
/// destination directory under the source's name; fails with
/// [`SpliceError::Short`] if a file source ends before all its bytes moved.
pub fn cp(src: &str, dst: &str, modules: &[&str]) -> Result<Status, SpliceError> {
    // Modules first: a bad name fails before any endpoint is opened.
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
