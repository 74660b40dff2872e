//! What a proxied jail is given to reach the proxy: the port of its own
//! listener, the CA bundle, and the environment that points HTTP clients
//! at it.

/// The port of the listener in a proxied jail's own loopback.
pub(crate) const JAIL_PORT: u16 = 3128;

/// The CA bundle a proxied jail verifies TLS with, bound read-only with
/// the rest of `/etc/ssl` (the tunnel stays end to end).
pub(crate) const CA_DIR: &str = "/etc/ssl";
pub(crate) const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The environment that points HTTP clients in a proxied jail (requests,
/// urllib, httpx, pip, uv) at the proxy, for every host: an install jail's
/// index may well be on the host's loopback, which only the proxy reaches.
pub(crate) fn proxy_env() -> Vec<String> {
    let proxy = format!("http://127.0.0.1:{JAIL_PORT}");
    let mut env: Vec<String> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .iter()
    .map(|v| format!("{v}={proxy}"))
    .collect();
    if std::path::Path::new(CA_BUNDLE).is_file() {
        env.push(format!("SSL_CERT_FILE={CA_BUNDLE}"));
    }
    env
}

/// [`proxy_env`] for a run's jail, whose own loopback (servers the code
/// starts itself) is reached directly. With `bundle` (the system's roots
/// and the server's inspection CA, inside the jail), every client's CA
/// variable names it instead.
pub(crate) fn run_env(bundle: Option<&str>) -> Vec<String> {
    let mut env = proxy_env();
    if let Some(bundle) = bundle {
        env.retain(|v| !v.starts_with("SSL_CERT_FILE="));
        env.extend(
            super::inspection::CA_VARIABLES
                .iter()
                .map(|v| format!("{v}={bundle}")),
        );
    }
    env.push("NO_PROXY=localhost,127.0.0.1,::1".into());
    env.push("no_proxy=localhost,127.0.0.1,::1".into());
    env
}
