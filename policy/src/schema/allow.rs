//! One `network.allow` entry as written: the host text alone
//! (`"pypi.org"`), or a table that also says how its TLS goes
//! (`{ host = "cdn.example.com", tls = "passthrough" }`).

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The entry's text: its grammar is [`crate::network`]'s.
    pub host: String,
    pub tls: Tls,
}

/// What the egress proxy does with TLS to an allowed host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tls {
    /// Terminated and inspected: the server name and `Host` checked,
    /// secrets placed.
    #[default]
    Inspect,
    /// Tunnelled as it is: no secret is placed, and a name the upstream
    /// also serves is not told apart.
    Passthrough,
}

impl From<&str> for Allowed {
    fn from(host: &str) -> Self {
        Allowed {
            host: host.to_string(),
            tls: Tls::Inspect,
        }
    }
}

impl Serialize for Allowed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Table<'a> {
            host: &'a str,
            tls: Tls,
        }
        match self.tls {
            Tls::Inspect => s.serialize_str(&self.host),
            tls => Table {
                host: &self.host,
                tls,
            }
            .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Allowed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AllowedVisitor)
    }
}

struct AllowedVisitor;

impl<'de> Visitor<'de> for AllowedVisitor {
    type Value = Allowed;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"a host ("pypi.org") or a table ({ host = "...", tls = "passthrough" })"#)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Allowed, E> {
        Ok(Allowed::from(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Allowed, A::Error> {
        let (mut host, mut tls) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "host" if host.is_none() => host = Some(map.next_value::<String>()?),
                "tls" if tls.is_none() => tls = Some(map.next_value::<Tls>()?),
                "host" | "tls" => return Err(de::Error::duplicate_field("host or tls")),
                other => return Err(de::Error::unknown_field(other, &["host", "tls"])),
            }
        }
        Ok(Allowed {
            host: host.ok_or_else(|| de::Error::missing_field("host"))?,
            tls: tls.unwrap_or_default(),
        })
    }
}
