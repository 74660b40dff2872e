# Files and directories: pathlib, os, shutil, tempfile, glob, fnmatch, filecmp.
import filecmp
import fnmatch
import glob
import os
import shutil
import stat
import tempfile
from pathlib import Path

base = Path(tempfile.mkdtemp(prefix="compat_paths_", dir=os.getcwd()))
src = base / "project"
(src / "pkg" / "sub").mkdir(parents=True)
(src / "README.md").write_text("# demo\n")
(src / "pkg" / "__init__.py").write_text("")
(src / "pkg" / "mod.py").write_text("X = 1\n")
(src / "pkg" / "sub" / "data.csv").write_text("a,b\n1,2\n")
(src / "run.sh").write_text("#!/bin/sh\necho hi\n")
(src / "run.sh").chmod(0o755)
assert os.access(src / "run.sh", os.X_OK)
assert stat.S_IMODE((src / "run.sh").stat().st_mode) == 0o755

assert sorted(p.name for p in src.rglob("*.py")) == ["__init__.py", "mod.py"]
assert sorted(glob.glob(str(src / "**" / "*.csv"), recursive=True)) == [str(src / "pkg/sub/data.csv")]
assert fnmatch.filter(["a.py", "b.txt", "c.py"], "*.py") == ["a.py", "c.py"]
p = src / "pkg" / "sub" / "data.csv"
assert (p.suffix, p.stem, p.parent.name) == (".csv", "data", "sub")
assert p.relative_to(src).as_posix() == "pkg/sub/data.csv"
assert p.with_suffix(".tsv").name == "data.tsv"

dst = base / "copy"
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.sh"))
assert not (dst / "run.sh").exists()
cmp = filecmp.dircmp(src / "pkg", dst / "pkg")
assert cmp.diff_files == [] and cmp.left_only == []
shutil.copy2(src / "run.sh", dst / "run2.sh")
assert os.access(dst / "run2.sh", os.X_OK)
shutil.move(str(dst / "run2.sh"), str(dst / "pkg" / "run3.sh"))
assert (dst / "pkg" / "run3.sh").exists()
os.symlink("README.md", dst / "link.md")
assert (dst / "link.md").resolve() == (dst / "README.md").resolve()
assert (dst / "link.md").read_text() == "# demo\n"
os.link(dst / "README.md", dst / "hard.md")
assert (dst / "hard.md").stat().st_nlink == 2
os.utime(dst / "README.md", (1_600_000_000, 1_600_000_000))
assert int((dst / "README.md").stat().st_mtime) == 1_600_000_000
archive = shutil.make_archive(str(base / "bundle"), "gztar", root_dir=src)
unpacked = base / "unpacked"
shutil.unpack_archive(archive, unpacked)
assert (unpacked / "pkg" / "sub" / "data.csv").read_text() == "a,b\n1,2\n"
usage = shutil.disk_usage(base)
assert usage.total > 0 and usage.free > 0

with tempfile.NamedTemporaryFile("w+", suffix=".txt", delete=False) as tf:
    tf.write("scratch")
    name = tf.name
assert Path(name).read_text() == "scratch"
os.unlink(name)
with tempfile.TemporaryDirectory() as td:
    Path(td, "x").write_bytes(b"\0" * 1024)
    assert os.path.getsize(os.path.join(td, "x")) == 1024
assert not os.path.exists(td)
with tempfile.SpooledTemporaryFile(max_size=10) as sf:
    sf.write(b"x" * 100)
    sf.seek(0)
    assert sf.read() == b"x" * 100
fd, raw = tempfile.mkstemp()
os.write(fd, b"abc")
os.close(fd)
assert Path(raw).read_bytes() == b"abc"
os.remove(raw)
assert Path(tempfile.gettempdir()).is_dir()
shutil.rmtree(base)
assert not base.exists()
print("OK pathlib_shutil_tempfile")
