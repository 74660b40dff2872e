//! One run's record of the proxy's decisions, aggregated per host and port,
//! with a cap on the distinct entries kept.

use prims_protocol::egress::{AllowedHost, DeniedHost, NetworkReport, MAX_REPORTED};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Log {
    report: Mutex<NetworkReport>,
}

impl Log {
    fn report(&self) -> std::sync::MutexGuard<'_, NetworkReport> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection to `host:port` was let through.
    pub fn allowed(&self, host: &str, port: u16) {
        let mut r = self.report();
        if let Some(a) = r
            .allowed
            .iter_mut()
            .find(|a| a.host == host && a.port == port)
        {
            a.connections += 1;
        } else if r.allowed.len() < MAX_REPORTED {
            r.allowed.push(AllowedHost {
                host: host.to_string(),
                port,
                bytes: 0,
                connections: 1,
            });
        } else {
            r.allowed_omitted += 1;
        }
    }

    /// `n` more bytes moved on a connection to `host:port`.
    pub fn moved(&self, host: &str, port: u16, n: u64) {
        let mut r = self.report();
        if let Some(a) = r
            .allowed
            .iter_mut()
            .find(|a| a.host == host && a.port == port)
        {
            a.bytes = a.bytes.saturating_add(n);
        }
    }

    /// A connection to `host:port` was refused or cut, for `reason`.
    pub fn denied(&self, host: &str, port: u16, reason: &str) {
        self.denied_times(host, port, reason, 1);
    }

    fn denied_times(&self, host: &str, port: u16, reason: &str, n: u64) {
        let mut r = self.report();
        if let Some(d) = r
            .denied
            .iter_mut()
            .find(|d| d.host == host && d.port == port && d.reason == reason)
        {
            d.attempts = d.attempts.saturating_add(n);
        } else if r.denied.len() < MAX_REPORTED {
            r.denied.push(DeniedHost {
                host: host.to_string(),
                port,
                reason: reason.to_string(),
                attempts: n,
            });
        } else {
            r.denied_omitted = r.denied_omitted.saturating_add(n);
        }
    }

    pub fn snapshot(&self) -> NetworkReport {
        self.report().clone()
    }

    /// Takes over `other`'s refusals (a jail's attempts while no call ran).
    pub fn absorb(&self, other: &Log) {
        let (denied, omitted) = {
            let mut o = other.report();
            (
                std::mem::take(&mut o.denied),
                std::mem::take(&mut o.denied_omitted),
            )
        };
        for d in denied {
            self.denied_times(&d.host, d.port, &d.reason, d.attempts);
        }
        let mut r = self.report();
        r.denied_omitted = r.denied_omitted.saturating_add(omitted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_aggregate_and_are_capped() {
        let log = Log::default();
        log.allowed("pypi.org", 443);
        log.allowed("pypi.org", 443);
        log.moved("pypi.org", 443, 10);
        log.moved("pypi.org", 443, 5);
        for i in 0..(MAX_REPORTED + 3) {
            log.denied(&format!("h{i}.test"), 443, "h is not in the allow-list");
        }
        log.denied("h0.test", 443, "h is not in the allow-list");
        let r = log.snapshot();
        assert_eq!(
            r.allowed,
            [AllowedHost {
                host: "pypi.org".into(),
                port: 443,
                bytes: 15,
                connections: 2
            }]
        );
        assert_eq!(r.denied.len(), MAX_REPORTED);
        assert_eq!(r.denied[0].attempts, 2);
        assert_eq!(r.denied_omitted, 3);
    }
}
