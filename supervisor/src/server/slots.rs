//! Connection slots: a cap on all connections and one per uid, so that a
//! single peer cannot take every slot and lock the others (root's tools
//! included) out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

pub(super) struct Slots {
    max_total: usize,
    max_per_uid: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    total: usize,
    per_uid: HashMap<u32, usize>,
}

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    Total(usize),
    Uid(usize),
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Full::Total(max) => write!(f, "too many connections (limit {max})"),
            Full::Uid(max) => write!(f, "too many connections from this uid (limit {max})"),
        }
    }
}

/// One claimed slot, given back when dropped (the connection ended).
pub(super) struct Slot {
    slots: Arc<Slots>,
    uid: u32,
}

impl Slots {
    pub(super) fn new(max_total: usize, max_per_uid: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max_total,
            max_per_uid,
            held: Mutex::new(Held::default()),
        })
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        // The counters stay consistent across a panic elsewhere: each update
        // is one statement.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn claim(self: &Arc<Self>, uid: u32) -> Result<Slot, Full> {
        let mut held = self.held();
        if held.total >= self.max_total {
            return Err(Full::Total(self.max_total));
        }
        let mine = held.per_uid.entry(uid).or_insert(0);
        if *mine >= self.max_per_uid {
            return Err(Full::Uid(self.max_per_uid));
        }
        *mine += 1;
        held.total += 1;
        Ok(Slot {
            slots: self.clone(),
            uid,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held();
        held.total = held.total.saturating_sub(1);
        if let Some(n) = held.per_uid.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.per_uid.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_uid_and_total_caps_and_release() {
        let slots = Slots::new(3, 2);
        let a = slots.claim(1).unwrap();
        let _b = slots.claim(1).unwrap();
        assert_eq!(slots.claim(1).err(), Some(Full::Uid(2)));
        let _c = slots.claim(0).unwrap();
        assert_eq!(slots.claim(0).err(), Some(Full::Total(3)));
        drop(a);
        let _d = slots.claim(1).unwrap();
        assert_eq!(slots.held().per_uid.get(&1), Some(&2));
    }

    #[test]
    fn a_uid_with_no_connections_leaves_no_entry() {
        let slots = Slots::new(3, 2);
        drop(slots.claim(7).unwrap());
        assert!(slots.held().per_uid.is_empty());
        assert_eq!(slots.held().total, 0);
    }
}
