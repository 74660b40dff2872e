//! `[egress]` rules: the allow-list grammar (shared with the front-end, which
//! matches against the parsed form) and the limits' ranges.

use super::bounds::MAX_RUN_TIME;
use super::findings::Findings;
use crate::network::{net_contains, parse_net};
use crate::schema::Policy;
use crate::spans::KeyPath;
use std::net::IpAddr;

/// One `egress.allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressRule {
    /// An exact hostname, lowercase, without a trailing dot: every address
    /// it resolves to is allowed.
    Host(String),
    /// An address block; a bare address is a full-length prefix. Host bits
    /// are zero.
    Net { addr: IpAddr, prefix: u8 },
}

impl EgressRule {
    /// Whether `ip` is inside this block (never true for a `Host` rule).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match self {
            EgressRule::Net { addr, prefix } => net_contains(*addr, *prefix, ip),
            EgressRule::Host(_) => false,
        }
    }

    /// Whether this is a `Host` rule for `host` (compared case-insensitively,
    /// ignoring one trailing dot).
    pub fn matches_host(&self, host: &str) -> bool {
        match self {
            EgressRule::Host(name) => {
                let host = host.strip_suffix('.').unwrap_or(host);
                name.eq_ignore_ascii_case(host)
            }
            EgressRule::Net { .. } => false,
        }
    }
}

/// Parses an allow entry: `"files.internal.example"`, `"127.0.0.1"`,
/// `"10.0.0.0/8"`, `"::1"` or `"fd00::/8"`. The error is a sentence for the
/// admin.
pub fn parse_egress_rule(text: &str) -> Result<EgressRule, String> {
    if text.is_empty() {
        return Err("must not be empty (a hostname, an IP address or a CIDR)".to_string());
    }
    if text.starts_with('[') {
        return Err(format!(
            "{text:?}: write IPv6 addresses without brackets (e.g. \"::1\")"
        ));
    }
    if let Some((addr, prefix)) = text.split_once('/') {
        let (addr, prefix) = parse_net(text, addr, prefix)?;
        return Ok(EgressRule::Net { addr, prefix });
    }
    if let Ok(addr) = text.parse::<IpAddr>() {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        return Ok(EgressRule::Net { addr, prefix });
    }
    hostname_problem(text).map_or_else(|| Ok(EgressRule::Host(text.to_ascii_lowercase())), Err)
}

fn hostname_problem(text: &str) -> Option<String> {
    let hint = "a hostname such as \"files.example.com\" (letters, digits, - and .; no wildcards, ports or schemes)";
    if text.len() > 253 {
        return Some(format!("{text:?} is longer than 253 characters"));
    }
    let bad_label = |l: &str| {
        l.is_empty()
            || l.len() > 63
            || l.starts_with('-')
            || l.ends_with('-')
            || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if text.split('.').any(bad_label) {
        return Some(format!("{text:?} is not {hint}"));
    }
    None
}

pub(super) fn check(p: &Policy, f: &mut Findings) {
    let e = &p.egress;
    for (i, entry) in e.allow.iter().enumerate() {
        if let Err(problem) = parse_egress_rule(entry) {
            f.add(KeyPath::new(&["egress", "allow"]).index(i), problem);
        }
    }
    for (key, size) in [
        ("max_download", e.max_download),
        ("max_upload", e.max_upload),
    ] {
        if size.0 == 0 {
            f.add(
                KeyPath::new(&["egress", key]),
                "0B would refuse every transfer (at least 1B)".to_string(),
            );
        }
    }
    let t = e.timeout;
    if t.0.is_zero() || t > MAX_RUN_TIME {
        f.add(
            KeyPath::new(&["egress", "timeout"]),
            format!("{t} is out of range (must be more than 0s and at most {MAX_RUN_TIME})"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_addresses_and_blocks() {
        let net = |a: &str, prefix| EgressRule::Net {
            addr: a.parse().unwrap(),
            prefix,
        };
        assert_eq!(parse_egress_rule("127.0.0.1/32"), Ok(net("127.0.0.1", 32)));
        assert_eq!(parse_egress_rule("10.0.0.0/8"), Ok(net("10.0.0.0", 8)));
        assert_eq!(parse_egress_rule("::1"), Ok(net("::1", 128)));
        assert_eq!(parse_egress_rule("fd00::/8"), Ok(net("fd00::", 8)));
        assert_eq!(parse_egress_rule("0.0.0.0/0"), Ok(net("0.0.0.0", 0)));
        assert_eq!(
            parse_egress_rule("Files.Example.COM"),
            Ok(EgressRule::Host("files.example.com".into()))
        );
    }

    #[test]
    fn refuses_malformed_entries() {
        for bad in [
            "",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/x",
            "[::1]",
            "*.example.com",
            "http://x",
            "host:80",
            "a..b",
            "-a.b",
            "example.com.",
            "a b",
        ] {
            assert!(parse_egress_rule(bad).is_err(), "{bad:?} was accepted");
        }
        let msg = parse_egress_rule("10.0.0.1/8").unwrap_err();
        assert!(msg.contains("\"10.0.0.0/8\""), "{msg}");
    }

    #[test]
    fn matching() {
        let r = parse_egress_rule("127.0.0.0/8").unwrap();
        assert!(r.contains("127.9.9.9".parse().unwrap()));
        assert!(!r.contains("128.0.0.1".parse().unwrap()));
        assert!(!r.contains("::1".parse().unwrap()));
        let all = parse_egress_rule("::/0").unwrap();
        assert!(all.contains("2001:db8::1".parse().unwrap()));
        let h = parse_egress_rule("minio.local").unwrap();
        assert!(h.matches_host("MINIO.local."));
        assert!(!h.matches_host("x.minio.local"));
    }
}
