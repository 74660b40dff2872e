# collections, itertools, functools, heapq, bisect and the numeric modules.
import bisect
import heapq
import itertools
import math
import operator
import random
import statistics
from collections import ChainMap, Counter, OrderedDict, defaultdict, deque, namedtuple
from decimal import ROUND_HALF_UP, Decimal, getcontext
from fractions import Fraction
from functools import cache, lru_cache, partial, reduce, total_ordering, wraps

words = "the cat and the hat and the bat".split()
c = Counter(words)
assert c.most_common(2) == [("the", 3), ("and", 2)]
groups = defaultdict(list)
for w in words:
    groups[len(w)].append(w)
assert dict(groups) == {3: words}
d = deque(range(5), maxlen=3)
d.append(9)
d.rotate(1)
assert list(d) == [9, 3, 4]
Point = namedtuple("Point", "x y", defaults=[0])
assert Point(1)._replace(y=5) == (1, 5)
od = OrderedDict.fromkeys("abc")
od.move_to_end("a")
assert "".join(od) == "bca"
assert ChainMap({"a": 1}, {"a": 2, "b": 3})["b"] == 3

data = sorted([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)])
grouped = {k: sum(v for _, v in g) for k, g in itertools.groupby(data, key=operator.itemgetter(0))}
assert grouped == {"a": 4, "b": 7, "c": 4}
assert list(itertools.accumulate([1, 2, 3, 4])) == [1, 3, 6, 10]
assert len(list(itertools.product("ab", repeat=3))) == 8
assert list(itertools.combinations(range(4), 2))[-1] == (2, 3)
assert list(itertools.islice(itertools.count(10, 5), 3)) == [10, 15, 20]
assert list(itertools.chain.from_iterable([[1], [2, 3]])) == [1, 2, 3]
assert list(itertools.pairwise("abc")) == [("a", "b"), ("b", "c")]
assert list(itertools.zip_longest("ab", "x", fillvalue="-")) == [("a", "x"), ("b", "-")]


@lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


assert fib(90) == 2880067194370816120 and fib.cache_info().hits > 0


@cache
def fact(n):
    return 1 if n == 0 else n * fact(n - 1)


assert fact(20) == math.factorial(20)
assert reduce(operator.mul, range(1, 6)) == 120
assert partial(int, base=2)("1011") == 11


def logged(fn):
    @wraps(fn)
    def inner(*a):
        return fn(*a)
    return inner


@logged
def add(a, b):
    """Adds."""
    return a + b


assert add.__name__ == "add" and add.__doc__ == "Adds." and add(2, 3) == 5


@total_ordering
class Version:
    def __init__(self, s):
        self.t = tuple(map(int, s.split(".")))

    def __eq__(self, o):
        return self.t == o.t

    def __lt__(self, o):
        return self.t < o.t


assert sorted(["1.10", "1.2", "1.9"], key=Version) == ["1.2", "1.9", "1.10"]
assert Version("2.0") >= Version("1.99")

h = [5, 1, 8, 3, 9, 2]
heapq.heapify(h)
assert [heapq.heappop(h) for _ in range(3)] == [1, 2, 3]
assert heapq.nlargest(2, [4, 7, 1, 9]) == [9, 7]
scores = [60, 70, 80, 90]
assert "FDCBA"[bisect.bisect(scores, 85)] == "B"

getcontext().prec = 28
assert Decimal("0.1") + Decimal("0.2") == Decimal("0.3")
assert Decimal("2.675").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) == Decimal("2.68")
assert Fraction(1, 3) + Fraction(1, 6) == Fraction(1, 2)
assert statistics.median([3, 1, 4, 1, 5]) == 3
assert math.isclose(statistics.stdev([2, 4, 4, 4, 5, 5, 7, 9]), 2.138089935299395)
assert math.isclose(statistics.correlation([1, 2, 3], [2, 4, 7]), 0.9933992677987828)
rng = random.Random(1234)
assert rng.sample(range(100), 3) == random.Random(1234).sample(range(100), 3)
assert math.comb(10, 3) == 120 and math.gcd(84, 36) == 12 and math.isqrt(99) == 9
print("OK collections_itertools_functools")
