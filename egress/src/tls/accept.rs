//! The jail's side of an inspected tunnel: the client's hello is read
//! first, and its server name must be the host the tunnel was allowed for
//! (a name the client sends for one host while the tunnel leads to
//! another is domain fronting). A client that sends none may reach an IP
//! address it named in `CONNECT`, never a host name.

use super::authority::Authority;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::LazyConfigAcceptor;

/// Serves `conn` the leaf of `host` once its hello names `host`; the error
/// is the reason, for the run's record.
pub async fn accept(
    conn: TcpStream,
    host: &str,
    authority: &Authority,
) -> Result<TlsStream<TcpStream>, String> {
    let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), conn);
    let start = acceptor.await.map_err(|e| {
        format!("the tunnel to {host} did not begin with a TLS hello ({e}); the proxy inspects TLS to this host and carries nothing else through CONNECT")
    })?;
    let named = start
        .client_hello()
        .server_name()
        .map(str::to_ascii_lowercase);
    match named.as_deref() {
        Some(sni) if sni == host => {}
        None if host.parse::<std::net::IpAddr>().is_ok() => {}
        None => {
            return Err(format!(
                "the TLS hello to {host} names no server; a host name must be named"
            ))
        }
        Some(sni) => {
            return Err(format!(
                "the TLS hello names {sni:?} in a tunnel to {host}: domain fronting is refused"
            ))
        }
    }
    let config = authority.server_config(host).map_err(|e| e.to_string())?;
    start
        .into_stream(config)
        .await
        .map_err(|e| format!("TLS with the client failed: {e}"))
}
