//! Resource subscriptions: who watches which file of which session, and
//! after a run (or a mount) in that session, a
//! `notifications/resources/updated` for each watched file that changed.
//! A file changed when the run reported writing it under output/, or when
//! its size or modification time moved; a file that appears or disappears
//! counts too. Legacy clients subscribe with `resources/subscribe` on their
//! MCP session; 2026-07-28 clients hold a `subscriptions/listen` request,
//! which [`Watch::catch_up`] tells of the runs that ended, or are under
//! way, since the request arrived ([`activity`] keeps track of those).

mod activity;

pub(crate) use activity::Arrived;

use crate::pool::SupervisorPool;
use crate::sessions::SessionRef;
use crate::uri::parse;
use activity::Activity;
use prims_protocol::wire::EntryKind;
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::RoleServer;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Watched files per session, and in all.
const MAX_PER_SESSION: usize = 100;
const MAX_TOTAL: usize = 10_000;

#[derive(Clone)]
pub(crate) enum Sink {
    /// A legacy MCP session's peer; `handler` tells its subscriptions apart.
    Legacy {
        peer: Peer<RoleServer>,
        handler: u64,
    },
    /// A `subscriptions/listen` request; `listen` is its registration.
    Listen { sink: SubscriptionSink, listen: u64 },
}

impl Sink {
    fn owner(&self) -> (bool, u64) {
        match self {
            Sink::Legacy { handler, .. } => (true, *handler),
            Sink::Listen { listen, .. } => (false, *listen),
        }
    }

    async fn send(&self, uri: &str) -> bool {
        match self {
            Sink::Legacy { peer, .. } => {
                let p = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                peer.notify_resource_updated(p).await.is_ok()
            }
            Sink::Listen { sink, .. } => sink.notify_resource_updated(uri).await.is_ok(),
        }
    }
}

struct Sub {
    uri: String,
    path: String,
    sink: Sink,
    /// (size, modified) when last looked at; `None`: no such file.
    seen: Option<(u64, u64)>,
    /// A run under way when this was registered may have changed the file
    /// before `seen` was taken: report its end whatever `seen` says.
    stale: bool,
}

#[derive(Default)]
struct State {
    subs: HashMap<String, Vec<Sub>>,
    activity: Activity,
}

#[derive(Default)]
pub(crate) struct Watch {
    state: Mutex<State>,
}

/// A run or mount under way in a session, from [`Watch::begin`] until dropped.
pub(crate) struct Running<'a> {
    watch: &'a Watch,
    session: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.watch.state().activity.finish(&self.session);
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct WatchFull(String);

impl Watch {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The moment an HTTP request arrives, for [`Watch::catch_up`].
    pub(crate) fn stamp(&self) -> Arrived {
        self.state().activity.stamp()
    }

    /// A run (or mount) of `session` begins; it is under way until this is
    /// dropped, and ended for the watches from its [`Watch::changed`] on.
    pub(crate) fn begin(&self, session: &str) -> Running<'_> {
        self.state().activity.begin(session);
        Running {
            watch: self,
            session: session.to_owned(),
        }
    }

    /// Watch `path` of session `s`, whose tenant the caller was checked for.
    pub(crate) async fn add(
        &self,
        sup: &SupervisorPool,
        s: &SessionRef,
        uri: &str,
        path: &str,
        sink: Sink,
    ) -> Result<(), WatchFull> {
        let seen = stat(sup, s, std::slice::from_ref(&path.to_owned()))
            .await
            .remove(path);
        let mut state = self.state();
        let subs = &mut state.subs;
        let total: usize = subs.values().map(Vec::len).sum();
        let list = subs.entry(s.id.clone()).or_default();
        let owner = sink.owner();
        if list.iter().any(|x| x.uri == uri && x.sink.owner() == owner) {
            return Ok(());
        }
        if list.len() >= MAX_PER_SESSION || total >= MAX_TOTAL {
            return Err(WatchFull(format!(
                "too many subscriptions: at most {MAX_PER_SESSION} per session and \
                 {MAX_TOTAL} in all"
            )));
        }
        list.push(Sub {
            uri: uri.to_owned(),
            path: path.to_owned(),
            sink,
            seen,
            stale: false,
        });
        Ok(())
    }

    /// After a listen request that arrived at `arrived` registered its
    /// watches: notify them of runs that ended since, and mark them to be
    /// notified when the runs under way end. A notification too many
    /// costs a read; one too few loses an update.
    pub(crate) async fn catch_up(&self, listen: u64, arrived: Arrived) {
        let mut due = Vec::new();
        {
            let mut state = self.state();
            let State { subs, activity } = &mut *state;
            for (session, list) in subs.iter_mut() {
                let owed = activity.owed(session, arrived);
                for sub in list
                    .iter_mut()
                    .filter(|x| x.sink.owner() == (false, listen))
                {
                    sub.stale |= owed.at_end;
                    if owed.now {
                        due.push((sub.uri.clone(), sub.sink.clone()));
                    }
                }
            }
        }
        self.send(due).await;
    }

    /// Stop a legacy session's subscription to `uri`.
    pub(crate) fn remove_legacy(&self, handler: u64, uri: &str) {
        self.retain(|s| !(s.uri == uri && s.sink.owner() == (true, handler)));
    }

    /// Forget everything a listen request or a legacy session watched.
    pub(crate) fn remove_owner(&self, legacy: bool, id: u64) {
        self.retain(|s| s.sink.owner() != (legacy, id));
    }

    fn retain(&self, keep: impl Fn(&Sub) -> bool) {
        let subs = &mut self.state().subs;
        subs.values_mut().for_each(|l| l.retain(&keep));
        subs.retain(|_, l| !l.is_empty());
    }

    /// After a run or mount in `s`: notify the watchers of each file that
    /// changed. `written` are the paths the run reported writing.
    pub(crate) async fn changed(&self, sup: &SupervisorPool, s: &SessionRef, written: &[String]) {
        let paths: Vec<String> = {
            let mut state = self.state();
            // Before the watches are read: a listen that registers later
            // sees this run as ended (see [`Watch::catch_up`]).
            state.activity.end(&s.id);
            let Some(list) = state.subs.get(&s.id) else {
                return;
            };
            let set: HashSet<&String> = list.iter().map(|x| &x.path).collect();
            set.into_iter().cloned().collect()
        };
        let now = stat(sup, s, &paths).await;
        let mut due = Vec::new();
        if let Some(list) = self.state().subs.get_mut(&s.id) {
            for sub in list.iter_mut() {
                let current = now.get(&sub.path).copied();
                if sub.stale || current != sub.seen || written.contains(&sub.path) {
                    sub.seen = current;
                    sub.stale = false;
                    due.push((sub.uri.clone(), sub.sink.clone()));
                }
            }
        }
        self.send(due).await;
    }

    async fn send(&self, due: Vec<(String, Sink)>) {
        let mut dead = Vec::new();
        for (uri, sink) in due {
            if !sink.send(&uri).await {
                dead.push(sink.owner());
            }
        }
        // A peer that is gone takes its subscriptions with it.
        for (legacy, id) in dead {
            self.remove_owner(legacy, id);
        }
    }
}

/// (size, modified) of each of `paths` that is a regular file, one
/// directory listing per parent.
async fn stat(
    sup: &SupervisorPool,
    s: &SessionRef,
    paths: &[String],
) -> HashMap<String, (u64, u64)> {
    let mut out = HashMap::new();
    let Ok(c) = sup.client().await else {
        return out;
    };
    let parents: HashSet<&str> = (paths.iter())
        .map(|p| p.rsplit_once('/').map_or(".", |(d, _)| d))
        .collect();
    for dir in parents {
        let Ok(entries) = c.list_dir(&s.id, s.tenant.as_deref(), dir).await else {
            continue;
        };
        for e in entries.into_iter().filter(|e| e.kind == EntryKind::File) {
            if paths.contains(&e.path) {
                out.insert(e.path, (e.size, e.modified));
            }
        }
    }
    out
}

/// Of a `subscriptions/listen` filter, the resource URIs this server can
/// watch (PRIMS URIs, at most [`MAX_PER_SESSION`]); nothing else.
pub(crate) fn accepted(
    requested: &rmcp::model::SubscriptionFilter,
) -> rmcp::model::SubscriptionFilter {
    let uris: Vec<String> = (requested.resource_subscriptions.iter().flatten())
        .filter(|u| parse(u).is_ok())
        .take(MAX_PER_SESSION)
        .cloned()
        .collect();
    let mut f = rmcp::model::SubscriptionFilter::new();
    f.resource_subscriptions = (!uris.is_empty()).then_some(uris);
    f
}
