//! Per-user kernel budgets through a real supervisor: what the kernel
//! counts per user along the user-namespace chain ("ucounts") is each
//! session's own. Several live sessions each grab all they can of one
//! budget and keep holding it; a new session still gets its full share:
//! the share the first one got, and the share a cold jail gets.
//!
//! How the kernel counts: a process of uid U in user namespace N is
//! charged at (N, U), checked against N's ceiling (`/proc/sys/user/*`
//! there; for the rlimit kinds, against the process's own rlimit); then at
//! (parent(N), owner(N)), checked against parent(N)'s ceiling (for the
//! rlimit kinds: against the rlimit N's creator had when it made N); and so
//! on up to the initial namespace, whose ceilings are the host's sysctls. A cold jail's
//! namespace is owned by the session's own host uid, so its chain is
//! (jail, session uid) → (host, session uid): nothing shared. A forked
//! session's namespace is made by the template's python, inside the
//! template's namespace, so its chain is (child ns, session uid) →
//! (template ns, template uid) → (host, template uid): the last two are
//! every sibling's.
//!
//! Every test runs in both modes: a supervisor with `fork_templates` on
//! (each session asserts it was forked: `/.t` exists only in a forked
//! child) and one cold. Each probe is python run as a cell of a live
//! session that grabs all it can, keeps holding it in the interpreter's
//! globals (or as sleeping children, or as pending signals), and prints
//! one JSON line: `{"forked", "count", "errno", "detail"}`. At the end
//! every holder is asked whether it still holds all it got, so a share
//! that came back only because a holder let go cannot pass.

use prims_protocol::client::Client;
use prims_protocol::wire::{InterpreterState, RunReply};
use prims_tests::daemon::Daemon;
use prims_tests::forked::{forked_session, template_pythons};
use prims_tests::live::*;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Live sessions that grab a budget before the new one, unless the
/// budget needs more to show a shared count ([`Holders::ToExhaust`]).
const HOLDERS: usize = 4;
/// At most this many holders: a supervisor keeps 32 live interpreters by
/// default, so a shared count only more than that could exhaust is out of
/// one supervisor's sessions' reach anyway.
const MAX_HOLDERS: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Cold,
    Forked,
}

/// `[interpreters]` keys: no pool; room for the holders, the new session
/// and the cold sessions a template's first start leaves behind (sessions
/// without a tenant share one tenant's `max_live_per_tenant`, 8 by
/// default, past which the least recently used one would be stopped and
/// let go of what it holds).
fn policy(mode: Mode) -> String {
    live_policy(
        &format!(
            "{NO_POOL}max_live = 128\nmax_live_per_tenant = 128\nfork_templates = {}\n",
            mode == Mode::Forked
        ),
        "",
    )
}

/// A test supervisor whose cgroup parents are swept once it is gone: the
/// processes of its jails (sleeping children, a million pending signals)
/// may still be dying when `Daemon`'s drop removes them, which the kernel
/// then refuses (EBUSY), leaving them behind.
struct Supervisor(Option<Daemon>);

impl Supervisor {
    fn start(mode: Mode) -> Supervisor {
        Supervisor(Some(Daemon::start(&policy(mode))))
    }
}

impl std::ops::Deref for Supervisor {
    type Target = Daemon;
    fn deref(&self) -> &Daemon {
        self.0.as_ref().expect("a running supervisor")
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let dirs = self
            .0
            .as_ref()
            .map(Daemon::cgroup_parent_dirs)
            .unwrap_or_default();
        drop(self.0.take());
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            let left: Vec<_> = dirs.iter().filter(|d| d.exists()).collect();
            if left.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                eprintln!("BUDGET cgroups left behind: {left:?}");
                return;
            }
            for d in left {
                remove_cgroup_tree(d);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Removes the cgroup `dir` and those below it, deepest first; one that
/// still has a task stays.
fn remove_cgroup_tree(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup_tree(&e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// What every probe starts with: libc through ctypes, errno names, and
/// the one JSON line it reports.
const PRELUDE: &str = r#"
import ctypes, errno, json, os, resource
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
def _errname(e):
    return errno.errorcode.get(e, str(e))
def _last():
    return _errname(ctypes.get_errno())
def _report(count, why, **detail):
    print(json.dumps({'forked': os.path.isdir('/.t'), 'count': count, 'errno': why,
                      'detail': detail}, sort_keys=True))
_held = globals().setdefault('_budget_held', [])
"#;

/// The share a session must get of a budget when nothing else holds any.
#[derive(Debug, Clone, Copy)]
enum Share {
    /// Exactly this count (a ceiling the jail sets).
    Exactly(u64),
    /// Exactly the session's own soft rlimit, `detail.rlimit`.
    Rlimit,
}

/// How many live sessions grab a budget before the new one.
#[derive(Debug, Clone, Copy)]
enum Holders {
    /// [`HOLDERS`].
    Default,
    /// Enough that, were the sessions' shares one count at the host level
    /// with the ceiling in `host` (a sysctl), they would leave the new
    /// session none: that ceiling over `each` share, plus one.
    ToExhaust { host: &'static str, each: usize },
}

impl Holders {
    fn count(self) -> usize {
        match self {
            Holders::Default => HOLDERS,
            Holders::ToExhaust { host, each } => {
                let ceiling: usize = std::fs::read_to_string(host)
                    .unwrap_or_else(|e| panic!("{host}: {e}"))
                    .trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("{host}: {e}"));
                let n = (ceiling / each + 1).max(HOLDERS);
                if n > MAX_HOLDERS {
                    eprintln!(
                        "BUDGET {host} is {ceiling}: {n} sessions would share it out, \
                         {MAX_HOLDERS} hold it here"
                    );
                }
                n.min(MAX_HOLDERS)
            }
        }
    }
}

struct Budget {
    name: &'static str,
    holders: Holders,
    /// Python, after [`PRELUDE`]: grabs all it can, keeps it, calls
    /// `_report`, and defines `_budget_still()`, how much it still holds.
    probe: &'static str,
    /// The errno that ends a full grab.
    errno: &'static str,
    share: Share,
    /// Every session's `detail.calls`, exactly, when not empty.
    calls: &'static [(&'static str, &'static str)],
    /// How much less of it a forked session has by design than a cold one,
    /// whatever its siblings hold.
    forked_offset: u64,
}

/// 1. inotify instances: the jail's init writes 64 to its own namespace's
///    `max_inotify_instances` (jailer/src/userns_limits.rs); the host's
///    `fs.inotify.max_user_instances` (128 by default) is the ceiling of the
///    namespace owner's count at the host level. `inotify_init1` answers
///    EMFILE for both, and for RLIMIT_NOFILE: `detail` says how many fds the
///    session had open.
const INOTIFY_INSTANCES: Budget = Budget {
    name: "inotify instances",
    holders: Holders::Default,
    probe: r#"
n, why = 0, None
while n < 100000:
    fd = _libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        why = _last()
        break
    _held.append(fd)
    n += 1
def _budget_still():
    return sum(os.readlink(f'/proc/self/fd/{fd}') == 'anon_inode:inotify' for fd in _held)
_report(n, why, open_fds=len(os.listdir('/proc/self/fd')),
        nofile=resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"#,
    errno: "EMFILE",
    share: Share::Exactly(64),
    calls: &[],
    forked_offset: 0,
};

/// 2. inotify watches, on one instance: the jail's ceiling is 8192
///    (`max_inotify_watches`), the host's `fs.inotify.max_user_watches` the
///    owner's at the host level. 8300 empty files in `/tmp`, whose tmpfs has
///    one inode per 4 KiB (`tmp_inodes` in jailer/src/rootfs.rs: 16384 for
///    the default 64 MiB). The host's ceiling is large (one per ~1.3 KiB of
///    1% of RAM), so enough holders to share it out were it one count: four
///    would not show it.
const INOTIFY_WATCHES: Budget = Budget {
    name: "inotify watches",
    holders: Holders::ToExhaust {
        host: "/proc/sys/fs/inotify/max_user_watches",
        each: 8192,
    },
    probe: r#"
_dir = '/tmp/watched'
os.makedirs(_dir, exist_ok=True)
for i in range(8300):
    open(f'{_dir}/{i}', 'w').close()
_wfd = _libc.inotify_init1(os.O_CLOEXEC)
n, why = 0, None
if _wfd < 0:
    why = 'inotify_init1 ' + _last()
else:
    _held.append(_wfd)
    for i in range(8300):
        if _libc.inotify_add_watch(_wfd, f'{_dir}/{i}'.encode(), 0x2) < 0:  # IN_MODIFY
            why = _last()
            break
        n += 1
def _budget_still():
    with open(f'/proc/self/fdinfo/{_wfd}') as f:
        return sum(l.startswith('inotify wd:') for l in f)
_report(n, why, files=8300)
"#,
    errno: "ENOSPC",
    share: Share::Exactly(8192),
    calls: &[],
    forked_offset: 0,
};

/// 3. Namespaces (user, pid, net, mount, ipc, uts, cgroup, time): each
///    kind is a per-user count along the chain (`max_*_namespaces`), but a
///    session makes none: seccomp refuses `unshare` and `setns` outright,
///    `clone` with any `CLONE_NEW*` flag (EPERM), and `clone3` (ENOSYS, so
///    that libc falls back to `clone`). Were they let through, `setns(-1)`
///    would say EBADF and `clone3(NULL, 0)` EINVAL. `detail.sysctl` is what
///    `/proc/sys/user` says inside the jail: the ceilings of the jail's own
///    user namespace.
const NAMESPACES: Budget = Budget {
    name: "namespaces",
    holders: Holders::Default,
    probe: r#"
_flags = {'CLONE_NEWUSER': 0x10000000, 'CLONE_NEWPID': 0x20000000, 'CLONE_NEWNET': 0x40000000,
          'CLONE_NEWNS': 0x00020000, 'CLONE_NEWIPC': 0x08000000, 'CLONE_NEWUTS': 0x04000000,
          'CLONE_NEWCGROUP': 0x02000000, 'CLONE_NEWTIME': 0x80}
made, calls = 0, {}
for _name, _flag in _flags.items():
    for _try in range(3):
        r = _libc.unshare(_flag)
        calls[f'unshare {_name}'] = 'ok' if r == 0 else _last()
        made += r == 0
        # CLONE_NEWTIME shares its bit with clone's exit signal: only unshare
        # and clone3 take it.
        if _name != 'CLONE_NEWTIME':
            r = _libc.syscall(56, _flag | 17, 0, 0, 0, 0)  # SYS_clone, SIGCHLD
            if r == 0:
                os._exit(0)
            if r > 0:
                os.waitpid(r, 0)
                made += 1
            calls[f'clone {_name}'] = 'ok' if r >= 0 else _last()
r = _libc.syscall(435, None, 0)  # SYS_clone3
calls['clone3'] = 'ok' if r >= 0 else _last()
r = _libc.setns(-1, 0x10000000)
calls['setns CLONE_NEWUSER'] = 'ok' if r == 0 else _last()
def _read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError as e:
        return _errname(e.errno)
try:
    _sysctl = {f: _read(f'/proc/sys/user/{f}') for f in sorted(os.listdir('/proc/sys/user'))}
except OSError as e:
    _sysctl = _errname(e.errno)
def _budget_still():
    return 0
_errs = sorted({v for v in calls.values()} - {'ENOSYS'})
_report(made, ','.join(_errs), calls=calls, sysctl=_sysctl)
"#,
    errno: "EPERM",
    share: Share::Exactly(0),
    calls: NAMESPACE_CALLS,
    forked_offset: 0,
};

/// Every namespace call a session makes, and its errno.
const NAMESPACE_CALLS: &[(&str, &str)] = &[
    ("clone CLONE_NEWCGROUP", "EPERM"),
    ("clone CLONE_NEWIPC", "EPERM"),
    ("clone CLONE_NEWNET", "EPERM"),
    ("clone CLONE_NEWNS", "EPERM"),
    ("clone CLONE_NEWPID", "EPERM"),
    ("clone CLONE_NEWUSER", "EPERM"),
    ("clone CLONE_NEWUTS", "EPERM"),
    ("clone3", "ENOSYS"),
    ("setns CLONE_NEWUSER", "EPERM"),
    ("unshare CLONE_NEWCGROUP", "EPERM"),
    ("unshare CLONE_NEWIPC", "EPERM"),
    ("unshare CLONE_NEWNET", "EPERM"),
    ("unshare CLONE_NEWNS", "EPERM"),
    ("unshare CLONE_NEWPID", "EPERM"),
    ("unshare CLONE_NEWTIME", "EPERM"),
    ("unshare CLONE_NEWUSER", "EPERM"),
    ("unshare CLONE_NEWUTS", "EPERM"),
];

/// 4. Pending signals (RLIMIT_SIGPENDING): a real-time signal, blocked in
///    this thread, queued to this thread (`rt_tgsigqueueinfo`, with
///    `SI_QUEUE` as `sigqueue(3)` sends it; thread-directed, so no other
///    thread of the interpreter, which does not block it, takes it) until
///    EAGAIN. Every queued one stays pending, charged to the user, until
///    the interpreter ends. The first count, at (own namespace, own uid),
///    is checked against the process's own rlimit; each count further up
///    against the rlimit the namespace's creator had.
const SIGPENDING: Budget = Budget {
    name: "pending signals",
    holders: Holders::Default,
    probe: r#"
import signal, threading
_sig = int(signal.SIGRTMIN) + 2
if threading.current_thread() is threading.main_thread():
    signal.signal(_sig, lambda *a: None)
signal.pthread_sigmask(signal.SIG_BLOCK, {_sig})
class _SigInfo(ctypes.Structure):
    _fields_ = [('signo', ctypes.c_int), ('errno', ctypes.c_int), ('code', ctypes.c_int),
                ('pad', ctypes.c_int), ('pid', ctypes.c_int), ('uid', ctypes.c_uint),
                ('value', ctypes.c_long), ('rest', ctypes.c_char * 96)]
assert ctypes.sizeof(_SigInfo) == 128
_info = _SigInfo(signo=_sig, code=-1, pid=os.getpid(), uid=os.getuid(), value=7)  # SI_QUEUE
_tid = threading.get_native_id()
n, why = 0, None
while n < 10**7:
    if _libc.syscall(297, os.getpid(), _tid, _sig, ctypes.byref(_info)) != 0:  # rt_tgsigqueueinfo
        why = _last()
        break
    n += 1
def _status(key):
    with open('/proc/self/status') as f:
        return next(l.split(':', 1)[1].strip() for l in f if l.startswith(key + ':'))
def _budget_still():
    return int(_status('SigQ').split('/')[0])
_report(n, why, rlimit=resource.getrlimit(resource.RLIMIT_SIGPENDING)[0], sigq=_status('SigQ'))
"#,
    errno: "EAGAIN",
    share: Share::Rlimit,
    calls: &[],
    forked_offset: 0,
};

/// 5. POSIX message-queue bytes (RLIMIT_MSGQUEUE): `mq_open` (the raw
///    call; the IPC namespace's internal mqueue mount serves it, no
///    `/dev/mqueue` needed) with `O_CREAT | O_EXCL`, first of queues of 10
///    messages of 8192 bytes, then of 1 × 1024 bytes, then of 1 × 1 byte,
///    each until the kernel refuses to make one. The count is the bytes the
///    kernel would charge (`mqueue_get_inode`): the messages, a `msg_msg`
///    header (48 bytes) for each, and a priority-tree node (48 bytes) per
///    possible priority.
///
///    Every jail refuses `mq_open` (seccomp, EPERM) and has no message-queue
///    bytes (`RLIMIT_MSGQUEUE` 0): a queue was never of use in a jail (its
///    Landlock domain refuses the open of the queue the kernel made and
///    charged), and without a queue nothing is charged to anyone's budget.
///    So every session's share is 0, and it stays 0 whatever its siblings
///    do: `detail.calls` checks the errno of the first try.
const MSGQUEUE: Budget = Budget {
    name: "message-queue bytes",
    holders: Holders::Default,
    probe: r#"
class _MqAttr(ctypes.Structure):
    _fields_ = [('flags', ctypes.c_long), ('maxmsg', ctypes.c_long), ('msgsize', ctypes.c_long),
                ('curmsgs', ctypes.c_long), ('pad', ctypes.c_long * 4)]
def _mq_bytes(maxmsg, msgsize):
    return maxmsg * msgsize + maxmsg * 48 + min(maxmsg, 32768) * 48
def _mq_open(name, flags, attr=None):
    fd = _libc.syscall(240, name, flags | os.O_CLOEXEC, 0o600,
                       None if attr is None else ctypes.byref(attr))  # SYS_mq_open
    return fd, 'ok' if fd >= 0 else _last()
_create = os.O_RDWR | os.O_CREAT | os.O_EXCL
total, phases, calls, opened = 0, [], {}, 0
for maxmsg, msgsize in ((10, 8192), (1, 1024), (1, 1)):
    n, why = 0, None
    while n < 1000:
        name = f'budget-{maxmsg}x{msgsize}-{n}'.encode()
        fd, err = _mq_open(name, _create, _MqAttr(maxmsg=maxmsg, msgsize=msgsize))
        calls.setdefault('mq_open a new queue', err)
        if fd < 0 and err != 'EACCES':
            why = err
            break
        if fd >= 0:
            opened += 1
        else:
            calls.setdefault('mq_open it again with O_EXCL', _mq_open(name, _create)[1])
        _held.append((name, _mq_bytes(maxmsg, msgsize)))
        total += _mq_bytes(maxmsg, msgsize)
        n += 1
    phases.append([maxmsg, msgsize, n, why])
def _budget_still():
    return sum(b for name, b in _held if _mq_open(name, os.O_RDONLY)[1] != 'ENOENT')
_report(total, phases[0][3], queues=phases, opened=opened, calls=calls,
        rlimit=resource.getrlimit(resource.RLIMIT_MSGQUEUE)[0])
"#,
    errno: "EPERM",
    share: Share::Exactly(0),
    calls: &[("mq_open a new queue", "EPERM")],
    forked_offset: 0,
};

/// 6. Locked memory as the kernel charges it to the user (RLIMIT_MEMLOCK).
///    Plain `mlock` is counted per process (`mm->locked_vm` against the
///    caller's rlimit) and never reaches the user's count. `user_shm_lock`
///    does: it charges the user's `UCOUNT_RLIMIT_MEMLOCK` along the chain
///    for `shmctl(SHM_LOCK)` of a SysV segment, and for hugetlb memfds and
///    shm segments (which need huge pages the host may not have). So:
///    one-page segments (`shmget` in the session's own IPC namespace),
///    each locked, until `SHM_LOCK` fails (ENOMEM). The count is pages; the
///    jail's RLIMIT_MEMLOCK is 64 KiB, 16 of them.
///
///    Forked siblings do share the count at (template namespace, template
///    uid), but its ceiling is the RLIMIT_MEMLOCK the child's namespace
///    stored when the template's python made it, 65536 *bytes*, which the
///    kernel compares with a count of *pages* (`user_shm_lock` charges
///    pages): 65536 pages, the share of 4096 sessions, out of reach of one
///    supervisor's. The host level's is the jailer's rlimit, read the same
///    way.
const MEMLOCK: Budget = Budget {
    name: "locked shm pages",
    holders: Holders::Default,
    probe: r#"
n, why = 0, None
while n < 100000:
    sid = _libc.shmget(0, 4096, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    if sid < 0:
        why = 'shmget ' + _last()
        break
    if _libc.shmctl(sid, 11, None) != 0:  # SHM_LOCK
        why = _last()
        _libc.shmctl(sid, 0, None)  # IPC_RMID
        break
    _held.append(sid)
    n += 1
def _budget_still():
    locked = 0
    for sid in _held:
        buf = ctypes.create_string_buffer(512)
        if _libc.shmctl(sid, 2, buf) == 0:  # IPC_STAT
            locked += bool(int.from_bytes(buf.raw[20:22], 'little') & 0o2000)  # SHM_LOCKED
    return locked
_report(n, why, bytes=n * 4096, rlimit=resource.getrlimit(resource.RLIMIT_MEMLOCK)[0])
"#,
    errno: "ENOMEM",
    share: Share::Exactly(16),
    calls: &[],
    forked_offset: 0,
};

/// 7. Processes: RLIMIT_NPROC (a per-user count along the chain, 64 in
///    the jail) and the session cgroup's `pids.max` (`limits.pids`, 64; each
///    session has its own cgroup). Children that sleep, forked until `fork`
///    fails (EAGAIN from either). The cgroup holds the jail's init and
///    python, so a cold session gets 62; a forked one 61, since K (python's
///    parent, outside the jail's pid namespace) lives in the session's cgroup
///    too. The siblings' shared count is the template's at (template
///    namespace, template uid), whose ceiling is the RLIMIT_NPROC the
///    template had when each child's namespace was made (it keeps the
///    host's: see the architecture guide).
const PROCESSES: Budget = Budget {
    name: "processes",
    holders: Holders::Default,
    probe: r#"
import time, warnings
n, why = 0, None
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    while n < 10000:
        try:
            pid = os.fork()
        except OSError as e:
            why = _errname(e.errno)
            break
        if pid == 0:
            try:
                while True:
                    time.sleep(3600)
            finally:
                os._exit(0)
        _held.append(pid)
        n += 1
def _budget_still():
    return sum(os.waitpid(p, os.WNOHANG) == (0, 0) for p in _held)
_report(n, why, rlimit=resource.getrlimit(resource.RLIMIT_NPROC)[0],
        tasks=sum(len(os.listdir(f'/proc/{p}/task')) for p in os.listdir('/proc') if p.isdigit()))
"#,
    errno: "EAGAIN",
    share: Share::Exactly(62),
    calls: &[],
    forked_offset: 1,
};

/// Who the `i`th of `n` holders, the new session and the cold reference is.
fn who(i: usize, n: usize) -> String {
    match i {
        i if i < n => format!("holder {i}"),
        i if i == n => "the new session".into(),
        _ => "the cold session".into(),
    }
}

/// One probe's report.
#[derive(Debug, Clone)]
struct Grab {
    forked: bool,
    count: u64,
    errno: String,
    detail: Value,
}

impl std::fmt::Display for Grab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.count, self.errno)
    }
}

fn parse(budget: &Budget, r: &RunReply) -> Grab {
    let out = stdout(r);
    let line = out.lines().last().unwrap_or("");
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "the {} probe printed no report ({e}): stdout {out:?}, stderr {:?}, {:?}",
            budget.name,
            stderr(r),
            r.outcome
        )
    });
    Grab {
        forked: v["forked"].as_bool().expect("forked"),
        count: v["count"].as_u64().expect("count"),
        errno: v["errno"].as_str().unwrap_or("none").to_string(),
        detail: v["detail"].clone(),
    }
}

/// Runs `budget`'s probe in session `s` and returns what it grabbed.
async fn grab(c: &Client, s: &str, budget: &Budget) -> Grab {
    let r = run(c, s, &format!("{PRELUDE}{}", budget.probe)).await;
    parse(budget, &r)
}

/// A new session of `mode`: in forked mode the first waits until the
/// template is up (the starts before that are cold); after it, every start
/// must be a fork, which each probe's report checks.
async fn new_session(d: &Daemon, c: &Client, mode: Mode, first: bool) -> String {
    if mode == Mode::Forked && first {
        forked_session(d, c).await
    } else {
        c.open_session(None).await.unwrap().session_id
    }
}

/// The share a cold session gets with nothing else holding any: the first
/// session's in cold mode; in forked mode, that of a cold supervisor's
/// session started for it.
async fn cold_share(budget: &Budget) -> Grab {
    let d = Supervisor::start(Mode::Cold);
    let c = d.client().await;
    let s = new_session(&d, &c, Mode::Cold, true).await;
    grab(&c, &s, budget).await
}

/// What the host sees of `d`'s template: its python's `SigQ` (the pending
/// signals counted at (template namespace, template uid): the count every
/// forked child is charged at one level up) and its rlimits.
fn template_view(d: &Daemon) -> String {
    let mut view = String::new();
    for pid in template_pythons(d) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let sigq = status
            .lines()
            .find(|l| l.starts_with("SigQ:"))
            .unwrap_or("");
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
        let wanted = [
            "Max processes",
            "Max locked memory",
            "Max pending signals",
            "Max msgqueue size",
        ];
        let limits: Vec<_> = limits
            .lines()
            .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let sigq = sigq.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = write!(view, "template python {pid}: {sigq}; {}", limits.join("; "));
    }
    view
}

/// Live sessions of `mode` (`budget.holders` of them) each grab all they
/// can of `budget` and keep it; then a new session grabs its share. Every
/// one of them must get the share a cold jail gets (less a forked
/// session's `forked_offset`), with the same errno at the end.
async fn exhaust(budget: &Budget, mode: Mode) {
    let d = Supervisor::start(mode);
    let c = d.client().await;
    let mut holders = Vec::new();
    let mut grabs = Vec::new();
    let n = budget.holders.count();
    for i in 0..n {
        let s = new_session(&d, &c, mode, i == 0).await;
        grabs.push(grab(&c, &s, budget).await);
        holders.push(s);
    }
    let new = new_session(&d, &c, mode, false).await;
    let last = grab(&c, &new, budget).await;
    grabs.push(last);
    let template = template_view(&d);

    // Every holder still holds what it got, in the interpreter it got it in.
    let mut still = Vec::new();
    let mut failures = Vec::new();
    for (i, s) in holders.iter().enumerate() {
        let r = run(&c, s, "print(_budget_still())").await;
        if (r.interpreter.state, r.interpreter.reason) != (InterpreterState::Kept, None) {
            failures.push(format!(
                "{}'s interpreter was not kept: {:?}",
                who(i, n),
                r.interpreter
            ));
        }
        still.push(stdout(&r).trim().parse::<u64>().unwrap_or_else(|_| {
            panic!(
                "_budget_still() in a holder: {:?} {:?}",
                stdout(&r),
                stderr(&r)
            )
        }));
    }

    let cold = match mode {
        Mode::Cold => grabs[0].clone(),
        Mode::Forked => cold_share(budget).await,
    };
    let counts: Vec<u64> = grabs.iter().map(|g| g.count).collect();
    let table = format!(
        "{} ({mode:?}): holders {}, new session {}; a cold session alone: {}; \
         holders still hold {still:?}{}",
        budget.name,
        grabs[..n]
            .iter()
            .map(Grab::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        grabs[n],
        cold,
        if template.is_empty() {
            String::new()
        } else {
            format!("; {template}")
        }
    );
    eprintln!("BUDGET {table}");
    for (i, g) in grabs.iter().enumerate() {
        eprintln!("BUDGET   {}: {} {}", who(i, n), g, g.detail);
    }
    eprintln!("BUDGET   cold: {} {}", cold, cold.detail);

    // Each session ran where the mode says.
    for (i, g) in grabs.iter().enumerate() {
        if g.forked != (mode == Mode::Forked) {
            failures.push(format!(
                "{} was {} (a forked start that failed falls back to a cold one)",
                who(i, n),
                if g.forked { "forked" } else { "cold" }
            ));
        }
    }
    assert!(!cold.forked, "the cold reference session was forked");
    // The cold share is what the jail says it is.
    let rlimit = cold.detail["rlimit"].as_u64();
    let expected = match budget.share {
        Share::Exactly(n) => cold.count == n,
        Share::Rlimit => Some(cold.count) == rlimit,
    };
    if !expected {
        failures.push(format!(
            "a cold session alone got {cold}, not {:?} (its rlimit: {rlimit:?})",
            budget.share
        ));
    }
    // Every session, the holders and the new one, got the same share, and
    // stopped for the same reason.
    let share = match mode {
        Mode::Cold => cold.count,
        Mode::Forked => cold.count.saturating_sub(budget.forked_offset),
    };
    if counts.iter().any(|&n| n != share) {
        failures.push(format!(
            "the {n} holders and the new session got {counts:?} where each should get \
             {share} (a cold session alone gets {}{})",
            cold.count,
            match (mode, budget.forked_offset) {
                (Mode::Forked, n) if n > 0 => format!(", a forked one {n} less by design"),
                _ => String::new(),
            }
        ));
    }
    for (i, g) in grabs.iter().chain([&cold]).enumerate() {
        if g.errno != budget.errno {
            failures.push(format!(
                "{} stopped with {} where {} ends a full grab: {}",
                who(i, n),
                g.errno,
                budget.errno,
                g.detail
            ));
        }
    }
    if still != counts[..n] {
        failures.push(format!(
            "the holders hold {still:?} at the end, not the {:?} they got",
            &counts[..n]
        ));
    }
    if !budget.calls.is_empty() {
        let want: serde_json::Map<String, Value> = budget
            .calls
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        // A session that got none of a budget made no call that got through.
        let made_any = |g: &Grab| g.count > 0 || matches!(budget.share, Share::Exactly(0));
        for (i, g) in grabs.iter().chain([&cold]).enumerate() {
            if made_any(g) && g.detail["calls"].as_object() != Some(&want) {
                failures.push(format!(
                    "{}: the calls answered {}",
                    who(i, n),
                    g.detail["calls"]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{table}\n- {}", failures.join("\n- "));
}

macro_rules! in_both_modes {
    ($budget:expr, $cold:ident, $forked:ident) => {
        #[tokio::test(flavor = "multi_thread")]
        async fn $cold() {
            exhaust(&$budget, Mode::Cold).await;
        }

        #[tokio::test(flavor = "multi_thread")]
        async fn $forked() {
            exhaust(&$budget, Mode::Forked).await;
        }
    };
}

in_both_modes!(
    INOTIFY_INSTANCES,
    kernel_budgets_inotify_instances_are_each_sessions_own_cold,
    kernel_budgets_inotify_instances_are_each_sessions_own_forked
);
in_both_modes!(
    INOTIFY_WATCHES,
    kernel_budgets_inotify_watches_are_each_sessions_own_cold,
    kernel_budgets_inotify_watches_are_each_sessions_own_forked
);
in_both_modes!(
    NAMESPACES,
    kernel_budgets_namespaces_are_refused_to_every_session_cold,
    kernel_budgets_namespaces_are_refused_to_every_session_forked
);
in_both_modes!(
    SIGPENDING,
    kernel_budgets_pending_signals_are_each_sessions_own_cold,
    kernel_budgets_pending_signals_are_each_sessions_own_forked
);
in_both_modes!(
    MSGQUEUE,
    kernel_budgets_message_queue_bytes_are_each_sessions_own_cold,
    kernel_budgets_message_queue_bytes_are_each_sessions_own_forked
);
in_both_modes!(
    MEMLOCK,
    kernel_budgets_locked_shm_memory_is_each_sessions_own_cold,
    kernel_budgets_locked_shm_memory_is_each_sessions_own_forked
);
in_both_modes!(
    PROCESSES,
    kernel_budgets_processes_are_each_sessions_own_cold,
    kernel_budgets_processes_are_each_sessions_own_forked
);

/// What a session sees of its budgets: its rlimits and the ceilings of its
/// user namespace, the same in a forked session as in a cold one.
const ENVIRONMENT: &str = r#"
import errno, json, os, resource
def _read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError as e:
        return errno.errorcode[e.errno]
def _dir(d):
    try:
        return {f: _read(f'{d}/{f}') for f in sorted(os.listdir(d))}
    except OSError as e:
        return errno.errorcode[e.errno]
print(json.dumps({
    'forked': os.path.isdir('/.t'),
    'rlimits': {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n))
                for n in ('SIGPENDING', 'MSGQUEUE', 'MEMLOCK', 'NPROC', 'NOFILE')},
    '/proc/sys/user': _dir('/proc/sys/user'),
    '/proc/sys/fs/inotify': _dir('/proc/sys/fs/inotify'),
    '/proc/sys/fs/mqueue': _dir('/proc/sys/fs/mqueue'),
}, sort_keys=True))
"#;

async fn environment(mode: Mode) -> Value {
    let d = Supervisor::start(mode);
    let c = d.client().await;
    let s = new_session(&d, &c, mode, true).await;
    let r = run(&c, &s, ENVIRONMENT).await;
    let mut v: Value = serde_json::from_str(stdout(&r).trim())
        .unwrap_or_else(|e| panic!("{e}: {:?} {:?}", stdout(&r), stderr(&r)));
    assert_eq!(v["forked"], Value::Bool(mode == Mode::Forked), "{v}");
    v["template"] = Value::String(template_view(&d));
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn kernel_budgets_a_forked_session_has_the_rlimits_and_ceilings_of_a_cold_one() {
    let cold = environment(Mode::Cold).await;
    let forked = environment(Mode::Forked).await;
    eprintln!("BUDGET environment cold: {cold}");
    eprintln!("BUDGET environment forked: {forked}");
    let user = &cold["/proc/sys/user"];
    assert_eq!(user["max_inotify_instances"], "64", "{cold}");
    assert_eq!(user["max_inotify_watches"], "8192", "{cold}");
    assert_eq!(
        cold["rlimits"]["MEMLOCK"],
        serde_json::json!([65536, 65536])
    );
    assert_eq!(cold["rlimits"]["NPROC"], serde_json::json!([64, 64]));
    for key in [
        "rlimits",
        "/proc/sys/user",
        "/proc/sys/fs/inotify",
        "/proc/sys/fs/mqueue",
    ] {
        assert_eq!(
            cold[key], forked[key],
            "{key}: cold {cold}\nforked {forked}"
        );
    }
}
