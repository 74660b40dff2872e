# The command-line tools shell pipelines and notebook `!` lines use every day:
# awk, sed, grep, sort, uniq, cut, tr, xargs, find, tar, gzip, which, ps, df, ...
import os
import subprocess
import tempfile
from pathlib import Path

work = Path(tempfile.mkdtemp(prefix="compat_shell_tools_", dir=os.getcwd()))
(work / "sales.csv").write_text("region,amount\nnorth,10\nsouth,5\nnorth,7\neast,1\n")
(work / "notes.txt").write_text("alpha\nbeta\ngamma\n")


def sh(script: str) -> str:
    """The script's stdout; it must succeed and write nothing on stderr."""
    r = subprocess.run(["sh", "-c", script], cwd=work, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and not r.stderr, f"{script!r}: exit {r.returncode}, stderr {r.stderr!r}"
    return r.stdout


assert sh("awk -F, 'NR > 1 {s[$1] += $2} END {for (k in s) print k, s[k]}' sales.csv | sort") == \
    "east 1\nnorth 17\nsouth 5\n"
assert sh("tail -n +2 sales.csv | cut -d, -f1 | sort | uniq -c | sort -rn | head -1").split() == ["2", "north"]
assert sh("sed -n 's/^north,//p' sales.csv | paste -sd+") == "10+7\n"
assert sh("sed -e 's/a/A/g' notes.txt | tr a-z A-Z | grep -c A") == "3\n"
assert sh("grep -n beta notes.txt") == "2:beta\n"
assert sh("wc -l < notes.txt").strip() == "3"
assert sh("find . -name '*.txt' -print0 | xargs -0 cat | sort -r | head -n 1") == "gamma\n"
assert sh("tar czf bundle.tgz sales.csv notes.txt && tar tzf bundle.tgz | sort") == "notes.txt\nsales.csv\n"
assert sh("gzip -k notes.txt && gunzip -c notes.txt.gz | md5sum | cut -c1-32") == \
    sh("md5sum < notes.txt | cut -c1-32")
assert sh("printf 'b\\na\\n' | sort | tee sorted.txt | wc -l").strip() == "2"
assert sh("diff notes.txt notes.txt && cmp notes.txt notes.txt && echo same") == "same\n"
assert sh("seq 1 5 | xargs -n1 expr 2 '*' | paste -sd' '") == "2 4 6 8 10\n"
assert sh("echo aGVsbG8= | base64 -d") == "hello"
assert sh("basename /a/b/c.txt .txt; dirname /a/b/c.txt") == "c\n/a/b\n"
assert sh("date -u -d @0 +%Y") == "1970\n"
assert sh("stat -c %s notes.txt") == "17\n"
assert sh("command -v python3 >/dev/null && echo found") == "found\n"
assert sh("which ls python3 | wc -l").strip() == "2"
assert sh("env | grep -c '^PATH='").strip() == "1"
assert sh("ps -e -o pid= | wc -l").strip() != "0"
assert sh("df -P . | tail -n 1 | awk '{print ($2 > 0)}'") == "1\n"
assert sh("du -s . | cut -f1").strip().isdigit()
assert sh("mktemp -d | xargs test -d && echo tmp") == "tmp\n"
print("OK shell_tools")
