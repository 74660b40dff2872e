//! Every secret's value, as the proxy holds it: replaced whole at a reload.

use super::text::SecretText;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// A secret's value as the proxy holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    pub name: String,
    pub value: SecretText,
    /// `aws`: the access key id that goes with the secret key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<SecretText>,
}

/// Every value, by name: replaced whole at a reload, so a request sees
/// either the old values or the new ones.
#[derive(Debug, Clone, Default)]
pub struct Values(Arc<RwLock<Arc<HashMap<String, SecretValue>>>>);

impl Values {
    pub fn replace(&self, values: Vec<SecretValue>) {
        let map = values.into_iter().map(|v| (v.name.clone(), v)).collect();
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(map);
    }

    pub fn now(&self) -> Arc<HashMap<String, SecretValue>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The value of `p`'s secret, or why there is none: the policy names a
/// secret whose value could not be read.
pub(crate) fn value_of<'a>(
    p: &super::placement::Placement,
    values: &'a HashMap<String, SecretValue>,
) -> Result<&'a SecretValue, String> {
    values.get(&p.name).ok_or_else(|| {
        format!(
            "secret {} has no value on this server now (the admin's policy names it, but its value could not be read)",
            p.name
        )
    })
}
