//! An inspected tunnel: once `CONNECT` to an allowed host is answered, the
//! jail's TLS ends here ([`crate::tls::accept`]) and the proxy opens its
//! own to the upstream, verified whatever the jail would accept. Each
//! request in between is read whole-head: its `Host` must name the tunnel's
//! host (domain fronting is refused), its budget must hold, and only then
//! are secrets placed ([`crate::secrets::place`]). Bodies stream through
//! `body::Watched`, which charges them to the run and watches them.

mod body;
mod exchange;

pub use body::Boxed;

use crate::run::Run;
use crate::secrets::Values;
use crate::tls::authority::Authority;
use crate::tls::upstream::server_name;
use exchange::{Exchange, Sender};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// What inspecting needs, set by the supervisor and replaced whole at a
/// reload.
#[derive(Debug)]
pub struct Tls {
    pub authority: Authority,
    pub upstream: Arc<ClientConfig>,
}

/// The proxy's inspection state, shared by every listener.
#[derive(Debug, Clone)]
pub struct Inspection {
    tls: Arc<watch::Sender<Option<Arc<Tls>>>>,
    pub values: Values,
}

impl Default for Inspection {
    fn default() -> Self {
        Inspection {
            tls: Arc::new(watch::Sender::new(None)),
            values: Values::default(),
        }
    }
}

impl Inspection {
    pub fn set(&self, tls: Tls) {
        self.tls.send_replace(Some(Arc::new(tls)));
    }

    pub fn tls(&self) -> Option<Arc<Tls>> {
        self.tls.borrow().clone()
    }

    /// [`Inspection::tls`], waiting (at most 10 s) for a configuration
    /// still being made when the proxy has just started.
    async fn ready(&self) -> Option<Arc<Tls>> {
        let mut rx = self.tls.subscribe();
        let made = rx.wait_for(Option::is_some);
        let tls = match tokio::time::timeout(std::time::Duration::from_secs(10), made).await {
            Ok(Ok(tls)) => tls.clone(),
            _ => None,
        };
        tls
    }
}

/// Serves one tunnel whose `CONNECT` was allowed and answered: `conn` is
/// the jail's side, `upstream` the connection to the host.
pub async fn tunnel(
    conn: TcpStream,
    upstream: TcpStream,
    host: &str,
    port: u16,
    run: Arc<Run>,
    inspection: &Inspection,
) {
    let Some(tls) = inspection.ready().await else {
        let why = "the proxy has no inspection CA (the supervisor has not configured it)";
        return run.log.denied(host, port, why);
    };
    let client = match crate::tls::accept::accept(conn, host, &tls.authority).await {
        Ok(c) => c,
        Err(why) => {
            tracing::info!(host, port, why, "egress: refused a tunnel");
            return run.log.denied(host, port, &why);
        }
    };
    let sender = match open_upstream(upstream, host, &tls).await {
        Ok(s) => Ok(s),
        Err(why) => {
            tracing::info!(host, port, why, "egress: upstream TLS failed");
            run.log.denied(host, port, &why);
            Err(why)
        }
    };
    let exchange = Arc::new(Exchange::new(
        host,
        port,
        run,
        sender,
        inspection.values.clone(),
    ));
    let service = hyper::service::service_fn(move |req| {
        let exchange = exchange.clone();
        async move { Ok::<_, std::convert::Infallible>(exchange.answer(req).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .preserve_header_case(true)
        .serve_connection(TokioIo::new(client), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        tracing::debug!(host, port, error = %e, "egress: an inspected connection ended");
    }
}

/// TLS to the upstream, verified against the proxy's roots, and HTTP/1.1
/// over it.
async fn open_upstream(tcp: TcpStream, host: &str, tls: &Tls) -> Result<Sender, String> {
    let name = server_name(host)?;
    let connector = tokio_rustls::TlsConnector::from(tls.upstream.clone());
    let stream = connector.connect(name, tcp).await.map_err(|e| {
        let why = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .map(|r| r.to_string())
            .unwrap_or_else(|| e.to_string());
        format!(
            "TLS to {host} failed: {why} (the proxy verifies every upstream against the system's roots and network.upstream_ca, whatever the client asks)"
        )
    })?;
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .preserve_header_case(true)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP to {host}: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    Ok(sender)
}
