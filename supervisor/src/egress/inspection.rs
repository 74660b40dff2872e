//! What the supervisor keeps for inspecting TLS and placing secrets: the
//! server's CA (made at first start, its key root's alone), the bundle
//! jails trust (the system's roots and that CA), every secret's value read
//! from its source, and the placeholders of a session's secrets.

use prims_egress::control::ToProxy;
use prims_egress::secrets::{Placement, SecretText, SecretValue};
use prims_egress::tls::authority::{self, CaPem};
use prims_policy::network::parse_allow_entry;
use prims_policy::{Policy, SecretKind, SecretSource, Tls};
use std::path::{Path, PathBuf};

/// Where the CA lives under the state directory (0700, root's).
const CA_DIR: &str = "egress-ca";
/// Where the bundle jails trust lives under the state directory (0755),
/// bound read-only at [`TRUST_IN_JAIL`].
const TRUST_DIR: &str = "egress-trust";
pub(crate) const TRUST_IN_JAIL: &str = "/etc/prims";
const BUNDLE: &str = "ca-bundle.pem";
/// The system's roots, put first in the bundle.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The largest secret value read.
const MAX_VALUE: u64 = 64 * 1024;
/// The largest `upstream_ca` file read.
const MAX_PEM: u64 = 1024 * 1024;

/// The variables through which Python's clients (and git, curl, node)
/// find the bundle to verify TLS with.
pub(crate) const CA_VARIABLES: [&str; 8] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "AWS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "NODE_EXTRA_CA_CERTS",
    "HTTPLIB2_CA_CERTS",
];

/// The CA and the jails' bundle, as made or found at start.
#[derive(Debug)]
pub struct Trust {
    pub ca: CaPem,
    /// The host directory bound at `/etc/prims` in a proxied jail.
    pub dir: PathBuf,
}

impl Trust {
    /// The CA in `state_dir` (made when missing) and a bundle written
    /// afresh, so the system's roots are today's.
    pub fn prepare(state_dir: &Path) -> Result<Trust, String> {
        use std::os::unix::fs::PermissionsExt;
        let ca_dir = state_dir.join(CA_DIR);
        std::fs::create_dir_all(&ca_dir).map_err(|e| format!("{}: {e}", ca_dir.display()))?;
        std::fs::set_permissions(&ca_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", ca_dir.display()))?;
        let ca = authority::load_or_create(&ca_dir).map_err(|e| e.to_string())?;
        let dir = state_dir.join(TRUST_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut bundle = std::fs::read_to_string(SYSTEM_BUNDLE).unwrap_or_default();
        if !bundle.is_empty() && !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(&ca.cert);
        let path = dir.join(BUNDLE);
        let tmp = dir.join(format!("{BUNDLE}.new"));
        std::fs::write(&tmp, bundle)
            .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Trust { ca, dir })
    }

    /// The bundle's path inside a jail.
    pub fn bundle_in_jail() -> String {
        format!("{TRUST_IN_JAIL}/{BUNDLE}")
    }

    /// What the proxy is told at its start and at each reload: the CA, the
    /// admin's extra roots and every secret's value. An error names what
    /// could not be read (never a value).
    pub fn configure(&self, policy: &Policy) -> Result<ToProxy, String> {
        let mut upstream_ca = Vec::new();
        for path in &policy.network.upstream_ca {
            upstream_ca.push(
                read_limited(path, MAX_PEM)
                    .map_err(|e| format!("network.upstream_ca {}: {e}", path.display()))?,
            );
        }
        Ok(ToProxy::Configure {
            ca_cert: self.ca.cert.clone(),
            ca_key: SecretText::new(self.ca.key.to_string()),
            upstream_ca,
            secrets: read_values(policy)?,
        })
    }
}

/// Every secret's value, read from its source now.
pub fn read_values(policy: &Policy) -> Result<Vec<SecretValue>, String> {
    let mut out = Vec::new();
    for (name, s) in &policy.secrets {
        let value = match s.source() {
            Some(SecretSource::File(p)) => read_limited(p, MAX_VALUE),
            Some(SecretSource::Env(var)) => {
                std::env::var(var).map_err(|_| format!("the server's environment has no {var}"))
            }
            Some(SecretSource::Credential(c)) => match std::env::var_os("CREDENTIALS_DIRECTORY") {
                Some(dir) => read_limited(&Path::new(&dir).join(c), MAX_VALUE),
                None => Err("$CREDENTIALS_DIRECTORY is not set (systemd's LoadCredential=)".into()),
            },
            None => Err("it names no single source".into()),
        }
        .map_err(|e| format!("secrets.{name}: {e}"))?;
        // A file's trailing newline is not part of a key.
        let value = value.trim_end_matches(['\n', '\r']).to_string();
        if value.is_empty() {
            return Err(format!("secrets.{name}: the value is empty"));
        }
        let key_id = match s.kind {
            SecretKind::Aws => s.access_key_id.clone().map(SecretText::new),
            SecretKind::Token => None,
        };
        out.push(SecretValue {
            name: name.clone(),
            value: SecretText::new(value),
            key_id,
        });
    }
    Ok(out)
}

fn read_limited(path: &Path, max: u64) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    f.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > max {
        return Err(format!("{} is larger than {max} bytes", path.display()));
    }
    Ok(text)
}

/// The hosts of `network.allow` whose TLS is tunnelled, not inspected.
pub(crate) fn passthrough(policy: &Policy) -> Vec<prims_policy::network::HostPattern> {
    policy
        .network
        .allow
        .iter()
        .filter(|a| a.tls == Tls::Passthrough)
        .filter_map(|a| parse_allow_entry(&a.host).ok())
        .map(|e| e.host)
        .collect()
}

/// The secrets a session of `tenant` may use, with its placeholders, and
/// the variables that hold them in its interpreter.
pub(crate) fn session_secrets(
    policy: &Policy,
    tenant: Option<&str>,
    placeholder: impl Fn(&str) -> String,
) -> (Vec<Placement>, Vec<(String, String)>) {
    let mut placements = Vec::new();
    let mut env = Vec::new();
    for (name, s) in &policy.secrets {
        if !s.for_tenant(tenant) {
            continue;
        }
        let hosts = s
            .hosts
            .iter()
            .filter_map(|h| parse_allow_entry(h).ok())
            .map(|e| e.host)
            .collect();
        let ph = placeholder(name);
        let key_id_placeholder = match s.kind {
            SecretKind::Aws => {
                let id = placeholder(&format!("{name}/access_key_id"));
                // An access key id is upper-case letters and digits.
                let id = format!("PRIMS{}", id.to_ascii_uppercase().replace('-', ""));
                env.push(("AWS_ACCESS_KEY_ID".to_string(), id.clone()));
                env.push(("AWS_SECRET_ACCESS_KEY".to_string(), ph.clone()));
                Some(id)
            }
            SecretKind::Token => {
                env.push((name.clone(), ph.clone()));
                None
            }
        };
        placements.push(Placement {
            name: name.clone(),
            kind: s.kind,
            hosts,
            header: s.header.clone(),
            placeholder: ph,
            key_id_placeholder,
        });
    }
    (placements, env)
}
