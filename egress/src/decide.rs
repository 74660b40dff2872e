//! One connection's verdict: what the client named, checked against the
//! run's allow-list, then every address the proxy itself resolved it to,
//! checked against the guard. A name's private, loopback or metadata
//! addresses stay refused unless an IP or CIDR entry names them.

use crate::guard::{blocked_name, classify};
use crate::resolve::Resolver;
use crate::secrets::Placement;
use prims_policy::network::{AllowList, HostPattern, Target};
use std::net::{IpAddr, SocketAddr};

/// The rules of one run.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub list: AllowList,
    /// The addresses of allowed names are trusted as they are: for the
    /// package index hosts an admin configured, which may well be private.
    pub trust_named_addresses: bool,
    /// Refuses everything, for this reason (no run is in progress).
    pub closed: Option<String>,
    /// TLS to allowed hosts ends at the proxy, which checks each request
    /// ([`crate::inspect`]); but for the `passthrough` hosts, tunnelled.
    pub inspect: bool,
    pub passthrough: Vec<HostPattern>,
    /// The secrets the run's session may use.
    pub placements: Vec<Placement>,
}

impl Rules {
    /// Whether a tunnel to `host` is inspected.
    pub fn inspects(&self, host: &str) -> bool {
        let through = match host.parse::<IpAddr>() {
            Ok(ip) => self.passthrough.iter().any(|p| p.contains_ip(ip)),
            Err(_) => self.passthrough.iter().any(|p| p.matches_name(host)),
        };
        self.inspect && !through
    }
}

/// Where to connect, or why not (one sentence for the agent).
pub async fn decide(
    rules: &Rules,
    resolver: &Resolver,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, String> {
    if let Some(why) = &rules.closed {
        return Err(why.clone());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return match rules.list.permits(Target::Ip(ip), port) {
            Some(_) => Ok(vec![SocketAddr::new(ip, port)]),
            None => Err(not_listed(rules, Target::Ip(ip), host, port)),
        };
    }
    if rules.list.permits(Target::Name(host), port).is_none() {
        return Err(not_listed(rules, Target::Name(host), host, port));
    }
    if !rules.trust_named_addresses {
        if let Some(why) = blocked_name(host) {
            return Err(format!(
                "{host} is a {why}, which is never reachable by name"
            ));
        }
    }
    let ips = resolver.resolve(host).await?;
    let mut refused = Vec::new();
    let mut ok = Vec::new();
    for ip in ips {
        match classify(ip) {
            Some(why) if !rules.trust_named_addresses && !rules.list.names_address(ip, port) => {
                refused.push(format!("{ip} ({why})"))
            }
            _ => ok.push(SocketAddr::new(ip, port)),
        }
    }
    if ok.is_empty() {
        return Err(format!(
            "{host} resolves only to addresses that are not the public internet: {}; an IP or CIDR entry in the allow-list must name them",
            refused.join(", ")
        ));
    }
    Ok(ok)
}

/// Why `target` is refused: its port, or the host itself.
fn not_listed(rules: &Rules, target: Target<'_>, host: &str, port: u16) -> String {
    let on_other_ports: Vec<String> = rules
        .list
        .rules
        .iter()
        .filter(|r| match target {
            Target::Name(n) => r.host.matches_name(n),
            Target::Ip(ip) => r.host.contains_ip(ip),
        })
        .flat_map(|r| r.ports.iter().map(u16::to_string))
        .collect();
    if on_other_ports.is_empty() {
        format!("{host} is not in the allow-list")
    } else {
        format!(
            "port {port} is not allowed for {host} (allowed: {})",
            on_other_ports.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prims_policy::network::parse_allow_entry;

    fn rules(entries: &[&str]) -> Rules {
        let e: Vec<_> = entries
            .iter()
            .map(|s| parse_allow_entry(s).unwrap())
            .collect();
        Rules {
            list: AllowList::new(&e, &[80, 443]),
            trust_named_addresses: false,
            ..Rules::default()
        }
    }

    fn table() -> Resolver {
        Resolver::fixed(&[
            "pypi.org=151.101.0.223".into(),
            "sneaky.t.example=169.254.169.254".into(),
            "local.t.example=127.0.0.1".into(),
            "mixed.t.example=10.0.0.5,151.101.0.1".into(),
            "corp.example=10.1.2.3".into(),
        ])
        .unwrap()
    }

    async fn verdict(r: &Rules, host: &str, port: u16) -> Result<Vec<String>, String> {
        decide(r, &table(), host, port)
            .await
            .map(|v| v.iter().map(ToString::to_string).collect())
    }

    #[tokio::test]
    async fn names_and_ports_of_the_list() {
        let r = rules(&["pypi.org", "*.t.example", "10.1.2.3:8080"]);
        assert_eq!(
            verdict(&r, "pypi.org", 443).await.unwrap(),
            ["151.101.0.223:443"]
        );
        let port = verdict(&r, "pypi.org", 22).await.unwrap_err();
        assert_eq!(
            port,
            "port 22 is not allowed for pypi.org (allowed: 80, 443)"
        );
        let out = verdict(&r, "evil.test", 443).await.unwrap_err();
        assert_eq!(out, "evil.test is not in the allow-list");
        assert_eq!(
            verdict(&r, "10.1.2.3", 8080).await.unwrap(),
            ["10.1.2.3:8080"]
        );
        assert!(verdict(&r, "10.1.2.4", 8080).await.is_err());
    }

    #[tokio::test]
    async fn allowed_names_never_reach_refused_addresses() {
        let r = rules(&["*.t.example"]);
        let meta = verdict(&r, "sneaky.t.example", 80).await.unwrap_err();
        assert!(meta.contains("169.254.169.254 (link-local"), "{meta}");
        assert!(verdict(&r, "local.t.example", 80)
            .await
            .unwrap_err()
            .contains("127.0.0.1 (loopback"));
        // Only the public half of a mixed answer is used.
        assert_eq!(
            verdict(&r, "mixed.t.example", 443).await.unwrap(),
            ["151.101.0.1:443"]
        );
        // An entry naming the address reopens it, on its ports.
        let r = rules(&["corp.example", "10.1.2.3:443"]);
        assert_eq!(
            verdict(&r, "corp.example", 443).await.unwrap(),
            ["10.1.2.3:443"]
        );
        assert!(verdict(&r, "corp.example", 80).await.is_err());
    }

    #[tokio::test]
    async fn configured_index_hosts_keep_their_private_addresses() {
        let mut r = rules(&["corp.example:3141"]);
        r.trust_named_addresses = true;
        assert_eq!(
            verdict(&r, "corp.example", 3141).await.unwrap(),
            ["10.1.2.3:3141"]
        );
    }
}
