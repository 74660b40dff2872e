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
# The jail may be killed at any instant (its call's time ran out, or
# python.build_timeout did), so the site directory never depends on this
# program ending. What it keeps for that lives beside the site directory,
# in /workspace/.prims:
# - install.lock: one install into a session at a time. Each holds it
#   (flock, which the kernel drops when its holder dies) from before it
#   reads what the session has to its end. A call's requirements, a cell's
#   %pip and a new interpreter's %pip could otherwise overlap one that was
#   cut short.
# - installs/: each install stages in a directory of its own there. One
#   that finds another directory there holds the lock, so that directory's
#   install is dead: it undoes that install's last move (below) and
#   removes the directory.
# A distribution's files are moved first and its .dist-info last, with one
# rename, so metadata in the site directory always has its files (what has
# a .dist-info counts as installed: pins()). Before moving a distribution's
# files, an install writes those new to the site directory to JOURNAL in
# its staging directory; if the .dist-info never arrived, the next install,
# or the tidy run the supervisor starts right after a killed install,
# removes them again. So a kill leaves each distribution whole with its
# metadata, or gone.
#
# argv[1] is JSON: {"uv": [uv argv prefix], "requirements": [...],
# "site": the session's site directory, "venv_site": the environment's},
# or {"tidy": true, "site": ...} to only undo what a killed install left.
# The last line of stdout is "PRIMS-INSTALL " + JSON: {"status":
# "installed", "added": ["name==version"...]} | {"status": "conflict",
# "package": name or null, "asked": requirement or null, "installed":
# version or null} | {"status": "failed"} | {"status": "tidied"} |
# {"status": "busy"} (another install holds the lock, and tidies first).
import csv
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

JOURNAL = "moving.json"
DIST_INFO = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._]*)-([A-Za-z0-9][A-Za-z0-9.+!_]*)\.dist-info$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_PINS = 5000
MAX_JOURNAL_BYTES = 64 << 20


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


def lock(prims, wait):
    """Takes the session's install lock; with `wait` false, None when
    another install holds it. Held until this process ends."""
    os.makedirs(prims, exist_ok=True)
    # O_NONBLOCK: a FIFO planted there must not hang the open.
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(os.path.join(prims, "install.lock"), flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        if not wait:
            os.close(fd)
            return None
    print("waiting for another install into this session to end", flush=True)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def inside(site, rel):
    """`site`/`rel` for a relative path that stays in `site`, else None."""
    norm = os.path.normpath(rel) if isinstance(rel, str) and rel else ""
    if not norm or norm.startswith(("/", "..")) or norm == ".":
        return None
    return os.path.join(site, norm)


def undo(work, site):
    """Removes from `site` the files that the dead install staged in `work`
    was moving, if their distribution's .dist-info never arrived."""
    try:
        with open(os.path.join(work, JOURNAL), encoding="utf-8") as f:
            journal = json.loads(f.read(MAX_JOURNAL_BYTES))
        dist_info, paths = journal["dist_info"], journal["paths"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if not isinstance(dist_info, str) or not DIST_INFO.match(dist_info) or not isinstance(paths, list):
        return
    if os.path.lexists(os.path.join(site, dist_info)):
        return
    dirs = set()
    for rel in paths:
        dst = inside(site, rel)
        if dst is None or (os.path.isdir(dst) and not os.path.islink(dst)):
            continue
        try:
            os.unlink(dst)
        except OSError:
            pass
        # Its directory goes if empty, even when the file never came: an
        # empty directory imports as a namespace package.
        dirs.add(os.path.dirname(dst))
        if dst.endswith(".py"):
            # What importing it wrote, which would keep the directory.
            dirs.add(forget_bytecode(dst))
    # Directories the moves made, now empty; deepest first.
    for d in sorted(dirs, key=len, reverse=True):
        while d != site and d.startswith(site + os.sep):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)


def forget_bytecode(source):
    """Removes the bytecode of the module at `source`; returns the
    __pycache__ directory it was in."""
    cache = os.path.join(os.path.dirname(source), "__pycache__")
    stem = os.path.basename(source)[: -len(".py")] + "."
    try:
        names = os.listdir(cache)
    except OSError:
        names = []
    for name in names:
        if name.startswith(stem) and name.endswith(".pyc"):
            try:
                os.unlink(os.path.join(cache, name))
            except OSError:
                pass
    return cache


def tidy(prims, site):
    """With the lock held: undoes and removes what dead installs left."""
    installs = os.path.join(prims, "installs")
    try:
        left = os.listdir(installs)
    except OSError:
        left = []
    for entry in left:
        work = os.path.join(installs, entry)
        undo(work, site)
        shutil.rmtree(work, ignore_errors=True)
    # The one shared staging directory of earlier versions.
    shutil.rmtree(os.path.join(prims, "install"), ignore_errors=True)


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


def write_journal(work, dist_info, paths):
    """Says, before they move, which paths of `dist_info` are new to the
    site directory; written whole or not at all."""
    tmp = os.path.join(work, JOURNAL + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"dist_info": dist_info, "paths": paths}, f)
    os.replace(tmp, os.path.join(work, JOURNAL))


def move_new(work, stage, site, have):
    """Moves the distributions not in `have` into `site`, each one's files
    first and its .dist-info last."""
    added = []
    for entry in sorted(os.listdir(stage)):
        m = DIST_INFO.match(entry)
        if not m or normalize(m.group(1)) in have:
            continue
        files = []
        for rel in record_paths(os.path.join(stage, entry)):
            src = os.path.join(stage, rel)
            if rel.split(os.sep, 1)[0] == entry or os.path.islink(src) or not os.path.isfile(src):
                continue
            files.append(rel)
        write_journal(work, entry, [rel for rel in files if not os.path.lexists(os.path.join(site, rel))])
        for rel in files:
            dst = os.path.join(site, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(os.path.join(stage, rel), dst)
        dst = os.path.join(site, entry)
        if os.path.isdir(dst) and not os.path.islink(dst):
            # Metadata pins() did not read (past MAX_PINS): replaced.
            shutil.rmtree(dst, ignore_errors=True)
        elif os.path.lexists(dst):
            os.unlink(dst)
        os.rename(os.path.join(stage, entry), dst)
        added.append("%s==%s" % (m.group(1), m.group(2)))
    return added


def install(args):
    site, reqs = args["site"], args["requirements"]
    prims = os.path.dirname(site)
    lock(prims, wait=True)
    tidy(prims, site)
    installs = os.path.join(prims, "installs")
    os.makedirs(installs, exist_ok=True)
    os.makedirs(site, exist_ok=True)
    have = pins(args["venv_site"])
    for name, version in pins(site).items():
        have.setdefault(name, version)
    work = tempfile.mkdtemp(dir=installs)
    try:
        stage = os.path.join(work, "target")
        constraints = os.path.join(work, "constraints.txt")
        with open(constraints, "w") as f:
            for name, version in sorted(have.items()):
                f.write("%s==%s\n" % (name, version))
        env = dict(os.environ, UV_CACHE_DIR=os.path.join(work, "cache"))
        argv = args["uv"] + ["--target", stage, "--constraint", constraints, "--"] + reqs
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        said = proc.stdout.decode("utf-8", "replace")
        sys.stdout.write(said)
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
        added = move_new(work, stage, site, have)
        say({"status": "installed", "added": added})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    args = json.loads(sys.argv[1])
    if args.get("tidy"):
        site = args["site"]
        prims = os.path.dirname(site)
        if lock(prims, wait=False) is None:
            say({"status": "busy"})
            return
        tidy(prims, site)
        say({"status": "tidied"})
        return
    install(args)


main()
