
# --- fork templates -------------------------------------------------------
# A template imports the prewarm set once, then only forks. Each fork (K)
# talks to an adopting jailer over the SOCK_SEQPACKET socket the `fork`
# frame carried: hello (the kernel attaches our pid), plan (stdio, channel,
# what to apply), unshared, go (the init's pid namespace and python's
# Landlock ruleset); then K forks G, pid 2 of the jail the jailer's init
# built around it, and G confines itself before it says ready. A second
# socket, from the supervisor, asks K for a fresh G in the same jail: K
# kills G, the init empties the pid namespace, and K forks again. See the
# architecture guide, "Fork templates" and "Fresh in place".

TEMPLATE_ENV = "PRIMS_TEMPLATE"
# Set in a template's environment (agent.rs BLAS_THREADS).
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
FORK_FRAME_MAX = 4096
_PLAN_MAX = 256 * 1024
# stdio, the channel and a job cgroup's v1 `tasks` files.
_FDS_MAX = 8
_JAIL_ID = 1000
_CLONE_NEWNS = 0x00020000
_CLONE_NEWCGROUP = 0x02000000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_PR_CAPBSET_DROP = 24
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2
_SYS_CAPSET = 126
_SYS_CLOSE_RANGE = 436
_SYS_PIDFD_OPEN = 434
_SYS_LANDLOCK_RESTRICT_SELF = 446
_CAP_VERSION_3 = 0x20080522
# struct mallinfo2, every field a size_t.
_MALLINFO2 = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")


class _Sys:
    """The calls a child makes that the os module lacks, bound before any
    prewarm import could replace ctypes."""

    def __init__(self):
        import ctypes
        import resource
        import select
        import socket
        import stat

        self.ctypes = ctypes
        self.resource = resource
        self.select = select
        self.socket = socket
        self.stat = stat
        libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = libc.prctl
        self.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        self.prctl.restype = ctypes.c_int
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.unshare_fn = libc.unshare
        self.unshare_fn.argtypes = [ctypes.c_int]
        self.setns_fn = libc.setns
        self.setns_fn.argtypes = [ctypes.c_int, ctypes.c_int]
        self.madvise = libc.madvise
        self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.libc = libc

    def heap(self):
        """The main malloc arena's span, [start, end): what sbrk grew,
        ending at the break. Empty where glibc lacks mallinfo2 (2.33)."""
        c = self.ctypes

        class Info(c.Structure):
            _fields_ = [(name, c.c_size_t) for name in _MALLINFO2]

        mallinfo2 = getattr(self.libc, "mallinfo2", None)
        if mallinfo2 is None:
            return 0, 0
        mallinfo2.restype = Info
        self.libc.sbrk.restype = c.c_void_p
        self.libc.sbrk.argtypes = [c.c_ssize_t]
        end = self.libc.sbrk(0) or 0
        return end - mallinfo2().arena, end

    def check(self, what, ret):
        if ret < 0:
            e = self.ctypes.get_errno()
            raise OSError(e, "%s: %s" % (what, os.strerror(e)))
        return ret

    def pidfd_open(self, pid):
        """A pidfd of `pid`, or -1."""
        c = self.ctypes
        return self.syscall(c.c_long(_SYS_PIDFD_OPEN), c.c_int(pid), c.c_uint(0))

    def unshare(self, flags):
        self.check("unshare", self.unshare_fn(flags))

    def setns(self, fd, kind):
        self.check("setns", self.setns_fn(fd, kind))

    def close_range(self, first, last):
        c = self.ctypes
        self.check("close_range", self.syscall(c.c_long(_SYS_CLOSE_RANGE), c.c_uint(first), c.c_uint(last), c.c_uint(0)))

    def close_all_but(self, first, keep):
        """Closes every fd from `first` up, but those in `keep`."""
        for fd in sorted(keep) + [0x100000000]:
            if fd > first:
                self.close_range(first, fd - 1)
            first = max(first, fd + 1)

    def drop_capabilities(self, cap_last_cap):
        for cap in range(cap_last_cap + 1):
            if self.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and self.ctypes.get_errno() != 22:
                self.check("PR_CAPBSET_DROP %d" % cap, -1)
        self.check("PR_CAP_AMBIENT_CLEAR_ALL", self.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0))
        os.setresgid(_JAIL_ID, _JAIL_ID, _JAIL_ID)
        os.setresuid(_JAIL_ID, _JAIL_ID, _JAIL_ID)
        c = self.ctypes
        header = (c.c_uint32 * 2)(_CAP_VERSION_3, 0)
        data = (c.c_uint32 * 6)()
        self.check("capset", self.syscall(c.c_long(_SYS_CAPSET), c.byref(header), c.byref(data)))

    def no_new_privs(self):
        self.check("no_new_privs", self.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))

    def landlock(self, ruleset):
        c = self.ctypes
        self.check("landlock_restrict_self", self.syscall(c.c_long(_SYS_LANDLOCK_RESTRICT_SELF), c.c_int(ruleset), c.c_uint(0)))

    def seccomp(self, program):
        c = self.ctypes
        if not program or len(program) % 8:
            raise ValueError("a seccomp program is whole sock_filter entries")

        class Prog(c.Structure):
            _fields_ = [("len", c.c_ushort), ("filter", c.c_void_p)]

        buf = c.create_string_buffer(program, len(program))
        prog = Prog(len(program) // 8, c.cast(buf, c.c_void_p))
        self.check("seccomp", self.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, c.addressof(prog), 0, 0))


def _fds_of(ancillary, socket):
    import array

    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return list(fds)


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _serve_forks(agent, ready, sys_):
    """The template's life after its imports: one child per `fork` frame,
    which carries the child's socket. Never returns: each python it leads
    to goes on in `_forked_main`."""
    import gc

    socket = sys_.socket
    # What the imports left is shared by every child: never walk it again.
    gc.collect()
    gc.freeze()
    _huge_pages(sys_)
    agent.send(ready)
    sock = socket.socket(fileno=os.dup(agent.channel))
    pending = bytearray()
    fds = []
    while True:
        try:
            data, anc, flags, _ = sock.recvmsg(FORK_FRAME_MAX, socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC)
        except InterruptedError:
            continue
        fds.extend(_fds_of(anc, socket))
        if not data or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            _exit(0 if not data else 1)
        pending += data
        while len(pending) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(pending)
            if size > FORK_FRAME_MAX:
                _exit(1)
            if len(pending) < _HEADER.size + size:
                break
            body = bytes(pending[_HEADER.size : _HEADER.size + size])
            del pending[: _HEADER.size + size]
            try:
                msg = _DECODER.decode(body.decode("utf-8"))
            except ValueError:
                msg = None
            if not isinstance(msg, dict) or msg.get("op") != "fork" or len(fds) < 2:
                _close_all(fds)
                fds = []
                agent.send(_error("a template only forks, each fork with its two sockets"))
                continue
            ctl, respawn = fds.pop(0), fds.pop(0)
            try:
                pid = os.fork()
            except OSError as e:
                # This child is lost, not the template: say why.
                _close_all((ctl, respawn))
                agent.send(_error("fork: %s" % _why(e)))
                continue
            if pid == 0:
                sock.detach()
                _become_child(agent, ready, (ctl, respawn), fds, sys_)
                _exit(1)
            _close_all((ctl, respawn))
            agent.send({"op": "forked", "id": msg.get("id")})
        _reap()


_HUGE = 2 << 20
_MADV_COLLAPSE = 25


def _huge_pages(sys_):
    """Backs the heap the imports left (malloc's: start.rs sets the
    allocator) with 2 MiB pages where it can, whatever the host's THP
    setting. A fork copies, and an exit unmaps, the page-table entries of
    one such page in a batch, not one 4 KiB page at a time; a process that
    writes to one splits only its own mapping of it, and copies 4 KiB.
    Best effort: a kernel before 6.1, or one short of free 2 MiB blocks,
    leaves the pages as they are. A template has no /proc: malloc says
    where its heap is."""
    start, end = sys_.heap()
    for chunk in range(-(-start // _HUGE) * _HUGE, end - _HUGE + 1, _HUGE):
        sys_.madvise(chunk, _HUGE, _MADV_COLLAPSE)


def _reap():
    # Each child exits as soon as it has forked python; nothing else is ours.
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _become_child(agent, ready, socks, stray, sys_):
    """K: from a fork of the template to G, python in its own jail; then
    G's parent, which forks a fresh G when the supervisor asks. Each G goes
    on in `_forked_main` from where K forked it: unwinding the frames
    below would cost it copy-on-write faults for nothing."""
    _close_all(stray)
    # The template's channel and stdio copies closed at the fork; their
    # numbers may come back, and the at-fork hook must not close them.
    agent.channel = -1
    agent.saved = {}
    socket = sys_.socket
    try:
        ctl, respawn = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in socks)
        _close_all(socks)
        peer = socket.socket(fileno=ctl)
        peer.send(_ENCODER.encode({"op": "hello"}).encode())
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
        sys_.close_all_but(CHANNEL_FD + 1, (ctl, respawn))
        sys_.unshare(_CLONE_NEWUSER)
        sys_.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS)
        peer.send(_ENCODER.encode({"op": "unshared"}).encode())
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
            _confine(peer, respawn)
            _forked_main(agent, ready)
        # Orphans go to the reaper of their parent's pid namespace, not
        # python's: K stays python's parent, and tells the init how python
        # ended.
        _watch(python, peer, respawn, sys_, lambda: _forked_main(agent, ready))
    except BaseException as e:
        try:
            peer.send(_ENCODER.encode({"failed": _why(e)}).encode())
        except BaseException:
            pass
        _exit(1)


def _receive(peer, socket, op, nfds):
    data, anc, flags, _ = peer.recvmsg(_PLAN_MAX, socket.CMSG_SPACE(4 * _FDS_MAX), socket.MSG_CMSG_CLOEXEC)
    fds = _fds_of(anc, socket)
    try:
        msg = _DECODER.decode(data.decode("utf-8")) if data else None
        if not isinstance(msg, dict) or msg.get("op") != op or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise OSError("expected %s, got %r" % (op, msg))
        if nfds is not None and len(fds) != nfds:
            raise OSError("%s carried %d fds, not %d" % (op, len(fds), nfds))
    except BaseException:
        _close_all(fds)
        raise
    return msg, fds


def _restrict(plan, rules, sys_):
    """What only a process can do to itself, in the order a cold jail's
    python does it before exec."""
    for name, soft, hard in plan["rlimits"]:
        sys_.resource.setrlimit(getattr(sys_.resource, "RLIMIT_" + str(name).upper()), (soft, hard))
    sys_.drop_capabilities(int(plan["cap_last_cap"]))
    sys_.no_new_privs()
    for fd in rules:
        sys_.landlock(fd)
        os.close(fd)
    for program in plan["filters"]:
        sys_.seccomp(bytes.fromhex(program))


def _confine(peer, respawn):
    """G, python, pid 2: confined and settled as K is, it holds none of
    K's sockets; any failure ends it before user code runs."""
    try:
        peer.close()
        os.close(respawn)
    except BaseException:
        _exit(126)


def _settle():
    """What python finds in its jail besides K's confinement; K sets it up
    once, before its first fork of python (nothing in the jail can change
    K's working directory or environment)."""
    os.chdir("/workspace")
    # The template's own thread-pool caps are no part of python's
    # environment (what python already loaded keeps one thread).
    for var in BLAS_THREADS:
        os.environ.pop(var, None)
    _workspace_dirs()


def _workspace_dirs():
    """What the template made in its own workspace, this one lacks (or a
    python removed): K makes it before each fork of python."""
    for var in ("IPYTHONDIR", "MPLCONFIGDIR"):
        path = os.environ.get(var, "")
        if path.startswith("/workspace/") and not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)


def _reseed():
    # `random` reseeds itself at a fork; numpy's global state does not. K
    # draws it anew before each fork of python, which then inherits a state
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


_MT_KEY_WORDS = 624


def _watch(python, peer, respawn, sys_, go_on):
    """K, python's parent: confined as python is, it holds nothing of
    python's, says how python ended, and forks a fresh python when the
    supervisor asks on `respawn`."""
    sys_.close_range(0, CHANNEL_FD)
    socket = sys_.socket
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, _on_child)
    asks = socket.socket(fileno=respawn)
    while True:
        status = _ended(python, os.WNOHANG)
        if status is not None:
            peer.send(_ENCODER.encode(status).encode())
            _exit(0)
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
            _, fds = _receive(asks, socket, "respawn", 3)
        except (OSError, ValueError):
            # The supervisor is gone, or asked wrongly: no more fresh pythons.
            asks.close()
            asks = None
            continue
        python = _respawn(python, fds, peer, asks, sys_, go_on)


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
            return {"op": "ended", "signal": signal.SIGKILL}
    if pid == 0:
        return None
    if os.WIFSIGNALED(status):
        return {"op": "ended", "signal": os.WTERMSIG(status)}
    return {"op": "ended", "code": os.WEXITSTATUS(status)}


def _respawn(python, fds, peer, asks, sys_, go_on):
    """A fresh python in this jail: the old one and everything it left in
    the pid namespace killed first. Returns the new pid; the new python
    goes on with `go_on`. A jail that cannot be emptied ends, and the
    supervisor starts anew."""
    why = None
    try:
        os.kill(python, signal.SIGKILL)
        _ended(python, 0)
        _empty_jail(sys_)
        _workspace_dirs()
        _empty_tmp(sys_.stat)
        _no_ipc_left()
        _reseed()
        pid = os.fork()
    except Exception as e:
        why = _why(e)
    if why is not None:
        _close_all(fds)
        try:
            asks.send(_ENCODER.encode({"op": "failed", "why": why}).encode())
        finally:
            peer.send(_ENCODER.encode({"op": "ended", "signal": signal.SIGKILL}).encode())
            _exit(0)
    if pid == 0:
        _renew(fds, sys_)
        go_on()
    _close_all(fds)
    answer = _ENCODER.encode({"op": "respawned", "pid": pid}).encode()
    # With a pidfd of the new python, the supervisor finds it without
    # walking /proc (respawn.rs); without one, it walks.
    pidfd = sys_.pidfd_open(pid)
    if pidfd < 0:
        asks.send(answer)
        return pid
    try:
        asks.sendmsg([answer], [(sys_.socket.SOL_SOCKET, sys_.socket.SCM_RIGHTS, struct.pack("i", pidfd))])
    finally:
        os.close(pidfd)
    return pid


# How long what a python left may take to die.
_EMPTY_WITHIN_S = 3
_SYS_PIDFD_SEND_SIGNAL = 424


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
        c = sys_.ctypes
        # A /proc/<pid> directory serves pidfd_send_signal as a pidfd.
        if sys_.syscall(c.c_long(_SYS_PIDFD_SEND_SIGNAL), c.c_int(fd), c.c_int(signal.SIGKILL), None, c.c_uint(0)) < 0:
            if c.get_errno() != 3:
                sys_.check("pidfd_send_signal to %s" % name, -1)
    finally:
        os.close(fd)


def _renew(fds, sys_):
    """A fresh G: K's confinement, and the jail K emptied, are already its
    own; it takes its new stdio and channel."""
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
        _exit(126)


def _empty_tmp(stat):
    """The jail's /tmp as a new jail's: empty."""
    def remove(path):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            os.chmod(path, 0o700)
            for name in os.listdir(path):
                remove(path + "/" + name)
            os.rmdir(path)
        else:
            os.unlink(path)

    for name in os.listdir("/tmp"):
        remove("/tmp/" + name)


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
