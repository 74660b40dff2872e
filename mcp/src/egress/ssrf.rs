//! The SSRF guard: which URLs, names and addresses the front-end may reach.
//! Public internet addresses are allowed; everything that reaches this host,
//! its network or a cloud's metadata service is refused unless the policy's
//! `egress.allow` names it.

use super::error::{Blocked, EgressError};
use prims_policy::EgressRule;
use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::Host;

/// Names of cloud metadata services, and the `.internal` zone they live in.
/// Their addresses are refused anyway; the names are refused so a resolver
/// that answers something unexpected for them cannot open a path.
const BLOCKED_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
];
const BLOCKED_SUFFIXES: &[&str] = &[".internal"];

/// IPv4 blocks that are not the public internet, most specific first.
const V4_BLOCKS: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(255, 255, 255, 255), 32, "broadcast address"),
    (
        Ipv4Addr::new(0, 0, 0, 0),
        8,
        "unspecified address, 0.0.0.0/8",
    ),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private range 10.0.0.0/8"),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "carrier-grade NAT range 100.64.0.0/10",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback address"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "link-local range 169.254.0.0/16, home of cloud metadata services",
    ),
    (
        Ipv4Addr::new(172, 16, 0, 0),
        12,
        "private range 172.16.0.0/12",
    ),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "reserved protocol range 192.0.0.0/24",
    ),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation address"),
    (Ipv4Addr::new(192, 88, 99, 0), 24, "6to4 relay address"),
    (
        Ipv4Addr::new(192, 168, 0, 0),
        16,
        "private range 192.168.0.0/16",
    ),
    (
        Ipv4Addr::new(198, 18, 0, 0),
        15,
        "benchmarking range 198.18.0.0/15",
    ),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation address"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation address"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast address"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved range 240.0.0.0/4"),
];

/// Why `ip` is not a public internet address, or `None` when it is.
/// IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged by
/// the embedded address.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    V4_BLOCKS.iter().find_map(|(net, prefix, why)| {
        let shift = 32 - u32::from(*prefix);
        (bits.checked_shr(shift) == u32::from(*net).checked_shr(shift)).then_some(*why)
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if ip.is_unspecified() {
        return Some("unspecified address");
    }
    if ip.is_loopback() {
        return Some("loopback address");
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    match s {
        // NAT64 (RFC 6052) reaches the embedded IPv4 address.
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => return classify_v4(embedded(hi, lo)),
        [0x64, 0xff9b, 1, ..] => return Some("local-use NAT64 range 64:ff9b:1::/48"),
        // 6to4 reaches the IPv4 address in bits 16..48.
        [0x2002, hi, lo, ..] => return classify_v4(embedded(hi, lo)),
        [0x2001, 0, ..] => return Some("Teredo tunnel range 2001::/32"),
        [0x2001, 0x0db8, ..] => return Some("documentation address"),
        [0x2001, 2, 0, ..] => return Some("benchmarking range 2001:2::/48"),
        [0x3fff, x, ..] if x < 0x1000 => return Some("documentation range 3fff::/20"),
        _ => {}
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => Some("unique local (private) range fc00::/7"),
        x if x & 0xffc0 == 0xfe80 => Some("link-local range fe80::/10"),
        x if x & 0xffc0 == 0xfec0 => Some("site-local range fec0::/10"),
        x if x & 0xff00 == 0xff00 => Some("multicast address"),
        // Everything outside global unicast 2000::/3: IPv4-compatible,
        // discard-only (100::/64) and unassigned space.
        x if x & 0xe000 != 0x2000 => Some("reserved address outside global unicast 2000::/3"),
        _ => None,
    }
}

/// Why `host` (a DNS name) is refused by name, if it is.
pub fn blocked_name(host: &str) -> Option<&'static str> {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let named = BLOCKED_NAMES.contains(&host.as_str());
    if named || BLOCKED_SUFFIXES.iter().any(|s| host.ends_with(s)) {
        return Some("cloud metadata or internal-only hostname");
    }
    None
}

/// The SSRF guard with the policy's exceptions.
#[derive(Debug, Clone, Default)]
pub(crate) struct SsrfGuard {
    allow: Vec<EgressRule>,
}

impl SsrfGuard {
    pub(crate) fn new(allow: Vec<EgressRule>) -> Self {
        SsrfGuard { allow }
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.allow.iter().any(|r| r.matches_host(host))
    }

    /// Refuses a name-blocked host, unless a hostname rule allows it.
    pub(crate) fn check_name(&self, host: &str) -> Result<(), Blocked> {
        match blocked_name(host) {
            Some(why) if !self.host_allowed(host) => Err(Blocked::new(host, None, why)),
            _ => Ok(()),
        }
    }

    /// Refuses `ip` (an address of `host`) unless it is public, `host` is an
    /// allowed hostname, or an allowed block contains it.
    pub(crate) fn check_addr(&self, host: &str, ip: IpAddr) -> Result<(), Blocked> {
        let Some(why) = classify(ip) else {
            return Ok(());
        };
        if self.host_allowed(host) || self.allow.iter().any(|r| r.contains(ip)) {
            return Ok(());
        }
        Err(Blocked::new(host, Some(ip), why))
    }

    /// Everything that can be decided before connecting: the scheme, IP
    /// literal hosts (which never reach the resolver) and blocked names.
    /// Named hosts' addresses are checked by the resolver at connect time.
    pub(crate) fn check_url(&self, url: &Url) -> Result<(), EgressError> {
        match url.scheme() {
            "http" | "https" => {}
            other => {
                return Err(EgressError::SchemeNotAllowed {
                    scheme: other.to_string(),
                })
            }
        }
        let bad = |reason: &str| EgressError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let host = url.host().ok_or_else(|| bad("it has no host"))?;
        let shown = url.host_str().unwrap_or_default();
        match host {
            Host::Ipv4(ip) => self.check_addr(shown, IpAddr::V4(ip))?,
            Host::Ipv6(ip) => self.check_addr(shown, IpAddr::V6(ip))?,
            Host::Domain(name) => self.check_name(name)?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_rules_open_exactly_what_they_name() {
        let rules = ["127.0.0.1/32", "files.internal"]
            .into_iter()
            .map(|r| prims_policy::parse_egress_rule(r).unwrap())
            .collect();
        let g = SsrfGuard::new(rules);
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let lo2: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(g.check_addr("127.0.0.1", lo).is_ok());
        assert!(g.check_addr("127.0.0.2", lo2).is_err());
        assert!(g.check_addr("files.internal", lo2).is_ok());
        assert!(g.check_name("files.internal").is_ok());
        assert!(g.check_name("metadata.google.internal").is_err());
        assert!(g.check_name("METADATA.google.internal.").is_err());
        assert!(g.check_name("example.com").is_ok());
    }
}
