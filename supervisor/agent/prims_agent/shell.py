"""Cells through IPython, when the IPython layer is there (PRIMS_IPYTHON:
a read-only site directory with IPython, matplotlib and
matplotlib-inline, bound at /ipython). Each cell runs through IPython's
own InteractiveShell: magics, `!cmd`, the display hook, `_`, `Out`, a
trailing `;`, `display()`. Its display hook and publisher are replaced by
ones that collect mime bundles, which the agent sends the supervisor as
`output` frames, and tracebacks go to stderr. Without the layer (or if
IPython will not start) the agent runs cells itself."""

import os
import re
import signal
import sys
import time

from prims_agent import charts
from prims_agent.channel import DECODER, ENCODER
from prims_agent.stdio import Silenced, flush_stdio, write_all
from prims_agent.text import cap, why

IPYTHON_ENV = "PRIMS_IPYTHON"
# Figures go here too (under the workspace, the agent's first working
# directory), so they can be listed, previewed and persisted.
FIGURES_REL = "output/figures"
# The mime types kept of a bundle, in this order; text/plain always.
MIME_KEPT = (
    "text/plain",
    "text/html",
    "text/markdown",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "application/json",
    "application/vnd.prims.chart+json",
)
# IPython's profile directory.
IPYTHON_DIR = "/tmp/.prims/ipython"
# One bundle, as the JSON of its values: it must fit a frame.
OUTPUT_ITEM_MAX = 900 * 1024
# Bundles one cell may send, and their bytes together.
OUTPUTS_MAX = 32
OUTPUTS_BYTES_MAX = 4 * 1024 * 1024
TEXT_PLAIN_MAX = 16384


def load(agent):
    """(A `Shell` over the agent's `__main__`, None), or (None, why not)."""
    site = os.environ.get(IPYTHON_ENV)
    if not site:
        return None, None
    # After the environment's own packages and the session's: the layer
    # never stands in for a package the code chose.
    sys.path.append(site)
    try:
        with Silenced(agent.saved):
            return Shell(agent), None
    except BaseException as e:
        try:
            sys.path.remove(site)
        except ValueError:
            pass
        return None, why(e)


# `!pip install ...`, `!python -m pip install ...`: served as %pip.
# A command with shell syntax (a pipe, a redirect, a second command) is the
# shell's.
_PIP_COMMAND = re.compile(r"^\s*(?:python3?(?:\.\d+)?\s+-m\s+pip|pip3?)\s+(install\b[^|;&<>`$()\n]*)$")
# pip options that change nothing here.
_PIP_IGNORED = frozenset(("-q", "-qq", "--quiet", "-U", "--upgrade", "--no-cache-dir", "--user"))

_MAGIC = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}


def _bundle(data, kind):
    """A collected output: the kept mime types of `data`, JSON-ready and
    capped; a value that does not fit is left out, and the item says so."""
    import base64

    item = {"type": kind, "data": {}, "cut": False}
    if not isinstance(data, dict):
        data = {}
    size = 0
    for mime in MIME_KEPT:
        if mime not in data:
            continue
        value = data[mime]
        if mime != "text/plain" and isinstance(value, str) and len(value) > OUTPUT_ITEM_MAX:
            # Could never fit: not worth encoding (a 100 MB string would be).
            item["cut"] = True
            continue
        try:
            if mime in ("image/png", "image/jpeg"):
                if isinstance(value, str):
                    raw = base64.b64decode(value, validate=True)
                else:
                    raw = bytes(value)
                    value = base64.b64encode(raw).decode("ascii")
                if not raw.startswith(_MAGIC[mime]):
                    raise TypeError("not a %s" % mime)
            elif mime in ("application/json", charts.MIME):
                # ENCODER is strict: a NaN makes the value `cut`.
                value = DECODER.decode(ENCODER.encode(value))
            elif not isinstance(value, str):
                raise TypeError("not text")
            if mime == "text/plain":
                value, cut = cap(value, TEXT_PLAIN_MAX)
                item["cut"] = item["cut"] or cut
            cost = len(ENCODER.encode(value))
        except BaseException:
            item["cut"] = True
            continue
        if size + cost > OUTPUT_ITEM_MAX:
            item["cut"] = True
            continue
        size += cost
        item["data"][mime] = value
    if "text/plain" not in item["data"]:
        item["data"]["text/plain"] = ""
    return item, size


def _kill_group(proc):
    """SIGKILL every process of `proc`'s process group and reap `proc`.
    Repeated until none is left (for at most 0.1 s): a process that forked
    while the signal went out has a child the first pass missed."""
    for _ in range(100):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            break
        if proc.poll() is None:
            try:
                proc.wait()
            except BaseException:
                pass
        time.sleep(0.001)


class Shell:
    def __init__(self, agent):
        # The workspace: where the agent starts.
        self.root = os.getcwd()
        # IPython's profile directory, in the jail's own /tmp: never a
        # shared path, and gone with the interpreter (a fresh one starts
        # without it, and `list_dir` never shows it).
        ipython_dir = os.environ.setdefault("IPYTHONDIR", IPYTHON_DIR)
        # Made here: IPython falls back to a directory in /tmp otherwise.
        os.makedirs(ipython_dir, exist_ok=True)
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        # matplotlib's font cache, built once per session.
        os.environ.setdefault("MPLCONFIGDIR", os.path.join(self.root, ".prims", "matplotlib"))
        import warnings

        import IPython
        from IPython.core.displayhook import DisplayHook
        from IPython.core.displaypub import DisplayPublisher
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        nb = self
        self.agent = agent
        self.version = IPython.__version__
        self.outputs = []
        self.output_bytes = 0
        self.dropped = 0
        self.result = None
        self.figures = 0
        self.cell_number = 0
        # The matplotlib Figure the next output shows, if any.
        self.figure_pending = None

        class Hook(DisplayHook):
            def write_output_prompt(self):
                pass

            def write_format_data(self, format_dict, md_dict=None):
                nb._collect(format_dict, "result")

            def finish_displayhook(self):
                flush_stdio()

        class Publisher(DisplayPublisher):
            def publish(self, data, metadata=None, source=None, **kwargs):
                nb._collect(data, "display")

            def clear_output(self, wait=False):
                pass

        class PrimsShell(InteractiveShell):
            def showtraceback(self, exc_tuple=None, *args, **kwargs):
                try:
                    etype = (exc_tuple or sys.exc_info())[0]
                except BaseException:
                    etype = None
                if isinstance(etype, type) and issubclass(etype, SystemExit):
                    # The agent reports it as Python would.
                    return
                return super().showtraceback(exc_tuple, *args, **kwargs)

            def system_raw(self, cmd):
                # IPython's, except that the command runs in a session of its
                # own whose processes are all killed when the cell is
                # interrupted (its time limit): IPython kills only the shell,
                # and what the command started (a fork bomb) would run on,
                # holding every process the jail allows and its CPU.
                import subprocess
                import warnings

                cmd = self.var_expand(cmd, depth=1)
                main_cmd = cmd.split()[0] if cmd.split() else ""
                if main_cmd in ("pip", "conda", "cd"):
                    warnings.warn(  # noqa: B028 (as IPython's own system_raw warns)
                        "You executed the system command !{0} which may not work "
                        "as expected. Try the IPython magic %{0} instead.".format(main_cmd)
                    )
                executable = os.environ.get("SHELL") or None
                proc = subprocess.Popen(cmd, shell=True, executable=executable, start_new_session=True)
                try:
                    ec = proc.wait()
                except KeyboardInterrupt:
                    _kill_group(proc)
                    print("\n" + self.get_exception_only(), file=sys.stderr)
                    ec = 130
                if ec > 128:
                    ec = -(ec - 128)
                self.user_ns["_exit_code"] = ec
                if getattr(self, "system_raise_on_error", False) and ec != 0:
                    raise subprocess.CalledProcessError(ec, cmd)

            def _showtraceback(self, etype, evalue, stb):
                text = self.InteractiveTB.stb2text(stb)
                write_all(nb.agent.err, (text + "\n").encode("utf-8", "backslashreplace"))

        c = Config()
        c.HistoryManager.enabled = False
        c.HistoryManager.hist_file = ":memory:"
        c.InteractiveShell.colors = "NoColor"
        c.InteractiveShell.xmode = "Context"
        c.InteractiveShell.autocall = 0
        c.InteractiveShell.cache_size = 100
        self.shell = PrimsShell.instance(
            config=c,
            user_module=agent.main,
            displayhook_class=Hook,
            display_pub_class=Publisher,
        )
        # Output at the file-descriptor level, as a terminal shows it: no
        # pty in the jail, and the supervisor cuts the pipes into cells.
        system_raw = self.shell.system_raw

        def system(cmd):
            # `!pip install x` is `%pip install x`: the cell has no network.
            m = _PIP_COMMAND.match(cmd)
            if m:
                return self._pip(m.group(1))
            return system_raw(cmd)

        self.shell.system = system
        self.shell.register_magic_function(self._pip, "line", "pip")
        warnings.filterwarnings("ignore", message="To exit: use")
        # What IPython put in the user's globals is not the user's state.
        agent.hidden = set(self.shell.user_ns_hidden)
        formatter = self.shell.display_formatter
        plain_format = formatter.format

        def format_and_note(obj, include=None, exclude=None):
            data = plain_format(obj, include=include, exclude=exclude)
            module = getattr(type(obj), "__module__", "") or ""
            nb.figure_pending = obj if module.startswith("matplotlib.figure") else None
            return data

        formatter.format = format_and_note
        self.shell.events.register("post_execute", self._flush_figures)

    def _pip(self, line):
        """%pip install: packages from the server's package index, into
        this session; the interpreter and its variables stay."""
        import shlex

        try:
            args = shlex.split(line)
        except ValueError as e:
            print("%%pip: %s" % e, file=sys.stderr)
            return
        if not args or args[0] != "install":
            print(
                "%pip: only `%pip install <requirement>...` works here: packages come from "
                "the server's package index and go into this session",
                file=sys.stderr,
            )
            return
        reqs = []
        for a in args[1:]:
            if a in _PIP_IGNORED:
                continue
            if a.startswith("-"):
                print("%%pip: the option %s is not supported here" % a, file=sys.stderr)
                return
            reqs.append(a)
        if not reqs:
            print("%pip install: name at least one requirement", file=sys.stderr)
            return
        answer = self.agent.install(reqs)
        added = [a for a in answer.get("added") or () if isinstance(a, str)]
        message = answer.get("message") if isinstance(answer.get("message"), str) else ""
        if not answer.get("ok"):
            print("ERROR: " + (message or "the install failed"), file=sys.stderr)
        elif added:
            print("Successfully installed " + " ".join(a.replace("==", "-") for a in added))
        else:
            print("Requirement already satisfied: " + " ".join(reqs))

    def _collect(self, data, kind):
        figure, self.figure_pending = self.figure_pending, None
        if len(self.outputs) >= OUTPUTS_MAX:
            self.dropped += 1
            return
        if figure is not None and isinstance(data, dict):
            # Its data too (charts.py): after the PNG, which drew it.
            chart = charts.chart(figure)
            if chart is not None:
                data = dict(data)
                data[charts.MIME] = chart
        item, size = _bundle(data, kind)
        if self.output_bytes + size > OUTPUTS_BYTES_MAX:
            self.dropped += 1
            return
        self.output_bytes += size
        if kind == "result":
            self.result = (item["data"]["text/plain"], item["cut"])
        if figure is not None and "image/png" in item["data"]:
            item["file"] = self._save_figure(data.get("image/png"))
        self.outputs.append(item)

    def _save_figure(self, png):
        """Writes the figure's PNG under output/figures; its path, or None."""
        if isinstance(png, str):
            # IPython hands figures over base64-encoded.
            import base64
            import binascii

            try:
                png = base64.b64decode(png, validate=True)
            except (binascii.Error, ValueError):
                return None
        if not isinstance(png, (bytes, bytearray)):
            return None
        self.figures += 1
        name = "cell%d-%d.png" % (self.cell_number, self.figures)
        figures = os.path.join(self.root, FIGURES_REL)
        try:
            os.makedirs(figures, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(os.path.join(figures, name), flags, 0o644), "wb") as f:
                f.write(png)
        except OSError:
            return None
        return FIGURES_REL + "/" + name

    def _flush_figures(self):
        # Figures the cell left open are shown (and closed) after it.
        if "matplotlib.pyplot" not in sys.modules:
            return
        backend = sys.modules.get("matplotlib_inline.backend_inline")
        if backend is not None:
            backend.flush_figures()

    def warm_up(self):
        """A fork template runs one empty cell before it forks, outside the
        history and the execution count, so that what IPython sets up
        lazily on a first cell (imports, caches) is done once and shared."""
        self.shell.run_cell("pass", store_history=False)

    def run(self, code):
        """Runs a cell: ((text/plain, cut) of its result or None, the
        exception it ended with or None). Outputs are in `self.outputs`."""
        self.outputs = []
        self.output_bytes = 0
        self.dropped = 0
        self.result = None
        self.figures = 0
        self.figure_pending = None
        # In[n] of this cell: its figures are named after it.
        self.cell_number = self.shell.execution_count
        result = self.shell.run_cell(code, store_history=True)
        error = result.error_before_exec or result.error_in_exec
        return self.result, error

    def take_outputs(self):
        outputs, self.outputs = self.outputs, []
        return outputs
