#!/usr/bin/env bash
# Runs inside the Debian 12 VM of ../shared/vm (systemd, cgroup v2, Landlock
# ABI 2): `prims run` against the v2 backend, for real. Expects prims and
# prims-jailer next to this script. Prints one PASS/FAIL line per check.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
install -d /opt/prims
install -m 0755 "$here/prims" "$here/prims-jailer" /opt/prims/
work=$(mktemp -d)
fails=0

run() { # policy-text script-text [prims-run-flags...] -> JSON on stdout
  printf '%s\n' "$1" > "$work/policy.toml"
  printf '%s\n' "$2" > "$work/script.py"
  systemd-run --scope -q -p Delegate=yes /opt/prims/prims run --json "${@:3}" \
    --policy "$work/policy.toml" "$work/script.py"
}

check() { # name json python-expression-over-d
  if python3 -c "import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if ($3) else 1)" "$2"; then
    echo "PASS $1"
  else
    echo "FAIL $1: $2"; fails=$((fails+1))
  fi
}

echo "kernel $(uname -r), cgroup fs $(stat -fc %T /sys/fs/cgroup)"
j=$(run '' 'import os; print(os.getuid(), os.getpid())')
check v2_hello "$j" 'd["status"]=="ok" and d["stdout"]=="1000 2\n" and d["enforced"]["cgroup"]=="v2" and d["enforced"]["memory"]=="cgroup"'
check v2_landlock_degrades_to_partial "$j" 'd["enforced"]["landlock"]=="partial" and d["enforced"]["landlock_abi"]==2'
check v2_memory_peak_reported "$j" 'd["memory_peak_bytes"] and d["memory_peak_bytes"] > 1000000'

j=$(run $'[limits]\nmemory = "64MiB"' "b = b'\\1' * (256 << 20)")
check v2_memory_hog_is_oom "$j" 'd["status"]=="oom" and d["oom_killed"] is True'

j=$(run $'[limits]\npids = 16' $'import os, time\nn = 0\ntry:\n    for i in range(200):\n        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print("EAGAIN" if e.errno == 11 else e.errno, n)')
check v2_fork_loop_stops_at_pids_max "$j" 'd["status"]=="ok" and d["stdout"].startswith("EAGAIN") and int(d["stdout"].split()[1]) < 16'

j=$(run $'[limits]\nwall_time = "2s"' 'while True: pass')
check v2_busy_loop_times_out "$j" 'd["status"]=="timeout" and d["timeout_kind"]=="wall"'

j=$(run $'[limits]\ncpu_time = "1s"\nwall_time = "20s"' 'while True: pass')
check v2_cpu_limit_times_out "$j" 'd["status"]=="timeout" and d["timeout_kind"]=="cpu" and d["wall_ms"] < 10000'

# The jailer clones the jail as the job's host uid, which must own the
# jail's user namespace, while keeping CAP_SYS_ADMIN effective: Debian's
# kernel.unprivileged_userns_clone=0 must not stop it.
owner_policy=$'[identity]\nuid_base = 345678\nuid_count = 1'
old_clone=$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || true)
if [ -n "$old_clone" ]; then
  sysctl -q kernel.unprivileged_userns_clone=0
  j=$(run "$owner_policy" 'import os; print(os.getuid())')
  sysctl -q kernel.unprivileged_userns_clone="$old_clone"
  check v2_clone_with_unprivileged_userns_off "$j" 'd["status"]=="ok" and d["stdout"]=="1000\n"'
else
  echo "FAIL v2_clone_with_unprivileged_userns_off: this kernel has no kernel.unprivileged_userns_clone"
  fails=$((fails+1))
fi
mkdir -p "$work/ws"
printf '%s\n' "$owner_policy" > "$work/owner.toml"
printf '%s\n' 'import os, time  # prims-vm-owner-mark' 'open("ready", "w").close()' \
  'end = time.monotonic() + 30' \
  'while not os.path.exists("release") and time.monotonic() < end: time.sleep(0.01)' > "$work/hold.py"
systemd-run --scope -q -p Delegate=yes /opt/prims/prims run --json --policy "$work/owner.toml" \
  --workspace "$work/ws" "$work/hold.py" > "$work/hold.json" &
for _ in $(seq 1 600); do [ -e "$work/ws/ready" ] && break; sleep 0.05; done
pid=$(pgrep -f prims-vm-owner-mark | head -1)
owner=$(python3 -c 'import fcntl, os, struct, sys
fd = os.open("/proc/%s/ns/user" % sys.argv[1], os.O_RDONLY)
b = bytearray(4)
fcntl.ioctl(fd, 0xb704, b)  # NS_GET_OWNER_UID
print(struct.unpack("I", b)[0])' "$pid" 2>&1)
touch "$work/ws/release"
wait
check v2_userns_owned_by_host_uid "{\"owner\": \"$owner\", \"run\": $(cat "$work/hold.json")}" \
  'd["owner"]=="345678" and d["run"]["status"]=="ok"'

# Fork templates on v2: `prims run --live --forked` forks the one cell's
# interpreter from a template started for it, and fails rather than start
# it cold. The adopting jailer moves the child into its job cgroup by pid
# here (on v1 the child moves itself).
frun() { run "$1" "$2" --live --forked "${@:3}"; }
j=$(frun '' 'import os; print(os.getuid(), os.getpid())')
check v2_forked_hello "$j" 'd["status"]=="ok" and d["stdout"]=="1000 2\n" and d["enforced"]["cgroup"]=="v2"'
j=$(frun $'[limits]\nmemory = "64MiB"' "b = b'\\1' * (256 << 20)")
check v2_forked_memory_hog_is_oom "$j" 'd["status"]=="oom" and d["oom_killed"] is True'
j=$(frun $'[limits]\npids = 16' $'import os, time\nn = 0\ntry:\n    for i in range(200):\n        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print("EAGAIN" if e.errno == 11 else e.errno, n)')
check v2_forked_fork_loop_stops_at_pids_max "$j" 'd["status"]=="ok" and d["stdout"].startswith("EAGAIN") and int(d["stdout"].split()[1]) < 16'
# A fresh python forked in place of the first, in its jail, as a
# `fresh: true` call gets it: the namespace's next pid, its own pids.max.
j=$(frun '' 'import os; print(os.getuid(), os.getpid(), sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))' --in-place)
check v2_in_place_hello "$j" 'd["status"]=="ok" and d["stdout"]=="1000 3 [1, 3]\n" and d["enforced"]["cgroup"]=="v2"'
j=$(frun $'[limits]\npids = 16' $'import os, time\nn = 0\ntry:\n    for i in range(200):\n        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print("EAGAIN" if e.errno == 11 else e.errno, n)' --in-place)
check v2_in_place_fork_loop_stops_at_pids_max "$j" 'd["status"]=="ok" and d["stdout"].startswith("EAGAIN") and int(d["stdout"].split()[1]) < 16'
# Seen from the host: the child's python is the session's host uid with no
# capabilities, in a job cgroup of its own, not its template's; one forked
# in place runs at batch CPU weight (`cpu.weight` 10), as a fresh run does.
# A live cell is not on python's command line: it names itself instead.
printf '%s\n' 'import ctypes, os, time' 'ctypes.CDLL(None).prctl(15, b"prims-vm-fmark", 0, 0, 0)' \
  'open("ready", "w").close()' \
  'end = time.monotonic() + 30' \
  'while not os.path.exists("release") and time.monotonic() < end: time.sleep(0.01)' > "$work/fhold.py"
# host_facts MODE...: run fhold.py with `--live --forked MODE...` and print
# what the host sees of its python, with the run's own record.
host_facts() {
  local ws
  ws=$(mktemp -d "$work/fws.XXXX")
  chmod 755 "$ws"
  systemd-run --scope -q -p Delegate=yes /opt/prims/prims run --json --live --forked "$@" \
    --workspace "$ws" "$work/fhold.py" > "$ws.json" &
  for _ in $(seq 1 600); do [ -e "$ws/ready" ] && break; sleep 0.05; done
  local pid facts
  pid=$(pgrep -x prims-vm-fmark | head -1)
  facts=$(python3 - "$pid" <<'PY' 2>&1
import json, sys
def status(pid):
    return dict(l.split(":", 1) for l in open("/proc/%s/status" % pid).read().splitlines())
g = status(sys.argv[1])
k = status(g["PPid"].strip())
template = k["PPid"].strip()
cg = lambda pid: open("/proc/%s/cgroup" % pid).read().strip()
path = cg(sys.argv[1]).split("::", 1)[1]
job = path if "-py-" in path.rsplit("/", 1)[-1] else path.rsplit("/", 1)[0]
weight = open("/sys/fs/cgroup%s/cpu.weight" % job).read().strip()
print(json.dumps({"uid": g["Uid"].split(), "capeff": g["CapEff"].strip(),
                  "cgroup": cg(sys.argv[1]), "template_cgroup": cg(template),
                  "weight": weight}))
PY
)
  touch "$ws/release"
  wait
  echo "{\"facts\": $facts, \"run\": $(cat "$ws.json")}"
}
seen='d["run"]["status"]=="ok" and set(d["facts"]["uid"])=={str(d["run"]["host_uid"])} and int(d["facts"]["capeff"], 16)==0 and "-py-" in d["facts"]["cgroup"] and d["facts"]["cgroup"]!=d["facts"]["template_cgroup"]'
check v2_forked_child_seen_from_the_host "$(host_facts)" "$seen and d[\"facts\"][\"weight\"]==\"100\""
check v2_in_place_child_seen_from_the_host "$(host_facts --in-place)" "$seen and d[\"facts\"][\"weight\"]==\"10\""

left=$(find /sys/fs/cgroup -type d -name 'run-*' | wc -l)
if [ "$left" -eq 0 ]; then echo "PASS v2_no_job_cgroups_left"; else echo "FAIL v2_no_job_cgroups_left: $left"; fails=$((fails+1)); fi
echo "$fails failed"
exit $((fails > 0))
