//! The proxy as a TLS client of the upstream: it trusts the system's roots
//! plus the admin's `network.upstream_ca`, and nothing the jail says. One
//! configuration serves every connection, so its session cache lets a later
//! connection to a host resume instead of a full handshake.

use super::error::{provider, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::sync::Arc;

/// The configuration for upstreams: system roots and `extra` (PEM texts,
/// each one or more certificates).
pub fn client_config(extra: &[String]) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::warn!(error = %e, "egress: a system root did not load");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    tracing::debug!(added, ignored, "egress: system roots");
    for pem in extra {
        let mut any = false;
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| TlsError::Pem(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| TlsError::Pem(format!("an upstream_ca root: {e}")))?;
            any = true;
        }
        if !any {
            return Err(TlsError::Pem(
                "an upstream_ca file holds no certificate".into(),
            ));
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `host` as the name the upstream's certificate must carry.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("{host}: {e}"))
}
