//! Host uids for sessions: one per session, from the policy's identity range
//! minus its last uid, which environment builds run as.

use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(super) struct UidPool {
    /// Held by a live, creating or closing session, or quarantined because
    /// files of a closed session may remain.
    taken: BTreeSet<u32>,
}

impl UidPool {
    /// How many uids sessions may use out of `count`.
    pub(super) fn capacity(count: u32) -> u32 {
        count.saturating_sub(1)
    }

    /// The lowest free uid of `[base, base + count - 1)`, now taken.
    pub(super) fn allocate(&mut self, base: u32, count: u32) -> Option<u32> {
        let end = base.checked_add(Self::capacity(count))?;
        let uid = (base..end).find(|u| !self.taken.contains(u))?;
        self.taken.insert(uid);
        Some(uid)
    }

    /// Marks `uid` taken (a session loaded from disk, or a quarantine);
    /// false if it already was.
    pub(super) fn reserve(&mut self, uid: u32) -> bool {
        self.taken.insert(uid)
    }

    /// Only once nothing of the session that held it is left on disk.
    pub(super) fn release(&mut self, uid: u32) {
        self.taken.remove(&uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_hands_out_the_build_uid() {
        let mut p = UidPool::default();
        assert_eq!(p.allocate(1000, 3), Some(1000));
        assert_eq!(p.allocate(1000, 3), Some(1001));
        assert_eq!(p.allocate(1000, 3), None);
        p.release(1000);
        assert_eq!(p.allocate(1000, 3), Some(1000));
        assert_eq!(UidPool::default().allocate(1000, 1), None);
        assert_eq!(UidPool::default().allocate(u32::MAX - 1, 5), None);
    }
}
