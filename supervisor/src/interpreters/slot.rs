//! A session's place in the registry: its interpreter (when one lives) and
//! what the next call must be told about it.

use super::channel::Named;
use super::live::Live;
use crate::job::JailKiller;
use prims_protocol::wire::ResetReason;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

#[derive(Debug)]
pub(super) struct Slot {
    pub tenant: Option<String>,
    /// Held for a whole call, or while the interpreter is being stopped
    /// (by the task that saves its globals, which the session's next call
    /// then waits for, and no one else).
    pub live: Arc<tokio::sync::Mutex<Option<Live>>>,
    pub meta: Mutex<SlotMeta>,
}

/// What a stop leaves for the session's next interpreter.
#[derive(Debug, Default)]
pub(super) enum Carry {
    #[default]
    Nothing,
    /// Globals were saved into the workspace, at `at` (Unix seconds, when
    /// known); `unsaved` could not be.
    Saved {
        unsaved: Vec<Named>,
        at: Option<u64>,
    },
    /// None could be saved, for this reason (told to the next call).
    Lost(String),
}

#[derive(Debug)]
pub(super) struct SlotMeta {
    pub last_used: Instant,
    /// Why the interpreter the next call gets is not the last one.
    pub next_reason: Option<ResetReason>,
    /// What the last stop saved for the next interpreter.
    pub carry: Carry,
    /// A stop is saving its globals: it no longer counts as live.
    pub stopping: bool,
    /// Cells run in this session by any of its interpreters.
    pub cells: u64,
    /// Kills the live interpreter without waiting for its lock.
    pub kill: Option<JailKiller>,
    /// Memory it held when last measured.
    pub memory: u64,
    /// Since when calls have changed its globals with no save since (the
    /// first such call's end): an autosave is due `autosave_after` later.
    pub unsaved_since: Option<Instant>,
    /// An autosave of it is under way or waits for its turn.
    pub autosaving: bool,
    /// What the session's calls asked for so far.
    pub requirements: Option<SessionRequirements>,
}

/// A session's requirements: those its environment was built for, and
/// all it asked for since (the rest installed into the session).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRequirements {
    pub base: Vec<String>,
    pub all: Vec<String>,
}

impl Slot {
    pub fn new(tenant: Option<String>, live: Option<Live>) -> Slot {
        let kill = live.as_ref().map(|l| l.kill.clone());
        Slot {
            tenant,
            live: Arc::new(tokio::sync::Mutex::new(live)),
            meta: std::sync::Mutex::new(SlotMeta {
                last_used: Instant::now(),
                next_reason: None,
                carry: Carry::Nothing,
                stopping: false,
                cells: 0,
                kill,
                memory: 0,
                unsaved_since: None,
                autosaving: false,
                requirements: None,
            }),
        }
    }

    pub fn meta(&self) -> MutexGuard<'_, SlotMeta> {
        self.meta.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An interpreter lives in it, and is not being stopped.
    pub fn is_live(&self) -> bool {
        let m = self.meta();
        m.kill.is_some() && !m.stopping
    }
}
