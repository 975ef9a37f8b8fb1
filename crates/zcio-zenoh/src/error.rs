//! What can go wrong in a bridge, in the words of the other transports.

use std::time::Duration;

use zcio::ErrorKind;

/// A bridge could not start, or its stream did not end cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BridgeError {
    /// A key expression that cannot be used (the text says why).
    #[error("invalid key expression {key:?}: {why}")]
    KeyExpr {
        /// What was given.
        key: String,
        /// Why it cannot be used.
        why: String,
    },
    /// A bad Zenoh configuration (file, endpoint, value).
    #[error(
        "zenoh configuration: {0}; check the endpoint syntax (tcp/HOST:PORT) and the file (JSON5)"
    )]
    Config(String),
    /// A source or sink named wrongly (`ring:NAME`, `listen:PATH`, `connect:PATH`).
    #[error("{0}")]
    Spec(String),
    /// Zenoh failed at run time (opening the session, declaring, publishing).
    #[error("zenoh: {0}")]
    Zenoh(String),
    /// The local ring could not be opened or created.
    // The message includes the cause's, so the cause is not also its
    // `source()`: a report of the chain (`{:#}`) would print it twice.
    #[error("ring: {0}")]
    Ring(zcio::ring::OpenError),
    /// The local channel could not be set up.
    #[error("channel: {0}")]
    Connect(zcio::ConnectError),
    /// The local ring or channel failed while the bridge used it.
    #[error("local {what}: {why}")]
    Local {
        /// Which end.
        what: &'static str,
        /// What failed.
        why: String,
    },
    /// The producer of the stream died without closing it.
    #[error("disconnected: the producer (pid {pid}) died without closing the stream")]
    ProducerDied {
        /// Its pid (on the exporting host).
        pid: u32,
    },
    /// The producer closed the stream with an error code.
    #[error("the producer closed the stream with error code {code}")]
    ProducerFailed {
        /// Its code.
        code: u32,
    },
    /// The exporting bridge vanished: its liveliness token is gone and
    /// nothing arrived for the grace period.
    #[error("disconnected: the exporting bridge of stream {stream:016x} is gone (no liveliness token, no sample for {grace:?}); the stream is incomplete")]
    ExporterLost {
        /// The stream.
        stream: u64,
        /// The grace period waited.
        grace: Duration,
    },
    /// Stopped (SIGINT, SIGTERM or the caller) before the stream ended.
    #[error("stopped before the end of the stream")]
    Stopped,
    /// No Zenoh peer or router was reached in time
    /// ([`ImportOptions::connect_timeout`](crate::ImportOptions::connect_timeout)).
    #[error("no Zenoh peer reached within {after:?}: nothing answered at the endpoints to connect to (is the other bridge running, and is the address and port right?); the stream never began")]
    Unreachable {
        /// How long it waited.
        after: Duration,
    },
}

impl BridgeError {
    /// The error's kind in zcio's vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::KeyExpr { .. } | Self::Config(_) | Self::Spec(_) => ErrorKind::InvalidInput,
            Self::Ring(e) => e.kind(),
            Self::Connect(e) => e.kind(),
            Self::ProducerDied { .. } | Self::ExporterLost { .. } => ErrorKind::Disconnected,
            Self::ProducerFailed { .. } => ErrorKind::ProducerFailed,
            Self::Stopped => ErrorKind::Cancelled,
            Self::Unreachable { .. } => ErrorKind::TimedOut,
            Self::Zenoh(_) | Self::Local { .. } => ErrorKind::Other,
        }
    }

    /// Whether the user's input was wrong (the CLI's exit status 2).
    pub fn is_usage(&self) -> bool {
        self.kind() == ErrorKind::InvalidInput
    }
}

impl From<zcio::ring::OpenError> for BridgeError {
    fn from(e: zcio::ring::OpenError) -> Self {
        Self::Ring(e)
    }
}

impl From<zcio::ConnectError> for BridgeError {
    fn from(e: zcio::ConnectError) -> Self {
        Self::Connect(e)
    }
}

/// A Zenoh error as a [`BridgeError::Zenoh`].
pub(crate) fn zenoh(e: impl std::fmt::Display) -> BridgeError {
    BridgeError::Zenoh(e.to_string())
}

/// A local error (`what`: the ring, channel, pool … it came from).
pub(crate) fn local(what: &'static str, e: impl std::fmt::Display) -> BridgeError {
    BridgeError::Local {
        what,
        why: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cause is printed once in a report of the whole chain.
    #[test]
    fn a_local_cause_is_reported_once() {
        let e = BridgeError::from(zcio::ring::OpenError::NotFound("gone".into()));
        assert!(std::error::Error::source(&e).is_none());
        let text = e.to_string();
        assert_eq!(text.matches("no ring named").count(), 1, "{text}");
    }
}
