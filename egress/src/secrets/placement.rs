//! A secret as one run may use it: where its value may go, and the
//! placeholders that stand for it. Sent with each run; never a value.

use prims_policy::network::HostPattern;
use prims_policy::SecretKind;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// One secret as a run may use it: sent with each run, never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The policy's name for it (`[secrets.NAME]`).
    pub name: String,
    pub kind: SecretKind,
    /// Where the value may go.
    pub hosts: Vec<HostPattern>,
    /// The one header it may go in (for `aws`, the signature's).
    pub header: String,
    /// What the session holds instead of the value (for `aws`, of the
    /// secret key).
    pub placeholder: String,
    /// `aws`: what the session holds instead of the access key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id_placeholder: Option<String>,
}

impl Placement {
    /// Whether requests to `host` may carry the value.
    pub fn serves(&self, host: &str) -> bool {
        self.hosts.iter().any(|p| covers(p, host))
    }

    /// Every placeholder the session holds for it.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.placeholder.as_str()).chain(self.key_id_placeholder.as_deref())
    }

    /// Where it may go, in words.
    pub fn rule(&self) -> String {
        let hosts: Vec<String> = self.hosts.iter().map(show).collect();
        format!(
            "secret {} is placed only in the {} header of HTTPS requests to {}",
            self.name,
            self.header,
            hosts.join(", ")
        )
    }
}

fn covers(p: &HostPattern, host: &str) -> bool {
    match host.parse::<IpAddr>() {
        Ok(ip) => p.contains_ip(ip),
        Err(_) => p.matches_name(host),
    }
}

fn show(p: &HostPattern) -> String {
    match p {
        HostPattern::Name(n) => n.clone(),
        HostPattern::Below(s) => format!("*.{s}"),
        HostPattern::Net { addr, prefix } => format!("{addr}/{prefix}"),
    }
}
