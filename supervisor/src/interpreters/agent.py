# The PRIMS interpreter agent. It runs inside a session's jail as
# `python -I -u -c <this source>` (a template without -I: see below; this
# file, then notebook.py, then a call of main()) and keeps one live
# interpreter for that session: cells arrive as frames on fd 3, run in one
# persistent globals dict, and each answers with a frame. Stdlib only;
# CPython 3.8 to 3.13.
#
# Frames both ways: a 4-byte big-endian length, then UTF-8 JSON. The
# messages are documented in channel.rs, the supervisor's side.
#
# SIGINT is how the supervisor interrupts a cell that ran out of time. It is
# blocked, and the Python-level handler is a no-op, whenever agent code runs,
# so a late interrupt can never break the agent; the user's handler (at
# first `signal.default_int_handler`) is installed only while a cell runs.

import sys

# A template's python runs without -I (start.rs `template_allocator`), so
# `-c` put the working directory first on the path: no import may see it.
if sys.path[:1] == [""]:
    del sys.path[0]

import ast
import builtins
import fcntl
import importlib
import json
import linecache
import os
import re
import signal
import struct
import time
import traceback
import types

CHANNEL_FD = 3
FRAME_IN_MAX = 4 * 1024 * 1024
FRAME_OUT_MAX = 1024 * 1024
RESULT_MAX_CHARS = 16384
LIST_MAX = 1000
NAME_MAX_CHARS = 256
MESSAGE_MAX_CHARS = 1024
MARKER_PREFIX = b"\x00prims-cell-end-"
MARKER_SUFFIX = b"\x00"
MARKER_HEX_LEN = 32
PREWARM_ENV = "PRIMS_PREWARM"
ALLOCATOR_ENV = "PYTHONMALLOC"
# A directory of packages pip installed into the workspace (PIP_TARGET).
SITE_ENV = "PRIMS_SITE"
VALUE_MAX_BYTES = 256 * 1024 * 1024
# Cell sources kept for tracebacks (linecache); the oldest go first.
SOURCE_CACHE_MAX = 32 * 1024 * 1024
STATE_MAGIC = b"PRIMS-STATE-1\n"
# A state record: kind (b"M" module, b"P" pickle), name length, payload length.
RECORD = struct.Struct(">cIQ")
RECORD_NAME_MAX = 1024 * 1024

# The agent exits with this when the code closed or replaced its channel.
CHANNEL_LOST_EXIT = 118

# What framing uses, bound now: code in a cell shares these modules and may
# patch them (json.dumps = ...), which must not break the agent's own frames.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_DECODER = json.JSONDecoder()
_HEADER = struct.Struct(">I")
_read = os.read
_write = os.write
_fstat = os.fstat
_exit = os._exit

_SIGINT = {signal.SIGINT}
_HEX = frozenset("0123456789abcdef")


def _agent_sigint(signum, frame):
    # An interrupt that arrives while the agent itself runs is dropped: the
    # cell it was meant for has already finished.
    pass


def _high_fd(fd):
    """A close-on-exec duplicate of `fd`, as high as the fd limit allows."""
    for floor in (1000, 100, 10):
        try:
            return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
        except OSError:
            pass
    return os.dup(fd)


def _clean(text):
    """`text` with lone surrogates escaped, so it always encodes as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _cap(text, limit):
    text = _clean(text)
    if len(text) > limit:
        return text[:limit], True
    return text, False


def _name(text):
    return _cap(text, NAME_MAX_CHARS)[0]


def _why(exc):
    """One line that says why `exc` happened."""
    try:
        detail = str(exc)
    except BaseException:
        detail = "<str() failed>"
    line = type(exc).__name__ + (": " + detail if detail else "")
    return _name(" ".join(line.split()))


def _exception_name(cls):
    """The name Python's tracebacks give an exception type."""
    qualname = getattr(cls, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = "<unknown>"
    module = getattr(cls, "__module__", None)
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        qualname = module + "." + qualname
    return _name(qualname)


def _write_all(fd, data):
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


def _flush_stdio():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def _repair_stdio():
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


def _drain_sigint():
    """Consume an interrupt that arrived while the agent had it blocked."""
    while signal.sigtimedwait(_SIGINT, 0) is not None:
        pass


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
        text = "<repr failed: %s>" % _why(e)
    return _cap(text, RESULT_MAX_CHARS)


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
    _write_all(err_fd, (text + "\n").encode("utf-8", "backslashreplace"))
    return "exit", 1


def _fit(msg):
    """Encode `msg` as a frame body, halving its lists until it fits."""
    while True:
        body = _ENCODER.encode(msg).encode("utf-8")
        lists = [k for k, v in msg.items() if isinstance(v, list) and v]
        if len(body) <= FRAME_OUT_MAX or not lists:
            return body
        for k in lists:
            msg[k] = msg[k][: len(msg[k]) // 2]


def _not_state(name):
    """Dunders, and the output cache's `_`, `__`, `_7`, `_i`, `_i7`, `_oh`."""
    if name.startswith("__"):
        return True
    rest = name[1:] if name.startswith("_") else None
    if rest is None:
        return False
    return rest in ("", "_", "__", "i", "ii", "iii", "oh", "dh", "ih") or (
        rest.lstrip("i").isdigit() and len(rest) - len(rest.lstrip("i")) <= 1
    )


def _named(name, why):
    return {"name": _name(name), "why": _name(why)}


class _TooLarge(Exception):
    pass


class _CappedWriter:
    """A file wrapper that refuses to grow one value past VALUE_MAX_BYTES."""

    def __init__(self, f):
        self.f = f
        self.left = VALUE_MAX_BYTES

    def write(self, data):
        self.left -= memoryview(data).nbytes
        if self.left < 0:
            raise _TooLarge("larger than %d MiB" % (VALUE_MAX_BYTES >> 20))
        return self.f.write(data)


def _session_pickler(pickle):
    class SessionPickler(pickle.Pickler):
        # Code defined in a cell pickles as a reference to __main__, which a
        # new interpreter cannot resolve: refuse it when saving, not later.
        def reducer_override(self, obj):
            if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
                kind = "class" if isinstance(obj, type) else "function"
                raise pickle.PicklingError(
                    "%s %s is defined in a cell, not in an importable module"
                    % (kind, getattr(obj, "__qualname__", "?"))
                )
            return NotImplemented

    return SessionPickler


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
        # IPython's shell, when the kernel layer is there (notebook.py).
        self.notebook = None
        # Names in the globals that are IPython's, not the user's state.
        self.hidden = set()

    def take_fds(self):
        """The channel on fd 3 and copies of stdio, clear of user code's fds."""
        self.channel = _high_fd(CHANNEL_FD)
        os.close(CHANNEL_FD)
        st = os.fstat(self.channel)
        self.channel_id = (st.st_dev, st.st_ino)
        self.saved = {}
        for fd in (0, 1, 2):
            try:
                self.saved[fd] = _high_fd(fd)
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
            st = _fstat(self.channel)
        except OSError:
            _exit(CHANNEL_LOST_EXIT)
        if (st.st_dev, st.st_ino) != self.channel_id:
            # User code closed or replaced the channel; nothing can be sent.
            _exit(CHANNEL_LOST_EXIT)

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = _read(self.channel, min(n - len(buf), 1 << 20))
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
        (length,) = _HEADER.unpack(header)
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
            msg = _DECODER.decode(body.decode("utf-8"))
        except ValueError as e:
            return "malformed frame: %s" % _why(e)
        if not isinstance(msg, dict):
            return "a frame that is not a JSON object"
        return msg

    def send(self, msg):
        self._check_channel()
        body = _fit(msg)
        frame = _HEADER.pack(len(body)) + body
        view = memoryview(frame)
        while view:
            try:
                n = _write(self.channel, view)
            except OSError:
                _exit(CHANNEL_LOST_EXIT)
            view = view[n:]

    # --- start-up ---

    def prewarm(self):
        names = [n.strip() for n in os.environ.get(PREWARM_ENV, "").split(",")]
        names = [n for n in names if n][:LIST_MAX]
        imported, failed = [], []
        started = time.monotonic()
        # Import-time chatter (warnings) is nobody's cell output.
        with _Silenced(self.saved):
            for name in names:
                try:
                    __import__(name)
                    imported.append(_name(name))
                except BaseException as e:
                    failed.append(_named(name, _why(e)))
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
        _repair_stdio()

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
        kernel layer is there."""
        env = self.main.__dict__
        _drain_sigint()
        signal.signal(signal.SIGINT, self.user_sigint)
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)
                if self.notebook is not None:
                    return self.notebook.run(code)
                value = _execute(code, filename, env)
                if value is None:
                    return None, None
                env["_"] = value
                return _repr_capped(value), None
            finally:
                try:
                    _flush_stdio()
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
            text = "%s (the traceback could not be formatted: %s)\n" % (_exception_name(type(exc)), _why(e))
        _write_all(self.err, text.encode("utf-8", "backslashreplace"))
        return _exception_name(type(exc))

    def cell(self, msg):
        cid, code, marker = msg.get("id"), msg.get("code"), msg.get("marker")
        if not (type(cid) is int and 0 <= cid < 2 ** 64 and isinstance(code, str)):
            return _error("a cell needs an integer id and string code")
        if not (isinstance(marker, str) and len(marker) == MARKER_HEX_LEN and set(marker) <= _HEX):
            return _error("a cell marker is %d lowercase hex digits" % MARKER_HEX_LEN)
        self._restore_fds()
        self._notice_installs()
        self.cell_id = cid
        self.cells += 1
        filename = "<cell %d>" % self.cells
        if self.notebook is None:
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
            if self.notebook is None:
                done["exception"] = self._report(exc)
            else:
                done["exception"] = _exception_name(type(exc))
        del exc
        if self.notebook is not None:
            for item in self.notebook.take_outputs():
                item["op"] = "output"
                item["id"] = cid
                self.send(item)
            done["outputs_dropped"] = self.notebook.dropped
        _flush_stdio()
        end = MARKER_PREFIX + marker.encode("ascii") + MARKER_SUFFIX
        _write_all(self.out, end)
        _write_all(self.err, end)
        return done

    def install(self, requirements):
        """Has the supervisor install `requirements` into the session
        (`%pip install`), printing its progress; its answer."""
        self.send({"op": "install", "id": self.cell_id, "requirements": list(requirements)[:LIST_MAX]})
        while True:
            msg = self.recv()
            if not isinstance(msg, dict):
                _exit(CHANNEL_LOST_EXIT)
            op = msg.get("op")
            if op == "install_progress":
                line = msg.get("line")
                if isinstance(line, str):
                    print(line, flush=True)
            elif op == "installed":
                importlib.invalidate_caches()
                return msg
            else:
                _exit(CHANNEL_LOST_EXIT)

    # --- state across interpreters ---

    def save(self, msg):
        path = msg.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            return _error("save needs an absolute path")
        pickle = self.pickle
        pickler = _session_pickler(pickle)
        saved, skipped = [], []
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        # One name: a save cut short leaves one file, which the next save
        # or a discard replaces.
        tmp = path + ".tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            with os.fdopen(os.open(tmp, flags, 0o600), "wb") as f:
                f.write(STATE_MAGIC)
                for name, value in list(self.main.__dict__.items()):
                    if isinstance(name, str) and (_not_state(name) or name in self.hidden):
                        continue
                    if not isinstance(name, str):
                        skipped.append(_named(repr(name), "not a string name"))
                        continue
                    start = f.tell()
                    try:
                        _write_record(f, pickle, pickler, name, value)
                        saved.append(_name(name))
                    except BaseException as e:
                        f.seek(start)
                        f.truncate()
                        skipped.append(_named(name, str(e) if isinstance(e, _TooLarge) else _why(e)))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return {"op": "saved", "saved": saved[:LIST_MAX], "skipped": skipped[:LIST_MAX]}

    def restore(self, msg):
        path = msg.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            return _error("restore needs an absolute path")
        restored, failed = [], []
        try:
            os.unlink(path + ".tmp")
        except OSError:
            pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return {"op": "restored", "restored": [], "failed": []}
        try:
            with os.fdopen(fd, "rb") as f:
                if f.read(len(STATE_MAGIC)) != STATE_MAGIC:
                    failed.append(_named("<state file>", "not a PRIMS state file"))
                else:
                    self._restore_records(f, restored, failed)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        return {"op": "restored", "restored": restored[:LIST_MAX], "failed": failed[:LIST_MAX]}

    def discard(self, msg):
        path = msg.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            return _error("discard needs an absolute path")
        for stale in (path, path + ".tmp"):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
        return {"op": "discarded"}

    def warm_up(self, msg):
        code = msg.get("code")
        if not isinstance(code, str):
            return _error("warm_up needs its code")
        if self.notebook is not None:
            self.notebook.warm_up()
        error = None
        if code:
            # Not the session's globals, nor its output.
            with _Silenced(self.saved):
                try:
                    exec(compile(code, "<python.warm_up_code>", "exec"), {"__name__": "__warm_up__"})
                except BaseException as e:
                    error = _cap(_why(e), MESSAGE_MAX_CHARS)[0]
        return {"op": "warmed_up", "error": error}

    def sync(self, msg):
        nonce = msg.get("nonce")
        if not isinstance(nonce, str):
            return _error("sync needs a string nonce")
        return {"op": "synced", "nonce": _name(nonce)}

    def _restore_records(self, f, restored, failed):
        pickle = self.pickle
        while True:
            head = f.read(RECORD.size)
            if not head:
                return
            if len(head) < RECORD.size:
                failed.append(_named("<state file>", "truncated"))
                return
            kind, name_len, payload_len = RECORD.unpack(head)
            if name_len > RECORD_NAME_MAX or payload_len > VALUE_MAX_BYTES:
                failed.append(_named("<state file>", "corrupt record"))
                return
            raw_name, payload = f.read(name_len), f.read(payload_len)
            if len(raw_name) < name_len or len(payload) < payload_len:
                failed.append(_named("<state file>", "truncated"))
                return
            name = raw_name.decode("utf-8", "surrogatepass")
            try:
                if kind == b"M":
                    value = importlib.import_module(payload.decode("utf-8"))
                elif kind == b"P":
                    value = pickle.loads(payload)
                else:
                    raise ValueError("unknown record kind %r" % kind)
                self.main.__dict__[name] = value
                restored.append(_name(name))
            except BaseException as e:
                failed.append(_named(name, _why(e)))

    # --- the loop ---

    def serve(self):
        handlers = {
            "cell": self.cell,
            "save": self.save,
            "restore": self.restore,
            "discard": self.discard,
            "sync": self.sync,
            "warm_up": self.warm_up,
        }
        while True:
            msg = self.recv()
            if msg is None:
                _flush_stdio()
                os._exit(0)
            if isinstance(msg, str):
                self.send(_error(msg))
                continue
            handler = handlers.get(msg.get("op"))
            if handler is None:
                self.send(_error("unknown op %r" % (msg.get("op"),)))
                continue
            try:
                reply = handler(msg)
            except Exception as e:
                reply = _error("%s failed: %s" % (msg.get("op"), _why(e)))
            self.send(reply)


class _Silenced:
    """Points fds 1 and 2 at /dev/null for a while."""

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
        _flush_stdio()
        for fd in (1, 2):
            if fd in self.saved:
                os.dup2(self.saved[fd], fd)


def _write_record(f, pickle, pickler, name, value):
    raw_name = name.encode("utf-8", "surrogatepass")
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if not isinstance(module, str):
            raise TypeError("a module without a string __name__")
        payload = module.encode("utf-8", "surrogatepass")
        f.write(RECORD.pack(b"M", len(raw_name), len(payload)) + raw_name + payload)
        return
    head = f.tell()
    f.write(RECORD.pack(b"P", len(raw_name), 0) + raw_name)
    start = f.tell()
    pickler(_CappedWriter(f), protocol=4).dump(value)
    end = f.tell()
    f.seek(head)
    f.write(RECORD.pack(b"P", len(raw_name), end - start))
    f.seek(end)


def _error(message):
    return {"op": "error", "message": _cap(message, MESSAGE_MAX_CHARS)[0]}


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    signal.signal(signal.SIGINT, _agent_sigint)
    template = os.environ.pop(TEMPLATE_ENV, None) is not None
    # Read at startup; no subprocess of the user's is to inherit it.
    os.environ.pop(ALLOCATOR_ENV, None)
    sys_ = _Sys() if template else None
    agent = Agent()
    # Before the imports, so whatever they capture as __main__ is the user's.
    agent.install_main()
    agent.notebook, notebook_error = _load_notebook(agent)
    imported, failed, import_ms = agent.prewarm()
    version = "%d.%d.%d" % sys.version_info[:3]
    ready = {
        "op": "ready",
        "python": version,
        "imported": imported,
        "failed": failed,
        "import_ms": import_ms,
        "notebook": _name(agent.notebook.version) if agent.notebook else None,
        "notebook_error": _name(notebook_error) if notebook_error else None,
    }
    if template:
        agent.import_own()
        if agent.notebook is not None:
            agent.notebook.warm_up()
        # Never returns: each forked python goes on in _forked_main.
        _serve_forks(agent, ready, sys_)
    agent.send(ready)
    # While the supervisor readies the first cell.
    agent.import_own()
    agent.serve()


def _forked_main(agent, ready):
    """A python forked from a template, confined, its stdio and channel on
    fds 0-3: the rest of main(), run from where it was forked. It never
    returns."""
    try:
        agent.take_fds()
        # The template logged its own failures once.
        ready["import_ms"], ready["failed"] = 0, []
        agent.send(ready)
        agent.import_own()
        agent.serve()
    except BaseException:
        traceback.print_exc()
    _exit(1)
