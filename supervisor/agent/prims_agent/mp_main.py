"""What a process started by `multiprocessing`'s spawn or forkserver
method finds in `__main__`: the session's cell-defined functions and
classes, as a script's child finds the script's.

A child of those methods is a new python: it gets its parent's `__main__`
by importing it again (`multiprocessing.spawn.prepare`), by name or by
path, and then finds `__main__.f` when a task names `f`. A script has a
path; the session's `__main__` is the cells' namespace, with neither, so
such a child found nothing and a `Pool` of cell-defined functions failed
(as it does in Jupyter). So, as each such child is prepared, the parent's
cell-defined functions and classes are written, carried by value with
cloudpickle, into a module in the jail's /tmp, and the child is told to
import that module as its main. The fork method, Linux's default, needs
none of this: its children are copies of the parent.

`multiprocessing.spawn` is patched when it is first imported (a finder on
`sys.meta_path`), so that an interpreter that never starts a process
never pays for importing it; for the same reason this module imports
nothing at start-up that python has not loaded already (`importlib.abc`
alone costs a cold interpreter 17 ms).
"""

import importlib.machinery
import os
import sys
import types

_SPAWN = "multiprocessing.spawn"
# Where the modules go: the jail's /tmp, emptied with every new interpreter.
_DIR = "/tmp/prims-mp-main"
# The main a child imports instead of its parent's empty one.
_PREFIX = "prims_mp_main_"


def install():
    """Patch `multiprocessing.spawn` now if it is imported, else when it is."""
    module = sys.modules.get(_SPAWN)
    if module is not None:
        _patch(module)
    else:
        sys.meta_path.insert(0, _Finder())


class _Finder:
    """A `sys.meta_path` finder: finds `multiprocessing.spawn` as the path
    finder does, and patches it once it has run; then steps aside."""

    def find_spec(self, name, path, target=None):
        if name != _SPAWN:
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


def _patch(spawn):
    original = spawn.get_preparation_data

    def get_preparation_data(name):
        data = original(name)
        if "init_main_from_name" in data or "init_main_from_path" in data:
            return data
        module = _write_main()
        if module is not None:
            data["sys_path"] = [_DIR] + list(data.get("sys_path", sys.path))
            data["init_main_from_name"] = module
        return data

    get_preparation_data.__wrapped__ = original
    spawn.get_preparation_data = get_preparation_data


def _definitions(main, dumps):
    """Each function and class defined in a cell, pickled by value; one
    that cannot be (it holds a lock, a socket) is left out, and a child
    that needs it fails as it would have without this module."""
    pickled = {}
    for name, value in list(vars(main).items()):
        if name.startswith("__") or not isinstance(value, (types.FunctionType, type)):
            continue
        if getattr(value, "__module__", None) != "__main__":
            continue
        try:
            pickled[name] = dumps(value)
        except Exception:
            continue
    return pickled


def _write_main():
    """The name of a module in `_DIR` that defines what the session's
    `__main__` defines; the same one again while that has not changed.
    None without cloudpickle or anything to carry."""
    try:
        import hashlib
        import pickle

        import cloudpickle
    except ImportError:
        return None
    pickled = _definitions(sys.modules["__main__"], cloudpickle.dumps)
    if not pickled:
        return None
    blob = pickle.dumps(pickled)
    name = _PREFIX + hashlib.sha256(blob).hexdigest()[:24]
    path = os.path.join(_DIR, name + ".py")
    if os.path.exists(path):
        return name
    os.makedirs(_DIR, mode=0o700, exist_ok=True)
    data = os.path.join(_DIR, name + ".pickle")
    with open(data, "wb") as f:
        f.write(blob)
    source = (
        "import pickle as _pickle\n"
        "with open(%r, 'rb') as _f:\n"
        "    _defined = _pickle.load(_f)\n"
        "for _name, _value in _defined.items():\n"
        "    try:\n"
        "        globals()[_name] = _pickle.loads(_value)\n"
        "    except Exception:\n"
        "        pass\n"
        "del _pickle, _f, _defined, _name, _value\n" % data
    )
    # Whole or not at all: a child importing it must never see half.
    partial = path + ".%d" % os.getpid()
    with open(partial, "w") as f:
        f.write(source)
    os.replace(partial, path)
    return name
