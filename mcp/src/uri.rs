//! `prims://sessions/{session_id}/{+path}`: the scheme names the product,
//! the session id is the capability (as in tool results), and the path is
//! relative to the workspace root, each byte outside the URI's unreserved
//! set (and `/`) percent-encoded.

use crate::error::ToolError;
use crate::paths::clean_relative;
use prims_protocol::wire::is_session_id;

pub(crate) const TEMPLATE: &str = "prims://sessions/{session_id}/{+path}";
const PREFIX: &str = "prims://sessions/";
/// Longest URI accepted, so a hostile one costs nothing to refuse.
const MAX_URI: usize = 8192;

/// The URI of `path` (relative to the workspace root) in `session_id`.
pub(crate) fn uri(session_id: &str, path: &str) -> String {
    let mut out = String::with_capacity(PREFIX.len() + session_id.len() + 1 + path.len());
    out.push_str(PREFIX);
    out.push_str(session_id);
    out.push('/');
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The session id and clean relative path a URI names, or why not.
pub(crate) fn parse(uri: &str) -> Result<(String, String), ToolError> {
    let bad = |why: &str| ToolError(format!("resource URI {uri:?} {why}; expected {TEMPLATE}"));
    if uri.len() > MAX_URI {
        return Err(ToolError(format!(
            "resource URI is {} bytes long, more than {MAX_URI}",
            uri.len()
        )));
    }
    let rest = uri
        .strip_prefix(PREFIX)
        .ok_or_else(|| bad("is not a PRIMS resource"))?;
    let (session, raw) = rest.split_once('/').ok_or_else(|| bad("names no file"))?;
    if !is_session_id(session) {
        return Err(bad("has a malformed session id"));
    }
    if raw.contains(['?', '#']) {
        return Err(bad("has a query or fragment"));
    }
    let decoded = decode(raw).ok_or_else(|| bad("has a malformed percent-escape"))?;
    let path = clean_relative(&decoded, "resource path", false)?;
    Ok((session.to_owned(), path))
}

fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn round_trip_with_odd_names() {
        for path in [
            "output/plot.png",
            "output/a b/ü%#?.csv",
            "mounts/x",
            "notes.txt",
        ] {
            let u = uri(S, path);
            assert!(!u[PREFIX.len()..].contains([' ', '?', '#']), "{u}");
            assert_eq!(parse(&u).unwrap(), (S.to_owned(), path.to_owned()));
        }
        assert_eq!(uri(S, "output/a b"), format!("{PREFIX}{S}/output/a%20b"));
    }

    #[test]
    fn hostile_uris_are_refused() {
        for u in [
            "file:///etc/passwd".to_owned(),
            format!("{PREFIX}{S}"),
            format!("{PREFIX}{S}/"),
            format!("{PREFIX}{S}/../../etc/passwd"),
            format!("{PREFIX}{S}/output/%2e%2e/%2e%2e/etc"),
            format!("{PREFIX}{S}/%2Fetc%2Fpasswd"),
            format!("{PREFIX}{S}/a%00b"),
            format!("{PREFIX}{S}/a%zz"),
            format!("{PREFIX}{S}/a%ff"),
            format!("{PREFIX}{S}/a?x=1"),
            format!("{PREFIX}XYZ/a"),
            format!("{PREFIX}{}/a", &S[..31]),
            format!("{PREFIX}{S}/{}", "a".repeat(MAX_URI)),
        ] {
            assert!(parse(&u).is_err(), "{u} was accepted");
        }
    }
}
