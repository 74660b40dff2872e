"""The agent: one live interpreter's cells, `%pip` installs and state, run
in a loop on the channel.

SIGINT is how the supervisor interrupts a cell that ran out of time. It is
blocked, and the Python-level handler is a no-op, whenever agent code runs,
so a late interrupt can never break the agent; the user's handler (at
first `signal.default_int_handler`) is installed only while a cell runs."""

import ast
import builtins
import importlib
import linecache
import os
import re
import signal
import sys
import time
import traceback
import types

from prims_agent import state
from prims_agent.channel import (
    CHANNEL_FD,
    CHANNEL_LOST_EXIT,
    DECODER,
    FRAME_IN_MAX,
    HEADER,
    exit_now,
    fit,
    fstat,
    read,
    write,
)
from prims_agent.stdio import Silenced, flush_stdio, high_fd, repair_stdio, write_all
from prims_agent.text import (
    LIST_MAX,
    MESSAGE_MAX_CHARS,
    RESULT_MAX_CHARS,
    cap,
    error,
    exception_name,
    named,
    short,
    why,
)

MARKER_PREFIX = b"\x00prims-cell-end-"
MARKER_SUFFIX = b"\x00"
MARKER_HEX_LEN = 32
PREWARM_ENV = "PRIMS_PREWARM"
# A directory of packages pip installed into the workspace (PIP_TARGET).
SITE_ENV = "PRIMS_SITE"
# Cell sources kept for tracebacks (linecache); the oldest go first.
SOURCE_CACHE_MAX = 32 * 1024 * 1024
# A secret's variable: the policy's table key, or AWS's own names.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
ENV_VALUE_MAX = 256

_SIGINT = {signal.SIGINT}
_HEX = frozenset("0123456789abcdef")


def _agent_sigint(signum, frame):
    # An interrupt that arrives while the agent itself runs is dropped: the
    # cell it was meant for has already finished.
    pass


def _drain_sigint():
    """Consume an interrupt that arrived while the agent had it blocked."""
    while signal.sigtimedwait(_SIGINT, 0) is not None:
        pass


def block_sigint():
    """What the agent does first: SIGINT blocked, its handler a no-op."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    signal.signal(signal.SIGINT, _agent_sigint)


def _execute(code, filename, env):
    """Run a cell notebook style: a last expression is evaluated and returned."""
    # compile() rather than ast.parse(), so a SyntaxError has no stdlib frame.
    tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    if tree.body:
        exec(compile(tree, filename, "exec", dont_inherit=True), env)
    if last is None:
        return None
    return eval(compile(last, filename, "eval", dont_inherit=True), env)


def _repr_capped(value):
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned non-string")
    except Exception as e:
        text = "<repr failed: %s>" % why(e)
    return cap(text, RESULT_MAX_CHARS)


def _exit_outcome(exc, err_fd):
    """(status, exit_code) for a SystemExit, printing its message like Python."""
    code = exc.code
    if code is None:
        return "ok", 0
    if isinstance(code, int):
        if code == 0:
            return "ok", 0
        if -(2 ** 31) <= code < 2 ** 31:
            return "exit", int(code)
        return "exit", 1
    try:
        text = str(code)
    except BaseException:
        text = "<str() failed>"
    write_all(err_fd, (text + "\n").encode("utf-8", "backslashreplace"))
    return "exit", 1


class Agent:
    def __init__(self):
        self.take_fds()
        os.register_at_fork(after_in_child=self._forget_in_child)
        self.user_sigint = signal.default_int_handler
        self.cells = 0
        self.sources = []
        self.source_bytes = 0
        self.main = None
        self.site = None
        self.site_seen = None
        self.pickle = None
        self.cloudpickle = None
        # IPython's shell, when the IPython layer is there (shell.py).
        self.shell = None
        # Names in the globals that are IPython's, not the user's state.
        self.hidden = set()

    def take_fds(self):
        """The channel on fd 3 and copies of stdio, clear of user code's fds."""
        self.channel = high_fd(CHANNEL_FD)
        os.close(CHANNEL_FD)
        st = os.fstat(self.channel)
        self.channel_id = (st.st_dev, st.st_ino)
        self.saved = {}
        for fd in (0, 1, 2):
            try:
                self.saved[fd] = high_fd(fd)
            except OSError:
                pass
        self.out = self.saved.get(1, 1)
        self.err = self.saved.get(2, 2)

    def import_own(self):
        """What the agent imports for itself, bound before any user code
        runs: a cell may replace sys.modules entries, and the session's own
        packages must never stand in for these."""
        import pickle

        self.pickle = pickle
        try:
            # From the IPython layer (or the session's environment): it
            # carries code defined in cells across interpreters.
            import cloudpickle
        except Exception:
            cloudpickle = None
        self.cloudpickle = cloudpickle

    def _forget_in_child(self):
        # A forked child must not hold the channel (it would keep it open
        # after the agent is gone) nor the agent's copies of the pipes.
        for fd in [self.channel] + list(self.saved.values()):
            try:
                os.close(fd)
            except OSError:
                pass

    # --- frames ---

    def _check_channel(self):
        try:
            st = fstat(self.channel)
        except OSError:
            exit_now(CHANNEL_LOST_EXIT)
        if (st.st_dev, st.st_ino) != self.channel_id:
            # User code closed or replaced the channel; nothing can be sent.
            exit_now(CHANNEL_LOST_EXIT)

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = read(self.channel, min(n - len(buf), 1 << 20))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def recv(self):
        """The next message, an error string for a bad frame, or None at EOF."""
        self._check_channel()
        header = self._read_exact(4)
        if header is None:
            return None
        (length,) = HEADER.unpack(header)
        if length > FRAME_IN_MAX:
            while length > 0:
                if self._read_exact(min(length, 1 << 20)) is None:
                    return None
                length -= min(length, 1 << 20)
            return "a frame over %d bytes" % FRAME_IN_MAX
        body = self._read_exact(length)
        if body is None:
            return None
        try:
            msg = DECODER.decode(body.decode("utf-8"))
        except ValueError as e:
            return "malformed frame: %s" % why(e)
        if not isinstance(msg, dict):
            return "a frame that is not a JSON object"
        return msg

    def send(self, msg):
        self._check_channel()
        body = fit(msg)
        frame = HEADER.pack(len(body)) + body
        view = memoryview(frame)
        while view:
            try:
                n = write(self.channel, view)
            except OSError:
                exit_now(CHANNEL_LOST_EXIT)
            view = view[n:]

    # --- start-up ---

    def prewarm(self):
        names = [n.strip() for n in os.environ.get(PREWARM_ENV, "").split(",")]
        names = [n for n in names if n][:LIST_MAX]
        imported, failed = [], []
        started = time.monotonic()
        # Import-time chatter (warnings) is nobody's cell output.
        with Silenced(self.saved):
            for name in names:
                try:
                    __import__(name)
                    imported.append(short(name))
                except BaseException as e:
                    failed.append(named(name, why(e)))
        import_ms = int((time.monotonic() - started) * 1000)
        for key in list(os.environ):
            if key.startswith("PRIMS_"):
                del os.environ[key]
        return imported, failed, import_ms

    def install_main(self):
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        sys.argv = [""]
        self.main = main
        site = os.environ.get(SITE_ENV)
        if site:
            # Last, as pip's --target directory on PYTHONPATH never is: a
            # package installed into the session must not shadow the
            # standard library or the environment (a planted pickle.py).
            sys.path.append(site)
            self.site = site

    # --- cells ---

    def _restore_fds(self):
        for fd, copy in self.saved.items():
            try:
                os.dup2(copy, fd)
            except OSError:
                pass
        repair_stdio()

    def _notice_installs(self):
        # What pip installed since the last cell must be importable now;
        # the import system caches a directory's contents (or its absence).
        if self.site is None:
            return
        try:
            seen = os.stat(self.site).st_mtime_ns
        except OSError:
            seen = None
        if seen != self.site_seen:
            self.site_seen = seen
            importlib.invalidate_caches()

    def _remember_source(self, filename, code):
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        self.sources.append((filename, len(code)))
        self.source_bytes += len(code)
        while self.source_bytes > SOURCE_CACHE_MAX and len(self.sources) > 1:
            old, size = self.sources.pop(0)
            self.source_bytes -= size
            linecache.cache.pop(old, None)

    def _enter_agent(self):
        """Block SIGINT and put the agent's no-op handler back; the user's
        handler is kept for the next cell. Idempotent. An interrupt that lands
        meanwhile came after the cell's code ended, so it is dropped."""
        while True:
            try:
                signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
                previous = signal.signal(signal.SIGINT, _agent_sigint)
                break
            except BaseException:
                continue
        if previous is None:
            # Installed outside Python; the closest Python behaviour.
            previous = signal.default_int_handler
        if previous is not _agent_sigint:
            self.user_sigint = previous

    def _run_user(self, code, filename):
        """Run a cell with SIGINT live: ((repr, cut) or None, exception or None).
        Through IPython, which reports (prints) exceptions itself, when the
        IPython layer is there."""
        env = self.main.__dict__
        _drain_sigint()
        signal.signal(signal.SIGINT, self.user_sigint)
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)
                if self.shell is not None:
                    return self.shell.run(code)
                value = _execute(code, filename, env)
                if value is None:
                    return None, None
                env["_"] = value
                return _repr_capped(value), None
            finally:
                try:
                    flush_stdio()
                finally:
                    self._enter_agent()
        except BaseException as e:
            return None, e

    def _report(self, exc):
        """Print a traceback without the agent's frames; the exception's name."""
        tb = exc.__traceback__
        agent_file = _execute.__code__.co_filename
        while tb is not None and tb.tb_frame.f_code.co_filename == agent_file:
            tb = tb.tb_next
        try:
            text = "".join(traceback.format_exception(type(exc), exc, tb))
        except BaseException as e:
            text = "%s (the traceback could not be formatted: %s)\n" % (exception_name(type(exc)), why(e))
        write_all(self.err, text.encode("utf-8", "backslashreplace"))
        return exception_name(type(exc))

    def cell(self, msg):
        cid, code = msg.get("id"), msg.get("code")
        if not (type(cid) is int and 0 <= cid < 2 ** 64 and isinstance(code, str)):
            return error("a cell needs an integer id and string code")
        self._restore_fds()
        self._notice_installs()
        self.cell_id = cid
        self.cells += 1
        filename = "<cell %d>" % self.cells
        if self.shell is None:
            self._remember_source(filename, code)
        try:
            shown, exc = self._run_user(code, filename)
        except BaseException as e:
            # An interrupt that landed between the cell's end and the agent
            # taking SIGINT back (before _run_user could catch it).
            shown, exc = None, e
        self._enter_agent()
        done = {
            "op": "done",
            "id": cid,
            "status": "ok",
            "exit_code": 0,
            "exception": None,
            "result": None,
            "result_truncated": False,
            "outputs_dropped": 0,
        }
        if shown is not None:
            done["result"], done["result_truncated"] = shown
        if isinstance(exc, SystemExit):
            done["status"], done["exit_code"] = _exit_outcome(exc, self.err)
        elif exc is not None:
            done["status"], done["exit_code"] = "error", 1
            if self.shell is None:
                done["exception"] = self._report(exc)
            else:
                done["exception"] = exception_name(type(exc))
        del exc
        if self.shell is not None:
            for item in self.shell.take_outputs():
                item["op"] = "output"
                item["id"] = cid
                self.send(item)
            done["outputs_dropped"] = self.shell.dropped
        flush_stdio()
        return done

    def mark(self, msg):
        """Ends the last cell's output on both pipes with the marker the
        supervisor made after the cell's code was over (so the code never
        had it to write before its own output). Not answered."""
        marker = msg.get("marker")
        if not (isinstance(marker, str) and len(marker) == MARKER_HEX_LEN and set(marker) <= _HEX):
            return error("a cell marker is %d lowercase hex digits" % MARKER_HEX_LEN)
        flush_stdio()
        end = MARKER_PREFIX + marker.encode("ascii") + MARKER_SUFFIX
        write_all(self.out, end)
        write_all(self.err, end)
        return None

    def install(self, requirements):
        """Has the supervisor install `requirements` into the session
        (`%pip install`), printing its progress; its answer."""
        self.send({"op": "install", "id": self.cell_id, "requirements": list(requirements)[:LIST_MAX]})
        while True:
            msg = self.recv()
            if not isinstance(msg, dict):
                exit_now(CHANNEL_LOST_EXIT)
            op = msg.get("op")
            if op == "install_progress":
                line = msg.get("line")
                if isinstance(line, str):
                    print(line, flush=True)
            elif op == "installed":
                importlib.invalidate_caches()
                return msg
            else:
                exit_now(CHANNEL_LOST_EXIT)

    # --- state across interpreters ---

    def save(self, msg):
        path = msg.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            return error("save needs an absolute path")
        durable = msg.get("durable", True)
        if not isinstance(durable, bool):
            return error("save's durable is true or false")
        check = msg.get("check", False)
        if not isinstance(check, bool):
            return error("save's check is true or false")
        picklers = (self.pickle, self.cloudpickle)
        return state.save(self.main.__dict__, self.hidden, picklers, path, durable, check)

    def restore(self, msg):
        path = msg.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            return error("restore needs an absolute path")
        return state.restore(self.main.__dict__, self.pickle, path)

    def discard(self, msg):
        path = msg.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            return error("discard needs an absolute path")
        return state.discard(path)

    def warm_up(self, msg):
        code = msg.get("code")
        if not isinstance(code, str):
            return error("warm_up needs its code")
        if self.shell is not None:
            self.shell.warm_up()
        raised = None
        if code:
            # Not the session's globals, nor its output.
            with Silenced(self.saved):
                try:
                    exec(compile(code, "<python.warm_up_code>", "exec"), {"__name__": "__warm_up__"})
                except BaseException as e:
                    raised = cap(why(e), MESSAGE_MAX_CHARS)[0]
        return {"op": "warmed_up", "error": raised}

    def sync(self, msg):
        nonce = msg.get("nonce")
        if not isinstance(nonce, str):
            return error("sync needs a string nonce")
        return {"op": "synced", "nonce": short(nonce)}

    def environ(self, msg):
        """Sets the session's secrets' placeholders in its environment.

        Only the supervisor writes to this channel; the names and values
        are checked all the same, since a variable's name reaches every
        process the session starts.
        """
        set_ = msg.get("set")
        unset = msg.get("unset")
        if not isinstance(set_, dict) or not isinstance(unset, list):
            return error("environ needs a set table and an unset list")
        for name, value in list(set_.items()) + [(n, "") for n in unset]:
            if not (isinstance(name, str) and ENV_NAME.fullmatch(name) and isinstance(value, str)):
                return error("environ: %r is not a variable name with a text value" % (name,))
            if len(value) > ENV_VALUE_MAX or "\0" in value:
                return error("environ: the value of %s is too long or holds NUL" % (name,))
        for name in unset:
            os.environ.pop(name, None)
        os.environ.update(set_)
        return {"op": "environ_set"}

    # --- the loop ---

    def serve(self):
        handlers = {
            "cell": self.cell,
            "mark": self.mark,
            "save": self.save,
            "restore": self.restore,
            "discard": self.discard,
            "sync": self.sync,
            "warm_up": self.warm_up,
            "environ": self.environ,
        }
        while True:
            msg = self.recv()
            if msg is None:
                flush_stdio()
                exit_now(0)
            if isinstance(msg, str):
                self.send(error(msg))
                continue
            handler = handlers.get(msg.get("op"))
            if handler is None:
                self.send(error("unknown op %r" % (msg.get("op"),)))
                continue
            try:
                reply = handler(msg)
            except Exception as e:
                reply = error("%s failed: %s" % (msg.get("op"), why(e)))
            if reply is not None:
                self.send(reply)
