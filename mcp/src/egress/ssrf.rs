//! The SSRF guard: which URLs, names and addresses the front-end may reach.
//! Public internet addresses are allowed; everything that reaches this host,
//! its network or a cloud's metadata service is refused unless the policy's
//! `egress.allow` names it.

use super::error::{Blocked, EgressError};
use prims_egress::guard::{blocked_name, classify};
use prims_policy::EgressRule;
use reqwest::Url;
use std::net::IpAddr;
use url::Host;

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
