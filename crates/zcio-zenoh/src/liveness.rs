//! Liveliness tokens: how an importer learns that the exporting bridge of
//! its stream is gone (Zenoh removes a token when its session closes or
//! its peer's lease expires).
//!
//! An exporter declares `@zcio/alive/<stream>/<nonce>/<key>` (stream and
//! nonce as 16 hex digits); importers watch `@zcio/alive/*/*/<key expr>`.
//! The `@zcio` chunk is verbatim: no wildcard of another application
//! matches it.

/// The first chunks of every token.
const PREFIX: &str = "@zcio/alive";

/// The token an exporter of `stream` (process `nonce`) declares for `key`.
pub(crate) fn token_key(stream: u64, nonce: u64, key: &str) -> String {
    format!("{PREFIX}/{stream:016x}/{nonce:016x}/{key}")
}

/// What an importer of `keyexpr` subscribes to.
pub(crate) fn token_pattern(keyexpr: &str) -> String {
    format!("{PREFIX}/*/*/{keyexpr}")
}

/// The stream and nonce of a token's key (`None`: not one of ours).
pub(crate) fn parse_token(key: &str) -> Option<(u64, u64)> {
    let rest = key.strip_prefix(PREFIX)?.strip_prefix('/')?;
    let mut it = rest.splitn(3, '/');
    let hex = |s: &str| (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok())?;
    let stream = hex(it.next()?)?;
    let nonce = hex(it.next()?)?;
    it.next()?;
    Some((stream, nonce))
}

/// 64 random bits (stream identities of listener exports, exporter nonces).
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
        let k = token_key(0xabc, 0x1234_5678_9abc_def0, "cam/front/raw");
        assert_eq!(parse_token(&k), Some((0xabc, 0x1234_5678_9abc_def0)));
        assert_eq!(parse_token("@zcio/alive/zz/00/k"), None);
        assert_eq!(parse_token("cam/front"), None);
        assert_eq!(
            parse_token("@zcio/alive/0000000000000abc/0000000000000001"),
            None
        );
        assert_eq!(token_pattern("cam/*"), "@zcio/alive/*/*/cam/*");
        assert_ne!(random_u64(), random_u64());
    }
}
