//! A session's place in the registry: its interpreter (when one lives) and
//! what the next call must be told about it.

use super::channel::Named;
use super::live::Live;
use crate::job::JailKiller;
use prims_protocol::wire::ResetReason;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

#[derive(Debug)]
pub(super) struct Slot {
    pub tenant: Option<String>,
    /// Held for a whole call, or while the interpreter is stopped.
    pub live: tokio::sync::Mutex<Option<Live>>,
    pub meta: Mutex<SlotMeta>,
}

#[derive(Debug)]
pub(super) struct SlotMeta {
    pub last_used: Instant,
    /// Why the interpreter the next call gets is not the last one.
    pub next_reason: Option<ResetReason>,
    /// Its globals were saved by a stop; the next interpreter restores them.
    pub saved: bool,
    /// Globals that stop could not save, reported with the restore.
    pub unsaved: Vec<Named>,
    /// Cells run in this session by any of its interpreters.
    pub cells: u64,
    /// Kills the live interpreter without waiting for its lock.
    pub kill: Option<JailKiller>,
    /// Memory it held when last measured.
    pub memory: u64,
}

impl Slot {
    pub fn new(tenant: Option<String>, live: Option<Live>) -> Slot {
        let kill = live.as_ref().map(|l| l.kill.clone());
        Slot {
            tenant,
            live: tokio::sync::Mutex::new(live),
            meta: std::sync::Mutex::new(SlotMeta {
                last_used: Instant::now(),
                next_reason: None,
                saved: false,
                unsaved: Vec::new(),
                cells: 0,
                kill,
                memory: 0,
            }),
        }
    }

    pub fn meta(&self) -> MutexGuard<'_, SlotMeta> {
        self.meta.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An interpreter lives in it.
    pub fn is_live(&self) -> bool {
        self.meta().kill.is_some()
    }
}
