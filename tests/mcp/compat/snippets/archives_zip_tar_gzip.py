# Archives and compression: zipfile, tarfile, gzip, bz2, lzma, zlib.
import bz2
import gzip
import io
import lzma
import os
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path

work = Path(tempfile.mkdtemp(prefix="compat_archives_", dir=os.getcwd()))
payload = ("row,value\n" + "".join(f"{i},{i * i}\n" for i in range(2000))).encode()

with zipfile.ZipFile(work / "data.zip", "w", compression=zipfile.ZIP_DEFLATED) as z:
    z.writestr("data/table.csv", payload)
    z.writestr("README.txt", "hello")
with zipfile.ZipFile(work / "data.zip") as z:
    assert sorted(z.namelist()) == ["README.txt", "data/table.csv"]
    assert z.read("data/table.csv") == payload
    assert z.testzip() is None
    z.extractall(work / "unzipped")
assert (work / "unzipped" / "data" / "table.csv").read_bytes() == payload
assert (work / "data.zip").stat().st_size < len(payload) / 2

(work / "a.txt").write_text("alpha")
for mode, ext in (("w:gz", "tgz"), ("w:bz2", "tbz"), ("w:xz", "txz")):
    with tarfile.open(work / f"bundle.{ext}", mode) as t:
        t.add(work / "a.txt", arcname="a.txt")
        info = tarfile.TarInfo("mem/b.bin")
        info.size = len(payload)
        t.addfile(info, io.BytesIO(payload))
    with tarfile.open(work / f"bundle.{ext}") as t:
        assert t.getnames() == ["a.txt", "mem/b.bin"]
        assert t.extractfile("mem/b.bin").read() == payload
        # The "data" filter where this Python has it (3.11.4+; 3.14 makes it the default).
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        t.extractall(work / ext, **extra)
    assert (work / ext / "a.txt").read_text() == "alpha"

with gzip.open(work / "log.gz", "wt", encoding="utf-8") as f:
    f.write("line 1\nline 2\n")
with gzip.open(work / "log.gz", "rt") as f:
    assert f.read().splitlines() == ["line 1", "line 2"]
for mod in (gzip, bz2, lzma, zlib):
    assert mod.decompress(mod.compress(payload)) == payload
with lzma.open(work / "x.xz", "wb") as f:
    f.write(payload)
with bz2.open(work / "x.bz2", "wb") as f:
    f.write(payload)
assert lzma.open(work / "x.xz").read() == bz2.open(work / "x.bz2").read() == payload
assert zlib.crc32(b"hello") == 907060870
print("OK archives_zip_tar_gzip")
