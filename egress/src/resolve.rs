//! Name resolution of the proxy: the host's resolver, with a fixed table
//! in front of it that only the proxy's command line can give (tests map
//! their host names to local servers with it; no policy key reaches it).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long one lookup may take.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default)]
pub enum Resolver {
    #[default]
    System,
    /// Lowercase name to addresses; other names go to the host's resolver.
    Fixed(Arc<HashMap<String, Vec<IpAddr>>>),
}

impl Resolver {
    /// A fixed table from `name=ip[,ip...]` items.
    pub fn fixed(items: &[String]) -> Result<Resolver, String> {
        let mut table: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for item in items {
            let (name, addrs) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: write name=ip[,ip...]"))?;
            for a in addrs.split(',') {
                let ip: IpAddr = a
                    .parse()
                    .map_err(|_| format!("{item:?}: {a:?} is not an IP address"))?;
                table.entry(name.to_ascii_lowercase()).or_default().push(ip);
            }
        }
        Ok(Resolver::Fixed(Arc::new(table)))
    }

    /// Every address of `host`; an error is a sentence.
    pub async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, String> {
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        if let Resolver::Fixed(t) = self {
            if let Some(ips) = t.get(&host) {
                return Ok(ips.clone());
            }
        }
        let found =
            tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host.as_str(), 0)))
                .await
                .map_err(|_| format!("resolving {host} timed out"))?
                .map_err(|e| format!("{host} does not resolve ({e})"))?;
        let mut ips: Vec<IpAddr> = found.map(|a| a.ip()).collect();
        ips.dedup();
        if ips.is_empty() {
            return Err(format!("{host} has no addresses"));
        }
        Ok(ips)
    }
}
