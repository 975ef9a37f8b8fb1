//! How a bridge reaches Zenoh (the session) and what it accepts from it
//! (the limits), and the key expressions it uses.

use std::path::PathBuf;
use std::time::Duration;

use zenoh::key_expr::KeyExpr;

use crate::error::{zenoh, BridgeError};

/// Largest sample a bridge accepts unless configured otherwise (64 MiB).
pub const DEFAULT_MAX_SAMPLE: usize = 64 << 20;
/// Largest value [`SessionOptions::max_sample`] may take (1 GiB).
pub const MAX_SAMPLE_LIMIT: usize = 1 << 30;
/// What Zenoh may add around a sample on the wire (headers, attachment).
const FRAME_MARGIN: usize = 64 << 10;

/// The Zenoh session of a bridge.
///
/// Built on a Zenoh configuration file if one is given, then the options
/// here on top: peer mode unless the file says otherwise, explicit
/// endpoints, multicast scouting off unless [`Self::scout`], and the
/// receive limit [`Self::max_sample`] (Zenoh refuses larger messages
/// before allocating for them).
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// A Zenoh configuration (JSON5): TLS, access control, timeouts.
    pub config_file: Option<PathBuf>,
    /// Endpoints to listen on (`tcp/127.0.0.1:7447`, `tls/host:7447`).
    pub listen: Vec<String>,
    /// Endpoints to connect to.
    pub connect: Vec<String>,
    /// Allow multicast scouting (off by default: peers are named).
    pub scout: bool,
    /// Largest sample payload accepted or sent.
    pub max_sample: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            config_file: None,
            listen: Vec::new(),
            connect: Vec::new(),
            scout: false,
            max_sample: DEFAULT_MAX_SAMPLE,
        }
    }
}

fn quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}

impl SessionOptions {
    /// The Zenoh configuration these options describe.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, BridgeError> {
        if self.max_sample == 0 || self.max_sample > MAX_SAMPLE_LIMIT {
            return Err(BridgeError::Config(format!(
                "max sample size {} out of range (1 B ..= 1 GiB)",
                self.max_sample
            )));
        }
        let cfg_err = |what: &str, e: zenoh::Error| BridgeError::Config(format!("{what}: {e}"));
        let mut cfg = match &self.config_file {
            Some(p) => zenoh::Config::from_file(p)
                .map_err(|e| cfg_err(&format!("cannot use {}", p.display()), e))?,
            None => {
                let mut c = zenoh::Config::default();
                c.insert_json5("mode", "\"peer\"")
                    .map_err(|e| cfg_err("mode", e))?;
                c
            }
        };
        // No endpoint given and no file: listen nowhere (Zenoh's peer
        // default listens on every interface, which would let any host
        // publish into an importer that meant only to connect out).
        if !self.listen.is_empty() || self.config_file.is_none() {
            cfg.insert_json5("listen/endpoints", &quoted_list(&self.listen))
                .map_err(|e| cfg_err("--listen", e))?;
        }
        if !self.connect.is_empty() {
            cfg.insert_json5("connect/endpoints", &quoted_list(&self.connect))
                .map_err(|e| cfg_err("--connect", e))?;
        }
        if !self.scout {
            cfg.insert_json5("scouting/multicast/enabled", "false")
                .map_err(|e| cfg_err("scouting", e))?;
        }
        let limit = self.max_sample + FRAME_MARGIN;
        cfg.insert_json5("transport/link/rx/max_message_size", &limit.to_string())
            .map_err(|e| cfg_err("max message size", e))?;
        Ok(cfg)
    }

    /// Open the session.
    pub async fn open(&self) -> Result<zenoh::Session, BridgeError> {
        let cfg = self.zenoh_config()?;
        zenoh::open(cfg).await.map_err(zenoh)
    }
}

/// Resolves once `session` has a transport to another Zenoh node — a peer
/// or router: an endpoint it connects to answered, or a node connected to
/// one of its listeners — with that node's id (at once if it has one
/// already). Zenoh connects in the background and keeps retrying an
/// endpoint that does not answer, so this is how to tell "nothing reached
/// yet" from "connected".
pub async fn first_peer(session: &zenoh::Session) -> Result<String, BridgeError> {
    let events = session
        .info()
        .transport_events_listener()
        .history(true)
        .await
        .map_err(zenoh)?;
    while let Ok(ev) = events.recv_async().await {
        if ev.kind() == zenoh::sample::SampleKind::Put {
            return Ok(ev.transport().zid().to_string());
        }
    }
    Err(BridgeError::Zenoh("the session closed".into()))
}

/// Check a key expression given by the user: valid, canonical, not in
/// Zenoh's or zcio's reserved space (`@…`), and — for keys published to
/// (`concrete`) — without wildcards.
pub fn check_key(key: &str, concrete: bool) -> Result<KeyExpr<'static>, BridgeError> {
    let bad = |why: &str| BridgeError::KeyExpr {
        key: key.to_string(),
        why: why.to_string(),
    };
    if key.starts_with('@') {
        return Err(bad(
            "keys starting with '@' are reserved (Zenoh's admin space, zcio's tokens)",
        ));
    }
    let ke = KeyExpr::try_from(key.to_string()).map_err(|e| bad(&e.to_string()))?;
    if concrete && (key.contains('*') || key.contains("$*")) {
        return Err(bad(
            "an exported key cannot contain wildcards (* or **): name one key",
        ));
    }
    Ok(ke)
}

/// How long an importer waits, after the exporter's liveliness token
/// vanished, for more samples (an end of stream may still be on its way:
/// Zenoh sends declarations and data on different priorities) before it
/// ends the local stream with an error.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(1);

/// Longest one blocking wait of the bridge's threads lasts (for the next
/// ring block, for room in a sink) before they look at their stop flag
/// again: the bound on how long a stop takes.
pub(crate) const STOP_CHECK: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        assert!(check_key("cam/front", true).is_ok());
        assert!(check_key("cam/*", false).is_ok());
        assert!(check_key("cam/*", true).is_err());
        assert!(check_key("cam/**", true).is_err());
        assert!(check_key("@zcio/alive/x", false).is_err());
        assert!(check_key("", false).is_err());
        assert!(check_key("a//b", false).is_err());
        assert!(check_key("a/b/", false).is_err());
        assert!(check_key("a#b", true).is_err());
    }

    #[test]
    fn the_guides_tls_and_acl_configuration_is_valid() {
        let o = SessionOptions {
            config_file: Some(
                concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/bridge-tls.json5").into(),
            ),
            ..SessionOptions::default()
        };
        let c = o
            .zenoh_config()
            .expect("docs/bridge-tls.json5 is a valid Zenoh configuration");
        assert_eq!(c.get_json("access_control/enabled").unwrap(), "true");
        assert!(c.get_json("listen/endpoints").unwrap().contains("tls/"));
    }

    #[test]
    fn config_has_explicit_endpoints_and_no_multicast() {
        let o = SessionOptions {
            listen: vec!["tcp/127.0.0.1:0".into()],
            ..SessionOptions::default()
        };
        let c = o.zenoh_config().unwrap();
        assert_eq!(c.get_json("scouting/multicast/enabled").unwrap(), "false");
        assert!(c
            .get_json("listen/endpoints")
            .unwrap()
            .contains("127.0.0.1"));
        let quiet = SessionOptions::default().zenoh_config().unwrap();
        assert_eq!(
            quiet.get_json("listen/endpoints").unwrap(),
            "[]",
            "no --listen: listen nowhere"
        );
        let bad = SessionOptions {
            connect: vec!["nonsense".into()],
            ..SessionOptions::default()
        };
        assert!(bad.zenoh_config().is_err());
        let big = SessionOptions {
            max_sample: MAX_SAMPLE_LIMIT + 1,
            ..SessionOptions::default()
        };
        assert!(big.zenoh_config().is_err());
    }
}
