//! Fork templates: per environment and IPython layer, a jailed python that
//! imported the prewarm set once and answers only `fork` frames. A new
//! interpreter is forked from it and adopted by a jailer that builds a cold
//! jail's confinement around the child (the architecture guide's "Fork
//! templates"). A template starts in the background, on the first start
//! that could have used one (the default environment's, with the server);
//! they are capped in number (least recently used replaced first), and
//! replaced when they die, and past an age or a number of children (a
//! successor starts while the old one goes on forking).

use crate::envs::EnvLease;
use crate::interpreters::agent::AgentDir;
use crate::interpreters::channel::{FromAgent, ToAgent};
use crate::interpreters::ipython::IpythonLayer;
use crate::interpreters::live::Live;
use crate::interpreters::start::{self, StartError, StartSpec};
use crate::job::{JailKiller, Jails};
use crate::sessions::{SessionStore, Spare};
use prims_policy::{NetworkPolicy, Policy};
use prims_protocol::jail::ForkRole;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a template may take to fork a child.
const FORK_DEADLINE: Duration = Duration::from_secs(5);
/// After a template failed to start, its environment waits this long
/// before another try; starts are cold meanwhile.
const RETRY_AFTER: Duration = Duration::from_secs(60);
/// How long a pool refill waits for its environment's template.
const PREPARE_WAIT: Duration = Duration::from_secs(120);

/// A template's jail and the spare session whose place and uid it holds:
/// dropped, the jail is killed and the spare given back. Its children have
/// namespaces of their own and live on.
#[derive(Debug)]
struct TemplateJail {
    kill: JailKiller,
    spare: Mutex<Option<(Spare, Arc<SessionStore>)>>,
}

impl Drop for TemplateJail {
    fn drop(&mut self) {
        self.kill.kill();
        let spare = lock(&self.spare).take();
        if let Some((spare, store)) = spare {
            let discard = move || store.discard(spare);
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(discard)),
                Err(_) => discard(),
            }
        }
    }
}

/// A template that is up.
struct Template {
    live: tokio::sync::Mutex<Live>,
    _jail: TemplateJail,
    /// Its python's pid on the host: a child's parent.
    python: u32,
    born: Instant,
    last_used: Mutex<Instant>,
    /// Children forked so far.
    children: AtomicU64,
}

impl Template {
    /// Past its age or its number of children: its children share its
    /// address-space layout and string-hash secret, so siblings far apart
    /// should come from different templates.
    fn due(&self, policy: &Policy) -> bool {
        let i = &policy.interpreters;
        self.born.elapsed() > i.template_max_age.0
            || self.children.load(Ordering::Relaxed) >= i.template_max_children
    }
}

enum Entry {
    /// Starting; `serving` is the template it replaces, which forks until
    /// its successor is up.
    Starting {
        serving: Option<Arc<Template>>,
    },
    Up(Arc<Template>),
    /// When, and why.
    Failed(Instant, String),
}

impl Entry {
    /// The template that forks for this entry now, if any.
    fn serving(&self) -> Option<&Arc<Template>> {
        match self {
            Entry::Up(t) | Entry::Starting { serving: Some(t) } => Some(t),
            Entry::Starting { serving: None } | Entry::Failed(..) => None,
        }
    }
}

/// Starts by path, for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TemplateStats {
    pub up: u64,
    pub forked_starts: u64,
    pub cold_starts: u64,
    /// Fresh pythons forked in place of a forked one, in its jail.
    pub in_place_starts: u64,
}

/// A template's child, forked for one start: the socket the jailer adopts
/// it on, and its parent, the template's python.
pub(crate) struct Forked {
    pub adopt: OwnedFd,
    /// Our end of the socket on which the child forks a fresh python.
    pub fresh: OwnedFd,
    pub template_python: u32,
}

/// Where a template's workspace and host uid come from.
pub(crate) enum Home {
    /// A spare session's, which the template holds while it lives.
    Store(Arc<SessionStore>),
    /// A directory and uid of the caller's (`prims run --live --forked`).
    Dir { workspace: PathBuf, host_uid: u32 },
}

pub(crate) struct Templates {
    home: Home,
    set: Mutex<HashMap<String, Entry>>,
    /// The key of the default environment's template, once it is known.
    default: Mutex<Option<String>>,
    next_id: AtomicU64,
    forked: AtomicU64,
    cold: AtomicU64,
    in_place: AtomicU64,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("stats", &self.stats())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Templates {
    pub(crate) fn new(home: Home) -> Templates {
        Templates {
            home,
            set: Mutex::default(),
            default: Mutex::default(),
            next_id: AtomicU64::new(1),
            forked: AtomicU64::new(0),
            cold: AtomicU64::new(0),
            in_place: AtomicU64::new(0),
        }
    }

    pub(crate) fn count_in_place(&self) {
        self.in_place.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_start(&self, forked: bool) {
        let c = if forked { &self.forked } else { &self.cold };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> TemplateStats {
        let up = lock(&self.set)
            .values()
            .filter(|e| e.serving().is_some())
            .count() as u64;
        TemplateStats {
            up,
            forked_starts: self.forked.load(Ordering::Relaxed),
            cold_starts: self.cold.load(Ordering::Relaxed),
            in_place_starts: self.in_place.load(Ordering::Relaxed),
        }
    }

    /// A child of `s`'s environment's template, forked for `s`; none when
    /// no template is up for it (one is then started in the background),
    /// or the fork failed (the template is then replaced).
    pub(crate) async fn fork(
        self: &Arc<Self>,
        jails: &Jails,
        policy: &Policy,
        s: &StartSpec,
    ) -> Option<Forked> {
        let key = key(s, policy);
        let Some(t) = self.usable(&key, jails, policy, s) else {
            self.ensure(key, jails, policy, Parts::of(s, policy));
            return None;
        };
        match fork_one(&t, self.next_id.fetch_add(1, Ordering::Relaxed)).await {
            Ok((adopt, fresh)) => {
                *lock(&t.last_used) = Instant::now();
                t.children.fetch_add(1, Ordering::Relaxed);
                Some(Forked {
                    adopt,
                    fresh,
                    template_python: t.python,
                })
            }
            Err(why) => {
                tracing::warn!(env = %s.env_key, why, "a fork template failed; replacing it");
                self.retire(&key, &t);
                None
            }
        }
    }

    /// The template that forks for `key`, if one is up. One that is
    /// [`due`](Template::due) goes on forking while a successor starts in
    /// the background; its children live on after it.
    fn usable(
        self: &Arc<Self>,
        key: &str,
        jails: &Jails,
        policy: &Policy,
        s: &StartSpec,
    ) -> Option<Arc<Template>> {
        let t = {
            let mut set = lock(&self.set);
            let t = set.get(key)?.serving()?.clone();
            if !matches!(set.get(key), Some(Entry::Up(_))) || !t.due(policy) {
                return Some(t);
            }
            let serving = Some(t.clone());
            set.insert(key.to_string(), Entry::Starting { serving });
            t
        };
        tracing::info!(env = %s.env_key, "a fork template is due for replacement; starting its successor");
        self.start_in_background(key.to_string(), jails, policy, Parts::of(s, policy));
        Some(t)
    }

    fn retire(&self, key: &str, t: &Arc<Template>) {
        let mut set = lock(&self.set);
        match set.get_mut(key) {
            Some(Entry::Up(u)) if Arc::ptr_eq(u, t) => drop(set.remove(key)),
            Some(Entry::Starting { serving })
                if serving.as_ref().is_some_and(|u| Arc::ptr_eq(u, t)) =>
            {
                *serving = None
            }
            _ => {}
        }
    }

    /// Starts the template for `key` in the background unless one is up,
    /// starting, or failed a moment ago; makes room under the cap first
    /// (never taking the default environment's).
    fn ensure(self: &Arc<Self>, key: String, jails: &Jails, policy: &Policy, parts: Parts) {
        {
            let default = lock(&self.default).clone();
            let mut set = lock(&self.set);
            match set.get(&key) {
                Some(Entry::Starting { .. } | Entry::Up(_)) => return,
                Some(Entry::Failed(at, _)) if at.elapsed() < RETRY_AFTER => return,
                _ => {}
            }
            let max = policy.interpreters.max_templates as usize;
            while set.len() >= max {
                let oldest = set
                    .iter()
                    .filter(|(k, _)| max < 2 || default.as_ref() != Some(*k))
                    .filter_map(|(k, e)| match e {
                        Entry::Up(t) => Some((k.clone(), *lock(&t.last_used))),
                        Entry::Failed(at, _) => Some((k.clone(), *at)),
                        Entry::Starting { .. } => None,
                    })
                    .min_by_key(|(_, at)| *at);
                match oldest {
                    Some((k, _)) => drop(set.remove(&k)),
                    None => return,
                }
            }
            set.insert(key.clone(), Entry::Starting { serving: None });
        }
        self.start_in_background(key, jails, policy, parts);
    }

    /// Starts the template for `key`, whose entry says `Starting`, in the
    /// background; it takes that entry's place when it is up (or failed),
    /// unless the entry was removed meanwhile.
    fn start_in_background(
        self: &Arc<Self>,
        key: String,
        jails: &Jails,
        policy: &Policy,
        parts: Parts,
    ) {
        let (this, jails, policy) = (self.clone(), jails.clone(), policy.clone());
        tokio::spawn(async move {
            let entry = match this.start_one(&jails, &policy, parts).await {
                Ok(t) => Entry::Up(Arc::new(t)),
                Err(e) => {
                    let why = e.to_string();
                    tracing::warn!(
                        why,
                        "a fork template did not start; interpreters start cold"
                    );
                    Entry::Failed(Instant::now(), why)
                }
            };
            let mut set = lock(&this.set);
            if matches!(set.get(&key), Some(Entry::Starting { .. })) {
                set.insert(key, entry);
            }
        });
    }

    /// Waits until the template `s` would fork from is up, starting it
    /// here if none is starting: for work that is in the background
    /// anyway (the pool's refills), which then never starts cold for want
    /// of a template. Gives up on one that fails.
    pub(crate) async fn prepare(self: &Arc<Self>, jails: &Jails, policy: &Policy, s: &StartSpec) {
        let _ = self
            .prepare_parts(key(s, policy), jails, policy, Parts::of(s, policy))
            .await;
    }

    /// Starts the template of the default environment (`lease`, with the
    /// IPython layer `ipython`) and waits until it is up: what the server
    /// does as it starts. A cap on templates never replaces it.
    pub(crate) async fn prepare_default(
        self: &Arc<Self>,
        jails: &Jails,
        policy: &Policy,
        parts: Parts,
    ) -> Result<(), String> {
        let key = parts.key();
        *lock(&self.default) = Some(key.clone());
        self.prepare_parts(key, jails, policy, parts).await
    }

    async fn prepare_parts(
        self: &Arc<Self>,
        key: String,
        jails: &Jails,
        policy: &Policy,
        parts: Parts,
    ) -> Result<(), String> {
        let deadline = Instant::now() + PREPARE_WAIT;
        let mut parts = Some(parts);
        loop {
            let starting = match lock(&self.set).get(&key) {
                Some(Entry::Up(_) | Entry::Starting { serving: Some(_) }) => return Ok(()),
                Some(Entry::Failed(_, why)) => return Err(why.clone()),
                Some(Entry::Starting { serving: None }) => true,
                None => false,
            };
            if !starting {
                match parts.take() {
                    Some(p) => self.ensure(key.clone(), jails, policy, p),
                    // Ours was started and then removed (replaced, or room
                    // made under the cap): not ours to start again.
                    None => return Err("the template was replaced while it started".into()),
                }
            }
            if Instant::now() > deadline {
                return Err(format!("not up within {} s", PREPARE_WAIT.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts the template `s` would fork from, now; for a caller that
    /// must have one (`prims run --live --forked`).
    pub(crate) async fn warm_up(
        &self,
        jails: &Jails,
        policy: &Policy,
        s: &StartSpec,
    ) -> Result<(), StartError> {
        let t = self.start_one(jails, policy, Parts::of(s, policy)).await?;
        lock(&self.set).insert(key(s, policy), Entry::Up(Arc::new(t)));
        Ok(())
    }

    /// A workspace, uid and job name for a new template, and the spare
    /// session that holds them, if one does.
    async fn home(&self, jails: &Jails) -> Result<(PathBuf, u32, String, Option<Spare>), String> {
        match &self.home {
            Home::Dir {
                workspace,
                host_uid,
            } => Ok((
                workspace.clone(),
                *host_uid,
                jails.names.interpreter("template"),
                None,
            )),
            Home::Store(store) => {
                let store = store.clone();
                let spare = tokio::task::spawn_blocking(move || store.create_template_home())
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("a place for the template: {e}"))?;
                Ok((
                    spare.workspace().to_path_buf(),
                    spare.host_uid(),
                    jails.names.interpreter(spare.name()),
                    Some(spare),
                ))
            }
        }
    }

    async fn start_one(
        &self,
        jails: &Jails,
        policy: &Policy,
        p: Parts,
    ) -> Result<Template, StartError> {
        let failed = |why: String| StartError::NotReady(format!("a fork template: {why}"));
        // No child may share a kernel budget with its siblings.
        let jails_at_once = super::budgets::children(policy);
        // What it raises is recorded in the server's state directory and
        // put back at its clean stop (`budgets::restore`).
        let state_dir = match &self.home {
            Home::Store(store) => Some(store.state_dir()),
            Home::Dir { .. } => None,
        };
        let ceilings =
            super::budgets::ensure(std::path::Path::new("/proc/sys"), jails_at_once, state_dir)
                .map_err(|e| failed(e.to_string()))?;
        super::budgets::lift_rlimits(jails_at_once, policy.limits.pids)
            .map_err(|e| failed(e.to_string()))?;
        for c in ceilings.iter().filter(|c| c.now != c.was) {
            tracing::warn!(sysctl = %c.name, was = c.was, now = c.now,
                "raised a host-wide per-user ceiling so that each of {jails_at_once} forked sessions keeps a cold jail's share");
        }
        let (workspace, host_uid, name, spare) = self.home(jails).await.map_err(failed)?;
        let spec = StartSpec {
            name,
            interpreter: p.interpreter,
            workspace,
            host_uid,
            venv: p.venv,
            env_key: p.env_key,
            lease: p.lease,
            limits: Default::default(),
            prewarm: p.prewarm,
            ipython: p.ipython,
            warm: true,
            batch: false,
            fork: ForkRole::Template {
                children_uid_base: policy.identity.uid_base,
                children_uid_count: policy.identity.uid_count,
            },
            agent: p.agent,
        };
        let store = match &self.home {
            Home::Store(store) => Some(store.clone()),
            Home::Dir { .. } => None,
        };
        let spare = spare.zip(store);
        let mut live = match start::start(jails, None, policy, spec).await {
            Ok(live) => live,
            Err(e) => {
                if let Some((spare, store)) = spare {
                    let _ = tokio::task::spawn_blocking(move || store.discard(spare)).await;
                }
                return Err(e);
            }
        };
        let jail = TemplateJail {
            kill: live.kill.clone(),
            spare: Mutex::new(spare),
        };
        let python =
            pid_of(live.python.as_fd()).ok_or_else(|| failed("its python has no pid".into()))?;
        // A thread left by an import would not survive a fork whole.
        let threads = threads_of(python);
        if threads != Some(1) {
            return Err(failed(format!(
                "its imports left {threads:?} threads; set OPENBLAS_NUM_THREADS and the like to 1"
            )));
        }
        // Its imports ran idle, as a pool refill's do; its forks are starts.
        start::promote(&mut live);
        tracing::info!(env = %live.env_key, python, "fork template up");
        Ok(Template {
            live: tokio::sync::Mutex::new(live),
            _jail: jail,
            python,
            born: Instant::now(),
            last_used: Mutex::new(Instant::now()),
            children: AtomicU64::new(0),
        })
    }
}

/// What a template is made of: an environment, the IPython layer and the
/// agent, as the first start that wanted it had them.
pub(crate) struct Parts {
    agent: AgentDir,
    lease: Option<EnvLease>,
    venv: PathBuf,
    env_key: String,
    ipython: Option<IpythonLayer>,
    interpreter: PathBuf,
    prewarm: Vec<String>,
    /// The network mode the template's jail was made for (its children
    /// inherit its environment and binds: the proxy's, in allowlist mode).
    network: NetworkPolicy,
}

impl Parts {
    /// The template key of these parts, as [`key`] of a start with them.
    fn key(&self) -> String {
        key_of(&self.env_key, self.ipython.as_ref(), self.network)
    }

    /// The parts of the template for environment `lease` with the IPython
    /// layer `ipython`, importing what `policy` says.
    pub(crate) fn new(
        lease: EnvLease,
        ipython: Option<IpythonLayer>,
        interpreter: PathBuf,
        agent: AgentDir,
        policy: &Policy,
    ) -> Parts {
        Parts {
            agent,
            env_key: lease.key.clone(),
            venv: lease.dir.clone(),
            lease: Some(lease),
            ipython,
            interpreter,
            prewarm: policy.python.prewarm_imports.clone(),
            network: policy.network.mode,
        }
    }

    fn of(s: &StartSpec, policy: &Policy) -> Parts {
        Parts {
            agent: s.agent.clone(),
            lease: s.lease.as_ref().map(EnvLease::share),
            venv: s.venv.clone(),
            env_key: s.env_key.clone(),
            ipython: s.ipython.as_ref().map(IpythonLayer::share),
            interpreter: s.interpreter.clone(),
            prewarm: policy.python.prewarm_imports.clone(),
            network: policy.network.mode,
        }
    }
}

/// Templates are per environment, IPython layer and network mode: a
/// reload into or out of allowlist mode starts new ones.
fn key(s: &StartSpec, policy: &Policy) -> String {
    key_of(&s.env_key, s.ipython.as_ref(), policy.network.mode)
}

fn key_of(env_key: &str, ipython: Option<&IpythonLayer>, network: NetworkPolicy) -> String {
    let ipython = ipython.map(|k| k.site.display().to_string());
    format!("{env_key}\n{}\n{network:?}", ipython.unwrap_or_default())
}

/// One `fork` frame, with the child's ends of two new socket pairs; our
/// ends once the template says it forked: one for the adopting jailer,
/// one to ask the child for a fresh python in place.
async fn fork_one(t: &Template, id: u64) -> Result<(OwnedFd, OwnedFd), String> {
    use nix::sys::socket::{setsockopt, sockopt};
    let (ours, theirs) = seqpacket_pair()?;
    let (fresh, fresh_theirs) = seqpacket_pair()?;
    // Before the child can send: its hello then carries its pid.
    setsockopt(&ours, sockopt::PassCred, &true).map_err(|e| format!("SO_PASSCRED: {e}"))?;
    let mut live = t.live.lock().await;
    let asked = async {
        live.writer
            .send_with_fds(
                &ToAgent::Fork { id },
                &[theirs.as_fd(), fresh_theirs.as_fd()],
            )
            .await
            .map_err(|e| e.to_string())?;
        match live.rx.recv().await {
            Some(Ok(FromAgent::Forked { id: got })) if got == id => Ok(()),
            Some(Ok(FromAgent::Error { message })) => Err(message),
            Some(Ok(other)) => Err(format!("it answered {}", other.op())),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("it is gone".to_string()),
        }
    };
    match tokio::time::timeout(FORK_DEADLINE, asked).await {
        Ok(Ok(())) => Ok((ours, fresh)),
        Ok(Err(why)) => Err(why),
        Err(_) => Err("no answer in time".to_string()),
    }
}

fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), String> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("socketpair: {e}"))
}

/// The host pid behind a pidfd (its fdinfo's `Pid:`).
fn pid_of(pidfd: std::os::fd::BorrowedFd<'_>) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn threads_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}
