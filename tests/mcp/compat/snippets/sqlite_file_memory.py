# sqlite3: an on-disk database (WAL journal) and an in-memory one.
import os
import sqlite3
import tempfile
import threading
from pathlib import Path

work = Path(tempfile.mkdtemp(prefix="compat_sqlite_", dir=os.getcwd()))
db_path = work / "app.db"
con = sqlite3.connect(db_path)
assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
con.execute("CREATE TABLE sales (id INTEGER PRIMARY KEY, region TEXT, amount REAL, day TEXT)")
rows = [(None, ["north", "south", "east"][i % 3], i * 1.5, f"2024-01-{i % 28 + 1:02d}") for i in range(300)]
with con:
    con.executemany("INSERT INTO sales VALUES (?, ?, ?, ?)", rows)
con.execute("CREATE INDEX idx_region ON sales(region)")
got = con.execute(
    "SELECT region, COUNT(*), ROUND(SUM(amount), 2) FROM sales GROUP BY region ORDER BY region"
).fetchall()
want = {}
for _, region, amount, _ in rows:
    want[region] = want.get(region, 0) + amount
assert got == [(r, 100, round(want[r], 2)) for r in sorted(want)], got

# A second connection (another thread) sees committed data while WAL is on.
seen = []
t = threading.Thread(target=lambda: seen.append(
    sqlite3.connect(db_path).execute("SELECT COUNT(*) FROM sales").fetchone()[0]))
t.start()
t.join()
assert seen == [300]
try:
    with con:
        con.execute("INSERT INTO sales VALUES (1, 'dup', 0, '')")
except sqlite3.IntegrityError:
    pass
else:
    raise AssertionError("duplicate primary key accepted")
assert con.execute("SELECT COUNT(*) FROM sales").fetchone()[0] == 300
con.close()
assert (work / "app.db").stat().st_size > 0

mem = sqlite3.connect(":memory:")
mem.row_factory = sqlite3.Row
mem.create_function("double", 1, lambda x: 2 * x)
mem.execute("CREATE TABLE t (k TEXT, v INTEGER)")
mem.executemany("INSERT INTO t VALUES (?, ?)", [("a", 1), ("b", 2), ("a", 3)])
mem.commit()
row = mem.execute("SELECT k, double(SUM(v)) AS s FROM t WHERE k = :k GROUP BY k", {"k": "a"}).fetchone()
assert row["k"] == "a" and row["s"] == 8
assert mem.execute("SELECT json_extract('{\"x\": [1, 2]}', '$.x[1]')").fetchone()[0] == 2
backup = sqlite3.connect(work / "backup.db")
mem.backup(backup)
assert backup.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 3
backup.close()
mem.close()
print("OK sqlite_file_memory")
