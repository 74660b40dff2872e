//! `[secrets.NAME]`: credentials that jailed code uses without holding
//! them. The session's environment has `NAME` set to a placeholder of its
//! own; the egress proxy, outside the jail, puts the value in place of the
//! placeholder in one header of requests to the secret's hosts, and
//! nowhere else. The value is read by the supervisor from a file, the
//! server's environment or a systemd credential, and is never written
//! under the state directory.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    /// `token` (placed as it is, or in Basic auth) or `aws` (requests
    /// re-signed with SigV4).
    #[serde(default)]
    pub kind: SecretKind,
    /// A file holding the value (root's, not under the state directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// A variable of the server's own environment holding the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// A systemd credential (`LoadCredential=`) holding the value, read
    /// from `$CREDENTIALS_DIRECTORY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// Where the placeholder becomes the value: host names (or
    /// `*.domain`), each allowed by `network.allow` and inspected.
    pub hosts: Vec<String>,
    /// The one request header the value may be placed in.
    #[serde(default = "authorization")]
    pub header: String,
    /// Only these tenants' sessions get the secret; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<Vec<String>>,
    /// `kind = "aws"`: the access key id that goes with the secret key
    /// (the value). The jail sees placeholders for both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
}

fn authorization() -> String {
    "Authorization".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretKind {
    #[default]
    Token,
    Aws,
}

/// Where a secret's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSource<'a> {
    File(&'a std::path::Path),
    Env(&'a str),
    Credential(&'a str),
}

impl Secret {
    /// Its one source; `None` when it names none or more than one
    /// (validation refuses both).
    pub fn source(&self) -> Option<SecretSource<'_>> {
        match (&self.file, &self.env, &self.credential) {
            (Some(f), None, None) => Some(SecretSource::File(f)),
            (None, Some(e), None) => Some(SecretSource::Env(e)),
            (None, None, Some(c)) => Some(SecretSource::Credential(c)),
            _ => None,
        }
    }

    /// Whether `tenant`'s sessions get it.
    pub fn for_tenant(&self, tenant: Option<&str>) -> bool {
        match (&self.tenants, tenant) {
            (None, _) => true,
            (Some(list), Some(t)) => list.iter().any(|x| x == t),
            (Some(_), None) => false,
        }
    }
}
