//! Socket paths for one measurement: fresh, in the temp dir, removed on drop.

use std::sync::atomic::{AtomicUsize, Ordering};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh socket path `zcio-FAMILY-PID-N-TAG.sock` in the temp dir,
/// removed on drop.
pub struct SockPath(pub String);

impl SockPath {
    /// A path for benchmark family `family`, labelled `tag`.
    pub fn new(family: &str, tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "zcio-{family}-{}-{}-{tag}.sock",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&p);
        SockPath(p.to_string_lossy().into_owned())
    }
}

impl Drop for SockPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
