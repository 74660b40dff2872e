//! The front-end's own configuration file (TOML), separate from the policy:
//! bearer tokens and the Origin/Host allow-lists.
//!
//! ```toml
//! allowed_origins = ["https://app.example.com:443"]   # added to the loopback defaults
//! allowed_hosts = ["prims.internal"]                   # added to the loopback defaults
//!
//! [[tokens]]
//! token = "a-long-random-secret"
//! tenant = "team-a"
//! ```

use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FrontendConfig {
    /// Bearer tokens; when any is configured, every `/mcp`, `/artifacts`
    /// and `/metrics` request must carry one.
    pub tokens: Vec<TokenEntry>,
    /// Browser origins allowed besides `http://localhost:*`,
    /// `http://127.0.0.1:*` and `http://[::1]:*`.
    allowed_origins: Vec<String>,
    /// `Host` names allowed besides `localhost`, `127.0.0.1`, `::1` and the
    /// listen address.
    allowed_hosts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub(crate) token: String,
    pub(crate) tenant: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// Tokens shorter than this are refused: they would be guessable.
const MIN_TOKEN_LEN: usize = 16;

impl FrontendConfig {
    pub fn load(path: &Path) -> Result<FrontendConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let cfg = Self::parse(&text).map_err(|message| ConfigError::Parse {
            path: shown.clone(),
            message,
        })?;
        cfg.validate().map_err(|message| ConfigError::Invalid {
            path: shown,
            message,
        })?;
        Ok(cfg)
    }

    fn parse(text: &str) -> Result<FrontendConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    fn validate(&self) -> Result<(), String> {
        let mut seen = HashSet::new();
        for (i, t) in self.tokens.iter().enumerate() {
            if t.token.len() < MIN_TOKEN_LEN {
                return Err(format!(
                    "tokens[{i}]: a token must have at least {MIN_TOKEN_LEN} characters"
                ));
            }
            if t.token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!("tokens[{i}]: a token cannot hold whitespace"));
            }
            if t.tenant.is_empty() {
                return Err(format!("tokens[{i}]: tenant is empty"));
            }
            if !seen.insert(t.token.as_str()) {
                return Err(format!("tokens[{i}]: the same token is listed twice"));
            }
        }
        Ok(())
    }

    /// Origins the `/mcp` endpoint accepts (requests without `Origin` always pass).
    pub(crate) fn origins(&self) -> Vec<String> {
        let mut v: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
            .into_iter()
            .map(String::from)
            .collect();
        v.extend(self.allowed_origins.iter().cloned());
        v
    }

    /// Host names the server answers to.
    pub(crate) fn hosts(&self, listen: &std::net::SocketAddr) -> Vec<String> {
        let mut v: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(String::from)
            .collect();
        let ip = listen.ip();
        if !ip.is_unspecified() && !ip.is_loopback() {
            v.push(ip.to_string());
        }
        v.extend(self.allowed_hosts.iter().cloned());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tokens_and_rejects_short_ones() {
        let cfg =
            FrontendConfig::parse("[[tokens]]\ntoken = \"0123456789abcdef\"\ntenant = \"a\"\n")
                .unwrap();
        assert_eq!(cfg.tokens[0].tenant, "a");
        assert!(cfg.validate().is_ok());
        let short = FrontendConfig::parse("[[tokens]]\ntoken = \"x\"\ntenant = \"a\"\n").unwrap();
        assert!(short.validate().unwrap_err().contains("at least"));
        assert!(FrontendConfig::parse("bogus = 1").is_err());
    }
}
