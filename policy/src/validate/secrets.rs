//! `[secrets.NAME]`: each a variable name jailed code may see, one source,
//! hosts the egress proxy inspects and `network.allow` allows, one header
//! a value may be placed in, and the tenants that get it.

use super::findings::Findings;
use crate::network::{parse_allow_entry, AllowList, HostPattern};
use crate::schema::{NetworkPolicy, Policy, Secret, SecretKind, SecretSource, Tls};
use crate::spans::KeyPath;

/// The most secrets one policy holds.
pub const MAX_SECRETS: usize = 64;
/// The most hosts one secret may be placed on.
const MAX_HOSTS: usize = 16;
const MAX_NAME_BYTES: usize = 64;

/// Variables the jail's own setup sets, or that steer its clients (proxies,
/// CA bundles, the interpreter): a secret's placeholder never replaces one.
const RESERVED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "TERM",
    "TZ",
    "TMPDIR",
    "PWD",
    "MPLBACKEND",
    "LOKY_MAX_CPU_COUNT",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];
const RESERVED_PREFIXES: &[&str] = &["PRIMS_", "PYTHON", "PIP_", "UV_", "LC_", "LD_"];

/// Request headers whose value is the connection's or the framing's, not
/// a credential's.
const NOT_A_CREDENTIAL_HEADER: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "expect",
    "content-type",
    "content-encoding",
];

pub(super) fn check(p: &Policy, f: &mut Findings) {
    if p.secrets.len() > MAX_SECRETS {
        f.add(
            KeyPath::new(&["secrets"]),
            format!(
                "{} secrets is too many (at most {MAX_SECRETS})",
                p.secrets.len()
            ),
        );
    }
    let n = &p.network;
    let allowed: Vec<_> = n
        .allow
        .iter()
        .filter_map(|a| parse_allow_entry(&a.host).ok().map(|e| (e, a.tls)))
        .collect();
    let all = AllowList::new(
        &allowed.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
        &n.ports,
    );
    for (name, s) in &p.secrets {
        let at = |k: &str| KeyPath::new(&["secrets", name, k]);
        let whole = KeyPath::new(&["secrets", name]);
        if let Some(problem) = name_problem(name, s.kind) {
            f.add(whole.clone(), problem);
        }
        if n.mode != NetworkPolicy::Allowlist {
            f.add(
                whole.clone(),
                "a secret is placed by the egress proxy, which runs only with network.mode = \
                 \"allowlist\""
                    .to_string(),
            );
        }
        source(s, (&at, &whole), f);
        if s.hosts.is_empty() || s.hosts.len() > MAX_HOSTS {
            f.add(
                at("hosts"),
                format!("names {} hosts (1 to {MAX_HOSTS})", s.hosts.len()),
            );
        }
        for (i, host) in s.hosts.iter().enumerate() {
            if let Some(problem) = host_problem(host, (&all, &allowed), &n.ports) {
                f.add(at("hosts").index(i), problem);
            }
        }
        header(s, &at, f);
        tenants(s, &at, f);
        aws(s, (&at, &whole), f);
    }
}

fn name_problem(name: &str, kind: SecretKind) -> Option<String> {
    let shape = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !shape {
        return Some(format!(
            "{name:?} is not an environment variable name the jail can be given (A-Z, 0-9 and _, \
             not starting with a digit, at most {MAX_NAME_BYTES} bytes)"
        ));
    }
    let reserved =
        RESERVED.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p));
    if reserved {
        let hint = if name.starts_with("AWS_") && kind == SecretKind::Token {
            ": an AWS key pair is kind = \"aws\", whose placeholders are AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY"
        } else {
            ""
        };
        return Some(format!(
            "{name} is a variable the jail sets or its clients read for themselves; name the \
             secret otherwise{hint}"
        ));
    }
    None
}

fn source(s: &Secret, (at, whole): (&dyn Fn(&str) -> KeyPath, &KeyPath), f: &mut Findings) {
    match s.source() {
        None => f.add_or(
            at("file"),
            whole.clone(),
            "names where its value comes from once: file, env or credential".to_string(),
        ),
        Some(SecretSource::File(path)) if !path.is_absolute() => f.add(
            at("file"),
            format!("{} is not an absolute path", path.display()),
        ),
        Some(SecretSource::Env(var)) if !is_env_name(var) => f.add(
            at("env"),
            format!("{var:?} is not an environment variable name"),
        ),
        Some(SecretSource::Credential(c))
            if c.is_empty()
                || c.len() > 255
                || !c
                    .chars()
                    .all(|x| x.is_ascii_alphanumeric() || matches!(x, '_' | '-' | '.'))
                || c.starts_with('.') =>
        {
            f.add(
                at("credential"),
                format!("{c:?} is not a systemd credential name (letters, digits, _ - .)"),
            )
        }
        Some(_) => {}
    }
}

fn is_env_name(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 255
        && !v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why `host` cannot carry a secret: not a name, not allowed, or tunnelled.
fn host_problem(
    host: &str,
    (all, allowed): (&AllowList, &[(crate::network::AllowEntry, Tls)]),
    ports: &[u16],
) -> Option<String> {
    let entry = match parse_allow_entry(host) {
        Ok(e) => e,
        Err(problem) => return Some(problem),
    };
    if matches!(entry.host, HostPattern::Net { .. }) {
        return Some(format!(
            "{host} is an address: a secret is placed only for a host name, which the TLS \
             server name and Host must both name"
        ));
    }
    let (_, dropped) = all.narrow(std::slice::from_ref(&entry), ports);
    if !dropped.is_empty() {
        return Some(format!(
            "{host} is not within network.allow (on its ports): a secret is placed only on a \
             host its session may reach"
        ));
    }
    let tunnelled = allowed
        .iter()
        .find(|(a, tls)| *tls == Tls::Passthrough && entry.host.within(&a.host));
    tunnelled.map(|(a, _)| {
        format!(
            "{host} is within network.allow's {a}, whose TLS is tunnelled (tls = \
             \"passthrough\"): a secret is placed only where TLS is inspected"
        )
    })
}

fn header(s: &Secret, at: &dyn Fn(&str) -> KeyPath, f: &mut Findings) {
    let h = &s.header;
    let token = !h.is_empty()
        && h.len() <= 64
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        f.add(
            at("header"),
            format!("{h:?} is not an HTTP header name (at most 64 token characters)"),
        );
    } else if NOT_A_CREDENTIAL_HEADER.contains(&h.to_ascii_lowercase().as_str())
        || h.to_ascii_lowercase().starts_with("proxy-")
    {
        f.add(
            at("header"),
            format!("{h} carries the request's framing or routing, not a credential"),
        );
    } else if s.kind == SecretKind::Aws && !h.eq_ignore_ascii_case("authorization") {
        f.add(
            at("header"),
            "an AWS key pair signs the Authorization header (SigV4); leave header out".to_string(),
        );
    }
}

fn tenants(s: &Secret, at: &dyn Fn(&str) -> KeyPath, f: &mut Findings) {
    let Some(list) = &s.tenants else { return };
    if list.is_empty() {
        f.add(
            at("tenants"),
            "is empty, so no session would get the secret (leave it out for every tenant)"
                .to_string(),
        );
    }
    for (i, t) in list.iter().enumerate() {
        if t.is_empty() || t.len() > 256 || t.chars().any(char::is_control) {
            f.add(
                at("tenants").index(i),
                format!("{t:?} is not a tenant name (1 to 256 bytes, no control characters)"),
            );
        }
    }
}

fn aws(s: &Secret, (at, whole): (&dyn Fn(&str) -> KeyPath, &KeyPath), f: &mut Findings) {
    match (s.kind, &s.access_key_id) {
        (SecretKind::Aws, None) => f.add_or(
            at("access_key_id"),
            whole.clone(),
            "kind = \"aws\" needs the access key id that goes with the secret key".to_string(),
        ),
        (SecretKind::Aws, Some(id))
            if id.len() < 16
                || id.len() > 128
                || !id
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) =>
        {
            f.add(
                at("access_key_id"),
                format!("{id:?} is not an AWS access key id (16 to 128 of A-Z and 0-9)"),
            )
        }
        (SecretKind::Token, Some(_)) => f.add(
            at("access_key_id"),
            "belongs to kind = \"aws\" only".to_string(),
        ),
        _ => {}
    }
}
