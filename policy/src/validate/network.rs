//! `[network]`: the allow-list entries, the tenants' narrower lists, and
//! the proxy's per-run budgets. An entry naming this host itself is an
//! error: no run could ever reach it.

use super::findings::Findings;
use crate::network::{parse_allow_entry, this_host_problem, AllowList, Author, MAX_ENTRIES};
use crate::schema::Policy;
use crate::spans::KeyPath;
use crate::units::ByteSize;

/// The most default ports.
const MAX_PORTS: usize = 64;
const MIN_MAX_BYTES: ByteSize = ByteSize::kib(1);
const MAX_CONNECTIONS: u32 = 4096;
/// Tenant names are the front-end's; the supervisor refuses longer ones.
const MAX_TENANT_BYTES: usize = 256;

pub(super) fn check(p: &Policy, f: &mut Findings) {
    let n = &p.network;
    let at = |k: &str| KeyPath::new(&["network", k]);
    let mut parsed = Vec::new();
    entries(&n.allow_entries(), at("allow"), f, &mut parsed);
    upstream_ca(&n.upstream_ca, f);
    if n.ports.len() > MAX_PORTS {
        f.add(
            at("ports"),
            format!("{} ports is too many (at most {MAX_PORTS})", n.ports.len()),
        );
    }
    for (i, port) in n.ports.iter().enumerate() {
        if *port == 0 {
            f.add(
                at("ports").index(i),
                "0 is not a port (1 to 65535)".to_string(),
            );
        }
    }
    if n.max_bytes < MIN_MAX_BYTES {
        f.add(
            at("max_bytes"),
            format!("{} is too small (at least {MIN_MAX_BYTES})", n.max_bytes),
        );
    }
    if n.max_connections == 0 || n.max_connections > MAX_CONNECTIONS {
        f.add(
            at("max_connections"),
            format!(
                "{} is out of range (1 to {MAX_CONNECTIONS})",
                n.max_connections
            ),
        );
    }
    let base = AllowList::new(&parsed, &n.ports);
    for (tenant, list) in &n.tenants {
        let key = KeyPath::new(&["network", "tenants", tenant]);
        if tenant.is_empty()
            || tenant.len() > MAX_TENANT_BYTES
            || tenant.chars().any(char::is_control)
        {
            f.add(key.clone(), format!("{tenant:?} is not a tenant name (1 to {MAX_TENANT_BYTES} bytes, no control characters)"));
        }
        let mut own = Vec::new();
        entries(list, key.clone(), f, &mut own);
        // An entry the policy's list does not cover allows nothing: say so
        // rather than let the admin believe the tenant can reach it.
        let (_, dropped) = base.narrow(&own, &n.ports);
        for d in dropped {
            if let Some(i) = list
                .iter()
                .position(|t| parse_allow_entry(t).as_ref() == Ok(&d))
            {
                f.add(
                    key.clone().index(i),
                    format!(
                        "{d} is not within network.allow (on its ports), so it would allow nothing"
                    ),
                );
            }
        }
    }
}

/// The most `upstream_ca` files.
const MAX_UPSTREAM_CA: usize = 16;

/// Paths the supervisor reads at start: absolute, and few.
fn upstream_ca(files: &[std::path::PathBuf], f: &mut Findings) {
    let key = KeyPath::new(&["network", "upstream_ca"]);
    if files.len() > MAX_UPSTREAM_CA {
        f.add(
            key.clone(),
            format!(
                "{} files is too many (at most {MAX_UPSTREAM_CA})",
                files.len()
            ),
        );
    }
    for (i, file) in files.iter().enumerate() {
        if !file.is_absolute() {
            f.add(
                key.clone().index(i),
                format!("{} is not an absolute path", file.display()),
            );
        }
    }
}

/// Parses every entry of `list` into `out`, a finding for each bad one.
fn entries(
    list: &[String],
    key: KeyPath,
    f: &mut Findings,
    out: &mut Vec<crate::network::AllowEntry>,
) {
    if list.len() > MAX_ENTRIES {
        f.add(
            key.clone(),
            format!("{} entries is too many (at most {MAX_ENTRIES})", list.len()),
        );
    }
    for (i, text) in list.iter().enumerate() {
        match parse_allow_entry(text) {
            Ok(e) => match this_host_problem(text, &e, Author::Policy) {
                Some(problem) => f.add(key.clone().index(i), problem),
                None => out.push(e),
            },
            Err(problem) => f.add(key.clone().index(i), problem),
        }
    }
}
