# subprocess and the shell: ls, sh -c, pipelines, redirects, input, exit codes, timeouts.
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

work = Path(tempfile.mkdtemp(prefix="compat_subprocess_", dir=os.getcwd()))
for name in ("b.txt", "a.txt", "c.log"):
    (work / name).write_text(name * 3 + "\n")

ls = subprocess.run(["ls"], cwd=work, capture_output=True, text=True, check=True)
assert ls.stdout.split() == ["a.txt", "b.txt", "c.log"]
assert subprocess.run(["ls", "-la", str(work)], capture_output=True, check=True).stdout.count(b"\n") >= 5
out = subprocess.check_output(["sh", "-c", "echo $((6 * 7)) | tr 4 X; echo err >&2"], stderr=subprocess.STDOUT, text=True)
assert out == "X2\nerr\n", out
pipeline = subprocess.run("cat *.txt | sort -r | uniq | wc -l > count.out && cat count.out",
                          shell=True, cwd=work, capture_output=True, text=True)
assert pipeline.returncode == 0 and pipeline.stdout.strip() == "2", pipeline
assert (work / "count.out").exists()
r = subprocess.run(["grep", "-c", "a.txt"], input="x\na.txt\na.txt\n", capture_output=True, text=True)
assert r.stdout.strip() == "2"
assert subprocess.run(["sh", "-c", "exit 3"]).returncode == 3
try:
    subprocess.run(["false"], check=True)
except subprocess.CalledProcessError as e:
    assert e.returncode == 1
else:
    raise AssertionError("false succeeded")
try:
    subprocess.run(["sleep", "5"], timeout=0.3)
except subprocess.TimeoutExpired:
    pass
else:
    raise AssertionError("no timeout")
try:
    subprocess.run(["definitely-not-a-command-compat"])
except FileNotFoundError:
    pass
env = {**os.environ, "COMPAT_GREETING": "hi there"}
assert subprocess.run(["sh", "-c", 'printf "%s" "$COMPAT_GREETING"'], env=env, capture_output=True,
                      text=True).stdout == "hi there"

p1 = subprocess.Popen(["printf", "3\\n1\\n2\\n"], stdout=subprocess.PIPE)
p2 = subprocess.Popen(["sort", "-n"], stdin=p1.stdout, stdout=subprocess.PIPE, text=True)
p1.stdout.close()
assert p2.communicate(timeout=10)[0] == "1\n2\n3\n" and p1.wait() == 0
proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert proc.communicate("round trip")[0] == "round trip"
lines = []
with subprocess.Popen(["sh", "-c", "for i in 1 2 3; do echo line$i; done"], stdout=subprocess.PIPE, text=True) as p:
    for line in p.stdout:
        lines.append(line.strip())
assert lines == ["line1", "line2", "line3"]
cut = subprocess.run(shlex.split("cut -d, -f2"), input="a,1\nb,2\n", capture_output=True, text=True)
assert cut.stdout == "1\n2\n"
assert os.system("true") == 0 and os.waitstatus_to_exitcode(os.system("exit 4")) == 4
with os.popen("echo popen") as f:
    assert f.read() == "popen\n"
assert subprocess.getoutput("echo $((1+1))") == "2"
print("OK subprocess_commands")
