//! AWS Signature Version 4, re-signed at the edge: the jail signs a
//! request with placeholder credentials (its `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY`), the proxy checks that signature with the
//! placeholders, and signs the same canonical request again with the real
//! key. Substituting a key id cannot work: the signature covers it.
//!
//! The canonical request is built as botocore builds it for the request as
//! sent: the path as written, the query's pairs sorted as written, each
//! signed header's values with their whitespace collapsed, and the payload
//! hash the client declared in `x-amz-content-sha256`. A request whose
//! body is signed chunk by chunk (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`) is
//! refused: each chunk's signature would have to be made again.

use super::placement::Placement;
use super::values::{value_of, SecretValue};
use hmac::{Hmac, Mac};
use http::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use sha2::{Digest, Sha256};

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const CONTENT_SHA: &str = "x-amz-content-sha256";

/// One `Authorization: AWS4-HMAC-SHA256 …` header, parsed.
#[derive(Debug, PartialEq, Eq)]
struct Signed<'a> {
    key_id: &'a str,
    /// `date/region/service/aws4_request`.
    scope: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn parse(value: &str) -> Option<Signed<'_>> {
    let rest = value.strip_prefix(ALGORITHM)?.trim_start();
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed = Some(v),
            "Signature" => signature = Some(v),
            _ => return None,
        }
    }
    let (key_id, scope) = credential?.split_once('/')?;
    if scope.split('/').count() != 4 || !scope.ends_with("/aws4_request") {
        return None;
    }
    Some(Signed {
        key_id,
        scope,
        signed_headers: signed?.split(';').collect(),
        signature: signature?,
    })
}

/// Re-signs the request for each `aws` placement whose key id placeholder
/// signed it, when `host` is among the placement's hosts (the caller has
/// checked that already). The error is the reason it is refused.
pub fn resign(
    method: &str,
    target: &str,
    headers: &mut HeaderMap,
    placements: &[Placement],
    values: &std::collections::HashMap<String, SecretValue>,
) -> Result<Vec<String>, String> {
    let Some(auth) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Ok(Vec::new());
    };
    let Some(signed) = parse(auth) else {
        return Ok(Vec::new());
    };
    let Some(p) = placements
        .iter()
        .find(|p| p.key_id_placeholder.as_deref() == Some(signed.key_id))
    else {
        return Ok(Vec::new());
    };
    let value = value_of(p, values)?;
    let Some(real_id) = value.key_id.as_ref() else {
        return Err(format!("secret {} has no access_key_id", p.name));
    };
    let to_sign = string_to_sign(method, target, headers, &signed)?;
    if !signed_by(&p.placeholder, &signed, &to_sign) {
        return Err(format!(
            "the request's SigV4 signature does not match the session's placeholder credentials \
             (sign with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY as the session has them; {})",
            p.rule()
        ));
    }
    let scope: Vec<&str> = signed.scope.split('/').collect();
    let ours = signature(value.value.expose(), &scope, &to_sign);
    let credential = format!("{}/{}", real_id.expose(), signed.scope);
    let header = format!(
        "{ALGORITHM} Credential={credential}, SignedHeaders={}, Signature={ours}",
        signed.signed_headers.join(";")
    );
    let mut v =
        HeaderValue::from_str(&header).map_err(|_| "a re-signed header that is not valid")?;
    v.set_sensitive(true);
    headers.insert(AUTHORIZATION, v);
    Ok(vec![p.name.clone()])
}

/// Whether the request's `Authorization` is a SigV4 signature by
/// `key_id` under `secret`: what an upstream checks (the tests' S3 server
/// checks a re-signed request with it).
pub fn check(
    key_id: &str,
    secret: &str,
    method: &str,
    target: &str,
    headers: &HeaderMap,
) -> Result<(), String> {
    let auth = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or("no Authorization")?;
    let signed = parse(auth).ok_or("not a SigV4 Authorization")?;
    if signed.key_id != key_id {
        return Err(format!("signed by key id {}", signed.key_id));
    }
    let to_sign = string_to_sign(method, target, headers, &signed)?;
    if !signed_by(secret, &signed, &to_sign) {
        return Err("the signature does not match".into());
    }
    Ok(())
}

/// Whether `signed`'s signature of `to_sign` was made with `secret`.
fn signed_by(secret: &str, signed: &Signed<'_>, to_sign: &str) -> bool {
    let scope: Vec<&str> = signed.scope.split('/').collect();
    signature(secret, &scope, to_sign) == signed.signature.to_ascii_lowercase()
}

fn string_to_sign(
    method: &str,
    target: &str,
    headers: &HeaderMap,
    signed: &Signed<'_>,
) -> Result<String, String> {
    let canonical = canonical_request(method, target, headers, signed)?;
    let amz_date = header_text(headers, "x-amz-date")
        .ok_or("a SigV4 request without x-amz-date cannot be re-signed")?;
    Ok(format!(
        "{ALGORITHM}\n{amz_date}\n{}\n{}",
        signed.scope,
        hex::encode(Sha256::digest(canonical.as_bytes()))
    ))
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    let all: Vec<String> = headers
        .get_all(name)
        .iter()
        .map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (!all.is_empty()).then(|| all.join(","))
}

fn canonical_request(
    method: &str,
    target: &str,
    headers: &HeaderMap,
    signed: &Signed<'_>,
) -> Result<String, String> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_unstable();
    let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut canonical_headers = String::new();
    for name in &signed.signed_headers {
        let value = header_text(headers, name)
            .ok_or_else(|| format!("the signed header {name} is not in the request"))?;
        canonical_headers.push_str(&format!("{name}:{value}\n"));
    }
    let payload =
        header_text(headers, CONTENT_SHA).unwrap_or_else(|| hex::encode(Sha256::digest(b"")));
    if payload.starts_with("STREAMING-AWS4-HMAC-SHA256") {
        return Err(
            "an upload signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) cannot be \
             re-signed at the proxy; send the payload unsigned or whole (botocore does over HTTPS \
             by default)"
                .into(),
        );
    }
    Ok(format!(
        "{method}\n{path}\n{}\n{canonical_headers}\n{}\n{payload}",
        query.join("&"),
        signed.signed_headers.join(";")
    ))
}

/// The hex signature of `to_sign` under `secret` for `scope`'s date,
/// region and service.
fn signature(secret: &str, scope: &[&str], to_sign: &str) -> String {
    let mut key = format!("AWS4{secret}").into_bytes();
    for part in scope {
        key = hmac(&key, part.as_bytes());
    }
    hex::encode(hmac(&key, to_sign.as_bytes()))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::text::SecretText;
    use prims_policy::network::HostPattern;
    use prims_policy::SecretKind;
    use std::collections::HashMap;

    /// AWS's own example ("get-vanilla" of its SigV4 test suite).
    const EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const VANILLA: &str = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";

    fn vanilla(key_id: &str, sig: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("example.amazonaws.com"));
        h.insert("x-amz-date", HeaderValue::from_static("20150830T123600Z"));
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential={key_id}/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature={sig}"
        );
        h.insert(AUTHORIZATION, HeaderValue::from_str(&auth).unwrap());
        h
    }

    #[test]
    fn the_signature_is_awss_own_for_its_example() {
        let h = vanilla("AKIDEXAMPLE", VANILLA);
        let signed = parse(h[AUTHORIZATION].to_str().unwrap()).unwrap();
        let canonical = canonical_request("GET", "/", &h, &signed).unwrap();
        let to_sign = format!(
            "{ALGORITHM}\n20150830T123600Z\n{}\n{}",
            signed.scope,
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let scope: Vec<&str> = signed.scope.split('/').collect();
        assert_eq!(signature(EXAMPLE_SECRET, &scope, &to_sign), VANILLA);
    }

    #[test]
    fn a_request_signed_with_the_placeholders_is_signed_again_with_the_key() {
        // The jail signed with placeholders: for the test, AWS's example
        // key stands for the placeholder, and another key is the real one.
        let p = Placement {
            name: "S3".into(),
            kind: SecretKind::Aws,
            hosts: vec![HostPattern::Name("example.amazonaws.com".into())],
            header: "Authorization".into(),
            placeholder: EXAMPLE_SECRET.into(),
            key_id_placeholder: Some("AKIDEXAMPLE".into()),
        };
        let real = SecretValue {
            name: "S3".into(),
            value: SecretText::new("real-secret-key".into()),
            key_id: Some(SecretText::new("AKIAREALKEYID".into())),
        };
        let values = HashMap::from([("S3".to_string(), real)]);
        let mut h = vanilla("AKIDEXAMPLE", VANILLA);
        let placed = resign("GET", "/", &mut h, std::slice::from_ref(&p), &values).unwrap();
        assert_eq!(placed, ["S3"]);
        let auth = h[AUTHORIZATION].to_str().unwrap().to_string();
        assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIAREALKEYID/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature="), "{auth}");
        assert!(!auth.contains(VANILLA));
        // The real key's signature checks out as AWS would check it.
        check("AKIAREALKEYID", "real-secret-key", "GET", "/", &h).unwrap();
        assert!(check("AKIAREALKEYID", EXAMPLE_SECRET, "GET", "/", &h).is_err());

        // A forged signature (not made with the placeholder) is refused.
        let mut h = vanilla("AKIDEXAMPLE", &"0".repeat(64));
        let e = resign("GET", "/", &mut h, std::slice::from_ref(&p), &values).unwrap_err();
        assert!(
            e.contains("does not match the session's placeholder credentials"),
            "{e}"
        );
        // Chunk-signed uploads are refused, with what to do instead.
        let mut h = vanilla("AKIDEXAMPLE", VANILLA);
        h.insert(
            CONTENT_SHA,
            HeaderValue::from_static("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
        );
        let e = resign("PUT", "/", &mut h, &[p], &values).unwrap_err();
        assert!(e.contains("chunk by chunk"), "{e}");
    }
}
