//! Liveliness tokens: how an importer learns that the exporting bridge of
//! its stream is gone (Zenoh removes a token when its session closes or
//! its peer's lease expires).
//!
//! An exporter declares `@zcio/alive/<stream>/<nonce>/<c|n>/<key>` (stream
//! and nonce as 16 hex digits; `c` if it keeps a publication cache, `n` if
//! not); importers watch `@zcio/alive/*/*/*/<key expr>`.
//! The `@zcio` chunk is verbatim: no wildcard of another application
//! matches it.
//!
//! A token's key comes from the network: [`parse_token`] is the one
//! parser of it (the importer's liveliness callback; the fuzz target
//! `bridge_samples`).

/// The first chunks of every token.
const PREFIX: &str = "@zcio/alive";

/// What a token says about its exporter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// The stream it exports.
    pub stream: u64,
    /// Which exporting process.
    pub nonce: u64,
    /// It keeps a publication cache (late joiners can ask it).
    pub cached: bool,
}

/// The key of the cache of `stream` published to `key`.
pub fn cache_key(stream: u64, key: &str) -> String {
    format!("@zcio/cache/{stream:016x}/{key}")
}

/// The token an exporter declares for `key`.
pub fn token_key(t: Token, key: &str) -> String {
    let c = if t.cached { 'c' } else { 'n' };
    format!("{PREFIX}/{:016x}/{:016x}/{c}/{key}", t.stream, t.nonce)
}

/// What an importer of `keyexpr` subscribes to.
pub fn token_pattern(keyexpr: &str) -> String {
    format!("{PREFIX}/*/*/*/{keyexpr}")
}

/// What a token's key says, and the exporter's key (`None`: not one of
/// ours).
pub fn parse_token(key: &str) -> Option<(Token, &str)> {
    let rest = key.strip_prefix(PREFIX)?.strip_prefix('/')?;
    let mut it = rest.splitn(4, '/');
    let hex = |s: &str| (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok())?;
    let stream = hex(it.next()?)?;
    let nonce = hex(it.next()?)?;
    let cached = match it.next()? {
        "c" => true,
        "n" => false,
        _ => return None,
    };
    let key = it.next()?;
    Some((
        Token {
            stream,
            nonce,
            cached,
        },
        key,
    ))
}

/// 64 random bits (stream identities of listener exports, exporter nonces).
#[cfg(feature = "bridge")]
pub(crate) fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let mut filled = 0;
    while filled < b.len() {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            // No entropy source at all: time and pid still make the value
            // unique enough for an identity (it is not a secret).
            Err(_) => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                return t ^ (u64::from(std::process::id()) << 32);
            }
        }
    }
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = Token {
            stream: 0xabc,
            nonce: 0x1234_5678_9abc_def0,
            cached: true,
        };
        let k = token_key(t, "cam/front/raw");
        assert_eq!(parse_token(&k), Some((t, "cam/front/raw")));
        let n = Token { cached: false, ..t };
        assert_eq!(parse_token(&token_key(n, "k")), Some((n, "k")));
        assert_eq!(cache_key(0xabc, "k"), "@zcio/cache/0000000000000abc/k");
        assert_eq!(parse_token("@zcio/alive/zz/00/c/k"), None);
        assert_eq!(parse_token("cam/front"), None);
        assert_eq!(
            parse_token("@zcio/alive/0000000000000abc/0000000000000001/c"),
            None
        );
        assert_eq!(
            parse_token("@zcio/alive/0000000000000abc/0000000000000001/x/k"),
            None
        );
        assert_eq!(token_pattern("cam/*"), "@zcio/alive/*/*/*/cam/*");
        #[cfg(feature = "bridge")]
        assert_ne!(random_u64(), random_u64());
    }
}
