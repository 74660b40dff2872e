# Adds packages to a session: runs in an install jail as the session's own
# uid, with its environment read-only at /venv and its workspace at
# /workspace, so what it writes counts against the session's disk quota and
# nothing it reads is the host's. uv resolves the new requirements with
# every package the session already has pinned (its environment's and its
# own site directory's), installs them into a staging directory, and only
# the distributions the session does not have yet are moved into its site
# directory. A requirement that needs another version of a package the
# session has is a conflict: nothing is moved, and the last line says so.
#
# argv[1] is JSON: {"uv": [uv argv prefix], "requirements": [...],
# "site": the session's site directory, "venv_site": the environment's}.
# The last line of stdout is "PRIMS-INSTALL " + JSON: {"status":
# "installed", "added": ["name==version"...]} | {"status": "conflict",
# "package": name or null, "asked": requirement or null, "installed":
# version or null} | {"status": "failed"}.
import csv
import json
import os
import re
import shutil
import subprocess
import sys

WORK = "/workspace/.prims/install"
DIST_INFO = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._]*)-([A-Za-z0-9][A-Za-z0-9.+!_]*)\.dist-info$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_PINS = 5000


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(site):
    """{normalized name: version} of the distributions in `site`."""
    found = {}
    try:
        entries = os.listdir(site)
    except OSError:
        return found
    for entry in entries[:MAX_PINS]:
        m = DIST_INFO.match(entry)
        if m:
            found.setdefault(normalize(m.group(1)), m.group(2))
    return found


def say(result):
    sys.stdout.flush()
    print("PRIMS-INSTALL " + json.dumps(result), flush=True)


def record_paths(dist_info):
    """Paths a distribution installed, relative to the staging directory;
    a path that would leave it is skipped."""
    try:
        with open(os.path.join(dist_info, "RECORD"), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
    out = []
    for row in rows:
        path = row[0] if row else ""
        norm = os.path.normpath(path)
        if not path or norm.startswith(("/", "..")) or norm == ".":
            continue
        out.append(norm)
    return out


def move_new(stage, site, have):
    """Moves what the distributions not in `have` installed into `site`."""
    added = []
    for entry in sorted(os.listdir(stage)):
        m = DIST_INFO.match(entry)
        if not m or normalize(m.group(1)) in have:
            continue
        for rel in record_paths(os.path.join(stage, entry)):
            src, dst = os.path.join(stage, rel), os.path.join(site, rel)
            if os.path.islink(src) or not os.path.isfile(src):
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
        added.append("%s==%s" % (m.group(1), m.group(2)))
    return added


def main():
    args = json.loads(sys.argv[1])
    site, reqs = args["site"], args["requirements"]
    have = pins(args["venv_site"])
    for name, version in pins(site).items():
        have.setdefault(name, version)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    os.makedirs(site, exist_ok=True)
    stage = os.path.join(WORK, "target")
    constraints = os.path.join(WORK, "constraints.txt")
    with open(constraints, "w") as f:
        for name, version in sorted(have.items()):
            f.write("%s==%s\n" % (name, version))
    env = dict(os.environ, UV_CACHE_DIR=os.path.join(WORK, "cache"))
    argv = args["uv"] + ["--target", stage, "--constraint", constraints, "--"] + reqs
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said = proc.stdout.decode("utf-8", "replace")
    sys.stdout.write(said)
    try:
        if proc.returncode != 0:
            for req in reqs:
                m = NAME.match(req)
                name = normalize(m.group(0)) if m else None
                if name in have:
                    say({"status": "conflict", "package": name, "asked": req, "installed": have[name]})
                    return
            if "No solution found" in said:
                say({"status": "conflict", "package": None, "asked": None, "installed": None})
            else:
                say({"status": "failed"})
            return
        added = move_new(stage, site, have)
        say({"status": "installed", "added": added})
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


main()
