//! Name resolution that applies the guard at connect time: every address a
//! name resolves to is checked when the connection is made, so a name that
//! resolves to a public address when checked and to a private one when used
//! (DNS rebinding) gains nothing.

use super::error::Blocked;
use super::ssrf::SsrfGuard;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

pub(crate) struct GuardedResolver {
    guard: Arc<SsrfGuard>,
}

impl GuardedResolver {
    pub(crate) fn new(guard: Arc<SsrfGuard>) -> Self {
        GuardedResolver { guard }
    }
}

/// Keeps the addresses `guard` allows for `host`; refuses when none is left.
fn filter(
    guard: &SsrfGuard,
    host: &str,
    addrs: impl IntoIterator<Item = SocketAddr>,
) -> Result<Vec<SocketAddr>, Blocked> {
    let mut allowed = Vec::new();
    let mut refused = None;
    for addr in addrs {
        match guard.check_addr(host, addr.ip()) {
            Ok(()) => allowed.push(addr),
            Err(b) => {
                tracing::debug!(host, addr = %addr.ip(), why = b.why, "egress: address refused");
                refused.get_or_insert(b);
            }
        }
    }
    match refused {
        Some(b) if allowed.is_empty() => Err(b),
        _ => Ok(allowed),
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = Arc::clone(&self.guard);
        let host = name.as_str().to_string();
        Box::pin(async move {
            guard.check_name(&host)?;
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if found.is_empty() {
                let msg = format!("{host} has no addresses");
                return Err(io::Error::new(io::ErrorKind::NotFound, msg).into());
            }
            let allowed = filter(&guard, &host, found).inspect_err(|b| {
                tracing::warn!(host, addr = ?b.addr, why = b.why, "egress: blocked at connect");
            })?;
            tracing::debug!(host, addrs = ?allowed, "egress: resolved");
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter()
            .map(|a| SocketAddr::new(a.parse().unwrap(), 0))
            .collect()
    }

    #[test]
    fn keeps_only_allowed_addresses() {
        let guard = SsrfGuard::default();
        // A rebinding answer mixing public and private: only public is used.
        let got = filter(
            &guard,
            "mixed.example",
            addrs(&["10.0.0.1", "8.8.8.8", "::1"]),
        );
        assert_eq!(got.unwrap(), addrs(&["8.8.8.8"]));
        let err = filter(
            &guard,
            "evil.example",
            addrs(&["127.0.0.1", "169.254.169.254"]),
        );
        let b = err.unwrap_err();
        assert_eq!(b.addr, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(b.host, "evil.example");
    }

    #[test]
    fn allow_rules_reopen_addresses() {
        let rule = prims_policy::parse_egress_rule("10.0.0.0/8").unwrap();
        let guard = SsrfGuard::new(vec![rule]);
        let got = filter(&guard, "files.corp", addrs(&["10.1.1.1", "192.168.1.1"]));
        assert_eq!(got.unwrap(), addrs(&["10.1.1.1"]));
    }
}
