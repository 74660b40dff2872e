//! The server's inspection CA: made once, at the supervisor's first start,
//! and kept in the state directory, its key readable by root alone. The
//! supervisor hands the key to the proxy over the control channel (the
//! proxy's account cannot read it); the proxy mints a leaf for each host a
//! jail reaches and keeps it for a day, so a session's later requests to a
//! host cost no signature.

use super::error::{provider, TlsError};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// The CA's subject, the same on every server: a leaf names its issuer by
/// it, so the proxy rebuilds the issuer from the key alone.
const CA_NAME: &str = "PRIMS egress inspection CA";
const CA_ORG: &str = "PRIMS";
/// Its certificate, readable by all: jails trust it through the bundle.
pub const CA_CERT: &str = "ca.pem";
/// Its key: root's alone.
pub const CA_KEY: &str = "ca.key";
/// How long a CA lasts.
const CA_YEARS: i64 = 10;
/// How long a leaf lasts, and how long the proxy keeps one.
const LEAF_DAYS: i64 = 7;
const LEAF_KEPT: Duration = Duration::from_secs(24 * 3600);
/// Hosts whose leaves are kept at once; past this the oldest half goes.
const MAX_LEAVES: usize = 4096;

/// The CA as the supervisor holds it and sends it to the proxy.
pub struct CaPem {
    pub cert: String,
    pub key: Zeroizing<String>,
}

impl std::fmt::Debug for CaPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaPem").finish_non_exhaustive()
    }
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_NAME);
    dn.push(DnType::OrganizationName, CA_ORG);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p
}

/// The CA in `dir`, made there when missing or unreadable.
/// `dir` is root's (0755); the key file is 0600.
pub fn load_or_create(dir: &Path) -> Result<CaPem, TlsError> {
    if let Some(ca) = load(dir) {
        return Ok(ca);
    }
    let key = KeyPair::generate().map_err(TlsError::Mint)?;
    let mut params = ca_params();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(365 * CA_YEARS);
    let cert = params.self_signed(&key).map_err(TlsError::Mint)?;
    let ca = CaPem {
        cert: cert.pem(),
        key: Zeroizing::new(key.serialize_pem()),
    };
    std::fs::create_dir_all(dir).map_err(|e| TlsError::Files(dir.into(), e))?;
    // The key first: a certificate without its key is made again.
    write_file(&dir.join(CA_KEY), ca.key.as_bytes(), 0o600)?;
    write_file(&dir.join(CA_CERT), ca.cert.as_bytes(), 0o644)?;
    tracing::info!(dir = %dir.display(), "egress: made the inspection CA");
    Ok(ca)
}

fn load(dir: &Path) -> Option<CaPem> {
    let cert = std::fs::read_to_string(dir.join(CA_CERT)).ok()?;
    let key = Zeroizing::new(std::fs::read_to_string(dir.join(CA_KEY)).ok()?);
    // It must parse, and its key must be the certificate's.
    let pair = KeyPair::from_pem(&key).ok()?;
    let der = CertificateDer::from_pem_slice(cert.as_bytes()).ok()?;
    if !spki_matches(&der, &pair) {
        return None;
    }
    Some(CaPem { cert, key })
}

/// Whether `cert` carries `key`'s public key (its DER holds the key's SPKI).
fn spki_matches(cert: &CertificateDer<'_>, key: &KeyPair) -> bool {
    use rcgen::PublicKeyData;
    let spki = key.subject_public_key_info();
    memchr::memmem::find(cert.as_ref(), &spki).is_some()
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp: PathBuf = path.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let err = |e| TlsError::Files(path.into(), e);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// The proxy's side: mints and keeps the leaves jails are served.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    ca: CertificateDer<'static>,
    /// One key for every leaf: a leaf is then one signature, not a key.
    leaf_key: KeyPair,
    provider: Arc<rustls::crypto::CryptoProvider>,
    served: Mutex<HashMap<String, (Instant, Arc<ServerConfig>)>>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    pub fn new(ca: &CaPem) -> Result<Authority, TlsError> {
        let key = KeyPair::from_pem(&ca.key).map_err(TlsError::Mint)?;
        let cert = CertificateDer::from_pem_slice(ca.cert.as_bytes())
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        if !spki_matches(&cert, &key) {
            return Err(TlsError::Pem(
                "the CA's key is not its certificate's".into(),
            ));
        }
        Ok(Authority {
            issuer: Issuer::new(ca_params(), key),
            ca: cert,
            leaf_key: KeyPair::generate().map_err(TlsError::Mint)?,
            provider: provider(),
            served: Mutex::default(),
        })
    }

    /// What the proxy serves a jail that reached `host` (a name or an IP
    /// address): a leaf for it, made now or kept from earlier.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((made, config)) = served.get(host) {
            if made.elapsed() < LEAF_KEPT {
                return Ok(config.clone());
            }
        }
        let config = Arc::new(self.mint(host)?);
        if served.len() >= MAX_LEAVES {
            let mut ages: Vec<Instant> = served.values().map(|(t, _)| *t).collect();
            ages.sort();
            let cut = ages[ages.len() / 2];
            served.retain(|_, (t, _)| *t > cut);
        }
        served.insert(host.to_string(), (Instant::now(), config.clone()));
        Ok(config)
    }

    fn mint(&self, host: &str) -> Result<ServerConfig, TlsError> {
        let mut p = CertificateParams::new(vec![host.to_string()]).map_err(TlsError::Mint)?;
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, host);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.use_authority_key_identifier_extension = true;
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now - time::Duration::hours(1);
        p.not_after = now + time::Duration::days(LEAF_DAYS);
        let leaf = p
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(TlsError::Mint)?;
        let key = PrivateKeyDer::try_from(self.leaf_key.serialize_der())
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.ca.clone()], key)
            .map_err(TlsError::Config)?;
        // HTTP/1.1 alone: a client that offers h2 falls back.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_is_made_once_and_its_key_is_roots_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        let again = load_or_create(dir.path()).unwrap();
        assert_eq!(first.cert, again.cert);
        let mode = |f: &str| {
            std::fs::metadata(dir.path().join(f))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!((mode(CA_KEY), mode(CA_CERT)), (0o600, 0o644));
        // A key that is not the certificate's makes a new CA.
        std::fs::write(
            dir.path().join(CA_KEY),
            KeyPair::generate().unwrap().serialize_pem(),
        )
        .unwrap();
        let other = load_or_create(dir.path()).unwrap();
        assert_ne!(other.cert, first.cert);
        let a = Authority::new(&other).unwrap();
        let one = a.server_config("api.example.com").unwrap();
        let two = a.server_config("api.example.com").unwrap();
        assert!(Arc::ptr_eq(&one, &two), "a host's leaf is kept");
        a.server_config("10.1.2.3").unwrap();
    }
}
