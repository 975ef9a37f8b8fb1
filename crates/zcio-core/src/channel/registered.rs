//! Channel objects in the registry of live objects (`zcio_sys::registry`):
//! a listener and each connected end register at creation, named by their
//! socket path, with the socket file's mode. Only creation and close touch
//! the registry; a registration that fails is counted
//! (`zcio_sys::registry::failures`) and the channel works without it.
//! In-process pairs ([`super::Channel::pair`]) have no path and do not
//! register. An end's entry is its live statistics page (the core owns
//! it): it goes when the core does, or at close when nothing lingers.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use zcio_sys::registry::schema::{channel, lane};
use zcio_sys::registry::{register_quietly, Kind, Registration, StatsPage};

/// The permission bits of the socket file at `path` (0600 if it cannot
/// be read).
fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o777)
}

/// Register a listener bound at `path`.
pub(super) fn listener(path: &Path) -> Option<Registration> {
    register_quietly(Kind::Listener, &path.to_string_lossy(), mode_of(path), &[])
}

/// A connected end's statistics page, and the name and mode its lanes
/// register under (the end's own; `None`: not registered).
pub(crate) struct EndPage {
    pub page: StatsPage,
    pub name: Option<(Box<str>, u32)>,
}

/// The statistics page of a connected end over the socket at `path`
/// (registered; `None`: an in-process pair, a local page), starting with
/// the peer's pid and the connection id (`connection`: the inode of the
/// segment memfd, which both ends see alike).
pub(super) fn end(path: Option<&Path>, peer_pid: i32, connection: u64) -> EndPage {
    let start = [
        (channel::PEER_PID, u64::try_from(peer_pid).unwrap_or(0)),
        (channel::CONNECTION, connection),
    ];
    let name = path.map(|p| (p.to_string_lossy().into(), mode_of(p)));
    page(Kind::Channel, name, &start)
}

/// The statistics page of a lane end on a channel end registered as
/// `name` (`None`: a local page), starting with the peer's pid and the
/// lane's connection id (the inode of the lane segment's memfd).
pub(crate) fn lane(name: Option<&(Box<str>, u32)>, peer_pid: i32, connection: u64) -> StatsPage {
    let start = [
        (lane::PEER_PID, u64::try_from(peer_pid).unwrap_or(0)),
        (lane::CONNECTION, connection),
    ];
    page(Kind::Lane, name.cloned(), &start).page
}

fn page(kind: Kind, name: Option<(Box<str>, u32)>, start: &[(usize, u64)]) -> EndPage {
    let page = match &name {
        Some((n, mode)) => StatsPage::register(kind, n, *mode, start),
        None => {
            let page = StatsPage::local();
            for &(i, v) in start {
                page.set(i, v);
            }
            page
        }
    };
    EndPage { page, name }
}

#[cfg(test)]
mod tests {
    use zcio_sys::registry::{Entry, RunDir, State};

    use super::super::{Channel, ChannelConfig, Listener};
    use super::*;

    /// Our entries named `name` in the default run directory.
    fn ours(name: &str) -> Vec<Entry> {
        let Ok(dir) = RunDir::open_default() else {
            return Vec::new();
        };
        let mut v: Vec<Entry> = dir
            .list()
            .unwrap()
            .entries
            .into_iter()
            .filter(|e| e.name == name && e.pid == std::process::id())
            .collect();
        v.sort_by_key(|e| e.kind);
        v
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn listener_and_ends_register_while_they_live() {
        if RunDir::open_default().is_err() {
            eprintln!("skipped: no usable run directory");
            return;
        }
        let path = std::env::temp_dir().join(format!("zcio-unit-reg-{}.sock", std::process::id()));
        let name = path.to_string_lossy().into_owned();
        let l = Listener::bind(&path, ChannelConfig::default()).unwrap();
        let kinds = |v: Vec<Entry>| -> Vec<(Kind, State)> {
            v.into_iter().map(|e| (e.kind, e.state)).collect()
        };
        assert_eq!(kinds(ours(&name)), [(Kind::Listener, State::Live)]);
        let p2 = path.clone();
        let t = std::thread::spawn(move || Channel::connect(&p2, ChannelConfig::default()));
        let a = l.accept().unwrap();
        let b = t.join().unwrap().unwrap();
        let e = ours(&name);
        assert_eq!(
            kinds(e.clone()),
            [
                (Kind::Listener, State::Live),
                (Kind::Channel, State::Live),
                (Kind::Channel, State::Live)
            ]
        );
        assert_eq!(e[1].mode, mode_of(&path) & 0o444);
        assert_eq!(
            e[1].stats[zcio_sys::registry::schema::channel::SENT_MESSAGES],
            0
        );
        drop((a, b));
        assert_eq!(kinds(ours(&name)), [(Kind::Listener, State::Live)]);
        drop(l);
        assert!(ours(&name).is_empty(), "entries go with their objects");
        let _ = std::fs::remove_file(&path);
    }
}
