//! Placing a value in a request head: only in the placement's header, only
//! for its hosts, and only once every other check has passed (the caller
//! runs this last). A placeholder anywhere else in the head is refused:
//! the reason says where it may go, in words a model can act on.

use super::placement::Placement;
use super::values::{value_of, SecretValue};
use base64::Engine;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::collections::HashMap;

/// Puts the values of `placements` in `headers` for a request to `host`,
/// after checking that no placeholder is in `target` (the URL's path and
/// query) or in a header where it may not go. Returns the names placed.
pub fn place(
    target: &str,
    headers: &mut HeaderMap,
    host: &str,
    placements: &[Placement],
    values: &HashMap<String, SecretValue>,
) -> Result<Vec<String>, String> {
    for p in placements {
        if p.placeholders().any(|ph| target.contains(ph)) {
            return Err(format!(
                "the placeholder of secret {} is in the URL, where it is never placed ({})",
                p.name,
                p.rule()
            ));
        }
    }
    let mut placed = Vec::new();
    let names: Vec<HeaderName> = headers.keys().cloned().collect();
    for name in names {
        let mut changed = Vec::new();
        for v in headers.get_all(&name) {
            changed.push(place_in(&name, v, host, placements, values, &mut placed)?);
        }
        if changed.iter().any(Option::is_some) {
            let old: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
            headers.remove(&name);
            for (o, c) in old.into_iter().zip(changed) {
                headers.append(name.clone(), c.unwrap_or(o));
            }
        }
    }
    Ok(placed)
}

/// One header value: `None` if it holds no placeholder, the value with the
/// secret in place if it may hold it, else the reason.
fn place_in(
    name: &HeaderName,
    value: &HeaderValue,
    host: &str,
    placements: &[Placement],
    values: &HashMap<String, SecretValue>,
    placed: &mut Vec<String>,
) -> Result<Option<HeaderValue>, String> {
    let raw = value.as_bytes();
    let basic = basic_credentials(raw);
    let mut out: Option<String> = None;
    for p in placements {
        let inside = |hay: &[u8]| p.placeholders().any(|ph| contains(hay, ph.as_bytes()));
        let in_basic = basic.as_deref().is_some_and(|b| inside(b.as_bytes()));
        if !inside(raw) && !in_basic {
            continue;
        }
        if !name.as_str().eq_ignore_ascii_case(&p.header) {
            return Err(format!(
                "the placeholder of secret {} is in the {} header, where it is never placed ({})",
                p.name,
                name,
                p.rule()
            ));
        }
        if !p.serves(host) {
            return Err(format!(
                "the placeholder of secret {} was sent to {host}, which is not among its hosts ({})",
                p.name,
                p.rule()
            ));
        }
        if p.kind == prims_policy::SecretKind::Aws {
            // Its header is re-signed whole by `aws`, never substituted.
            continue;
        }
        let real = value_of(p, values)?.value.expose();
        // After an earlier placement in this header, its text so far.
        let text = out
            .take()
            .unwrap_or_else(|| String::from_utf8_lossy(raw).into_owned());
        out = Some(match basic_credentials(text.as_bytes()) {
            Some(decoded) if in_basic => format!(
                "{}{}",
                &text[..6],
                base64::engine::general_purpose::STANDARD
                    .encode(decoded.replace(&p.placeholder, real))
            ),
            _ => text.replace(&p.placeholder, real),
        });
        placed.push(p.name.clone());
    }
    match out {
        None => Ok(None),
        Some(t) => HeaderValue::from_str(&t)
            .map(|mut v| {
                v.set_sensitive(true);
                Some(v)
            })
            .map_err(|_| {
                format!("the {name} header with its secret in place is not a valid header value")
            }),
    }
}

/// The decoded credentials of `Basic <base64>`, if that is what `raw` is.
fn basic_credentials(raw: &[u8]) -> Option<String> {
    let (scheme, rest) = raw.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(rest.trim_ascii())
        .ok()?;
    String::from_utf8(bytes).ok()
}

pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && memchr::memmem::find(hay, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::text::SecretText;
    use prims_policy::network::HostPattern;
    use prims_policy::SecretKind;

    const PH: &str = "prims-secret-0123456789abcdef";

    fn token() -> (Vec<Placement>, HashMap<String, SecretValue>) {
        let p = Placement {
            name: "EXAMPLE_TOKEN".into(),
            kind: SecretKind::Token,
            hosts: vec![HostPattern::Name("api.example.com".into())],
            header: "Authorization".into(),
            placeholder: PH.into(),
            key_id_placeholder: None,
        };
        let v = SecretValue {
            name: "EXAMPLE_TOKEN".into(),
            value: SecretText::new("s3cr3t-value".into()),
            key_id: None,
        };
        (vec![p], HashMap::from([("EXAMPLE_TOKEN".into(), v)]))
    }

    fn head(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn bearer_and_basic_are_placed_for_the_secrets_hosts() {
        let (p, v) = token();
        let mut h = head(&[
            ("authorization", &format!("Bearer {PH}")),
            ("accept", "*/*"),
        ]);
        let placed = place("/v1/x", &mut h, "api.example.com", &p, &v).unwrap();
        assert_eq!(placed, ["EXAMPLE_TOKEN"]);
        assert_eq!(h["authorization"], "Bearer s3cr3t-value");
        assert_eq!(h["accept"], "*/*");
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{PH}"));
        let mut h = head(&[("Authorization", &format!("Basic {b64}"))]);
        place("/", &mut h, "api.example.com", &p, &v).unwrap();
        let want = base64::engine::general_purpose::STANDARD.encode("user:s3cr3t-value");
        assert_eq!(h["authorization"], format!("Basic {want}").as_str());
    }

    #[test]
    fn a_placeholder_anywhere_else_is_refused_with_where_it_may_go() {
        let (p, v) = token();
        let bearer = format!("Bearer {PH}");
        for (target, headers, host, why) in [
            (
                "/",
                vec![("authorization", bearer.as_str())],
                "evil.example",
                "was sent to evil.example, which is not among its hosts",
            ),
            (
                "/",
                vec![("x-api-key", PH)],
                "api.example.com",
                "is in the x-api-key header, where it is never placed",
            ),
            (
                &format!("/q?key={PH}")[..],
                vec![],
                "api.example.com",
                "is in the URL",
            ),
        ] {
            let mut h = head(&headers);
            let e = place(target, &mut h, host, &p, &v).unwrap_err();
            assert!(e.contains(why), "{e}");
            assert!(
                e.contains(
                    "placed only in the Authorization header of HTTPS requests to api.example.com"
                ),
                "{e}"
            );
            assert!(!e.contains("s3cr3t"), "{e}");
        }
        let mut h = head(&[("authorization", "Bearer mine")]);
        assert!(place("/", &mut h, "evil.example", &p, &v)
            .unwrap()
            .is_empty());
    }
}
