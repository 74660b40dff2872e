# numpy: arrays, broadcasting, linear algebra (BLAS threads), random generators, FFT,
# .npy/.npz files, a memmap, and threadpoolctl's view of the BLAS.
import os
import tempfile
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

rng = np.random.default_rng(42)
a = rng.normal(size=(300, 300))
b = rng.normal(size=300)
x = np.linalg.solve(a, b)
assert np.allclose(a @ x, b)
q, r = np.linalg.qr(a)
assert np.allclose(q @ r, a)
w = np.linalg.eigvalsh(a + a.T)
assert w.shape == (300,) and np.all(np.diff(w) >= 0)
u, s, vt = np.linalg.svd(a[:50, :40], full_matrices=False)
assert np.allclose((u * s) @ vt, a[:50, :40])
big = rng.random((800, 800))
assert np.isclose((big @ big.T).trace(), (big ** 2).sum())
assert np.array_equal(np.arange(12).reshape(3, 4).sum(axis=0), [12, 15, 18, 21])
m = np.ones((4, 1)) * np.arange(3)
assert m.shape == (4, 3) and m[2, 2] == 2
masked = np.where(np.arange(10) % 2 == 0, np.arange(10), -1)
assert masked.tolist() == [0, -1, 2, -1, 4, -1, 6, -1, 8, -1]
sig = np.sin(2 * np.pi * 50 * np.linspace(0, 1, 1000, endpoint=False))
assert np.argmax(np.abs(np.fft.rfft(sig))) == 50
assert np.random.default_rng(7).integers(0, 100, 5).tolist() == np.random.default_rng(7).integers(0, 100, 5).tolist()
hist, edges = np.histogram(rng.normal(size=10_000), bins=20, range=(-4, 4))
assert hist.sum() <= 10_000 and len(edges) == 21
rec = np.zeros(3, dtype=[("name", "U10"), ("score", "f8")])
rec["name"] = ["a", "b", "c"]
rec["score"] = [3.0, 1.0, 2.0]
assert np.sort(rec, order="score")["name"].tolist() == ["b", "c", "a"]

work = Path(tempfile.mkdtemp(prefix="compat_numpy_", dir=os.getcwd()))
np.save(work / "a.npy", a)
assert np.array_equal(np.load(work / "a.npy"), a)
np.savez_compressed(work / "bundle.npz", a=a, b=b)
with np.load(work / "bundle.npz") as z:
    assert np.array_equal(z["b"], b)
np.savetxt(work / "m.csv", m, delimiter=",", fmt="%.1f")
assert np.array_equal(np.loadtxt(work / "m.csv", delimiter=","), m)
mm = np.memmap(work / "mm.dat", dtype="float32", mode="w+", shape=(1000, 10))
mm[:] = 1.5
mm.flush()
del mm
assert np.memmap(work / "mm.dat", dtype="float32", mode="r", shape=(1000, 10)).sum() == 15000

info = threadpool_info()
assert any(i["user_api"] == "blas" for i in info), info
with threadpool_limits(limits=1, user_api="blas"):
    assert np.allclose(a @ x, b)
print("OK numpy_basics")
