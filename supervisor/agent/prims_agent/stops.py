"""A server's stop signal is not the session's.

A stopping server saves each idle session's variables inside its jail
first, and then ends the jails itself (SIGKILL). But systemd's
`KillMode=control-group` sends SIGTERM to every process of the
supervisor's unit, jails included, and a SIGTERM's default action would end
python before its variables were saved. So the agent's own processes (a
cold or forked python, a fork template, python's parent) outlive SIGTERM,
through a handler rather than SIG_IGN, which a program that user code runs
would inherit across `exec`. A process that user code forks from one of
them (a `multiprocessing` worker) gets the kernel's default back at once
(`os.register_at_fork`), so a SIGTERM ends it as anywhere, even while it
runs C code that never returns to python: `Pool.terminate()` and the like
rely on it.
"""

import os
import signal

_owner = None
_registered = False


def shield():
    """This process, the agent's own, outlives SIGTERM. Called again in
    each process the agent forks for itself."""
    global _owner, _registered
    _owner = os.getpid()
    signal.signal(signal.SIGTERM, _on_sigterm)
    if not _registered:
        os.register_at_fork(after_in_child=_unshield)
        _registered = True


def _unshield():
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except ValueError:
        # Forked from a thread whose child python does not take it for its
        # main thread: the handler below still passes the signal on.
        pass


def _on_sigterm(signum, frame):
    if os.getpid() == _owner:
        return
    # A process user code forked: the signal's default action.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
