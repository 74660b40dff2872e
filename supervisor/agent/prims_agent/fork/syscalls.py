"""The calls a template's fork wing makes that the os module lacks, through
ctypes. A template binds them before any prewarm import could replace
ctypes; its children inherit them."""

import os
import signal

_JAIL_ID = 1000
_PR_CAPBSET_DROP = 24
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECCOMP_MODE_FILTER = 2
_SYS_CAPSET = 126
_SYS_CLOSE_RANGE = 436
_SYS_PIDFD_OPEN = 434
_SYS_PIDFD_SEND_SIGNAL = 424
_SYS_LANDLOCK_RESTRICT_SELF = 446
_CAP_VERSION_3 = 0x20080522
_ESRCH = 3
# struct mallinfo2, every field a size_t.
_MALLINFO2 = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")


class Sys:
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

    def pidfd_kill(self, fd, what):
        """SIGKILL to the process `fd` stands for (a pidfd, or its /proc
        directory); nothing if it is gone already."""
        c = self.ctypes
        sent = self.syscall(c.c_long(_SYS_PIDFD_SEND_SIGNAL), c.c_int(fd), c.c_int(signal.SIGKILL), None, c.c_uint(0))
        if sent < 0 and c.get_errno() != _ESRCH:
            self.check("pidfd_send_signal to %s" % what, -1)

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
