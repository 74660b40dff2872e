# JSON and CSV round trips through files, as data scripts do.
import csv
import json
import os
import tempfile
from pathlib import Path

work = Path(tempfile.mkdtemp(prefix="compat_json_csv_", dir=os.getcwd()))
records = [
    {"id": i, "name": f"item-{i}", "price": round(1.25 * i, 2), "tags": ["a", "b"][: i % 3]}
    for i in range(50)
]
(work / "records.json").write_text(json.dumps(records, indent=2, sort_keys=True))
loaded = json.loads((work / "records.json").read_text())
assert loaded == records
assert json.loads(json.dumps({"u": "é\u2603", "n": None, "f": 1e-9})) == {"u": "é☃", "n": None, "f": 1e-9}

with open(work / "records.jsonl", "w") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
with open(work / "records.jsonl") as f:
    assert [json.loads(line) for line in f] == records

with open(work / "table.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["id", "name", "price"], extrasaction="ignore")
    w.writeheader()
    w.writerows(records)
with open(work / "table.csv", newline="") as f:
    rows = list(csv.DictReader(f))
assert len(rows) == 50 and rows[7] == {"id": "7", "name": "item-7", "price": "8.75"}
total = sum(float(r["price"]) for r in rows)
assert abs(total - 1531.25) < 1e-9, total

# Quoting, embedded newlines and a custom dialect.
tricky = [["a,b", 'say "hi"', "line\nbreak"], ["x", "", "z"]]
with open(work / "tricky.tsv", "w", newline="") as f:
    csv.writer(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL).writerows(tricky)
with open(work / "tricky.tsv", newline="") as f:
    assert list(csv.reader(f, delimiter="\t")) == tricky
sniffed = csv.Sniffer().sniff("a;b;c\n1;2;3\n")
assert sniffed.delimiter == ";"
print("OK json_csv")
