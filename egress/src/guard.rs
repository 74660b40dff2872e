//! Which addresses and names are never the public internet: this host,
//! its networks, and cloud metadata services. One implementation for
//! every way out of PRIMS (the front-end's downloads and uploads, and the
//! egress proxy of jailed code); callers decide what an explicit allow
//! entry may reopen.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
