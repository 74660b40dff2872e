"""A fork template's life after its imports: one child per `fork` frame,
each of which becomes python's parent in a jail of its own (`parent`)."""

import gc
import os

from prims_agent.channel import DECODER, HEADER, exit_now
from prims_agent.fork import parent
from prims_agent.text import error, why

# Set in a template's environment: the agent forks children after its
# imports instead of running cells.
TEMPLATE_ENV = "PRIMS_TEMPLATE"
# A `fork` frame's largest body.
FORK_FRAME_MAX = 4096


def serve_forks(agent, ready, sys_, forked_main):
    """One child per `fork` frame, which carries the child's two sockets.
    Never returns: each python it leads to goes on in `forked_main`."""
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
        fds.extend(parent.fds_of(anc, socket))
        if not data or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            exit_now(0 if not data else 1)
        pending += data
        while len(pending) >= HEADER.size:
            (size,) = HEADER.unpack_from(pending)
            if size > FORK_FRAME_MAX:
                exit_now(1)
            if len(pending) < HEADER.size + size:
                break
            body = bytes(pending[HEADER.size : HEADER.size + size])
            del pending[: HEADER.size + size]
            try:
                msg = DECODER.decode(body.decode("utf-8"))
            except ValueError:
                msg = None
            if not isinstance(msg, dict) or msg.get("op") != "fork" or len(fds) < 2:
                parent.close_all(fds)
                fds = []
                agent.send(error("a template only forks, each fork with its two sockets"))
                continue
            ctl, fresh = fds.pop(0), fds.pop(0)
            try:
                pid = os.fork()
            except OSError as e:
                # This child is lost, not the template: say why.
                parent.close_all((ctl, fresh))
                agent.send(error("fork: %s" % why(e)))
                continue
            if pid == 0:
                sock.detach()
                parent.become_parent(agent, ready, (ctl, fresh), fds, sys_, forked_main)
                exit_now(1)
            parent.close_all((ctl, fresh))
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
    # Its children, each python's parent, end as their python does; nothing
    # else is its own.
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
