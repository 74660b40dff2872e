"""Python's parent: a fork of the template that builds a jail around
itself with the jailer that adopts it, forks python into it, says how
python ended, and forks a fresh python in the same jail when the
supervisor asks. It runs no user code, and nothing in the jail can reach
it: it is outside the jail's pid namespace and holds no fd of the jail's.
Its messages are `prims_protocol::fork`'s."""

import fcntl
import os
import signal
import socket as _socket
import struct
import sys
import time

from prims_agent import stops
from prims_agent.channel import CHANNEL_FD, DECODER, ENCODER, exit_now
from prims_agent.text import why

# prims_protocol::fork::MESSAGE_MAX: the largest message either way.
MESSAGE_MAX = 256 * 1024
# prims_protocol::fork::TO_CHILD_FDS_MAX: stdio, the channel and a job
# cgroup's v1 `tasks` files.
TO_CHILD_FDS_MAX = 8
# Set in a template's environment (agent.rs BLAS_THREADS): one thread per
# BLAS pool, since a thread does not survive a fork.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
# What the agent makes as it starts: IPython's profile directory (shell.py).
# matplotlib makes its own when it first needs it.
_AGENT_DIRS = ("IPYTHONDIR",)
_CLONE_NEWNS = 0x00020000
_CLONE_NEWCGROUP = 0x02000000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
# The rlimits the kernel counts per user along the user-namespace chain
# (the jailer's privs::PER_USER).
_PER_USER = ("RLIMIT_NPROC", "RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE", "RLIMIT_MEMLOCK")
# How long what a python left may take to die.
_EMPTY_WITHIN_S = 3
_MT_KEY_WORDS = 624


def _say(sock, msg, fds=()):
    """One message on `sock`, with `fds` beside it."""
    data = [ENCODER.encode(msg).encode()]
    if fds:
        sock.sendmsg(data, [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))])
    else:
        sock.sendmsg(data)


def fds_of(ancillary, socket):
    import array

    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return list(fds)


def close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def become_parent(agent, ready, socks, stray, sys_, forked_main):
    """From a fork of the template to python's parent, and python in its
    own jail; then the parent forks a fresh python when the supervisor
    asks. Each python goes on in `forked_main` from where its parent forked
    it: unwinding the frames below would cost it copy-on-write faults for
    nothing."""
    stops.shield()
    close_all(stray)
    # The template's channel and stdio copies closed at the fork; their
    # numbers may come back, and the at-fork hook must not close them.
    agent.channel = -1
    agent.saved = {}
    socket = sys_.socket
    try:
        ctl, fresh = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in socks)
        close_all(socks)
        peer = socket.socket(fileno=ctl)
        _say(peer, {"op": "hello"})
        plan, fds = _receive(peer, socket, "plan", None)
        attach = int(plan.get("attach", 0))
        if len(fds) != 3 + attach:
            raise OSError("plan carried %d fds, not %d" % (len(fds), 3 + attach))
        # On cgroup v1 a thread that moves itself skips the global lock (and
        # its RCU grace period) that moving another pid takes; the jailer
        # opened these job `tasks` files and checks where we landed.
        for fd in fds[3:]:
            os.write(fd, b"0")
            os.close(fd)
        null = os.open(os.devnull, os.O_RDWR)
        for src, dst in ((null, 0), (fds[0], 1), (fds[1], 2), (fds[2], CHANNEL_FD)):
            os.dup2(src, dst)
        sys_.close_all_but(CHANNEL_FD + 1, (ctl, fresh))
        _lift_per_user(sys_.resource)
        sys_.unshare(_CLONE_NEWUSER)
        sys_.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS)
        _say(peer, {"op": "unshared"})
        _, handed = _receive(peer, socket, "go", None)
        if not 1 <= len(handed) <= 2:
            raise OSError("go carried %d fds" % len(handed))
        # The init's pid namespace, where python is pid 2.
        sys_.setns(handed[0], _CLONE_NEWPID)
        os.close(handed[0])
        # Now in the job cgroup: its root is the namespace's.
        sys_.unshare(_CLONE_NEWCGROUP)
        # Confined before the fork, so that python is in K's Landlock
        # domain, where K may signal it (Landlock scopes signals).
        _restrict(plan, handed[1:], sys_)
        # Once here rather than in every python: a fork's own work pays
        # copy-on-write faults that K, long-lived, pays once.
        _settle()
        _reseed()
        python = os.fork()
        if python == 0:
            _confine(peer, fresh)
            forked_main(agent, ready)
        # Orphans go to the reaper of their parent's pid namespace, not
        # python's: this process stays python's parent, and tells the init
        # how python ended.
        _watch(python, peer, fresh, sys_, lambda: forked_main(agent, ready))
    except BaseException as e:
        try:
            _say(peer, {"op": "failed", "why": why(e)})
        except BaseException:
            pass
        exit_now(1)


def _lift_per_user(res):
    """Soft per-user rlimits up to the hard ones, which a template has
    unlimited. The kernel caps what the template's uid counts for the new
    user namespace at the rlimits of the process that makes it: unlimited,
    no sibling's use takes from this jail's share (the plan sets the
    jail's own later)."""
    for name in _PER_USER:
        kind = getattr(res, name)
        res.setrlimit(kind, (res.getrlimit(kind)[1],) * 2)


def _receive(peer, socket, op, nfds):
    data, anc, flags, _ = peer.recvmsg(MESSAGE_MAX, socket.CMSG_SPACE(4 * TO_CHILD_FDS_MAX), socket.MSG_CMSG_CLOEXEC)
    fds = fds_of(anc, socket)
    try:
        msg = DECODER.decode(data.decode("utf-8")) if data else None
        if not isinstance(msg, dict) or msg.get("op") != op or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise OSError("expected %s, got %r" % (op, msg))
        if nfds is not None and len(fds) != nfds:
            raise OSError("%s carried %d fds, not %d" % (op, len(fds), nfds))
    except BaseException:
        close_all(fds)
        raise
    return msg, fds


def _restrict(plan, rules, sys_):
    """What only a process can do to itself, in the order a cold jail's
    python does it before exec."""
    res = sys_.resource
    for limit in plan["rlimits"]:
        soft, hard = (res.RLIM_INFINITY if v is None else int(v) for v in (limit["soft"], limit["hard"]))
        res.setrlimit(getattr(res, "RLIMIT_" + str(limit["resource"]).upper()), (soft, hard))
    sys_.drop_capabilities(int(plan["cap_last_cap"]))
    sys_.no_new_privs()
    for fd in rules:
        sys_.landlock(fd)
        os.close(fd)
    for program in plan["filters"]:
        sys_.seccomp(bytes.fromhex(program))


def _confine(peer, fresh):
    """Python, pid 2: confined and settled as its parent is, it holds none
    of its parent's sockets; any failure ends it before user code runs."""
    try:
        peer.close()
        os.close(fresh)
    except BaseException:
        exit_now(126)


def _settle():
    """What python finds in its jail besides its parent's confinement; the
    parent sets it up once, before its first fork of python (nothing in
    the jail can change the parent's working directory or environment)."""
    os.chdir("/workspace")
    # The template's own thread-pool caps are no part of python's
    # environment (what python already loaded keeps one thread).
    for var in BLAS_THREADS:
        os.environ.pop(var, None)
    _agent_dirs()


def _agent_dirs():
    """What the template made as it started (IPython's profile, in /tmp),
    this jail lacks (or a python removed): the parent makes it before each
    fork of python, as a cold python makes it for itself."""
    for var in _AGENT_DIRS:
        path = os.environ.get(var, "")
        if path.startswith(("/workspace/", "/tmp/")) and not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)


def _reseed():
    # `random` reseeds itself at a fork; numpy's global state does not. The
    # parent draws it anew before each fork of python, which then inherits a state
    # no sibling has, without running numpy's seeding code (and paying its
    # copy-on-write faults) itself.
    random = sys.modules.get("numpy.random")
    if random is None:
        return
    try:
        # A whole Mersenne Twister state from the kernel: as strong as
        # seed(), which hashes 128 bits into one, at half its cost.
        key = sys.modules["numpy"].frombuffer(os.urandom(_MT_KEY_WORDS * 4), dtype="<u4")
        random.set_state(("MT19937", key, _MT_KEY_WORDS))
    except Exception:
        try:
            random.seed()
        except Exception:
            pass


def _watch(python, peer, fresh, sys_, go_on):
    """Confined as python is, the parent holds nothing of python's, says how
    python ended, and forks a fresh python when the supervisor asks on
    `fresh`."""
    sys_.close_range(0, CHANNEL_FD)
    socket = sys_.socket
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, _on_child)
    asks = socket.socket(fileno=fresh)
    while True:
        status = _ended(python, os.WNOHANG)
        if status is not None:
            _say(peer, status)
            exit_now(0)
        watched = [wake_r] + ([asks] if asks is not None else [])
        try:
            ready = sys_.select.select(watched, [], [])[0]
        except InterruptedError:
            continue
        try:
            os.read(wake_r, 512)
        except BlockingIOError:
            pass
        if asks not in ready:
            continue
        try:
            _, fds = _receive(asks, socket, "fresh", 3)
        except (OSError, ValueError):
            # The supervisor is gone, or asked wrongly: no more fresh pythons.
            asks.close()
            asks = None
            continue
        python = _fresh_in_place(python, fds, peer, asks, sys_, go_on)


def _on_child(signum, frame):
    # The wakeup fd does the work; a handler makes the signal reach it.
    pass


def _ended(python, flags):
    """How `python` ended, as the init reports it; None while it runs."""
    while True:
        try:
            pid, status = os.waitpid(python, flags)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            return {"op": "signaled", "signal": signal.SIGKILL}
    if pid == 0:
        return None
    if os.WIFSIGNALED(status):
        return {"op": "signaled", "signal": os.WTERMSIG(status)}
    return {"op": "exited", "code": os.WEXITSTATUS(status)}


def _fresh_in_place(python, fds, peer, asks, sys_, go_on):
    """A fresh python in this jail: the old one and everything it left in
    the pid namespace killed first. Returns the new pid; the new python
    goes on with `go_on`. A jail that cannot be emptied ends, and the
    supervisor starts anew."""
    failure = None
    try:
        os.kill(python, signal.SIGKILL)
        _ended(python, 0)
        _empty_jail(sys_)
        _empty_dirs(sys_.stat)
        _agent_dirs()
        _no_ipc_left()
        _reseed()
        pid = os.fork()
    except Exception as e:
        failure = why(e)
    if failure is not None:
        close_all(fds)
        try:
            _say(asks, {"op": "failed", "why": failure})
        finally:
            _say(peer, {"op": "signaled", "signal": signal.SIGKILL})
            exit_now(0)
    if pid == 0:
        _renew(fds, sys_)
        go_on()
    close_all(fds)
    answer = {"op": "forked", "pid": pid}
    # With a pidfd of the new python, the supervisor finds it without
    # walking /proc (in_place.rs); without one, it walks.
    pidfd = sys_.pidfd_open(pid)
    if pidfd < 0:
        _say(asks, answer)
        return pid
    try:
        _say(asks, answer, (pidfd,))
    finally:
        os.close(pidfd)
    return pid


def _empty_jail(sys_):
    """Kills every process of the jail's pid namespace but its init, by
    the `/proc` of that namespace (our own pids are another namespace's),
    until the init has reaped them all. A process forked as a pass goes by
    is caught by the next; a killed one forks no more."""
    deadline = time.monotonic() + _EMPTY_WITHIN_S
    while True:
        alive = False
        for name in os.listdir("/proc"):
            if name.isdigit() and name != "1":
                _kill_live(name, sys_)
                alive = True
        if not alive:
            return
        if time.monotonic() > deadline:
            raise OSError("what the last python left did not die within %d s" % _EMPTY_WITHIN_S)
        time.sleep(0.001)


def _kill_live(name, sys_):
    """SIGKILL to /proc/`name` unless it is gone or dead already. Any other
    failure is the caller's."""
    try:
        fd = os.open("/proc/" + name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        try:
            with open(os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=fd), "rb") as f:
                state = f.read().rpartition(b")")[2].split()[:1]
        except (FileNotFoundError, ProcessLookupError):
            return
        if state in ([b"Z"], [b"X"], []):
            return
        # A /proc/<pid> directory serves pidfd_send_signal as a pidfd.
        sys_.pidfd_kill(fd, name)
    finally:
        os.close(fd)


def _renew(fds, sys_):
    """A fresh python: its parent's confinement, and the jail its parent
    emptied, are already its own; it takes its new stdio and channel."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Above 0-3 first: K's own fds there (its wakeup pipe) may be any
        # of the new ones' sources.
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        srcs = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, CHANNEL_FD + 1) for fd in [null] + fds]
        for dst, src in enumerate(srcs):
            os.dup2(src, dst)
        sys_.close_range(CHANNEL_FD + 1, 0xFFFFFFFF)
    except BaseException:
        exit_now(126)


# What a new jail has empty, and a fresh python in place must find so: the
# last one's files, and its POSIX semaphores and shared memory.
_EMPTIED = ("/tmp", "/dev/shm")


def _empty_dirs(stat):
    """The jail's /tmp and /dev/shm as a new jail's: empty."""
    def remove(path):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            os.chmod(path, 0o700)
            for name in os.listdir(path):
                remove(path + "/" + name)
            os.rmdir(path)
        else:
            os.unlink(path)

    for top in _EMPTIED:
        for name in os.listdir(top):
            remove(top + "/" + name)


def _no_ipc_left():
    """System V objects outlive their makers in the jail's IPC namespace:
    a python that left any is not replaced in place. Each file is a header
    line, then one line per object."""
    for kind in ("shm", "sem", "msg"):
        fd = os.open("/proc/sysvipc/" + kind, os.O_RDONLY | os.O_CLOEXEC)
        try:
            lines = os.read(fd, 4096).count(b"\n")
        finally:
            os.close(fd)
        if lines > 1:
            raise OSError("the last python left System V %s objects" % kind)
