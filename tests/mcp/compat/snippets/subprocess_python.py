# Running Python itself as a child: sys.executable, python3 from PATH, -m modules,
# a script file, and the third-party packages visible to the children.
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

r = subprocess.run([sys.executable, "-c", "import sys; print(sys.prefix == sys.base_prefix)"],
                   capture_output=True, text=True, check=True)
assert r.stdout.strip() in {"True", "False"}
versions = subprocess.run(
    [sys.executable, "-c", "import json, numpy, pandas, requests; "
     "print(json.dumps([numpy.__version__, pandas.__version__, requests.__version__]))"],
    capture_output=True, text=True, check=True)
import numpy, pandas, requests  # noqa: E401
assert json.loads(versions.stdout) == [numpy.__version__, pandas.__version__, requests.__version__]
shell = subprocess.run("python3 -c 'import numpy; print(numpy.arange(4).sum())'", shell=True,
                       capture_output=True, text=True)
assert shell.returncode == 0 and shell.stdout.strip() == "6", shell
pretty = subprocess.run([sys.executable, "-m", "json.tool", "--sort-keys"], input='{"b": 1, "a": [1, 2]}',
                        capture_output=True, text=True, check=True)
assert json.loads(pretty.stdout) == {"a": [1, 2], "b": 1}
work = Path(tempfile.mkdtemp(prefix="compat_pychild_", dir=os.getcwd()))
script = work / "job.py"
script.write_text(
    "import sys, pathlib\n"
    "out = pathlib.Path(sys.argv[1])\n"
    "out.write_text(' '.join(sys.argv[2:]))\n"
    "print('wrote', out.name)\n"
    "sys.exit(int(sys.argv[2]))\n"
)
r = subprocess.run([sys.executable, str(script), str(work / "out.txt"), "0", "x"], capture_output=True, text=True)
assert r.returncode == 0 and r.stdout == "wrote out.txt\n" and (work / "out.txt").read_text() == "0 x"
r = subprocess.run([sys.executable, str(script), str(work / "out2.txt"), "4"], capture_output=True, text=True)
assert r.returncode == 4
r = subprocess.run([sys.executable, "-c", "raise SystemExit('fatal: bad input')"], capture_output=True, text=True)
assert r.returncode == 1 and "fatal: bad input" in r.stderr
r = subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"],
                   input="piped", capture_output=True, text=True)
assert r.stdout == "PIPED"
r = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
print("pip in the environment:", r.returncode == 0)
print("OK subprocess_python")
