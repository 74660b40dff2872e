//! The allow-list of one run: the policy's, narrowed by the tenant's own
//! list when the policy names one, then by the call's `network` argument.
//! Each step can only take away.

use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_policy::network::{parse_allow_entry, this_host_problem, AllowList, Author, MAX_ENTRIES};
use prims_policy::{NetworkPolicy, Policy};
use prims_protocol::wire::{ErrorCode, ErrorReply};

/// What one run may reach through the proxy.
#[derive(Debug, Clone)]
pub(crate) struct NetCall {
    pub rules: Rules,
    pub budget: Budget,
    /// The call's entries the list in force does not cover.
    pub ignored: Vec<String>,
    /// The session's secrets, as variables of its interpreter: the name
    /// and its placeholder (set by [`NetCall::with_secrets`]).
    pub secret_env: Vec<(String, String)>,
}

impl NetCall {
    /// The secrets of a session of `tenant` placed in its run, and their
    /// placeholders for its interpreter.
    pub(crate) fn with_secrets(
        mut self,
        policy: &Policy,
        tenant: Option<&str>,
        placeholder: impl Fn(&str) -> String,
    ) -> NetCall {
        let (placements, env) = super::inspection::session_secrets(policy, tenant, placeholder);
        self.rules.placements = placements;
        self.secret_env = env;
        self
    }
}

/// The run's list, or `None` when the policy gives jailed code no way out.
pub(crate) fn call_rules(
    policy: &Policy,
    tenant: Option<&str>,
    asked: Option<&[String]>,
) -> Result<Option<NetCall>, ErrorReply> {
    let n = &policy.network;
    if n.mode != NetworkPolicy::Allowlist {
        if asked.is_some() {
            return Err(bad_request(format!(
                "network narrows the allow-list of network.mode = \"allowlist\"; this server's network.mode is \"{}\", so jailed code has no way out at all",
                match n.mode {
                    NetworkPolicy::None => "none",
                    NetworkPolicy::Loopback => "loopback",
                    NetworkPolicy::Allowlist => "allowlist",
                }
            )));
        }
        return Ok(None);
    }
    let parse = |entries: &[String]| {
        entries
            .iter()
            .map(|e| parse_allow_entry(e).map_err(|why| (e.clone(), why)))
            .collect::<Result<Vec<_>, _>>()
    };
    // The policy was validated when it was loaded.
    let mut list = AllowList::parse(&n.allow_entries(), &n.ports).unwrap_or_default();
    if let Some(own) = tenant.and_then(|t| n.tenants.get(t)) {
        let own = parse(own).unwrap_or_default();
        list = list.narrow(&own, &n.ports).0;
    }
    let mut ignored = Vec::new();
    if let Some(asked) = asked {
        if asked.len() > MAX_ENTRIES {
            return Err(bad_request(format!(
                "network has {} entries; at most {MAX_ENTRIES}",
                asked.len()
            )));
        }
        let entries =
            parse(asked).map_err(|(e, why)| bad_request(format!("network entry {e:?}: {why}")))?;
        // Refused like a malformed entry, not merely ignored: no list could
        // make it work, and the caller learns that its own loopback needs
        // no entry.
        for (text, entry) in asked.iter().zip(&entries) {
            if let Some(why) = this_host_problem(text, entry, Author::Call) {
                return Err(bad_request(format!("network entry {text:?}: {why}")));
            }
        }
        let (narrowed, dropped) = list.narrow(&entries, &n.ports);
        list = narrowed;
        ignored = dropped.iter().map(ToString::to_string).collect();
    }
    Ok(Some(NetCall {
        rules: Rules {
            list,
            inspect: true,
            passthrough: super::inspection::passthrough(policy),
            ..Rules::default()
        },
        budget: Budget {
            max_bytes: n.max_bytes.0,
            max_connections: u64::from(n.max_connections),
        },
        ignored,
        secret_env: Vec::new(),
    }))
}

fn bad_request(message: String) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::BadRequest,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prims_policy::network::Target;

    fn policy(text: &str) -> Policy {
        Policy::from_toml_str(text).unwrap()
    }

    #[test]
    fn tenant_and_call_only_narrow() {
        let p = policy(
            "[network]\nmode = \"allowlist\"\nallow = [\"pypi.org\", \"*.example.com\"]\n\
             [network.tenants]\nacme = [\"a.example.com\", \"pypi.org\"]\n",
        );
        let all = call_rules(&p, None, None).unwrap().unwrap();
        assert!(all
            .rules
            .list
            .permits(Target::Name("b.example.com"), 443)
            .is_some());
        let acme = call_rules(&p, Some("acme"), None).unwrap().unwrap();
        assert!(acme
            .rules
            .list
            .permits(Target::Name("b.example.com"), 443)
            .is_none());
        assert!(acme
            .rules
            .list
            .permits(Target::Name("a.example.com"), 443)
            .is_some());
        let asked = ["pypi.org".to_string(), "b.example.com".to_string()];
        let call = call_rules(&p, Some("acme"), Some(&asked)).unwrap().unwrap();
        assert!(call
            .rules
            .list
            .permits(Target::Name("pypi.org"), 443)
            .is_some());
        assert!(call
            .rules
            .list
            .permits(Target::Name("a.example.com"), 443)
            .is_none());
        assert_eq!(call.ignored, ["b.example.com"]);
    }

    #[test]
    fn bad_or_useless_requests_are_refused_with_a_reason() {
        let p = policy("[network]\nmode = \"allowlist\"\nallow = [\"pypi.org\"]\n");
        let err = call_rules(&p, None, Some(&["http://x".into()])).unwrap_err();
        assert!(
            err.message.starts_with("network entry \"http://x\":"),
            "{}",
            err.message
        );
        let none = policy("");
        let err = call_rules(&none, None, Some(&[])).unwrap_err();
        assert!(
            err.message.contains("network.mode is \"none\""),
            "{}",
            err.message
        );
        assert!(call_rules(&none, None, None).unwrap().is_none());
    }

    #[test]
    fn a_call_asking_for_this_host_is_refused_with_why() {
        let p = policy("[network]\nmode = \"allowlist\"\nallow = [\"pypi.org\", \"10.0.0.0/8\"]\n");
        let err = call_rules(
            &p,
            None,
            Some(&["pypi.org".into(), "127.0.0.1:8080".into()]),
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "network entry \"127.0.0.1:8080\": \"127.0.0.1:8080\" names this host (127.0.0.0/8, its loopback), which no run can reach: in a run's jail localhost, 127.0.0.1 and ::1 are the jail's own loopback, reached without the proxy; leave the entry out: code reaches its own loopback without one"
        );
        for asked in ["localhost", "[::1]:8443", "0.0.0.0/0"] {
            let err = call_rules(&p, None, Some(&[asked.to_string()])).unwrap_err();
            assert!(
                err.message
                    .starts_with(&format!("network entry {asked:?}: {asked:?} ")),
                "{}",
                err.message
            );
        }
        let wide = call_rules(&p, None, Some(&["0.0.0.0/0".into()])).unwrap_err();
        assert!(
            wide.message.ends_with("\"0.0.0.0/0\" includes this host (127.0.0.0/8, its loopback), which no run can reach: in a run's jail localhost, 127.0.0.1 and ::1 are the jail's own loopback, reached without the proxy; ask for ranges that leave it out"),
            "{}",
            wide.message
        );
    }
}
