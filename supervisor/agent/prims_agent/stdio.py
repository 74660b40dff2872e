"""The agent's own stdio: copies kept clear of the user's fds, writes that
never fail the agent, and repairs after user code broke sys.stdout."""

import fcntl
import os
import sys


def high_fd(fd):
    """A close-on-exec duplicate of `fd`, as high as the fd limit allows."""
    for floor in (1000, 100, 10):
        try:
            return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
        except OSError:
            pass
    return os.dup(fd)


def write_all(fd, data):
    """Write all of `data` to `fd`; errors are ignored (the reader is gone)."""
    try:
        os.set_blocking(fd, True)
    except OSError:
        pass
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError:
            return
        view = view[n:]


def flush_stdio():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def repair_stdio():
    """Give back working sys.stdout/sys.stderr if user code closed them."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        for attr in (name, "__" + name + "__"):
            stream = getattr(sys, attr, None)
            try:
                broken = stream is None or stream.closed
            except Exception:
                broken = True
            if broken:
                try:
                    fresh = open(fd, "w", buffering=1, errors="backslashreplace", closefd=False)
                    fresh.reconfigure(write_through=True)
                    setattr(sys, attr, fresh)
                except Exception:
                    pass


class Silenced:
    """Points fds 1 and 2 at /dev/null for a while; `saved` maps each to
    the copy that puts it back."""

    def __init__(self, saved):
        self.saved = saved

    def __enter__(self):
        try:
            null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
        for fd in (1, 2):
            os.dup2(null, fd)
        os.close(null)

    def __exit__(self, *exc):
        flush_stdio()
        for fd in (1, 2):
            if fd in self.saved:
                os.dup2(self.saved[fd], fd)
