//! What the egress proxy let through and refused for one run: the
//! `network` of a run's result in allowlist mode.

use serde::{Deserialize, Serialize};

/// Distinct entries each list holds at most; the rest are counted.
pub const MAX_REPORTED: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkReport {
    /// Hosts reached, in the order first reached.
    pub allowed: Vec<AllowedHost>,
    /// Connections refused or cut, in the order first seen.
    pub denied: Vec<DeniedHost>,
    /// Entries the call's `network` asked for that the allow-list in force
    /// does not cover, so they allowed nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    /// Distinct entries left out of each list past [`MAX_REPORTED`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub allowed_omitted: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub denied_omitted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedHost {
    /// As the code named it: a host name or an IP address.
    pub host: String,
    pub port: u16,
    /// Both directions, over every connection to it.
    pub bytes: u64,
    pub connections: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeniedHost {
    pub host: String,
    pub port: u16,
    /// One sentence: why, and what would allow it.
    pub reason: String,
    pub attempts: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
