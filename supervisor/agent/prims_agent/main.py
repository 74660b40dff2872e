"""Start-up: a cold interpreter says `ready` and serves cells; a fork
template imports, then only forks; a python forked from a template goes on
in `forked_main`. The environment's PRIMS_* variables, and the allocator
a template's python read at start-up, are no part of the user's."""

import os
import sys
import traceback

from prims_agent import mp_main, shell, stops
from prims_agent.agent import Agent, block_sigint
from prims_agent.channel import exit_now
from prims_agent.fork import template
from prims_agent.fork.syscalls import Sys
from prims_agent.text import short

# Python's allocator: `malloc` in a template (start.rs `template_allocator`),
# read by python at start-up and dropped at once.
ALLOCATOR_ENV = "PYTHONMALLOC"

# Where this package lies, which python put first on sys.path when it ran
# the directory (`python -I -u /prims`). Every module of the agent is
# imported by now: no import of the user's may find anything there.
_HOME = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if sys.path[:1] == [_HOME]:
    del sys.path[0]


def main():
    block_sigint()
    stops.shield()
    is_template = os.environ.pop(template.TEMPLATE_ENV, None) is not None
    # Read at startup; no subprocess of the user's is to inherit it.
    os.environ.pop(ALLOCATOR_ENV, None)
    # Bound before any prewarm import could replace ctypes.
    sys_ = Sys() if is_template else None
    agent = Agent()
    # Before the imports, so whatever they capture as __main__ is the user's.
    agent.install_main()
    # Spawned and forkserver children find the cells' functions in __main__.
    mp_main.install()
    agent.shell, shell_error = shell.load(agent)
    imported, failed, import_ms = agent.prewarm()
    version = "%d.%d.%d" % sys.version_info[:3]
    ready = {
        "op": "ready",
        "python": version,
        "imported": imported,
        "failed": failed,
        "import_ms": import_ms,
        "ipython": short(agent.shell.version) if agent.shell else None,
        "ipython_error": short(shell_error) if shell_error else None,
    }
    if is_template:
        agent.import_own()
        if agent.shell is not None:
            agent.shell.warm_up()
        # Never returns: each forked python goes on in forked_main.
        template.serve_forks(agent, ready, sys_, forked_main)
    agent.send(ready)
    # While the supervisor readies the first cell.
    agent.import_own()
    agent.serve()


def forked_main(agent, ready):
    """A python forked from a template, confined, its stdio and channel on
    fds 0-3: the rest of main(), run from where it was forked. It never
    returns."""
    stops.shield()
    try:
        agent.take_fds()
        # The template logged its own failures once.
        ready["import_ms"], ready["failed"] = 0, []
        agent.send(ready)
        agent.import_own()
        agent.serve()
    except BaseException:
        traceback.print_exc()
    exit_now(1)
