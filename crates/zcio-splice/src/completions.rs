//! [`Completions`]: an [`Association`]'s asynchronous completions as a
//! future (with the `tokio` feature).

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;

use super::{Association, Completion, Remote};
use crate::tokio::doorbell::no_runtime;

/// The association's completion descriptor (an eventfd of this process,
/// readable while a completion waits), kept open by the `Remote`.
struct DoneFd(Remote);

impl AsRawFd for DoneFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// The completions of an association's increments started with
/// [`Association::start`], awaited in tokio's reactor (no thread waits).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use zcio::splice::{Association, Increment, IoObject};
/// use zcio::splice::Completions;
///
/// let dir = std::env::temp_dir();
/// let src = dir.join(format!("zcio-doc-comp-src-{}", std::process::id()));
/// let dst = dir.join(format!("zcio-doc-comp-dst-{}", std::process::id()));
/// std::fs::write(&src, vec![7u8; 100_000])?;
/// let mut a = Association::new(
///     IoObject::new(std::fs::File::open(&src)?.into(), "src")?,
///     IoObject::new(std::fs::File::create(&dst)?.into(), "dst")?,
/// )?;
/// let done = Completions::new(&a)?;
/// a.start(Increment::Infinite)?;
/// let c = done.next().await.expect("a completion");
/// assert_eq!((c.moved, c.eof), (100_000, true));
/// # std::fs::remove_file(&src)?; std::fs::remove_file(&dst)?;
/// # Ok(())
/// # }
/// ```
pub struct Completions {
    fd: AsyncFd<DoneFd>,
}

impl std::fmt::Debug for Completions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completions").finish_non_exhaustive()
    }
}

impl Completions {
    /// Await the completions of `assoc` (any number of these may exist).
    ///
    /// # Errors
    /// Outside a tokio runtime, or when the reactor refuses the descriptor.
    pub fn new(assoc: &Association) -> io::Result<Self> {
        if ::tokio::runtime::Handle::try_current().is_err() {
            return Err(no_runtime());
        }
        let done = DoneFd(assoc.remote());
        // The eventfd belongs to the association's shared state, which the
        // `Remote` inside keeps alive (and the descriptor open and
        // unchanged) for as long as the registration exists.
        // SAFETY: as argued just above.
        let fd = unsafe { AsyncFd::register_with_interest(done, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// The next completion; `None` once no increment is running or queued
    /// (and none is waiting), or when none came within
    /// [`Association::WAIT_BOUND`](crate::Association::WAIT_BOUND) (one hour; as
    /// [`Association::wait`] with that timeout: `status().active` tells the
    /// two apart). Cancel-safe: a completion is only taken when it is
    /// returned.
    pub async fn next(&self) -> Option<Completion> {
        self.next_timeout(crate::Association::WAIT_BOUND).await
    }

    /// [`Completions::next`], waiting at most `timeout` (`Duration::MAX`:
    /// without a bound).
    pub async fn next_timeout(&self, timeout: Duration) -> Option<Completion> {
        match ::tokio::time::Instant::now().checked_add(timeout) {
            Some(at) => ::tokio::time::timeout_at(at, self.next_unbounded())
                .await
                .unwrap_or(None),
            None => self.next_unbounded().await,
        }
    }

    async fn next_unbounded(&self) -> Option<Completion> {
        let remote = &self.fd.get_ref().0;
        loop {
            if let Some(c) = remote.wait(Duration::ZERO) {
                return Some(c);
            }
            if !remote.status().active {
                // Finished between the two looks: take it now.
                return remote.wait(Duration::ZERO);
            }
            let Ok(mut g) = self.fd.readable().await else {
                // The reactor is going away: fall back to a blocking look.
                return remote.wait(Duration::ZERO);
            };
            if let Some(c) = remote.wait(Duration::ZERO) {
                return Some(c);
            }
            // Nothing queued after all: wait for the next edge (one that
            // came since the readiness was reported is not cleared).
            g.clear_ready();
        }
    }

    /// [`Association::stop`] from here.
    pub fn stop(&self) {
        self.fd.get_ref().0.stop();
    }
}

// tokio's reactor (epoll, sockets) is outside what Miri models: `scripts/miri`
// leaves these out (the tokio feature reaches this crate there through the
// `zcio` dev-dependency of its doc examples).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use crate::{Increment, IoObject};

    #[test]
    fn each_started_increment_completes_once_then_none() {
        let dir = std::env::temp_dir();
        let src = dir.join(format!("zcio-comp-src-{}", std::process::id()));
        let dst = dir.join(format!("zcio-comp-dst-{}", std::process::id()));
        std::fs::write(&src, vec![3u8; 250_000]).unwrap();
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut a = Association::new(
                IoObject::new(std::fs::File::open(&src).unwrap().into(), "src").unwrap(),
                IoObject::new(std::fs::File::create(&dst).unwrap().into(), "dst").unwrap(),
            )
            .unwrap();
            let done = Completions::new(&a).unwrap();
            assert!(done.next().await.is_none(), "nothing started");
            let mut total = 0;
            for _ in 0..3 {
                a.start(Increment::Bytes(100_000)).unwrap();
                // A wait cancelled half-way (unless it was ready at once)
                // loses nothing: the completion comes with the next one.
                let c = match ::tokio::time::timeout(Duration::ZERO, done.next()).await {
                    Ok(c) => c,
                    Err(_) => ::tokio::time::timeout(Duration::from_secs(20), done.next())
                        .await
                        .expect("completes"),
                }
                .unwrap_or_else(|| panic!("a completion: {:?}", a.status()));
                assert!(c.error.is_none(), "{c:?}");
                total += c.moved;
            }
            assert_eq!(total, 250_000);
            assert!(done.next().await.is_none());
        });
        assert_eq!(std::fs::read(&dst).unwrap(), vec![3u8; 250_000]);
        let _ = std::fs::remove_file(&src);
        let _ = std::fs::remove_file(&dst);
    }
}
