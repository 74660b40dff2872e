//! `[secrets.NAME]`, `network.upstream_ca` and an allow entry's `tls`: the
//! policy the egress proxy's secret placement and TLS inspection read.

use prims_policy::{Issue, Policy, SecretKind, SecretSource, Tls};

fn issues(text: &str) -> Vec<String> {
    match Policy::from_toml_str(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.issues().iter().map(Issue::to_string).collect(),
    }
}

const NETWORK: &str = "[network]\nmode = \"allowlist\"\n\
    allow = [\"api.example.com\", \"*.s3.example.net\", { host = \"cdn.example.org\", tls = \"passthrough\" }]\n\
    upstream_ca = [\"/etc/prims/extra-roots.pem\"]\n";

#[test]
fn the_documented_secret_is_accepted_as_written() {
    let text = format!(
        "{NETWORK}\n[secrets.EXAMPLE_TOKEN]\nfile = \"/etc/prims/secrets/example-token\"\n\
         hosts = [\"api.example.com\"]\nheader = \"Authorization\"\ntenants = [\"acme\"]\n\
         [secrets.STORE]\nkind = \"aws\"\nenv = \"STORE_SECRET_KEY\"\n\
         access_key_id = \"AKIAIOSFODNN7EXAMPLE\"\nhosts = [\"*.s3.example.net\"]\n\
         [secrets.OTHER]\ncredential = \"other-token\"\nhosts = [\"api.example.com\"]\n"
    );
    let p = Policy::from_toml_str(&text).unwrap();
    let t = &p.secrets["EXAMPLE_TOKEN"];
    assert_eq!(
        t.source(),
        Some(SecretSource::File(
            "/etc/prims/secrets/example-token".as_ref()
        ))
    );
    assert_eq!(t.header, "Authorization");
    assert!(t.for_tenant(Some("acme")) && !t.for_tenant(Some("other")) && !t.for_tenant(None));
    assert_eq!(p.secrets["STORE"].kind, SecretKind::Aws);
    assert_eq!(p.secrets["OTHER"].header, "Authorization");
    assert!(p.secrets["OTHER"].for_tenant(None));
    assert_eq!(p.network.allow[2].tls, Tls::Passthrough);
    assert_eq!(p.network.allow[0].tls, Tls::Inspect);
    assert_eq!(
        p.network.allow_entries(),
        ["api.example.com", "*.s3.example.net", "cdn.example.org"]
    );
    // Written back, plain entries stay strings and the table stays a table.
    let again = Policy::from_toml_str(&p.to_toml_string()).unwrap();
    assert_eq!((again.network, again.secrets), (p.network, p.secrets));
}

#[test]
fn every_rule_of_a_secret_says_what_is_wrong_where() {
    let text = format!(
        "{NETWORK}\n[secrets.\"lower\"]\nfile = \"/x\"\nhosts = [\"api.example.com\"]\n\
         [secrets.PATH]\nfile = \"/x\"\nhosts = [\"api.example.com\"]\n\
         [secrets.AWS_SECRET_ACCESS_KEY]\nfile = \"/x\"\nhosts = [\"api.example.com\"]\n\
         [secrets.TWO_SOURCES]\nfile = \"/x\"\nenv = \"Y\"\nhosts = [\"api.example.com\"]\n\
         [secrets.RELATIVE]\nfile = \"x\"\nhosts = [\"api.example.com\"]\n\
         [secrets.HOSTS]\nenv = \"V\"\nhosts = [\"evil.example\", \"10.0.0.1\", \"cdn.example.org\"]\n\
         [secrets.NO_HOSTS]\nenv = \"V\"\nhosts = []\n\
         [secrets.HEADER]\nenv = \"V\"\nhosts = [\"api.example.com\"]\nheader = \"Host\"\n\
         [secrets.BAD_HEADER]\nenv = \"V\"\nhosts = [\"api.example.com\"]\nheader = \"X Token\"\n\
         [secrets.NOBODY]\nenv = \"V\"\nhosts = [\"api.example.com\"]\ntenants = []\n\
         [secrets.KEYLESS]\nkind = \"aws\"\nenv = \"V\"\nhosts = [\"*.s3.example.net\"]\n\
         [secrets.STRAY_ID]\nenv = \"V\"\nhosts = [\"api.example.com\"]\naccess_key_id = \"AKIAIOSFODNN7EXAMPLE\"\n"
    );
    let got = issues(&text);
    let want = [
        "secrets.AWS_SECRET_ACCESS_KEY: AWS_SECRET_ACCESS_KEY is a variable the jail sets or its clients read for themselves; name the secret otherwise: an AWS key pair is kind = \"aws\", whose placeholders are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        "secrets.BAD_HEADER.header: \"X Token\" is not an HTTP header name (at most 64 token characters)",
        "secrets.HEADER.header: Host carries the request's framing or routing, not a credential",
        "secrets.HOSTS.hosts[0]: evil.example is not within network.allow (on its ports): a secret is placed only on a host its session may reach",
        "secrets.HOSTS.hosts[1]: 10.0.0.1 is an address: a secret is placed only for a host name, which the TLS server name and Host must both name",
        "secrets.HOSTS.hosts[2]: cdn.example.org is within network.allow's cdn.example.org, whose TLS is tunnelled (tls = \"passthrough\"): a secret is placed only where TLS is inspected",
        "secrets.KEYLESS.access_key_id: kind = \"aws\" needs the access key id that goes with the secret key",
        "secrets.NOBODY.tenants: is empty, so no session would get the secret (leave it out for every tenant)",
        "secrets.NO_HOSTS.hosts: names 0 hosts (1 to 16)",
        "secrets.PATH: PATH is a variable the jail sets or its clients read for themselves; name the secret otherwise",
        "secrets.RELATIVE.file: x is not an absolute path",
        "secrets.STRAY_ID.access_key_id: belongs to kind = \"aws\" only",
        "secrets.TWO_SOURCES.file: names where its value comes from once: file, env or credential",
        "secrets.lower: \"lower\" is not an environment variable name the jail can be given (A-Z, 0-9 and _, not starting with a digit, at most 64 bytes)",
    ];
    let mut bare: Vec<String> = got
        .iter()
        .map(|m| m.split(" at line ").next().unwrap_or(m).to_string())
        .collect();
    bare.sort();
    assert_eq!(bare, want, "{got:#?}");
    // Each is located in the file.
    assert!(got.iter().all(|m| m.contains(" at line ")), "{got:#?}");
}

#[test]
fn a_secret_needs_the_allowlist_proxy() {
    let text = "[secrets.T]\nenv = \"V\"\nhosts = [\"api.example.com\"]\n";
    let got = issues(text);
    assert!(
        got.iter().any(|m| m.starts_with(
            "secrets.T: a secret is placed by the egress proxy, which runs only with network.mode = \"allowlist\""
        )),
        "{got:#?}"
    );
}

#[test]
fn an_allow_table_and_upstream_ca_are_checked() {
    let got = issues(
        "[network]\nmode = \"allowlist\"\nallow = [{ host = \"a.example\", tls = \"open\" }]\n",
    );
    assert_eq!(
        got,
        ["network.allow[0].tls: unknown value \"open\" (expected one of: inspect, passthrough) at line 3, column 38"]
    );
    let got = issues("[network]\nallow = [{ tls = \"passthrough\" }]\n");
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with("network.allow[0]") && got[0].contains("host"),
        "{got:#?}"
    );
    let got = issues("[network]\nallow = [{ host = \"a.example\", port = 1 }]\n");
    assert_eq!(
        got,
        ["network.allow[0]: unknown key (expected one of: host, tls) at line 2, column 10"]
    );
    let got = issues("[network]\nupstream_ca = [\"roots.pem\"]\n");
    assert_eq!(
        got,
        ["network.upstream_ca[0]: roots.pem is not an absolute path at line 2, column 16"]
    );
}
