//! The egress allow-list of jailed code (`network.allow`): the grammar of
//! its entries, what a list permits, and narrowing. A tenant's list and a
//! call's `network` argument can only take away from the policy's list,
//! never add to it.
//!
//! Entries: an exact host name (`pypi.org`), a wildcard (`*.example.com`,
//! which does not match `example.com` itself), either with `:port`, an IP
//! address (`10.1.2.3`, `fd00::5`, `[fd00::5]:8443` with a port, `10.1.2.3:8080`)
//! or a CIDR (`10.20.0.0/16`). An entry without a port allows the list's
//! default ports (`network.ports`). Entries that name or include this
//! host itself (`localhost`, loopback, 0.0.0.0) are refused where lists
//! are written, see [`this_host_problem`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The most entries one list may hold.
pub const MAX_ENTRIES: usize = 256;

/// What an entry matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostPattern {
    /// One host name, lowercase, without a trailing dot.
    Name(String),
    /// Every name ending in `.suffix` (not `suffix` itself); lowercase.
    Below(String),
    /// An address block; a bare address is a full-length prefix, and host
    /// bits are zero.
    Net { addr: IpAddr, prefix: u8 },
}

/// One parsed entry: its hosts and, if it named one, its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    pub host: HostPattern,
    pub port: Option<u16>,
}

/// A list in force: every rule with the ports it allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowList {
    pub rules: Vec<Rule>,
}

/// Hosts and the ports allowed on them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub host: HostPattern,
    pub ports: BTreeSet<u16>,
}

/// Where a connection goes, as the client named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    Name(&'a str),
    Ip(IpAddr),
}

impl HostPattern {
    /// Whether this pattern covers the name `host` (compared without case
    /// and without one trailing dot). Address blocks never cover a name.
    pub fn matches_name(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host);
        match self {
            HostPattern::Name(n) => n.eq_ignore_ascii_case(host),
            HostPattern::Below(s) => below(host, s),
            HostPattern::Net { .. } => false,
        }
    }

    /// Whether this is an address block holding `ip`.
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        match self {
            HostPattern::Net { addr, prefix } => net_contains(*addr, *prefix, ip),
            _ => false,
        }
    }

    /// Whether every host this pattern matches, `other` matches too.
    pub fn within(&self, other: &HostPattern) -> bool {
        match (self, other) {
            (HostPattern::Name(n), o) => o.matches_name(n),
            (HostPattern::Below(s), HostPattern::Below(o)) => s == o || below(s, o),
            (
                HostPattern::Net { addr, prefix },
                HostPattern::Net {
                    addr: o,
                    prefix: op,
                },
            ) => prefix >= op && net_contains(*o, *op, *addr),
            _ => false,
        }
    }
}

/// `host` is a name strictly below `suffix`.
fn below(host: &str, suffix: &str) -> bool {
    let (h, s) = (host.len(), suffix.len());
    h > s + 1 && host.as_bytes()[h - s - 1] == b'.' && host[h - s..].eq_ignore_ascii_case(suffix)
}

/// Whether `ip` is inside `net/prefix` (never across address families).
pub(crate) fn net_contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            mask(u32::from(n).into(), 32, prefix) == mask(u32::from(i).into(), 32, prefix)
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            mask(u128::from(n), 128, prefix) == mask(u128::from(i), 128, prefix)
        }
        _ => false,
    }
}

/// `value` with only its top `prefix` bits of `width` kept, shifted down.
fn mask(value: u128, width: u32, prefix: u8) -> u128 {
    value
        .checked_shr(width.saturating_sub(u32::from(prefix)))
        .unwrap_or(0)
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Name(n) => f.write_str(n),
            HostPattern::Below(s) => write!(f, "*.{s}"),
            HostPattern::Net { addr, prefix } => {
                let full = if addr.is_ipv4() { 32 } else { 128 };
                if *prefix == full {
                    write!(f, "{addr}")
                } else {
                    write!(f, "{addr}/{prefix}")
                }
            }
        }
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.host, self.port) {
            (h, None) => write!(f, "{h}"),
            (HostPattern::Net { addr, .. }, Some(p)) if addr.is_ipv6() => write!(f, "[{addr}]:{p}"),
            (h, Some(p)) => write!(f, "{h}:{p}"),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        write!(f, "{} (ports {})", self.host, ports.join(", "))
    }
}

/// Parses one entry; the error is a sentence for whoever wrote it.
pub fn parse_allow_entry(text: &str) -> Result<AllowEntry, String> {
    const HINT: &str = "a host name, *.domain, host:port, an IP address or a CIDR";
    if text.is_empty() {
        return Err(format!("must not be empty ({HINT})"));
    }
    if text.len() > 260 {
        return Err(format!("{text:?} is longer than 260 characters"));
    }
    if text.contains("://") || text.contains('/') && !looks_like_cidr(text) {
        return Err(format!(
            "{text:?} is not {HINT}: write the host without a scheme or path"
        ));
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (addr, port) = rest
            .split_once("]:")
            .ok_or_else(|| format!("{text:?}: write [IPv6]:port, or the IPv6 address bare"))?;
        let addr: IpAddr = addr
            .parse()
            .ok()
            .filter(IpAddr::is_ipv6)
            .ok_or_else(|| format!("{text:?}: {addr:?} is not an IPv6 address"))?;
        return Ok(AllowEntry {
            host: HostPattern::Net { addr, prefix: 128 },
            port: Some(parse_port(text, port)?),
        });
    }
    if let Ok(addr) = text.parse::<IpAddr>() {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        return Ok(AllowEntry {
            host: HostPattern::Net { addr, prefix },
            port: None,
        });
    }
    if let Some((addr, prefix)) = text.split_once('/') {
        return parse_cidr(text, addr, prefix).map(|host| AllowEntry { host, port: None });
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) => (h, Some(parse_port(text, p)?)),
        None => (text, None),
    };
    if let Ok(addr) = host.parse::<IpAddr>() {
        if addr.is_ipv6() {
            return Err(format!(
                "{text:?}: write an IPv6 address with a port as [{addr}]:port"
            ));
        }
        return Ok(AllowEntry {
            host: HostPattern::Net { addr, prefix: 32 },
            port,
        });
    }
    let pattern = match host.strip_prefix("*.") {
        Some(suffix) => {
            name_problem(text, suffix)?;
            if !suffix.contains('.') {
                return Err(format!(
                    "{text:?} would match every name in a top-level domain; name at least two labels after *."
                ));
            }
            HostPattern::Below(suffix.to_ascii_lowercase())
        }
        None => {
            name_problem(text, host)?;
            HostPattern::Name(host.to_ascii_lowercase())
        }
    };
    Ok(AllowEntry {
        host: pattern,
        port,
    })
}

/// This host's own addresses. In a run's jail `localhost`, 127.0.0.1 and
/// ::1 are the jail's own loopback, which clients reach directly (the
/// jail's `NO_PROXY` names them) and never through the proxy, and 0.0.0.0
/// or :: would reach this host through the proxy: so no entry may name or
/// include them, and no run reaches the host's loopback services (the
/// front-end among them).
const THIS_HOST: &[(IpAddr, u8, &str)] = &[
    (
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)),
        8,
        "127.0.0.0/8, its loopback",
    ),
    (
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        32,
        "0.0.0.0, which connects to this host",
    ),
    (IpAddr::V6(Ipv6Addr::LOCALHOST), 128, "::1, its loopback"),
    (
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        128,
        "::, which connects to this host",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0x7f00, 0)),
        104,
        "::ffff:127.0.0.0/104, its loopback as IPv4-mapped addresses",
    ),
    (
        IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0)),
        128,
        "::ffff:0.0.0.0, which connects to this host",
    ),
];

/// Who wrote an entry: what a refusal advises differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Author {
    /// The admin, in `network.allow` or `network.tenants`.
    Policy,
    /// A call's `network` argument.
    Call,
}

/// Why the entry `text` (parsed as `entry`) is refused if it names this
/// host or an address block that includes it: one sentence, with advice
/// for `author`.
pub fn this_host_problem(text: &str, entry: &AllowEntry, author: Author) -> Option<String> {
    let (what, wider) = match &entry.host {
        HostPattern::Name(n) if n == "localhost" || n.ends_with(".localhost") => {
            ("the localhost names, its loopback", false)
        }
        HostPattern::Below(s) if s == "localhost" || s.ends_with(".localhost") => {
            ("the localhost names, its loopback", false)
        }
        HostPattern::Net { addr, prefix } => THIS_HOST.iter().find_map(|(net, p, what)| {
            if prefix >= p && net_contains(*net, *p, *addr) {
                Some((*what, false))
            } else if prefix < p && net_contains(*addr, *prefix, *net) {
                Some((*what, true))
            } else {
                None
            }
        })?,
        _ => return None,
    };
    let advice = match (author, wider) {
        (Author::Policy, false) => "to let runs reach a service of this host, serve it on another of the host's addresses (a private one) and allow that address",
        (Author::Policy, true) => "allow ranges that leave it out",
        (Author::Call, false) => "leave the entry out: code reaches its own loopback without one",
        (Author::Call, true) => "ask for ranges that leave it out",
    };
    Some(format!(
        "{text:?} {} this host ({what}), which no run can reach: in a run's jail localhost, 127.0.0.1 and ::1 are the jail's own loopback, reached without the proxy; {advice}",
        if wider { "includes" } else { "names" }
    ))
}

fn looks_like_cidr(text: &str) -> bool {
    text.split_once('/')
        .is_some_and(|(a, p)| a.parse::<IpAddr>().is_ok() && !p.is_empty())
}

fn parse_port(text: &str, port: &str) -> Result<u16, String> {
    port.parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{text:?}: the port must be 1 to 65535"))
}

fn parse_cidr(text: &str, addr: &str, prefix: &str) -> Result<HostPattern, String> {
    let (addr, prefix) = parse_net(text, addr, prefix)?;
    Ok(HostPattern::Net { addr, prefix })
}

/// `addr/prefix` of the entry `text`, with its host bits zero. The error is
/// a sentence for the admin.
pub(crate) fn parse_net(text: &str, addr: &str, prefix: &str) -> Result<(IpAddr, u8), String> {
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{text:?} is not a CIDR (e.g. \"10.0.0.0/8\")"))?;
    let width: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= width)
        .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {width}"))?;
    let bits = match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let kept = mask(bits, u32::from(width), prefix)
        .checked_shl(u32::from(width - prefix))
        .unwrap_or(0);
    if kept != bits {
        let net = match addr {
            IpAddr::V4(_) => IpAddr::from(u32::try_from(kept).unwrap_or(0).to_be_bytes()),
            IpAddr::V6(_) => IpAddr::from(kept.to_be_bytes()),
        };
        return Err(format!(
            "{text:?} has host bits set (write \"{net}/{prefix}\")"
        ));
    }
    Ok((addr, prefix))
}

fn name_problem(text: &str, name: &str) -> Result<(), String> {
    let bad_label = |l: &str| {
        l.is_empty()
            || l.len() > 63
            || l.starts_with('-')
            || l.ends_with('-')
            || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if name.len() > 253 || name.split('.').any(bad_label) {
        return Err(format!(
            "{text:?} is not a host name such as \"files.example.com\" (letters, digits, - and .; a wildcard only as a leading *.)"
        ));
    }
    Ok(())
}

impl AllowList {
    /// The list of `entries`, those without a port getting `ports`.
    pub fn new(entries: &[AllowEntry], ports: &[u16]) -> AllowList {
        let rules = entries
            .iter()
            .map(|e| Rule {
                host: e.host.clone(),
                ports: match e.port {
                    Some(p) => BTreeSet::from([p]),
                    None => ports.iter().copied().collect(),
                },
            })
            .filter(|r| !r.ports.is_empty())
            .collect();
        AllowList { rules }
    }

    /// Parses `entries` (each already validated as policy) into a list.
    pub fn parse(entries: &[String], ports: &[u16]) -> Result<AllowList, String> {
        let parsed = entries
            .iter()
            .map(|e| parse_allow_entry(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllowList::new(&parsed, ports))
    }

    /// The rule that lets a connection to `target` on `port` through, by
    /// what the client named (the addresses a name resolves to are judged
    /// separately, see [`AllowList::names_address`]).
    pub fn permits(&self, target: Target<'_>, port: u16) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.ports.contains(&port)
                && match target {
                    Target::Name(n) => r.host.matches_name(n),
                    Target::Ip(ip) => r.host.contains_ip(ip),
                }
        })
    }

    /// Whether an IP or CIDR rule names `ip` on `port` explicitly, which
    /// opens an address the guard refuses (private, loopback, metadata).
    pub fn names_address(&self, ip: IpAddr, port: u16) -> bool {
        self.permits(Target::Ip(ip), port).is_some()
    }

    /// This list narrowed by `request`: each requested entry is kept for
    /// the ports both allow, as far as one of this list's rules covers its
    /// hosts; requested entries without a port ask for `default_ports`.
    /// Returns the narrowed list and the entries it had to drop.
    pub fn narrow(
        &self,
        request: &[AllowEntry],
        default_ports: &[u16],
    ) -> (AllowList, Vec<AllowEntry>) {
        let mut rules = Vec::new();
        let mut dropped = Vec::new();
        for r in request {
            let want: BTreeSet<u16> = match r.port {
                Some(p) => BTreeSet::from([p]),
                None => default_ports.iter().copied().collect(),
            };
            let mut ports = BTreeSet::new();
            for b in self.rules.iter().filter(|b| r.host.within(&b.host)) {
                ports.extend(want.intersection(&b.ports));
            }
            if ports.is_empty() {
                dropped.push(r.clone());
            } else {
                rules.push(Rule {
                    host: r.host.clone(),
                    ports,
                });
            }
        }
        (AllowList { rules }, dropped)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> AllowEntry {
        parse_allow_entry(s).unwrap_or_else(|m| panic!("{s}: {m}"))
    }

    #[test]
    fn every_entry_form_parses_and_prints_back() {
        for s in [
            "pypi.org",
            "*.githubusercontent.com",
            "api.internal.example:8443",
            "10.1.2.3",
            "10.1.2.3:8080",
            "10.20.0.0/16",
            "::1",
            "[::1]:8443",
            "fd00::/8",
            "*.example.com:443",
        ] {
            assert_eq!(e(s).to_string(), s);
        }
        assert_eq!(e("PyPI.org").host, HostPattern::Name("pypi.org".into()));
        assert_eq!(e("127.0.0.1:8080").port, Some(8080));
    }

    #[test]
    fn junk_is_refused_with_a_reason() {
        for bad in [
            "",
            "http://pypi.org",
            "pypi.org/simple",
            "*.com",
            "*",
            "a.*.example.com",
            "ex*ample.com",
            "host:0",
            "host:65536",
            "host:",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "[::1]",
            "[10.0.0.1]:80",
            "::1:80x",
            "a..b",
            "-a.example",
            "a b",
            "pypi.org.",
        ] {
            assert!(parse_allow_entry(bad).is_err(), "{bad:?} was accepted");
        }
        let m = parse_allow_entry("10.0.0.1/8").unwrap_err();
        assert!(m.contains("\"10.0.0.0/8\""), "{m}");
    }

    #[test]
    fn a_wildcard_does_not_match_its_bare_suffix() {
        let list = AllowList::new(&[e("*.example.com")], &[443]);
        assert!(list.permits(Target::Name("a.example.com"), 443).is_some());
        assert!(list
            .permits(Target::Name("a.b.example.com."), 443)
            .is_some());
        assert!(list.permits(Target::Name("example.com"), 443).is_none());
        assert!(list.permits(Target::Name("badexample.com"), 443).is_none());
        assert!(list.permits(Target::Name("a.example.com"), 80).is_none());
    }

    #[test]
    fn ports_come_from_the_entry_or_the_defaults() {
        let list = AllowList::new(
            &[e("pypi.org"), e("api.example:8443"), e("10.0.0.0/8")],
            &[80, 443],
        );
        assert!(list.permits(Target::Name("pypi.org"), 80).is_some());
        assert!(list.permits(Target::Name("pypi.org"), 8443).is_none());
        assert!(list.permits(Target::Name("api.example"), 8443).is_some());
        assert!(list.permits(Target::Name("api.example"), 443).is_none());
        assert!(list
            .permits(Target::Ip("10.9.9.9".parse().unwrap()), 443)
            .is_some());
        // A name rule never covers an address, nor an address rule a name.
        assert!(list
            .permits(Target::Ip("151.101.0.223".parse().unwrap()), 443)
            .is_none());
        assert!(list.names_address("10.1.1.1".parse().unwrap(), 80));
        assert!(!list.names_address("127.0.0.1".parse().unwrap(), 80));
    }

    #[test]
    fn narrowing_keeps_only_what_both_allow() {
        let policy = AllowList::new(
            &[e("*.example.com"), e("pypi.org:443"), e("10.0.0.0/8")],
            &[80, 443],
        );
        let (got, dropped) = policy.narrow(
            &[
                e("a.example.com"),
                e("pypi.org"),
                e("evil.test"),
                e("10.1.0.0/16"),
                e("0.0.0.0/0"),
            ],
            &[80, 443],
        );
        let shown: Vec<String> = got.rules.iter().map(Rule::to_string).collect();
        assert_eq!(
            shown,
            [
                "a.example.com (ports 80, 443)",
                "pypi.org (ports 443)",
                "10.1.0.0/16 (ports 80, 443)"
            ]
        );
        let gone: Vec<String> = dropped.iter().map(AllowEntry::to_string).collect();
        assert_eq!(gone, ["evil.test", "0.0.0.0/0"]);
    }
}
