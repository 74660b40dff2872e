//! Secrets at the edge: jailed code holds a placeholder of its session's,
//! and the proxy, outside the jail, puts the value in its place in the one
//! header and for the hosts the policy names ([`place`]), refuses the
//! placeholder anywhere else, and puts the placeholder back wherever an
//! upstream's answer repeats the value ([`stream`]). Values live only in
//! this process's memory ([`SecretText`], wiped when dropped); a reload
//! replaces them for every session's next request, placeholders unchanged.

pub mod place;
pub mod stream;
mod text;

pub use text::SecretText;

use prims_policy::network::HostPattern;
use prims_policy::SecretKind;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

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

/// A secret's value as the proxy holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    pub name: String,
    pub value: SecretText,
    /// `aws`: the access key id that goes with the secret key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<SecretText>,
}

/// Every value, by name: replaced whole at a reload, so a request sees
/// either the old values or the new ones.
#[derive(Debug, Clone, Default)]
pub struct Values(Arc<RwLock<Arc<HashMap<String, SecretValue>>>>);

impl Values {
    pub fn replace(&self, values: Vec<SecretValue>) {
        let map = values.into_iter().map(|v| (v.name.clone(), v)).collect();
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(map);
    }

    pub fn now(&self) -> Arc<HashMap<String, SecretValue>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
