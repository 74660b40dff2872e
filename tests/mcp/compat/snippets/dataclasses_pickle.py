# Objects and persistence: dataclasses, enum, typing, copy, pickle, shelve, weakref, contextlib.
import contextlib
import copy
import enum
import gc
import os
import pickle
import shelve
import tempfile
import weakref
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple, Optional, TypedDict


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Perm(enum.IntFlag):
    R = 4
    W = 2
    X = 1


@dataclass(order=True, frozen=True)
class Item:
    name: str
    qty: int = 0
    tags: tuple = ()


@dataclass
class Order:
    id: int
    items: list = field(default_factory=list)
    color: Color = Color.RED
    note: Optional[str] = None


class Pair(NamedTuple):
    a: int
    b: str


class Movie(TypedDict):
    title: str
    year: int


o = Order(1, [Item("b", 2), Item("a", 5, ("x",))], Color.GREEN)
assert asdict(o)["items"][1] == {"name": "a", "qty": 5, "tags": ("x",)}
assert sorted(o.items)[0].name == "a"
assert replace(o.items[0], qty=9).qty == 9
deep = copy.deepcopy(o)
deep.items.append(Item("c"))
assert len(o.items) == 2
assert Perm.R | Perm.W == 6 and Perm(5) == Perm.R | Perm.X
assert Color["GREEN"] is Color.GREEN and Color(1).name == "RED"
m: Movie = {"title": "x", "year": 1}
assert Pair(1, "x")._asdict() == {"a": 1, "b": "x"} and m["year"] == 1

blob = pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)
back = pickle.loads(blob)
assert back == o and back.color is Color.GREEN
work = Path(tempfile.mkdtemp(prefix="compat_pickle_", dir=os.getcwd()))
with open(work / "order.pkl", "wb") as f:
    pickle.dump([o, Pair(2, "y")], f)
with open(work / "order.pkl", "rb") as f:
    assert pickle.load(f)[1] == (2, "y")
with shelve.open(str(work / "store")) as db:
    db["order"] = o
    db["n"] = 42
with shelve.open(str(work / "store"), flag="r") as db:
    assert db["order"] == o and db["n"] == 42


class Node:
    pass


n = Node()
cache = weakref.WeakValueDictionary()
cache["k"] = n
r = weakref.ref(n)
del n
gc.collect()
assert r() is None and "k" not in cache

events = []


@contextlib.contextmanager
def step(name):
    events.append(f"enter {name}")
    try:
        yield name
    finally:
        events.append(f"exit {name}")


with contextlib.ExitStack() as stack:
    for s in ("a", "b"):
        stack.enter_context(step(s))
with contextlib.suppress(KeyError):
    {}["missing"]
assert events == ["enter a", "enter b", "exit b", "exit a"]
print("OK dataclasses_pickle")
