//! What TLS set-up can fail on, and the one crypto provider of both sides.

use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("making a certificate: {0}")]
    Mint(rcgen::Error),
    #[error("a PEM that does not parse: {0}")]
    Pem(String),
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
    #[error("{path}: {1}", path = .0.display())]
    Files(PathBuf, std::io::Error),
}

/// The one crypto provider of both sides.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}
