//! The only way out of an install jail: the egress proxy (`prims-egress`),
//! served here, outside the jail, on a listener that lives in the jail's
//! own network namespace (the jail's init hands it over; see
//! `NetworkMode::Proxy`). It reaches the configured package index and
//! `find_links` hosts, on their ports, and nothing else: no host loopback,
//! no front-end, no metadata service. Those hosts' addresses are trusted
//! as they resolve, since an admin named them (an index may be private).

use super::key::Settings;
use crate::egress::EgressProxy;
use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_policy::network::{AllowEntry, AllowList, HostPattern};
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long to wait for the jail's listener after the jailer started.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(60);

/// What builds may reach: the index and `find_links` hosts, on their ports.
/// uv's default index is PyPI, whose files live on files.pythonhosted.org.
pub(super) fn index_rules(s: &Settings) -> Rules {
    let index = if s.index_url.is_empty() {
        "https://pypi.org/simple"
    } else {
        &s.index_url
    };
    let urls = std::iter::once(index)
        .chain(s.extra_index_urls.iter().map(String::as_str))
        .chain(s.find_links.iter().map(String::as_str));
    let mut entries = Vec::new();
    for u in urls {
        let Ok(url) = url::Url::parse(u) else {
            continue;
        };
        if !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            continue;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let pattern = match host.parse::<IpAddr>() {
            Ok(addr) => HostPattern::Net {
                addr,
                prefix: if addr.is_ipv4() { 32 } else { 128 },
            },
            Err(_) => HostPattern::Name(host.to_ascii_lowercase()),
        };
        entries.push(AllowEntry {
            host: pattern,
            port: Some(port),
        });
        if host.eq_ignore_ascii_case("pypi.org") {
            entries.push(AllowEntry {
                host: HostPattern::Name("files.pythonhosted.org".into()),
                port: Some(443),
            });
        }
    }
    Rules {
        list: AllowList::new(&entries, &[]),
        trust_named_addresses: true,
        // An install's TLS is tunnelled: the admin's index hosts, and no
        // secret of a session's.
        ..Rules::default()
    }
}

/// Receives the jail's listener on `channel` and has the egress proxy
/// serve it until `stop`. Returns when the build is over; a jail that never
/// sends a listener (it failed to start) just ends the wait.
pub(super) async fn serve(
    egress: Arc<EgressProxy>,
    channel: OwnedFd,
    rules: Rules,
    stop: CancellationToken,
) {
    let listener = tokio::select! {
        l = crate::egress::receive_listener(channel) => l,
        _ = stop.cancelled() => return,
        _ = tokio::time::sleep(LISTENER_TIMEOUT) => {
            tracing::warn!("the install jail sent no proxy listener");
            return;
        }
    };
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "no proxy listener from the install jail");
            return;
        }
    };
    // Builds are bounded by their disk and time, not by bytes moved.
    let budget = Budget {
        max_bytes: u64::MAX,
        max_connections: u64::MAX,
    };
    let served = async {
        let jail = egress.attach(listener).await?;
        let run = jail.begin(&rules, budget).await?;
        stop.cancelled().await;
        let report = jail.end(run).await;
        for d in &report.denied {
            tracing::info!(host = %d.host, port = d.port, reason = %d.reason, "install jail: refused a connection");
        }
        Ok::<_, crate::egress::EgressError>(())
    };
    if let Err(e) = served.await {
        tracing::error!(error = %e, "the egress proxy could not serve an install jail");
    }
}
