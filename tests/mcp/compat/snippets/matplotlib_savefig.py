# matplotlib with the Agg backend, as scripts use it: figures saved to PNG (and SVG/PDF)
# with text, and read back.
import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

work = Path(tempfile.mkdtemp(prefix="compat_mpl_", dir=os.getcwd()))
x = np.linspace(0, 2 * np.pi, 200)
fig, axes = plt.subplots(1, 2, figsize=(8, 3), dpi=100)
axes[0].plot(x, np.sin(x), label="sin")
axes[0].plot(x, np.cos(x), "--", label="cos")
axes[0].legend()
axes[0].set_title("Trig ✓ — αβγ")
axes[1].hist(np.random.default_rng(0).normal(size=1000), bins=30)
axes[1].set_xlabel("value")
fig.tight_layout()
png = work / "plot.png"
fig.savefig(png)
fig.savefig(work / "plot.svg")
fig.savefig(work / "plot.pdf")
plt.close(fig)
raw = png.read_bytes()
assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 10_000
img = plt.imread(png)
assert img.shape[:2] == (300, 800), img.shape
assert img[..., :3].std() > 0.05  # not a blank canvas
assert (work / "plot.svg").read_text().lstrip().startswith("<?xml")
assert (work / "plot.pdf").read_bytes()[:5] == b"%PDF-"

oo = Figure(figsize=(2, 2))
ax = oo.subplots()
ax.imshow(np.arange(16).reshape(4, 4))
ax.text(0, 0, "label")
oo.savefig(work / "oo.png", dpi=50)
assert plt.imread(work / "oo.png").shape[:2] == (100, 100)
print("OK matplotlib_savefig")
