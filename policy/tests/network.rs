//! Narrowing an allow-list (a tenant's list, a call's `network` argument)
//! can only take away: whatever the narrowed list lets through, both the
//! policy's list and the request let through.

use prims_policy::network::{AllowEntry, AllowList, HostPattern, Target};
use proptest::prelude::*;
use std::net::IpAddr;

const NAMES: &[&str] = &["x.com", "a.x.com", "b.x.com", "c.a.x.com", "y.org"];
const SUFFIXES: &[&str] = &["x.com", "a.x.com", "y.org"];
const NETS: &[(&str, u8)] = &[
    ("0.0.0.0", 0),
    ("10.0.0.0", 8),
    ("10.1.0.0", 16),
    ("10.1.2.3", 32),
    ("127.0.0.1", 32),
    ("::1", 128),
    ("fd00::", 8),
];
const IPS: &[&str] = &[
    "10.1.2.3",
    "10.2.0.1",
    "127.0.0.1",
    "8.8.8.8",
    "::1",
    "fd00::5",
];
const PORTS: &[u16] = &[80, 443, 8443];

fn pattern() -> impl Strategy<Value = HostPattern> {
    prop_oneof![
        prop::sample::select(NAMES).prop_map(|n| HostPattern::Name(n.to_string())),
        prop::sample::select(SUFFIXES).prop_map(|s| HostPattern::Below(s.to_string())),
        prop::sample::select(NETS).prop_map(|(a, p)| HostPattern::Net {
            addr: a.parse().unwrap(),
            prefix: p
        }),
    ]
}

fn entry() -> impl Strategy<Value = AllowEntry> {
    (pattern(), prop::option::of(prop::sample::select(PORTS)))
        .prop_map(|(host, port)| AllowEntry { host, port })
}

fn ports() -> impl Strategy<Value = Vec<u16>> {
    prop::sample::subsequence(PORTS, 0..=PORTS.len())
}

fn targets() -> Vec<Target<'static>> {
    let names = NAMES.iter().map(|n| Target::Name(n));
    let ips = IPS.iter().map(|i| Target::Ip(i.parse::<IpAddr>().unwrap()));
    names.chain(ips).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn a_request_only_narrows(
        policy in prop::collection::vec(entry(), 0..6),
        policy_ports in ports(),
        request in prop::collection::vec(entry(), 0..6),
        request_ports in ports(),
    ) {
        let base = AllowList::new(&policy, &policy_ports);
        let asked = AllowList::new(&request, &request_ports);
        let (narrowed, dropped) = base.narrow(&request, &request_ports);
        prop_assert!(narrowed.rules.len() + dropped.len() == request.len());
        for t in targets() {
            for &port in PORTS {
                if narrowed.permits(t, port).is_some() {
                    prop_assert!(base.permits(t, port).is_some(), "{t:?}:{port} widened past the policy");
                    prop_assert!(asked.permits(t, port).is_some(), "{t:?}:{port} widened past the request");
                }
                if let Target::Ip(ip) = t {
                    if narrowed.names_address(ip, port) {
                        prop_assert!(base.names_address(ip, port));
                    }
                }
            }
        }
        // Narrowing by the list itself changes nothing it permits.
        let (same, _) = base.narrow(&policy, &policy_ports);
        for t in targets() {
            for &port in PORTS {
                prop_assert_eq!(same.permits(t, port).is_some(), base.permits(t, port).is_some());
            }
        }
    }
}
